// The rank program: one rank of a `lockstep run` job in the hybrid model (docs/launch.md, "Ranks on
// one node"). The host's launcher (mpirun's orted, srun) starts it once per rank, in place of
// `lockstep exec`; it is lockstep itself, called as `lockstep _rank` (or through a link named
// lockstep-rank), so it is wherever lockstep is:
//
//   lockstep _rank --report DIR [--gate SECONDS] -- /path/to/lockstep exec [OPTIONS] IMAGE -- CMD...
//
// With --gate (mpirun with preflight: the launcher starts while the nodes are checked) it first
// waits at the node's gate, which the node's preflight keeps, for the launching node's verdict: on
// "stop" it leaves at once with status 0 and no report (the job was called off; `lockstep run` says
// why), and when no verdict comes within SECONDS it fails without running anything.
// It asks the node's holder of that container for it (starting the holder when it is the first rank
// here), joins the container's namespaces and runs the command, then writes DIR/rank-N.json as
// `lockstep exec --rank-report DIR` does. When the container can't be shared (the holder refuses,
// another user holds the name, anything unexpected), it runs the `lockstep exec` line itself, as
// every rank did before. cli/main.cpp calls it before anything else of lockstep starts; a release
// build links its libraries statically (LOCKSTEP_STATIC_DEPS), so a rank costs one execve more than
// the command and no loading of shared libraries. runner/runtime/join.hpp has the protocol.
#include "runner/launch/rank.hpp"

#include "runner/launch/run_record.hpp"
#include "runner/runtime/join.hpp"
#include "support/system/process.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace lockstep::runner {

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: lockstep _rank --report DIR [--gate SECONDS] -- LOCKSTEP exec [OPTIONS] IMAGE -- "
               "CMD...\n"
               "(lockstep run starts it for each rank; see docs/launch.md)\n");
  return 2;
}

// Runs the `lockstep exec` line itself (unshared); returns only when it can't be executed.
int run_unshared(const std::vector<std::string>& creator) {
  std::vector<char*> argv = c_strings(creator);
  ::execv(argv[0], argv.data());
  std::fprintf(stderr, "lockstep: rank: can't run %s: %s\n", argv[0], std::strerror(errno));
  return 127;
}

} // namespace

int rank_main(int argc, char** argv) {
  if (argc < 5 || std::string(argv[0]) != "--report") {
    return usage();
  }
  const std::string report_dir = argv[1];
  int next = 2;
  int gate_seconds = 0;
  if (std::string(argv[next]) == "--gate" && next + 1 < argc) {
    // NOLINTNEXTLINE(cert-err34-c): lockstep run writes the number; a non-number reads 0, refused below
    gate_seconds = std::atoi(argv[next + 1]);
    next += 2;
    if (gate_seconds <= 0) {
      return usage();
    }
  }
  if (next >= argc || std::string(argv[next]) != "--") {
    return usage();
  }
  const std::vector<std::string> creator(argv + next + 1, argv + argc);
  if (creator.size() < 3 || creator[1] != "exec") {
    return usage();
  }
  if (gate_seconds > 0) {
    std::string why;
    switch (join::wait_at_gate(report_dir, std::chrono::seconds(gate_seconds), why)) {
    case join::GateOutcome::go:
      break;
    case join::GateOutcome::stop:
      return 0;
    case join::GateOutcome::timed_out:
    case join::GateOutcome::failed: {
      (void)run_reporting_rank(report_dir, [&]() -> Result<int> {
        return Error{ExitCode::external, "not started: " + why};
      });
      std::fprintf(stderr, "lockstep: error: not started: %s\n", why.c_str());
      return static_cast<int>(ExitCode::external);
    }
    }
  }
  std::string why;
  std::optional<join::Joined> joined = join::ask_holder(creator, why);
  if (!joined) {
    return run_unshared(creator);
  }
  bool could_not_join = false;
  Result<int> code = run_reporting_rank(report_dir, [&]() -> Result<int> {
    Result<int> r = join::run_joined(*joined, could_not_join);
    if (could_not_join) {
      joined.reset(); // the holder counts this rank as gone
      std::exit(run_unshared(creator));
    }
    return r;
  });
  if (!code) {
    std::fprintf(stderr, "lockstep: error: %s\n", code.error().message.c_str());
    return code.error().process_exit() & 0xff;
  }
  return *code & 0xff;
}

} // namespace lockstep::runner
