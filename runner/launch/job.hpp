#pragma once
// Running a job, the parts `lockstep run` needs between the plan and the record: the preflight
// fan-out to every node (through srun, mpirun's rsh agent, or this node), and the verdict of a
// finished launch from the launcher's status and the ranks' reports. docs/launch.md.
#include "runner/launch/launch.hpp"
#include "runner/launch/preflight.hpp"
#include "runner/launch/run_record.hpp"
#include "support/base/result.hpp"
#include "support/oci/image_arg.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// IMAGE as every node reads it: the same form with an absolute, normalised path.
std::string absolute_image(const ImageArg& image);

/// The rsh agent mpirun uses, as argv words: `--mca plm_rsh_agent X` in the launcher arguments,
/// else `env_agent` (OMPI_MCA_plm_rsh_agent), else ssh. Of Open MPI's "ssh : rsh" alternatives the
/// first is used; a bare ssh gets `-o BatchMode=yes` (a password prompt would hang the preflight).
std::vector<std::string> rsh_agent(const std::vector<std::string>& launcher_args, std::string_view env_agent);

/// `LOCKSTEP preflight --json ...` for one node, the image's facts passed in (the node may lack it).
std::vector<std::string> preflight_argv(const std::string& lockstep, const PreflightRequest& request);

/// The node reports in the JSON lines a node (or srun's nodes) printed; lines that are JSON but not
/// a report go to `bad` with the reason.
std::vector<NodeReport> reports_from_output(const std::string& out, std::vector<std::string>& bad);

/// How the preflight reaches the nodes.
struct PreflightFanout {
  std::string lockstep;                   ///< lockstep's path on the nodes
  std::vector<std::string> launcher_args; ///< --launcher-arg words (the rsh agent may be there)
  std::string env_agent;                  ///< OMPI_MCA_plm_rsh_agent, "" when unset
  std::chrono::seconds timeout{60};       ///< per node
  bool dry_run = false;                   ///< only fill `commands`
};

/// Runs the preflight on every node of `plan`, in parallel: one `srun` step across a Slurm
/// allocation, one rsh-agent command per mpirun host, or this node in-process. Every command (also
/// in a dry run) is appended to `commands`. A host that can't be reached or doesn't report gets a
/// failed "reach" check; srun reporting nothing is an external error.
Result<std::vector<NodeReport>> preflight_nodes(const LaunchPlan& plan, const PreflightRequest& request,
                                                const PreflightFanout& how,
                                                std::vector<std::vector<std::string>>& commands);

/// The preflight of a gated launch (PreflightRequest::gate; docs/launch.md, "Preflight"): under
/// mpirun, every host's preflight starts through the rsh agent, and mpirun starts meanwhile; each
/// node keeps its ranks waiting at its gate and prints its report; once every report is in, every
/// node is told go or stop, and keeps telling its ranks until finish() ends its preflight.
///
/// Relayed (mpirun's agent is relay.hpp's relay, listening on `relay_run_dir`'s socket), a host's
/// preflight rides on the agent call mpirun makes to start its daemon: start() comes before mpirun
/// and starts only this node's (where mpirun starts no daemon), reports() takes each call as it
/// comes. A host mpirun has not called for within 2 s of the first call, or by the time mpirun ends,
/// gets its preflight through the agent directly.
class GatedPreflight {
public:
  /// Starts the preflight on every host of `plan` (`request.gate` set), or with `relay_run_dir`
  /// binds the relay socket (an error when it can't) and starts this node's. The commands are
  /// appended to `commands`. A host the agent can't start for is a failed "reach" check in reports().
  static Result<GatedPreflight> start(const LaunchPlan& plan, const PreflightRequest& request,
                                      const PreflightFanout& how,
                                      std::vector<std::vector<std::string>>& commands,
                                      const std::string& relay_run_dir = "");
  GatedPreflight(GatedPreflight&&) noexcept;
  GatedPreflight& operator=(GatedPreflight&&) = delete;
  GatedPreflight(const GatedPreflight&) = delete;
  GatedPreflight& operator=(const GatedPreflight&) = delete;
  /// A preflight never told is told stop, and finished.
  ~GatedPreflight();

  /// Every host's report, in the plan's host order (read in parallel, each within the timeout).
  /// Relayed, `launching` says whether mpirun still runs (so may still call for a host).
  std::vector<NodeReport> reports(const std::function<bool()>& launching = {});
  /// Tells every node the verdict: go (every rank may start) or stop (no rank runs its command).
  void tell(bool go);
  /// Ends every node's preflight (closes its standard input) and waits for them, at most 10 s.
  void finish();

private:
  GatedPreflight() = default;
  struct Node;
  struct Desk;
  void take_relay_calls(const std::function<bool()>& launching);
  std::vector<Node> m_nodes;
  std::unique_ptr<Desk> m_desk; ///< relayed: the socket, and who answers calls after reports()
  std::chrono::seconds m_timeout{60};
  bool m_told = false;
  bool m_finished = false;
};

/// One node's gated preflight as it was read: its report, and whether mpirun cut the node's call
/// before a report came (the relayed agent ended by a signal, or its relay was gone).
struct GatedOutcome {
  NodeReport report;
  bool cut = false;
};

/// mpirun ends every node's launch when one node's fails: a node whose call it cut that way was not
/// checked, it did not fail. When some node failed without being cut, each cut node's "reach" check
/// becomes a warning (shown, not a failure) naming the nodes that failed; otherwise (nothing else
/// failed: mpirun itself was stopped) the cut nodes stay failed. In the plan's host order.
std::vector<NodeReport> judge_cut_nodes(std::vector<GatedOutcome> outcomes);

/// The verdict of a finished launch.
struct RunVerdict {
  int exit_status = 0;               ///< lockstep run's exit status: 0, or the failure's own
  std::string message;               ///< "" when ok: why it failed
  std::optional<RankReport> failure; ///< the first failed rank, when one reported
};

/// Judges a launch from the launcher's status and the ranks' reports: the first failed rank's own
/// status decides (128+N for a signal), else the launcher's; a launcher that could not run is its
/// error's exit status. `launcher` names the launcher in messages; `expected_ranks` how many
/// should have reported.
RunVerdict judge_run(const Result<int>& launcher_status, const std::vector<RankReport>& ranks,
                     const std::string& launcher, int expected_ranks);

/// The record's "rank_exits": one object per rank report.
nlohmann::ordered_json rank_exits_json(const std::vector<RankReport>& ranks);

} // namespace lockstep::runner
