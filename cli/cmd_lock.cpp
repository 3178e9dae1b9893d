// `lockstep lock`: resolve the spec's packages and sources into the lockfile, check it, or update it.
#include "builder/image/epoch.hpp"
#include "builder/lock/base_image.hpp"
#include "builder/lock/lock.hpp"
#include "cli/cli.hpp"
#include "envspec/load/load.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/settings/settings.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/log.hpp"
#include "support/net/curl_lib.hpp"
#include "support/system/fs.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iterator>
#include <memory>

namespace lockstep::cli {

namespace {

struct LockArgs {
  std::string spec = "lockstep.yaml";
  std::string lock;
  bool check = false;
  std::vector<std::string> update;
  bool update_given = false;
  bool refresh = false;
  bool allow_outside = false;
  std::size_t resolver_steps = builder::LockOptions{}.resolver_steps;
  long resolver_timeout_s = builder::LockOptions{}.resolver_timeout.count();
};

constexpr const char* k_examples = R"(Examples:
  lockstep lock                          resolve ./lockstep.yaml into ./lockstep.lock
  lockstep lock --check                  exit 1 if the lock is missing or stale (CI), naming what changed
  lockstep lock --update openmpi-bin     move only openmpi-bin (and what it needs) to the newest versions
  lockstep lock --update base            move an image base to the manifest its reference names now
  lockstep lock --update                 re-resolve everything to the newest versions
  lockstep lock --refresh                read every Python index page again (not the cached copies)
  lockstep lock examples/mpi-hello/lockstep.yaml --json

An existing lock's versions are kept for everything not named in --update; a lock whose inputs
(platform, base, repos, packages, git sources) match the spec is left alone without network access.
Python index pages are reused for the Cache-Control max-age the index sends (PyPI: 10 minutes);
--update and --refresh read them again, and so does a request the cached pages can't satisfy.
The lock records the image epoch: SOURCE_DATE_EPOCH when set, else the previous lock's, else 0.)";

Result<void> write_lock(const std::filesystem::path& path, const std::string& text) {
  LS_TRY_ASSIGN(AtomicFile file, AtomicFile::create(path, 0644));
  LS_TRY(file.write(text));
  return file.commit();
}

std::filesystem::path lock_path_of(const std::filesystem::path& spec_file, const std::string& lock_arg) {
  return lock_arg.empty() ? envspec::default_lock_path(spec_file) : std::filesystem::absolute(lock_arg);
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
    return builder::image_epoch();
  }
  return previous ? previous->epoch : builder::k_default_epoch;
}

Result<ExitCode> run_lock(const LockArgs& args, const Context& ctx) {
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
    LS_TRY_ASSIGN(envspec::Lock lock, envspec::read_lock(lock_path));
    std::vector<std::string> changes = envspec::describe_input_changes(lock.inputs, inputs);
    bool base_moved = false;
    if (changes.empty() && builder::is_image_base(spec)) {
      // The same reference may name another manifest now (a tag that moved, a layout rebuilt).
      LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
      Result<std::optional<std::string>> moved =
          builder::base_change(spec, lock, store, registry::default_client_options());
      if (!moved) {
        log::warn("can't check whether the base image moved since it was locked: {}", moved.error().message);
      } else if (*moved) {
        changes.push_back(**moved);
        base_moved = true;
      }
    }
    if (ctx.json) {
      nlohmann::json j{{"lock", lock_path.string()}, {"up_to_date", changes.empty()}, {"changes", changes}};
      std::printf("%s\n", j.dump(2).c_str());
    }
    if (base_moved) {
      return Error{ExitCode::check_failed,
                   fmt::format("{} is stale: {}\nbuilds keep using the locked manifest; run `lockstep lock "
                               "--update base` to move the lock to the new one",
                               lock_path.string(), changes.front())};
    }
    if (!changes.empty()) {
      return stale_error("", lock_path, changes, "run `lockstep lock` to update it");
    }
    if (!ctx.json) {
      log::info("{} is up to date ({} artifacts)", lock_path.string(), lock.artifacts.size());
    }
    return ExitCode::ok;
  }

