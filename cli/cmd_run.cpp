// `lockstep run`: launch a job in an image across nodes with mpirun or Slurm, checking every node
// first (preflight), and leave a run record. Planning is runner/launch/launch.cpp, node checks
// runner/launch/preflight.cpp, the preflight fan-out and the verdict runner/launch/job.cpp, records
// runner/launch/run_record.cpp; this file parses the arguments and prints. docs/launch.md.
#include "cli/cli.hpp"
#include "envspec/lock/image_facts.hpp"
#include "envspec/settings/settings.hpp"
#include "runner/launch/job.hpp"
#include "runner/launch/launch.hpp"
#include "runner/launch/preflight.hpp"
#include "runner/launch/relay.hpp"
#include "runner/launch/run_record.hpp"
#include "runner/launch/stage.hpp"
#include "runner/runtime/exec.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/base/version.hpp"
#include "support/oci/image_source.hpp"
#include "support/store/blob_store.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <set>

namespace lockstep::cli {

namespace fs = std::filesystem;

namespace {

struct RunArgs {
  std::string launcher;
  std::string model;
  std::string runtime = "native";
  runner::LaunchRequest request;
  std::vector<std::string> binds;
  std::vector<std::string> envs;
  bool clean_env = false;
  bool record_env_values = false;
  bool dry_run = false;
  bool skip_preflight = false;
  std::string emit;
  std::vector<std::string> emit_args;
  std::string runs_dir;
  std::string job;
  std::string remote_lockstep;
  int preflight_timeout = 60;
};

constexpr const char* k_examples = R"(Examples:
  lockstep run -n 4 oci:build/mpi-hello -- python3 /opt/hello/hello.py
      four ranks on this node with the image's own mpirun (--mpi-model container)
  lockstep run --hostfile hosts -N 3 -n 4 build/mpi-hello.sif -- python3 /opt/hello/hello.py
      the host's mpirun starts one `lockstep exec` per rank on three nodes (hybrid model)
  salloc -N 2 lockstep run --ranks-per-node 8 oci:build/train -- python3 train.py
      inside an allocation: srun --mpi=pmix (chosen from the image's MPI)
  lockstep run --hostfile hosts -N 3 -n 24 docker://registry.lab:5000/team/train:v1 -- python3 train.py
      pulled once, here; staged into the stores of the nodes that lack it (no node asks the registry)
  lockstep run --dry-run -N 2 --hostfile hosts oci:build/train -- python3 train.py
      print the preflight and launch commands, run nothing
  lockstep run --emit sbatch job.sh -N 4 --ranks-per-node 8 --gpus-per-node 8 train.sif -- python3 train.py
  lockstep run --runtime apptainer --dry-run -N 2 --hostfile hosts train.sif -- python3 train.py

Launcher (default): slurm when SLURM_JOB_ID is set, mpirun with --hostfile or -N > 1, else local.
Before any rank starts, every node is checked in parallel (the image and its digest, the NVIDIA
driver against the image's CUDA floor when GPUs are requested, host MPI/PMIx against the image's,
GPU count, user namespaces, free space): a table of results, and exit 1 naming each failing node.
mpirun reaches nodes with its rsh agent (OMPI_MCA_plm_rsh_agent or --launcher-arg=--mca
--launcher-arg=plm_rsh_agent --launcher-arg=AGENT; default ssh), and preflight uses the same agent.

A record of each job (image and lock digests, nodes, commands, per-rank exit codes, times) goes to
$LOCKSTEP_RUNS (default ~/.local/state/lockstep/runs)/<job>/record.json (directories 0700, files
0600); ranks must be able to write there (a shared file system on a real cluster). --env values reach
the ranks through the launcher's environment, never their command lines (ps); --env NAME passes this
environment's NAME, so a secret is on no command line at all. They are left out of the record,
--dry-run and --debug (names only) unless --record-env-values.

Exit status: 0 when every rank exited 0; the failing rank's status (the first to fail; the message
names its rank and node); 1 preflight failed; 2 bad usage or image; 3 a launcher or node unreachable.
See docs/launch.md.)";

// The path of this lockstep binary (the nodes run the same one unless --lockstep says otherwise).
std::string this_lockstep() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "lockstep" : self.string();
}

