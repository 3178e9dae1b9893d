// Git sources: resolving revisions to commits and the per-URL mirror cache (see git_source.hpp and
// docs/git-sources.md); git_export.cpp writes a commit's tree into a layer.
#include "builder/lock/git_source.hpp"

#include "builder/lock/git_repo.hpp"
#include "support/base/interrupt.hpp"
#include "support/base/text.hpp"
#include "support/codec/digest.hpp"
#include "support/git/libgit.hpp"
#include "support/net/mirror.hpp"
#include "support/system/fs.hpp"

#include <fmt/ranges.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

// Bounds on hostile input (URLs and revisions from specs, trees from any server).
constexpr std::size_t k_max_url_length = 4096;
constexpr std::size_t k_max_rev_length = 255;
constexpr std::size_t k_max_listed_refs = 8;

// Where fetches land in the cache: one scratch ref (resolved right after the fetch, under the
// lock) and one ref per commit handed out, so `git gc` by hand keeps what locks point to.
constexpr const char* k_fetch_ref = "refs/lockstep/fetch";
constexpr const char* k_commit_refs = "refs/lockstep/commits/";

// libgit2, set up for fetching into the cache: new objects and refs are fsynced, so a crash
// never leaves a cache that claims a commit whose objects are lost.
} // namespace

Result<const LibGit*> load_libgit() {
  const LibGit* git = libgit();
  if (git == nullptr) {
    return external_error(
        "can't load libgit2, which git sources need ({}); install libgit2 (Debian: libgit2-1.5)",
        libgit_load_error());
  }
  static std::once_flag configured;
  std::call_once(configured, [git] { git->git_libgit2_opts(GIT_OPT_ENABLE_FSYNC_GITDIR, 1); });
  return git;
}

// The URL as messages show it: without credentials.
std::string shown(const std::string& url) {
  return strip_url_credentials(url);
}

namespace {

// `message` (from libgit2, which may quote the URL) with the URL's "user:password@" removed.
std::string redacted(std::string message, const std::string& url) {
  const auto scheme = url.find("://");
  const auto at = scheme == std::string::npos ? std::string::npos : url.find('@', scheme + 3);
  const auto slash = scheme == std::string::npos ? std::string::npos : url.find('/', scheme + 3);
  if (at == std::string::npos || (slash != std::string::npos && slash < at)) {
    return message;
  }
  const std::string userinfo = url.substr(scheme + 3, at - scheme - 2); // "user:password@"
  for (auto pos = message.find(userinfo); pos != std::string::npos; pos = message.find(userinfo, pos)) {
    message.erase(pos, userinfo.size());
  }
  return message;
}

} // namespace

Result<void> validate_url(const std::string& url) {
  if (url.empty()) {
    return invalid_input("a git URL is empty");
  }
  if (url.size() > k_max_url_length) {
    return invalid_input("a git URL is {} bytes long; at most {} are allowed", url.size(), k_max_url_length);
  }
  for (char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return invalid_input("git URL '{}' contains a control character", shown(url));
    }
  }
  if (url.front() == '/') {
    return {};
  }
  for (const char* scheme : {"file://", "http://", "https://", "git://"}) {
    if (url.starts_with(scheme) && url.size() > std::strlen(scheme)) {
      return {};
    }
  }
  if (url.starts_with("ssh://") || url.find('@') != std::string::npos) {
    return invalid_input("git URL '{}': ssh is not supported (lockstep passes no credentials to git); use an "
                         "https:// or git:// URL",
                         shown(url));
  }
  return invalid_input(
      "'{}' is not a supported git URL: use an absolute path, file://, http://, https:// or git://",
      shown(url));
}

// A full commit id, lowercased; anything else is refused.
Result<std::string> validate_commit(const std::string& commit, const std::string& url) {
  if (!is_full_commit_id(commit)) {
    return invalid_input("'{}' is not a full commit id (40 hex digits) of {}", commit, shown(url));
  }
  return ascii_lower(commit);
}

