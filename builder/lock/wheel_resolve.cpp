// Resolving Python requirements with PubGrub: see wheel_resolve.hpp and docs/python-resolver.md.
#include "builder/lock/wheel_resolve.hpp"

#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/net/http.hpp"
#include "support/net/http_cache.hpp"
#include "support/python/wheel_archive.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <regex>
#include <string_view>
#include <thread>
#include <unordered_map>

namespace lockstep::builder {

namespace {

constexpr std::uint64_t k_max_page = 64ULL << 20;
constexpr std::uint64_t k_max_metadata = 16ULL << 20;
constexpr std::uint64_t k_max_metadata_set = 256ULL << 20;
constexpr std::uint64_t k_max_wheel = 16ULL << 30;
constexpr const char* k_metadata_ns = "wheel-metadata";
// One record per solution: the METADATA headers of all its wheels, so that a re-lock reads one
// file instead of one per wheel. Keyed by the sorted sha256s of the wheels.
constexpr const char* k_metadata_set_ns = "wheel-metadata-sets";
constexpr std::string_view k_metadata_set_magic = "lockstep-metadata-set 1\n";

/// The key of the metadata set of wheels with these sha256s.
std::string metadata_set_key(std::vector<std::string> sha256s) {
  std::sort(sha256s.begin(), sha256s.end());
  std::string all;
  for (const std::string& s : sha256s) {
    all += s + "\n";
  }
  return sha256_of(all).hex();
}

/// A metadata set's entries by wheel sha256; empty when the record is malformed.
std::unordered_map<std::string, std::string> parse_metadata_set(std::string_view text) {
  std::unordered_map<std::string, std::string> out;
  if (!text.starts_with(k_metadata_set_magic)) {
    return out;
  }
  text.remove_prefix(k_metadata_set_magic.size());
  while (!text.empty()) {
    // "<sha256> <length>\n<length bytes>"
    const std::size_t nl = text.find('\n');
    if (nl == std::string_view::npos || nl < 66 || text[64] != ' ') {
      return {};
    }
    std::size_t length = 0;
    const std::string_view digits = text.substr(65, nl - 65);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), length);
    if (ec != std::errc() || end != digits.data() + digits.size() || length > text.size() - nl - 1) {
      return {};
    }
    out.emplace(std::string(text.substr(0, 64)), std::string(text.substr(nl + 1, length)));
    text.remove_prefix(nl + 1 + length);
  }
  return out;
}

/// METADATA up to its body (the description): what the resolver reads of it.
std::string_view metadata_headers(std::string_view text) {
  for (const std::string_view line : text_lines(text)) {
    if (line.empty() || line == "\r") {
      return text.substr(0, static_cast<std::size_t>(line.data() - text.data()));
    }
  }
  return text;
}
// PEP 691: ask for JSON (it carries file sizes), accept the HTML forms.
constexpr const char* k_accept = "Accept: application/vnd.pypi.simple.v1+json, "
                                 "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1";
// Index pages and metadata fetched at once, ahead of the solver.
constexpr std::size_t k_fetch_slots = 16;

std::string repo_label(const envspec::Spec& spec, int i) {
  const envspec::Repo& r = spec.repos[static_cast<std::size_t>(i)];
  return fmt::format("repos[{}] ({})", i, r.kind == envspec::Repo::Kind::wheels ? r.dir_text : r.url_text);
}

/// One version of a project that may be chosen: its best file for the target, or the base image's
/// installed copy.
struct Candidate {
  PyVersion version;
  IndexFile file;                 ///< empty filename: only installed in the base image
  std::optional<WheelName> wheel; ///< of `file`
  bool yanked = false;
  bool installed = false; ///< the base image has this version
};

/// What the repositories offer of one project.
struct Universe {
  int repo = -1;                     ///< the first repository that has it; -1: none
  std::vector<Candidate> candidates; ///< ascending by version
  std::vector<std::string> looked;   ///< the repositories asked, for messages
  /// Files of the project that can't be installed here, for messages ("x-1.0.tar.gz (an sdist)").
  std::vector<std::string> unusable;
  std::string fixed_by; ///< the Debian package that installs it (then its only candidate), or ""
};

/// The files of a project in each repository; wheelhouses are scanned once.
class RepoReader {
public:
  explicit RepoReader(const ResolveContext& c) : m_c(c) {}

  Result<std::vector<IndexFile>> files(int i, const std::string& project) {
    const envspec::Spec& spec = *m_c.spec;
    const envspec::Repo& repo = spec.repos[static_cast<std::size_t>(i)];
    if (repo.kind == envspec::Repo::Kind::wheels) {
      std::lock_guard lock(m_mutex);
      auto it = m_wheelhouses.find(i);
      if (it == m_wheelhouses.end()) {
        log::info("reading wheelhouse {}", repo.dir_text);
        LS_TRY_ASSIGN(std::vector<IndexFile> all, scan_wheelhouse(repo.dir, m_c.local_roots));
        std::multimap<std::string, IndexFile> by_project;
        for (IndexFile& f : all) {
          auto name = WheelName::parse(f.filename);
          if (!name) {
            log::warn("{}: skipping {}: {}", repo_label(spec, i), f.filename, name.error().message);
            continue;
          }
          by_project.emplace(name->project, std::move(f));
        }
        it = m_wheelhouses.emplace(i, std::move(by_project)).first;
      }
      std::vector<IndexFile> out;
      for (auto [f, end] = it->second.equal_range(project); f != end; ++f) {
        out.push_back(f->second);
      }
      return out;
    }
    std::string url = repo.url + "/" + project + "/";
    if (url.rfind("file:", 0) == 0) {
      url += "index.html"; // a directory index on disk, as pip reads one
    }
    log::debug("reading {}", url);
    FetchOptions fo;
    fo.max_size = k_max_page;
    fo.headers.emplace_back(k_accept);
    fo.local_roots = m_c.local_roots;
    CacheUse use = CacheUse::fetched;
    Result<std::string> body = cached_get(*m_c.store, url, fo, m_c.refresh_pages, &use, &m_writes);
    if (use == CacheUse::reused) {
      ++m_cached;
    }
    if (!body) {
      if (body.error().message.find(": not found") != std::string::npos) {
        return std::vector<IndexFile>{};
      }
      return body.error().with_context(repo_label(spec, i));
    }
    const std::size_t first = body->find_first_not_of(" \t\r\n");
    const bool is_json = first != std::string::npos && (*body)[first] == '{';
    auto files = parse_project_page(*body, is_json ? k_simple_json_type : std::string_view("text/html"), url);
    if (!files) {
      return files.error().with_context(repo_label(spec, i));
    }
    return files;
  }

