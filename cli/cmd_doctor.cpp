// `lockstep doctor`: a snapshot of this host's GPU and MPI stack and its active Python environment;
// given an image or a lock, whether it can run here and why not (runner/audit/doctor.hpp, docs/doctor.md).
#include "builder/image/image_facts.hpp"
#include "cli/cli.hpp"
#include "envspec/lock/lockfile.hpp"
#include "runner/audit/doctor.hpp"
#include "support/base/log.hpp"
#include "support/oci/oci.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <memory>
#include <optional>
#include <string_view>

namespace lockstep::cli {

namespace {

struct DoctorArgs {
  std::string target;
  std::string host_root;
  std::string python;
};

constexpr const char* k_examples = R"(Examples:
  lockstep doctor
      this host: driver, GPUs, MPI stack, glibc, kernel, and the active venv or conda environment
  lockstep doctor --json > node17.json
      the same as a snapshot document; `lockstep diff node17.json laptop.json` compares two
  lockstep doctor lockstep.lock
      can an image built from this lock run here? (the CUDA driver floor, the MPI and PMIx match)
  lockstep doctor build/train.sif
      the same for an image (oci:DIR, oci-archive:FILE, docker-archive:FILE or a .sif), from its labels
  lockstep doctor --python /opt/conda/envs/train
      read that prefix (a conda environment, a venv or a system prefix) instead of the active one
  lockstep doctor --host-root /mnt/node-image --json
      capture from a mounted node image (every file is read inside DIR; tests use fake trees)

Sources: the driver from /proc/driver/nvidia/version, else nvidia-smi; GPUs from nvidia-smi, else
/proc/driver/nvidia/gpus; mpirun --version; PMIx and UCX from their libraries, libfabric from the
dpkg database; sinfo/srun --version; the Python environment from $VIRTUAL_ENV (pyvenv.cfg and
dist-info) or $CONDA_PREFIX (conda-meta, plus pip-installed dist-info), never by running pip.
The verdict uses `lockstep preflight`'s rules for `lockstep run`'s defaults (hybrid MPI model).
See docs/doctor.md.

Exit status: 0 snapshot taken (and the target can run here), 1 the target can't run here, 2 bad
usage or an unreadable image or lock, 3 a needed tool failed, 4 a local file error.)";

// Whether TARGET names a lockfile: a regular file named *.lock, or one whose text starts with '{'
// (an OCI or docker archive is a tar, a SIF starts with its magic).
bool is_lock_file(const std::string& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return false;
  }
  if (std::string_view(target).ends_with(".lock")) {
    return true;
  }
  Result<UniqueFd> fd = open_input_file(target);
  if (!fd) {
    return false;
  }
  std::array<char, 64> head{};
  Result<std::size_t> n = read_full(fd->get(), head.data(), head.size(), target);
  if (!n) {
    return false;
  }
  for (std::size_t i = 0; i < *n; ++i) {
    if (head[i] != ' ' && head[i] != '\n' && head[i] != '\t' && head[i] != '\r') {
      return head[i] == '{';
    }
  }
  return false;
}

// The verdict for a lock: the facts an image built from it records.
Result<runner::TargetReport> evaluate_lock(const std::string& path, const runner::Capture& host) {
  LS_TRY_ASSIGN(envspec::Lock lock, envspec::read_lock(path));
  if (!lock.platforms.empty()) { // a multi-platform lock: the share this host would run
    std::optional<envspec::Lock> mine =
        envspec::lock_share_for_arch(lock, oci::Platform::host().architecture);
    if (!mine) {
      log::warn("{} is for {}, not this host's {}: the facts below are {}'s", path,
                fmt::join(lock.platforms, ", "), oci::Platform::host().str(), lock.platforms.front());
    }
    lock = mine ? std::move(*mine) : envspec::lock_for_platform(lock, lock.platforms.front());
  }
  LS_TRY_ASSIGN(const envspec::ImageFacts facts, builder::image_facts_for(lock));
  return runner::evaluate_target("lock", path, facts, host, nullptr, 0,
                                 lock.stack ? std::string_view(lock.stack->min_cc) : std::string_view());
}

// The verdict for an image: its dev.lockstep.* labels.
Result<runner::TargetReport> evaluate_image(const std::string& image, const runner::Capture& host) {
  const runner::ImageProbe probe = runner::probe_image(image);
  if (probe.state == runner::ImageProbe::State::missing) {
    return invalid_input("{}: no such image (give oci:DIR, oci-archive:FILE, docker-archive:FILE, a .sif "
                         "file or a lockstep.lock)",
                         image);
  }
  if (probe.state == runner::ImageProbe::State::unreadable) {
    return invalid_input("{}", probe.error);
  }
  LS_TRY_ASSIGN(const runner::ImageArg arg, runner::parse_image_arg(image));
  LS_TRY_ASSIGN(const runner::ImageDescription description, runner::describe_image(arg));
  return runner::evaluate_target("image", image, description.facts, host, &probe, description.unpack_bytes,
                                 description.gpu_min_cc);
}

Result<ExitCode> run_doctor(const DoctorArgs& args, const Context& ctx) {
  runner::DoctorOptions options = runner::doctor_options_from_env();
  if (!args.host_root.empty()) {
    options.host_root = args.host_root;
  }
  options.python_prefix = args.python;
  LS_TRY_ASSIGN(runner::Capture capture, runner::capture(options));
  for (const std::string& warning : capture.warnings) {
    log::warn("{}", warning);
  }
  if (!args.target.empty()) {
    if (is_lock_file(args.target)) {
      LS_TRY_ASSIGN(capture.snapshot.target, evaluate_lock(args.target, capture));
    } else {
      LS_TRY_ASSIGN(capture.snapshot.target, evaluate_image(args.target, capture));
    }
  }
  if (ctx.json) {
    std::fputs(runner::render_snapshot(capture.snapshot).c_str(), stdout);
  } else {
    std::fputs(runner::render_doctor_report(capture, capture.snapshot.target).c_str(), stdout);
  }
  const auto& target = capture.snapshot.target;
  return target && !target->can_run() ? ExitCode::check_failed : ExitCode::ok;
}

} // namespace

void register_doctor(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand(
      "doctor", "Snapshot this host's GPU, MPI and Python stack; can an image or lock run here?");
  cmd->add_option("TARGET", args->target, "An image (as `lockstep exec` takes it) or a lockstep.lock")
      ->type_name("IMAGE|LOCK");
  cmd->add_option("--host-root", args->host_root,
                  "Read every host file inside DIR (a mounted node image; tests' fake trees)")
      ->type_name("DIR");
  cmd->add_option("--python", args->python,
                  "Read this Python prefix instead of $VIRTUAL_ENV / $CONDA_PREFIX (venv, conda or /usr)")
      ->type_name("PREFIX");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_examples);
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_doctor(*args, ctx); }; });
}

} // namespace lockstep::cli
