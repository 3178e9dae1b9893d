// `lockstep export`: write a Dockerfile or an Apptainer definition file from a lock and its spec.
#include "builder/image/export.hpp"
#include "cli/cli.hpp"
#include "envspec/lockfile.hpp"
#include "envspec/spec.hpp"
#include "support/fs.hpp"
#include "support/log.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>

namespace lockstep::cli {

namespace {

namespace fs = std::filesystem;

struct ExportArgs {
  std::string lock; // LOCK, or the spec (a .yaml/.yml file) whose lock to use
  std::string spec;
  std::string output;
  bool dockerfile = false;
  bool apptainer = false;
};

constexpr const char* k_examples = R"(Examples:
  lockstep export --dockerfile > Dockerfile          from ./lockstep.lock and ./lockstep.yaml
  docker buildx build -f Dockerfile .                build it with the spec's directory as the context
  lockstep export --apptainer-def -o app.def examples/mpi-hello/lockstep.lock
  apptainer build app.sif app.def                    (from the spec's directory)
  lockstep export --dockerfile examples/mpi-hello/lockstep.yaml   the lock beside this spec

LOCK is a lockfile (default lockstep.lock); its spec is the file beside it with .yaml (or .yml), or
--spec. Given a spec instead, its lock is the file beside it with .lock. The lock must be current
(`lockstep lock --check`). Every .deb and wheel is fetched from its exact lock URL and checked by
sha256, git sources are pinned by commit; what the recipe cannot express is listed in a comment
block at its top and printed as warnings. Exit codes: 0 written, 2 bad usage, spec or lock.
The mapping is described in docs/export.md.)";

bool is_spec_name(const fs::path& p) {
  return p.extension() == ".yaml" || p.extension() == ".yml";
}

// The spec beside a lock: NAME.yaml, else NAME.yml.
fs::path spec_beside(const fs::path& lock) {
  fs::path yaml = lock;
  yaml.replace_extension(".yaml");
  fs::path yml = lock;
  yml.replace_extension(".yml");
  std::error_code ec;
  return fs::exists(yaml, ec) || !fs::exists(yml, ec) ? yaml : yml;
}

Result<ExitCode> run_export(const ExportArgs& args) {
  if (args.dockerfile == args.apptainer) {
    return invalid_input(
        "export: give exactly one of --dockerfile and --apptainer-def (see `lockstep export --help`)");
  }
  fs::path lock_path = fs::absolute(args.lock);
  fs::path spec_path;
  if (!args.spec.empty()) {
    spec_path = fs::absolute(args.spec);
  } else if (is_spec_name(lock_path)) {
    spec_path = lock_path;
    lock_path = envspec::default_lock_path(spec_path);
  } else {
    spec_path = spec_beside(lock_path);
  }
  std::error_code ec;
  if (!fs::is_regular_file(spec_path, ec)) {
    return invalid_input("export: no spec at {} (the file beside the lock); give it with --spec",
                         spec_path.string());
  }
  LS_TRY_ASSIGN(envspec::Spec spec, envspec::load_spec(spec_path));
  Result<envspec::Lock> read = envspec::read_lock(lock_path);
  if (!read) {
    return Error{ExitCode::invalid_input, "export: " + read.error().message};
  }
  const envspec::Lock& lock = *read;
  const std::vector<std::string> changes =
      envspec::describe_input_changes(lock.inputs, envspec::lock_inputs(spec));
  if (!changes.empty()) {
    std::string list;
    for (const std::string& c : changes) {
      list += "\n  " + c;
    }
    return invalid_input(
        "export: {} is stale: the spec changed since it was locked:{}\nrun `lockstep lock` first",
        lock_path.string(), list);
  }

  builder::ExportOptions options;
  options.format = args.dockerfile ? builder::ExportFormat::dockerfile : builder::ExportFormat::apptainer_def;
  options.lock_name = lock_path.filename().string();
  options.spec_name = spec_path.filename().string();
  LS_TRY_ASSIGN(builder::ExportResult result, builder::export_recipe(spec, lock, options));
  for (const std::string& l : result.limitations) {
    log::warn("export: {}", l);
  }
  if (args.output.empty()) {
    if (std::fwrite(result.text.data(), 1, result.text.size(), stdout) != result.text.size() ||
        std::fflush(stdout) != 0) {
      return Error{ExitCode::io, "export: can't write to standard output"};
    }
    return ExitCode::ok;
  }
  LS_TRY_ASSIGN(AtomicFile out, AtomicFile::create(fs::absolute(args.output), 0644));
  LS_TRY(out.write(result.text));
  LS_TRY(out.commit());
  log::info("wrote {}", args.output);
  return ExitCode::ok;
}

} // namespace

void register_export(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ExportArgs>();
  args->lock = "lockstep.lock";
  auto* cmd = app.add_subcommand("export", "Write a Dockerfile or an Apptainer definition file from a lock");
  cmd->add_option("LOCK", args->lock, "The lockfile, or the spec whose lock to use")->capture_default_str();
  cmd->add_flag("--dockerfile", args->dockerfile, "Write a Dockerfile (BuildKit, dockerfile:1.6 syntax)");
  cmd->add_flag("--apptainer-def", args->apptainer, "Write an Apptainer definition file");
  cmd->add_option("--spec", args->spec, "The spec (default: beside the lock, .yaml or .yml)")
      ->type_name("FILE");
  cmd->add_option("-o,--output", args->output, "Write to FILE (atomically) instead of standard output")
      ->type_name("FILE");
  add_common_flags(*cmd, ctx, false);
  cmd->footer(k_examples);
  cmd->callback([args, &ctx] { ctx.action = [args] { return run_export(*args); }; });
}

} // namespace lockstep::cli
