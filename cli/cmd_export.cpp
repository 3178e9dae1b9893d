// `lockstep export`: write a Dockerfile or an Apptainer definition file from a lock and its spec, its
// Python packages as a pip requirements file or a PEP 751 pylock.toml, or its conda packages as a
// conda-lock.yml or an explicit file.
#include "builder/image/export.hpp"
#include "builder/lock/conda_export.hpp"
#include "builder/lock/python_export.hpp"
#include "cli/cli.hpp"
#include "envspec/load/load.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/log.hpp"
#include "support/oci/oci.hpp"
#include "support/system/fs.hpp"

#include <algorithm>
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
  std::string requirements; // --requirements FILE
  std::string pylock;       // --pylock FILE
  std::string conda_lock;   // --conda-lock FILE
  std::string explicit_;    // --explicit FILE
  std::string platform;     // --platform OS/ARCH: one platform's share of a multi-platform lock
};

constexpr const char* k_examples = R"(Examples:
  lockstep export --dockerfile > Dockerfile          from ./lockstep.lock and ./lockstep.yaml
  docker buildx build -f Dockerfile .                build it with the spec's directory as the context
  lockstep export --apptainer-def -o app.def examples/mpi-hello/lockstep.lock
  apptainer build app.sif app.def                    (from the spec's directory)
  lockstep export --dockerfile examples/mpi-hello/lockstep.yaml   the lock beside this spec
  lockstep export --requirements requirements.txt    the lock's wheels, pinned with --hash
  pip install --require-hashes --no-deps -r requirements.txt
  lockstep export --pylock pylock.toml               the same as a PEP 751 lock file
  lockstep export --explicit env.txt                 the conda packages, @EXPLICIT with #sha256
  conda create -n train --file env.txt               the same environment outside the image
  lockstep export --conda-lock conda-lock.yml        the same as a conda-lock.yml (v1)
  conda-lock install -n train conda-lock.yml
  lockstep export --dockerfile --platform linux/arm64   one platform of a multi-platform lock

LOCK is a lockfile (default lockstep.lock); its spec is the file beside it with .yaml (or .yml), or
--spec. Given a spec instead, its lock is the file beside it with .lock. The lock must be current
(`lockstep lock --check`). Every .deb and wheel is fetched from its exact lock URL and checked by
sha256, git sources are pinned by commit; what the recipe cannot express is listed in a comment
block at its top and printed as warnings. --requirements and --pylock write only the Python
packages (with index options, or URLs and paths relative to the file written; "-" is standard
output); --explicit and --conda-lock only the conda packages, in install order. A lock of several
platforms exports one with --platform; a conda-lock.yml lists them all by default. Exit codes: 0 written, 2 bad usage, spec or lock. The mappings are described in
docs/export.md and docs/python-resolver.md.)";

