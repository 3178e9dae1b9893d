#include "builder/lock/lock.hpp"

#include "builder/lock/apt_repo.hpp"
#include "builder/lock/apt_resolver.hpp"
#include "builder/lock/base_contents.hpp"
#include "builder/lock/base_image.hpp"
#include "builder/lock/conda_lock.hpp"
#include "builder/lock/git_source.hpp"
#include "builder/lock/platforms_lock.hpp"
#include "builder/lock/recipes_source.hpp"
#include "builder/lock/wheel_lock.hpp"
#include "envspec/spec/host_paths.hpp"
#include "envspec/stack/recipes.hpp"
#include "envspec/stack/stack.hpp"
#include "support/base/log.hpp"
#include "support/base/version.hpp"
#include "support/debian/apt_packages.hpp"
#include "support/net/http.hpp"
#include "support/system/confine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <future>
#include <iterator>
#include <map>

namespace lockstep::builder {

namespace {

bool starts_with_any(const std::string& name, std::initializer_list<std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&name](std::string_view p) { return name.rfind(p, 0) == 0; });
}

// The selected packages each package's Depends/Pre-Depends lead to (every alternative that is selected).
std::map<std::string, std::vector<std::string>>
dependency_edges(const std::vector<ResolvedPackage>& selected) {
  std::map<std::string, std::vector<std::string>> provided_by; // name or provided name -> selected packages
  for (const ResolvedPackage& r : selected) {
    provided_by[r.package->name].push_back(r.package->name);
    for (const DebRelation& p : r.package->provides) {
      provided_by[p.name].push_back(r.package->name);
    }
  }
  std::map<std::string, std::vector<std::string>> edges;
  for (const ResolvedPackage& r : selected) {
    std::vector<std::string>& out = edges[r.package->name];
    for (const DebRelationField* field : {&r.package->pre_depends, &r.package->depends}) {
      for (const auto& group : *field) {
        for (const DebRelation& alt : group) {
          auto it = provided_by.find(alt.name);
          if (it != provided_by.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
          }
        }
      }
    }
  }
  return edges;
}

// Assigns each selected package to the first group (base, mpi, cuda, python, app) whose roots reach it.
std::map<std::string, std::string> assign_groups(const std::vector<ResolvedPackage>& selected,
                                                 const std::map<std::string, std::string>& root_groups) {
  const auto edges = dependency_edges(selected);
  std::map<std::string, std::string> group;
  for (const char* g : {"base", "mpi", "cuda", "python", "app"}) {
    std::deque<std::string> queue;
    for (const auto& [name, rg] : root_groups) {
      if (rg == g && group.count(name) == 0) {
        queue.push_back(name);
      }
    }
    while (!queue.empty()) {
      std::string name = queue.front();
      queue.pop_front();
      if (!group.emplace(name, g).second) {
        continue;
      }
      auto it = edges.find(name);
      if (it != edges.end()) {
        for (const std::string& next : it->second) {
          if (group.count(next) == 0) {
            queue.push_back(next);
          }
        }
      }
    }
  }
  for (const ResolvedPackage& r : selected) {
    group.emplace(r.package->name, "app"); // not reachable from any root (cannot happen; stay safe)
  }
  return group;
}

// What an image base has installed, as the resolver takes it: over a base image, apt packages
// install like `apt-get install` over the base's dpkg status.
Result<std::vector<InstalledPackage>> base_installed(const envspec::Spec& spec, const BaseMetadata* base) {
  if (base == nullptr) {
    return std::vector<InstalledPackage>();
  }
  if (!base->has_dpkg_status) {
    return base_error(spec, invalid_input("{} has no dpkg database (/var/lib/dpkg/status), so packages.apt "
                                          "can't be installed over it; build on a Debian or Ubuntu image",
                                          locked_base_name(spec)));
  }
  auto installed = parse_dpkg_status(base->dpkg_status, locked_base_name(spec) + ": /var/lib/dpkg/status");
  if (!installed) {
    return base_error(spec, installed.error());
  }
  return installed;
}

