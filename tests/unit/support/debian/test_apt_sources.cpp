// apt source lists as base images carry them: the one-line and the deb822 formats.
#include "support/debian/apt_sources.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;

TEST_CASE("One-line source lists: options, comments, flat repositories", "[apt][sources]") {
  auto r =
      parse_sources_list("# Ubuntu's\n"
                         "deb http://archive.ubuntu.com/ubuntu/ jammy main restricted # trailing\n"
                         "\n"
                         "deb-src http://archive.ubuntu.com/ubuntu/ jammy main\n"
                         "deb [arch=amd64 signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
                         "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/ /\n",
                         "sources.list");
  REQUIRE_OK(r);
  REQUIRE(r->size() == 3);
  CHECK((*r)[0].type == "deb");
  CHECK((*r)[0].uri == "http://archive.ubuntu.com/ubuntu/");
  CHECK((*r)[0].suite == "jammy");
  CHECK((*r)[0].components == std::vector<std::string>{"main", "restricted"});
  CHECK((*r)[0].at == 2);
  CHECK((*r)[1].type == "deb-src");
  CHECK((*r)[2].signed_by == "/usr/share/keyrings/cuda-archive-keyring.gpg");
  CHECK((*r)[2].suite == "/");
  CHECK((*r)[2].components.empty());
  CHECK((*r)[2].line == "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
                        "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/ /");

  auto bad = parse_sources_list("deb http://x\n", "a.list");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "a.list:1: 'deb http://x' needs a URI and a suite");
  bad = parse_sources_list("\nrpm http://x y\n", "a.list");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.starts_with("a.list:2: 'rpm http://x y' is not a source line"));
  bad = parse_sources_list("deb [signed-by=/k http://x y\n", "a.list");
  REQUIRE_FALSE(bad);
}

TEST_CASE("deb822 source lists: every type, URI and suite; disabled stanzas skipped", "[apt][sources]") {
  auto r = parse_sources_deb822("Types: deb\n"
                                "URIs: http://deb.debian.org/debian\n"
                                "Suites: bookworm bookworm-updates\n"
                                "Components: main\n"
                                "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
                                "\n"
                                "Types: deb\n"
                                "URIs: http://example.invalid/\n"
                                "Suites: x\n"
                                "Enabled: no\n",
                                "debian.sources");
  REQUIRE_OK(r);
  REQUIRE(r->size() == 2);
  CHECK((*r)[1].suite == "bookworm-updates");
  CHECK((*r)[1].line == "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                        "http://deb.debian.org/debian bookworm-updates main");
  auto bad = parse_sources_deb822("Types: deb\nSuites: x\n", "b.sources");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "b.sources:1: a source stanza needs Types, URIs and Suites");
}
