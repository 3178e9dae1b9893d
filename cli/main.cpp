#include "cli/cli.hpp"

#include <malloc.h>

int main(int argc, char** argv) {
  // Locking and building allocate and free hundreds of megabytes (apt indexes, layers): keep freed
  // memory instead of handing it back and faulting it in again (measured: lock -10%).
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
  return lockstep::cli::run(argc, argv);
}
