#include "support/conda/version.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

using namespace lockstep::conda;

namespace {

Version v(const std::string& text) {
  auto parsed = Version::parse(text);
  INFO(text << ": " << (parsed ? "" : parsed.error().message));
  REQUIRE(parsed);
  return *parsed;
}

// The offset and message of a version that must not parse.
ParseError bad(const std::string& text) {
  auto parsed = Version::parse(text);
  INFO(text);
  REQUIRE_FALSE(parsed);
  return parsed.error();
}

// Checks that `sorted` is strictly increasing under every pairwise comparison, and sorts back to
// itself from a shuffle.
void require_strictly_ordered(const std::vector<std::string>& sorted) {
  std::vector<Version> versions;
  for (const auto& s : sorted) {
    versions.push_back(v(s));
  }
  for (std::size_t i = 0; i < versions.size(); ++i) {
    for (std::size_t j = 0; j < versions.size(); ++j) {
      INFO(sorted[i] << " vs " << sorted[j]);
      CHECK((i < j) == (versions[i] < versions[j]));
      CHECK((i == j) == (versions[i] == versions[j]));
    }
  }
  std::vector<Version> shuffled = versions;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  std::sort(shuffled.begin(), shuffled.end());
  for (std::size_t i = 0; i < versions.size(); ++i) {
    CHECK(shuffled[i].str() == versions[i].str());
  }
}

} // namespace

TEST_CASE("conda versions keep their text and ignore surrounding whitespace", "[conda][version]") {
  CHECK(v("1.0RC1").str() == "1.0RC1");
  CHECK(v("  0.4.1.RC  ").str() == "0.4.1.RC");
  CHECK(v("1.0-beta").str() == "1.0-beta");
  CHECK(Version().str() == "0");
  CHECK(Version() == v("0.0"));
  CHECK(v("1!2.0").epoch() == 1);
  CHECK(v("2.0").epoch() == 0);
  CHECK(v("1.0+cuda").has_local());
  CHECK_FALSE(v("1.0").has_local());
}

TEST_CASE("conda's version order, from the docstring and CEP 33", "[conda][version]") {
  // conda.md §3.2 and conda/models/version.py's VersionOrder docstring.
  require_strictly_ordered({"1.1dev1", "1.1_", "1.1a1", "1.1.0dev1", "1.1.a1", "1.1.0rc1", "1.1", "1.1.post1",
                            "1.1post1", "1996.07.12", "1!0.4.1", "1!3.1.1.6", "2!0.4.1"});
  require_strictly_ordered(
      {"0.4", "0.4.1.rc", "0.4.1", "0.5a1", "0.5b3", "0.5C1", "0.5", "0.9.6", "0.960923", "1.0"});
  CHECK(v("1.1.0dev1") == v("1.1.dev1"));
  CHECK(v("1.1.post1") == v("1.1.0post1"));
  CHECK(v("0.4.1.rc") == v("0.4.1.RC"));
  CHECK(v("1.1") == v("1.1.0"));
  CHECK(v("1.1") == v("1.1.0.0"));
  // CEP 33's warning: the inserted 0 makes "1.1.0rc" equal to "1.1.rc", and both sort above "1.1rc".
  CHECK(v("1.1.0rc") == v("1.1.rc"));
  CHECK(v("1.1.rc") > v("1.1rc"));
  CHECK(v("1.0") == v("1.0+0"));
}

TEST_CASE("conda's test_version_order list sorts as listed", "[conda][version]") {
  // conda tests/models/test_version.py test_version_order; equal neighbours are left out.
  require_strictly_ordered({"0.4",        "0.4.1a.vc11", "0.4.1.rc",  "0.4.1.vc11", "0.4.1",
                            "0.5*",       "0.5a1",       "0.5b3",     "0.5C1",      "0.5z",
                            "0.5za",      "0.5",         "0.5_5",     "0.9.6",      "0.960923",
                            "1.0",        "1.0.4a3",     "1.0.4b1",   "1.0.4",      "1.1dev1",
                            "1.1_",       "1.1a1",       "1.1.dev1",  "1.1.a1",     "1.1",
                            "1.1.post1",  "1.1.1dev1",   "1.1.1rc1",  "1.1.1",      "1.1.1post1",
                            "1.1post1",   "2g6",         "2.0b1pr0",  "2.2be.ta29", "2.2be5ta29",
                            "2.2beta29",  "2.2.0.1",     "3.1.1.6",   "3.2.p.r0",   "3.2.pr0",
                            "3.2.pr.1",   "5.5.kw",      "11g",       "14.3.1",     "14.3.1.post26.g9d75ca2",
                            "1996.07.12", "1!0.4.1",     "1!3.1.1.6", "2!0.4.1"});
  CHECK(v("0.4") == v("0.4.0"));
  CHECK(v("0.5_5") == v("0.5-5"));
  CHECK(v("0.4.a1") == v("0.4.0a1"));
  CHECK(v("0.4") != v("0.4.1"));
  CHECK(v("0.4.a1") != v("0.4.1a1"));
  CHECK(v("  0.4.rc  ") == v("0.4.RC"));
}

