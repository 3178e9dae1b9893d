#include "support/conda/version_spec.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace lockstep::conda;

namespace {

VersionSpec spec(const std::string& text, SpecMode mode = SpecMode::strict) {
  auto parsed = VersionSpec::parse(text, mode);
  INFO(text << ": " << (parsed ? "" : parsed.error().message));
  REQUIRE(parsed);
  return *parsed;
}

bool matches(const std::string& spec_text, const std::string& version, SpecMode mode = SpecMode::strict) {
  auto parsed = Version::parse(version);
  REQUIRE(parsed);
  return spec(spec_text, mode).matches(*parsed);
}

ParseError bad(const std::string& text, SpecMode mode = SpecMode::strict) {
  auto parsed = VersionSpec::parse(text, mode);
  INFO(text);
  REQUIRE_FALSE(parsed);
  return parsed.error();
}

} // namespace

TEST_CASE("version specs match 1.7.1 as conda's test_match says", "[conda][version_spec]") {
  // conda tests/models/test_version.py test_match: each spec against "1.7.1".
  const std::vector<std::pair<std::string, bool>> cases = {
      {"1.7.*", true},
      {"1.7.1", true},
      {"1.7.0", false},
      {"1.7", false},
      {"1.5.*", false},
      {">=1.5", true},
      {"!=1.5", true},
      {"!=1.7.1", false},
      {"==1.7.1", true},
      {"==1.7", false},
      {"==1.7.2", false},
      {"==1.7.1.0", true},
      {"1.7.*|1.8.*", true},
      {">1.7,<1.8", true},
      {">1.7.1,<1.8", false},
      {"^1.7.1$", true},
      {R"(^1\.7\.1$)", true},
      {R"(^1\.7\.[0-9]+$)", true},
      {R"(^1\.8.*$)", false},
      {R"(^1\.[5-8]\.1$)", true},
      {R"(^[^1].*$)", false},
      {R"(^[0-9+]+\.[0-9+]+\.[0-9]+$)", true},
      {"^$", false},
      {"^.*$", true},
      {"1.7.*|^0.*$", true},
      {"1.6.*|^0.*$", false},
      {"1.6.*|^0.*$|1.7.1", true},
      {"^0.*$|1.7.1", true},
      {R"(1.6.*|^.*\.7\.1$|0.7.1)", true},
      {"*", true},
      {"1.*.1", true},
      {"1.5.*|>1.7,<1.8", true},
      {"1.5.*|>1.7,<1.7.1", false},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    CHECK(matches(text, "1.7.1") == expected);
  }
}