// JSON text of a record or a plan: bytes that are not UTF-8 (a command's file name in Latin-1)
// become U+FFFD instead of failing the dump after the job ran.
std::string dump_json(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// How the preflight reaches the nodes, from the command line and the environment.
runner::PreflightFanout fanout(const RunArgs& args, const std::string& lockstep, bool dry_run) {
  runner::PreflightFanout how;
  how.lockstep = lockstep;
  how.launcher_args = args.request.launcher_args;
  const char* agent = std::getenv("OMPI_MCA_plm_rsh_agent");
  how.env_agent = agent != nullptr ? agent : "";
  how.timeout = std::chrono::seconds(args.preflight_timeout);
  how.dry_run = dry_run;
  return how;
}

// The options that complete the request, each refused here rather than in every rank.
Result<void> complete_request(RunArgs& args) {
  runner::LaunchRequest& req = args.request;
  if (!args.launcher.empty()) {
    LS_TRY_ASSIGN(req.launcher, runner::parse_launcher(args.launcher));
  }
  if (!args.model.empty()) {
    LS_TRY_ASSIGN(req.model, runner::parse_mpi_model(args.model));
  }
  LS_TRY_ASSIGN(req.runtime, runner::parse_container_runtime(args.runtime));
  if (!req.pmi.empty() && req.pmi != "pmix" && req.pmi != "pmi2") {
    return invalid_input("unknown --pmi '{}': use pmix or pmi2", req.pmi);
  }
  for (const std::string& b : args.binds) {
    LS_TRY(runner::parse_bind(b)); // refuse a bad --bind here, not in every rank
    req.exec_args.insert(req.exec_args.end(), {"--bind", b});
  }
  for (const std::string& e : args.envs) {
    if (e.find('=') != std::string::npos) {
      req.exec_args.insert(req.exec_args.end(), {"--env", e});
      continue;
    }
    // --env NAME: the value this process has (a secret then is on no command line at all).
    const char* value = e.empty() ? nullptr : std::getenv(e.c_str());
    if (value == nullptr) {
      return invalid_input("--env '{}': {} is not set here; give --env NAME=VALUE, or export {} first", e,
                           e.empty() ? "the name" : e, e.empty() ? "NAME" : e);
    }
    req.exec_args.insert(req.exec_args.end(), {"--env", e + "=" + value});
  }
  if (args.clean_env) {
    req.exec_args.emplace_back("--cleanenv");
  }
  if (!args.emit.empty()) {
    if (args.emit != "sbatch") {
      return invalid_input("unknown --emit '{}': use --emit sbatch FILE", args.emit);
    }
    if (args.emit_args.size() != 1) {
      return invalid_input("--emit sbatch needs the output file: --emit sbatch FILE");
    }
  }
  return {};
}

// One `lockstep run`: what each pass of run_run_command learns, for the passes after it.
struct RunJob {
  RunJob(RunArgs& args_, Context& ctx_) : args(args_), ctx(ctx_), req(args_.request) {}

  RunArgs& args;
  Context& ctx;
  runner::LaunchRequest& req;
  // read_image
  runner::ImageDescription info;
  std::string image_digest; ///< "" when the image has none (a directory)
  std::string pulled_from;  ///< the registry reference the image was pulled from, if any
  // locate_job
  runner::LaunchSite site;
  std::string job;
  // plan_job
  runner::LaunchPlan plan;         ///< what runs
  runner::LaunchRequest shown_req; ///< the request as the record, --dry-run and --debug show it
  runner::LaunchPlan shown;        ///< the plan of shown_req
  runner::PreflightRequest pre;
  // the run
  std::vector<std::vector<std::string>> preflight_commands;
  std::vector<runner::NodeReport> reports;
  std::string gate; ///< a gated launch: what the nodes were told ("go", "stop"); "" when not gated
  nlohmann::ordered_json record;
  std::int64_t start = 0; ///< wall clock ns, before the preflight

  Result<void> write_record() const {
    return write_file_atomic(fs::path(site.run_dir) / "record.json", dump_json(record, 2) + "\n",
                             runner::k_record_file_mode);
  }
};

// A registry image (docker://, oras://) is fetched once, here, into this node's store, and the job
// runs that copy: staged to the nodes that lack it, never pulled by each node or rank
// (docs/launch.md, "Registry images"). A dry run or --emit only reads its manifest and config.
Result<void> fetch_remote_image(RunJob& j, runner::ImageArg& arg) {
  if (!arg.ref.is_remote() || j.args.dry_run || !j.args.emit.empty()) {
    return {};
  }
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  log::Timer timer("pull");
  LS_TRY_ASSIGN(runner::StageImage image, runner::stage_image_of(arg, store));
  LS_TRY_ASSIGN(std::string placed, runner::place_staged(store, image));
  log::info("{} is {}; the job runs its copy in this node's store, {}", arg.ref.str(), image.digest().str(),
            placed);
  j.pulled_from = arg.ref.str();
  LS_TRY_ASSIGN(arg, runner::parse_image_arg(placed));
  return {};
}

// The image: its absolute name, identity and facts.
Result<void> read_image(RunJob& j) {
  LS_TRY_ASSIGN(runner::ImageArg arg, runner::parse_image_arg(j.req.image));
  LS_TRY(fetch_remote_image(j, arg));
  j.req.image = runner::absolute_image(arg);
  LS_TRY_ASSIGN(j.info, runner::describe_image(arg));
  j.image_digest = j.info.digest ? j.info.digest->str() : "";
  return {};
}

// Where the job runs: this lockstep, the allocation and hostfile, the job's name and record directory.
Result<void> locate_job(RunJob& j) {
  const RunArgs& args = j.args;
  runner::LaunchRequest& req = j.req;
  runner::LaunchSite& site = j.site;
  site.lockstep = args.remote_lockstep.empty() ? this_lockstep() : args.remote_lockstep;
  if (site.lockstep.starts_with("/")) {
    site.rank_helper = site.lockstep; // each rank runs `lockstep _rank` (one binary)
  }
  site.root = ::geteuid() == 0;
  if (const char* id = std::getenv("SLURM_JOB_ID"); id != nullptr && *id != '\0') {
    site.slurm_job_id = id;
  }
  if (!req.hostfile.empty()) {
    LS_TRY_ASSIGN(std::string text, read_file(req.hostfile, 16U << 20));
    LS_TRY_ASSIGN(site.hostfile, runner::parse_hostfile(text, req.hostfile));
    std::error_code ec;
    req.hostfile = fs::absolute(req.hostfile, ec).string();
  }
  req.runs_dir = args.runs_dir.empty() ? "" : fs::absolute(args.runs_dir).string();
  req.job = args.job;
  req.record_env_values = args.record_env_values;
  j.job = args.job.empty() ? runner::new_job_id(site.slurm_job_id) : args.job;
  const std::string& job = j.job;
  if (job.empty() || job.size() > 200 || job.find('/') != std::string::npos || job == "." || job == ".." ||
      escape_controls(job) != job) {
    return invalid_input("--job '{}' must be a plain directory name (no '/', no control characters)",
                         escape_controls(job));
  }
  const fs::path runs = args.runs_dir.empty() ? runner::default_runs_dir() : fs::path(args.runs_dir);
  site.run_dir = (fs::absolute(runs) / job).string();
  return {};
}

// --emit sbatch FILE: a batch script instead of a run.
Result<ExitCode> emit_sbatch(const RunJob& j) {
  // The script carries the --env values the ranks need: then it is for its owner only.
  const bool has_env_values = runner::without_env_values(j.req).exec_args != j.req.exec_args;
  const std::string& file = j.args.emit_args[0];
  std::string script = runner::render_sbatch(j.req, j.site, j.image_digest);
  LS_TRY(write_file_atomic(file, script, has_env_values ? 0700 : 0755));
  log::info("wrote {}: submit it with sbatch {}", file, file);
  return ExitCode::ok;
}

// The launch plan and the plan as shown (--env names only, unless --record-env-values); under
// mpirun each node's preflight, when it passes, holds the ranks' container while mpirun starts
// (docs/launch.md, "Ranks on one node"), not with --env: the preflight commands are recorded and
// shown, the --env values never are.
Result<void> plan_commands(RunJob& j) {
  const envspec::ImageFacts& facts = j.info.facts;
  LS_TRY_ASSIGN(j.plan, runner::plan_launch(j.req, j.site, facts));
  if (j.plan.runtime == runner::ContainerRuntime::native && j.plan.model == runner::MpiModel::hybrid &&
      j.plan.ranks > 1 && j.site.rank_helper.empty()) {
    // The slow path: every rank starts a container of its own (measured 2.4x bare mpirun's start
    // with 24 ranks, against 1.27x with the ranks sharing their node's).
    log::warn("lockstep's path on the nodes ({}) is not absolute: each rank starts a container of its "
              "own instead of sharing its node's, which starts the job 2-3x slower; give "
              "--lockstep an absolute path",
              j.site.lockstep);
  }
  j.shown_req.gate_seconds = j.req.gate_seconds;
  j.shown_req.relay_agent = j.req.relay_agent;
  LS_TRY_ASSIGN(j.shown, runner::plan_launch(j.shown_req, j.site, facts));
  const auto& rank = j.plan.rank;
  const bool env_values =
      std::find(j.req.exec_args.begin(), j.req.exec_args.end(), "--env") != j.req.exec_args.end();
  const auto exec_line = std::find(rank.begin(), rank.end(), "--");
  j.pre.hold_exec.clear();
  if (j.plan.launcher == runner::Launcher::mpirun && !j.site.rank_helper.empty() && !rank.empty() &&
      rank[0] == j.site.rank_helper && exec_line != rank.end() && !env_values) {
    std::error_code ec;
    j.pre.hold_cwd = fs::current_path(ec).string();
    j.pre.hold_exec.assign(exec_line + 1, rank.end());
    j.pre.hold_exec.insert(j.pre.hold_exec.end(), j.req.command.begin(), j.req.command.end());
  }
  return {};
}

// Whether mpirun starts while the nodes are checked: each rank then waits at its node's gate for
// the verdict on every node (docs/launch.md, "Preflight"). Under mpirun with hosts, the native
// runtime and lockstep-rank; not in a dry run (whose commands show the gate all the same).
bool gated(const RunJob& j) {
  return !j.args.skip_preflight && j.plan.launcher == runner::Launcher::mpirun &&
         j.plan.model == runner::MpiModel::hybrid && j.plan.runtime == runner::ContainerRuntime::native &&
         !j.plan.hosts.empty() && !j.site.rank_helper.empty();
}

// mpirun's agent words when each node's preflight can ride on the call that starts the node's
// daemon (docs/launch.md, "Preflight"): Open MPI before 5 (PRRTE, in 5, names its agent parameters
// otherwise), unless LOCKSTEP_RSH_RELAY=0. Empty: the separate call.
std::vector<std::string> relay_for(const RunJob& j) {
  const std::string& mpi = j.info.facts.mpi_impl;
  const std::string& version = j.info.facts.mpi.version;
  const bool before_5 =
      version.empty() || (version[0] >= '1' && version[0] <= '4' && version.size() > 1 && version[1] == '.');
  const char* relay = std::getenv("LOCKSTEP_RSH_RELAY");
  if ((!mpi.empty() && mpi != "openmpi") || !before_5 ||
      (relay != nullptr && std::string_view(relay) == "0")) {
    return {};
  }
  const runner::PreflightFanout how = fanout(j.args, j.site.lockstep, false);
  // The relay runs here, beside mpirun: this lockstep, not --remote-lockstep's.
  return runner::relay_agent(this_lockstep(), j.site.run_dir,
                             runner::rsh_agent(how.launcher_args, how.env_agent))
      .value_or(std::vector<std::string>());
}

// Sets or clears the gate: the ranks' wait (the preflight timeout and a margin) and the nodes'.
Result<void> set_gate(RunJob& j, bool on) {
  j.req.gate_seconds = on ? j.args.preflight_timeout + 30 : 0;
  j.pre.gate = on ? j.site.run_dir + "/ranks" : "";
  j.req.relay_agent = on ? relay_for(j) : std::vector<std::string>();
  return plan_commands(j);
}

// The launch plan, the plan as shown, and what preflight checks on every node.
Result<void> plan_job(RunJob& j) {
  const envspec::ImageFacts& facts = j.info.facts;
  j.shown_req = j.req.record_env_values ? j.req : runner::without_env_values(j.req);
  LS_TRY(plan_commands(j));
  for (const std::string& note : j.plan.notes) {
    log::warn("{}", note);
  }
  runner::PreflightRequest& pre = j.pre;
  pre.image = j.req.image;
  pre.image_digest = j.image_digest;
  pre.model = std::string(runner::name_of(j.plan.model));
  pre.launcher = std::string(runner::name_of(j.plan.launcher));
  pre.gpus_per_node = j.req.gpus_per_node;
  pre.facts = facts;
  pre.unpack_bytes = j.info.unpack_bytes;
  if (gated(j)) {
    LS_TRY(set_gate(j, true));
  }
  return {};
}

// --dry-run --json: the plan as one JSON object.
void print_dry_run_json(const RunJob& j) {
  const runner::LaunchPlan& plan = j.plan;
  nlohmann::ordered_json out;
  out["launcher"] = runner::name_of(plan.launcher);
  out["model"] = runner::name_of(plan.model);
  out["runtime"] = runner::name_of(plan.runtime);
  out["pmi"] = plan.pmi;
  out["nodes"] = plan.nodes;
  out["ranks"] = plan.ranks;
  out["preflight"] = j.preflight_commands;
  out["launch"] = j.shown.argv;
  out["env"] = j.shown.env;
  out["hostfile"] = plan.hostfile_text();
  out["notes"] = plan.notes;
  std::cout << dump_json(out, -1) << "\n";
}

// --dry-run: the preflight commands, the hostfile and the launch command, as shell.
void print_dry_run_text(const RunJob& j) {
  std::string out;
  if (!j.preflight_commands.empty()) {
    out += "# preflight, on every node in parallel\n";
    for (const auto& c : j.preflight_commands) {
      out += shell_join(c) + "\n";
    }
  }
  if (!j.plan.hosts.empty()) {
    out += fmt::format("# hostfile {}/hostfile\n", escape_controls(j.site.run_dir));
    std::string hf = j.plan.hostfile_text();
    std::size_t p = 0;
    while (p < hf.size()) {
      std::size_t e = hf.find('\n', p);
      out += "#   " + hf.substr(p, e - p) + "\n";
      p = e + 1;
    }
  }
  const std::vector<std::string>& exec_args = j.shown_req.exec_args;
  std::vector<std::string> hidden; // --env names whose values are not shown
  for (std::size_t i = 0; i + 1 < exec_args.size(); ++i) {
    if (exec_args[i] == "--env" && exec_args[i + 1].find('=') == std::string::npos) {
      hidden.push_back(exec_args[i + 1]);
    }
  }
  if (!hidden.empty()) {
    out += fmt::format("# the values of --env {} are not shown (--record-env-values shows them)\n",
                       fmt::join(hidden, ", "));
  }
  out += "# launch\n";
  for (const std::string& e : j.shown.env) {
    if (e.find('=') != std::string::npos) {
      out += shell_quote(e) + " ";
    }
  }
  out += shell_join(j.shown.argv) + "\n";
  std::cout << out;
}

// --dry-run: what a run would do, run nothing (the preflight commands are only built).
Result<ExitCode> show_dry_run(RunJob& j) {
  if (!j.args.skip_preflight) {
    LS_TRY(
        runner::preflight_nodes(j.plan, j.pre, fanout(j.args, j.site.lockstep, true), j.preflight_commands));
  }
  if (j.ctx.json) {
    print_dry_run_json(j);
  } else {
    print_dry_run_text(j);
  }
  return ExitCode::ok;
}

// The run directory (0700, its files 0600) with the hostfile, and the record's first fields.
Result<void> start_record(RunJob& j) {
  const runner::LaunchPlan& plan = j.plan;
  LS_TRY(runner::make_record_dirs(fs::path(j.site.run_dir) / "ranks"));
  if (!plan.hosts.empty()) {
    LS_TRY(runner::write_unsynced(fs::path(j.site.run_dir) / "hostfile", plan.hostfile_text(),
                                  runner::k_record_file_mode));
  }
  nlohmann::ordered_json& record = j.record;
  record["schema"] = 1;
  record["job"] = j.job;
  record["tool"] = fmt::format("lockstep {}", k_version);
  record["image"] = {{"ref", j.req.image},
                     {"digest", j.image_digest},
                     {"lock_digest", j.info.lock_digest},
                     {"facts", envspec::facts_json(j.info.facts)}};
  if (!j.pulled_from.empty()) {
    record["image"]["pulled_from"] = j.pulled_from;
  }
  record["launcher"] = runner::name_of(plan.launcher);
  record["model"] = runner::name_of(plan.model);
  record["runtime"] = runner::name_of(plan.runtime);
  if (!plan.pmi.empty()) {
    record["pmi"] = plan.pmi;
  }
  record["ranks"] = plan.ranks;
  record["command"] = j.req.command;
  record["run"] = runner::run_command_line(j.shown_req, j.site);
  j.start = runner::wall_clock_ns();
  return {};
}

// "node (check, check)" for each node whose preflight failed.
std::vector<std::string> failed_nodes(const std::vector<runner::NodeReport>& reports) {
  std::vector<std::string> names;
  for (const runner::NodeReport& r : reports) {
    if (!r.ok()) {
      std::vector<std::string> why;
      for (const runner::Check& c : r.checks) {
        if (c.status == runner::Check::Status::fail) {
          why.push_back(c.name);
        }
      }
      names.push_back(fmt::format("{} ({})", r.node, fmt::join(why, ", ")));
    }
  }
  return names;
}

// An image some node lacks (and nothing else wrong) is staged into the nodes' stores; the ranks then
// run the staged copy (docs/launch.md, "Staging").
Result<void> stage_if_missing(RunJob& j) {
  if (!j.req.stage || !runner::only_image_missing(j.reports) || j.plan.model != runner::MpiModel::hybrid ||
      j.plan.launcher == runner::Launcher::local) {
    return {};
  }
  LS_TRY_ASSIGN(runner::ImageArg arg, runner::parse_image_arg(j.req.image));
  if (arg.kind == runner::ImageArg::Kind::directory) {
    return {}; // no digest to check a copy by: preflight reports the missing directory
  }
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  LS_TRY_ASSIGN(runner::StageImage image, runner::stage_image_of(arg, store));
  if (image.digest().str() != j.image_digest) {
    return invalid_input("{} changed while lockstep run read it ({}, now {})", j.req.image, j.image_digest,
                         image.digest().str());
  }
  log::info("{} is missing on {}; staging it into the nodes' stores", j.req.image,
            fmt::join(failed_nodes(j.reports), ", "));
  LS_TRY_ASSIGN(runner::StageOutcome out,
                runner::stage_for_launch(j.plan, j.pre, fanout(j.args, j.site.lockstep, false), store, image,
                                         j.preflight_commands));
  nlohmann::ordered_json copied = nlohmann::ordered_json::array();
  for (const runner::StagedNode& n : out.copied) {
    copied.push_back({{"node", n.node}, {"ok", n.ok}, {"detail", n.detail}});
  }
  j.record["image"]["staged"] = {{"ref", out.image}, {"how", out.how}, {"nodes", copied}};
  j.reports = std::move(out.reports);
  // The ranks run the staged copy.
  j.req.image = out.image;
  j.shown_req.image = out.image;
  j.pre.image = out.image;
  LS_TRY_ASSIGN(j.plan, runner::plan_launch(j.req, j.site, j.info.facts));
  LS_TRY_ASSIGN(j.shown, runner::plan_launch(j.shown_req, j.site, j.info.facts));
  return {};
}

// The nodes' reports judged: an image some node lacks is staged, the reports recorded and shown;
// a failure is recorded and ends the run (exit 1).
Result<void> judge_nodes(RunJob& j) {
  LS_TRY(stage_if_missing(j));
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const runner::NodeReport& r : j.reports) {
    nodes.push_back(runner::to_json(r));
  }
  j.record["preflight"] = {{"skipped", false}, {"commands", j.preflight_commands}, {"nodes", nodes}};
  if (!j.gate.empty()) {
    j.record["preflight"]["gate"] = j.gate;
  }
  const bool failed = std::any_of(j.reports.begin(), j.reports.end(), [](const auto& r) { return !r.ok(); });
  if (failed || (log::level() >= log::Level::normal && !j.ctx.json)) {
    std::cerr << runner::render_preflight_table(j.reports);
  }
  if (!failed) {
    return {};
  }
  const std::vector<std::string> names = failed_nodes(j.reports);
  j.record["start"] = runner::iso8601_utc(j.start);
  j.record["end"] = runner::iso8601_utc(runner::wall_clock_ns());
  j.record["exit_code"] = 1;
  j.record["outcome"] = "preflight failed";
  LS_TRY(j.write_record());
  return Error{ExitCode::check_failed,
               fmt::format("preflight failed on {}: no rank was started (record: {}/record.json)",
                           fmt::join(names, ", "), j.site.run_dir)};
}

