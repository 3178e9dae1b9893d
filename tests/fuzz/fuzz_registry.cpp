// Fuzz target for what a registry (or a user) hands lockstep's registry client as text: the first
// byte picks the reader, the rest is its input.
//   even: parse_challenges() on a WWW-Authenticate value: challenges or invalid input (never another
//         error, a crash or a hang); schemes and parameter names come back lower case, schemes non-empty.
//   odd:  RegistryRef::parse() on a reference: a reference or invalid input; an accepted one renders
//         (str()) to text that parses back to the same reference.
// A violation aborts (libFuzzer then saves the input).
//
// Built twice (tests/CMakeLists.txt): as a libFuzzer binary (-DLOCKSTEP_FUZZ=ON) and with
// replay_main.cpp as a plain driver that ctest runs over tests/fuzz/corpus/registry/.
#include "support/oci/registry_ref.hpp"
#include "support/registry/challenge.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "fuzz_registry: VIOLATION: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

bool lower_case(const std::string& s) {
  return std::none_of(s.begin(), s.end(), [](unsigned char c) { return std::isupper(c) != 0; });
}

void challenges(std::string_view header) {
  using namespace lockstep;
  Result<std::vector<registry::Challenge>> parsed = registry::parse_challenges(header);
  if (!parsed) {
    if (parsed.error().code != ExitCode::invalid_input) {
      violation("a challenge error that is not invalid input: " + parsed.error().message);
    }
    return;
  }
  for (const registry::Challenge& c : *parsed) {
    if (c.scheme.empty() || !lower_case(c.scheme)) {
      violation("scheme '" + c.scheme + "' is empty or not lower case");
    }
    for (const auto& [name, value] : c.params) {
      if (name.empty() || !lower_case(name)) {
        violation("parameter name '" + name + "' is empty or not lower case");
      }
    }
  }
}

void reference(std::string_view text) {
  using namespace lockstep;
  Result<oci::RegistryRef> ref = oci::RegistryRef::parse(text);
  if (!ref) {
    if (ref.error().code != ExitCode::invalid_input) {
      violation("a reference error that is not invalid input: " + ref.error().message);
    }
    return;
  }
  const std::string rendered = ref->str();
  Result<oci::RegistryRef> again = oci::RegistryRef::parse(rendered);
  if (!again) {
    violation("'" + rendered + "' (rendered) does not parse: " + again.error().message);
  }
  if (!(*again == *ref)) {
    violation("'" + rendered + "' parses to another reference: " + again->str());
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1); // NOLINT
  if ((data[0] & 1U) == 0) {
    challenges(rest);
  } else {
    reference(rest);
  }
  return 0;
}