TEST_CASE("ver_eval cases from conda's tests", "[conda][version_spec]") {
  // conda tests/models/test_version.py test_ver_eval, test_not_eq_star, test_compound_versions.
  CHECK(matches("==1.7", "1.7.0"));
  CHECK(matches("<=1.7", "1.7.0"));
  CHECK_FALSE(matches("<1.7", "1.7.0"));
  CHECK(matches(">=1.7", "1.7.0"));
  CHECK_FALSE(matches(">1.7", "1.7.0"));
  CHECK_FALSE(matches(">=1.7", "1.6.7"));
  CHECK_FALSE(matches(">2013b", "2013a"));
  CHECK(matches(">2013b", "2013k"));
  CHECK_FALSE(matches(">2013b", "3.0.0"));
  CHECK(matches(">1.0.0a", "1.0.0"));
  CHECK(matches(">1.0.0*", "1.0.0", SpecMode::lenient)); // conda keeps the '*' in the version
  CHECK(matches("1.0*", "1.0"));
  CHECK(matches("1.0*", "1.0.0"));
  CHECK(matches("1.0.0*", "1.0"));
  CHECK_FALSE(matches("1.0.0*", "1.0.1"));
  CHECK(matches("2013a*", "2013a"));
  CHECK_FALSE(matches("2013b*", "2013a"));
  CHECK(matches("2013a*", "2013ab"));
  CHECK_FALSE(matches("1.2.4*", "1.3.4"));
  CHECK(matches("1.2.3*", "1.2.3+4.5.6"));
  CHECK(matches("1.2.3+4*", "1.2.3+4.5.6"));
  CHECK_FALSE(matches("1.2.3+5*", "1.2.3+4.5.6"));
  CHECK_FALSE(matches("1.2.4+5*", "1.2.3+4.5.6"));

  CHECK(matches("=3.3", "3.3.1"));
  CHECK(matches("=3.3", "3.3"));
  CHECK_FALSE(matches("=3.3", "3.4"));
  CHECK(matches("3.3.*", "3.3.1"));
  CHECK(matches("3.3.*", "3.3"));
  CHECK_FALSE(matches("3.3.*", "3.4"));
  CHECK(matches("=3.3.*", "3.3.1"));
  CHECK_FALSE(matches("=3.3.*", "3.4"));
  CHECK_FALSE(matches("!=3.3.*", "3.3.1"));
  CHECK(matches("!=3.3.*", "3.4"));
  CHECK(matches("!=3.3.*", "3.4.1"));
  CHECK(matches("!=3.3", "3.3.1"));
  CHECK_FALSE(matches("!=3.3", "3.3.0.0"));
  CHECK_FALSE(matches("!=3.3.*", "3.3.0.0"));

  const std::string compound = ">=2.7, !=3.0.*, !=3.1.*, !=3.2.*, !=3.3.*";
  CHECK_FALSE(matches(compound, "2.6.8"));
  CHECK(matches(compound, "2.7.2"));
  CHECK_FALSE(matches(compound, "3.3"));
  CHECK_FALSE(matches(compound, "3.3.4"));
  CHECK(matches(compound, "3.4"));
  CHECK(matches(compound, "3.4a"));

  for (const std::string version :
       {"1.7.0", "1.7.0.post123", "1.7.0.post123.gabcdef9", "1.7.0.post123+gabcdef9"}) {
    CHECK(matches(version, version)); // test_local_identifier
  }
}

TEST_CASE("the ~= operator is at least the version and starts with all but its last component",
          "[conda][version_spec]") {
  // conda tests/models/test_version.py test_compatible_release_versions.
  CHECK(matches("~=1.10", "1.11.0"));
  CHECK_FALSE(matches("~=1.10.0", "1.11.0"));
  CHECK_FALSE(matches("~=3.3.2", "3.4.0"));
  CHECK_FALSE(matches("~=3.3.2", "3.3.1"));
  CHECK(matches("~=3.3.2", "3.3.2.0"));
  CHECK(matches("~=3.3.2", "3.3.3"));
  CHECK(matches("~=3.3.2|==2.2", "2.2.0"));
  CHECK(matches("~=3.3.2|==2.2", "3.3.3"));
  CHECK_FALSE(matches("~=3.3.2|==2.2", "2.2.1"));
  CHECK(bad("~=3.3.2.*").message == "'~=' can't take a '.*'");
  CHECK(bad("~=3").message == "'~=' needs a version of two or more components");
}

TEST_CASE("prefix matching and pre-releases as conda.md describes them", "[conda][version_spec]") {
  CHECK(matches("=1.2", "1.2.7"));
  CHECK(matches("=1.2", "1.2rc1"));
  CHECK_FALSE(matches("=1.2", "1.20"));
  CHECK(matches("1.2", "1.2.0")); // a bare version is exact, after normalisation
  CHECK_FALSE(matches("1.2", "1.2.7"));
  CHECK(matches("<2", "2.0rc1"));
  CHECK(matches("<2", "2.0.dev0"));
  CHECK_FALSE(matches("<2.0a0", "2.0rc1"));
  CHECK(matches(">=0.3.25,<0.3.26.0a0", "0.3.25"));
  CHECK_FALSE(matches(">=0.3.25,<0.3.26.0a0", "0.3.26.0rc1"));
  CHECK(matches(">=0.3.25,<0.3.26.0a0", "0.3.26rc1")); // the segment layout differs: 26rc1 < 26
  CHECK(matches("=1.0a", "1.0ab"));
  CHECK(matches(">=1!164.3095,<1!165", "1!164.3095"));
}