// Every node checked in parallel before any rank starts.
Result<void> check_nodes(RunJob& j) {
  if (j.args.skip_preflight) {
    log::warn("preflight skipped (--skip-preflight): nodes were not checked");
    j.record["preflight"] = {{"skipped", true}};
    return {};
  }
  log::Timer timer("preflight");
  LS_TRY_ASSIGN(j.reports, runner::preflight_nodes(j.plan, j.pre, fanout(j.args, j.site.lockstep, false),
                                                   j.preflight_commands));
  return judge_nodes(j);
}

// The launch command with this process's environment plus the plan's, started in the foreground.
Result<ForegroundChild> start_launcher(RunJob& j, bool hold_stderr = false) {
  j.record["launch"] = j.shown.argv;
  j.record["env"] = j.shown.env;
  std::optional<std::vector<std::string>> env;
  if (!j.plan.env.empty()) {
    env = std::vector<std::string>();
    for (char** e = environ; *e != nullptr; ++e) {
      env->emplace_back(*e);
    }
    env->insert(env->end(), j.plan.env.begin(), j.plan.env.end());
  }
  log::debug("run: {}", shell_join(j.shown.argv));
  return ForegroundChild::start(j.plan.argv, env, hold_stderr);
}

// Runs the launch command in the foreground, after the preflight.
Result<int> run_launcher(RunJob& j) {
  LS_TRY_ASSIGN(ForegroundChild launcher, start_launcher(j));
  return launcher.wait();
}

