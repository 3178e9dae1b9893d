#pragma once
// The holder of the container the ranks of one job share on one node (join.hpp; docs/launch.md,
// "Ranks on one node"): `lockstep exec --hold-listen FD --hold-key FD [exec options] IMAGE -- CMD`,
// started by the first rank's `lockstep _rank`. It prepares the image once (an OCI image found or
// unpacked in the cache, a SIF loop-mounted, FUSE-mounted or extracted), assembles the container
// once (hold_sandbox), then answers every rank that asks with the container's namespaces and the
// rank's environment composed as `lockstep exec` composes it. Ranks join, run and leave; the
// holder leaves when the ranks it expects (the launcher's local size, from its own environment or the
// first rank's) have come and gone, or when none has been connected for a grace period. It never writes into
// the host's mount table (but for a FUSE-mounted SIF, unmounted when it leaves), and nothing of it outlives
// the job's ranks.
#include "runner/runtime/exec.hpp"
#include "support/base/result.hpp"

#include <chrono>
#include <string>

namespace lockstep::runner {

/// How the holder listens and how long it waits.
struct HoldOptions {
  int listen_fd = -1; ///< a listening unix socket (bound to join::socket_name(key))
  std::string key;    ///< join::key_of() of the ranks it serves; others are refused
  /// How long it stays with no rank connected before leaving, unless every expected rank came.
  std::chrono::milliseconds grace{2000};
  /// How long it waits for the first rank (a holder preflight starts waits for mpirun to start).
  std::chrono::milliseconds first_wait{2000};
  /// Leave at once when the container can't be prepared (a holder preflight started: the ranks then
  /// start one of their own, which tells them why).
  bool leave_if_unprepared = false;
};

/// Prepares `exec`'s container and holds it for the ranks that ask on `hold.listen_fd` (see the
/// file comment). A container that can't be prepared is not an error here: every rank that asks
/// during the grace period is refused with the reason, and runs `lockstep exec` itself (which then
/// reports the failure as it always does). Returns when the holder is done.
Result<void> hold_for_ranks(const ExecOptions& exec, const HoldOptions& hold);

} // namespace lockstep::runner
