// `lockstep exec`: run a command in an image, rootless, without a daemon or setuid helper.
#include "cli/cli.hpp"
#include "runner/launch/run_record.hpp"
#include "runner/runtime/exec.hpp"
#include "runner/runtime/hold.hpp"
#include "runner/runtime/join.hpp"
#include "support/system/fs.hpp"

#include <cstdlib>
#include <memory>

namespace lockstep::cli {

namespace {

struct ExecArgs {
  runner::ExecOptions options;
  bool tmp_host = false;
  std::string net = "host";
  std::string gpus;
  std::string sif_mount;
  std::string rank_report; ///< --rank-report DIR (lockstep run's ranks)
  int hold_listen = -1;    ///< --hold-listen FD: hold the container for the ranks (lockstep _rank)
  int hold_key = -1;       ///< --hold-key FD: the key of the ranks it serves, read to EOF
  int hold_first_wait = 0; ///< --hold-first-wait MS: started by preflight, before mpirun (0: default)
};

// --hold-listen/--hold-key: this process holds the container for the ranks on this node that ask
// (runner/runtime/hold.hpp); a rank (`lockstep _rank`) starts it with these two descriptors.
Result<ExitCode> hold_container(const ExecArgs& args) {
  if (args.hold_listen < 3 || args.hold_key < 3) {
    return invalid_input("--hold-listen and --hold-key take the descriptors a rank of `lockstep run` passes");
  }
  UniqueFd key_fd(args.hold_key);
  runner::HoldOptions hold;
  hold.listen_fd = args.hold_listen;
  if (args.hold_first_wait > 0) {
    hold.first_wait = std::chrono::milliseconds(args.hold_first_wait);
    hold.leave_if_unprepared = true;
  }
  std::array<char, 65536> buf{};
  for (;;) {
    LS_TRY_ASSIGN(std::size_t n, read_some(key_fd.get(), buf.data(), buf.size(), "the key of the ranks"));
    if (n == 0) {
      break;
    }
    hold.key.append(buf.data(), n);
    if (hold.key.size() > runner::join::k_max_message) {
      return invalid_input("the key of the ranks is longer than {} bytes", runner::join::k_max_message);
    }
  }
  LS_TRY(runner::hold_for_ranks(args.options, hold));
  return ExitCode::ok;
}

constexpr const char* k_examples = R"(Examples:
  lockstep exec oci:build/hello -- /bin/sh -c 'echo $HOME'
  lockstep exec oci:build/hello                    run the image's ENTRYPOINT + CMD
  lockstep exec --bind /data:/data:ro --workdir /data docker-archive:hello.tar -- ls
  lockstep exec --env OMP_NUM_THREADS=4 --cleanenv hello.sif -- env
  lockstep exec --pid --hostname node1 --net none oci:build/hello -- ps
  lockstep exec --gpus=0 oci:build/cuda -- nvidia-smi
  lockstep exec --user 1000:1000 ./rootfs -- id  a root directory (a "sandbox")
  lockstep exec --platform linux/arm64 oci:build/hello -- uname -m   an arm64 image under qemu-user

IMAGE is oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:REF], sif:FILE, dir:PATH, or a
path recognised by what it holds: an OCI layout directory, an OCI or docker archive, a .sif file, a
root directory (the same IMAGE every command takes). OCI images are unpacked once into the cache ($LOCKSTEP_CACHE, default
~/.cache/lockstep) and shared; a SIF runs from its root when one is already extracted into the cache,
else its squashfs is loop-mounted (root), mounted with squashfuse, or extracted into the cache, in
that order of preference (--sif-mount, --debug says which). The ranks of `lockstep run` extract it.

The container: a user namespace (unless root), its own mounts, the image root read-only, the host's
/dev, /proc, /sys, /etc/resolv.conf, /etc/hosts and your home, a tmpfs /tmp, the host network.
Environment: host variables, overridden by the image's, overridden by LOCKSTEP_ENV_K=V and --env.
An image of another architecture (its config's, or --platform for a root directory) runs under
qemu-user from Debian's qemu-user-static, through a binfmt_misc of the container's own (Linux 6.7+;
else a handler the host registered with the F flag): every program it starts is emulated too, and
nothing changes on the host. As root, such a container runs in a user namespace mapping every id
to itself.

Exit status: the command's (128+N when signal N killed it). SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1
and SIGUSR2 are forwarded to it. Before the command starts, lockstep's own failures exit with
  2 bad usage or image, 3 a facility missing (namespaces, squashfuse, loop devices), 4 local I/O,
  70 internal, 126 the command is not executable, 127 the command was not found,
and print "lockstep: error: ..." on stderr. See docs/exec.md.)";

Result<ExitCode> run_exec_command(ExecArgs& args, Context& ctx) {
  runner::ExecOptions& o = args.options;
  o.tmp = args.tmp_host ? runner::TmpPolicy::host : runner::TmpPolicy::tmpfs;
  if (args.net == "host") {
    o.network = runner::NetworkPolicy::host;
  } else if (args.net == "none") {
    o.network = runner::NetworkPolicy::none;
  } else {
    return invalid_input("invalid --net '{}': use host or none", args.net);
  }
  if (!args.gpus.empty()) {
    o.gpus = args.gpus;
  }
  std::string mode = args.sif_mount;
  if (mode.empty()) {
    const char* env = std::getenv("LOCKSTEP_SIF_MOUNT");
    mode = env != nullptr && *env != '\0' ? env : "auto";
  }
  LS_TRY_ASSIGN(o.sif_mount, runner::parse_sif_mount_mode(mode));
  if (args.hold_listen >= 0 || args.hold_key >= 0) {
    // A job's container (docs/launch.md, "Ranks on one node"): a SIF is extracted once per node
    // and store, so neither this job's ranks nor later jobs decompress what they read again.
    if (o.sif_mount == runner::SifMountMode::automatic) {
      o.sif_mount = runner::SifMountMode::extract;
    }
    return hold_container(args);
  }
  auto run = [&o] { return runner::run_exec(o); };
  LS_TRY_ASSIGN(int code,
                args.rank_report.empty() ? run() : runner::run_reporting_rank(args.rank_report, run));
  ctx.exit_status = code & 0xff; // the command's own status, passed through
  return ExitCode::ok;
}

} // namespace