TEST_CASE("'|' binds weaker than ',' and parentheses group", "[conda][version_spec]") {
  CHECK(matches("1.5|1.6,1.7", "1.5"));         // 1.5 | (1.6 , 1.7)
  CHECK_FALSE(matches("(1.5|1.6),1.7", "1.5")); // (1.5 | 1.6) , 1.7
  CHECK(matches("(>=1,<2)|>3", "1.5"));
  CHECK(matches("(>=1,<2)|>3", "4"));
  CHECK_FALSE(matches("(>=1,<2)|>3", "2.5"));
  CHECK(matches(">=3,(<4|<5)", "4.5"));
  CHECK(spec("( (1.5|((1.6|1.7), 1.8), 1.9 |2.0))|2.1").str() ==
        "==1.5|(==1.6|==1.7),==1.8,==1.9|==2.0|==2.1");
  CHECK(spec("1.2.3,4.5.6|<=7.8.9").str() == "==1.2.3,==4.5.6|<=7.8.9");
  CHECK(spec("(1.2.3|4.5.6),<=7.8.9").str() == "(==1.2.3|==4.5.6),<=7.8.9");
}

TEST_CASE("canonical texts of version specs", "[conda][version_spec]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"1.7.1", "==1.7.1"},
      {"1.7.1*", "=1.7.1"},
      {"1.7.1.*", "=1.7.1"},
      {"=1.7", "=1.7"},
      {"*", "*"},
      {">= 1.2", ">=1.2"},
      {"!=1.2.*", "!=1.2.*"},
      {"!=1.2*", "!=1.2.*"},
      {"~=1.2.3", "~=1.2.3"},
      {">=1.2.*", ">=1.2"},
      {"1.*.3", "1.*.3"},
      {"^1\\.2.*$", "^1\\.2.*$"},
      {" >=1.0 , <2 ", ">=1.0,<2"},
      {"1.7.1*,1.8.1.*", "=1.7.1,=1.8.1"},
      {"1.0RC1", "==1.0RC1"},
  };
  for (const auto& [text, canonical] : cases) {
    INFO(text);
    CHECK(spec(text).str() == canonical);
    CHECK(spec(canonical).str() == canonical);
  }
  CHECK(spec("1.7.1*") == spec("1.7.1.*"));
  CHECK(VersionSpec().str() == "*");
  CHECK(VersionSpec().is_any());
  CHECK(spec("1.2").single_op() == VersionOp::equal);
  CHECK(spec("1.2").single_version()->str() == "1.2");
  CHECK_FALSE(spec(">1,<2").single_op().has_value());
  CHECK(spec("1.*.3").has_pattern());
  CHECK(spec("1.*.3").single_version() == nullptr);
}

