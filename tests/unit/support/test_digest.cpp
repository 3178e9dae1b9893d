#include "support/codec/digest.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;

TEST_CASE("sha256 of known strings", "[digest]") {
  CHECK(sha256_of("").str() == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_of("{}").str() == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
}

TEST_CASE("digest parsing is strict", "[digest]") {
  std::string good = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";
  REQUIRE(Digest::parse(good));
  CHECK(Digest::parse(good)->hex().size() == 64);

  struct Case {
    std::string text;
    std::string message;
  };
  std::vector<Case> cases = {
      {"44136fa355b3678a", "invalid digest '44136fa355b3678a': expected 'sha256:<64 hex digits>'"},
      {"md5:abc", "invalid digest 'md5:abc': unsupported algorithm 'md5' (sha256 and sha512 are supported)"},
      {"sha256:../../etc/passwd",
       "invalid digest 'sha256:../../etc/passwd': sha256 needs exactly 64 lowercase hex digits"},
      {"sha256:44136FA355B3678A1146AD16F7E8649E94FB4FC21FE77E8310C060F61CAAFF8A",
       "invalid digest 'sha256:44136FA355B3678A1146AD16F7E8649E94FB4FC21FE77E8310C060F61CAAFF8A': sha256 "
       "needs "
       "exactly 64 lowercase hex digits"},
      {"sha256:abc", "invalid digest 'sha256:abc': sha256 needs exactly 64 lowercase hex digits"},
  };
  for (const auto& c : cases) {
    auto r = Digest::parse(c.text);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == c.message);
    CHECK(r.error().code == ExitCode::invalid_input);
  }
}
