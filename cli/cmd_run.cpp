// `lockstep run`: launch a job in an image across nodes with mpirun or Slurm, checking every node
// first (preflight), and leave a run record. The job is runner/launch/run_job.cpp; this file
// parses the arguments and prints. docs/launch.md.
#include "cli/cli.hpp"
#include "runner/launch/run_job.hpp"
#include "support/base/log.hpp"

#include <iostream>
#include <memory>

namespace lockstep::cli {

namespace {

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

Result<ExitCode> run_run_command(const runner::RunJobOptions& args, const Context& ctx) {
  runner::RunJobOptions options = args;
  options.json = ctx.json;
  LS_TRY_ASSIGN(runner::RunJobOutcome outcome, runner::run_job(std::move(options)));
  std::cout << outcome.output;
  if (!outcome.run_dir.empty() && !ctx.json) {
    log::info("run record: {}/record.json", outcome.run_dir);
  }
  if (outcome.failure) {
    return *outcome.failure;
  }
  return ExitCode::ok;
}

} // namespace

void register_run(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<runner::RunJobOptions>();
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
