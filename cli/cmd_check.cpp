// `lockstep check [SPEC]`: reads, merges and validates a spec offline and prints its digest.
#include "builder/lock/base_contents.hpp"
#include "builder/lock/recipes_source.hpp"
#include "cli/cli.hpp"
#include "envspec/load/load.hpp"
#include "envspec/settings/settings.hpp"
#include "envspec/spec/spec.hpp"
#include "envspec/stack/stack.hpp"
#include "support/base/log.hpp"
#include "support/store/blob_store.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

namespace lockstep::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* k_default_spec = "./lockstep.yaml";

constexpr const char* k_check_footer = R"(Examples:
  lockstep check
      validate ./lockstep.yaml and print its digest
  lockstep check examples/hello/lockstep.yaml --json
      print {"ok":true,"name":...,"spec_digest":...,"files":[...]}
  lockstep check team/app --allow-outside
      validate team/app/lockstep.yaml; extends and copy.from may name files outside team/app
  lockstep check gpu/lockstep.yaml
      with `stack: {framework: pytorch@2.1, cuda: "12"}`: also solve the stack from the recipes
      (offline) and print the choices: the cu121 wheels, NCCL 2.18.1, cuDNN 8.9.2.26, driver floor

Exit codes: 0 the spec is valid, 2 it is not (every error is listed; an impossible stack is
reported at its stack key with what would work instead), or it can't be read.)";

struct CheckOptions {
  std::string spec = k_default_spec;
  bool allow_outside = false;
};

Result<ExitCode> run_check(const CheckOptions& opts, const Context& ctx) {
  fs::path spec_path = opts.spec;
  std::error_code ec;
  if (fs::is_directory(spec_path, ec)) {
    spec_path /= "lockstep.yaml";
  }
  envspec::LoadOptions load_options;
  load_options.allow_outside = opts.allow_outside;
  Result<envspec::Spec> spec = envspec::load_spec(spec_path, load_options);
  if (!spec) {
    Error err = spec.error();
    if (!err.rendered && !fs::exists(spec_path, ec)) {
      err.message += "\nhint: run it in a directory with lockstep.yaml or pass the spec path";
    }
    return err;
  }

  std::optional<envspec::Lock> previous;
  if (Result<envspec::Lock> l = envspec::read_lock(envspec::default_lock_path(spec->file))) {
    previous = std::move(*l);
  }
  // Over an image base locked on this machine, what `lockstep lock` read of it (offline).
  std::optional<builder::BaseMetadata> base;
  if (builder::is_image_base(*spec) && previous && previous->base) {
    if (Result<BlobStore> store = BlobStore::open(settings::store_root())) {
      base = builder::cached_base_metadata(previous->base->manifest, *store);
    }
  }
  if (base && (spec->stack || !spec->packages.apt.empty())) {
    for (const std::string& warning : builder::sources_the_spec_lacks(*spec, *base)) {
      log::warn("{}", warning);
    }
  }
  // The stack is solved offline, from the recipes alone: an impossible stack is a spec error.
  std::optional<envspec::StackSolution> stack;
  std::vector<std::pair<std::string, envspec::LockedStack>> others; // platforms that solve it otherwise
  if (spec->stack) {
    LS_TRY_ASSIGN(const envspec::RecipeSet recipes,
                  builder::recipes_for_spec_offline(*spec, settings::store_root(), previous));
    envspec::StackContext context = envspec::stack_context(*spec);
    if (base) {
      LS_TRY_ASSIGN(context,
                    builder::stack_context_over_base(*spec, *base, builder::locked_base_name(*spec)));
    }
    LS_TRY_ASSIGN(stack, envspec::solve_stack(*spec->stack, recipes, context));
    // A spec of several platforms: each solves the stack as its platform alone would (a framework's
    // aarch64 wheels differ); those that differ from the first are shown too.
    for (std::size_t i = 1; i < spec->platforms.size(); ++i) {
      context.platform = spec->platforms[i].str();
      LS_TRY_ASSIGN(envspec::StackSolution one, envspec::solve_stack(*spec->stack, recipes, context));
      if (!(one.locked == stack->locked)) {
        others.emplace_back(spec->platforms[i].str(), std::move(one.locked));
      }
    }
  }

  if (ctx.json) {
    nlohmann::ordered_json out;
    out["ok"] = true;
    out["name"] = spec->name;
    out["spec_digest"] = spec->digest.str();
    out["files"] = nlohmann::ordered_json::array();
    for (const fs::path& f : spec->files) {
      out["files"].push_back(f.string());
    }
    if (stack) {
      out["stack"] = envspec::locked_stack_json(stack->locked);
    }
    for (const auto& [platform, other] : others) {
      out["stacks"][platform] = envspec::locked_stack_json(other);
    }
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("ok: %s (spec %s)\n", spec->name.c_str(), spec->digest.str().c_str());
    // The first platform's stack, then each that differs, headed by its platform when there are several.
    std::vector<std::pair<std::string, const envspec::LockedStack*>> shown;
    if (stack) {
      shown.emplace_back(spec->platform.str(), &stack->locked);
    }
    for (const auto& [platform, other] : others) {
      shown.emplace_back(platform, &other);
    }
    for (const auto& [platform, locked] : shown) {
      if (shown.size() > 1) {
        std::printf("  %s:\n", platform.c_str());
      }
      for (const std::string& line : envspec::describe_stack(*locked)) {
        std::printf("  %s\n", line.c_str());
      }
    }
  }
  return ExitCode::ok;
}

} // namespace

void register_check(CLI::App& app, Context& ctx) {
  auto* cmd =
      app.add_subcommand("check", "Validate a spec offline (schema, paths, extends) and print its digest");
  auto opts = std::make_shared<CheckOptions>();
  cmd->add_option("SPEC", opts->spec, "The spec file, or a directory holding lockstep.yaml")
      ->default_str(k_default_spec);
  cmd->add_flag("--allow-outside", opts->allow_outside,
                "Allow host paths the spec reads (extends, copy, local repositories) outside the directory "
                "of the file that names them");
  add_common_flags(*cmd, ctx);
  cmd->footer(k_check_footer);
  cmd->callback([&ctx, opts] { ctx.action = [&ctx, opts] { return run_check(*opts, ctx); }; });
}

} // namespace lockstep::cli