TEST_CASE("openssl's letter versions sort after the trailing-underscore release", "[conda][version]") {
  // conda tests/models/test_version.py test_openssl_convention.
  require_strictly_ordered({"1.0.1dev", "1.0.1_", "1.0.1a", "1.0.1b", "1.0.1c", "1.0.1d", "1.0.1r", "1.0.1rc",
                            "1.0.1rc1", "1.0.1rc2", "1.0.1s", "1.0.1", "1.0.1post.a", "1.0.1post.b",
                            "1.0.1post.z", "1.0.1post.za", "1.0.2"});
}

TEST_CASE("PEP 440 versions keep their order as conda versions", "[conda][version]") {
  // conda tests/models/test_version.py test_pep440 (itself from packaging's tests).
  std::vector<std::string> versions = {"1.0a1",
                                       "1.0a2.dev456",
                                       "1.0a12.dev456",
                                       "1.0a12",
                                       "1.0b1.dev456",
                                       "1.0b2",
                                       "1.0b2.post345.dev456",
                                       "1.0b2.post345",
                                       "1.0c1.dev456",
                                       "1.0c1",
                                       "1.0c3",
                                       "1.0rc2",
                                       "1.0.dev456",
                                       "1.0",
                                       "1.0.post456.dev34",
                                       "1.0.post456",
                                       "1.1.dev1",
                                       "1.2.r32+123456",
                                       "1.2.rev33+123456",
                                       "1.2+abc",
                                       "1.2+abc123def",
                                       "1.2+abc123",
                                       "1.2+123abc",
                                       "1.2+123abc456",
                                       "1.2+1234.abc",
                                       "1.2+123456"};
  std::vector<std::string> with_epoch = versions;
  for (const auto& s : versions) {
    with_epoch.push_back("1!" + s);
  }
  require_strictly_ordered(with_epoch);
  require_strictly_ordered({"0.3.0.dev", "0.3.3"}); // test_hexrd
}

TEST_CASE("dev is below every other string and post above everything", "[conda][version]") {
  CHECK(v("1.0dev") < v("1.0_"));
  CHECK(v("1.0dev") < v("1.0a"));
  CHECK(v("1.0*") < v("1.0dev")); // conda: '*' < 'DEV' < '_' < 'a' < number
  CHECK(v("1.0post") > v("1.0.99999"));
  CHECK(v("1.0post") > v("1.0z"));
  CHECK(v("1.0POST") == v("1.0post"));
  CHECK(v("1.0DEV1") == v("1.0dev1"));
  CHECK(v("1.0devx") > v("1.0dev")); // "devx" is a plain string, not dev
}

TEST_CASE("equal versions hash alike", "[conda][version]") {
  const std::vector<std::vector<std::string>> classes = {
      {"1.1", "1.1.0", "1.1.0.0", "0!1.1", "1.1+0", "1.01"},
      {"1.1.0rc", "1.1.rc", "1.1.0RC"},
      {"1.0-5", "1.0.5", "1.0_5"},
      {"1.1.post1", "1.1.0post1"},
      {"0", "0.0", "0!0"}};
  std::unordered_set<std::size_t> hashes;
  for (const auto& cls : classes) {
    for (const auto& s : cls) {
      INFO(s);
      CHECK(v(s) == v(cls[0]));
      CHECK(v(s).hash() == v(cls[0]).hash());
      CHECK(std::hash<Version>()(v(s)) == v(s).hash());
    }
    hashes.insert(v(cls[0]).hash());
  }
  CHECK(hashes.size() == classes.size());
  CHECK(Version().hash() == v("0").hash());
}

