// SLSA v1 provenance statements (envspec/documents/provenance.hpp).
#include "envspec/documents/provenance.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace lockstep;
using namespace lockstep::envspec;

namespace {

Lock small_lock() {
  Lock lock;
  LockedArtifact deb;
  deb.kind = "deb";
  deb.name = "attr";
  deb.version = "1:2.5.1-4";
  deb.arch = "amd64";
  deb.sha256 = sha256_of("attr");
  deb.url = "http://deb.debian.org/debian/pool/main/a/attr/attr_2.5.1-4_amd64.deb";
  LockedArtifact git;
  git.kind = "git";
  git.name = "https://example.org/app.git";
  git.version = std::string(40, 'a');
  git.sha256 = sha256_of("tree");
  lock.artifacts = {deb, git};
  return lock;
}

ProvenanceInputs inputs() {
  ProvenanceInputs in;
  in.name = "team/app";
  in.subject = sha256_of("manifest");
  in.spec_digest = sha256_of("spec");
  in.lock = sha256_of("lock");
  in.platform = "linux/amd64";
  in.version = "0.1.0";
  in.compression = "gzip";
  return in;
}

} // namespace

TEST_CASE("a provenance statement names the image, the spec, the lock and every input", "[provenance]") {
  const Lock lock = small_lock();
  const std::string text = render_provenance(&lock, inputs());
  CHECK(text == render_provenance(&lock, inputs())); // deterministic
  const auto j = nlohmann::json::parse(text);
  CHECK(j["_type"] == "https://in-toto.io/Statement/v1");
  CHECK(j["predicateType"] == "https://slsa.dev/provenance/v1");
  CHECK(j["subject"][0]["digest"]["sha256"] == sha256_of("manifest").hex());
  CHECK(j["predicate"]["runDetails"]["builder"]["id"] == "pkg:generic/lockstep@0.1.0");
  const auto& deps = j["predicate"]["buildDefinition"]["resolvedDependencies"];
  REQUIRE(deps.size() == 2);
  CHECK(deps[0]["name"] == "deb:attr=1:2.5.1-4:amd64");
  CHECK(deps[1]["uri"] == "git+https://example.org/app.git@" + std::string(40, 'a'));

  auto facts = read_provenance(text, "p");
  REQUIRE(facts);
  CHECK(facts->subject == sha256_of("manifest"));
  CHECK(facts->lock == sha256_of("lock"));
  CHECK(facts->dependencies == lock_dependencies(lock));
}

TEST_CASE("statements that are not SLSA v1 provenance are refused", "[provenance]") {
  CHECK_FALSE(read_provenance("{}", "p"));
  CHECK_FALSE(read_provenance(
      R"({"_type":"https://in-toto.io/Statement/v1","predicateType":"https://spdx.dev/Document"})", "p"));
  auto bad = read_provenance(
      R"({"_type":"https://in-toto.io/Statement/v1","predicateType":"https://slsa.dev/provenance/v1",)"
      R"("subject":[{"digest":{"sha256":"xyz"}}]})",
      "p");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == ExitCode::invalid_input);
}

TEST_CASE("an emulated build names the qemu-user interpreter among the builder's dependencies",
          "[provenance]") {
  const Lock lock = small_lock();
  ProvenanceInputs in = inputs();
  const auto builder = [&] {
    return nlohmann::json::parse(render_provenance(&lock, in))["predicate"]["runDetails"]["builder"];
  };
  CHECK_FALSE(builder().contains("builderDependencies")); // a native build names none
  in.platform = "linux/arm64";
  in.builder_dependencies.push_back(
      {"qemu-aarch64", "file:///usr/bin/qemu-aarch64-static", sha256_of("qemu")});
  const nlohmann::json deps = builder()["builderDependencies"];
  REQUIRE(deps.size() == 1);
  CHECK(deps[0]["name"] == "qemu-aarch64");
  CHECK(deps[0]["uri"] == "file:///usr/bin/qemu-aarch64-static");
  CHECK(deps[0]["digest"]["sha256"] == sha256_of("qemu").hex());
  CHECK(render_provenance(&lock, in) == render_provenance(&lock, in)); // deterministic
}
