#include "builder/lock/apt_repo.hpp"

#include "support/base/log.hpp"
#include "support/debian/apt_release.hpp"
#include "support/debian/openpgp.hpp"
#include "support/net/http.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <future>
#include <iterator>
#include <memory>
#include <optional>
#include <thread>

namespace lockstep::builder {

namespace {

// Appends `from` to `to`: the whole vector when `to` is empty, else its elements (an AptPackage is
// large to move one by one).
void append_packages(std::vector<AptPackage>& to, std::vector<AptPackage>&& from) {
  if (to.empty()) {
    to = std::move(from);
    return;
  }
  to.reserve(to.size() + from.size());
  std::move(from.begin(), from.end(), std::back_inserter(to));
  from.clear();
}

constexpr std::uint64_t k_max_release_size = 64ULL << 20;
constexpr std::uint64_t k_max_index_size = 512ULL << 20;    // compressed
constexpr std::uint64_t k_max_index_text_size = 1ULL << 30; // decompressed

struct ArchiveDeleter {
  void operator()(struct archive* a) const { archive_read_free(a); }
};

// The signed Release text of a repository: InRelease if it has one, else Release + Release.gpg.
struct SignedRelease {
  std::string text;
  std::string url; ///< where it came from (for messages)
};

// Limits for reading from `repo`: a local repository is read only inside its own directory (a
// symlink or a Filename leading out of it is refused before it is opened; support/net/http.hpp).
FetchOptions repo_fetch(const envspec::Repo& repo, std::uint64_t max_size) {
  FetchOptions options;
  options.max_size = max_size;
  if (Result<std::optional<std::filesystem::path>> local = local_url_path(repo.url); local && *local) {
    options.local_roots.push_back(**local);
  }
  return options;
}

Result<SignedRelease> fetch_release(const std::string& base, const envspec::Repo& repo) {
  const std::string inrelease_url = base + "/InRelease";
  Result<std::string> inrelease = http_get(inrelease_url, repo_fetch(repo, k_max_release_size));
  if (inrelease) {
    LS_TRY_ASSIGN(std::string text, verify_clearsigned(*inrelease, repo.keyring, inrelease_url));
    return SignedRelease{std::move(text), inrelease_url};
  }
  if (inrelease.error().code != ExitCode::external) {
    return inrelease.error();
  }
  const std::string release_url = base + "/Release";
  Result<std::string> release = http_get(release_url, repo_fetch(repo, k_max_release_size));
  if (!release) {
    return external_error("{} has no InRelease ({}) and no Release ({}); check the URL and suite",
                          repo.url_text, inrelease.error().message, release.error().message);
  }
  LS_TRY_ASSIGN(std::string signature, http_get(release_url + ".gpg", repo_fetch(repo, 1 << 20)));
  LS_TRY(verify_detached(*release, signature, repo.keyring, release_url));
  return SignedRelease{std::move(*release), release_url};
}

// The best index for `dir` ("main/binary-amd64/Packages") the Release lists: xz, then gz, then plain.
std::optional<std::pair<std::string, AptIndexEntry>> pick_index(const AptRelease& release,
                                                                const std::string& dir) {
  for (const char* ext : {".xz", ".gz", ".lz4", ".bz2", ""}) {
    const std::string path = dir + ext;
    auto it = release.sha256.find(path);
    if (it != release.sha256.end()) {
      return std::make_pair(path, it->second);
    }
  }
  return std::nullopt;
}

} // namespace

Result<std::string> decompress_index(const std::string& data, const std::string& name, std::uint64_t max_size,
                                     std::uint64_t size_hint) {
  std::unique_ptr<struct archive, ArchiveDeleter> a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_raw(a.get());
  archive_read_support_format_empty(a.get());
  if (archive_read_open_memory(a.get(), data.data(), data.size()) != ARCHIVE_OK) {
    return invalid_input("{}: can't decompress: {}", name, archive_error_string(a.get()));
  }
  struct archive_entry* entry = nullptr;
  int r = archive_read_next_header(a.get(), &entry);
  if (r == ARCHIVE_EOF) {
    return std::string();
  }
  if (r != ARCHIVE_OK) {
    return invalid_input("{}: can't decompress: {}", name, archive_error_string(a.get()));
  }
  // Read straight into the output, sized by the hint (one byte more, to see the end without a
  // reallocation), doubling past it.
  std::string out;
  std::size_t used = 0;
  out.resize(static_cast<std::size_t>(std::min(max_size, size_hint) + 1));
  for (;;) {
    if (used == out.size()) {
      if (used > max_size) {
        return invalid_input("{}: decompresses to more than {} bytes", name, max_size);
      }
      out.resize(static_cast<std::size_t>(
          std::min<std::uint64_t>(max_size + 1, std::max<std::uint64_t>(used * 2, 1 << 16))));
    }
    la_ssize_t n = archive_read_data(a.get(), out.data() + used, out.size() - used);
    if (n < 0) {
      return invalid_input("{}: can't decompress: {}", name, archive_error_string(a.get()));
    }
    if (n == 0) {
      break;
    }
    used += static_cast<std::size_t>(n);
    if (used > max_size) {
      return invalid_input("{}: decompresses to more than {} bytes", name, max_size);
    }
  }
  out.resize(used);
  return out;
}

namespace {

// One suite's Release as the lock records it, and the packages of its indexes.
struct LoadedSuite {
  envspec::LockedRepo::SuiteRelease release;
  std::vector<AptPackage> packages;
  std::size_t indexes = 0;
};

// Loads suite `suite` of `repo` (empty for a flat repository): verifies its Release, fetches the
// indexes of the spec's components for `arch` (by hash when it can), checks and parses them.
Result<LoadedSuite> load_suite(const envspec::Repo& repo, const std::string& suite, int index,
                               const std::string& arch, const BlobStore& store) {
  const std::string base = repo.flat ? repo.url : repo.url + "/dists/" + suite;
  LS_TRY_ASSIGN(SignedRelease signed_release, fetch_release(base, repo));
  LS_TRY_ASSIGN(AptRelease release, AptRelease::parse(signed_release.text, signed_release.url));
  if (!repo.flat && release.suite != suite && release.codename != suite) {
    return invalid_input(
        "{}: the Release is for suite '{}' (codename '{}'), not '{}' as the spec asks; a mirror "
        "serving another suite under this name is refused",
        signed_release.url, release.suite, release.codename, suite);
  }
  LoadedSuite out;
  out.release = {suite, release.date, sha256_of(signed_release.text).hex()};

  // Which indexes to read, as apt picks them: per component, the architecture's when the Release's
  // Architectures has it (apt skips a suite without it, saying so), and `all` only where the
  // Release lists `all` as an architecture of its own (Debian's archives list `all` packages in
  // each architecture's index: No-Support-for-Architecture-all, or no `all` in Architectures, as
  // the security archive has it even though its checksums name binary-all files).
  std::vector<std::string> dirs;
  if (repo.flat) {
    dirs.emplace_back("Packages");
  } else if (!release.supports_architecture(arch)) {
    log::warn(
        "{}: skipping the indexes of {}: its Release lists architectures {}, not {} (as apt skips them)",
        signed_release.url, suite, fmt::join(release.architectures, " "), arch);
  } else {
    for (const std::string& component : repo.components) {
      dirs.push_back(component + "/binary-" + arch + "/Packages");
      if (release.supports_architecture("all")) {
        dirs.push_back(component + "/binary-all/Packages");
      }
    }
  }
  std::vector<Download> downloads;
  std::vector<std::string> names;
  std::vector<std::uint64_t> text_sizes; // the uncompressed index's size, when the Release lists it
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    auto picked = pick_index(release, dirs[i]);
    if (!picked) {
      if (dirs[i].find("/binary-all/") != std::string::npos) {
        continue; // most repositories list `all` packages in each architecture's index
      }
      return invalid_input(
          "{}: the Release lists no {} index: the repository has no packages for {}{}", signed_release.url,
          dirs[i], arch,
          repo.flat ? "" : fmt::format(" in component '{}'", dirs[i].substr(0, dirs[i].find('/'))));
    }
    const auto& [path, entry] = *picked;
    // By hash where the Release offers it, falling back to the file's own name when the mirror
    // lacks the by-hash copy (404), as apt does; the same size and sha256 either way.
    Download d{base + "/" + path, entry.sha256, entry.size, path};
    if (release.acquire_by_hash) {
      d.fallback_urls.push_back(d.url);
      d.url = base + "/" + path.substr(0, path.rfind('/') + 1) + "by-hash/SHA256/" + entry.sha256.hex();
    }
    downloads.push_back(std::move(d));
    names.push_back(signed_release.url.substr(0, signed_release.url.rfind('/') + 1) + path);
    auto plain = release.sha256.find(dirs[i]);
    text_sizes.push_back(plain != release.sha256.end() ? plain->second.size : 0);
  }
  LS_TRY_ASSIGN(std::vector<BlobInfo> blobs, fetch_all(store, downloads, repo_fetch(repo, k_max_index_size)));
  // Each index decompressed and parsed on its own thread (xz is the most of it); joined in order.
  const auto read_index = [&](std::size_t i) -> Result<std::vector<AptPackage>> {
    LS_TRY_ASSIGN(std::string compressed, store.read(blobs[i].digest, k_max_index_size));
    log::Timer decompress_timer("decompress " + names[i]);
    LS_TRY_ASSIGN(std::string text,
                  decompress_index(compressed, names[i], k_max_index_text_size, text_sizes[i]));
    decompress_timer.stop();
    log::Timer parse_timer("parse " + names[i]);
    LS_TRY_ASSIGN(std::vector<AptPackage> packages, parse_packages_index(text, names[i], index));
    for (AptPackage& p : packages) {
      p.suite = suite;
    }
    return packages;
  };
  // As many at once as there are cores: a decompressed index can be a hundred megabytes.
  const std::size_t width = std::max(1U, std::thread::hardware_concurrency());
  std::vector<Result<std::vector<AptPackage>>> results;
  for (std::size_t at = 0; at < blobs.size(); at += width) {
    std::vector<std::future<Result<std::vector<AptPackage>>>> pending;
    for (std::size_t i = at + 1; i < std::min(blobs.size(), at + width); ++i) {
      pending.push_back(std::async(std::launch::async, read_index, i));
    }
    results.push_back(read_index(at));
    for (auto& f : pending) {
      results.push_back(f.get());
    }
  }
  for (Result<std::vector<AptPackage>>& r : results) {
    if (!r) {
      return r.error();
    }
    append_packages(out.packages, std::move(*r));
  }
  out.indexes = blobs.size();
  return out;
}

} // namespace

