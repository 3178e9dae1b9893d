// The one `lockstep` executable: `lockstep _rank` or a link named lockstep-rank runs a rank of
// `lockstep run` (runner/launch/rank.hpp) before the rest of lockstep initialises; every other
// command line goes to the CLI (cli.hpp).
#include "cli/cli.hpp"
#include "runner/launch/rank.hpp"
#include "runner/runtime/seccomp.hpp"

#include <malloc.h>

#include <cstdlib>
#include <string_view>

namespace {

// A rank of `lockstep run`: `lockstep _rank ...`, or lockstep called through a link named
// lockstep-rank. It runs from this constructor, the first of the program's own (priority 101; glibc
// passes constructors argc and argv), so a rank, started once per MPI rank, doesn't pay for what
// the rest of lockstep sets up before main: CLI11's option validators in every command file, the
// libraries' and lockstep's own globals (measured: ~1 ms of a 4 ms start; docs/launch.md, "Ranks on
// one node"). rank_main and all it calls have no static initialisers (tests/arch/check-rank-start.py),
// so nothing it touches waits for a constructor that hasn't run. std::exit runs the atexit handlers
// registered so far and flushes stdio, as returning from main would.
__attribute__((constructor(101))) void run_rank_first(int argc, char** argv, char** /*envp*/) {
  if (argc > 1 && std::string_view(argv[1]) == "_rank") {
    std::exit(lockstep::runner::rank_main(argc - 2, argv + 2));
  }
  if (const std::string_view name = argc > 0 ? std::string_view(argv[0]) : std::string_view();
      name == "lockstep-rank" || name.ends_with("/lockstep-rank")) {
    std::exit(lockstep::runner::rank_main(argc - 1, argv + 1));
  }
}

} // namespace

int main(int argc, char** argv) {
  // Locking and building allocate and free hundreds of megabytes (apt indexes, layers): keep freed
  // memory instead of handing it back and faulting it in again (measured: lock -10%).
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
  // tests/cli/test_rootless.sh: a kernel without seccomp user notification (docs/rootless.md).
  if (const char* level = std::getenv("LOCKSTEP_TEST_SECCOMP_API"); level != nullptr) {
    lockstep::runner::force_seccomp_api_level(static_cast<unsigned int>(std::strtoul(level, nullptr, 10)));
  }
  return lockstep::cli::run(argc, argv);
}
