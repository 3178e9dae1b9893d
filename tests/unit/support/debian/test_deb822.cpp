#include "support/debian/deb822.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace lockstep;

TEST_CASE("deb822 paragraphs, fields and continuation lines", "[debian]") {
  const char* text = "Package: libc6\n"
                     "Version: 2.36-9+deb12u4\n"
                     "Depends: libgcc-s1\n"
                     "Description: GNU C Library: Shared libraries\n"
                     " Contains the standard libraries.\n"
                     " .\n"
                     "\n"
                     "# a comment\n"
                     "Package: zlib1g\r\n"
                     "SHA256:\n"
                     " abc 12 main/binary-amd64/Packages\n"
                     "  \t\n"
                     "\n";
  auto paragraphs = parse_deb822(text, "Packages");
  REQUIRE(paragraphs);
  REQUIRE(paragraphs->size() == 2);
  const auto& libc = (*paragraphs)[0];
  CHECK(libc.line == 1);
  CHECK(*libc.find("package") == "libc6");
  CHECK(*libc.find("Description") == "GNU C Library: Shared libraries\nContains the standard libraries.\n.");
  CHECK(libc.find("Pre-Depends") == nullptr);
  const auto& zlib = (*paragraphs)[1];
  CHECK(zlib.line == 9);
  CHECK(*zlib.find("Package") == "zlib1g");
  CHECK(*zlib.find("SHA256") == "\nabc 12 main/binary-amd64/Packages");
}

TEST_CASE("Malformed deb822 is refused with the line", "[debian][errors]") {
  auto message = [](const char* text) {
    auto r = parse_deb822(text, "Release");
    REQUIRE_FALSE(r);
    return r.error().message;
  };
  CHECK(message(" continued\n") == "Release:1: a continuation line before any field");
  CHECK(message("Package: a\nnot a field\n") == "Release:2: expected 'Field: value', found 'not a field'");
  CHECK(message("Package: a\npackage: b\n") == "Release:2: field 'package' appears twice in one paragraph");
  CHECK(message("Bad Name: x\n") == "Release:1: invalid field name 'Bad Name'");
}

TEST_CASE("Relationship fields: groups, alternatives, versions, qualifiers", "[debian]") {
  auto field = parse_relation_field("libc6 (>= 2.34), libgcc-s1 (>= 3.0) | libgcc1, python3:any (<< 3.12~), "
                                    "default-mta | mail-transport-agent,"
                                    " libfoo [amd64] <!nocheck>");
  REQUIRE(field);
  REQUIRE(field->size() == 5);
  CHECK((*field)[0][0].str() == "libc6 (>= 2.34)");
  REQUIRE((*field)[1].size() == 2);
  CHECK((*field)[1][1].name == "libgcc1");
  CHECK_FALSE((*field)[1][1].relation);
  CHECK((*field)[2][0].arch_qualifier == "any");
  CHECK((*field)[2][0].relation == VersionRelation::earlier);
  CHECK((*field)[2][0].version->str() == "3.12~");
  CHECK((*field)[4][0].restrictions == "[amd64] <!nocheck>");
  CHECK(parse_relation_field("")->empty());
  CHECK(parse_relation_field("a1 (=1.0),")->size() == 1);
}

TEST_CASE("Malformed relationship fields name the bad part", "[debian][errors]") {
  auto message = [](const char* text) {
    auto r = parse_relation_field(text);
    REQUIRE_FALSE(r);
    return r.error().message;
  };
  CHECK(message("libc6 (>= 2.34") == "'libc6 (>= 2.34': a version constraint must be closed with ')'");
  CHECK(message("libc6 (=> 2.34)") ==
        "'libc6 (=> 2.34)': unknown version relation '=>' (expected <<, <=, =, >= or >>)");
  CHECK(message("libc6 (>= abc)") ==
        "'libc6 (>= abc)': version 'abc': the upstream part 'abc' must start with a digit");
  CHECK(message("a1, , b1") == "empty entry between commas in 'a1, , b1'");
  CHECK(message("a1 | ") == "empty package in relationship ' '");
  CHECK(message("Libc6") == "'Libc6': 'Libc6' is not a valid package name");
  CHECK(message("python3:") == "'python3:': empty architecture after ':'");
}

TEST_CASE("This machine's dpkg status database parses, every version and relationship field too",
          "[debian][peer]") {
  const std::string text = test::slurp("/var/lib/dpkg/status");
  REQUIRE(!text.empty());
  auto paragraphs = parse_deb822(text, "/var/lib/dpkg/status");
  REQUIRE(paragraphs);
  CHECK(paragraphs->size() > 100);
  std::size_t relations = 0;
  for (const auto& p : *paragraphs) {
    const std::string* name = p.find("Package");
    REQUIRE(name != nullptr);
    INFO(*name);
    if (const std::string* version = p.find("Version")) {
      CHECK(DebianVersion::parse(*version));
    }
    for (const char* field :
         {"Depends", "Pre-Depends", "Recommends", "Provides", "Conflicts", "Breaks", "Replaces"}) {
      if (const std::string* value = p.find(field)) {
        auto parsed = parse_relation_field(*value);
        CHECK(parsed);
        relations += parsed ? parsed->size() : 0;
      }
    }
  }
  CHECK(relations > 100);
}