TEST_CASE("lenient mode reads repodata's legacy forms", "[conda][version_spec]") {
  CHECK(spec("2023.*.*", SpecMode::lenient).str() == "=2023");
  CHECK(matches("2023.*.*", "2023.1", SpecMode::lenient));
  CHECK(spec("*.*", SpecMode::lenient).is_any());
  CHECK(spec(">=*", SpecMode::lenient).is_any());
  CHECK(spec("<2.0.*", SpecMode::lenient).str() == "<2.0");
  CHECK(spec("==1.2.*", SpecMode::lenient).str() == "==1.2");
  CHECK(spec("==2.7.*.*|>=3.6", SpecMode::lenient).str() == "==2.7|>=3.6");
  CHECK(spec(">=2.*.*", SpecMode::lenient).str() == ">=2");
  CHECK(matches(">=1.0.1*.vc11", "1.0.1a.vc11", SpecMode::lenient));
  CHECK_FALSE(matches(">=1.0.1.vc11", "1.0.1a.vc11"));
  CHECK(matches("<1.0.1", "1.0.1a.vc11"));

  CHECK(bad("2023.*.*").message == "repeated '.*': write '2023.*'");
  CHECK(bad("2023.*.*").offset == 4);
  CHECK(bad("*.*").message == "'*.*' is not a version spec: write '*'");
  CHECK(bad(">=*").message == "'*' can't follow '>='");
  CHECK(bad("<*", SpecMode::lenient).message == "'*' can't follow '<'");
  CHECK(bad("<2.0.*").message == "'.*' after '<' means nothing: write '<2.0'");
  CHECK(bad("<2.0.*").offset == 4);
  CHECK(bad("==1.2*").message == "'*' after '==' means nothing: write '==1.2'");
  CHECK(bad(">=1.0.1*.vc11").message == "'*' in the version after '>='");
}

TEST_CASE("invalid version specs are errors at the offending byte", "[conda][version_spec]") {
  struct Case {
    std::string text;
    std::size_t offset;
    std::string message;
  };
  // conda tests/models/test_version.py test_invalid_version_specs, test_version_spec_2, test_ver_eval_errors.
  const std::vector<Case> cases = {
      {"", 0, "empty version spec"},
      {"  ", 2, "empty version spec"},
      {"~", 0, "unknown operator '~'"},
      {"^", 0, "a regular expression starts with '^' and ends with '$'"},
      {"^1.5", 0, "a regular expression starts with '^' and ends with '$'"},
      {"1.2+", 4, "missing local version after '+'"},
      {"+1.2", 0, "missing version before '+'"},
      {"+1.2+", 0, "missing version before '+'"},
      {"++", 0, "missing version before '+'"},
      {"c +, 0/|0 *", 2, "unexpected '+'"},
      {"a[version=)|(", 1, "invalid character '[' in a version"},
      {"a=)(=b", 1, "invalid character '=' in a version"},
      {"==", 2, "expected a version after '=='"},
      {"=", 1, "expected a version after '='"},
      {">=", 2, "expected a version after '>='"},
      {"<=", 2, "expected a version after '<='"},
      {"===3.3.2", 0, "unknown operator '==='"},
      {"><2.4.5", 0, "unknown operator '><'"},
      {"!!2.4.5", 0, "unknown operator '!!'"},
      {"!", 0, "unknown operator '!'"},
      {"(1.5", 0, "'(' without a matching ')'"},
      {"1.5)", 3, "')' without a matching '('"},
      {"1.5||1.6", 4, "'||' is not an operator: write '|'"},
      {">=3.11,<<3", 7, "unknown operator '<<'"},
      {"1.5,", 4, "expected a version"},
      {"(1.5 1.6)", 5, "expected ')' instead of '1'"},
      {"1.5$", 3, "invalid character '$' in a version"},
      {"^(aaaa$", 0, "invalid regular expression: "},
      {std::string(40, '(') + "1" + std::string(40, ')'), 32, "parentheses nested deeper than 32"},
  };
  for (const auto& c : cases) {
    const ParseError e = bad(c.text);
    INFO(c.text);
    CHECK(e.offset == c.offset);
    if (c.message.ends_with(": ")) {
      CHECK(e.message.starts_with(c.message));
    } else {
      CHECK(e.message == c.message);
    }
  }
  CHECK(bad(std::string(5000, '1')).message == "a version spec is at most 4096 characters");
}

TEST_CASE("an operator before a run of stars reads the stars as '*' (fuzz_conda)", "[conda][version_spec]") {
  // "<*.*" once printed as "<*", which no mode reads back.
  CHECK_FALSE(VersionSpec::parse("<*.*", SpecMode::lenient));
  auto any = VersionSpec::parse(">=*.*", SpecMode::lenient);
  REQUIRE(any);
  CHECK(any->is_any());
}