// A gated launch: mpirun starts while every node's preflight runs, its ranks waiting at their
// nodes' gates; every node is then told the verdict. On a stop mpirun ends as its ranks leave; an
// image some node lacks is then staged and the job launched again, after the preflight. Errors are
// the preflight's and the staging's; the launcher's outcome goes to `status`.
Result<void> run_gated(RunJob& j, Result<int>& status) {
  const runner::PreflightFanout how = fanout(j.args, j.site.lockstep, false);
  std::optional<runner::GatedPreflight> preflight;
  if (!j.req.relay_agent.empty()) { // the nodes' preflights come with mpirun's calls to its agent
    Result<runner::GatedPreflight> relayed =
        runner::GatedPreflight::start(j.plan, j.pre, how, j.preflight_commands, j.site.run_dir);
    if (!relayed) {
      return relayed.error();
    }
    preflight.emplace(std::move(*relayed));
  }
  // Else mpirun first: its daemons take longer to come up than a node's preflight. Its complaints
  // (a node it can't reach) show only when the launch goes ahead.
  Result<ForegroundChild> launcher = start_launcher(j, true);
  if (!preflight) {
    Result<runner::GatedPreflight> direct =
        runner::GatedPreflight::start(j.plan, j.pre, how, j.preflight_commands);
    if (!direct) {
      return direct.error();
    }
    preflight.emplace(std::move(*direct));
  }
  {
    log::Timer timer("preflight");
    j.reports = preflight->reports([&launcher] { return launcher && launcher->running(); });
  }
  const bool pass =
      launcher && std::all_of(j.reports.begin(), j.reports.end(), [](const auto& r) { return r.ok(); });
  preflight->tell(pass);
  j.gate = pass ? "go" : "stop";
  if (launcher) {
    launcher->release_stderr(pass);
  }
  if (pass) {
    LS_TRY(judge_nodes(j));
    status = launcher->wait();
    preflight->finish();
    return {};
  }
  if (!launcher) {
    status = launcher.error();
    preflight->finish();
    return judge_nodes(j);
  }
  (void)launcher->end_within(std::chrono::seconds(10)); // its ranks leave at once on a stop
  preflight->finish();
  LS_TRY(set_gate(j, false));
  LS_TRY(judge_nodes(j)); // stages an image only missing, else ends the run
  status = run_launcher(j);
  return {};
}