// A revision: a full commit id (lowercased) or a valid ref name (short or "refs/...").
namespace {

Result<std::string> validate_rev(const LibGit& git, const std::string& rev, const std::string& url) {
  if (rev.empty()) {
    return invalid_input("the revision of {} is empty: give a tag, a branch or a full 40-hex commit id",
                         shown(url));
  }
  if (rev.size() > k_max_rev_length) {
    return invalid_input("the revision of {} is {} bytes long; at most {} are allowed", shown(url),
                         rev.size(), k_max_rev_length);
  }
  if (is_full_commit_id(rev)) {
    return ascii_lower(rev);
  }
  const std::string name = rev.starts_with("refs/") ? rev : "refs/heads/" + rev;
  int valid = 0;
  if (git.git_reference_name_is_valid(&valid, name.c_str()) != 0 || valid == 0 || rev.starts_with("-")) {
    return invalid_input(
        "'{}' is not a valid git revision of {}: give a tag, a branch or a full 40-hex commit id", rev,
        shown(url));
  }
  return rev;
}

} // namespace

Result<Repo> open_repo(const LibGit& git, const fs::path& dir) {
  git_repository* raw = nullptr;
  if (git.git_repository_open_bare(&raw, dir.c_str()) != 0) {
    return io_error("can't open the git cache {}: {} (remove it to fetch again)", dir.string(),
                    git.last_error());
  }
  return Repo(raw, git.git_repository_free);
}

namespace {

// Opens the cache for `url`, creating it when missing. The caller holds the cache's lock, so the
// existence check and the rename don't race; the rename makes a half-initialised cache invisible.
Result<Repo> open_or_create_cache(const LibGit& git, const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    LS_TRY_ASSIGN(TempDir staged, TempDir::create(dir.parent_path(), ".tmp-" + dir.stem().string() + "-"));
    git_repository* raw = nullptr;
    if (git.git_repository_init(&raw, staged.path().c_str(), 1) != 0) {
      return io_error("can't create a git cache in {}: {}", staged.path().string(), git.last_error());
    }
    git.git_repository_free(raw);
    if (::rename(staged.path().c_str(), dir.c_str()) != 0) {
      return errno_error("can't rename " + staged.path().string() + " to " + dir.string(), errno);
    }
    staged.release();
    LS_TRY(fsync_dir(dir.parent_path()));
  }
  return open_repo(git, dir);
}

} // namespace

Result<git_oid> parse_oid(const LibGit& git, const std::string& hex) {
  git_oid oid{};
  if (git.git_oid_fromstrn(&oid, hex.data(), hex.size()) != 0) {
    return internal_error("can't parse commit id {}: {}", hex, git.last_error());
  }
  return oid;
}

