#include "support/result.hpp"

#include <cerrno>
#include <cstring>

namespace lockstep {

Error errno_error(const std::string& what, int err) {
  // EINTR reaches a caller only when SIGINT/SIGTERM ended a blocking call (support/interrupt.cpp
  // installs its handlers without SA_RESTART): the command was interrupted.
  if (err == EINTR) {
    return Error{ExitCode::interrupted, what + ": interrupted"};
  }
  return Error{ExitCode::io, what + ": " + std::strerror(err)};
}

} // namespace lockstep