// The ranks' reports and the launcher's status judged into the run's verdict, and the record
// completed with them.
runner::RunVerdict judge_and_record(RunJob& j, const Result<int>& status, std::int64_t end) {
  std::vector<runner::RankReport> ranks = runner::read_rank_reports(fs::path(j.site.run_dir) / "ranks");
  std::set<std::string> node_names;
  for (const runner::RankReport& r : ranks) {
    node_names.insert(r.node);
  }
  if (node_names.empty()) {
    for (const runner::NodeReport& r : j.reports) {
      node_names.insert(r.node);
    }
    for (const runner::HostSlots& h : j.plan.hosts) {
      node_names.insert(h.host);
    }
  }
  nlohmann::ordered_json& record = j.record;
  record["nodes"] = std::vector<std::string>(node_names.begin(), node_names.end());
  record["rank_exits"] = runner::rank_exits_json(ranks);
  record["start"] = runner::iso8601_utc(j.start);
  record["end"] = runner::iso8601_utc(end);
  runner::RunVerdict verdict = runner::judge_run(status, ranks, j.plan.argv[0], j.plan.ranks);
  if (verdict.failure) {
    record["failure"] = {{"rank", verdict.failure->rank},
                         {"node", verdict.failure->node},
                         {"exit_code", verdict.failure->exit_code}};
  }
  record["exit_code"] = verdict.exit_status;
  record["outcome"] = verdict.exit_status == 0 ? "ok" : verdict.message;
  return verdict;
}