namespace {

// What the cache knows about `oid`.
enum class CacheHas { nothing, commit, other };

CacheHas cache_has(const LibGit& git, git_repository* repo, const git_oid& oid,
                   std::string* type_name = nullptr) {
  git_odb* raw = nullptr;
  if (git.git_repository_odb(&raw, repo) != 0) {
    return CacheHas::nothing;
  }
  GitPtr<git_odb> odb(raw, git.git_odb_free);
  std::size_t size = 0;
  git_object_t type = GIT_OBJECT_INVALID;
  if (git.git_odb_read_header(&size, &type, odb.get(), &oid) != 0) {
    return CacheHas::nothing;
  }
  if (type_name != nullptr) {
    *type_name = git.git_object_type2string(type);
  }
  return type == GIT_OBJECT_COMMIT ? CacheHas::commit : CacheHas::other;
}

// Points refs/lockstep/commits/<id> at `oid`, so the commit stays reachable in the cache.
Result<void> keep_commit(const LibGit& git, git_repository* repo, const git_oid& oid) {
  const std::string name = k_commit_refs + oid_hex(git, oid);
  git_reference* ref = nullptr;
  if (git.git_reference_create(&ref, repo, name.c_str(), &oid, 1, "lockstep") != 0) {
    return io_error("can't write {} in the git cache: {}", name, git.last_error());
  }
  git.git_reference_free(ref);
  return {};
}

// One advertised ref of the remote.
struct RemoteRef {
  std::string name; ///< "refs/tags/v1", "refs/tags/v1^{}" (peeled), "HEAD", ...
  std::string oid;
};

// Shared with libgit2's callbacks: the progress line and the bytes it has been advanced by.
struct TransferState {
  log::Progress* progress = nullptr;
  std::uint64_t bytes = 0;
};

int on_transfer(const git_indexer_progress* stats, void* payload) {
  auto* state = static_cast<TransferState*>(payload);
  if (state->progress != nullptr && stats->received_bytes > state->bytes) {
    state->progress->advance(stats->received_bytes - state->bytes);
    state->bytes = stats->received_bytes;
  }
  return interrupted() ? -1 : 0; // a non-zero return aborts the transfer
}

int on_sideband(const char* /*text*/, int /*length*/, void* /*payload*/) {
  return interrupted() ? -1 : 0;
}

// A connection to the remote for one resolve or ensure: its advertised refs, and fetches into the
// cache (which reconnect after the first one closes the connection).
class RemoteSession {
public:
  static Result<std::unique_ptr<RemoteSession>> connect(const LibGit& git, git_repository* repo,
                                                        const std::string& url, log::Progress& progress) {
    auto session = std::unique_ptr<RemoteSession>(new RemoteSession(git, url));
    session->m_state.progress = &progress;
    git_remote* raw = nullptr;
    if (git.git_remote_create_anonymous(&raw, repo, url.c_str()) != 0) {
      return invalid_input("can't use git URL {}: {}", shown(url), redacted(git.last_error(), url));
    }
    session->m_remote.reset(raw);
    git_remote_callbacks callbacks = session->callbacks();
    git_proxy_options proxy = proxy_options(git);
    if (git.git_remote_connect(raw, GIT_DIRECTION_FETCH, &callbacks, &proxy, nullptr) != 0) {
      return session->failure("can't connect to");
    }
    const git_remote_head** heads = nullptr;
    std::size_t count = 0;
    if (git.git_remote_ls(&heads, &count, raw) != 0) {
      return session->failure("can't list the refs of");
    }
    for (std::size_t i = 0; i < count; ++i) {
      session->m_refs.push_back(RemoteRef{heads[i]->name, oid_hex(git, heads[i]->oid)});
    }
    return session;
  }

  [[nodiscard]] const std::vector<RemoteRef>& refs() const { return m_refs; }

  [[nodiscard]] bool has_ref(const std::string& name) const {
    return std::any_of(m_refs.begin(), m_refs.end(), [&](const RemoteRef& r) { return r.name == name; });
  }

  // Fetches `refspecs` ("+SRC:DST") into the cache.
  Result<void> fetch(const std::vector<std::string>& refspecs, const std::string& what) {
    std::vector<char*> strings;
    strings.reserve(refspecs.size());
    for (const auto& r : refspecs) {
      strings.push_back(const_cast<char*>(r.c_str())); // NOLINT(cppcoreguidelines-pro-type-const-cast)
    }
    git_strarray array{strings.data(), strings.size()};
    git_fetch_options opts{};
    m_git.git_fetch_options_init(&opts, GIT_FETCH_OPTIONS_VERSION);
    opts.callbacks = callbacks();
    opts.prune = GIT_FETCH_NO_PRUNE;
    opts.update_fetchhead = 0;
    opts.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
    opts.proxy_opts = proxy_options(m_git);
    m_state.bytes = 0;
    log::debug("git fetch {} {}", shown(m_url), fmt::join(refspecs, " "));
    if (m_git.git_remote_fetch(m_remote.get(), &array, &opts, "lockstep fetch") != 0) {
      return failure("can't fetch " + what + " from");
    }
    return {};
  }

private:
  RemoteSession(const LibGit& git, std::string url)
      : m_git(git), m_url(std::move(url)), m_remote(nullptr, git.git_remote_free) {}

