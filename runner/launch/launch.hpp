#pragma once
// `lockstep run`: from a launch request (launcher, nodes, ranks, model, runtime) and the image's
// facts to the exact commands: the host's mpirun or srun starting one `lockstep exec` per rank
// (the hybrid model), the image's own mpirun on one node (the container model), or one process
// here (local); other runtimes (Apptainer, Singularity, Enroot/Pyxis) get their command lines.
// Planning is pure, so --dry-run, --emit sbatch and the golden tests see what a launch would run.
// docs/launch.md.
#include "envspec/lock/image_facts.hpp"
#include "support/base/result.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// Who starts the ranks.
enum class Launcher { local, mpirun, slurm };
/// Where MPI's launcher lives: on the host (hybrid) or in the image (container, one node).
enum class MpiModel { hybrid, container };
/// What runs each rank's container.
enum class ContainerRuntime { native, apptainer, singularity, enroot };

std::string_view name_of(Launcher launcher);
std::string_view name_of(MpiModel model);
std::string_view name_of(ContainerRuntime runtime);
Result<Launcher> parse_launcher(std::string_view text);
Result<MpiModel> parse_mpi_model(std::string_view text);
Result<ContainerRuntime> parse_container_runtime(std::string_view text);

/// One line of an Open MPI hostfile: a host and its slots.
struct HostSlots {
  std::string host;
  int slots = 1;
  bool operator==(const HostSlots&) const = default;
};

/// Parses an Open MPI / MPICH hostfile: "HOST [slots=N] [max_slots=M]" or "HOST:N", '#' comments,
/// blank lines. A host listed twice adds its slots. Errors name `origin` and the line (exit 2).
Result<std::vector<HostSlots>> parse_hostfile(std::string_view text, std::string_view origin);

/// What the user asked for.
struct LaunchRequest {
  std::optional<Launcher> launcher; ///< nullopt: slurm in an allocation, mpirun with a hostfile
                                    ///< or -N > 1, local otherwise
  int nodes = 0;                    ///< -N (0: not given)
  int ranks = 0;                    ///< -n (0: not given)
  int ranks_per_node = 0;           ///< --ranks-per-node (0: not given)
  std::string hostfile;             ///< --hostfile (path as given)
  int gpus_per_node = 0;
  std::optional<MpiModel> model;
  std::string pmi; ///< --pmi pmix|pmi2; "" = from the image's MPI
  ContainerRuntime runtime = ContainerRuntime::native;
  std::string image; ///< absolute IMAGE argument (oci:/abs/dir:tag, /abs/x.sif, ...)
  std::vector<std::string> command;
  std::vector<std::string> launcher_args; ///< --launcher-arg: added to mpirun/srun before the ranks' command
  std::vector<std::string> exec_args;     ///< --bind/--env etc. for each rank's `lockstep exec`
  std::string runs_dir;                   ///< --runs-dir, repeated by run_command_line
  std::string job;                        ///< --job, repeated by run_command_line
  bool record_env_values = false;         ///< --record-env-values, repeated by run_command_line
  bool stage = true; ///< stage an image some node lacks (--no-stage: fail preflight instead), repeated too
  /// Seconds each rank waits at its node's preflight gate (lockstep _rank --gate) for the launching
  /// node's verdict; 0: no gate (the launcher starts after the preflight).
  int gate_seconds = 0;
  /// Under Open MPI's mpirun, the words of its rsh agent (relay.hpp's relay_agent): every node's
  /// preflight rides on mpirun's call to start the node's daemon. Empty: mpirun's own agent.
  std::vector<std::string> relay_agent;
};

/// Where `lockstep run` itself runs.
struct LaunchSite {
  std::string lockstep = "lockstep"; ///< the absolute path of this lockstep (ranks run the same one)
  bool root = false;
  std::optional<std::string> slurm_job_id; ///< SLURM_JOB_ID
  int allocation_nodes = 0;                ///< SLURM_JOB_NUM_NODES (0: unknown)
  std::vector<HostSlots> hostfile;         ///< the parsed --hostfile
  std::string run_dir;                     ///< this job's record directory (rank reports go to run_dir/ranks)
  /// The lockstep each rank of the hybrid model runs as `lockstep _rank` (runner/launch/rank.hpp),
  /// so the ranks on one node share one container (docs/launch.md, "Ranks on one node"); "" when
  /// lockstep's path is not absolute, and then every rank starts a container of its own.
  std::string rank_helper;
};

/// The commands of one launch.
struct LaunchPlan {
  Launcher launcher = Launcher::local;
  MpiModel model = MpiModel::hybrid;
  ContainerRuntime runtime = ContainerRuntime::native;
  std::string pmi; ///< srun --mpi= value ("pmix", "pmi2", "none"); "" when not Slurm
  int nodes = 1;   ///< 0 under Slurm when the allocation decides
  int ranks = 1;   ///< 0 under Slurm when the allocation decides
  int ranks_per_node = 0;
  std::vector<HostSlots> hosts;   ///< mpirun: the hosts used, in order (written as run_dir/hostfile)
  std::vector<std::string> rank;  ///< what each rank runs
  std::vector<std::string> argv;  ///< the whole launch command
  std::vector<std::string> env;   ///< "K=V" set for the launcher on top of the caller's environment
  std::vector<std::string> notes; ///< what the plan could not express or assumed, for the user
  /// The hostfile text for run_dir/hostfile ("" when none is needed).
  [[nodiscard]] std::string hostfile_text() const;
};

/// Plans a launch. Errors (exit 2) say what is inconsistent and what to write instead: -N > 1 with
/// the container model, ranks that don't fit -N x --ranks-per-node, mpirun with more nodes than the
/// hostfile lists, slurm outside an allocation, a runtime that can't take this image.
Result<LaunchPlan> plan_launch(const LaunchRequest& request, const LaunchSite& site,
                               const envspec::ImageFacts& facts);

/// The `lockstep run` command line that repeats `request` (for batch scripts and records).
std::vector<std::string> run_command_line(const LaunchRequest& request, const LaunchSite& site);

/// `request` with every `--env NAME=VALUE` of its exec_args cut to `--env NAME`: what the run record,
/// --dry-run and --debug show unless --record-env-values (values are often tokens).
LaunchRequest without_env_values(const LaunchRequest& request);

/// A batch script for `sbatch`: #SBATCH lines for the nodes, tasks and GPUs, then `lockstep run
/// --launcher slurm ...`, so preflight and the run record happen inside the allocation. Every value
/// from the request is shell-quoted on the `exec` line; the #SBATCH lines hold only numbers and a job
/// name cut to [A-Za-z0-9._-]; the comment escapes control characters (escape_controls), so no value
/// can add a line, a command or a directive.
std::string render_sbatch(const LaunchRequest& request, const LaunchSite& site,
                          std::string_view image_digest);

} // namespace lockstep::runner
