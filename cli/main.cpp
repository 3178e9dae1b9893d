#include "cli/cli.hpp"
#include "runner/runtime/seccomp.hpp"

#include <malloc.h>

#include <cstdlib>

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
