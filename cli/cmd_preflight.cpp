// `lockstep preflight`: the node checks `lockstep run` makes on every node before a launch, for
// this node; `--json` prints the one-line report `lockstep run` collects from each node.
#include "cli/cli.hpp"
#include "runner/launch/preflight.hpp"
#include "runner/runtime/join.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <string_view>

namespace lockstep::cli {

namespace {

struct PreflightArgs {
  runner::PreflightRequest request;
  std::string expect_mpi;
  std::string expect_pmix;
  std::string cuda;
  std::string cuda_floor;
  std::string node;
  std::string hold_cwd;               ///< --hold-cwd (lockstep run under mpirun)
  std::vector<std::string> hold_exec; ///< after `--`: the ranks' `lockstep exec` line
};

// How long a holder started here waits for mpirun to start the first rank.
constexpr int k_hold_first_wait_ms = 10000;

// After a passing preflight, with --hold-cwd DIR -- EXEC...: the ranks' rendezvous is bound now, and
// a child of this process (already started, so no second start of lockstep) prepares and holds their
// container while mpirun starts, as `lockstep exec --hold-listen` does for the first rank otherwise
// (runner/runtime/hold.hpp). Anything in the way (another holder, a key too long) leaves it to the
// ranks.
void hold_ranks_container(const PreflightArgs& args, int gate_fd) {
  const std::vector<std::string>& exec = args.hold_exec;
  if (exec.size() < 3 || exec[1] != "exec" || ::chdir(args.hold_cwd.c_str()) != 0) {
    return;
  }
  const std::string key = runner::join::key_of(runner::join::key_inputs(exec));
  std::array<int, 2> key_pipe{-1, -1};
  if (key.size() > 60000 || ::pipe(key_pipe.data()) != 0) { // the key fits in the pipe: no writer to wait for
    return;
  }
  UniqueFd key_read(key_pipe[0]);
  UniqueFd key_write(key_pipe[1]);
  Result<UniqueFd> listener = runner::join::bind_rendezvous(key);
  if (!listener || !write_all(key_write.get(), key.data(), key.size(), "a pipe")) {
    return;
  }
  key_write.reset();
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid(); // the agent's session may end; the holder stays for the ranks
    if (gate_fd >= 0) {
      ::close(gate_fd); // the gate is this preflight's, and goes with it
    }
    if (::fork() != 0) {
      _exit(0);
    }
    const int null = ::open("/dev/null", O_RDWR);
    if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(null, 2) < 0) {
      _exit(127);
    }
    std::vector<std::string> argv = {exec[0],
                                     "exec",
                                     "--hold-listen",
                                     std::to_string(listener->get()),
                                     "--hold-key",
                                     std::to_string(key_read.get()),
                                     "--hold-first-wait",
                                     std::to_string(k_hold_first_wait_ms)};
    argv.insert(argv.end(), exec.begin() + 2, exec.end());
    std::vector<char*> cargv = c_strings(argv);
    _exit(run(static_cast<int>(argv.size()), cargv.data()) & 0xff);
  }
  if (pid > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

// The launching node's word on stdin ("go" or "stop", a line); anything else, or EOF, is a stop.
runner::join::GateWord read_word() {
  std::string line;
  char c = 0;
  while (line.size() < 64) {
    const ssize_t n = ::read(0, &c, 1);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0 || c == '\n') {
      break;
    }
    line += c;
  }
  return line == "go" ? runner::join::GateWord::go : runner::join::GateWord::stop;
}

constexpr const char* k_examples = R"(Examples:
  lockstep preflight build/mpi-hello.sif
      this node against the image's recorded facts (its dev.lockstep.* labels)
  lockstep preflight --gpus-per-node 4 oci:build/train
      also the NVIDIA driver against the image's CUDA floor, and the GPU count
  lockstep preflight --json --launcher slurm --digest sha256:4f1c... --expect-mpi openmpi@4.1.4 \
      --expect-pmix 4.2.2 --unpack-bytes 734003200 /shared/images/train.sif
      what `lockstep run` asks each node: facts given, so a node without the image still reports

Checks, in this order: image (there, with the --digest given), driver (at least the image's CUDA
driver floor; with --gpus-per-node), gpus (enough GPUs; with --gpus-per-node), mpi (the host's mpirun
is the image's MPI with the same major.minor; hybrid model, not under Slurm), pmix (the host's
libpmix has the image's PMIx major; hybrid model), userns (user namespaces work; not needed as root),
space (the lockstep cache's file system holds --unpack-bytes plus 10% and 64 MiB).
A check that doesn't apply is skipped ("-"). The image's facts come from --expect-mpi, --expect-pmix,
--cuda and --cuda-floor when any is given, else from the image's labels.

Output: a table (a column per check: ok, WARN, FAIL, -) and a line per warning or failure; with
--json one line: {"preflight":1,"node":...,"ok":...,"checks":[{"name","status","detail"}...],
"host":{"mpi_impl","mpi_version","pmix","ucx","driver","gpus"}}. See docs/launch.md.

Exit status: 0 when no check failed (warnings pass), 1 when one failed, 2 bad usage.)";

// A version given on the command line: a digit first, then [0-9A-Za-z.+~-], at most 64 bytes.
Result<std::string> version_flag(std::string_view flag, std::string_view value, std::string_view example) {
  const bool valid =
      !value.empty() && value.size() <= 64 && value.front() >= '0' && value.front() <= '9' &&
      value.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.+~-") ==
          std::string_view::npos;
  if (!valid) {
    return invalid_input("invalid {} '{}': expected a version such as {}", flag, value, example);
  }
  return std::string(value);
}

// The image's facts from the flags: --expect-mpi IMPL@VERSION, --expect-pmix, --cuda, --cuda-floor.
Result<envspec::ImageFacts> facts_from_flags(const PreflightArgs& args) {
  envspec::ImageFacts facts;
  if (!args.expect_mpi.empty()) {
    const std::size_t at = args.expect_mpi.find('@');
    const std::string impl = args.expect_mpi.substr(0, at);
    if (at == std::string::npos || (impl != "openmpi" && impl != "mpich")) {
      return invalid_input("invalid --expect-mpi '{}': expected openmpi@VERSION or mpich@VERSION",
                           args.expect_mpi);
    }
    facts.mpi_impl = impl;
    LS_TRY_ASSIGN(facts.mpi.version,
                  version_flag("--expect-mpi", args.expect_mpi.substr(at + 1), "openmpi@4.1.4"));
  }
  if (!args.expect_pmix.empty()) {
    LS_TRY_ASSIGN(facts.pmix.version, version_flag("--expect-pmix", args.expect_pmix, "4.2.2"));
  }
  if (!args.cuda.empty()) {
    LS_TRY_ASSIGN(facts.cuda.version, version_flag("--cuda", args.cuda, "12.1"));
  }
  if (!args.cuda_floor.empty()) {
    if (args.cuda_floor.find_first_not_of("0123456789.") != std::string::npos) {
      return invalid_input("invalid --cuda-floor '{}': expected a driver version such as 530.30.02",
                           args.cuda_floor);
    }
    LS_TRY_ASSIGN(facts.cuda_driver_floor, version_flag("--cuda-floor", args.cuda_floor, "530.30.02"));
  }
  return facts;
}

Result<ExitCode> run_preflight_command(PreflightArgs& args, const Context& ctx) {
  runner::PreflightRequest& req = args.request;
  const bool facts_given =
      !args.expect_mpi.empty() || !args.expect_pmix.empty() || !args.cuda.empty() || !args.cuda_floor.empty();
  if (!args.hold_exec.empty() && args.hold_cwd.empty()) {
    return invalid_input("unexpected arguments after IMAGE: {}", args.hold_exec.front());
  }
  // --gate: the ranks mpirun starts meanwhile wait at this node's gate from now on.
  UniqueFd gate;
  if (!req.gate.empty()) {
    if (Result<UniqueFd> bound = runner::join::bind_gate(req.gate)) {
      gate = std::move(*bound);
    } // else another preflight of this job on this node keeps it (two names for one node)
  }
  const runner::ImageProbe image = runner::probe_image(req.image);
  if (facts_given) {
    LS_TRY_ASSIGN(req.facts, facts_from_flags(args));
  } else if (image.state == runner::ImageProbe::State::present) {
    // A missing or unreadable image has no labels to read; its check says so.
    LS_TRY_ASSIGN(const runner::ImageArg arg, runner::parse_image_arg(req.image));
    LS_TRY_ASSIGN(req.facts, runner::image_facts(arg));
  }
  LS_TRY_ASSIGN(runner::NodeReport report, runner::preflight_node(req, image));
  if (!args.node.empty()) {
    if (args.node.size() > 255 ||
        std::any_of(args.node.begin(), args.node.end(), [](char c) { return c <= 0x20 || c >= 0x7f; })) {
      return invalid_input("invalid --node '{}': a host name without spaces or control characters",
                           args.node);
    }
    report.node = args.node;
  }
  if (ctx.json) {
    const std::string line =
        runner::to_json(report).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("%s\n", line.c_str());
  } else {
    std::fputs(runner::render_preflight_table({report}).c_str(), stdout);
  }
  std::fflush(stdout);
  const runner::join::GateWord word =
      req.gate.empty() ? runner::join::GateWord::go : read_word(); // every node's verdict
  const bool go = report.ok() && word == runner::join::GateWord::go;
  if (gate.valid()) {
    // The report is out: let go of the agent's output, so an ssh session carrying mpirun's daemon
    // beside this preflight (the rsh relay) ends with the daemon, not with the job's gate.
    if (const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC); null >= 0) {
      (void)::dup2(null, 1);
      (void)::dup2(null, 2);
      ::close(null);
    }
  }
  if (go && !args.hold_exec.empty()) {
    hold_ranks_container(args, gate.get());
  }
  if (gate.valid()) {
    runner::join::keep_gate(gate.get(), go ? runner::join::GateWord::go : runner::join::GateWord::stop, 0);
  }
  return report.ok() ? ExitCode::ok : ExitCode::check_failed;
}

} // namespace

