// `lockstep run`: launch a job in an image across nodes with mpirun or Slurm, checking every node
// first (preflight), and leave a run record. Planning is runner/launch/launch.cpp, node checks
// runner/launch/preflight.cpp, the preflight fan-out and the verdict runner/launch/job.cpp, records
// runner/launch/run_record.cpp; this file parses the arguments and prints. docs/launch.md.
#include "cli/cli.hpp"
#include "envspec/image_facts.hpp"
#include "runner/launch/job.hpp"
#include "runner/launch/launch.hpp"
#include "runner/launch/preflight.hpp"
#include "runner/launch/run_record.hpp"
#include "runner/runtime/exec.hpp"
#include "support/fs.hpp"
#include "support/log.hpp"
#include "support/oci/image_source.hpp"
#include "support/process.hpp"
#include "support/text.hpp"
#include "support/version.hpp"

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
0600); ranks must be able to write there (a shared file system on a real cluster). --env values are
left out of the record, --dry-run and --debug (names only) unless --record-env-values.

Exit status: 0 when every rank exited 0; the failing rank's status (the first to fail; the message
names its rank and node); 1 preflight failed; 2 bad usage or image; 3 a launcher or node unreachable.
See docs/launch.md.)";

// IMAGE in a form every node understands: transports kept, paths absolute.
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