// The packages of the spec's apt repositories, with what the lock records of each repository.
struct AptIndexes {
  std::vector<AptPackage> all;
  std::vector<std::string> pool_urls;      ///< by repository index ("" for other kinds)
  std::vector<envspec::LockedRepo> locked; ///< by repository index
  std::vector<bool> loaded;                ///< which entries of `locked` were filled
};

Result<AptIndexes> load_apt_indexes(const envspec::Spec& spec, const BlobStore& store) {
  const std::string arch = envspec::debian_arch(spec.platform);
  AptIndexes out;
  out.pool_urls.resize(spec.repos.size());
  out.locked.resize(spec.repos.size());
  out.loaded.resize(spec.repos.size(), false);
  for (std::size_t i = 0; i < spec.repos.size(); ++i) {
    const envspec::Repo& repo = spec.repos[i];
    if (repo.kind != envspec::Repo::Kind::apt) {
      continue;
    }
    log::info("reading {}{}", repo.url_text,
              repo.flat ? "" : fmt::format(" {}", fmt::join(repo.suites, ", ")));
    LS_TRY_ASSIGN(AptRepoIndex index, load_apt_repo(repo, static_cast<int>(i), arch, store));
    out.locked[i] = index.locked;
    out.loaded[i] = true;
    out.pool_urls[i] = index.pool_url;
    if (out.all.empty()) {
      out.all = std::move(index.packages);
    } else {
      out.all.reserve(out.all.size() + index.packages.size());
      std::move(index.packages.begin(), index.packages.end(), std::back_inserter(out.all));
    }
  }
  return out;
}

