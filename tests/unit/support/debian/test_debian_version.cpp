#include "support/debian/debian_version.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

DebianVersion v(const char* text) {
  auto parsed = DebianVersion::parse(text);
  REQUIRE(parsed);
  return *parsed;
}

// dpkg --compare-versions A OP B, the reference implementation.
bool dpkg_says(const std::string& a, const char* op, const std::string& b) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execlp("dpkg", "dpkg", "--compare-versions", a.c_str(), op, b.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) != 127);
  return WEXITSTATUS(status) == 0;
}

} // namespace

TEST_CASE("Debian versions parse into epoch, upstream and revision", "[debian]") {
  auto a = v("1:2.36-9+deb12u4");
  CHECK(a.epoch == 1);
  CHECK(a.upstream == "2.36");
  CHECK(a.revision == "9+deb12u4");
  CHECK(a.str() == "1:2.36-9+deb12u4");
  auto b = v("4.1.4-3+b1");
  CHECK(b.epoch == 0);
  CHECK(b.revision == "3+b1");
  auto c = v("2.18.3-1+cuda12.1");
  CHECK(c.upstream == "2.18.3");
  CHECK(c.revision == "1+cuda12.1");
  auto d = v("1.0-beta-2"); // the revision is after the last '-'
  CHECK(d.upstream == "1.0-beta");
  CHECK(d.revision == "2");
  CHECK(v("0:1.0").str() == "1.0");
  CHECK(v("20230101").revision.empty());
}

TEST_CASE("Malformed Debian versions are refused with the reason", "[debian][errors]") {
  auto message = [](const char* text) {
    auto r = DebianVersion::parse(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  CHECK(message("") == "empty version");
  CHECK(message("a:1.0") == "version 'a:1.0' has an invalid epoch 'a' (expected a number before ':')");
  CHECK(message(":1.0") == "version ':1.0' has an invalid epoch '' (expected a number before ':')");
  CHECK(message("1.0-") == "version '1.0-' has an empty revision after '-'");
  CHECK(message("1:-1") == "version '1:-1' has an empty upstream part");
  CHECK(message("v1.0") == "version 'v1.0': the upstream part 'v1.0' must start with a digit");
  CHECK(message("1.0 beta") ==
        "version '1.0 beta' has an invalid character ' ' (allowed: letters, digits and . + ~ - :)");
}

TEST_CASE("Debian versions order as dpkg orders them", "[debian]") {
  CHECK(v("1.0~rc1") < v("1.0"));
  CHECK(v("1.0") < v("1.0+b1"));
  CHECK(v("1.0") < v("1.0a"));
  CHECK(v("1.0~~") < v("1.0~"));
  CHECK(v("1.9") < v("1.10"));
  CHECK(v("1.01") == v("1.1"));
  CHECK(v("1:0.1") > v("9.9"));
  CHECK(v("2.36-9") < v("2.36-9+deb12u4"));
  CHECK(v("1.0-1") < v("1.0-1.1"));
  CHECK(satisfies(v("4.1.4-3"), VersionRelation::later_equal, v("4.1")));
  CHECK_FALSE(satisfies(v("4.1.4-3"), VersionRelation::earlier, v("4.1.4")));
  CHECK(satisfies(v("2.0~beta"), VersionRelation::earlier, v("2.0")));
  CHECK(satisfies(v("1.0"), VersionRelation::equal, v("0:1.00")));
}

TEST_CASE("Every pair of a version table compares like dpkg --compare-versions", "[debian][peer]") {
  const std::vector<std::string> table = {"0",
                                          "0.1",
                                          "1.0~rc1",
                                          "1.0~~",
                                          "1.0~",
                                          "1.0",
                                          "1.0-0",
                                          "1.0-1",
                                          "1.0-1.1",
                                          "1.0-1+b1",
                                          "1.0+dfsg-1",
                                          "1.0a",
                                          "1.0.1",
                                          "1.9",
                                          "1.10",
                                          "1.10~beta2",
                                          "2:0.1",
                                          "1:9.9",
                                          "12.1.105-1",
                                          "2.18.3-1+cuda12.1",
                                          "2.18.5-1+cuda12.2",
                                          "3.11.2-6+deb12u4",
                                          "4.1.4-3+b1",
                                          "4.1.4-3",
                                          "5.0.0~rc12-1"};
  for (std::size_t i = 0; i < table.size(); ++i) {
    for (std::size_t j = i + 1; j < table.size(); ++j) {
      const auto& a = table[i];
      const auto& b = table[j];
      INFO(a << " vs " << b);
      auto ours = v(a.c_str()) <=> v(b.c_str());
      CHECK((ours < 0) == dpkg_says(a, "lt", b));
      CHECK((ours == 0) == dpkg_says(a, "eq", b));
    }
  }
}

TEST_CASE("Version relations parse, including the obsolete < and >", "[debian]") {
  CHECK(parse_version_relation("<<").value() == VersionRelation::earlier);
  CHECK(parse_version_relation("<").value() == VersionRelation::earlier_equal);
  CHECK(parse_version_relation(">").value() == VersionRelation::later_equal);
  CHECK(version_relation_name(VersionRelation::later) == ">>");
  auto bad = parse_version_relation("=>");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "unknown version relation '=>' (expected <<, <=, =, >= or >>)");
}
