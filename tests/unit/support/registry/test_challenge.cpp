#include "support/registry/challenge.hpp"

#include <catch2/catch.hpp>

using lockstep::registry::parse_challenges;

TEST_CASE("a Bearer challenge gives realm, service and scope, quoted commas kept", "[challenge]") {
  auto c = parse_challenges(R"(Bearer realm="https://nvcr.io/proxy_auth?a=1,b=2",service="nvcr.io",)"
                            R"(scope="repository:nvidia/pytorch:pull,push")");
  REQUIRE(c);
  REQUIRE(c->size() == 1);
  CHECK(c->at(0).scheme == "bearer");
  CHECK(c->at(0).param("realm") == "https://nvcr.io/proxy_auth?a=1,b=2");
  CHECK(c->at(0).param("service") == "nvcr.io");
  CHECK(c->at(0).param("scope") == "repository:nvidia/pytorch:pull,push");
}

TEST_CASE("several challenges in one header, escapes and unquoted values", "[challenge]") {
  auto c = parse_challenges(
      R"(Basic realm="a \"quoted\" realm", Bearer realm=https://auth.example/token,error=invalid_token)");
  REQUIRE(c);
  REQUIRE(c->size() == 2);
  CHECK(c->at(0).scheme == "basic");
  CHECK(c->at(0).param("realm") == R"(a "quoted" realm)");
  CHECK(c->at(1).scheme == "bearer");
  CHECK(c->at(1).param("realm") == "https://auth.example/token");
  CHECK(c->at(1).param("error") == "invalid_token");
}

TEST_CASE("a malformed challenge is refused", "[challenge]") {
  auto c = parse_challenges(R"(Bearer realm="never closed)");
  REQUIRE_FALSE(c);
  CHECK(
      c.error().message ==
      R"(the registry sent a malformed WWW-Authenticate header (a quoted value is not closed): Bearer realm="never closed)");
  CHECK_FALSE(parse_challenges("Bearer @@@"));
}
