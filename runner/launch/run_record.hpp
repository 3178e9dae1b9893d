#pragma once
// Run records: each rank's `lockstep exec --rank-report DIR` leaves DIR/rank-N.json when its
// command ends (exit code, node, times); `lockstep run` gathers them into one JSON record per job
// with the image and lock digests, nodes, ranks, commands, environment deltas, preflight results and
// start and end times. docs/launch.md.
#include "support/base/result.hpp"

#include <nlohmann/json.hpp>

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// What one rank reported.
struct RankReport {
  int rank = -1;             ///< world rank (OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID or PMI_RANK)
  int local_rank = -1;       ///< rank on its node, -1 when unknown
  std::string node;          ///< the host name the rank ran on
  int exit_code = 0;         ///< the command's exit code, or 128+N for signal N
  std::string error;         ///< why the command didn't start ("" when it ran)
  std::int64_t start_ns = 0; ///< wall clock, ns since the epoch
  std::int64_t end_ns = 0;
  bool operator==(const RankReport&) const = default;
};

/// Runs one rank's command (`lockstep exec --rank-report DIR`) and, when it ends or fails to
/// start, writes DIR/rank-N.json with the rank, node, exit code and times. Returns `run`'s result.
Result<int> run_reporting_rank(const std::filesystem::path& dir, const std::function<Result<int>()>& run);

/// Now, in ns since the epoch (wall clock).
std::int64_t wall_clock_ns();
/// "2026-11-30T23:59:01.123Z".
std::string iso8601_utc(std::int64_t ns);

nlohmann::ordered_json to_json(const RankReport& report);
/// Parses a rank report; strict (unknown keys, wrong types, out-of-range values are errors).
Result<RankReport> rank_report_from_json(std::string_view text, std::string_view origin);

/// Creates `dir` and its missing parents with mode 0700 whatever the umask: a run directory holds the
/// job's commands, hosts and paths, for its owner only (the ranks run as the same user). Directories
/// that exist are left as they are.
Result<void> make_record_dirs(const std::filesystem::path& dir);

/// Mode of the files of a run directory (record.json, hostfile, rank reports).
inline constexpr mode_t k_record_file_mode = 0600;

/// Writes `data` to `path` under a temporary name renamed into place (a reader sees all of it or
/// none), mode `mode` whatever the umask, without the two fsyncs of write_file_atomic: for the files
/// of a run that are read moments later (the hostfile, rank reports), where those fsyncs cost
/// milliseconds each on a journaling file system (4 ms measured on ext4, more than a rank's whole
/// start) and a round trip each on NFS.
Result<void> write_unsynced(const std::filesystem::path& path, const std::string& data, mode_t mode);

/// Writes DIR/rank-N.json atomically (renamed into place, not synced: it is read moments later), mode
/// 0600 (DIR is created by make_record_dirs when missing).
Result<void> write_rank_report(const std::filesystem::path& dir, const RankReport& report);

/// Reads every rank-N.json in DIR, sorted by rank. Files that don't parse are skipped with a warning;
/// at most 1 MiB each and 1<<20 files.
std::vector<RankReport> read_rank_reports(const std::filesystem::path& dir);

/// The rank that failed first (lowest end time among non-zero exits; ties by rank), if any.
std::optional<RankReport> first_failure(const std::vector<RankReport>& reports);

/// Where run records go: $LOCKSTEP_RUNS, else $XDG_STATE_HOME/lockstep/runs, else
/// ~/.local/state/lockstep/runs.
std::filesystem::path default_runs_dir();

/// A job id for a record: "slurm-<SLURM_JOB_ID>-<UTC time>-<pid>" in an allocation, else
/// "<UTC time>-<host>-<pid>" ("20261130T235901Z-login1-4242").
std::string new_job_id(const std::optional<std::string>& slurm_job_id);

} // namespace lockstep::runner
