#pragma once
// What the fuzz targets of lockstep's readers check of every result: a reader of hostile input
// returns a value or an invalid_input error, never another error; anything else is a violation,
// which names the target and aborts, so that libFuzzer keeps the input.
#include "support/base/result.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace lockstep::fuzz {

[[noreturn]] inline void violation(const char* target, const std::string& what) {
  std::fprintf(stderr, "%s: VIOLATION: %s\n", target, what.c_str());
  std::fflush(stderr);
  std::abort();
}

template <typename R> void expect_value_or_invalid(const char* target, const R& r, const char* reader) {
  if (!r && r.error().code != ExitCode::invalid_input) {
    violation(target,
              std::string(reader) + " returned an error other than invalid_input: " + r.error().message);
  }
}

} // namespace lockstep::fuzz