  git_remote_callbacks callbacks() {
    git_remote_callbacks cb{};
    m_git.git_remote_init_callbacks(&cb, GIT_REMOTE_CALLBACKS_VERSION);
    cb.transfer_progress = on_transfer;
    cb.sideband_progress = on_sideband;
    cb.payload = &m_state;
    return cb;
  }

  // Proxies as git finds them: http.proxy, then $https_proxy / $http_proxy (and $no_proxy).
  static git_proxy_options proxy_options(const LibGit& git) {
    git_proxy_options proxy{};
    git.git_proxy_options_init(&proxy, GIT_PROXY_OPTIONS_VERSION);
    proxy.type = GIT_PROXY_AUTO;
    return proxy;
  }

  // The error for a failed libgit2 call: interrupted, or the server/transport's message.
  Error failure(const std::string& what) const {
    if (interrupted()) {
      return check_interrupted().error();
    }
    return external_error("{} {}: {}", what, shown(m_url), redacted(m_git.last_error(), m_url));
  }

  const LibGit& m_git;
  std::string m_url;
  GitPtr<git_remote> m_remote;
  TransferState m_state;
  std::vector<RemoteRef> m_refs;
};

// "a, b, c and 4 more" (at most k_max_listed_refs names), or "none".
std::string list_names(const std::vector<std::string>& names) {
  if (names.empty()) {
    return "none";
  }
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < k_max_listed_refs; ++i) {
    out += (i == 0 ? "" : ", ") + names[i];
  }
  if (names.size() > k_max_listed_refs) {
    out += fmt::format(" and {} more", names.size() - k_max_listed_refs);
  }
  return out;
}

// The advertised ref `rev` names: itself when it starts with "refs/", else refs/tags/REV before
// refs/heads/REV (git's order). Unknown names are explained with the tags and branches there are.
Result<std::string> match_rev(const RemoteSession& remote, const std::string& rev, const std::string& url) {
  if (rev.starts_with("refs/")) {
    if (remote.has_ref(rev)) {
      return rev;
    }
  } else {
    const std::string tag = "refs/tags/" + rev;
    const std::string branch = "refs/heads/" + rev;
    const bool is_tag = remote.has_ref(tag);
    if (is_tag && remote.has_ref(branch)) {
      log::warn("'{}' is both a tag and a branch of {}; using the tag (write refs/heads/{} for the branch)",
                rev, shown(url), rev);
    }
    if (is_tag) {
      return tag;
    }
    if (remote.has_ref(branch)) {
      return branch;
    }
  }
  if (is_hex(rev) && rev.size() >= 4 && rev.size() < 40) {
    return invalid_input(
        "'{}' looks like an abbreviated commit id, and {} has no tag or branch of that name: "
        "give the full 40-hex commit id or a tag",
        rev, shown(url));
  }
  std::vector<std::string> tags;
  std::vector<std::string> branches;
  for (const auto& r : remote.refs()) {
    if (r.name.starts_with("refs/tags/") && r.name.find("^{}") == std::string::npos) {
      tags.push_back(r.name.substr(10));
    } else if (r.name.starts_with("refs/heads/")) {
      branches.push_back(r.name.substr(11));
    }
  }
  std::sort(tags.begin(), tags.end());
  std::sort(branches.begin(), branches.end());
  return invalid_input("unknown revision '{}' of {} (tags: {}; branches: {}): give a tag, a branch or a full "
                       "40-hex commit id",
                       rev, shown(url), list_names(tags), list_names(branches));
}