Result<void> lock_apt(const envspec::Spec& spec, const BlobStore& store, const LockOptions& options,
                      const BaseMetadata* base, envspec::Lock& lock, std::optional<AptIndexes> loaded) {
  const std::string arch = envspec::debian_arch(spec.platform);
  if (!loaded) {
    LS_TRY_ASSIGN(loaded, load_apt_indexes(spec, store));
  }
  std::vector<AptPackage> all = std::move(loaded->all);
  const std::vector<std::string>& pool_urls = loaded->pool_urls;
  for (std::size_t i = 0; i < spec.repos.size(); ++i) {
    if (loaded->loaded[i]) {
      lock.repos[i] = loaded->locked[i];
    }
  }
  // An `all` package appears in every architecture's index, and a package in several suites of one
  // entry: keep one record per repository (the same bytes; two different files of one version stay
  // apart, and the universe orders them by digest). The record kept names a security suite that
  // lists it if one does (Ubuntu copies each security update into -updates too), else the first
  // suite in the spec's order.
  // Sorted by position (an AptPackage is large to move), then moved once into place.
  log::Timer dedup_timer("deduplicate packages");
  std::vector<std::uint32_t> order(all.size());
  std::vector<char> other_suite(all.size()); // 0 for a security suite: it sorts first
  for (std::size_t i = 0; i < order.size(); ++i) {
    order[i] = static_cast<std::uint32_t>(i);
    other_suite[i] = is_security_suite(all[i].suite) ? 0 : 1;
  }
  std::sort(order.begin(), order.end(), [&all, &other_suite](std::uint32_t x, std::uint32_t y) {
    const AptPackage& a = all[x];
    const AptPackage& b = all[y];
    return std::tie(a.repo, a.name, a.architecture, a.version, a.sha256, other_suite[x], x) <
           std::tie(b.repo, b.name, b.architecture, b.version, b.sha256, other_suite[y], y);
  });
  order.erase(std::unique(order.begin(), order.end(),
                          [&all](std::uint32_t x, std::uint32_t y) {
                            const AptPackage& a = all[x];
                            const AptPackage& b = all[y];
                            return a.repo == b.repo && a.name == b.name && a.architecture == b.architecture &&
                                   a.version == b.version && a.sha256 == b.sha256;
                          }),
              order.end());
  std::vector<AptPackage> unique;
  unique.reserve(order.size());
  for (std::uint32_t i : order) {
    unique.push_back(std::move(all[i]));
  }
  all = std::move(unique);
  LS_TRY_ASSIGN(std::vector<InstalledPackage> installed, base_installed(spec, base));
  dedup_timer.stop();
  log::Timer universe_timer("index packages");
  std::vector<int> priorities;
  for (const envspec::Repo& r : spec.repos) {
    priorities.push_back(r.priority);
  }
  AptUniverse universe(std::move(all), std::move(installed), std::move(priorities));
  universe_timer.stop();

  ResolveOptions ro;
  ro.native_arch = arch;
  std::map<std::string, std::string> root_groups;
  if (spec.base.kind == envspec::BaseImage::Kind::debian) {
    ro.with_essential = true;
    ro.with_required = spec.base.variant == envspec::DebianVariant::required;
    if (spec.base.variant == envspec::DebianVariant::apt) {
      ro.requests.push_back(AptRequest{"apt", std::nullopt, std::nullopt, "base (variant apt)"});
    }
  }
  for (std::size_t i = 0; i < spec.packages.apt.size(); ++i) {
    const envspec::PackageRequest& p = spec.packages.apt[i];
    LS_TRY_ASSIGN(AptRequest req,
                  make_apt_request(p.name, p.arch, p.version,
                                   p.origin.empty() ? fmt::format("packages.apt[{}]", i) : p.origin));
    ro.requests.push_back(std::move(req));
    root_groups[p.name] = apt_group_of(p.name);
  }
  if (options.previous && !options.update_all) {
    for (const envspec::LockedArtifact& a : options.previous->artifacts) {
      if (a.kind == "deb" && options.update.count(a.name) == 0) {
        if (auto v = DebianVersion::parse(a.version)) {
          ro.preferred.emplace(a.name, *v);
        }
      }
    }
  }
  log::Timer resolve_timer("resolve packages");
  LS_TRY_ASSIGN(std::vector<ResolvedPackage> selected, resolve(universe, ro));
  resolve_timer.stop();
  for (const ResolvedPackage& r : selected) {
    const AptPackage& p = *r.package;
    const bool base_package =
        spec.base.kind == envspec::BaseImage::Kind::debian &&
        std::any_of(r.reasons.begin(), r.reasons.end(), [](const std::string& reason) {
          return reason.rfind("base (", 0) == 0 || reason.rfind("requested by base (", 0) == 0;
        });
    if (base_package) {
      root_groups[p.name] = "base";
    }
  }
  const auto groups = assign_groups(selected, root_groups);
  for (const ResolvedPackage& r : selected) {
    const AptPackage& p = *r.package;
    if (r.in_base) {
      continue; // the base image has it: the lock pins the base's manifest
    }
    if (r.replaces != nullptr) {
      log::info("{}", r.reasons.front());
    }
    envspec::LockedArtifact a;
    a.kind = "deb";
    a.name = p.name;
    a.version = p.version.str();
    a.arch = p.architecture;
    a.group = groups.at(p.name);
    a.size = p.size;
    a.sha256 = p.sha256;
    a.url = pool_urls[static_cast<std::size_t>(p.repo)] + "/" + p.filename;
    a.repo = p.repo;
    a.suite = p.suite;
    a.reason = r.reasons.empty() ? "" : r.reasons.front();
    lock.artifacts.push_back(std::move(a));
  }
  return {};
}

Result<void> lock_git(const envspec::Spec& spec, const BlobStore& store, const LockOptions& options,
                      envspec::Lock& lock) {
  for (const envspec::CopyItem& item : spec.copy) {
    if (item.git.empty()) {
      continue;
    }
    // Keep the locked commit when the spec still asks for the same rev, unless it is being updated.
    const envspec::LockedArtifact* previous = nullptr;
    if (options.previous && !options.update_all && options.update.count(item.git_text) == 0) {
      for (const envspec::LockedArtifact& a : options.previous->artifacts) {
        if (a.kind == "git" && a.name == item.git_text && a.rev == item.rev) {
          previous = &a;
        }
      }
    }
    if (previous != nullptr) {
      lock.artifacts.push_back(*previous);
      continue;
    }
    log::info("resolving {} {}", item.git_text, item.rev);
    LS_TRY_ASSIGN(std::string commit, resolve_git_rev(store.root(), item.git, item.rev));
    LS_TRY_ASSIGN(GitTreeDigest tree, git_export_digest(store.root(), item.git, commit));
    envspec::LockedArtifact a;
    a.kind = "git";
    a.name = item.git_text;
    a.version = commit;
    a.rev = item.rev;
    a.size = tree.size;
    a.sha256 = tree.sha256;
    a.url = item.git;
    a.reason = "copy";
    lock.artifacts.push_back(std::move(a));
  }
  return {};
}