void register_exec(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ExecArgs>();
  runner::ExecOptions& o = args->options;
  auto* cmd = app.add_subcommand("exec", "Run a command in an image (rootless container)");
  cmd->add_option("IMAGE", o.image, "The image (see below)")->required();
  cmd->add_option("COMMAND", o.command, "The command and its arguments, after --");
  cmd->add_option("-e,--env", o.env, "Set a variable in the container (repeatable); wins over the image's")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false);
  cmd->add_flag("--cleanenv", o.clean_env, "Don't pass the host's environment (TERM excepted)");
  cmd->add_option("-B,--bind", o.binds, "Bind a host path (repeatable); DST defaults to SRC")
      ->type_name("SRC[:DST][:ro]")
      ->allow_extra_args(false);
  cmd->add_option("-W,--workdir", o.workdir, "Working directory in the container (default: the image's)")
      ->type_name("DIR");
  cmd->add_option("-u,--user", o.user, "Run as this user (default: you); GID defaults to UID")
      ->type_name("UID[:GID]");
  cmd->add_flag("--tmp-host", args->tmp_host, "Use the host's /tmp instead of a private tmpfs");
  cmd->add_flag("--writable-tmpfs", o.writable_tmpfs, "Make the root writable; changes vanish at exit");
  cmd->add_flag("--pid", o.pid_namespace, "A new pid namespace (an init is pid 1, the command pid 2)");
  cmd->add_option("--hostname", o.hostname, "A new UTS namespace with this hostname")->type_name("NAME");
  cmd->add_option("--net", args->net, "host (default) or none (a new network namespace, only lo)")
      ->type_name("host|none");
  cmd->add_flag("--no-home", o.no_home, "Don't bind your home directory");
  cmd->add_flag(
      "--gpus{auto}", args->gpus,
      "Pass NVIDIA GPUs through: --gpus (NVIDIA_VISIBLE_DEVICES, else all), --gpus=all, --gpus=0,1, "
      "--gpus=GPU-UUID");
  cmd->add_option("--platform", o.platform,
                  "For a multi-platform IMAGE, which image (default: this machine's); another "
                  "architecture runs under qemu-user")
      ->type_name("OS/ARCH");
  cmd->add_option("--sif-mount", args->sif_mount,
                  "How to use a SIF: auto (default; or $LOCKSTEP_SIF_MOUNT), loop, fuse, extract")
      ->type_name("MODE");
  cmd->add_flag("--mpi-rank", o.mpi_rank,
                "This is one rank a host launcher started (lockstep run uses it): the host's /tmp and the "
                "launcher's PMIx/Open MPI session directories are bound in");
  cmd->add_option(
         "--rank-report", args->rank_report,
         "When the command ends, write DIR/rank-N.json (rank, node, exit code, times) for the run record")
      ->type_name("DIR");
  // Internal: a rank (`lockstep _rank`) starts the holder of a node's shared container with these (hidden).
  cmd->add_option("--hold-listen", args->hold_listen)->group("");
  cmd->add_option("--hold-key", args->hold_key)->group("");
  cmd->add_option("--hold-first-wait", args->hold_first_wait)->group("");
  add_common_flags(*cmd, ctx, false);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_examples);
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_exec_command(*args, ctx); }; });
}

} // namespace lockstep::cli