// The commit the cache's ref `ref` points to, through annotated tags.
Result<git_oid> peel_to_commit(const LibGit& git, git_repository* repo, const char* ref,
                               const std::string& rev, const std::string& url) {
  git_oid oid{};
  if (git.git_reference_name_to_id(&oid, repo, ref) != 0) {
    return io_error("can't read {} in the git cache of {}: {}", ref, shown(url), git.last_error());
  }
  git_object* raw = nullptr;
  if (git.git_object_lookup(&raw, repo, &oid, GIT_OBJECT_ANY) != 0) {
    return io_error("can't read object {} in the git cache of {}: {}", oid_hex(git, oid), shown(url),
                    git.last_error());
  }
  GitPtr<git_object> object(raw, git.git_object_free);
  git_object* peeled_raw = nullptr;
  if (git.git_object_peel(&peeled_raw, object.get(), GIT_OBJECT_COMMIT) != 0) {
    return invalid_input("'{}' of {} names a {}, not a commit", rev, shown(url),
                         git.git_object_type2string(git.git_object_type(object.get())));
  }
  GitPtr<git_object> peeled(peeled_raw, git.git_object_free);
  return *git.git_object_id(peeled.get());
}

// The cache of `url`, locked and opened (created if missing).
struct LockedCache {
  UniqueFd lock; // closing it releases the lock
  Repo repo;
};

Result<LockedCache> lock_cache(const LibGit& git, const fs::path& store_root, const std::string& url) {
  const fs::path dir = git_cache_dir(store_root, url);
  LS_TRY(make_dirs(dir.parent_path()));
  fs::path lock_path = dir;
  lock_path.replace_extension(".lock");
  LS_TRY_ASSIGN(
      UniqueFd lock,
      lock_file_exclusive(lock_path, 0644, "waiting for another lockstep process fetching " + shown(url)));
  LS_TRY_ASSIGN(Repo repo, open_or_create_cache(git, dir));
  return LockedCache{std::move(lock), std::move(repo)};
}

// True when the cache of `url` already holds `oid` as a commit (no lock: objects are immutable and
// published by rename). Another object type there is an error.
Result<bool> cached_commit(const LibGit& git, const fs::path& store_root, const std::string& url,
                           const git_oid& oid) {
  const fs::path dir = git_cache_dir(store_root, url);
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    return false;
  }
  LS_TRY_ASSIGN(Repo repo, open_repo(git, dir));
  std::string type;
  switch (cache_has(git, repo.get(), oid, &type)) {
  case CacheHas::commit:
    return true;
  case CacheHas::other:
    return invalid_input("{} of {} is a {}, not a commit", oid_hex(git, oid), shown(url), type);
  case CacheHas::nothing:
    break;
  }
  return false;
}

} // namespace

bool is_full_commit_id(std::string_view rev) {
  return rev.size() == 40 && is_hex(rev);
}

fs::path git_cache_dir(const fs::path& store_root, const std::string& url) {
  return store_root / "git" / (sha256_of(strip_url_credentials(url)).hex() + ".git");
}