Result<ExitCode> run_export(const ExportArgs& args) {
  const int formats = static_cast<int>(args.dockerfile) + static_cast<int>(args.apptainer) +
                      static_cast<int>(!args.requirements.empty()) + static_cast<int>(!args.pylock.empty()) +
                      static_cast<int>(!args.conda_lock.empty()) + static_cast<int>(!args.explicit_.empty());
  if (formats != 1) {
    return invalid_input(
        "export: give exactly one of --dockerfile, --apptainer-def, --requirements FILE, "
        "--pylock FILE, --conda-lock FILE and --explicit FILE (see `lockstep export --help`)");
  }
  const bool package_list = !args.requirements.empty() || !args.pylock.empty() || !args.conda_lock.empty() ||
                            !args.explicit_.empty();
  if (package_list && !args.output.empty()) {
    return invalid_input("export: --requirements, --pylock, --conda-lock and --explicit name their file; -o "
                         "is for the recipes");
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
  envspec::Lock lock = std::move(*read);
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

  // A multi-platform lock: the recipes and the pip and explicit files are of one platform, its
  // share; a conda-lock.yml lists every platform.
  const std::vector<std::string> platforms = envspec::lock_platforms(lock);
  if (!args.platform.empty()) {
    LS_TRY_ASSIGN(const oci::Platform wanted, oci::Platform::parse(args.platform));
    if (std::find(platforms.begin(), platforms.end(), wanted.str()) == platforms.end()) {
      return invalid_input("export: --platform {}: {} is for {}", wanted.str(), lock_path.string(),
                           fmt::join(platforms, ", "));
    }
    lock = envspec::lock_for_platform(lock, wanted.str());
    spec = envspec::spec_for_platform(spec, wanted);
  } else if (platforms.size() > 1 && args.conda_lock.empty()) {
    return invalid_input("export: {} is for {}: give --platform (one of them) for this format",
                         lock_path.string(), fmt::join(platforms, ", "));
  }
  if (!args.conda_lock.empty() || !args.explicit_.empty()) {
    builder::CondaExportOptions co;
    co.format = args.explicit_.empty() ? builder::CondaExportFormat::conda_lock
                                       : builder::CondaExportFormat::explicit_file;
    co.lock_name = lock_path.filename().string();
    co.spec_name = spec_path.filename().string();
    LS_TRY_ASSIGN(std::string text, builder::export_conda(lock, co));
    return write_output(args.explicit_.empty() ? args.conda_lock : args.explicit_, text, "export");
  }
  if (!args.requirements.empty() || !args.pylock.empty()) {
    const std::string& output = args.requirements.empty() ? args.pylock : args.requirements;
    builder::PythonExportOptions po;
    po.format = args.requirements.empty() ? builder::PythonExportFormat::pylock
                                          : builder::PythonExportFormat::requirements;
    po.lock_name = lock_path.filename().string();
    po.spec_dir = spec_path.parent_path();
    po.output_dir = output == "-" ? fs::current_path() : fs::absolute(output).parent_path();
    LS_TRY_ASSIGN(std::string text, builder::export_python(spec, lock, po));
    return write_output(output, text, "export");
  }

  builder::ExportOptions options;
  options.format = args.dockerfile ? builder::ExportFormat::dockerfile : builder::ExportFormat::apptainer_def;
  options.lock_name = lock_path.filename().string();
  options.spec_name = spec_path.filename().string();
  LS_TRY_ASSIGN(builder::ExportResult result, builder::export_recipe(spec, lock, options));
  for (const std::string& l : result.limitations) {
    log::warn("export: {}", l);
  }
  return write_output(args.output, result.text, "export");
}

} // namespace

void register_export(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ExportArgs>();
  args->lock = "lockstep.lock";
  auto* cmd = app.add_subcommand("export", "Write a Dockerfile, an Apptainer definition, or the Python or "
                                           "conda packages (requirements, pylock.toml, "
                                           "conda-lock.yml, explicit)");
  cmd->add_option("LOCK", args->lock, "The lockfile, or the spec whose lock to use")->capture_default_str();
  cmd->add_flag("--dockerfile", args->dockerfile, "Write a Dockerfile (BuildKit, dockerfile:1.6 syntax)");
  cmd->add_flag("--apptainer-def", args->apptainer, "Write an Apptainer definition file");
  cmd->add_option("--requirements", args->requirements,
                  "Write the lock's wheels as a pip requirements file with --hash (\"-\": standard output)")
      ->type_name("FILE");
  cmd->add_option("--pylock", args->pylock, "Write the lock's wheels as a PEP 751 pylock.toml")
      ->type_name("FILE");
  cmd->add_option(
         "--conda-lock", args->conda_lock,
         "Write the lock's conda packages (and wheels) as a conda-lock.yml v1 (\"-\": standard output)")
      ->type_name("FILE");
  cmd->add_option(
         "--explicit", args->explicit_,
         "Write the lock's conda packages as an @EXPLICIT file with #sha256 (\"-\": standard output)")
      ->type_name("FILE");
  cmd->add_option(
         "--platform", args->platform,
         "A multi-platform lock: export this platform's share (conda-lock.yml: default every platform)")
      ->type_name("OS/ARCH");
  cmd->add_option("--spec", args->spec, "The spec (default: beside the lock, .yaml or .yml)")
      ->type_name("FILE");
  cmd->add_option("-o,--output", args->output, "Write to FILE (atomically) instead of standard output")
      ->type_name("FILE");
  add_common_flags(*cmd, ctx, false);
  cmd->footer(k_examples);
  cmd->callback([args, &ctx] { ctx.action = [args] { return run_export(*args); }; });
}

} // namespace lockstep::cli
