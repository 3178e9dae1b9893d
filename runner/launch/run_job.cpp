#include "runner/launch/run_job.hpp"

#include "envspec/lock/image_facts.hpp"
#include "envspec/settings/settings.hpp"
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

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

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
PreflightFanout fanout(const RunJobOptions& args, const std::string& lockstep, bool dry_run) {
  PreflightFanout how;
  how.lockstep = lockstep;
  how.launcher_args = args.request.launcher_args;
  const char* agent = std::getenv("OMPI_MCA_plm_rsh_agent");
  how.env_agent = agent != nullptr ? agent : "";
  how.timeout = std::chrono::seconds(args.preflight_timeout);
  how.dry_run = dry_run;
  return how;
}

// The options that complete the request, each refused here rather than in every rank.
Result<void> complete_request(RunJobOptions& args) {
  LaunchRequest& req = args.request;
  if (!args.launcher.empty()) {
    LS_TRY_ASSIGN(req.launcher, parse_launcher(args.launcher));
  }
  if (!args.model.empty()) {
    LS_TRY_ASSIGN(req.model, parse_mpi_model(args.model));
  }
  LS_TRY_ASSIGN(req.runtime, parse_container_runtime(args.runtime));
  if (!req.pmi.empty() && req.pmi != "pmix" && req.pmi != "pmi2") {
    return invalid_input("unknown --pmi '{}': use pmix or pmi2", req.pmi);
  }
  for (const std::string& b : args.binds) {
    LS_TRY(parse_bind(b)); // refuse a bad --bind here, not in every rank
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

// One `lockstep run`: what each pass of run_job learns, for the passes after it.
struct RunJob {
  explicit RunJob(RunJobOptions& args_) : args(args_), req(args_.request) {}

  RunJobOptions& args;
  LaunchRequest& req;
  // read_image
  ImageDescription info;
  std::string image_digest; ///< "" when the image has none (a directory)
  std::string pulled_from;  ///< the registry reference the image was pulled from, if any
  // locate_job
  LaunchSite site;
  std::string job;
  // plan_job
  LaunchPlan plan;         ///< what runs
  LaunchRequest shown_req; ///< the request as the record, --dry-run and --debug show it
  LaunchPlan shown;        ///< the plan of shown_req
  PreflightRequest pre;
  // the run
  std::vector<std::vector<std::string>> preflight_commands;
  std::vector<NodeReport> reports;
  std::string gate; ///< a gated launch: what the nodes were told ("go", "stop"); "" when not gated
  nlohmann::ordered_json record;
  std::int64_t start = 0; ///< wall clock ns, before the preflight

  Result<void> write_record() const {
    return write_file_atomic(fs::path(site.run_dir) / "record.json", dump_json(record, 2) + "\n",
                             k_record_file_mode);
  }
};

// A registry image (docker://, oras://) is fetched once, here, into this node's store, and the job
// runs that copy: staged to the nodes that lack it, never pulled by each node or rank
// (docs/launch.md, "Registry images"). A dry run or --emit only reads its manifest and config.
Result<void> fetch_remote_image(RunJob& j, ImageArg& arg) {
  if (!arg.ref.is_remote() || j.args.dry_run || !j.args.emit.empty()) {
    return {};
  }
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  log::Timer timer("pull");
  LS_TRY_ASSIGN(StageImage image, stage_image_of(arg, store));
  LS_TRY_ASSIGN(std::string placed, place_staged(store, image));
  log::info("{} is {}; the job runs its copy in this node's store, {}", arg.ref.str(), image.digest().str(),
            placed);
  j.pulled_from = arg.ref.str();
  LS_TRY_ASSIGN(arg, parse_image_arg(placed));
  return {};
}

// The image: its absolute name, identity and facts.
Result<void> read_image(RunJob& j) {
  LS_TRY_ASSIGN(ImageArg arg, parse_image_arg(j.req.image));
  LS_TRY(fetch_remote_image(j, arg));
  j.req.image = absolute_image(arg);
  LS_TRY_ASSIGN(j.info, describe_image(arg));
  j.image_digest = j.info.digest ? j.info.digest->str() : "";
  return {};
}

// Where the job runs: this lockstep, the allocation and hostfile, the job's name and record directory.
Result<void> locate_job(RunJob& j) {
  const RunJobOptions& args = j.args;
  LaunchRequest& req = j.req;
  LaunchSite& site = j.site;
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
    LS_TRY_ASSIGN(site.hostfile, parse_hostfile(text, req.hostfile));
    std::error_code ec;
    req.hostfile = fs::absolute(req.hostfile, ec).string();
  }
  req.runs_dir = args.runs_dir.empty() ? "" : fs::absolute(args.runs_dir).string();
  req.job = args.job;
  req.record_env_values = args.record_env_values;
  j.job = args.job.empty() ? new_job_id(site.slurm_job_id) : args.job;
  const std::string& job = j.job;
  LS_TRY(check_job_name(job));
  const fs::path runs = args.runs_dir.empty() ? default_runs_dir() : fs::path(args.runs_dir);
  site.run_dir = (fs::absolute(runs) / job).string();
  return {};
}

// --emit sbatch FILE: a batch script instead of a run.
Result<void> emit_sbatch(const RunJob& j) {
  // The script carries the --env values the ranks need: then it is for its owner only.
  const bool has_env_values = without_env_values(j.req).exec_args != j.req.exec_args;
  const std::string& file = j.args.emit_args[0];
  std::string script = render_sbatch(j.req, j.site, j.image_digest);
  LS_TRY(write_file_atomic(file, script, has_env_values ? 0700 : 0755));
  log::info("wrote {}: submit it with sbatch {}", file, file);
  return {};
}

// The launch plan and the plan as shown (--env names only, unless --record-env-values); under
// mpirun each node's preflight, when it passes, holds the ranks' container while mpirun starts
// (docs/launch.md, "Ranks on one node"), not with --env: the preflight commands are recorded and
// shown, the --env values never are.
Result<void> plan_commands(RunJob& j) {
  const envspec::ImageFacts& facts = j.info.facts;
  LS_TRY_ASSIGN(j.plan, plan_launch(j.req, j.site, facts));
  if (j.plan.runtime == ContainerRuntime::native && j.plan.model == MpiModel::hybrid && j.plan.ranks > 1 &&
      j.site.rank_helper.empty()) {
    // The slow path: every rank starts a container of its own (measured 2.4x bare mpirun's start
    // with 24 ranks, against 1.27x with the ranks sharing their node's).
    log::warn("lockstep's path on the nodes ({}) is not absolute: each rank starts a container of its "
              "own instead of sharing its node's, which starts the job 2-3x slower; give "
              "--lockstep an absolute path",
              j.site.lockstep);
  }
  j.shown_req.gate_seconds = j.req.gate_seconds;
  j.shown_req.relay_agent = j.req.relay_agent;
  LS_TRY_ASSIGN(j.shown, plan_launch(j.shown_req, j.site, facts));
  const auto& rank = j.plan.rank;
  const bool env_values =
      std::find(j.req.exec_args.begin(), j.req.exec_args.end(), "--env") != j.req.exec_args.end();
  const auto exec_line = std::find(rank.begin(), rank.end(), "--");
  j.pre.hold_exec.clear();
  if (j.plan.launcher == Launcher::mpirun && !j.site.rank_helper.empty() && !rank.empty() &&
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
// runtime and the ranks' shared container; not in a dry run (whose commands show the gate all the same).
bool gated(const RunJob& j) {
  return !j.args.skip_preflight && j.plan.launcher == Launcher::mpirun && j.plan.model == MpiModel::hybrid &&
         j.plan.runtime == ContainerRuntime::native && !j.plan.hosts.empty() && !j.site.rank_helper.empty();
}

// mpirun's agent words when each node's preflight can ride on the call that starts the node's
// daemon (docs/launch.md, "Preflight"): Open MPI before 5 (PRRTE, in 5, names its agent parameters
// otherwise), unless LOCKSTEP_RSH_RELAY=0. Empty: the separate call.
std::vector<std::string> relay_for(const RunJob& j) {
  const char* relay = std::getenv("LOCKSTEP_RSH_RELAY");
  if (!relay_fits_mpi(j.info.facts) || (relay != nullptr && std::string_view(relay) == "0")) {
    return {};
  }
  const PreflightFanout how = fanout(j.args, j.site.lockstep, false);
  // The relay runs here, beside mpirun: this lockstep, not --remote-lockstep's.
  return relay_agent(this_lockstep(), j.site.run_dir, rsh_agent(how.launcher_args, how.env_agent))
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
  j.shown_req = j.req.record_env_values ? j.req : without_env_values(j.req);
  LS_TRY(plan_commands(j));
  for (const std::string& note : j.plan.notes) {
    log::warn("{}", note);
  }
  PreflightRequest& pre = j.pre;
  pre.image = j.req.image;
  pre.image_digest = j.image_digest;
  pre.model = std::string(name_of(j.plan.model));
  pre.launcher = std::string(name_of(j.plan.launcher));
  pre.gpus_per_node = j.req.gpus_per_node;
  pre.facts = facts;
  pre.unpack_bytes = j.info.unpack_bytes;
  if (gated(j)) {
    LS_TRY(set_gate(j, true));
  }
  return {};
}

// --dry-run --json: the plan as one JSON object.
std::string dry_run_json(const RunJob& j) {
  const LaunchPlan& plan = j.plan;
  nlohmann::ordered_json out;
  out["launcher"] = name_of(plan.launcher);
  out["model"] = name_of(plan.model);
  out["runtime"] = name_of(plan.runtime);
  out["pmi"] = plan.pmi;
  out["nodes"] = plan.nodes;
  out["ranks"] = plan.ranks;
  out["preflight"] = j.preflight_commands;
  out["launch"] = j.shown.argv;
  out["env"] = j.shown.env;
  out["hostfile"] = plan.hostfile_text();
  out["notes"] = plan.notes;
  return dump_json(out, -1) + "\n";
}

// --dry-run: the preflight commands, the hostfile and the launch command, as shell.
std::string dry_run_text(const RunJob& j) {
  std::string out;
  if (!j.preflight_commands.empty()) {
    out += "# preflight, on every node in parallel\n";
    for (const auto& c : j.preflight_commands) {
      out += shell_join(c) + "\n";
    }
  }
  if (!j.plan.hosts.empty()) {
    out += fmt::format("# hostfile {}/hostfile\n", escape_controls(j.site.run_dir));
    const std::string hf = j.plan.hostfile_text();
    for (const std::string_view line : text_lines(hf)) {
      out += fmt::format("#   {}\n", line);
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
  return out;
}

// --dry-run: what a run would do, run nothing (the preflight commands are only built).
Result<RunJobOutcome> show_dry_run(RunJob& j) {
  if (!j.args.skip_preflight) {
    LS_TRY(preflight_nodes(j.plan, j.pre, fanout(j.args, j.site.lockstep, true), j.preflight_commands));
  }
  RunJobOutcome outcome;
  outcome.output = j.args.json ? dry_run_json(j) : dry_run_text(j);
  return outcome;
}

// The run directory (0700, its files 0600) with the hostfile, and the record's first fields.
Result<void> start_record(RunJob& j) {
  const LaunchPlan& plan = j.plan;
  LS_TRY(make_record_dirs(fs::path(j.site.run_dir) / "ranks"));
  if (!plan.hosts.empty()) {
    LS_TRY(write_unsynced(fs::path(j.site.run_dir) / "hostfile", plan.hostfile_text(), k_record_file_mode));
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
  record["launcher"] = name_of(plan.launcher);
  record["model"] = name_of(plan.model);
  record["runtime"] = name_of(plan.runtime);
  if (!plan.pmi.empty()) {
    record["pmi"] = plan.pmi;
  }
  record["ranks"] = plan.ranks;
  record["command"] = j.req.command;
  record["run"] = run_command_line(j.shown_req, j.site);
  j.start = wall_clock_ns();
  return {};
}

// "node (check, check)" for each node whose preflight failed.
std::vector<std::string> failed_nodes(const std::vector<NodeReport>& reports) {
  std::vector<std::string> names;
  for (const NodeReport& r : reports) {
    if (!r.ok()) {
      std::vector<std::string> why;
      for (const Check& c : r.checks) {
        if (c.status == Check::Status::fail) {
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
  if (!j.req.stage || !only_image_missing(j.reports) || j.plan.model != MpiModel::hybrid ||
      j.plan.launcher == Launcher::local) {
    return {};
  }
  LS_TRY_ASSIGN(ImageArg arg, parse_image_arg(j.req.image));
  if (arg.kind == ImageArg::Kind::directory) {
    return {}; // no digest to check a copy by: preflight reports the missing directory
  }
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  LS_TRY_ASSIGN(StageImage image, stage_image_of(arg, store));
  if (image.digest().str() != j.image_digest) {
    return invalid_input("{} changed while lockstep run read it ({}, now {})", j.req.image, j.image_digest,
                         image.digest().str());
  }
  log::info("{} is missing on {}; staging it into the nodes' stores", j.req.image,
            fmt::join(failed_nodes(j.reports), ", "));
  LS_TRY_ASSIGN(StageOutcome out, stage_for_launch(j.plan, j.pre, fanout(j.args, j.site.lockstep, false),
                                                   store, image, j.preflight_commands));
  nlohmann::ordered_json copied = nlohmann::ordered_json::array();
  for (const StagedNode& n : out.copied) {
    copied.push_back({{"node", n.node}, {"ok", n.ok}, {"detail", n.detail}});
  }
  j.record["image"]["staged"] = {{"ref", out.image}, {"how", out.how}, {"nodes", copied}};
  j.reports = std::move(out.reports);
  // The ranks run the staged copy.
  j.req.image = out.image;
  j.shown_req.image = out.image;
  j.pre.image = out.image;
  LS_TRY_ASSIGN(j.plan, plan_launch(j.req, j.site, j.info.facts));
  LS_TRY_ASSIGN(j.shown, plan_launch(j.shown_req, j.site, j.info.facts));
  return {};
}

// The nodes' reports judged: an image some node lacks is staged, the reports recorded and shown;
// a failure is recorded and ends the run (exit 1).
Result<void> judge_nodes(RunJob& j) {
  LS_TRY(stage_if_missing(j));
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const NodeReport& r : j.reports) {
    nodes.push_back(to_json(r));
  }
  j.record["preflight"] = {{"skipped", false}, {"commands", j.preflight_commands}, {"nodes", nodes}};
  if (!j.gate.empty()) {
    j.record["preflight"]["gate"] = j.gate;
  }
  const bool failed = std::any_of(j.reports.begin(), j.reports.end(), [](const auto& r) { return !r.ok(); });
  if (failed || (log::level() >= log::Level::normal && !j.args.json)) {
    std::cerr << render_preflight_table(j.reports);
  }
  if (!failed) {
    return {};
  }
  const std::vector<std::string> names = failed_nodes(j.reports);
  j.record["start"] = iso8601_utc(j.start);
  j.record["end"] = iso8601_utc(wall_clock_ns());
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
  LS_TRY_ASSIGN(j.reports,
                preflight_nodes(j.plan, j.pre, fanout(j.args, j.site.lockstep, false), j.preflight_commands));
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
  const PreflightFanout how = fanout(j.args, j.site.lockstep, false);
  std::optional<GatedPreflight> preflight;
  if (!j.req.relay_agent.empty()) { // the nodes' preflights come with mpirun's calls to its agent
    Result<GatedPreflight> relayed =
        GatedPreflight::start(j.plan, j.pre, how, j.preflight_commands, j.site.run_dir);
    if (!relayed) {
      return relayed.error();
    }
    preflight.emplace(std::move(*relayed));
  }
  // Else mpirun first: its daemons take longer to come up than a node's preflight. Its complaints
  // (a node it can't reach) show only when the launch goes ahead.
  Result<ForegroundChild> launcher = start_launcher(j, true);
  if (!preflight) {
    Result<GatedPreflight> direct = GatedPreflight::start(j.plan, j.pre, how, j.preflight_commands);
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
RunVerdict judge_and_record(RunJob& j, const Result<int>& status, std::int64_t end) {
  std::vector<RankReport> ranks = read_rank_reports(fs::path(j.site.run_dir) / "ranks");
  std::set<std::string> node_names;
  for (const RankReport& r : ranks) {
    node_names.insert(r.node);
  }
  if (node_names.empty()) {
    for (const NodeReport& r : j.reports) {
      node_names.insert(r.node);
    }
    for (const HostSlots& h : j.plan.hosts) {
      node_names.insert(h.host);
    }
  }
  nlohmann::ordered_json& record = j.record;
  record["nodes"] = std::vector<std::string>(node_names.begin(), node_names.end());
  record["rank_exits"] = rank_exits_json(ranks);
  record["start"] = iso8601_utc(j.start);
  record["end"] = iso8601_utc(end);
  RunVerdict verdict = judge_run(status, ranks, j.plan.argv[0], j.plan.ranks);
  if (verdict.failure) {
    record["failure"] = {{"rank", verdict.failure->rank},
                         {"node", verdict.failure->node},
                         {"exit_code", verdict.failure->exit_code}};
  }
  record["exit_code"] = verdict.exit_status;
  record["outcome"] = verdict.exit_status == 0 ? "ok" : verdict.message;
  return verdict;
}

// Writes the record; the outcome shows it (--json) and ends with the run's own status.
Result<RunJobOutcome> finish(const RunJob& j, const RunVerdict& verdict) {
  LS_TRY(j.write_record());
  RunJobOutcome outcome;
  outcome.run_dir = j.site.run_dir;
  if (j.args.json) {
    outcome.output = dump_json(j.record, -1) + "\n";
  }
  const int code = verdict.exit_status;
  if (code != 0) {
    outcome.failure = Error{ExitCode::check_failed,
                            fmt::format("{} (record: {}/record.json)", verdict.message, j.site.run_dir),
                            false, (code & 0xff) != 0 ? code & 0xff : 1};
  }
  return outcome;
}

} // namespace

Result<void> check_job_name(const std::string& job) {
  if (job.empty() || job.size() > 200 || job.find('/') != std::string::npos || job == "." || job == ".." ||
      escape_controls(job) != job) {
    return invalid_input("--job '{}' must be a plain directory name (no '/', no control characters)",
                         escape_controls(job));
  }
  return {};
}

bool relay_fits_mpi(const envspec::ImageFacts& facts) {
  const std::string& mpi = facts.mpi_impl;
  const std::string& version = facts.mpi.version;
  const bool before_5 =
      version.empty() || (version[0] >= '1' && version[0] <= '4' && version.size() > 1 && version[1] == '.');
  return (mpi.empty() || mpi == "openmpi") && before_5;
}

Result<RunJobOutcome> run_job(RunJobOptions options) {
  LS_TRY(complete_request(options));
  RunJob j(options);
  // The image, then where the job runs and records itself.
  LS_TRY(read_image(j));
  LS_TRY(locate_job(j));
  if (!options.emit.empty()) {
    LS_TRY(emit_sbatch(j));
    return RunJobOutcome{};
  }
  // The plan, and what preflight checks.
  LS_TRY(plan_job(j));
  if (options.dry_run) {
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
  const std::int64_t end = wall_clock_ns();
  const RunVerdict verdict = judge_and_record(j, status, end);
  return finish(j, verdict);
}

} // namespace lockstep::runner
