// Fuzz target for the readers of the Python project files people bring (envspec/load/python_inputs.hpp)
// and of wheel METADATA (support/python/wheel.hpp): the first byte picks the reader, the rest is the
// file. pyproject.toml goes through read_pyproject (with the extras the input's first line names,
// when it is a comment) and read_pyproject_info, environment.yml through read_conda_env, METADATA
// through parse_core_metadata. Whatever the input, each returns its value or an invalid-input error
// (never another error, a crash or a hang); an accepted requirement is valid PEP 508. A violation
// aborts.
//
// Built twice (tests/CMakeLists.txt): as a libFuzzer binary (-DLOCKSTEP_FUZZ=ON) and with
// replay_main.cpp as a plain driver that ctest runs over tests/fuzz/corpus/pyinputs/.
#include "envspec/load/python_inputs.hpp"
#include "support/python/pep508.hpp"
#include "support/python/wheel.hpp"
#include "tests/fuzz/fuzz_checks.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr const char* k_target = "fuzz_pyinputs";

// "# extras: a b" on the first line: the extras asked of a pyproject.toml.
std::vector<std::string> extras_of(std::string_view text) {
  std::vector<std::string> out;
  constexpr std::string_view k_prefix = "# extras:";
  if (!text.starts_with(k_prefix)) {
    return out;
  }
  std::string_view line = text.substr(k_prefix.size(), text.find('\n') - k_prefix.size());
  while (!line.empty()) {
    const std::size_t start = line.find_first_not_of(' ');
    if (start == std::string_view::npos) {
      break;
    }
    line.remove_prefix(start);
    const std::size_t end = line.find(' ');
    out.emplace_back(line.substr(0, end));
    line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  }
  return out;
}

void check_requirements(const std::vector<lockstep::envspec::ImportedRequirement>& reqs, const char* reader) {
  for (const auto& r : reqs) {
    if (!lockstep::Requirement::parse(r.text)) {
      lockstep::fuzz::violation(k_target,
                                std::string(reader) + " accepted an invalid requirement: " + r.text);
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
  case 0: {
    auto reqs = lockstep::envspec::read_pyproject(text, "pyproject.toml", extras_of(text));
    lockstep::fuzz::expect_value_or_invalid(k_target, reqs, "read_pyproject");
    if (reqs) {
      check_requirements(*reqs, "read_pyproject");
    }
    lockstep::fuzz::expect_value_or_invalid(
        k_target, lockstep::envspec::read_pyproject_info(text, "pyproject.toml"), "read_pyproject_info");
    break;
  }
  case 1: {
    auto env = lockstep::envspec::read_conda_env(text, "environment.yml");
    lockstep::fuzz::expect_value_or_invalid(k_target, env, "read_conda_env");
    if (env) {
      check_requirements(env->pip, "read_conda_env");
    }
    break;
  }
  default:
    lockstep::fuzz::expect_value_or_invalid(k_target, lockstep::parse_core_metadata(text, "METADATA"),
                                            "parse_core_metadata");
    break;
  }
  return 0;
}
