// Fuzz target for conda's small languages (support/conda/): versions, version specs and MatchSpecs,
// which lockstep reads from people's specs and from hostile repodata. The first byte picks the
// reader and the mode (strict or lenient), the rest is the text. Whatever the input, each parser
// returns a value or a ParseError whose offset lies inside the text (and render_caret draws it);
// a parsed value prints a canonical text that parses again, to the same canonical text and the same
// answers; a version equals itself, hashes like its reparse, and orders consistently against a few
// fixed versions. A violation aborts.
//
// Built twice (tests/CMakeLists.txt): as a libFuzzer binary (-DLOCKSTEP_FUZZ=ON) and with
// replay_main.cpp as a plain driver that ctest runs over tests/fuzz/corpus/conda/.
#include "support/conda/match_spec.hpp"
#include "support/conda/parse_error.hpp"
#include "support/conda/version.hpp"
#include "support/conda/version_spec.hpp"
#include "tests/fuzz/fuzz_checks.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

using namespace lockstep::conda;
constexpr const char* k_target = "fuzz_conda";

const std::array<std::string_view, 8> k_versions = {"0",         "1.0",   "1.0.0",     "1.1dev1",
                                                    "1.1.post1", "2!1.0", "1.0+local", "3.11.4rc1"};

void check_error(std::string_view text, const ParseError& e, const char* reader) {
  if (e.offset > text.size()) {
    lockstep::fuzz::violation(k_target, std::string(reader) + ": error offset past the end: " + e.message);
  }
  (void)render_caret(text, e);
}

void check_version(std::string_view text) {
  auto v = Version::parse(text);
  if (!v) {
    check_error(text, v.error(), "Version::parse");
    return;
  }
  auto again = Version::parse(v->str());
  if (!again || !(*again == *v) || again->hash() != v->hash() || !v->starts_with(*v)) {
    lockstep::fuzz::violation(k_target, "version does not reparse to itself: " + v->str());
  }
  for (std::string_view other_text : k_versions) {
    const Version other = *Version::parse(other_text);
    const auto forward = *v <=> other;
    const auto backward = other <=> *v;
    if ((forward < 0) != (backward > 0) || (forward == 0) != (backward == 0) ||
        ((forward == 0) && v->hash() != other.hash())) {
      lockstep::fuzz::violation(k_target,
                                "inconsistent order of " + v->str() + " and " + std::string(other_text));
    }
  }
}

void check_version_spec(std::string_view text, SpecMode mode) {
  auto spec = VersionSpec::parse(text, mode);
  if (!spec) {
    check_error(text, spec.error(), "VersionSpec::parse");
    return;
  }
  const std::string canonical = spec->str();
  auto again = VersionSpec::parse(canonical, mode);
  if (!again || again->str() != canonical) {
    lockstep::fuzz::violation(k_target, "version spec canonical text does not reparse: " + canonical);
  }
  if (spec->has_pattern()) {
    return; // patterns are matched by std::regex, whose time on hostile expressions is not ours to bound
  }
  for (std::string_view v : k_versions) {
    const Version version = *Version::parse(v);
    if (spec->matches(version) != again->matches(version)) {
      lockstep::fuzz::violation(k_target, "reparsed version spec answers differently: " + canonical);
    }
  }
}

bool has_regex(const MatchSpec& m) {
  auto regex = [](const std::optional<StringMatcher>& s) {
    return s && s->kind() == StringMatcher::Kind::regex;
  };
  return m.name().kind() == StringMatcher::Kind::regex || regex(m.channel()) || regex(m.build()) ||
         regex(m.license()) || regex(m.license_family()) || (m.version() && m.version()->has_pattern()) ||
         (m.build_number() && m.build_number()->str().starts_with('^'));
}

void check_match_spec(std::string_view text, SpecMode mode) {
  auto spec = MatchSpec::parse(text, mode);
  if (!spec) {
    check_error(text, spec.error(), "MatchSpec::parse");
    return;
  }
  const std::string canonical = spec->str();
  auto again = MatchSpec::parse(canonical, mode);
  if (!again || again->str() != canonical) {
    lockstep::fuzz::violation(k_target, "MatchSpec canonical text does not reparse: " + canonical);
  }
  if (has_regex(*spec)) {
    return;
  }
  const Version version = *Version::parse("1.2.3");
  RecordFields record;
  record.name = "numpy";
  record.version = &version;
  record.build = "py312h_0";
  record.channel = "conda-forge";
  record.subdir = "linux-64";
  if (spec->matches(record) != again->matches(record)) {
    lockstep::fuzz::violation(k_target, "reparsed MatchSpec answers differently: " + canonical);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const SpecMode mode = (data[0] & 4) != 0 ? SpecMode::lenient : SpecMode::strict;
  switch (data[0] % 4) {
  case 0:
    check_version(text);
    break;
  case 1:
    check_version_spec(text, mode);
    break;
  default:
    check_match_spec(text, mode);
    break;
  }
  return 0;
}