// The apt part of the lock inputs: what the Debian packages were resolved from.
nlohmann::json apt_inputs(const nlohmann::json& inputs) {
  nlohmann::json j = nlohmann::json::object();
  for (const char* key : {"platform", "base", "repos", "stack"}) {
    if (inputs.contains(key)) {
      j[key] = inputs[key];
    }
  }
  if (inputs.contains("packages") && inputs["packages"].contains("apt")) {
    j["apt"] = inputs["packages"]["apt"];
  }
  return j;
}

// Keeps the previous lock's Debian packages, without reading the repositories, when nothing they
// were resolved from changed and none of them is being updated (so changing a wheel or a git
// source re-locks without touching apt).
bool reuse_apt(const LockOptions& options, envspec::Lock& lock) {
  if (!options.previous || options.update_all ||
      apt_inputs(options.previous->inputs) != apt_inputs(lock.inputs) ||
      options.previous->repos.size() != lock.repos.size() || options.previous->base != lock.base) {
    return false;
  }
  // The stack's apt requests come from the recipes too, which may have changed since.
  const auto stack_apt = [](const std::optional<envspec::LockedStack>& st) {
    std::vector<std::string> out;
    if (st) {
      for (const envspec::LockedStackChoice& c : st->choices) {
        if (c.via == "apt") {
          out.insert(out.end(), c.packages.begin(), c.packages.end());
        }
      }
    }
    return out;
  };
  if (stack_apt(options.previous->stack) != stack_apt(lock.stack)) {
    return false;
  }
  for (const envspec::LockedArtifact& a : options.previous->artifacts) {
    if (a.kind == "deb" && options.update.count(a.name) != 0) {
      return false;
    }
  }
  for (std::size_t i = 0; i < lock.repos.size(); ++i) {
    if (lock.repos[i].kind == "apt") {
      lock.repos[i] = options.previous->repos[i];
    }
  }
  for (const envspec::LockedArtifact& a : options.previous->artifacts) {
    if (a.kind == "deb") {
      lock.artifacts.push_back(a);
    }
  }
  log::debug("apt packages: the lock's inputs are unchanged; keeping its {} debs", lock.artifacts.size());
  return true;
}

// The image base: the previous lock's, when the spec still names the same reference and the base is
// not being updated; else what the reference names now.
Result<void> lock_base(const envspec::Spec& spec, const BlobStore& store, const LockOptions& options,
                       envspec::Lock& lock) {
  if (!is_image_base(spec)) {
    return {};
  }
  const auto same_reference = [&](const envspec::Lock& previous) {
    return previous.base && previous.base->image == locked_base_name(spec) &&
           previous.inputs.value("base", nlohmann::json()) == lock.inputs.value("base", nlohmann::json());
  };
  if (options.previous && !options.update_all && options.update.count("base") == 0 &&
      same_reference(*options.previous)) {
    lock.base = options.previous->base;
    return {};
  }
  log::info("resolving the base image {}", locked_base_name(spec));
  LS_TRY_ASSIGN(OpenedBase opened, open_base_image(spec, store, options.registry, std::nullopt));
  lock.base = locked_base_of(spec, opened);
  return {};
}

