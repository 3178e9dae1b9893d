#include "support/oci/registry_ref.hpp"

#include <catch2/catch.hpp>

using lockstep::oci::RegistryRef;

TEST_CASE("short names normalise as Docker does", "[registry_ref]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"debian:bookworm", "docker.io/library/debian:bookworm"},
      {"debian", "docker.io/library/debian:latest"},
      {"team/app", "docker.io/team/app:latest"},
      {"index.docker.io/debian", "docker.io/library/debian:latest"},
      {"registry-1.docker.io/team/app:v1", "docker.io/team/app:v1"},
      {"localhost/app", "localhost/app:latest"},
      {"localhost:5000/a/b/c:v2", "localhost:5000/a/b/c:v2"},
      {"Registry.Lab:5000/team/app", "registry.lab:5000/team/app:latest"},
      {"nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io/nvidia/pytorch:24.05-py3"},
  };
  for (const auto& [text, want] : cases) {
    INFO(text);
    auto ref = RegistryRef::parse(text);
    REQUIRE(ref);
    CHECK(ref->str() == want);
    CHECK(RegistryRef::parse(ref->str())->str() == want);
  }
}

TEST_CASE("a digest pins the manifest and is what the API is asked for", "[registry_ref]") {
  const std::string hex(64, 'a');
  auto ref = RegistryRef::parse("127.0.0.1:5000/app@sha256:" + hex);
  REQUIRE(ref);
  CHECK(ref->tag.empty());
  CHECK(ref->api_reference() == "sha256:" + hex);
  CHECK(ref->str() == "127.0.0.1:5000/app@sha256:" + hex);
  auto both = RegistryRef::parse("app:v1@sha256:" + hex);
  REQUIRE(both);
  CHECK(both->tag == "v1");
  CHECK(both->api_reference() == "sha256:" + hex);
  CHECK(RegistryRef::parse("debian")->api_host() == "registry-1.docker.io");
  CHECK(RegistryRef::parse("ghcr.io/x/y")->api_host() == "ghcr.io");
}

TEST_CASE("malformed registry references are refused saying which part is wrong", "[registry_ref]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty registry reference: expected [HOST[:PORT]/]REPO[:TAG][@sha256:DIGEST]"},
      {"Team/App", "invalid image reference 'Team/App': repository names must be lower case"},
      {"app@sha256:xyz",
       "invalid image reference 'app@sha256:xyz': 'sha256:xyz' is not a sha256 digest (sha256: "
       "and 64 lower-case hex digits)"},
      {"app@md5:d41d8cd98f00b204e9800998ecf8427e",
       "invalid image reference 'app@md5:d41d8cd98f00b204e9800998ecf8427e': "
       "'md5:d41d8cd98f00b204e9800998ecf8427e' "
       "is not a sha256 digest (sha256: and 64 lower-case hex digits)"},
      {"app:",
       "invalid image reference 'app:': '' is not a valid tag ([A-Za-z0-9_][A-Za-z0-9._-], at most 128 "
       "characters)"},
      {"host:99999999/app",
       "invalid image reference 'host:99999999/app': 'host:99999999' is not a registry host "
       "(HOST[:PORT])"},
      {"a//b", "invalid image reference 'a//b': 'a//b' is not a valid repository name (lower-case letters, "
               "digits and separators; expected [HOST[:PORT]/]REPO[:TAG][@sha256:DIGEST])"},
  };
  for (const auto& [text, want] : cases) {
    INFO(text);
    auto ref = RegistryRef::parse(text);
    REQUIRE_FALSE(ref);
    CHECK(ref.error().message == want);
  }
}
