// `lockstep lock`: resolve the spec's packages and sources into the lockfile, check it, or update it.
// What a stale lock means and what is done about it is builder/lock/relock.cpp; this file parses the
// arguments and prints.
#include "builder/lock/relock.hpp"
#include "cli/cli.hpp"
#include "support/base/log.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

namespace lockstep::cli {

namespace {

// --resolver-timeout SECONDS, beside the request it becomes part of.
struct LockArgs {
  builder::RelockRequest request;
  long resolver_timeout_s = builder::LockOptions{}.resolver_timeout.count();
};

constexpr const char* k_examples = R"(Examples:
  lockstep lock                          resolve ./lockstep.yaml into ./lockstep.lock
  lockstep lock --check                  exit 1 if the lock is missing or stale (CI), naming what changed
  lockstep lock --update openmpi-bin     move only openmpi-bin (and what it needs) to the newest versions
  lockstep lock --update base            move an image base to the manifest its reference names now
  lockstep lock --update                 re-resolve everything to the newest versions
  lockstep lock --update --security      move only the debs with a newer build in a security suite
  lockstep lock --refresh                read every Python index page again (not the cached copies)
  lockstep lock examples/mpi-hello/lockstep.yaml --json

An existing lock's versions are kept for everything not named in --update; a lock whose inputs
(platform, base, repos, packages, git sources) match the spec is left alone without network access.
Python index pages are reused for the Cache-Control max-age the index sends (PyPI: 10 minutes);
--update and --refresh read them again, and so does a request the cached pages can't satisfy.
The lock records the image epoch: SOURCE_DATE_EPOCH when set, else the previous lock's, else 0.)";

Result<ExitCode> run_lock(const builder::RelockRequest& args, const Context& ctx) {
  LS_TRY_ASSIGN(const builder::RelockOutcome outcome, builder::relock(args));
  const std::string lock_path = outcome.lock_path.string();
  switch (outcome.action) {
  case builder::RelockAction::checked:
    if (ctx.json) {
      nlohmann::json j{
          {"lock", lock_path}, {"up_to_date", outcome.changes.empty()}, {"changes", outcome.changes}};
      std::printf("%s\n", j.dump(2).c_str());
    }
    if (outcome.stale) {
      return *outcome.stale;
    }
    if (!ctx.json) {
      log::info("{} is up to date ({} artifacts)", lock_path, outcome.artifacts);
    }
    return ExitCode::ok;
  case builder::RelockAction::kept:
    if (ctx.json) {
      nlohmann::json j{{"lock", lock_path},
                       {"written", false},
                       {"changes", nlohmann::json::array()},
                       {"digest", outcome.digest.str()},
                       {"artifacts", outcome.artifacts}};
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      log::info("{} is up to date ({} artifacts); use --update to move versions", lock_path,
                outcome.artifacts);
    }
    return ExitCode::ok;
  case builder::RelockAction::unchanged:
  case builder::RelockAction::written:
    break;
  }
  if (outcome.no_security_updates && !ctx.json) {
    log::info("{}: no locked package has a newer build in a security suite; nothing moved", lock_path);
    return ExitCode::ok;
  }
  const bool same = outcome.action == builder::RelockAction::unchanged;
  if (ctx.json) {
    nlohmann::json j{{"lock", lock_path},
                     {"written", !same},
                     {"changes", outcome.changes},
                     {"digest", outcome.digest.str()},
                     {"artifacts", outcome.artifacts}};
    std::printf("%s\n", j.dump(2).c_str());
    return ExitCode::ok;
  }
  for (const std::string& c : outcome.changes) {
    log::info("  {}", c);
  }
  log::info("{} {} ({} artifacts)", same ? "unchanged:" : "wrote", lock_path, outcome.artifacts);
  return ExitCode::ok;
}

} // namespace

void register_lock(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<LockArgs>();
  auto* cmd = app.add_subcommand("lock", "Resolve the spec's packages and sources into the lockfile");
  cmd->add_option("SPEC", args->request.spec, "The spec file")->capture_default_str();
  cmd->add_option("--lock", args->request.lock, "The lockfile (default: the spec's name with .lock)")
      ->type_name("FILE");
  cmd->add_flag("--check", args->request.check, "Exit 1 if the lock is missing or stale; change nothing");
  cmd->add_option("--update", args->request.update,
                  "Move only these packages, or the image base with 'base' (none named: everything)")
      ->type_name("NAME")
      ->expected(0, -1);
  cmd->add_flag("--security", args->request.security,
                "With --update: move only the debs whose newer build is in a security suite or "
                "archive (bookworm-security, jammy-security), and what those need");
  cmd->add_flag(
      "--refresh", args->request.refresh,
      "Read every Python index page again, even those the cache holds fresh (Cache-Control max-age)");
  cmd->add_option("--resolver-steps", args->request.resolver_steps,
                  "The Python solver gives up after this many decisions and conflicts")
      ->type_name("N")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--resolver-timeout", args->resolver_timeout_s,
                  "The Python solver gives up after this long")
      ->type_name("SECONDS")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--allow-outside", args->request.allow_outside,
                "Allow host paths the spec reads (extends, copy, local repositories) outside its directory");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_examples);
  cmd->callback([args, &ctx, cmd] {
    if (cmd->count("--update") > 0) {
      args->request.update_given = true;
      // `lock --update NAME... SPEC`: --update takes every word after it, SPEC included. A last
      // name that is an existing .yaml/.yml file is the spec (no package name ends that way).
      std::error_code ec;
      if (cmd->count("SPEC") == 0 && !args->request.update.empty()) {
        const std::filesystem::path last = args->request.update.back();
        if ((last.extension() == ".yaml" || last.extension() == ".yml") &&
            std::filesystem::is_regular_file(last, ec)) {
          args->request.spec = last.string();
          args->request.update.pop_back();
        }
      }
    }
    if (args->request.check && args->request.update_given) {
      throw CLI::ValidationError("--check and --update can't be used together");
    }
    if (args->request.security && !args->request.update_given) {
      throw CLI::ValidationError("--security goes with --update: `lockstep lock --update --security`");
    }
    if (args->request.security && std::any_of(args->request.update.begin(), args->request.update.end(),
                                              [](const std::string& name) { return !name.empty(); })) {
      throw CLI::ValidationError("--update --security picks the packages itself; give no names (or "
                                 "drop --security to move the named ones)");
    }
    args->request.resolver_timeout = std::chrono::seconds(args->resolver_timeout_s);
    ctx.action = [args, &ctx] { return run_lock(args->request, ctx); };
  });
}

} // namespace lockstep::cli
