#include "support/result.hpp"

#include <cstring>

namespace lockstep {

Error errno_error(const std::string& what, int err) {
  ExitCode code = ExitCode::io;
  return Error{code, what + ": " + std::strerror(err)};
}

} // namespace lockstep