  [[nodiscard]] std::size_t pages_cached() const { return m_cached; }
  /// Where the resolver's cache records go (written on a thread of their own).
  BlobStore::RecordQueue& writes() { return m_writes; }

private:
  const ResolveContext& m_c;
  BlobStore::RecordQueue m_writes{*m_c.store};
  std::atomic<std::size_t> m_cached{0};
  std::mutex m_mutex;
  std::map<int, std::multimap<std::string, IndexFile>> m_wheelhouses; // project -> files
};

/// The version of an sdist file name ("name-1.0.tar.gz"), for messages.
std::optional<PyVersion> sdist_version(const std::string& filename) {
  static const std::regex sdist_re(R"(.*-([0-9][A-Za-z0-9.!+_-]*)\.(tar\.gz|zip|tar\.bz2|tgz))");
  std::smatch m;
  if (std::regex_match(filename, m, sdist_re)) {
    if (auto v = PyVersion::parse(m[1].str())) {
      return *v;
    }
  }
  return std::nullopt;
}

/// The candidates among `files`: per version, the file pip would install (not yanked if it can,
/// the best tag, the highest build number, then the name).
void add_candidates(const ResolveContext& c, const std::string& project, const std::set<std::string>& hashes,
                    const std::vector<IndexFile>& files, Universe& u) {
  struct Option {
    const IndexFile* file;
    WheelName name;
    std::size_t rank;
  };
  std::map<PyVersion, std::vector<Option>> by_version;
  for (const IndexFile& f : files) {
    if (!hashes.empty() && hashes.count(f.sha256) == 0) {
      // Hash-checking mode: not a file the requirements file lists.
      u.unusable.push_back(f.filename + " (its sha256 is not one of the requirement's --hash values)");
      continue;
    }
    const bool is_wheel = f.filename.size() > 4 && f.filename.ends_with(".whl");
    if (!is_wheel) {
      if (sdist_version(f.filename)) {
        u.unusable.push_back(f.filename + " (an sdist)");
      }
      continue;
    }
    auto name = WheelName::parse(f.filename);
    if (!name || name->project != project) {
      continue;
    }
    auto rank = best_tag_rank(*name, c.tags);
    if (!rank) {
      u.unusable.push_back(f.filename);
      continue;
    }
    if (!f.requires_python.empty()) {
      auto rp = SpecifierSet::parse(f.requires_python);
      if (!rp || !rp->contains(c.python, Prereleases::allow)) {
        u.unusable.push_back(fmt::format("{} (Requires-Python {})", f.filename, f.requires_python));
        continue;
      }
    }
    by_version[name->version].push_back(Option{&f, *name, *rank});
  }
  for (auto& [version, options] : by_version) {
    std::sort(options.begin(), options.end(), [](const Option& a, const Option& b) {
      if (a.file->yanked != b.file->yanked) {
        return !a.file->yanked;
      }
      if (a.rank != b.rank) {
        return a.rank < b.rank;
      }
      if (a.name.build_number != b.name.build_number) {
        return a.name.build_number.value_or(0) > b.name.build_number.value_or(0);
      }
      return a.file->filename < b.file->filename;
    });
    const Option& best = options.front();
    u.candidates.push_back(Candidate{version, *best.file, best.name, best.file->yanked, false});
  }
}

/// A few threads that fetch index pages and metadata ahead of the solver: made as work arrives, up
/// to a limit (a re-lock that reads one page needs one), and kept (a cold lock does hundreds of small
/// reads, and a thread each would cost more than the reads).
class FetchPool {
public:
  explicit FetchPool(std::size_t max_threads) : m_max(max_threads) {}
  FetchPool(const FetchPool&) = delete;
  FetchPool& operator=(const FetchPool&) = delete;
  /// Runs what is queued, then stops the threads.
  ~FetchPool() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_wake.notify_all();
    for (std::thread& t : m_threads) {
      t.join();
    }
  }
  void submit(std::function<void()> task) {
    {
      std::lock_guard lock(m_mutex);
      m_queue.push_back(std::move(task));
      if (m_idle < m_queue.size() && m_threads.size() < m_max) {
        m_threads.emplace_back([this] { work(); });
        return;
      }
    }
    m_wake.notify_one();
  }