  log::Timer previous_timer("read the previous lock");
  const std::optional<envspec::Lock> previous = existing_lock(lock_path);
  previous_timer.stop();
  const bool fresh = previous && envspec::describe_input_changes(previous->inputs, inputs).empty();
  if (fresh && !args.update_given && std::getenv("SOURCE_DATE_EPOCH") == nullptr) {
    if (ctx.json) {
      nlohmann::json j{{"lock", lock_path.string()},
                       {"written", false},
                       {"changes", nlohmann::json::array()},
                       {"digest", envspec::lock_digest(*previous).str()},
                       {"artifacts", previous->artifacts.size()}};
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      log::info("{} is up to date ({} artifacts); use --update to move versions", lock_path.string(),
                previous->artifacts.size());
    }
    return ExitCode::ok;
  }

  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  builder::LockOptions options;
  options.previous = previous;
  std::vector<std::string> names;
  std::copy_if(args.update.begin(), args.update.end(), std::back_inserter(names),
               [](const std::string& n) { return !n.empty(); });
  options.update_all = args.update_given && names.empty();
  options.refresh = args.refresh;
  options.resolver_steps = args.resolver_steps;
  options.resolver_timeout = std::chrono::seconds(args.resolver_timeout_s);
  options.update.insert(names.begin(), names.end());
  LS_TRY_ASSIGN(options.epoch, lock_epoch(previous));
  LS_TRY_ASSIGN(envspec::Lock lock, builder::make_lock(spec, store, options));
  if (!names.empty() && previous) {
    for (const std::string& name : names) {
      if (name == "base") {
        if (!builder::is_image_base(spec)) {
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
  }
  std::vector<std::string> changes =
      previous ? builder::describe_lock_changes(*previous, lock) : std::vector<std::string>{};
  log::Timer write_timer("write the lock");
  const std::string text = envspec::render_lock(lock);
  const bool same = previous && envspec::render_lock(*previous) == text;
  if (!same) {
    LS_TRY(write_lock(lock_path, text));
  }
  write_timer.stop();
  if (ctx.json) {
    nlohmann::json j{{"lock", lock_path.string()},
                     {"written", !same},
                     {"changes", changes},
                     {"digest", envspec::lock_digest(lock).str()},
                     {"artifacts", lock.artifacts.size()}};
    std::printf("%s\n", j.dump(2).c_str());
    return ExitCode::ok;
  }
  for (const std::string& c : changes) {
    log::info("  {}", c);
  }
  log::info("{} {} ({} artifacts)", same ? "unchanged:" : "wrote", lock_path.string(), lock.artifacts.size());
  return ExitCode::ok;
}

} // namespace

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
  builder::LockOptions options;
  options.previous = previous;
  LS_TRY_ASSIGN(options.epoch, lock_epoch(previous));
  LS_TRY_ASSIGN(envspec::Lock lock, builder::make_lock(spec, store, options));
  LS_TRY(write_lock(lock_path, envspec::render_lock(lock)));
  log::info("wrote {} ({} artifacts)", lock_path.string(), lock.artifacts.size());
  return std::optional<envspec::Lock>(std::move(lock));
}

void register_lock(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<LockArgs>();
  auto* cmd = app.add_subcommand("lock", "Resolve the spec's packages and sources into the lockfile");
  cmd->add_option("SPEC", args->spec, "The spec file")->capture_default_str();
  cmd->add_option("--lock", args->lock, "The lockfile (default: the spec's name with .lock)")
      ->type_name("FILE");
  cmd->add_flag("--check", args->check, "Exit 1 if the lock is missing or stale; change nothing");
  cmd->add_option("--update", args->update,
                  "Move only these packages, or the image base with 'base' (none named: everything)")
      ->type_name("NAME")
      ->expected(0, -1);
  cmd->add_flag(
      "--refresh", args->refresh,
      "Read every Python index page again, even those the cache holds fresh (Cache-Control max-age)");
  cmd->add_option("--resolver-steps", args->resolver_steps,
                  "The Python solver gives up after this many decisions and conflicts")
      ->type_name("N")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--resolver-timeout", args->resolver_timeout_s,
                  "The Python solver gives up after this long")
      ->type_name("SECONDS")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--allow-outside", args->allow_outside,
                "Allow host paths the spec reads (extends, copy, local repositories) outside its directory");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_examples);
  cmd->callback([args, &ctx, cmd] {
    if (cmd->count("--update") > 0) {
      args->update_given = true;
      // `lock --update NAME... SPEC`: --update takes every word after it, SPEC included. A last
      // name that is an existing .yaml/.yml file is the spec (no package name ends that way).
      std::error_code ec;
      if (cmd->count("SPEC") == 0 && !args->update.empty()) {
        const std::filesystem::path last = args->update.back();
        if ((last.extension() == ".yaml" || last.extension() == ".yml") &&
            std::filesystem::is_regular_file(last, ec)) {
          args->spec = last.string();
          args->update.pop_back();
        }
      }
    }
    if (args->check && args->update_given) {
      throw CLI::ValidationError("--check and --update can't be used together");
    }
    ctx.action = [args, &ctx] { return run_lock(*args, ctx); };
  });
}

} // namespace lockstep::cli