// Writes the record, shows it (--json) or where it is, and ends with the run's own status.
Result<ExitCode> finish(const RunJob& j, const runner::RunVerdict& verdict) {
  LS_TRY(j.write_record());
  if (j.ctx.json) {
    std::cout << dump_json(j.record, -1) << "\n";
  } else {
    log::info("run record: {}/record.json", j.site.run_dir);
  }
  const int code = verdict.exit_status;
  if (code != 0) {
    return Error{ExitCode::check_failed,
                 fmt::format("{} (record: {}/record.json)", verdict.message, j.site.run_dir), false,
                 (code & 0xff) != 0 ? code & 0xff : 1};
  }
  return ExitCode::ok;
}

Result<ExitCode> run_run_command(RunArgs& args, Context& ctx) {
  LS_TRY(complete_request(args));
  RunJob j(args, ctx);
  // The image, then where the job runs and records itself.
  LS_TRY(read_image(j));
  LS_TRY(locate_job(j));
  if (!args.emit.empty()) {
    return emit_sbatch(j);
  }
  // The plan, and what preflight checks.
  LS_TRY(plan_job(j));
  if (args.dry_run) {
    return show_dry_run(j);
  }
  // The run: its record directory, the preflight, the launch, the verdict, the record.
  LS_TRY(start_record(j));
  Result<int> status = 0;
  if (j.req.gate_seconds > 0) {
    LS_TRY(run_gated(j, status));
  } else {
    LS_TRY(check_nodes(j));
    status = run_launcher(j);
  }
  const std::int64_t end = runner::wall_clock_ns();
  const runner::RunVerdict verdict = judge_and_record(j, status, end);
  return finish(j, verdict);
}

} // namespace