// Local files under the spec's directory are recorded relative to it (`wheels/x.whl`), so the
// lock, and the lock digest an image records, are the same on every machine; a build resolves
// them against the spec's directory again (resolve_lock_urls).
void relative_urls(const envspec::Spec& spec, envspec::Lock& lock) {
  const std::string dir = spec.dir.string() + "/";
  const auto relative = [&dir](std::string& url) {
    for (const std::string& prefix : {"file://" + dir, dir}) {
      if (url.rfind(prefix, 0) == 0 && url.size() > prefix.size()) {
        url = url.substr(prefix.size());
        return;
      }
    }
  };
  for (envspec::LockedArtifact& a : lock.artifacts) {
    relative(a.url);
  }
  for (envspec::LockedRepo& r : lock.repos) {
    relative(r.url);
  }
}

} // namespace

std::string deb_snapshot_url(const envspec::Lock& lock, const envspec::LockedArtifact& a,
                             const std::map<std::string, std::string>& bases) {
  if (a.repo < 0 || static_cast<std::size_t>(a.repo) >= lock.repos.size()) {
    return "";
  }
  const envspec::LockedRepo& r = lock.repos[static_cast<std::size_t>(a.repo)];
  const auto given = bases.find(r.url);
  const std::string base = given != bases.end() ? given->second : envspec::known_snapshot_base(r.url);
  const std::string date = r.suites.empty() ? r.release_date : r.suites.back().release_date;
  std::string url = envspec::snapshot_file_url(base, r.url, a.url, date);
  return url == a.url ? std::string() : url;
}

std::string resolve_spec_path(const std::string& url, const std::filesystem::path& spec_dir) {
  if (url.find("://") == std::string::npos && !url.empty() && url.front() != '/') {
    return (spec_dir / url).lexically_normal().string();
  }
  return url;
}

envspec::Lock resolve_lock_urls(const envspec::Lock& lock, const std::filesystem::path& spec_dir) {
  envspec::Lock out = lock;
  const auto absolute = [&spec_dir](std::string& url) {
    if (std::string path = resolve_spec_path(url, spec_dir); path != url) {
      url = "file://" + path;
    }
  };
  for (envspec::LockedArtifact& a : out.artifacts) {
    absolute(a.url);
  }
  for (envspec::LockedRepo& r : out.repos) {
    absolute(r.url);
  }
  return out;
}

Result<void> check_lock_local_files(const envspec::Lock& lock, const envspec::Spec& spec) {
  const std::vector<std::filesystem::path> roots = envspec::local_roots(spec);
  const envspec::Lock resolved = resolve_lock_urls(lock, spec.dir);
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < resolved.artifacts.size(); ++i) {
    const envspec::LockedArtifact& a = resolved.artifacts[i];
    if (a.kind == "git") {
      continue;
    }
    const std::string entry =
        fmt::format("{} {} {} (url {})", a.kind, a.name, a.version, lock.artifacts[i].url);
    Result<std::optional<std::filesystem::path>> local = local_url_path(a.url);
    if (!local) {
      problems.push_back(fmt::format("{}: {}", entry, local.error().message));
      continue;
    }
    if (!*local) {
      continue; // http(s)
    }
    Result<Confinement> where = confine_path(**local, roots);
    if (!where) {
      problems.push_back(fmt::format("{}: {}", entry, where.error().message));
    } else if (!where->inside()) {
      problems.push_back(fmt::format("{} leads to {}", entry, where->real.string()));
    }
  }
  if (problems.empty()) {
    return {};
  }
  return invalid_input(
      "the lock names local files outside the spec's directory {} and the local repositories the spec names; "
      "nothing was read:\n  {}\nA lock names local files only there: lock again with `lockstep lock` (do not "
      "use a lock edited by hand or made elsewhere), or name the local repository that holds them in the "
      "spec's repos",
      spec.dir.string(), fmt::join(problems, "\n  "));
}