private:
  void work() {
    std::unique_lock lock(m_mutex);
    while (true) {
      if (m_queue.empty()) {
        if (m_stop) {
          return;
        }
        ++m_idle;
        m_wake.wait(lock, [this] { return m_stop || !m_queue.empty(); });
        --m_idle;
        continue;
      }
      std::function<void()> task = std::move(m_queue.front());
      m_queue.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  const std::size_t m_max;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::deque<std::function<void()>> m_queue;
  std::size_t m_idle = 0; // threads waiting for work
  bool m_stop = false;
  std::vector<std::thread> m_threads;
};

/// A package of the solver: a project, or one extra of it.
struct Package {
  std::string project; ///< empty for the root
  std::string extra;   ///< empty for the project itself
  std::string name;    ///< "project" or "project[extra]"
};

class WheelProvider final : public pubgrub::Provider {
public:
  WheelProvider(const ResolveContext& c, const std::vector<PyRequest>& requests)
      : m_c(c), m_requests(requests), m_reader(c) {
    m_packages.push_back(Package{});
    m_depth.push_back(0);
    m_prerelease_named = c.prerelease_named;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      m_request_order.emplace(requests[i].requirement.project, std::min<std::uint64_t>(i, 0xfffe));
    }
    for (const PyRequest& r : requests) {
      m_hashes[r.requirement.project].insert(r.hashes.begin(), r.hashes.end());
      if (r.requirement.specifier.mentions_prerelease()) {
        m_prerelease_named.insert(r.requirement.project);
      }
    }
  }

  WheelProvider(const WheelProvider&) = delete;
  WheelProvider& operator=(const WheelProvider&) = delete;

  ~WheelProvider() override {
    // Wait for the fetches still running ahead of the solver; none starts once told to stop.
    {
      std::lock_guard lock(m_mutex);
      m_stopping = true;
    }
    std::size_t waited = 0;
    while (true) {
      std::vector<std::shared_future<Result<Universe>>> universes;
      std::vector<std::shared_future<Result<CoreMetadata>>> metadata;
      {
        std::lock_guard lock(m_mutex);
        for (const auto& [k, f] : m_universes) {
          universes.push_back(f);
        }
        for (const auto& [k, f] : m_metadata) {
          metadata.push_back(f);
        }
      }
      for (const auto& f : universes) {
        f.wait();
      }
      for (const auto& f : metadata) {
        f.wait();
      }
      if (universes.size() + metadata.size() == waited) {
        break;
      }
      waited = universes.size() + metadata.size();
    }
  }

  /// Starts the index pages of the top-level requests, with the metadata of the previous lock's
  /// wheels read at once from their set (when the store has it).
  void start() {
    if (!m_c.previous.empty()) {
      std::vector<std::string> sha256s;
      for (const auto& [project, w] : m_c.previous) {
        sha256s.push_back(w.file.sha256);
      }
      m_set_key = metadata_set_key(std::move(sha256s));
      if (auto text = m_c.store->get_record(k_metadata_set_ns, m_set_key, k_max_metadata_set)) {
        m_set = parse_metadata_set(*text);
      }
    }
    for (const PyRequest& r : m_requests) {
      prefetch_project(r.requirement.project);
    }
  }

  Result<std::size_t> version_count(pubgrub::PackageId p) override {
    if (p == 0) {
      return 1;
    }
    LS_TRY_ASSIGN(const Universe* u, universe(m_packages[p].project));
    return u->candidates.size();
  }

  Result<std::optional<std::size_t>> choose(pubgrub::PackageId p,
                                            const pubgrub::VersionSet& allowed) override {
    if (p == 0) {
      return allowed.highest();
    }
    const std::string& project = m_packages[p].project;
    LS_TRY_ASSIGN(const Universe* u, universe(project));
    const auto& cs = u->candidates;
    // The previous lock's version, then the base image's, when they fit.
    if (auto prev = m_c.previous.find(project); prev != m_c.previous.end()) {
      for (std::size_t i = 0; i < cs.size(); ++i) {
        if (allowed.has(i) && cs[i].version == prev->second.version && !cs[i].file.filename.empty()) {
          return std::optional<std::size_t>(i);
        }
      }
    }
    for (std::size_t i = 0; i < cs.size(); ++i) {
      if (allowed.has(i) && cs[i].installed) {
        return std::optional<std::size_t>(i);
      }
    }
    // The newest final release; pre-releases when asked for, or when nothing else fits.
    const bool any_pre = m_c.prereleases || m_prerelease_named.count(project) != 0;
    std::optional<std::size_t> newest_pre;
    for (std::size_t i = cs.size(); i-- > 0;) {
      if (!allowed.has(i)) {
        continue;
      }
      if (!cs[i].version.is_prerelease() || any_pre) {
        return std::optional<std::size_t>(i);
      }
      if (!newest_pre) {
        newest_pre = i;
      }
    }
    return newest_pre;
  }

  Result<pubgrub::Dependencies> dependencies(pubgrub::PackageId p, std::size_t v) override {
    if (p == 0) {
      return root_dependencies();
    }
    LS_TRY_ASSIGN(pubgrub::Dependencies out, package_dependencies(p, v));
    m_dependencies.insert_or_assign({p, v}, out); // for the chains of the solution
    return out;
  }

  Result<pubgrub::Dependencies> package_dependencies(pubgrub::PackageId p, std::size_t v) {
    const Package pkg = m_packages[p];
    LS_TRY_ASSIGN(const Universe* u, universe(pkg.project));
    const Candidate& cand = u->candidates[v];
    const std::string who = fmt::format("{}{} {}", pkg.project,
                                        pkg.extra.empty() ? "" : "[" + pkg.extra + "]", cand.version.str());
    pubgrub::Dependencies out;
    if (!pkg.extra.empty()) {
      // An extra is its project at the same version, plus what the extra adds.
      const pubgrub::PackageId base = package_id(pkg.project, "", m_depth[p]);
      out.needs.push_back(
          pubgrub::Dependency{base, pubgrub::VersionSet::only(u->candidates.size(), v),
                              fmt::format("{} needs {} {}", who, pkg.project, cand.version.str())});
    }
    if (cand.file.filename.empty()) {
      return out; // the base image's own copy: its dependencies are the base's business
    }
    LS_TRY_ASSIGN(const CoreMetadata* md, metadata(pkg.project, v));
    if (md->requires_python && !md->requires_python->contains(m_c.python, Prereleases::allow)) {
      out.unusable = fmt::format("{} requires Python {} (the image has {})", who, md->requires_python->str(),
                                 m_c.target.full_version);
      return out;
    }
    const std::vector<std::string> extras =
        pkg.extra.empty() ? std::vector<std::string>{} : std::vector<std::string>{pkg.extra};
    std::vector<const Requirement*> applying;
    for (const Requirement& dep : md->requires_dist) {
      Result<bool> applies = dep.applies(m_c.env, extras);
      if (!applies) {
        return applies.error().with_context(fmt::format("{}: Requires-Dist {}", who, dep.str()));
      }
      if (!*applies) {
        continue;
      }
      // The extra's package adds only what the extra brings.
      if (!pkg.extra.empty()) {
        LS_TRY_ASSIGN(bool plain, dep.applies(m_c.env));
        if (plain) {
          continue;
        }
      }
      if (!dep.url.empty()) {
        out.unusable = fmt::format("{} needs {}, a direct URL; lockstep takes packages from the spec's "
                                   "repositories only",
                                   who, dep.str());
        return out;
      }
      applying.push_back(&dep);
    }
    LS_TRY(load_all(applying));
    for (const Requirement* dep : applying) {
      LS_TRY(add_requirement(*dep, fmt::format("{} needs {}", who, requirement_text(*dep)), m_depth[p] + 1,
                             out.needs));
    }
    return out;
  }

  pubgrub::Priority priority(pubgrub::PackageId p, const pubgrub::VersionSet& allowed) override {
    // As pip's resolver orders its work: pinned first, then by depth from the request, then by
    // the order of the request, then by name.
    const std::uint64_t pinned = allowed.count() == 1 ? 0 : 1;
    const std::uint64_t depth = std::min<std::uint64_t>(m_depth[p], 0xffff);
    auto requested = m_request_order.find(m_packages[p].project);
    const std::uint64_t order = requested == m_request_order.end() ? 0xffff : requested->second;
    return {(pinned << 40) | (depth << 20) | order, std::string_view(m_packages[p].name)};
  }

  std::string describe(pubgrub::PackageId p, const pubgrub::VersionSet& versions) override {
    if (p == 0) {
      return "the request";
    }
    std::string name = name_of(p);
    auto u = universe(m_packages[p].project);
    if (!u) {
      return name;
    }
    const auto& cs = (*u)->candidates;
    const std::size_t n = cs.size();
    std::vector<std::string> runs;
    std::size_t count = 0;
    for (std::size_t i = 0; i < n;) {
      if (!versions.has(i)) {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j + 1 < n && versions.has(j + 1)) {
        ++j;
      }
      count += j - i + 1;
      if (i == j) {
        runs.push_back("==" + cs[i].version.str());
      } else if (i == 0) {
        runs.push_back("<" + (j + 1 < n ? cs[j + 1].version.str() : std::string("?")));
      } else if (j + 1 == n) {
        runs.push_back(">=" + cs[i].version.str());
      } else {
        runs.push_back(fmt::format(">={},<{}", cs[i].version.str(), cs[j + 1].version.str()));
      }
      i = j + 1;
    }
    if (count == n && n > 0) {
      return name;
    }
    if (runs.size() == 1 && count == 1) {
      return fmt::format("{} {}", name, runs[0].substr(2));
    }
    if (runs.size() == 1) {
      return name + runs[0];
    }
    return fmt::format("{} ({})", name, fmt::join(runs, " or "));
  }

  std::string no_versions(pubgrub::PackageId p, const pubgrub::VersionSet& versions) override {
    return fmt::format("no version of {} can be chosen", describe(p, versions));
  }

  /// The solution as wheels, with the chain that brought each in.
  Result<std::vector<ResolvedWheel>> wheels(const pubgrub::Outcome& outcome) {
    std::map<pubgrub::PackageId, std::size_t> chosen;
    for (const pubgrub::Selection& s : outcome.selection) {
      chosen[s.package] = s.version;
    }
    // Breadth first from the request: the first path to each package is its reason.
    std::map<pubgrub::PackageId, std::string> reason;
    std::deque<pubgrub::PackageId> queue;
    LS_TRY_ASSIGN(pubgrub::Dependencies root, root_dependencies());
    for (std::size_t i = 0; i < root.needs.size(); ++i) {
      const pubgrub::PackageId q = root.needs[i].package;
      if (chosen.count(q) != 0 && reason.emplace(q, m_root_texts[i]).second) {
        queue.push_back(q);
      }
    }
    std::set<std::string> needed; // projects some chosen wheel's metadata requires
    while (!queue.empty()) {
      const pubgrub::PackageId p = queue.front();
      queue.pop_front();
      pubgrub::Dependencies deps;
      if (auto known = m_dependencies.find({p, chosen.at(p)}); known != m_dependencies.end()) {
        deps = std::move(known->second);
      } else {
        LS_TRY_ASSIGN(deps, dependencies(p, chosen.at(p)));
      }
      for (const pubgrub::Dependency& d : deps.needs) {
        if (m_packages[d.package].project != m_packages[p].project) {
          needed.insert(m_packages[d.package].project);
        }
        if (chosen.count(d.package) == 0 || reason.count(d.package) != 0) {
          continue;
        }
        const bool same_project = m_packages[d.package].project == m_packages[p].project;
        reason[d.package] = same_project ? reason[p] : reason[p] + " -> " + d.text;
        queue.push_back(d.package);
      }
    }
    std::map<std::string, ResolvedWheel> out;
    for (const auto& [p, v] : chosen) {
      const Package& pkg = m_packages[p];
      if (p == 0) {
        continue;
      }
      LS_TRY_ASSIGN(const Universe* u, universe(pkg.project));
      const Candidate& cand = u->candidates[v];
      if (cand.installed && cand.file.filename.empty()) {
        continue; // the base image has it
      }
      if (!pkg.extra.empty()) {
        out[pkg.project].extras.push_back(pkg.extra);
        continue;
      }
      ResolvedWheel& w = out[pkg.project];
      w.project = pkg.project;
      w.version = cand.version;
      w.file = cand.file;
      w.wheel = *cand.wheel;
      w.repo = u->repo;
      w.reason = reason.count(p) != 0 ? reason.at(p) : std::string("needed by the solution");
      w.needed_by_wheels = needed.count(pkg.project) != 0;
      if (auto in_base = m_c.installed.find(pkg.project); in_base != m_c.installed.end()) {
        w.shadows =
            fmt::format("{} {} ({})", pkg.project, in_base->second.first.str(), in_base->second.second);
      }
    }
    std::vector<ResolvedWheel> list;
    for (auto& [project, w] : out) {
      if (!w.project.empty()) {
        list.push_back(std::move(w));
      }
    }
    return list;
  }

  /// Records the metadata set of `wheels` (unless it is the one read at the start): the headers
  /// of each wheel's METADATA, from the set read at the start or its own record.
  void save_metadata_set(const std::vector<ResolvedWheel>& wheels) {
    std::vector<std::string> sha256s;
    for (const ResolvedWheel& w : wheels) {
      if (!w.file.sha256.empty()) {
        sha256s.push_back(w.file.sha256);
      }
    }
    const std::string key = metadata_set_key(sha256s);
    if (key == m_set_key && !m_set.empty()) {
      return;
    }
    std::string text(k_metadata_set_magic);
    std::lock_guard lock(m_mutex);
    for (const std::string& sha : sha256s) {
      std::optional<std::string> one;
      if (auto it = m_set.find(sha); it != m_set.end()) {
        one = it->second;
      } else if (auto read = m_texts.find(sha); read != m_texts.end()) {
        one = read->second; // fetched now (its own record may still be queued)
      } else {
        one = m_c.store->get_record(k_metadata_ns, sha);
      }
      if (one) {
        const std::string_view headers = metadata_headers(*one);
        text += fmt::format("{} {}\n", sha, headers.size());
        text += headers;
      }
    }
    if (auto r = m_c.store->put_record(k_metadata_set_ns, key, text, false); !r) {
      log::debug("can't record the metadata set: {}", r.error().message);
    }
  }

  /// True when the solve must be repeated with named_prereleases() from the start: pip merges
  /// every specifier of a project before filtering pre-releases.
  [[nodiscard]] bool stale() const { return m_stale; }
  [[nodiscard]] const std::set<std::string>& named_prereleases() const { return m_prerelease_named; }

  [[nodiscard]] std::size_t pages_read() const { return m_pages; }
  [[nodiscard]] std::size_t metadata_read() const { return m_metadata_reads; }
  [[nodiscard]] std::size_t pages_cached() const { return m_reader.pages_cached(); }

private:
  const std::string& name_of(pubgrub::PackageId p) const { return m_packages[p].name; }

  /// "tokenizers<0.20,>=0.19" / "torch[cuda]==2.4.1" / "requests": the requirement without its marker.
  static std::string requirement_text(const Requirement& r) {
    std::string s = r.project;
    if (!r.extras.empty()) {
      s += fmt::format("[{}]", fmt::join(r.extras, ","));
    }
    return s + r.specifier.str();
  }

  pubgrub::PackageId package_id(const std::string& project, const std::string& extra, std::uint64_t depth) {
    auto [it, fresh] =
        m_ids.try_emplace({project, extra}, static_cast<pubgrub::PackageId>(m_packages.size()));
    if (fresh) {
      m_packages.push_back(Package{project, extra, extra.empty() ? project : project + "[" + extra + "]"});
      m_depth.push_back(depth);
    } else {
      m_depth[it->second] = std::min(m_depth[it->second], depth);
    }
    return it->second;
  }

  Result<pubgrub::Dependencies> root_dependencies() {
    pubgrub::Dependencies out;
    std::vector<const Requirement*> reqs;
    for (const PyRequest& r : m_requests) {
      reqs.push_back(&r.requirement);
    }
    LS_TRY(load_all(reqs));
    m_root_texts.clear();
    for (const PyRequest& r : m_requests) {
      const std::size_t before = out.needs.size();
      LS_TRY(add_requirement(r.requirement,
                             fmt::format("{} asks for {}", r.where, requirement_text(r.requirement)), 1,
                             out.needs));
      for (std::size_t i = before; i < out.needs.size(); ++i) {
        m_root_texts.push_back(fmt::format("requested by {} ({})", r.where, r.text));
        m_root_where[out.needs[i].text] = r.where;
      }
    }
    return out;
  }

  /// The dependency on `req` (and one per extra it asks for), described by `text`.
  Result<void> add_requirement(const Requirement& req, std::string text, std::uint64_t depth,
                               std::vector<pubgrub::Dependency>& out) {
    LS_TRY_ASSIGN(const Universe* u, universe(req.project));
    if (req.specifier.mentions_prerelease() && m_prerelease_named.insert(req.project).second &&
        m_without_pre.count(req.project) != 0) {
      m_stale = true; // sets made before this one left its pre-releases out
    }
    pubgrub::VersionSet set = versions_of(req.project, *u, req.specifier);
    if (set.empty()) {
      text += fmt::format(" ({})", why_none(req.project, *u));
    }
    out.push_back(pubgrub::Dependency{package_id(req.project, "", depth), set, text});
    for (const std::string& e : req.extras) {
      out.push_back(pubgrub::Dependency{package_id(req.project, e, depth), set, text});
    }
    return {};
  }

  /// What can be said when nothing of `project` fits: what it has.
  std::string why_none(const std::string& project, const Universe& u) const {
    if (!u.fixed_by.empty() && !u.candidates.empty()) {
      return fmt::format("{} {} is installed by {}", project, u.candidates.front().version.str(), u.fixed_by);
    }
    if (u.repo < 0) {
      return fmt::format("no repository has {}; looked in {}", project, fmt::join(u.looked, ", "));
    }
    std::vector<std::string> versions;
    for (const Candidate& c : u.candidates) {
      versions.push_back(c.version.str() + (c.yanked ? " (yanked)" : ""));
    }
    if (versions.size() > 12) {
      versions.erase(versions.begin(), versions.end() - 12);
      versions.insert(versions.begin(), "...");
    }
    std::string out =
        versions.empty()
            ? fmt::format("{} has no wheel for {}", repo_label(*m_c.spec, u.repo), m_c.target.describe())
            : fmt::format("{} has {}", repo_label(*m_c.spec, u.repo), fmt::join(versions, ", "));
    if (!u.unusable.empty()) {
      std::vector<std::string> shown(
          u.unusable.begin(),
          u.unusable.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(u.unusable.size(), 4)));
      out += fmt::format("; not installable here: {}{}", fmt::join(shown, ", "),
                         u.unusable.size() > 4 ? ", ..." : "");
      if (std::any_of(u.unusable.begin(), u.unusable.end(),
                      [](const std::string& s) { return s.ends_with("(an sdist)"); })) {
        out += "; lockstep installs wheels only (it does not build sdists)";
      }
    }
    return out;
  }

  /// The candidates `spec` accepts, as pip's finder filters them: yanked versions only for an exact
  /// pin (PEP 592); pre-releases only when a requirement on the project names one, with --pre, or
  /// when nothing constrains the project and it has no final release (packaging's SpecifierSet.filter).
  pubgrub::VersionSet versions_of(const std::string& project, const Universe& u, const SpecifierSet& spec) {
    const auto& clauses = spec.clauses();
    const bool pinned =
        clauses.size() == 1 && ((clauses[0].op == VersionSpecifier::Op::equal && !clauses[0].wildcard) ||
                                clauses[0].op == VersionSpecifier::Op::arbitrary);
    bool pre = m_c.prereleases || m_prerelease_named.count(project) != 0 || spec.mentions_prerelease();
    if (!pre && spec.empty()) {
      pre = std::all_of(u.candidates.begin(), u.candidates.end(),
                        [](const Candidate& c) { return c.version.is_prerelease(); });
    }
    if (!pre) {
      m_without_pre.insert(project);
    }
    pubgrub::VersionSet set = pubgrub::VersionSet::none(u.candidates.size());
    for (std::size_t i = 0; i < u.candidates.size(); ++i) {
      const Candidate& c = u.candidates[i];
      if ((pre || !c.version.is_prerelease()) && spec.contains(c.version, Prereleases::allow) &&
          (!c.yanked || pinned)) {
        set.add(i);
      }
    }
    return set;
  }

  // ---- fetching, ahead of the solver where it can -------------------------------------------------

  /// The universe of `project`, reading its index pages if no one has started to.
  Result<const Universe*> universe(const std::string& project) {
    std::shared_future<Result<Universe>> f = start_universe(project);
    const Result<Universe>& u = f.get();
    if (!u) {
      return u.error();
    }
    return &*u;
  }

  /// Loads the universes of every requirement at once.
  Result<void> load_all(const std::vector<const Requirement*>& reqs) {
    for (const Requirement* r : reqs) {
      start_universe(r->project);
    }
    for (const Requirement* r : reqs) {
      LS_TRY(universe(r->project));
    }
    return {};
  }

  /// The universe of `project`: known, being read, or started now (on the pool; at once for a
  /// project whose only candidate is its previous wheel). A speculative start after the provider
  /// began to stop returns an empty future.
  std::shared_future<Result<Universe>> start_universe(const std::string& project, bool speculative = false) {
    std::shared_ptr<std::promise<Result<Universe>>> promise;
    std::shared_future<Result<Universe>> f;
    {
      std::lock_guard lock(m_mutex);
      auto it = m_universes.find(project);
      if (it != m_universes.end()) {
        return it->second;
      }
      if (speculative && m_stopping) {
        return {};
      }
      promise = std::make_shared<std::promise<Result<Universe>>>();
      f = promise->get_future().share();
      m_universes.emplace(project, f);
    }
    if (m_c.previous_only.count(project) != 0 || m_c.fixed.count(project) != 0) {
      promise->set_value(load_universe(project)); // nothing to fetch
    } else {
      m_pool.submit([this, project, promise] { promise->set_value(load_universe(project)); });
    }
    return f;
  }

  Result<Universe> load_universe(const std::string& project) {
    Universe u;
    if (auto fixed = m_c.fixed.find(project); fixed != m_c.fixed.end()) {
      u.fixed_by = fixed->second; // the installed candidate below is the only one
    } else if (m_c.previous_only.count(project) != 0) {
      const PreviousWheel& prev = m_c.previous.at(project);
      Candidate c;
      c.version = prev.version;
      c.file = prev.file;
      LS_TRY_ASSIGN(c.wheel, WheelName::parse(prev.file.filename));
      u.repo = prev.repo;
      u.candidates.push_back(std::move(c));
    } else {
      std::vector<IndexFile> files;
      {
        const envspec::Spec& spec = *m_c.spec;
        Result<void> read = [&]() -> Result<void> {
          for (std::size_t r = 0; r < spec.repos.size() && u.repo < 0; ++r) {
            if (spec.repos[r].kind == envspec::Repo::Kind::apt) {
              continue;
            }
            LS_TRY_ASSIGN(files, m_reader.files(static_cast<int>(r), project));
            u.looked.push_back(repo_label(spec, static_cast<int>(r)));
            if (!files.empty()) {
              u.repo = static_cast<int>(r);
            }
          }
          return {};
        }();
        LS_TRY(read);
        ++m_pages;
      }
      const auto hashes = m_hashes.find(project);
      add_candidates(m_c, project, hashes == m_hashes.end() ? std::set<std::string>{} : hashes->second, files,
                     u);
    }
    if (auto in_base = m_c.installed.find(project); in_base != m_c.installed.end()) {
      const PyVersion& iv = in_base->second.first;
      auto it = std::find_if(u.candidates.begin(), u.candidates.end(),
                             [&iv](const Candidate& c) { return c.version == iv; });
      if (it != u.candidates.end()) {
        it->installed = true;
        it->file = IndexFile{};
      } else {
        Candidate c;
        c.version = iv;
        c.installed = true;
        u.candidates.insert(
            std::upper_bound(u.candidates.begin(), u.candidates.end(), c,
                             [](const Candidate& a, const Candidate& b) { return a.version < b.version; }),
            std::move(c));
      }
    }
    // Ahead of the solver: the metadata of the version it will most likely try first (the previous
    // lock's, else the newest final release the top-level requests on it admit).
    if (!u.candidates.empty()) {
      const auto requested = [this, &project](const PyVersion& v) {
        return std::all_of(m_requests.begin(), m_requests.end(), [&](const PyRequest& r) {
          return r.requirement.project != project || r.requirement.specifier.contains(v, Prereleases::allow);
        });
      };
      std::optional<std::size_t> guess;
      for (std::size_t i = u.candidates.size(); i-- > 0;) {
        const Candidate& c = u.candidates[i];
        if (!c.yanked && !c.version.is_prerelease() && requested(c.version)) {
          guess = i;
          break;
        }
      }
      if (auto prev = m_c.previous.find(project); prev != m_c.previous.end()) {
        for (std::size_t i = 0; i < u.candidates.size(); ++i) {
          if (u.candidates[i].version == prev->second.version && requested(u.candidates[i].version)) {
            guess = i;
          }
        }
      }
      if (guess && !u.candidates[*guess].file.filename.empty()) {
        prefetch_metadata(u.candidates[*guess]);
      }
    }
    return u;
  }

  void prefetch_project(const std::string& project) { start_universe(project); }

  using MetadataKey = std::string; // the wheel's sha256, or its URL when the index gives none

  static const MetadataKey& metadata_key(const Candidate& c) {
    return c.file.sha256.empty() ? c.file.url : c.file.sha256;
  }

  /// The metadata of a candidate: known, being read, or started now (from the store's record at
  /// once; else on the pool). Speculative reads go on to start the pages of what it needs.
  std::shared_future<Result<CoreMetadata>> start_metadata(const Candidate& c, bool speculative) {
    std::shared_ptr<std::promise<Result<CoreMetadata>>> promise;
    std::shared_future<Result<CoreMetadata>> f;
    {
      std::lock_guard lock(m_mutex);
      const MetadataKey& key = metadata_key(c);
      auto it = m_metadata.find(key);
      if (it != m_metadata.end()) {
        return it->second;
      }
      if (speculative && m_stopping) {
        return {};
      }
      promise = std::make_shared<std::promise<Result<CoreMetadata>>>();
      f = promise->get_future().share();
      m_metadata.emplace(key, f);
    }
    const auto finish = [this, c, speculative, promise](Result<CoreMetadata> md) {
      if (md && speculative) {
        for (const Requirement& dep : md->requires_dist) {
          auto applies = dep.applies(m_c.env);
          if (applies && *applies && dep.url.empty()) {
            start_universe(dep.project, true);
          }
        }
      }
      promise->set_value(std::move(md));
    };
    if (auto recorded = recorded_metadata(c)) {
      finish(std::move(*recorded));
    } else {
      m_pool.submit([this, c, finish] { finish(read_metadata(c)); });
    }
    return f;
  }

  /// The store's record of a candidate's METADATA, checked against the wheel's name, if there is one.
  std::optional<Result<CoreMetadata>> recorded_metadata(const Candidate& c) const {
    if (c.file.sha256.empty()) {
      return std::nullopt;
    }
    std::optional<std::string> cached;
    if (auto in_set = m_set.find(c.file.sha256); in_set != m_set.end()) {
      cached = in_set->second;
    } else {
      cached = m_c.store->get_record(k_metadata_ns, c.file.sha256);
    }
    if (!cached) {
      return std::nullopt;
    }
    auto m = parse_core_metadata(*cached, fmt::format("{} (METADATA)", c.file.filename));
    if (!m) {
      return std::nullopt;
    }
    return checked_metadata(c, std::move(*m));
  }

  static Result<CoreMetadata> checked_metadata(const Candidate& c, CoreMetadata md) {
    if (md.project != c.wheel->project || !(md.version == c.wheel->version)) {
      return invalid_input("the METADATA of {} names {} {}; the wheel or the index is wrong", c.file.filename,
                           md.name, md.version.str());
    }
    return md;
  }

  void prefetch_metadata(const Candidate& c) { start_metadata(c, true); }

  Result<const CoreMetadata*> metadata(const std::string& project, std::size_t v) {
    LS_TRY_ASSIGN(const Universe* u, universe(project));
    const Candidate& c = u->candidates[v];
    std::shared_future<Result<CoreMetadata>> f = start_metadata(c, false);
    const Result<CoreMetadata>& md = f.get();
    if (!md) {
      return md.error();
    }
    return &*md;
  }

  /// The METADATA of a candidate: recorded in the store, the wheel in the store, the index's PEP
  /// 658 file, else the wheel itself (downloaded into the store and verified). It must name the
  /// wheel's project and version.
  Result<CoreMetadata> read_metadata(const Candidate& c) {
    const std::string what = fmt::format("{} (METADATA)", c.file.filename);
    const BlobStore& store = *m_c.store;
    Result<CoreMetadata> md = [&]() -> Result<CoreMetadata> {
      if (!c.file.sha256.empty()) {
        if (auto cached = store.get_record(k_metadata_ns, c.file.sha256)) {
          if (auto m = parse_core_metadata(*cached, what)) {
            return m;
          }
        }
      }
      std::optional<Digest> sha;
      if (!c.file.sha256.empty()) {
        LS_TRY_ASSIGN(sha, Digest::parse("sha256:" + c.file.sha256));
      }
      if (sha && store.has(*sha)) {
        return read_wheel_metadata(store.blob_path(*sha), c.file.filename);
      }
      Result<std::string> text = [&]() -> Result<std::string> {
        if (c.file.has_metadata) {
          FetchOptions fetch;
          fetch.max_size = k_max_metadata;
          fetch.local_roots = m_c.local_roots;
          LS_TRY_ASSIGN(std::string body, http_get(c.file.url + ".metadata", fetch));
          if (!c.file.metadata_sha256.empty() && sha256_of(body).hex() != c.file.metadata_sha256) {
            return invalid_input("{}.metadata has sha256 {}, the index says {}; refusing it", c.file.url,
                                 sha256_of(body).hex(), c.file.metadata_sha256);
          }
          return body;
        }
        return std::string();
      }();
      ++m_metadata_reads;
      if (text && !text->empty()) {
        LS_TRY_ASSIGN(CoreMetadata m, parse_core_metadata(*text, what));
        if (!c.file.sha256.empty()) {
          m_reader.writes().put(k_metadata_ns, c.file.sha256, *text);
          std::lock_guard lock(m_mutex);
          m_texts.emplace(c.file.sha256, std::string(metadata_headers(*text)));
        }
        return m;
      }
      if (!text) {
        return text.error();
      }
      if (!sha) {
        return invalid_input(
            "the index gives no sha256 for {} ({}); lockstep pins every file by sha256: use an "
            "index that lists #sha256= hashes",
            c.file.filename, c.file.url);
      }
      FetchOptions fetch;
      fetch.max_size = k_max_wheel;
      fetch.local_roots = m_c.local_roots;
      Result<std::vector<BlobInfo>> blobs =
          fetch_all(store, {Download{c.file.url, *sha, c.file.size, c.file.filename}}, fetch);
      if (!blobs) {
        return blobs.error();
      }
      return read_wheel_metadata(store.blob_path(blobs->front().digest), c.file.filename);
    }();
    if (!md) {
      return md;
    }
    return checked_metadata(c, std::move(*md));
  }

  const ResolveContext& m_c;
  const std::vector<PyRequest>& m_requests;
  RepoReader m_reader;
  std::vector<Package> m_packages;
  std::vector<std::uint64_t> m_depth;
  std::map<std::pair<std::string, std::string>, pubgrub::PackageId> m_ids;
  std::map<std::string, std::set<std::string>> m_hashes; // project -> allowed sha256 (hash-checking mode)
  std::map<std::string, std::uint64_t> m_request_order;  // project -> the first request naming it
  std::set<std::string> m_prerelease_named;              // projects a requirement names a pre-release of
  std::set<std::string> m_without_pre;                   // projects whose sets left pre-releases out
  bool m_stale = false;                  // a project got named after sets of it left its pre-releases out
  std::vector<std::string> m_root_texts; // by root dependency: "packages.pip[0] torch>=2"
  std::map<std::string, std::string> m_root_where; // root dependency text -> PyRequest::where

  std::mutex m_mutex; // guards what follows
  bool m_stopping = false;
  std::map<std::string, std::shared_future<Result<Universe>>> m_universes;
  std::map<MetadataKey, std::shared_future<Result<CoreMetadata>>> m_metadata;
  std::atomic<std::size_t> m_pages{0};
  std::map<std::string, std::string> m_texts; // METADATA headers fetched now, by wheel sha256
  FetchPool m_pool{k_fetch_slots};            // last: its threads stop before the maps above go
  std::atomic<std::size_t> m_metadata_reads{0};
  std::map<std::pair<pubgrub::PackageId, std::size_t>, pubgrub::Dependencies>
      m_dependencies;                                 // asked by the solver
  std::string m_set_key;                              // the previous lock's metadata set
  std::unordered_map<std::string, std::string> m_set; // its METADATA by sha256 (read-only once loaded)

