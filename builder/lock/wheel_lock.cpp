// Locking `packages.pip`: exact pins -> one wheel each for the image's Python, with the closure
// check on their dependencies. See wheel_lock.hpp and docs/wheels.md ("Locking and installing").
#include "builder/lock/wheel_lock.hpp"

#include "builder/lock/pypi_index.hpp"
#include "builder/lock/wheel_resolve.hpp"
#include "envspec/load/python_inputs.hpp"
#include "envspec/spec/host_paths.hpp"
#include "envspec/yaml/diagnostics.hpp"
#include "support/base/log.hpp"
#include "support/debian/apt_packages.hpp"
#include "support/debian/deb_archive.hpp"
#include "support/debian/debian_version.hpp"
#include "support/net/http.hpp"
#include "support/python/pep440.hpp"
#include "support/python/pep508.hpp"
#include "support/python/wheel.hpp"
#include "support/python/wheel_archive.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>

namespace lockstep::builder {

namespace {

constexpr std::uint64_t k_max_wheel = 16ULL << 30;
constexpr std::uint64_t k_max_deb = 16ULL << 30;
std::string tag_text(const WheelName& w) {
  std::string stem = w.filename.substr(0, w.filename.size() - 4);
  std::size_t pos = stem.size();
  for (int i = 0; i < 3 && pos != std::string::npos; ++i) {
    pos = stem.rfind('-', pos - 1);
  }
  return pos == std::string::npos ? stem : stem.substr(pos + 1);
}

} // namespace

namespace {

// ---- the passes of lock_wheels ---------------------------------------------------------------------

/// A Python distribution a Debian package of the lock installs.
struct AptDistribution {
  PyVersion version;
  std::string deb;         ///< the package ("python3-numpy")
  std::string deb_version; ///< its version ("1:1.24.2-1")
  std::string path;        ///< its .dist-info or .egg-info in the image
  std::string where;       ///< the request it becomes: "packages.apt[1]", or "packages.apt"
};

/// "python3-numpy 1:1.24.2-1": the package that installs `d` (ResolveContext::fixed).
std::string installed_by(const AptDistribution& d) {
  return d.deb + " " + d.deb_version;
}

/// Locking packages.pip: what each pass of lock_wheels learns, for the passes after it.
struct PipLock {
  PipLock(const envspec::Spec& spec_, envspec::Lock& lock_, const BlobStore& store_,
          const LockOptions& options_, const BaseMetadata* base_)
      : spec(spec_), lock(lock_), store(store_), options(options_), base(base_),
        local_roots(envspec::local_roots(spec_)) {}

  const envspec::Spec& spec;
  envspec::Lock& lock;
  const BlobStore& store;
  const LockOptions& options;
  const BaseMetadata* base; ///< the base image's metadata, or null
  /// Local files (wheelhouses, file: indexes and the wheels they list) are read only inside these.
  const std::vector<std::filesystem::path> local_roots;
  // find_target
  PythonTarget target;
  std::vector<WheelTag> tags; ///< the target's wheel tags, best first
  MarkerEnv env;              ///< for markers
  PyVersion python;           ///< the target's full version
  /// Over a base image: the distributions its target Python sees, by project ("version (path)").
  std::map<std::string, std::pair<PyVersion, std::string>> base_dists;
  // find_apt_distributions: what the lock's python3-* debs install, by project
  std::map<std::string, AptDistribution> apt_dists;
  // find_conda_distributions: the lock's conda Python packages, by project: (version, "conda NAME V B")
  std::map<std::string, std::pair<PyVersion, std::string>> conda_dists;
  // collect_requests and the passes after it
  std::vector<PyRequest> requests;
  WheelResolution resolution;