void register_run(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<RunArgs>();
  runner::LaunchRequest& r = args->request;
  auto* cmd =
      app.add_subcommand("run", "Launch a (multi-node MPI) job in an image, checking every node first");
  cmd->add_option("IMAGE", r.image, "The image: oci:DIR[:TAG], a .sif, docker://REF, ... (as for exec)")
      ->required();
  cmd->add_option("COMMAND", r.command, "What each rank runs, after --")->required();
  cmd->add_option("--launcher", args->launcher, "local, mpirun or slurm (default: see below)")
      ->type_name("NAME");
  cmd->add_option("-N,--nodes", r.nodes, "Nodes")->type_name("N")->check(CLI::PositiveNumber);
  cmd->add_option("-n,--ranks", r.ranks, "Ranks in all")->type_name("N")->check(CLI::PositiveNumber);
  cmd->add_option("--ranks-per-node", r.ranks_per_node, "Ranks on each node")
      ->type_name("K")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--hostfile", r.hostfile, "Open MPI hostfile naming the nodes (mpirun)")->type_name("FILE");
  cmd->add_option("--gpus-per-node", r.gpus_per_node, "GPUs each node must have; ranks get --gpus")
      ->type_name("G")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--mpi-model", args->model,
                  "hybrid: the host's mpirun/srun starts a container per rank (default); container: the "
                  "image's mpirun, one node")
      ->type_name("MODEL");
  cmd->add_option("--pmi", r.pmi, "srun --mpi= plugin: pmix or pmi2 (default: from the image's MPI)")
      ->type_name("pmix|pmi2");
  cmd->add_option("--runtime", args->runtime,
                  "native (lockstep exec, default), apptainer, singularity or enroot (pyxis under Slurm)")
      ->type_name("NAME");
  cmd->add_option("--launcher-arg", r.launcher_args, "An argument for mpirun/srun (repeatable)")
      ->type_name("ARG")
      ->allow_extra_args(false);
  cmd->add_option("-B,--bind", args->binds, "Bind a host path into every rank (repeatable)")
      ->type_name("SRC[:DST][:ro]")
      ->allow_extra_args(false);
  cmd->add_option("-e,--env", args->envs,
                  "Set a variable in every rank (repeatable); NAME alone passes this environment's value")
      ->type_name("NAME[=VALUE]")
      ->allow_extra_args(false);
  cmd->add_flag("--cleanenv", args->clean_env, "Don't pass the host's environment into the ranks");
  cmd->add_flag("--record-env-values", args->record_env_values,
                "Keep --env values in the run record, --dry-run and --debug (default: names only)");
  cmd->add_flag("--dry-run", args->dry_run, "Print the preflight and launch commands; run nothing");
  cmd->add_option("--emit", args->emit_args, "Write a batch script instead of running: --emit sbatch FILE")
      ->type_name("sbatch FILE")
      ->expected(2)
      ->allow_extra_args(false);
  cmd->add_flag("--no-stage{false}", r.stage,
                "Don't copy an image some node lacks into the nodes' stores: fail preflight instead");
  cmd->add_flag("--skip-preflight", args->skip_preflight,
                "Don't check the nodes first (logged and recorded)");
  cmd->add_option("--runs-dir", args->runs_dir,
                  "Where run records go (default $LOCKSTEP_RUNS or ~/.local/state/lockstep/runs)")
      ->type_name("DIR");
  cmd->add_option("--job", args->job, "Name of this job's record directory (default: TIME-HOST-PID)")
      ->type_name("NAME");
  cmd->add_option("--lockstep", args->remote_lockstep,
                  "The lockstep binary on the nodes (default: this one's path)")
      ->type_name("PATH");
  cmd->add_option("--preflight-timeout", args->preflight_timeout, "Seconds to wait for each node's preflight")
      ->type_name("S")
      ->check(CLI::PositiveNumber);
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_examples);
  cmd->callback([args, &ctx] {
    if (!args->emit_args.empty()) {
      args->emit = args->emit_args[0];
      args->emit_args.erase(args->emit_args.begin());
    }
    ctx.action = [args, &ctx] { return run_run_command(*args, ctx); };
  });
}

} // namespace lockstep::cli
