#include "builder/lock/platforms_lock.hpp"

#include "support/base/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace lockstep::builder {

std::optional<envspec::Lock> previous_for_platform(const std::optional<envspec::Lock>& previous,
                                                   const std::string& platform) {
  if (!previous) {
    return std::nullopt;
  }
  const std::vector<std::string> had = envspec::lock_platforms(*previous);
  if (std::find(had.begin(), had.end(), platform) == had.end()) {
    return std::nullopt;
  }
  return envspec::lock_for_platform(*previous, platform);
}

namespace {

// The version a requested package is compared by across platforms: a Debian binNMU (+bN, a
// rebuild of the same source for one architecture) is the same choice.
std::string choice_version(const envspec::LockedArtifact& a) {
  if (a.kind != "deb") {
    return a.version;
  }
  const std::size_t plus = a.version.rfind("+b");
  if (plus != std::string::npos && plus + 2 < a.version.size() &&
      std::all_of(a.version.begin() + static_cast<std::ptrdiff_t>(plus) + 2, a.version.end(),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    return a.version.substr(0, plus);
  }
  return a.version;
}

// Every platform must make the same top-level choices: what the spec asks for by name.
Result<void> check_same_choices(const std::vector<std::string>& platforms,
                                const std::vector<envspec::Lock>& locks) {
  using Key = std::pair<std::string, std::string>; // kind, name
  std::map<Key, std::pair<std::size_t, const envspec::LockedArtifact*>> first;
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < locks.size(); ++i) {
    for (const envspec::LockedArtifact& a : locks[i].artifacts) {
      if (a.reason.rfind("requested", 0) != 0 || a.kind == "git") {
        continue;
      }
      auto [it, inserted] = first.emplace(Key{a.kind, a.name}, std::pair{i, &a});
      if (!inserted && choice_version(*it->second.second) != choice_version(a)) {
        problems.push_back(fmt::format("{} {}: {} on {}, {} on {}", a.kind, a.name,
                                       it->second.second->version, platforms[it->second.first], a.version,
                                       platforms[i]));
      }
    }
  }
  if (problems.empty()) {
    return {};
  }
  return invalid_input("the platforms resolve the spec's own packages to different versions:\n  {}\n"
                       "pin the version every platform has (e.g. 'name=VERSION' or 'name==VERSION'), or "
                       "lock the platforms in specs of their own",
                       fmt::join(problems, "\n  "));
}

// What makes two platforms' artifacts the same one, with their conda records. The reason too:
// each platform's share of the lock is then the lock that platform alone would have.
std::string identity(const envspec::LockedArtifact& a) {
  return fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}", a.kind, a.name, a.version, a.arch, a.group,
                     a.sha256.hex(), a.url, a.repo, a.rev, a.suite, a.reason);
}

} // namespace

Result<envspec::Lock> merge_platform_locks(const std::vector<std::string>& platforms,
                                           std::vector<envspec::Lock> locks) {
  envspec::Lock merged;
  merged.tool = locks.front().tool;
  merged.epoch = locks.front().epoch;
  merged.platform = platforms.front();
  merged.platforms = platforms;
  for (const envspec::Lock& one : locks) {
    merged.platform_spec_digests.push_back(one.spec_digest);
  }
  merged.repos = locks.front().repos;
  // One stack where every platform solved it alike, else each platform's.
  if (std::all_of(locks.begin(), locks.end(),
                  [&](const envspec::Lock& l) { return l.stack == locks.front().stack; })) {
    merged.stack = locks.front().stack;
  } else {
    for (std::size_t i = 0; i < locks.size(); ++i) {
      if (!locks[i].stack) {
        return internal_error("{} has no stack and {} has one", platforms[i], platforms.front());
      }
      merged.stacks.emplace_back(platforms[i], *locks[i].stack);
    }
  }
  for (std::size_t i = 1; i < locks.size(); ++i) {
    const std::vector<envspec::LockedRepo>& repos = locks[i].repos;
    if (repos.size() != merged.repos.size()) {
      return internal_error("the platforms' locks have different repositories");
    }
    for (std::size_t r = 0; r < repos.size(); ++r) {
      envspec::LockedRepo& into = merged.repos[r];
      if (into.kind == "conda") {
        for (const std::string& subdir : repos[r].subdirs) {
          if (std::find(into.subdirs.begin(), into.subdirs.end(), subdir) == into.subdirs.end()) {
            into.subdirs.push_back(subdir);
          }
        }
        continue;
      }
      if (into.url != repos[r].url || into.release_sha256 != repos[r].release_sha256 ||
          into.suites != repos[r].suites) {
        return Error{ExitCode::external,
                     fmt::format("{} changed while the platforms were locked ({} and {} read different "
                                 "Release files); run lockstep lock again",
                                 into.url, platforms.front(), platforms[i])};
      }
    }
  }
  for (std::size_t i = 0; i < locks.size(); ++i) {
    if (locks[i].base) {
      merged.bases.push_back(*locks[i].base);
    }
  }
  std::vector<envspec::LockedArtifact> artifacts;
  std::multimap<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < locks.size(); ++i) {
    for (envspec::LockedArtifact& a : locks[i].artifacts) {
      const std::string key = identity(a);
      auto [from, to] = seen.equal_range(key);
      auto same = std::find_if(from, to, [&](const auto& e) { return artifacts[e.second].conda == a.conda; });
      if (same != to) {
        artifacts[same->second].platforms.push_back(platforms[i]);
        continue;
      }
      seen.emplace(key, artifacts.size());
      a.platforms = {platforms[i]};
      artifacts.push_back(std::move(a));
    }
  }
  for (envspec::LockedArtifact& a : artifacts) {
    if (a.platforms.size() == platforms.size()) {
      a.platforms.clear(); // every platform's
    }
  }
  envspec::sort_artifacts(artifacts);
  merged.artifacts = std::move(artifacts);
  return merged;
}

Result<envspec::Lock> lock_platforms(const envspec::Spec& spec, const BlobStore& store,
                                     const LockOptions& options, const LockOnePlatform& lock_one) {
  std::vector<std::string> names;
  std::vector<envspec::Lock> locks;
  for (const oci::Platform& platform : spec.platforms) {
    const std::string name = platform.str();
    log::info("locking {}", name);
    LockOptions one = options;
    one.previous = previous_for_platform(options.previous, name);
    Result<envspec::Lock> lock = lock_one(envspec::spec_for_platform(spec, platform), store, one);
    if (!lock) {
      Error e = lock.error();
      e.message = names.empty() ? fmt::format("{}: {}", name, e.message)
                                : fmt::format("{}: {}\n(resolved on {}; every platform must have what the "
                                              "spec asks for)",
                                              name, e.message, fmt::join(names, ", "));
      return e;
    }
    names.push_back(name);
    locks.push_back(std::move(*lock));
  }
  LS_TRY(check_same_choices(names, locks));
  LS_TRY_ASSIGN(envspec::Lock merged, merge_platform_locks(names, std::move(locks)));
  merged.spec_digest = spec.digest;
  merged.inputs = envspec::lock_inputs(spec);
  return merged;
}

} // namespace lockstep::builder