  /// "packages.pip[I]", the line of the requirements file it came from, or the stack's key.
  [[nodiscard]] std::string item_path(std::size_t i) const {
    const envspec::PackageRequest& p = spec.packages.pip[i];
    if (!p.origin.empty()) {
      return p.origin;
    }
    return p.from_file.empty() ? fmt::format("packages.pip[{}]", i) : p.from_file;
  }
};

// The distributions a base image's target Python sees: the .dist-info directories in Debian's
// site directories for that Python (METADATA's Name and Version; unreadable ones are skipped).
// The site directories the target Python reads (relative to the root). A Python that is not
// Debian's sees its own site-packages only.
std::set<std::string> target_sites(const PythonTarget& target) {
  const std::string v = target.version;
  return target.debian
             ? std::set<std::string>{"usr/lib/python3/dist-packages", "usr/lib/python" + v + "/dist-packages",
                                     "usr/local/lib/python" + v + "/dist-packages",
                                     "usr/lib/python" + v + "/site-packages",
                                     "usr/local/lib/python" + v + "/site-packages"}
             : std::set<std::string>{target.site};
}

std::map<std::string, std::pair<PyVersion, std::string>> base_distributions(const BaseMetadata& base,
                                                                            const PythonTarget& target) {
  const std::set<std::string> sites = target_sites(target);
  std::map<std::string, std::pair<PyVersion, std::string>> out;
  for (const auto& [dir, text] : base.dist_info) {
    const std::size_t slash = dir.rfind('/');
    if (slash == std::string::npos || sites.count(dir.substr(0, slash)) == 0) {
      continue;
    }
    auto md = parse_core_metadata(text, dir + "/METADATA");
    if (!md) {
      log::debug("base image: {}", md.error().message);
      continue;
    }
    out.emplace(md->project, std::pair{md->version, "/" + dir});
  }
  return out;
}

// Pass 1: the target: the image's Python and glibc, from its Debian packages (or base.python).
Result<void> find_target(PipLock& l) {
  Result<PythonTarget> target =
      python_target(l.lock, l.spec.platform, l.base, l.spec.base.python, l.spec.conda.prefix);
  if (!target) {
    envspec::Diagnostics diagnostics;
    if (l.spec.base.python.empty()) {
      diagnostics.error(l.spec.packages.pip.front().location, "packages.pip", target.error().message);
    } else {
      diagnostics.error(l.spec.base.python_location, "base.python", target.error().message);
    }
    return diagnostics.to_error();
  }
  l.target = *target;
  LS_TRY_ASSIGN(l.tags, supported_tags(l.target.version, l.target.glibc, l.target.machine));
  l.env = linux_cpython(l.target.full_version, l.target.machine);
  LS_TRY_ASSIGN(l.python, PyVersion::parse(l.target.full_version));
  log::info("locking Python packages for {} from {}", l.target.describe(), l.target.package);
  if (l.base != nullptr) {
    l.base_dists = base_distributions(*l.base, l.target);
  }
  return {};
}

// The parent directory of `path` ("" for none).
std::string_view parent_of(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

// A distribution's metadata file in one of `sites`: NAME.dist-info/METADATA, NAME.egg-info/PKG-INFO,
// or a NAME.egg-info file (what setuptools' install_egg_info writes; Debian ships many).
bool is_distribution_metadata(std::string_view path, const std::set<std::string>& sites) {
  const std::string_view dir = parent_of(path);
  const auto in_site = [&sites](std::string_view d) { return sites.count(std::string(d)) != 0; };
  if ((path.ends_with(".dist-info/METADATA") && dir.ends_with(".dist-info")) ||
      (path.ends_with(".egg-info/PKG-INFO") && dir.ends_with(".egg-info"))) {
    return in_site(parent_of(dir));
  }
  return path.ends_with(".egg-info") && in_site(dir);
}

constexpr const char* k_deb_dists_ns = "deb-python-distributions";
constexpr std::uint64_t k_max_deb_metadata = 1 << 20;

// The distribution metadata files one .deb installs for the target (path -> text): the store's
// record of that deb, else read from the deb (downloaded into the store when missing) and recorded.
Result<std::vector<std::pair<std::string, std::string>>>
deb_distribution_files(const PipLock& l, const envspec::LockedArtifact& deb,
                       const std::set<std::string>& sites) {
  using Files = std::vector<std::pair<std::string, std::string>>;
  const std::string key = deb.sha256.hex();
  if (auto record = l.store.get_record(k_deb_dists_ns, key, 64ULL << 20)) {
    auto j = nlohmann::json::parse(*record, nullptr, false);
    if (j.is_array()) {
      Files out;
      for (const auto& f : j) {
        if (f.is_array() && f.size() == 2 && f[0].is_string() && f[1].is_string()) {
          out.emplace_back(f[0].get<std::string>(), f[1].get<std::string>());
        }
      }
      if (out.size() == j.size()) {
        return out;
      }
    }
  }
  const std::string label = fmt::format("{} {}", deb.name, deb.version);
  FetchOptions fetch;
  fetch.max_size = k_max_deb;
  fetch.local_roots = l.local_roots;
  LS_TRY_ASSIGN(std::vector<BlobInfo> blobs,
                fetch_all(l.store, {Download{deb.url, deb.sha256, deb.size, label}}, fetch));
  LS_TRY_ASSIGN(Files files,
                read_deb_files(
                    l.store.blob_path(blobs.front().digest),
                    [&sites](std::string_view path) { return is_distribution_metadata(path, sites); },
                    k_max_deb_metadata, label));
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [path, text] : files) {
    j.push_back({path, text});
  }
  if (auto r = l.store.put_record(k_deb_dists_ns, key, j.dump(), false); !r) {
    log::debug("can't record the Python distributions of {}: {}", label, r.error().message);
  }
  return files;
}

// Pass 1c: over a conda python, the lock's conda packages that are Python packages (they depend on
// python or python_abi) count as installed at their version, under the PyPI name of their project
// (conda's name where it is PyPI's), as pixi counts them: a wheel never replaces a conda package
// (docs/conda.md, "Wheels over a conda Python").
void find_conda_distributions(PipLock& l) {
  if (!l.target.conda) {
    return;
  }
  for (const envspec::LockedArtifact& a : l.lock.artifacts) {
    if (a.kind != "conda" || !a.conda || a.name == "python") {
      continue;
    }
    const bool python_package =
        std::any_of(a.conda->depends.begin(), a.conda->depends.end(), [](const auto& d) {
          const std::string_view name = std::string_view(d).substr(0, d.find(' '));
          return name == "python" || name == "python_abi";
        });
    auto version = PyVersion::parse(a.version);
    if (!python_package || !version) {
      continue;
    }
    // Under the PyPI project it ships where the names differ (conda's pytorch is torch;
    // recipes/conda/conda-names.yaml), else its own name.
    std::string project = a.name;
    if (Result<envspec::CondaMapping> m = envspec::map_conda_package(a.name);
        m && m->kind == envspec::CondaMapping::Kind::pypi) {
      project = m->name;
    }
    l.conda_dists.insert_or_assign(normalize_project_name(project),
                                   std::pair{*version, fmt::format("conda package {} {} {} (packages.conda)",
                                                                   a.name, a.version, a.conda->build)});
  }
}

// Pass 1b: the Python distributions the lock's own Debian packages (python3-*) install where the
// target Python looks. They are fixed: the solver takes them as installed, at their version
// (docs/python-resolver.md, "apt's Python packages").
Result<void> find_apt_distributions(PipLock& l) {
  if (!l.target.debian) {
    return {};
  }
  const std::set<std::string> sites = target_sites(l.target);
  for (const envspec::LockedArtifact& a : l.lock.artifacts) {
    if (a.kind != "deb" || !a.name.starts_with("python3-")) {
      continue;
    }
    LS_TRY_ASSIGN(auto files, deb_distribution_files(l, a, sites));
    for (const auto& [path, text] : files) {
      auto md = parse_core_metadata(text, fmt::format("{} {}: /{}", a.name, a.version, path));
      if (!md) {
        log::warn("{}; lockstep doesn't know which Python distribution it is", md.error().message);
        continue;
      }
      AptDistribution d;
      d.version = md->version;
      d.deb = a.name;
      d.deb_version = a.version;
      d.path = "/" + (path.ends_with(".egg-info") ? path : std::string(parent_of(path)));
      l.apt_dists.insert_or_assign(md->project, std::move(d));
    }
  }
  return {};
}

// Pass 2: the requests: each packages.pip entry (a range, a pin, or a line of a requirements
// file) that applies to the target. Direct URLs are refused.
Result<void> collect_requests(PipLock& l) {
  envspec::Diagnostics diagnostics;
  for (std::size_t i = 0; i < l.spec.packages.pip.size(); ++i) {
    const envspec::PackageRequest& p = l.spec.packages.pip[i];
    Result<Requirement> req = Requirement::parse(p.text);
    if (!req) {
      diagnostics.error(p.location, l.item_path(i), req.error().message);
      continue;
    }
    if (!req->url.empty()) {
      diagnostics.error(p.location, l.item_path(i),
                        fmt::format("{}: direct URL requirements are not supported; ask for a version from a "
                                    "repository ({}>=X or {}==X.Y.Z)",
                                    p.text, req->name, req->name));
      continue;
    }
    Result<bool> applies = req->applies(l.env);
    if (!applies) {
      diagnostics.error(p.location, l.item_path(i), applies.error().message);
      continue;
    }
    if (!*applies) {
      log::info("{}: skipped, its marker is false for {}", p.text, l.target.describe());
      continue;
    }
    PyRequest r;
    r.requirement = std::move(*req);
    r.where = l.item_path(i);
    r.text = p.text;
    r.hashes.insert(p.hashes.begin(), p.hashes.end());
    r.location = p.location;
    l.requests.push_back(std::move(r));
  }
  if (!diagnostics.empty()) {
    return diagnostics.to_error();
  }
  // apt's distributions: each one exactly at its version, asked for by the packages.apt entry that
  // names its package (else by packages.apt as a whole: a dependency of what it names).
  for (auto& [project, d] : l.apt_dists) {
    PyRequest r;
    LS_TRY_ASSIGN(r.requirement, Requirement::parse(fmt::format("{}=={}", project, d.version.str())));
    r.where = "packages.apt";
    r.location =
        l.spec.packages.apt.empty() ? envspec::SourceLocation{} : l.spec.packages.apt.front().location;
    for (std::size_t i = 0; i < l.spec.packages.apt.size(); ++i) {
      if (l.spec.packages.apt[i].name == d.deb) {
        r.where = fmt::format("packages.apt[{}]", i);
        r.location = l.spec.packages.apt[i].location;
        break;
      }
    }
    r.text = fmt::format("{} {} installs {} {}", d.deb, d.deb_version, project, d.version.str());
    d.where = r.where;
    l.requests.push_back(std::move(r));
  }
  return {};
}

// The previous lock's wheels that may be kept: its repositories are the spec's, the project is
// not being updated.
std::map<std::string, PreviousWheel> previous_wheels(const PipLock& l) {
  std::map<std::string, PreviousWheel> out;
  if (!l.options.previous || l.options.update_all) {
    return out;
  }
  const envspec::Lock& previous = *l.options.previous;
  if (previous.inputs.value("repos", nlohmann::json()) != l.lock.inputs.value("repos", nlohmann::json())) {
    return out; // priorities may have changed
  }
  for (const envspec::LockedArtifact& a : previous.artifacts) {
    if (a.kind != "wheel" || l.options.update.count(a.name) != 0 || a.repo < 0 ||
        static_cast<std::size_t>(a.repo) >= l.spec.repos.size() ||
        l.spec.repos[static_cast<std::size_t>(a.repo)].kind == envspec::Repo::Kind::apt) {
      continue;
    }
    auto version = PyVersion::parse(a.version);
    auto name = WheelName::parse(url_filename(a.url));
    if (!version || !name || name->project != a.name || !(name->version == *version) ||
        !best_tag_rank(*name, l.tags)) {
      continue;
    }
    PreviousWheel w;
    w.version = *version;
    w.repo = a.repo;
    w.file.filename = name->filename;
    w.file.url = a.url;
    w.file.sha256 = a.sha256.hex();
    w.file.size = a.size;
    out.emplace(a.name, std::move(w));
  }
  return out;
}

// Pass 3: the versions: PubGrub over the repositories. With a previous lock, first with its
// wheels as the only candidates of their projects (nothing moves unasked, and nothing is read
// but new projects' pages); when that can't satisfy the request, over everything the
// repositories offer, still preferring the previous versions.
Result<void> resolve(PipLock& l) {
  ResolveContext c;
  c.spec = &l.spec;
  c.store = &l.store;
  c.target = l.target;
  c.tags = l.tags;
  c.env = l.env;
  c.python = l.python;
  c.local_roots = l.local_roots;
  c.installed = l.base_dists;
  for (const auto& [project, d] : l.apt_dists) {
    c.installed.insert_or_assign(project, std::pair{d.version, d.path});
    c.fixed.insert_or_assign(project, installed_by(d));
  }
  for (const auto& [project, d] : l.conda_dists) {
    c.installed.insert_or_assign(project, std::pair{d.first, "/" + l.target.site});
    c.fixed.insert_or_assign(project, d.second);
  }
  c.previous = previous_wheels(l);
  for (const auto& [project, by] : c.fixed) {
    c.previous.erase(project);
  }
  c.refresh_pages = l.options.refresh || l.options.update_all || !l.options.update.empty();
  c.limits.max_steps = l.options.resolver_steps;
  c.limits.max_time = l.options.resolver_timeout;
  c.limits.how_to_raise = "narrow the requests with tighter pins, or raise the bounds with `lockstep lock "
                          "--resolver-steps N --resolver-timeout SECONDS`";
  // Requirements files' hashes must still admit the previous wheel.
  for (const PyRequest& r : l.requests) {
    auto it = c.previous.find(r.requirement.project);
    if (it != c.previous.end() && !r.hashes.empty() && r.hashes.count(it->second.file.sha256) == 0) {
      c.previous.erase(it);
    }
  }
  log::Timer timer("resolve Python packages");
  if (!c.previous.empty()) {
    for (const auto& [project, w] : c.previous) {
      c.previous_only.insert(project);
    }
    // A request that no longer admits its project's locked version opens that project up.
    for (const PyRequest& r : l.requests) {
      auto it = c.previous.find(r.requirement.project);
      if (it != c.previous.end() &&
          !r.requirement.specifier.contains(it->second.version, Prereleases::allow)) {
        c.previous_only.erase(r.requirement.project);
      }
    }
    LS_TRY_ASSIGN(l.resolution, resolve_wheels(c, l.requests));
    if (l.resolution.solved) {
      log::debug("resolved from the previous lock's wheels ({} index pages read)", l.resolution.index_pages);
      return {};
    }
    log::info("the previous lock's Python packages no longer fit; resolving again");
    c.previous_only.clear();
  }
  LS_TRY_ASSIGN(l.resolution, resolve_wheels(c, l.requests));
  if (!l.resolution.solved && l.resolution.pages_cached > 0) {
    // A release newer than the cached pages may be what the request needs.
    log::info("no solution with the {} index pages the cache holds; reading them again",
              l.resolution.pages_cached);
    c.refresh_pages = true;
    LS_TRY_ASSIGN(l.resolution, resolve_wheels(c, l.requests));
  }
  log::debug("resolved: {} decisions, {} conflicts, {} index pages, {} metadata files",
             l.resolution.stats.decisions, l.resolution.stats.conflicts, l.resolution.index_pages,
             l.resolution.metadata_reads);
  if (l.resolution.solved) {
    return {};
  }
  // Located at the first request the derivation rests on.
  envspec::Diagnostics diagnostics;
  const PyRequest* at = l.requests.empty() ? nullptr : &l.requests.front();
  for (const PyRequest& r : l.requests) {
    if (!l.resolution.root_causes.empty() && r.where == l.resolution.root_causes.front()) {
      at = &r;
      break;
    }
  }
  // A Debian package's fixed distribution in the derivation (the provider's "PROJECT VERSION is
  // installed by DEB DEB_VERSION"): that packages.apt entry is one to change.
  for (const auto& [project, d] : l.apt_dists) {
    const std::string fixed =
        fmt::format("{} {} is installed by {}", project, d.version.str(), installed_by(d));
    if (l.resolution.explanation.find(fixed) != std::string::npos &&
        std::find(l.resolution.root_causes.begin(), l.resolution.root_causes.end(), d.where) ==
            l.resolution.root_causes.end()) {
      l.resolution.root_causes.push_back(d.where);
    }
  }
  std::string text = l.resolution.explanation;
  std::string indented;
  for (std::size_t start = 0; start <= text.size();) {
    std::size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end;
    indented += "  " + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  const std::string change = l.resolution.root_causes.empty()
                                 ? std::string("change the requests")
                                 : fmt::format("change {}", fmt::join(l.resolution.root_causes, " or "));
  const std::string message = fmt::format("no set of Python packages satisfies the request for {}:\n{}{}",
                                          l.target.describe(), indented, change);
  if (at != nullptr) {
    diagnostics.error(at->location, at->where, message);
    return diagnostics.to_error();
  }
  return invalid_input("{}", message);
}

// Pass 4: each chosen wheel: a sha256 on the index, and its size (a JSON index gives it; else the
// wheel is fetched into the store, verified by its sha256).
Result<void> check_and_size(PipLock& l) {
  std::vector<std::string> problems;
  std::vector<Download> downloads;
  std::vector<ResolvedWheel*> unsized;
  for (ResolvedWheel& w : l.resolution.wheels) {
    if (w.file.sha256.empty()) {
      problems.push_back(
          fmt::format("the index gives no sha256 for {} ({}); lockstep pins every file by sha256: "
                      "use an index that lists #sha256= hashes",
                      w.file.filename, w.file.url));
      continue;
    }
    if (w.file.yanked) {
      log::warn("{} {} is yanked{}{}; using it because it is pinned exactly", w.project, w.version.str(),
                w.file.yanked_reason.empty() ? "" : ": ", w.file.yanked_reason);
    }
    if (!w.file.size) {
      LS_TRY_ASSIGN(Digest sha, Digest::parse("sha256:" + w.file.sha256));
      downloads.push_back(Download{w.file.url, sha, std::nullopt, w.file.filename});
      unsized.push_back(&w);
    }
  }
  if (!problems.empty()) {
    return invalid_input("can't lock packages.pip:\n  {}", fmt::join(problems, "\n  "));
  }
  if (downloads.empty()) {
    return {};
  }
  log::Timer t("fetch wheels");
  FetchOptions fetch;
  fetch.max_size = k_max_wheel;
  fetch.local_roots = l.local_roots;
  LS_TRY_ASSIGN(std::vector<BlobInfo> blobs, fetch_all(l.store, downloads, fetch));
  for (std::size_t i = 0; i < unsized.size(); ++i) {
    unsized[i]->file.size = static_cast<std::uint64_t>(blobs[i].size);
  }
  return {};
}

// The stack's recipe pins that no chosen wheel requires: the framework wheel's own metadata is the
// source of its set, so such a pin is likely stale (docs/python-resolver.md, "The stack").
void check_recipe_pins(const PipLock& l) {
  for (const ResolvedWheel& w : l.resolution.wheels) {
    if (w.needed_by_wheels) {
      continue;
    }
    std::vector<std::string> from;
    bool only_stack = true;
    for (const PyRequest& r : l.requests) {
      if (r.requirement.project == w.project) {
        from.push_back(r.where);
        only_stack = only_stack && r.where.starts_with("stack.");
      }
    }
    const bool is_framework = w.project == "torch" || w.project == "tensorflow" || w.project == "jax";
    if (!from.empty() && only_stack && !is_framework) {
      log::warn("{} pins {}=={}, but no chosen wheel's metadata requires it; the recipe may be out of date "
                "(the framework wheel's Requires-Dist is the source of its set)",
                fmt::join(from, ", "), w.project, w.version.str());
    }
  }
}

// Pass 5: one artifact per wheel, with the chain that brought it in.
void add_artifacts(PipLock& l) {
  check_recipe_pins(l);
  for (const ResolvedWheel& w : l.resolution.wheels) {
    envspec::LockedArtifact a;
    a.kind = "wheel";
    a.name = w.project;
    a.version = w.version.str();
    a.arch = tag_text(w.wheel);
    a.group = "python";
    a.size = *w.file.size;
    a.sha256 = unwrap(Digest::parse("sha256:" + w.file.sha256));
    a.url = w.file.url;
    a.repo = w.repo;
    a.reason = w.reason;
    if (w.shadows) {
      a.reason += fmt::format("; shadows the base image's {}", *w.shadows);
      log::info("{} {} shadows the base image's {}", w.project, a.version, *w.shadows);
    }
    l.lock.artifacts.push_back(std::move(a));
  }
}

} // namespace

Result<void> lock_wheels(const envspec::Spec& spec, envspec::Lock& lock, const BlobStore& store,
                         const LockOptions& options, const BaseMetadata* base) {
  if (spec.packages.pip.empty()) {
    return {};
  }
  PipLock l(spec, lock, store, options, base);
  log::Timer prepare_timer("Python target and requests");
  // 1. The target: the image's Python and glibc, from its Debian packages.
  LS_TRY(find_target(l));
  LS_TRY(find_apt_distributions(l));
  find_conda_distributions(l);
  // 2. The requests that apply to the target.
  LS_TRY(collect_requests(l));
  prepare_timer.stop();
  // 3. The versions: PubGrub over the spec's indexes and wheelhouses.
  LS_TRY(resolve(l));
  // 4. Each chosen wheel pinned by sha256, with its size.
  LS_TRY(check_and_size(l));
  // 5. One artifact per wheel.
  add_artifacts(l);
  return {};
}

} // namespace lockstep::builder