Result<ExitCode> run_run_command(RunArgs& args, Context& ctx) {
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
    if (e.find('=') == std::string::npos) {
      return invalid_input("--env '{}' needs NAME=VALUE", e);
    }
    req.exec_args.insert(req.exec_args.end(), {"--env", e});
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

  // The image: its identity and facts.
  const std::string image_text = req.image;
  LS_TRY_ASSIGN(runner::ImageArg arg, runner::parse_image_arg(image_text));
  req.image = runner::absolute_image(arg);
  LS_TRY_ASSIGN(runner::ImageDescription info, runner::describe_image(arg));
  const envspec::ImageFacts& facts = info.facts;
  const std::string image_digest = info.digest ? info.digest->str() : "";

  runner::LaunchSite site;
  site.lockstep = args.remote_lockstep.empty() ? this_lockstep() : args.remote_lockstep;
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
  const std::string job = args.job.empty() ? runner::new_job_id(site.slurm_job_id) : args.job;
  if (job.empty() || job.size() > 200 || job.find('/') != std::string::npos || job == "." || job == ".." ||
      escape_controls(job) != job) {
    return invalid_input("--job '{}' must be a plain directory name (no '/', no control characters)",
                         escape_controls(job));
  }
  const fs::path runs = args.runs_dir.empty() ? runner::default_runs_dir() : fs::path(args.runs_dir);
  site.run_dir = (fs::absolute(runs) / job).string();

  if (!args.emit.empty()) {
    // The script carries the --env values the ranks need: then it is for its owner only.
    const bool has_env_values = runner::without_env_values(req).exec_args != req.exec_args;
    std::string script = runner::render_sbatch(req, site, image_digest);
    LS_TRY(write_file_atomic(args.emit_args[0], script, has_env_values ? 0700 : 0755));
    log::info("wrote {}: submit it with sbatch {}", args.emit_args[0], args.emit_args[0]);
    return ExitCode::ok;
  }

  LS_TRY_ASSIGN(runner::LaunchPlan plan, runner::plan_launch(req, site, facts));
  for (const std::string& note : plan.notes) {
    log::warn("{}", note);
  }
  // What the record, --dry-run and --debug show: the plan with --env names only, unless
  // --record-env-values.
  const runner::LaunchRequest shown_req = req.record_env_values ? req : runner::without_env_values(req);
  LS_TRY_ASSIGN(const runner::LaunchPlan shown, runner::plan_launch(shown_req, site, facts));

  runner::PreflightRequest pre;
  pre.image = req.image;
  pre.image_digest = image_digest;
  pre.model = std::string(runner::name_of(plan.model));
  pre.launcher = std::string(runner::name_of(plan.launcher));
  pre.gpus_per_node = req.gpus_per_node;
  pre.facts = facts;
  pre.unpack_bytes = info.unpack_bytes;

  std::vector<std::vector<std::string>> preflight_commands;
  if (args.dry_run) {
    if (!args.skip_preflight) {
      LS_TRY(runner::preflight_nodes(plan, pre, fanout(args, site.lockstep, true), preflight_commands));
    }
    if (ctx.json) {
      nlohmann::ordered_json j;
      j["launcher"] = runner::name_of(plan.launcher);
      j["model"] = runner::name_of(plan.model);
      j["runtime"] = runner::name_of(plan.runtime);
      j["pmi"] = plan.pmi;
      j["nodes"] = plan.nodes;
      j["ranks"] = plan.ranks;
      j["preflight"] = preflight_commands;
      j["launch"] = shown.argv;
      j["env"] = shown.env;
      j["hostfile"] = plan.hostfile_text();
      j["notes"] = plan.notes;
      std::cout << dump_json(j, -1) << "\n";
      return ExitCode::ok;
    }
    std::string out;
    if (!preflight_commands.empty()) {
      out += "# preflight, on every node in parallel\n";
      for (const auto& c : preflight_commands) {
        out += shell_join(c) + "\n";
      }
    }
    if (!plan.hosts.empty()) {
      out += fmt::format("# hostfile {}/hostfile\n", escape_controls(site.run_dir));
      std::string hf = plan.hostfile_text();
      std::size_t p = 0;
      while (p < hf.size()) {
        std::size_t e = hf.find('\n', p);
        out += "#   " + hf.substr(p, e - p) + "\n";
        p = e + 1;
      }
    }
    std::vector<std::string> hidden; // --env names whose values are not shown
    for (std::size_t i = 0; i + 1 < shown_req.exec_args.size(); ++i) {
      if (shown_req.exec_args[i] == "--env" && shown_req.exec_args[i + 1].find('=') == std::string::npos) {
        hidden.push_back(shown_req.exec_args[i + 1]);
      }
    }
    if (!hidden.empty()) {
      out += fmt::format("# the values of --env {} are not shown (--record-env-values shows them)\n",
                         fmt::join(hidden, ", "));
    }
    out += "# launch\n";
    for (const std::string& e : shown.env) {
      if (e.find('=') != std::string::npos) {
        out += shell_quote(e) + " ";
      }
    }
    out += shell_join(shown.argv) + "\n";
    std::cout << out;
    return ExitCode::ok;
  }

  // The run directory (0700, its files 0600): the hostfile and the ranks' reports.
  LS_TRY(runner::make_record_dirs(fs::path(site.run_dir) / "ranks"));
  if (!plan.hosts.empty()) {
    LS_TRY(write_file_atomic(fs::path(site.run_dir) / "hostfile", plan.hostfile_text(),
                             runner::k_record_file_mode));
  }
  nlohmann::ordered_json record;
  record["schema"] = 1;
  record["job"] = job;
  record["tool"] = fmt::format("lockstep {}", k_version);
  record["image"] = {{"ref", req.image},
                     {"digest", image_digest},
                     {"lock_digest", info.lock_digest},
                     {"facts", envspec::facts_json(facts)}};
  record["launcher"] = runner::name_of(plan.launcher);
  record["model"] = runner::name_of(plan.model);
  record["runtime"] = runner::name_of(plan.runtime);
  if (!plan.pmi.empty()) {
    record["pmi"] = plan.pmi;
  }
  record["ranks"] = plan.ranks;
  record["command"] = req.command;
  record["run"] = runner::run_command_line(shown_req, site);

  const std::int64_t start = runner::wall_clock_ns();
  auto write_record = [&]() -> Result<void> {
    return write_file_atomic(fs::path(site.run_dir) / "record.json", dump_json(record, 2) + "\n",
                             runner::k_record_file_mode);
  };

  // Preflight.
  std::vector<runner::NodeReport> reports;
  if (args.skip_preflight) {
    log::warn("preflight skipped (--skip-preflight): nodes were not checked");
    record["preflight"] = {{"skipped", true}};
  } else {
    log::Timer timer("preflight");
    LS_TRY_ASSIGN(reports,
                  runner::preflight_nodes(plan, pre, fanout(args, site.lockstep, false), preflight_commands));
    nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
    for (const runner::NodeReport& r : reports) {
      nodes.push_back(runner::to_json(r));
    }
    record["preflight"] = {{"skipped", false}, {"commands", preflight_commands}, {"nodes", nodes}};
    const bool failed = std::any_of(reports.begin(), reports.end(), [](const auto& r) { return !r.ok(); });
    if (failed || (log::level() >= log::Level::normal && !ctx.json)) {
      std::cerr << runner::render_preflight_table(reports);
    }
    if (failed) {
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
      record["start"] = runner::iso8601_utc(start);
      record["end"] = runner::iso8601_utc(runner::wall_clock_ns());
      record["exit_code"] = 1;
      record["outcome"] = "preflight failed";
      LS_TRY(write_record());
      return Error{ExitCode::check_failed,
                   fmt::format("preflight failed on {}: no rank was started (record: {}/record.json)",
                               fmt::join(names, ", "), site.run_dir)};
    }
  }

  // Launch.
  record["launch"] = shown.argv;
  record["env"] = shown.env;
  std::optional<std::vector<std::string>> env;
  if (!plan.env.empty()) {
    env = std::vector<std::string>();
    for (char** e = environ; *e != nullptr; ++e) {
      env->emplace_back(*e);
    }
    env->insert(env->end(), plan.env.begin(), plan.env.end());
  }
  log::debug("run: {}", shell_join(shown.argv));
  Result<int> status = run_foreground(plan.argv, env);
  const std::int64_t end = runner::wall_clock_ns();

  std::vector<runner::RankReport> ranks = runner::read_rank_reports(fs::path(site.run_dir) / "ranks");
  std::set<std::string> node_names;
  for (const runner::RankReport& r : ranks) {
    node_names.insert(r.node);
  }
  if (node_names.empty()) {
    for (const runner::NodeReport& r : reports) {
      node_names.insert(r.node);
    }
    for (const runner::HostSlots& h : plan.hosts) {
      node_names.insert(h.host);
    }
  }
  record["nodes"] = std::vector<std::string>(node_names.begin(), node_names.end());
  record["rank_exits"] = runner::rank_exits_json(ranks);
  record["start"] = runner::iso8601_utc(start);
  record["end"] = runner::iso8601_utc(end);

  const runner::RunVerdict verdict = runner::judge_run(status, ranks, plan.argv[0], plan.ranks);
  const int code = verdict.exit_status;
  const std::string& message = verdict.message;
  if (verdict.failure) {
    record["failure"] = {{"rank", verdict.failure->rank},
                         {"node", verdict.failure->node},
                         {"exit_code", verdict.failure->exit_code}};
  }
  record["exit_code"] = code;
  record["outcome"] = code == 0 ? "ok" : message;
  LS_TRY(write_record());
  if (ctx.json) {
    std::cout << dump_json(record, -1) << "\n";
  } else {
    log::info("run record: {}/record.json", site.run_dir);
  }
  if (code != 0) {
    return Error{ExitCode::check_failed, fmt::format("{} (record: {}/record.json)", message, site.run_dir),
                 false, (code & 0xff) != 0 ? code & 0xff : 1};
  }
  return ExitCode::ok;
}

} // namespace

void register_run(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<RunArgs>();
  runner::LaunchRequest& r = args->request;
  auto* cmd =
      app.add_subcommand("run", "Launch a (multi-node MPI) job in an image, checking every node first");
  cmd->add_option("IMAGE", r.image, "The image: oci:DIR[:TAG], a .sif, ... (as for exec)")->required();
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
  cmd->add_option("-e,--env", args->envs, "Set a variable in every rank (repeatable)")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false);
  cmd->add_flag("--cleanenv", args->clean_env, "Don't pass the host's environment into the ranks");
  cmd->add_flag("--record-env-values", args->record_env_values,
                "Keep --env values in the run record, --dry-run and --debug (default: names only)");
  cmd->add_flag("--dry-run", args->dry_run, "Print the preflight and launch commands; run nothing");
  cmd->add_option("--emit", args->emit_args, "Write a batch script instead of running: --emit sbatch FILE")
      ->type_name("sbatch FILE")
      ->expected(2)
      ->allow_extra_args(false);
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
