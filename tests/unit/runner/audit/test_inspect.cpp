#include "runner/audit/inspect.hpp"
#include "tests/unit/support/test_image_fixture.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

using namespace lockstep;
using namespace lockstep::oci;
using test::ImageOptions;
using test::LayoutWriter;

namespace {

// An image with a runtime config, a label that tries to drive the terminal, and an annotation.
struct InspectFixture {
  test::TempDirFixture tmp;
  LayoutWriter layout{tmp.dir() / "hello"};
  Descriptor manifest;

  InspectFixture() {
    ImageOptions opts;
    opts.layer_media_type = std::string(k_media_layer_gzip);
    opts.edit_config = [](json& c) {
      c["created"] = "2024-01-02T03:04:05Z";
      c["config"] = {{"Entrypoint", {"python", "/opt/train/main.py"}},
                     {"Env", {"PATH=/usr/bin", "NCCL_DEBUG=WARN"}},
                     {"WorkingDir", "/opt/train"},
                     {"User", "1000:1000"},
                     {"Labels", {{"org.example.team", "ml"}, {"evil", "a\x1b]0;pwned\x07z"}}}};
    };
    opts.edit_manifest = [](json& m) { m["annotations"] = {{"org.opencontainers.image.version", "1.0"}}; };
    manifest = LayoutWriter::tagged(layout.image({std::string(2048, 'a'), "b"}, opts), "v1");
    layout.write_index({manifest});
  }
};

} // namespace

TEST_CASE("inspect --json reports the image as one stable object", "[inspect]") {
  InspectFixture f;
  std::string ref = "oci:" + f.layout.dir().string();
  auto summary = runner::inspect_image(ref);
  REQUIRE(summary);
  json j = runner::summary_to_json(*summary);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) {
    keys.push_back(k);
  }
  CHECK(keys == std::vector<std::string>{"annotations", "config", "config_digest", "created", "layers",
                                         "manifest_digest", "manifest_media_type", "platform", "reference",
                                         "synthesized_manifest", "total_size"});
  CHECK(j["reference"] == ref);
  CHECK(j["manifest_digest"] == f.manifest.digest.str());
  CHECK(j["manifest_media_type"] == k_media_manifest);
  CHECK(j["synthesized_manifest"] == false);
  CHECK(j["platform"] == "linux/amd64");
  CHECK(j["config_digest"] == summary->image.manifest.config.digest.str());
  CHECK(j["created"] == "2024-01-02T03:04:05Z");
  CHECK(j["config"]["Entrypoint"] == json({"python", "/opt/train/main.py"}));
  CHECK(j["annotations"] == json({{"org.opencontainers.image.version", "1.0"}}));
  REQUIRE(j["layers"].size() == 2);
  CHECK(j["layers"][0] == json({{"media_type", k_media_layer_gzip},
                                {"digest", sha256_of(std::string(2048, 'a')).str()},
                                {"size", 2048},
                                {"diff_id", sha256_of(std::string(2048, 'a')).str()}}));
  CHECK(j["total_size"] == 2049);
}

TEST_CASE("inspect's text output lists config, annotations and a layer table", "[inspect]") {
  InspectFixture f;
  std::string ref = "oci:" + f.layout.dir().string() + ":v1";
  auto summary = runner::inspect_image(ref);
  REQUIRE(summary);
  std::string a = sha256_of(std::string(2048, 'a')).str();
  std::string b = sha256_of("b").str();
  std::string expected = fmt::format(
      R"(Reference:        {ref}
Name:             v1
Manifest digest:  {manifest}
Media type:       application/vnd.oci.image.manifest.v1+json
Platform:         linux/amd64
Created:          2024-01-02T03:04:05Z
Config digest:    {config}
Entrypoint:       ["python","/opt/train/main.py"]
Cmd:              -
Env:              PATH=/usr/bin
                  NCCL_DEBUG=WARN
Workdir:          /opt/train
User:             1000:1000
Labels:           evil=a\x1b]0;pwned\x07z
                  org.example.team=ml
Annotations:      org.opencontainers.image.version=1.0
Layers:
    #  TYPE            SIZE  DIGEST                                                                   DIFF ID
    1  tar+gzip     2.0 KiB  {a}  {a}
    2  tar+gzip         1 B  {b}  {b}
Total size:       2.0 KiB in 2 layers
)",
      fmt::arg("ref", ref), fmt::arg("manifest", f.manifest.digest.str()),
      fmt::arg("config", summary->image.manifest.config.digest.str()), fmt::arg("a", a), fmt::arg("b", b));
  CHECK(runner::summary_to_text(*summary) == expected);
}

TEST_CASE("inspect passes selection options and reports errors from the image", "[inspect]") {
  InspectFixture f;
  std::string ref = "oci:" + f.layout.dir().string();
  SelectOptions pin;
  pin.digest = sha256_of("other");
  auto r = runner::inspect_image(ref + ":v1", pin);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == fmt::format("{}:v1: manifest digest is {}, but the spec pins {}", ref,
                                         f.manifest.digest.str(), pin.digest->str()));
  // A bare layout directory is the same image as oci:DIR (one IMAGE grammar for every command).
  auto bare = runner::inspect_image(f.layout.dir().string() + "/", SelectOptions{});
  REQUIRE(bare);
  CHECK(bare->image.manifest_digest == f.manifest.digest);
  // Something that is no image is refused.
  auto bad = runner::inspect_image((f.layout.dir() / "oci-layout").string());
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == ExitCode::invalid_input);
  CHECK_THAT(bad.error().message, Catch::Contains("is not an image"));
  // A root directory is an image, but not one inspect shows.
  auto root = runner::inspect_image("dir:" + f.layout.dir().string());
  REQUIRE_FALSE(root);
  CHECK(root.error().code == ExitCode::invalid_input);
  CHECK(root.error().message ==
        "'dir:" + f.layout.dir().string() +
            "' is a root directory: inspect shows an OCI image's manifest, config and "
            "layers (for what any image holds, use 'lockstep verify' or 'lockstep diff')");
}

TEST_CASE("layer media types have short forms for the table", "[inspect]") {
  CHECK(runner::short_media_type(std::string(k_media_layer_tar)) == "tar");
  CHECK(runner::short_media_type(std::string(k_media_layer_zstd)) == "tar+zstd");
  CHECK(runner::short_media_type(std::string(k_docker_layer_gzip)) == "tar+gzip (docker)");
  CHECK(runner::short_media_type("application/x-unknown") == "application/x-unknown");
}