TEST_CASE("the prefix test behind =1.2 and 1.2.*", "[conda][version]") {
  // conda tests/models/test_version.py test_version_order's startswith checks.
  CHECK(v("0.4.1").starts_with(v("0")));
  CHECK(v("0.4.1").starts_with(v("0.4")));
  CHECK(v("0.4.1p1").starts_with(v("0.4")));
  CHECK(v("0.4.1p1").starts_with(v("0.4.1p")));
  CHECK_FALSE(v("0.4.1p1").starts_with(v("0.4.1q1")));
  CHECK_FALSE(v("0.4").starts_with(v("0.4.1")));
  CHECK(v("0.4.1+1.3").starts_with(v("0.4.1")));
  CHECK(v("0.4.1+1.3").starts_with(v("0.4.1+1")));
  CHECK_FALSE(v("0.4.1").starts_with(v("0.4.1+1.3")));
  CHECK_FALSE(v("0.4.1+1").starts_with(v("0.4.1+1.3")));
  // conda.md §3.3: =1.2 matches 1.2, 1.2.7 and 1.2rc1 but not 1.20; =1.0a matches 1.0ab.
  CHECK(v("1.2").starts_with(v("1.2")));
  CHECK(v("1.2.7").starts_with(v("1.2")));
  CHECK(v("1.2rc1").starts_with(v("1.2")));
  CHECK_FALSE(v("1.20").starts_with(v("1.2")));
  CHECK(v("1.0ab").starts_with(v("1.0a")));
  CHECK(v("1.0").starts_with(v("1.0.0")));
  CHECK_FALSE(v("1.0.1").starts_with(v("1.0.0")));
  CHECK_FALSE(v("2!1.2").starts_with(v("1.2")));
}

TEST_CASE("invalid versions are errors at the offending byte", "[conda][version]") {
  struct Case {
    std::string text;
    std::size_t offset;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", 0, "empty version"},
      {"   ", 3, "empty version"},
      {"3.5&1", 3, "invalid character '&' in a version"},
      {"5.5++", 4, "a version has at most one '+' (the local version separator)"},
      {"5.5..mw", 4, "empty segment before '.'"},
      {"1._2", 2, "empty segment before '_'"},
      {".1", 0, "empty segment before '.'"},
      {"1.", 2, "empty segment at the end"},
      {"!", 0, "the epoch before '!' must be a number"},
      {"a!1.0", 0, "the epoch before '!' must be a number"},
      {"a!b!1.0", 0, "the epoch before '!' must be a number"},
      {"1!2!3", 3, "a version has at most one '!' (the epoch separator)"},
      {"1!", 2, "missing version after '!'"},
      {"+1.2", 0, "missing version before '+'"},
      {"1.2+", 4, "missing local version after '+'"},
      {"1.2-3_4", 3, "a version can't have both '-' and '_'"},
      {" 1.0 2", 4, "invalid character ' ' in a version"},
      {"1.0\x01", 3, "invalid character '\\x01' in a version"},
      {"1.72057594037927936", 2, "the number '72057594037927936' is too large (at most 2^56-1)"},
      {std::string(129, '1'), 128, "a version is at most 128 characters"},
  };
  for (const auto& c : cases) {
    const ParseError e = bad(c.text);
    INFO(c.text);
    CHECK(e.offset == c.offset);
    CHECK(e.message == c.message);
  }
  std::string longest;
  for (int i = 0; i < 63; ++i) {
    longest += "1.";
  }
  longest += "12";
  CHECK(v(longest).str().size() == 128);
  CHECK(v("1.72057594037927935").str() == "1.72057594037927935");
}

TEST_CASE("odd but valid versions parse as conda parses them", "[conda][version]") {
  CHECK(v("1.0.1_") < v("1.0.1a"));  // the openssl trick
  CHECK(v("1.0.1-") == v("1.0.1_")); // '-' reads as '_' when the text has no '_'
  CHECK(v("1._") == v("1.0_"));      // a trailing '_' after a dot is a segment of its own
  CHECK(v("1.0.0*") < v("1.0.0"));   // '*' is a string, below numbers
  CHECK(v("1.2.3+4.5_6") == v("1.2.3+4.5.6"));
  CHECK(v("1.0a_") > v("1.0a"));
  CHECK(v("2023.01.05") == v("2023.1.5"));
  CHECK(v("20231231235959") > v("20231231235958"));
}

TEST_CASE("copies of versions with many runs stay equal", "[conda][version]") {
  const Version a = v("1!2.15.1_alpha+1.2.3h123");
  Version b = a; // heap-stored atoms
  CHECK(b == a);
  CHECK(b.str() == a.str());
  b = v("1.0");
  CHECK(b != a);
  b = a;
  CHECK(b == a);
  const Version c = std::move(b);
  CHECK(c == a);
}
