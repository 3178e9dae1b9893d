#include "builder/lock/relock.hpp"

#include "builder/lock/base_image.hpp"
#include "builder/lock/epoch.hpp"
#include "builder/lock/lock.hpp"
#include "envspec/load/load.hpp"
#include "envspec/settings/settings.hpp"
#include "support/base/log.hpp"
#include "support/debian/apt_packages.hpp"
#include "support/net/curl_lib.hpp"
#include "support/store/blob_store.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <future>
#include <iterator>
#include <map>
#include <set>

namespace lockstep::builder {

std::filesystem::path lock_path_of(const std::filesystem::path& spec_file, const std::string& lock_arg) {
  return lock_arg.empty() ? envspec::default_lock_path(spec_file) : std::filesystem::absolute(lock_arg);
}

namespace {

Result<void> write_lock(const std::filesystem::path& path, const std::string& text) {
  LS_TRY_ASSIGN(AtomicFile file, AtomicFile::create(path, 0644));
  LS_TRY(file.write(text));
  return file.commit();
}

// The lock already at `path`, if there is one that parses; a broken one is ignored with a warning
// (it is about to be replaced).
std::optional<envspec::Lock> existing_lock(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) {
    return std::nullopt;
  }
  Result<envspec::Lock> r = envspec::read_lock(path);
  if (!r) {
    log::warn("ignoring the existing lock: {}", r.error().message);
    return std::nullopt;
  }
  return std::move(*r);
}

// "PATH is stale: ...:\n  change\n  change\nrun ..." for lock --check and build --locked.
Error stale_error(const std::string& prefix, const std::filesystem::path& path,
                  const std::vector<std::string>& changes, const char* advice) {
  std::string list;
  for (const std::string& c : changes) {
    list += "\n  " + c;
  }
  return Error{ExitCode::check_failed,
               fmt::format("{}{} is stale: the spec changed since it was locked:{}\n{}", prefix,
                           path.string(), list, advice)};
}

// The epoch a new lock records.
Result<std::int64_t> lock_epoch(const std::optional<envspec::Lock>& previous) {
  if (std::getenv("SOURCE_DATE_EPOCH") != nullptr) {
    return image_epoch();
  }
  return previous ? previous->epoch : k_default_epoch;
}

// `lock --check`: the lock at `lock_path` against the spec's lock inputs and, when those match, its
// image base against what the base's reference names now.
Result<RelockOutcome> check_lock(const envspec::Spec& spec, const std::filesystem::path& lock_path,
                                 const nlohmann::json& inputs) {
  LS_TRY_ASSIGN(envspec::Lock lock, envspec::read_lock(lock_path));
  std::vector<std::string> changes = envspec::describe_input_changes(lock.inputs, inputs);
  bool base_moved = false;
  if (changes.empty() && is_image_base(spec)) {
    // The same reference may name another manifest now (a tag that moved, a layout rebuilt).
    LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
    Result<std::optional<std::string>> moved =
        base_change(spec, lock, store, registry::default_client_options());
    if (!moved) {
      log::warn("can't check whether the base image moved since it was locked: {}", moved.error().message);
    } else if (*moved) {
      changes.push_back(**moved);
      base_moved = true;
    }
  }
  RelockOutcome outcome;
  outcome.action = RelockAction::checked;
  outcome.lock_path = lock_path;
  outcome.artifacts = lock.artifacts.size();
  if (base_moved) {
    outcome.stale =
        Error{ExitCode::check_failed,
              fmt::format("{} is stale: {}\nbuilds keep using the locked manifest; run `lockstep lock "
                          "--update base` to move the lock to the new one",
                          lock_path.string(), changes.front())};
  } else if (!changes.empty()) {
    outcome.stale = stale_error("", lock_path, changes, "run `lockstep lock` to update it");
  }
  outcome.changes = std::move(changes);
  return outcome;
}

// Each name `lock --update` gave must be in the new lock ("base": the spec's base must be an image).
Result<void> check_update_names(const std::vector<std::string>& names, const envspec::Spec& spec,
                                const envspec::Lock& lock) {
  for (const std::string& name : names) {
    if (name == "base") {
      if (!is_image_base(spec)) {
        return invalid_input("--update base: the spec's base is not an image (base: {{image: ...}} or "
                             "{{oci: ...}})");
      }
      continue;
    }
    const bool known = std::any_of(lock.artifacts.begin(), lock.artifacts.end(),
                                   [&name](const envspec::LockedArtifact& a) { return a.name == name; });
    if (!known) {
      return invalid_input("--update {}: no such package or git source in the lock", name);
    }
  }
  return {};
}

// What a re-lock of `spec` with nothing kept would change in `lock`, by kind and name; nothing is
// written. Debs name the suite of the new version and whether it is a security update.
// Whether a re-lock would keep `a`'s release: a deb of the same version and file, a conda package
// of the same version and build, a wheel or git source of the same version (another wheel file of
// one version, for another platform tag, is not an update).
bool same_release(const envspec::LockedArtifact& a, const envspec::LockedArtifact& b) {
  if (a.version != b.version) {
    return false;
  }
  if (a.kind == "deb") {
    return a.sha256 == b.sha256;
  }
  if (a.kind == "conda" && a.conda && b.conda) {
    return a.conda->build == b.conda->build;
  }
  return true;
}

Result<std::vector<OutdatedEntry>> compare_with_now(const envspec::Spec& spec, const envspec::Lock& lock,
                                                    BlobStore& store, const RelockRequest& args) {
  LockOptions options;
  options.update_all = true; // nothing kept: what a `lock --update` would take now
  options.refresh = true;
  options.resolver_steps = args.resolver_steps;
  options.resolver_timeout = args.resolver_timeout;
  options.epoch = lock.epoch;
  LS_TRY_ASSIGN(const envspec::Lock now, make_lock(spec, store, options));

  using Key = std::pair<std::string, std::string>; // kind, name (NAME:ARCH for a foreign deb)
  const auto key = [&spec](const envspec::LockedArtifact& a) {
    const std::string& native = spec.platform.architecture;
    return Key{a.kind, a.kind == "deb" && !a.arch.empty() && a.arch != "all" && a.arch != native
                           ? a.name + ":" + a.arch
                           : a.name};
  };
  std::map<Key, const envspec::LockedArtifact*> before;
  std::map<Key, const envspec::LockedArtifact*> after;
  for (const envspec::LockedArtifact& a : lock.artifacts) {
    before[key(a)] = &a;
  }
  for (const envspec::LockedArtifact& a : now.artifacts) {
    after[key(a)] = &a;
  }
  const auto url_of_repo = [&now](int repo) {
    return repo >= 0 && static_cast<std::size_t>(repo) < now.repos.size()
               ? now.repos[static_cast<std::size_t>(repo)].url
               : std::string();
  };
  std::vector<OutdatedEntry> entries;
  if (lock.base && now.base && lock.base->manifest != now.base->manifest) {
    entries.push_back(OutdatedEntry{"base", lock.base->image, lock.base->manifest.str(),
                                    now.base->manifest.str(), "", false});
  }
  std::set<Key> keys;
  for (const auto& [k, a] : before) {
    keys.insert(k);
  }
  for (const auto& [k, a] : after) {
    keys.insert(k);
  }
  for (const Key& k : keys) {
    const auto b = before.find(k);
    const auto a = after.find(k);
    const envspec::LockedArtifact* old = b == before.end() ? nullptr : b->second;
    const envspec::LockedArtifact* fresh = a == after.end() ? nullptr : a->second;
    if (old != nullptr && fresh != nullptr && same_release(*old, *fresh)) {
      continue;
    }
    OutdatedEntry e{
        k.first, k.second, old != nullptr ? old->version : "", fresh != nullptr ? fresh->version : "",
        "",      false};
    if (fresh != nullptr) {
      e.suite = fresh->suite;
      e.security = fresh->kind == "deb" && is_security_source(fresh->suite, url_of_repo(fresh->repo));
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

} // namespace

Result<RelockOutcome> relock(const RelockRequest& args) {
  // Loading libcurl (dlopen of it and its libraries: about 15 ms of a core) overlaps reading the
  // spec when the lock will surely download (no lock yet, or --update). A re-lock loads it only
  // when it must fetch something: most of its index pages and METADATA are in the store, and a
  // load running beside it slows it (the threads share one address space).
  std::future<void> curl_ready;
  if (std::error_code ec;
      args.update_given ||
      !std::filesystem::exists(lock_path_of(std::filesystem::absolute(args.spec, ec), args.lock), ec)) {
    curl_ready = std::async(std::launch::async, [] { (void)curl::libcurl(); });
  }
  envspec::LoadOptions load;
  load.allow_outside = args.allow_outside;
  log::Timer load_timer("read the spec");
  LS_TRY_ASSIGN(envspec::Spec spec, envspec::load_spec(args.spec, load));
  const std::filesystem::path lock_path = lock_path_of(spec.file, args.lock);
  const nlohmann::json inputs = envspec::lock_inputs(spec);
  load_timer.stop();

  if (args.check) {
    return check_lock(spec, lock_path, inputs);
  }

  RelockOutcome outcome;
  outcome.lock_path = lock_path;
  log::Timer previous_timer("read the previous lock");
  const std::optional<envspec::Lock> previous = existing_lock(lock_path);
  previous_timer.stop();
  const bool fresh = previous && envspec::describe_input_changes(previous->inputs, inputs).empty();
  if (fresh && !args.update_given && std::getenv("SOURCE_DATE_EPOCH") == nullptr) {
    outcome.action = RelockAction::kept;
    outcome.digest = envspec::lock_digest(*previous);
    outcome.artifacts = previous->artifacts.size();
    return outcome;
  }

  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  LockOptions options;
  options.previous = previous;
  std::vector<std::string> names;
  std::copy_if(args.update.begin(), args.update.end(), std::back_inserter(names),
               [](const std::string& n) { return !n.empty(); });
  if (args.security) {
    // Exactly the debs whose newest build now comes from a security suite; a re-lock that keeps
    // every other version then moves them and whatever their new versions need.
    if (!previous) {
      return invalid_input("--security: {} has no lock to update; run `lockstep lock` first",
                           lock_path.string());
    }
    LS_TRY_ASSIGN(const std::vector<OutdatedEntry> now, compare_with_now(spec, *previous, store, args));
    names.clear();
    for (const OutdatedEntry& e : now) {
      if (e.kind == "deb" && e.security && !e.locked.empty() && !e.available.empty()) {
        names.push_back(e.name.substr(0, e.name.find(':')));
      }
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    if (names.empty()) {
      outcome.action = RelockAction::unchanged;
      outcome.digest = envspec::lock_digest(*previous);
      outcome.artifacts = previous->artifacts.size();
      outcome.no_security_updates = true;
      return outcome;
    }
  }
  options.update_all = args.update_given && names.empty() && !args.security;
  options.refresh = args.refresh;
  options.resolver_steps = args.resolver_steps;
  options.resolver_timeout = args.resolver_timeout;
  options.update.insert(names.begin(), names.end());
  LS_TRY_ASSIGN(options.epoch, lock_epoch(previous));
  LS_TRY_ASSIGN(envspec::Lock lock, make_lock(spec, store, options));
  if (!names.empty() && previous) {
    LS_TRY(check_update_names(names, spec, lock));
  }
  outcome.changes = previous ? describe_lock_changes(*previous, lock) : std::vector<std::string>{};
  log::Timer write_timer("write the lock");
  const std::string text = envspec::render_lock(lock);
  const bool same = previous && envspec::render_lock(*previous) == text;
  if (!same) {
    LS_TRY(write_lock(lock_path, text));
  }
  write_timer.stop();
  outcome.action = same ? RelockAction::unchanged : RelockAction::written;
  outcome.digest = envspec::lock_digest(lock);
  outcome.artifacts = lock.artifacts.size();
  return outcome;
}

Result<OutdatedReport> outdated(const RelockRequest& args) {
  envspec::LoadOptions load;
  load.allow_outside = args.allow_outside;
  LS_TRY_ASSIGN(const envspec::Spec spec, envspec::load_spec(args.spec, load));
  OutdatedReport report;
  report.lock_path = lock_path_of(spec.file, args.lock);
  if (std::error_code ec; !std::filesystem::exists(report.lock_path, ec)) {
    return invalid_input("{}: no lock to compare with; run `lockstep lock` first", report.lock_path.string());
  }
  LS_TRY_ASSIGN(const envspec::Lock lock, envspec::read_lock(report.lock_path));
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  LS_TRY_ASSIGN(report.entries, compare_with_now(spec, lock, store, args));
  return report;
}

Result<std::optional<envspec::Lock>> lock_for_build(const envspec::Spec& spec, const std::string& lock_arg,
                                                    bool locked) {
  if (!spec.needs_lock()) {
    return std::optional<envspec::Lock>();
  }
  const std::filesystem::path lock_path = lock_path_of(spec.file, lock_arg);
  const nlohmann::json inputs = envspec::lock_inputs(spec);
  std::optional<envspec::Lock> previous;
  if (locked) {
    Result<envspec::Lock> r = envspec::read_lock(lock_path);
    if (!r) {
      return r.error().with_context("--locked");
    }
    previous = std::move(*r);
  } else {
    previous = existing_lock(lock_path);
  }
  std::vector<std::string> changes =
      previous ? envspec::describe_input_changes(previous->inputs, inputs) : std::vector<std::string>{};
  if (previous && changes.empty()) {
    return previous;
  }
  if (locked) {
    return stale_error("--locked: ", lock_path, changes, "run `lockstep lock` and commit the lock");
  }
  log::info("{} {}; locking first", lock_path.string(), previous ? "is stale" : "does not exist");
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  LockOptions options;
  options.previous = previous;
  LS_TRY_ASSIGN(options.epoch, lock_epoch(previous));
  LS_TRY_ASSIGN(envspec::Lock lock, make_lock(spec, store, options));
  LS_TRY(write_lock(lock_path, envspec::render_lock(lock)));
  log::info("wrote {} ({} artifacts)", lock_path.string(), lock.artifacts.size());
  return std::optional<envspec::Lock>(std::move(lock));
}

} // namespace lockstep::builder