void register_preflight(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<PreflightArgs>();
  runner::PreflightRequest& r = args->request;
  auto* cmd = app.add_subcommand("preflight", "Check this node for a launch of an image (lockstep run)");
  cmd->add_option("IMAGE", r.image, "The image, as `lockstep exec` takes it")->required();
  cmd->add_option("--digest", r.image_digest, "Require the image to have this digest")
      ->type_name("sha256:HEX");
  cmd->add_option("--gpus-per-node", r.gpus_per_node, "GPUs each node must have (default 0: no GPU checks)")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--mpi-model", r.model, "hybrid (default: the host's mpirun or srun) or container")
      ->type_name("MODEL")
      ->check(CLI::IsMember({"hybrid", "container"}));
  cmd->add_option("--launcher", r.launcher, "Who starts the ranks: mpirun (default), slurm or local")
      ->type_name("LAUNCHER")
      ->check(CLI::IsMember({"local", "mpirun", "slurm"}));
  cmd->add_option("--expect-mpi", args->expect_mpi, "The image's MPI (instead of its labels)")
      ->type_name("IMPL@VERSION");
  cmd->add_option("--expect-pmix", args->expect_pmix, "The image's PMIx version (instead of its labels)")
      ->type_name("VERSION");
  cmd->add_option("--cuda", args->cuda, "The image's CUDA version, for messages (instead of its labels)")
      ->type_name("VERSION");
  cmd->add_option("--cuda-floor", args->cuda_floor,
                  "The lowest driver the image's CUDA needs (instead of its labels)")
      ->type_name("VERSION");
  cmd->add_option("--gate", r.gate,
                  "Keep the ranks' gate (their report directory), then pass on the word read from "
                  "stdin until it ends (lockstep run)")
      ->group("");
  cmd->add_option("--hold-cwd", args->hold_cwd, "Hold the ranks' container after a pass (lockstep run)")
      ->group("");
  cmd->add_option("HOLD", args->hold_exec, "After --: the ranks' lockstep exec line (lockstep run)")
      ->group("");
  cmd->add_flag("--prepare-store", r.prepare_store,
                "Create this node's store if missing (lockstep run's staging)")
      ->group("");
  cmd->add_option("--unpack-bytes", r.unpack_bytes, "Free space the unpacked image needs (default 0)")
      ->type_name("N");
  cmd->add_option("--node", args->node, "The node name to report (default: the host name)")
      ->type_name("NAME");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_examples);
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_preflight_command(*args, ctx); }; });
}

} // namespace lockstep::cli
