// Staging an image onto the nodes (runner/launch/stage.hpp): the bundle and its digest checks, the
// placed copy, the tree, the result lines, and the fan-out through a stand-in rsh agent.
#include "runner/launch/stage.hpp"
#include "support/oci/image_source.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;

namespace {

// An OCI image made of a config and one layer, all in `store`.
StageImage small_image(const BlobStore& store, const std::string& layer_bytes) {
  BlobInfo layer = store.put(layer_bytes).value();
  BlobInfo config =
      store
          .put(R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[")" +
               layer.digest.str() + R"("]}})")
          .value();
  oci::Manifest m;
  m.media_type = "application/vnd.oci.image.manifest.v1+json";
  m.config = {"application/vnd.oci.image.config.v1+json", config.digest, config.size, {}, {}, {}, {}};
  m.layers.push_back({"application/vnd.oci.image.layer.v1.tar", layer.digest, layer.size, {}, {}, {}, {}});
  const std::string bytes = m.serialize();
  BlobInfo manifest = store.put(bytes).value();
  oci::StoredImage stored;
  stored.manifest = {m.media_type, manifest.digest, manifest.size, {}, {}, {}, {}};
  stored.blobs = {m.config, m.layers[0]};
  return stage_image_in_store(store, stored).value();
}

std::string bundle_of(const BlobStore& store, const StageImage& image) {
  std::string out;
  REQUIRE(write_bundle(store, image, [&out](const char* data, std::size_t size) -> Result<void> {
            out.append(data, size);
            return {};
          }).ok());
  return out;
}

// Feeds `bytes` in pieces of `step` bytes.
Result<StageImage> receive(const BlobStore& store, const std::string& bytes, std::size_t step) {
  BundleReader reader(store);
  for (std::size_t i = 0; i < bytes.size(); i += step) {
    LS_TRY(reader.feed(bytes.data() + i, std::min(step, bytes.size() - i)));
  }
  return reader.finish();
}

} // namespace

TEST_CASE("a bundle carries an OCI image's blobs into another store, where it is placed as a layout",
          "[stage]") {
  test::TempDirFixture tmp;
  BlobStore from = BlobStore::open(tmp.dir() / "from").value();
  BlobStore to = BlobStore::open(tmp.dir() / "to").value();
  const StageImage image = small_image(from, std::string(100000, 'L'));
  CHECK(image.blobs().size() == 3);
  const std::string bytes = bundle_of(from, image);
  CHECK(bytes.starts_with("lockstep-stage 1\nimage oci " + image.digest().str() + "\n"));
  CHECK(bytes.ends_with("end\n"));
  for (std::size_t step : {std::size_t{1}, std::size_t{7}, bytes.size()}) {
    Result<StageImage> got = receive(to, bytes, step);
    REQUIRE(got.ok());
    CHECK(got->digest() == image.digest());
    CHECK(got->blobs().size() == 3);
  }
  for (const oci::Descriptor& d : image.blobs()) {
    CHECK(to.has(d.digest, d.size));
  }
  Result<std::string> placed = place_staged(to, receive(to, bytes, 4096).value());
  REQUIRE(placed.ok());
  CHECK(*placed == "oci:" + (to.root() / "images" / ("sha256-" + image.digest().hex())).string());
  Result<ImageArg> arg = parse_image_arg(*placed);
  REQUIRE(arg.ok());
  auto source = oci::ImageSource::open(arg->ref).value();
  Result<oci::OpenedImage> opened = source->resolve({});
  INFO((opened ? "" : opened.error().message));
  REQUIRE(opened.ok());
  CHECK(opened->manifest_digest == image.digest());
  CHECK(place_staged(to, image).value() == *placed); // again: left as it is
}

TEST_CASE("a damaged, truncated or foreign bundle is refused and its damaged blob never published",
          "[stage]") {
  test::TempDirFixture tmp;
  BlobStore from = BlobStore::open(tmp.dir() / "from").value();
  const StageImage image = small_image(from, std::string(100000, 'L'));
  const std::string bytes = bundle_of(from, image);

  BlobStore to = BlobStore::open(tmp.dir() / "to").value();
  std::string damaged = bytes;
  damaged[damaged.size() - 5000] ^= 0x01; // inside the layer
  Result<StageImage> r = receive(to, damaged, 4096);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK_THAT(r.error().message, Catch::Contains("blob " + image.blobs()[2].digest.str()) &&
                                    Catch::Contains("the copy was damaged on the way, refused"));
  CHECK_FALSE(to.has(image.blobs()[2].digest));
  CHECK(fs::is_empty(to.root() / "tmp"));

  r = receive(to, bytes.substr(0, bytes.size() - 10), 4096);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("ended early"));
  r = receive(to, "GET / HTTP/1.1\r\n", 4096);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("not a lockstep staging bundle"));
  r = receive(to, bytes + "x", 4096);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("after the end"));
  r = receive(to, "lockstep-stage 1\nimage oci " + image.digest().str() + "\nend\n", 4096);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("lacks the image"));
  r = receive(to,
              "lockstep-stage 1\nimage oci " + image.digest().str() +
                  "\nblob sha256:" + std::string(64, 'a') + " -1\n",
              4096);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("is not a size"));
  CHECK_FALSE(receive(to, "lockstep-stage 1\n" + std::string(5000, 'x') + "\n", 4096).ok()); // long line
}

