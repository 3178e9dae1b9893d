#include "support/base/result.hpp"

#include <cerrno>
#include <cstring>

namespace lockstep {

std::optional<Error> combine_errors(const std::vector<std::optional<Error>>& errors,
                                    std::string_view things) {
  std::vector<const Error*> failed;
  for (const auto& e : errors) {
    if (e) {
      failed.push_back(&*e);
    }
  }
  if (failed.empty()) {
    return std::nullopt;
  }
  if (failed.size() == 1) {
    return *failed.front();
  }
  Error combined{failed.front()->code,
                 fmt::format("{} of {} {} failed:", failed.size(), errors.size(), things)};
  for (const Error* e : failed) {
    combined.message += "\n  " + e->message;
  }
  return combined;
}

Error errno_error(const std::string& what, int err) {
  // EINTR reaches a caller only when SIGINT/SIGTERM ended a blocking call (support/base/interrupt.cpp
  // installs its handlers without SA_RESTART): the command was interrupted.
  if (err == EINTR) {
    return Error{ExitCode::interrupted, what + ": interrupted"};
  }
  return Error{ExitCode::io, what + ": " + std::strerror(err)};
}

} // namespace lockstep