Result<void> ensure_git_commit(const fs::path& store_root, const std::string& url,
                               const std::string& commit_in, const std::string& rev_hint) {
  LS_TRY_ASSIGN(const LibGit* git, load_libgit());
  LS_TRY(validate_url(url));
  LS_TRY_ASSIGN(const std::string commit, validate_commit(commit_in, url));
  if (!rev_hint.empty()) {
    LS_TRY(validate_rev(*git, rev_hint, url));
  }
  LS_TRY_ASSIGN(const git_oid oid, parse_oid(*git, commit));
  LS_TRY_ASSIGN(bool cached, cached_commit(*git, store_root, url, oid));
  if (cached) {
    return {};
  }
  LS_TRY_ASSIGN(LockedCache cache, lock_cache(*git, store_root, url));
  git_repository* repo = cache.repo.get();
  auto found = [&]() -> Result<bool> {
    std::string type;
    switch (cache_has(*git, repo, oid, &type)) {
    case CacheHas::commit:
      LS_TRY(keep_commit(*git, repo, oid));
      return true;
    case CacheHas::other:
      return invalid_input("{} of {} is a {}, not a commit", commit, shown(url), type);
    case CacheHas::nothing:
      break;
    }
    return false;
  };
  LS_TRY_ASSIGN(bool present, found()); // another process may have fetched it while we waited
  if (present) {
    return {};
  }
  if (default_mirrors().offline) {
    return Error{
        ExitCode::check_failed,
        fmt::format("offline: commit {} of {} is not in the store's git cache and no mirror has its "
                    "tree export; vendor the lock where it is online (`lockstep vendor --to DIR`) and "
                    "build with --mirror DIR, or drop --offline",
                    commit.substr(0, 12), shown(url))};
  }
  log::Progress progress("fetching " + shown(url), 0);
  LS_TRY_ASSIGN(auto remote, RemoteSession::connect(*git, repo, url, progress));
  // 1. The revision the lock was made from: the usual case, and cheap.
  if (!rev_hint.empty() && !is_full_commit_id(rev_hint)) {
    for (const std::string& ref : {rev_hint, "refs/tags/" + rev_hint, "refs/heads/" + rev_hint}) {
      if (remote->has_ref(ref)) {
        LS_TRY(remote->fetch({"+" + ref + ":" + k_fetch_ref}, ref));
        LS_TRY_ASSIGN(present, found());
        break;
      }
    }
  }
  // 2. The commit by id, which servers with uploadpack.allowReachableSHA1InWant (GitHub, GitLab)
  //    serve; others refuse, which is not an error yet.
  if (!present) {
    auto by_id = remote->fetch({"+" + commit + ":" + k_commit_refs + commit}, "commit " + commit);
    if (!by_id && by_id.error().code == ExitCode::interrupted) {
      return std::move(by_id).error();
    }
    if (!by_id) {
      log::debug("{} (fetching every branch and tag instead)", by_id.error().message);
    }
    LS_TRY_ASSIGN(present, found());
  }
  // 3. Every branch and tag.
  if (!present) {
    LS_TRY(remote->fetch({"+refs/heads/*:refs/lockstep/heads/*", "+refs/tags/*:refs/lockstep/tags/*"},
                         "every branch and tag"));
    LS_TRY_ASSIGN(present, found());
  }
  progress.done();
  if (!present) {
    return invalid_input(
        "commit {} is on no branch or tag of {} (was it force-pushed away?): lock the source "
        "again or give a revision that exists",
        commit, shown(url));
  }
  return {};
}

Result<std::string> resolve_git_rev(const fs::path& store_root, const std::string& url,
                                    const std::string& rev_in) {
  LS_TRY_ASSIGN(const LibGit* git, load_libgit());
  LS_TRY(validate_url(url));
  LS_TRY_ASSIGN(const std::string rev, validate_rev(*git, rev_in, url));
  if (is_full_commit_id(rev)) {
    LS_TRY(ensure_git_commit(store_root, url, rev));
    return rev;
  }
  LS_TRY_ASSIGN(LockedCache cache, lock_cache(*git, store_root, url));
  log::Progress progress("fetching " + shown(url), 0);
  LS_TRY_ASSIGN(auto remote, RemoteSession::connect(*git, cache.repo.get(), url, progress));
  LS_TRY_ASSIGN(const std::string ref, match_rev(*remote, rev, url));
  LS_TRY(remote->fetch({"+" + ref + ":" + k_fetch_ref}, ref));
  progress.done();
  LS_TRY_ASSIGN(const git_oid commit, peel_to_commit(*git, cache.repo.get(), k_fetch_ref, rev, url));
  LS_TRY(keep_commit(*git, cache.repo.get(), commit));
  return oid_hex(*git, commit);
}

Result<bool> git_commit_cached(const fs::path& store_root, const std::string& url,
                               const std::string& commit_in) {
  LS_TRY_ASSIGN(const LibGit* git, load_libgit());
  LS_TRY(validate_url(url));
  LS_TRY_ASSIGN(const std::string commit, validate_commit(commit_in, url));
  LS_TRY_ASSIGN(const git_oid oid, parse_oid(*git, commit));
  return cached_commit(*git, store_root, url, oid);
}

} // namespace lockstep::builder