public:
  [[nodiscard]] const pubgrub::Limits& limits() const { return m_c.limits; }
  /// The PyRequest::where of a root dependency's text.
  [[nodiscard]] std::string where_of(const std::string& text) const {
    auto it = m_root_where.find(text);
    return it == m_root_where.end() ? std::string() : it->second;
  }
};

// One solve with `provider`: the resolution, or nullopt when it must start again (provider.stale()).
Result<std::optional<WheelResolution>> solve_once(WheelProvider& provider) {
  provider.start();
  log::Timer solving("solve Python packages (PubGrub)");
  LS_TRY_ASSIGN(pubgrub::Outcome outcome, pubgrub::solve(provider, 0, 0, provider.limits()));
  solving.stop();
  if (provider.stale()) {
    return std::optional<WheelResolution>();
  }
  WheelResolution out;
  out.stats = outcome.stats;
  out.solved = outcome.solved;
  if (!outcome.solved) {
    out.explanation = outcome.explanation;
    for (const std::string& text : outcome.root_causes) {
      const std::string where = provider.where_of(text);
      if (!where.empty() &&
          std::find(out.root_causes.begin(), out.root_causes.end(), where) == out.root_causes.end()) {
        out.root_causes.push_back(where);
      }
    }
  } else {
    log::Timer reasons("chains of the chosen wheels");
    LS_TRY_ASSIGN(out.wheels, provider.wheels(outcome));
    reasons.stop();
    provider.save_metadata_set(out.wheels);
  }
  out.index_pages = provider.pages_read();
  out.metadata_reads = provider.metadata_read();
  out.pages_cached = provider.pages_cached();
  return std::optional<WheelResolution>(std::move(out));
}

} // namespace

Result<WheelResolution> resolve_wheels(const ResolveContext& context,
                                       const std::vector<PyRequest>& requests) {
  // Solved again from the start when a project turns out to have a requirement naming one of its
  // pre-releases after sets of it left them out (rare; each pass names one more project).
  // The context is copied only then, and changed only once the provider reading it is gone.
  const ResolveContext* current = &context;
  std::optional<ResolveContext> again;
  while (true) {
    std::set<std::string> named;
    {
      WheelProvider provider(*current, requests);
      LS_TRY_ASSIGN(std::optional<WheelResolution> done, solve_once(provider));
      if (done) {
        return std::move(*done);
      }
      named = provider.named_prereleases();
    }
    ResolveContext next = *current;
    next.prerelease_named = std::move(named);
    again = std::move(next);
    current = &*again;
  }
}

} // namespace lockstep::builder