std::string apt_group_of(const std::string& name) {
  if (starts_with_any(name, {"openmpi",        "libopenmpi", "mpich",     "libmpich", "mpi-default",
                             "python3-mpi4py", "libpmix",    "pmix",      "libucx",   "ucx",
                             "libfabric",      "libhwloc",   "hwloc",     "libpsm",   "libibverbs",
                             "ibverbs",        "librdmacm",  "rdma-core", "libmunge", "slurm"})) {
    return "mpi";
  }
  if (starts_with_any(name, {"cuda", "libcuda", "libcudnn", "libnccl", "libcublas", "libcufft", "libcurand",
                             "libcusolver", "libcusparse", "libnpp", "libnvjpeg", "libnvjitlink", "nvidia-",
                             "libnvidia-", "libcudart", "libcupti", "libnvinfer", "tensorrt"})) {
    return "cuda";
  }
  if (starts_with_any(name, {"python3", "libpython3", "python-is-python3"})) {
    return "python";
  }
  return "app";
}

Result<envspec::Lock> make_lock(const envspec::Spec& spec, const BlobStore& store,
                                const LockOptions& options) {
  if (spec.platforms.size() > 1) {
    return lock_platforms(spec, store, options, make_lock);
  }
  if (options.previous && !options.previous->platforms.empty()) {
    // A spec that names one platform of a multi-platform lock keeps that platform's versions.
    LockOptions one = options;
    one.previous = previous_for_platform(options.previous, spec.platform.str());
    return make_lock(spec, store, one);
  }
  envspec::Lock lock;
  lock.tool = fmt::format("lockstep {}", k_version);
  lock.spec_digest = spec.digest;
  lock.epoch = options.epoch;
  lock.platform = spec.platform.str();
  lock.inputs = envspec::lock_inputs(spec);
  lock.repos.resize(spec.repos.size());
  for (std::size_t i = 0; i < spec.repos.size(); ++i) {
    const envspec::Repo& r = spec.repos[i];
    lock.repos[i].kind = r.kind == envspec::Repo::Kind::apt     ? "apt"
                         : r.kind == envspec::Repo::Kind::pypi  ? "pypi"
                         : r.kind == envspec::Repo::Kind::conda ? "conda"
                                                                : "wheels";
    lock.repos[i].url = r.kind == envspec::Repo::Kind::wheels ? r.dir_text : r.url;
  }
  LS_TRY(lock_base(spec, store, options, lock));
  // Over an image base the apt indexes load while the base is read (no stack: its requests decide
  // whether apt is needed at all).
  std::future<Result<AptIndexes>> prefetched;
  envspec::Lock probe = lock; // reuse_apt() fills what it reuses
  if (is_image_base(spec) && !spec.stack && !spec.packages.apt.empty() && !reuse_apt(options, probe)) {
    prefetched = std::async(std::launch::async, [&spec, &store] { return load_apt_indexes(spec, store); });
  }
  // What the base image has installed, when packages or a stack go over it.
  std::optional<BaseMetadata> base;
  if (is_image_base(spec) && (spec.stack || !spec.packages.apt.empty() || !spec.packages.pip.empty() ||
                              !spec.packages.conda.empty())) {
    LS_TRY_ASSIGN(OpenedBase opened, open_base_image(spec, store, options.registry, lock.base));
    LS_TRY_ASSIGN(base, read_base_metadata(opened, store));
    if (!spec.packages.apt.empty() || spec.stack) {
      for (const std::string& warning : sources_the_spec_lacks(spec, *base)) {
        log::warn("{}", warning);
      }
    }
  }
  // The stack solver's packages join the spec's own requests (envspec/stack/stack.hpp).
  envspec::Spec effective = spec;
  std::optional<envspec::RecipeSet> recipes;
  envspec::StackContext context = envspec::stack_context(spec);
  if (spec.stack) {
    LS_TRY_ASSIGN(recipes, recipes_for_spec(spec, store.root()));
    if (base) {
      LS_TRY_ASSIGN(context, stack_context_over_base(spec, *base, locked_base_name(spec)));
    }
    LS_TRY_ASSIGN(envspec::StackSolution solution, envspec::solve_stack(*spec.stack, *recipes, context));
    if (!context.conda) {
      for (const std::string& line : envspec::describe_stack(solution.locked)) {
        log::info("stack: {}", line);
      }
    }
    lock.stack = std::move(solution.locked);
    for (envspec::PackageRequest& r : solution.apt) {
      effective.packages.apt.push_back(std::move(r));
    }
    for (envspec::PackageRequest& r : solution.pip) {
      effective.packages.pip.push_back(std::move(r));
    }
    for (envspec::PackageRequest& r : solution.conda) {
      effective.packages.conda.push_back(std::move(r));
    }
  }
  if (effective.base.kind == envspec::BaseImage::Kind::debian || !effective.packages.apt.empty()) {
    if (!reuse_apt(options, lock)) {
      std::optional<AptIndexes> indexes;
      if (prefetched.valid()) {
        LS_TRY_ASSIGN(indexes, prefetched.get());
      }
      LS_TRY(lock_apt(effective, store, options, base ? &*base : nullptr, lock, std::move(indexes)));
    }
  }
  LS_TRY(lock_git(effective, store, options, lock));
  LS_TRY(lock_conda(effective, store, options, base ? &*base : nullptr, lock));
  if (lock.stack && context.conda) {
    // Over conda the stack's report is what the environment's solve chose.
    envspec::complete_conda_stack(*lock.stack, *recipes, lock.artifacts);
    for (const std::string& line : envspec::describe_stack(*lock.stack)) {
      log::info("stack: {}", line);
    }
  }
  LS_TRY(lock_wheels(effective, lock, store, options, base ? &*base : nullptr));
  relative_urls(spec, lock);
  envspec::sort_artifacts(lock.artifacts);
  return lock;
}