Result<AptRepoIndex> load_apt_repo(const envspec::Repo& repo, int index, const std::string& arch,
                                   const BlobStore& store) {
  AptRepoIndex out;
  out.locked.kind = "apt";
  out.locked.url = repo.url;
  out.locked.components = repo.components;
  out.pool_url = repo.url;
  // Every suite of the entry, each verified on its own; they share the entry's priority, so the
  // highest version among them wins (phased updates are candidates like any other version).
  const std::vector<std::string> suites = repo.flat              ? std::vector<std::string>{std::string()}
                                          : !repo.suites.empty() ? repo.suites
                                                                 : std::vector<std::string>{repo.suite};
  for (const std::string& suite : suites) {
    LS_TRY_ASSIGN(LoadedSuite one, load_suite(repo, suite, index, arch, store));
    log::debug("{} {}: {} packages from {} index(es)", repo.url_text, suite, one.packages.size(),
               one.indexes);
    if (suites.size() > 1) {
      out.locked.suites.push_back(one.release);
    } else {
      out.locked.suite = suite;
      out.locked.release_date = one.release.release_date;
      out.locked.release_sha256 = one.release.release_sha256;
    }
    append_packages(out.packages, std::move(one.packages));
  }
  return out;
}

} // namespace lockstep::builder
