#pragma once
// `lockstep run` as one job, its passes in order: the request completed from the command line, the
// image read (a registry image pulled once, here), the job named and placed, the launch planned,
// every node checked (before mpirun, or gated while it starts), an image some node lacks staged,
// the launcher run, and the verdict written to the run record. Planning is launch.cpp, node checks
// preflight.cpp, the fan-out and the verdict job.cpp, records run_record.cpp. docs/launch.md.
#include "envspec/lock/image_facts.hpp"
#include "runner/launch/job.hpp"
#include "runner/launch/launch.hpp"
#include "support/base/result.hpp"

#include <optional>
#include <string>
#include <vector>

namespace lockstep::runner {

/// What `lockstep run`'s command line asks for.
struct RunJobOptions {
  std::string launcher;           ///< --launcher: local, mpirun or slurm; "" chosen by the plan
  std::string model;              ///< --mpi-model: hybrid or container; "" hybrid
  std::string runtime = "native"; ///< --runtime
  LaunchRequest request;          ///< IMAGE, COMMAND and the flags that are the request's as they are
  std::vector<std::string> binds; ///< --bind SRC[:DST][:ro]
  std::vector<std::string> envs;  ///< --env NAME[=VALUE]; NAME alone takes this process's value
  bool clean_env = false;
  bool record_env_values = false;
  bool dry_run = false;
  bool skip_preflight = false;
  std::string emit;                   ///< --emit KIND ("sbatch"); "" runs the job
  std::vector<std::string> emit_args; ///< the words after --emit KIND (the file)
  std::string runs_dir;
  std::string job;             ///< --job NAME; "" a new job id
  std::string remote_lockstep; ///< --lockstep PATH on the nodes; "" this binary's path
  int preflight_timeout = 60;
  /// --json: the dry run's plan and the record as JSON; the preflight table shown only when a node
  /// failed.
  bool json = false;
};

/// What a `lockstep run` leaves its command to print.
struct RunJobOutcome {
  /// For standard output: the dry run's plan (text or JSON), the run record (--json); else "".
  std::string output;
  /// The job's record directory; "" for --dry-run and --emit.
  std::string run_dir;
  /// A run whose ranks failed: the failing rank's status as lockstep's own, naming the record.
  std::optional<Error> failure;
};

/// Runs the job `options` describe. Errors end the job before its ranks ran or with the preflight
/// (check_failed, the record written); a run whose ranks failed is RunJobOutcome::failure.
Result<RunJobOutcome> run_job(RunJobOptions options);

/// A job's name as its record directory: invalid_input unless a plain directory name (not empty,
/// at most 200 bytes, no '/', not "." or "..", no control characters).
Result<void> check_job_name(const std::string& job);

/// Whether each node's preflight can ride on mpirun's call to its rsh agent (docs/launch.md,
/// "Preflight"): the image's MPI is Open MPI (or unknown) before 5, whose rsh agent parameters the
/// relay knows (PRRTE, in 5, names them otherwise); an unknown version counts as before 5.
bool relay_fits_mpi(const envspec::ImageFacts& facts);

} // namespace lockstep::runner
