// Fuzz target for the rootless builds' file records (runner/runtime/recorded_stat.hpp): a build step
// can write the user.lockstep.stat xattr itself, so RecordedStat::parse() sees hostile bytes. Whatever
// the input, it returns a record or an invalid-input error (never a crash or another error), and a
// record it accepts renders to text that parses back to the same record. A violation aborts.
//
// Built twice (tests/CMakeLists.txt): as a libFuzzer binary (-DLOCKSTEP_FUZZ=ON) and with
// replay_main.cpp as a plain driver that ctest runs over tests/fuzz/corpus/record/.
#include "runner/runtime/recorded_stat.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

[[noreturn]] void violation(const char* what) {
  std::fprintf(stderr, "fuzz_record: VIOLATION: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using lockstep::runner::RecordedStat;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = RecordedStat::parse(text);
  if (!r) {
    if (r.error().code != lockstep::ExitCode::invalid_input) {
      violation("an error other than invalid_input");
    }
    return 0;
  }
  auto back = RecordedStat::parse(r->text());
  if (!back) {
    violation("an accepted record's text does not parse back");
  }
  const bool same_device =
      back->device.has_value() == r->device.has_value() &&
      (!r->device || (back->device->type == r->device->type && back->device->major == r->device->major &&
                      back->device->minor == r->device->minor));
  if (back->owner != r->owner || back->mode != r->mode || !same_device) {
    violation("an accepted record changes when rendered and parsed again");
  }
  return 0;
}
