// Fuzz target for the lock parser: parse_lock() on arbitrary bytes. Whatever the input, it returns a
// lock or an invalid-input error (never an internal error, a crash or a hang), and a lock it accepts
// renders to text that parses back to the same lock, field by field (so rendering loses nothing).
// A violation aborts (libFuzzer then saves the input).
//
// Built twice (tests/CMakeLists.txt): as a libFuzzer binary (-DLOCKSTEP_FUZZ=ON) and with
// replay_main.cpp as a plain driver that ctest runs over tests/fuzz/corpus/lock/.
#include "envspec/lock/lockfile.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "fuzz_lock: VIOLATION: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

using lockstep::envspec::Lock;
using lockstep::envspec::LockedArtifact;
using lockstep::envspec::LockedRepo;

bool same_repo(const LockedRepo& a, const LockedRepo& b) {
  return a.kind == b.kind && a.url == b.url && a.suite == b.suite && a.components == b.components &&
         a.release_date == b.release_date && a.release_sha256 == b.release_sha256;
}

bool same_artifact(const LockedArtifact& a, const LockedArtifact& b) {
  return a.kind == b.kind && a.name == b.name && a.version == b.version && a.arch == b.arch &&
         a.group == b.group && a.size == b.size && a.sha256 == b.sha256 && a.url == b.url &&
         a.repo == b.repo && a.rev == b.rev && a.reason == b.reason;
}

// Every field of the two locks, compared one by one: the first that differs, or "" when none does.
std::string first_difference(const Lock& a, const Lock& b) {
  if (a.schema != b.schema || a.tool != b.tool || a.spec_digest != b.spec_digest || a.epoch != b.epoch ||
      a.platform != b.platform) {
    return "the header";
  }
  if (a.inputs != b.inputs) {
    return "inputs: " + a.inputs.dump() + " vs " + b.inputs.dump();
  }
  if (a.stack.has_value() != b.stack.has_value() ||
      (a.stack &&
       lockstep::envspec::locked_stack_json(*a.stack) != lockstep::envspec::locked_stack_json(*b.stack))) {
    return "stack";
  }
  if (a.repos.size() != b.repos.size() || a.artifacts.size() != b.artifacts.size()) {
    return "the number of repos or artifacts";
  }
  for (std::size_t i = 0; i < a.repos.size(); ++i) {
    if (!same_repo(a.repos[i], b.repos[i])) {
      return "repos[" + std::to_string(i) + "]";
    }
  }
  for (std::size_t i = 0; i < a.artifacts.size(); ++i) {
    if (!same_artifact(a.artifacts[i], b.artifacts[i])) {
      return "artifacts[" + std::to_string(i) + "]";
    }
  }
  return "";
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lockstep;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<envspec::Lock> lock = envspec::parse_lock(text, "fuzz.lock");
  if (!lock) {
    if (lock.error().code != ExitCode::invalid_input) {
      violation("an error that is not invalid input: " + lock.error().message);
    }
    return 0;
  }
  const std::string rendered = envspec::render_lock(*lock);
  Result<envspec::Lock> again = envspec::parse_lock(rendered, "rendered.lock");
  if (!again) {
    violation("a lock it accepted renders to text it refuses: " + again.error().message);
  }
  if (const std::string diff = first_difference(*lock, *again); !diff.empty()) {
    violation("the lock parsed from its rendering differs from the lock rendered: " + diff);
  }
  return 0;
}