TEST_CASE("a SIF travels as one blob and is run from the store where it lands", "[stage]") {
  test::TempDirFixture tmp;
  BlobStore from = BlobStore::open(tmp.dir() / "from").value();
  BlobStore to = BlobStore::open(tmp.dir() / "to").value();
  const fs::path sif = tmp.write("x.sif", std::string("SIF_MAGIC") + std::string(5000, 's'));
  Result<ImageArg> arg = parse_image_arg("sif:" + sif.string());
  REQUIRE(arg.ok());
  Result<StageImage> image = stage_image_of(*arg, from);
  REQUIRE(image.ok());
  CHECK(image->kind == StageImage::Kind::sif);
  CHECK(image->digest() == sha256_of_file(sif).value());
  CHECK(from.has(image->digest(), 5009));
  Result<StageImage> got = receive(to, bundle_of(from, *image), 100);
  REQUIRE(got.ok());
  CHECK(place_staged(to, *got).value() == "sif:" + to.blob_path(image->digest()).string());

  REQUIRE_FALSE(stage_image_of(parse_image_arg("dir:" + tmp.dir().string()).value(), from).ok());
}

TEST_CASE("the staging tree cuts the hosts into groups of the width; each group's first host forwards to the "
          "rest",
          "[stage]") {
  using Tree = std::vector<std::pair<std::string, std::vector<std::string>>>;
  CHECK(tree_children({"a", "b", "c"}, 2) == Tree{{"a", {"b"}}, {"c", {}}});
  CHECK(tree_children({"a", "b", "c"}, 1) == Tree{{"a", {"b", "c"}}});
  CHECK(tree_children({"a", "b", "c", "d", "e"}, 2) == Tree{{"a", {"b", "c"}}, {"d", {"e"}}});
  CHECK(tree_children({"a"}, 8) == Tree{{"a", {}}});
  CHECK(tree_children({}, 2).empty());
}

TEST_CASE("staging results are JSON lines, parsed strictly", "[stage]") {
  StagedNode n{"n1", true, "oci:/c/images/sha256-ab", "sha256:ab staged"};
  Result<StagedNode> back = staged_node_from_json(to_json_line(n));
  REQUIRE(back.ok());
  CHECK(*back == n);
  CHECK_FALSE(
      staged_node_from_json(R"({"stage":1,"node":"n1","ok":true,"image":"","detail":"","x":1})").ok());
  CHECK_FALSE(staged_node_from_json(R"({"stage":2,"node":"n1","ok":true,"image":"","detail":""})").ok());
  CHECK_FALSE(staged_node_from_json(R"({"stage":1,"node":"n1","ok":"yes","image":"","detail":""})").ok());
  CHECK_FALSE(staged_node_from_json(R"({"stage":1,"node":"","ok":true,"image":"","detail":""})").ok());
  CHECK_FALSE(staged_node_from_json("[1]").ok());
}

TEST_CASE("staging mends a preflight only when nothing but the image failed", "[stage]") {
  NodeReport ok{"n1", {{"image", Check::Status::ok, ""}, {"mpi", Check::Status::ok, ""}}, {}};
  NodeReport no_image{"n2", {{"image", Check::Status::fail, "missing"}, {"mpi", Check::Status::ok, ""}}, {}};
  NodeReport bad_mpi{"n3", {{"image", Check::Status::ok, ""}, {"mpi", Check::Status::fail, "5.0"}}, {}};
  CHECK(only_image_missing({ok, no_image}));
  CHECK_FALSE(only_image_missing({ok}));
  CHECK_FALSE(only_image_missing({ok, no_image, bad_mpi}));
}

TEST_CASE("the stream goes down the tree through the rsh agent; a host that isn't reached is named",
          "[stage]") {
  test::TempDirFixture tmp;
  BlobStore store = BlobStore::open(tmp.dir() / "store").value();
  const StageImage image = small_image(store, std::string(300000, 'L'));
  // A stand-in agent: keeps what it is sent for HOST, answers for HOST alone (it forwards nothing).
  const fs::path agent =
      tmp.write("agent", "#!/bin/sh\nhost=$1\ncat > \"" + tmp.dir().string() +
                             "/got-$host\"\nprintf '{\"stage\":1,\"node\":\"%s\",\"ok\":true,"
                             "\"image\":\"oci:/x\",\"detail\":\"fine\"}\\n' \"$host\"\n");
  fs::permissions(agent, fs::perms::owner_all);
  LaunchPlan plan;
  plan.launcher = Launcher::mpirun;
  StageFanout how;
  how.lockstep = "/opt/lockstep";
  how.agent = {agent.string()};
  std::vector<std::vector<std::string>> commands;
  Result<std::vector<StagedNode>> r = stage_to_nodes(plan, store, image, {"h1", "h2", "h3"}, how, commands);
  REQUIRE(r.ok());
  REQUIRE(r->size() == 3);
  CHECK((*r)[0] == StagedNode{"h1", true, "oci:/x", "fine"});
  CHECK((*r)[1].node == "h2");
  CHECK_FALSE((*r)[1].ok);
  CHECK_THAT((*r)[1].detail, Catch::Contains("not reached through h1"));
  CHECK((*r)[2] == StagedNode{"h3", true, "oci:/x", "fine"});
  const std::string bundle = bundle_of(store, image);
  CHECK(test::slurp(tmp.dir() / "got-h1") == bundle);
  CHECK(test::slurp(tmp.dir() / "got-h3") == bundle);
  REQUIRE(commands.size() == 2);
  CHECK(commands[0] ==
        std::vector<std::string>{agent.string(), "h1",
                                 "/opt/lockstep stage-receive --lockstep /opt/lockstep --width 2 "
                                 "--agent " +
                                     agent.string() + " --forward h2"});
}
