// The one `lockstep` executable: `lockstep _rank` or a link named lockstep-rank runs a rank of
// `lockstep run` (runner/launch/rank.hpp) before anything else starts; every other command line goes
// to the CLI (cli.hpp).
#include "cli/cli.hpp"
#include "runner/launch/rank.hpp"
#include "runner/runtime/seccomp.hpp"

#include <malloc.h>

#include <cstdlib>
#include <string_view>

int main(int argc, char** argv) {
  // A rank of `lockstep run` (runner/launch/rank.hpp): `lockstep _rank ...`, or lockstep called
  // through a link named lockstep-rank. Nothing else of lockstep runs first.
  if (argc > 1 && std::string_view(argv[1]) == "_rank") {
    return lockstep::runner::rank_main(argc - 2, argv + 2);
  }
  if (const std::string_view name = argc > 0 ? std::string_view(argv[0]) : std::string_view();
      name == "lockstep-rank" || name.ends_with("/lockstep-rank")) {
    return lockstep::runner::rank_main(argc - 1, argv + 1);
  }
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