Result<std::optional<std::string>> base_change(const envspec::Spec& spec, const envspec::Lock& lock,
                                               const BlobStore& store,
                                               const registry::ClientOptions& client) {
  if (!is_image_base(spec) || !lock.base || lock.base->image != locked_base_name(spec)) {
    return std::optional<std::string>(); // no image base, or a reference change the inputs name
  }
  LS_TRY_ASSIGN(OpenedBase now, open_base_image(spec, store, client, std::nullopt));
  if (now.image.manifest_digest == lock.base->manifest) {
    return std::optional<std::string>();
  }
  return std::optional<std::string>(fmt::format("base: {} now names manifest {}, the lock has {}",
                                                lock.base->image, now.image.manifest_digest.str(),
                                                lock.base->manifest.str()));
}

std::vector<std::string> describe_lock_changes(const envspec::Lock& before, const envspec::Lock& after) {
  using Key = std::pair<std::string, std::string>; // kind, name(:arch)
  std::map<Key, const envspec::LockedArtifact*> a;
  std::map<Key, const envspec::LockedArtifact*> b;
  const auto key = [](const envspec::LockedArtifact& x) {
    return Key{x.kind, x.arch.empty() || x.kind != "deb" ? x.name : x.name + ":" + x.arch};
  };
  for (const auto& x : before.artifacts) {
    a[key(x)] = &x;
  }
  for (const auto& x : after.artifacts) {
    b[key(x)] = &x;
  }
  std::vector<std::string> out;
  if (before.base != after.base) {
    out.push_back(fmt::format("~ base {} -> {}",
                              before.base ? before.base->image + " " + before.base->manifest.str() : "none",
                              after.base ? after.base->image + " " + after.base->manifest.str() : "none"));
  }
  // A deb says the suite its new version comes from ("~ libssl3 3.0.11-1~deb12u2 -> 3.0.15-1~deb12u1
  // (bookworm-security)").
  const auto from = [](const envspec::LockedArtifact& x) {
    return x.suite.empty() ? std::string() : " (" + x.suite + ")";
  };
  for (const auto& [k, x] : b) {
    auto it = a.find(k);
    if (it == a.end()) {
      out.push_back(fmt::format("+ {} {}{}", x->name, x->version, from(*x)));
    } else if (it->second->version != x->version || it->second->sha256 != x->sha256) {
      out.push_back(fmt::format("~ {} {} -> {}{}", x->name, it->second->version, x->version, from(*x)));
    }
  }
  for (const auto& [k, x] : a) {
    if (b.count(k) == 0) {
      out.push_back(fmt::format("- {} {}", x->name, x->version));
    }
  }
  return out;
}

} // namespace lockstep::builder
