#include "support/oci/image_source.hpp"
#include "support/oci/tar_reader.hpp"
#include "tests/unit/support/test_image_fixture.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace lockstep;
using namespace lockstep::oci;
namespace fs = std::filesystem;
using test::ImageOptions;
using test::LayoutWriter;
using test::TarEntry;

namespace {

Result<OpenedImage> resolve_ref(const std::string& text, const SelectOptions& options = {}) {
  LS_TRY_ASSIGN(ImageRef ref, ImageRef::parse(text));
  LS_TRY_ASSIGN(auto source, ImageSource::open(ref));
  return source->resolve(options);
}

template <typename T> std::string error_of(const Result<T>& r) {
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

template <typename T> ExitCode code_of(const Result<T>& r) {
  REQUIRE_FALSE(r.ok());
  return r.error().code;
}

const std::string k_gzip_layer = std::string("\x1f\x8b\x08\x00", 4) + "pretend gzip";
const std::string k_zstd_layer = std::string("\x28\xb5\x2f\xfd", 4) + "pretend zstd";
const std::string k_tar_layer = "pretend tar";

} // namespace

// ---------------------------------------------------------------------------------------------
// ImageRef

TEST_CASE("image references name a transport, a path and an optional tag", "[image]") {
  using T = ImageRef::Transport;
  struct Case {
    std::string text;
    T transport;
    std::string path;
    std::string tag;
  };
  const std::vector<Case> cases = {
      {"oci:build/hello", T::oci_dir, "build/hello", ""},
      {"oci:build/hello:v1", T::oci_dir, "build/hello", "v1"},
      {"oci:/srv/a:b:latest", T::oci_dir, "/srv/a:b", "latest"},
      {"oci:/srv/a:b/c", T::oci_dir, "/srv/a:b/c", ""},             // what follows ':' has a '/'
      {"oci:/srv/x:not a tag", T::oci_dir, "/srv/x:not a tag", ""}, // not a valid tag
      {"oci-archive:hello.tar", T::oci_archive, "hello.tar", ""},
      {"oci-archive:/tmp/hello.tar:1.0_rc-2", T::oci_archive, "/tmp/hello.tar", "1.0_rc-2"},
      {"docker-archive:hello.tar", T::docker_archive, "hello.tar", ""},
      {"docker-archive:hello.tar:foo:bar", T::docker_archive, "hello.tar", "foo:bar"},
      {"docker-archive:hello.tar:foo", T::docker_archive, "hello.tar", "foo"},
      {"docker-archive:/x/h.tar:registry.example.com:5000/team/foo:v1", T::docker_archive, "/x/h.tar",
       "registry.example.com:5000/team/foo:v1"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    auto r = ImageRef::parse(c.text);
    REQUIRE(r);
    CHECK(r->transport == c.transport);
    CHECK(r->path == fs::path(c.path));
    CHECK(r->tag == c.tag);
    CHECK(r->str() == c.text);
  }
}

TEST_CASE("malformed image references are refused with the accepted forms", "[image]") {
  const std::string forms = "expected oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE, "
                            "docker://[HOST/]REPO[:TAG][@DIGEST] or oras://HOST/REPO[:TAG]";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/tmp/x", "invalid image reference '/tmp/x': " + forms},
      {"build/hello:v1", "invalid image reference 'build/hello:v1': " + forms},
      {"docker:busybox", "invalid image reference 'docker:busybox': " + forms},
      {"docker://BusyBox", "invalid image reference 'BusyBox': repository names must be lower case"},
      {"OCI:/tmp/x", "invalid image reference 'OCI:/tmp/x': " + forms},
      {"", "invalid image reference '': " + forms},
      {"oci:", "invalid image reference 'oci:': no path after 'oci:'"},
      {"oci::v1", "invalid image reference 'oci::v1': no path after 'oci:'"},
      {"oci-archive:", "invalid image reference 'oci-archive:': no path after 'oci-archive:'"},
      {"docker-archive::foo",
       "invalid image reference 'docker-archive::foo': no path after 'docker-archive:'"},
      {"oci:/tmp/x:", "invalid image reference 'oci:/tmp/x:': empty tag after ':'"},
      {"docker-archive:h.tar:Foo Bar",
       "invalid image reference 'docker-archive:h.tar:Foo Bar': 'Foo Bar' is not an image name (expected "
       "docker-archive:FILE[:NAME[:TAG]])"},
      {"docker-archive:h.tar:foo@sha256:" + std::string(64, 'a'),
       "invalid image reference 'docker-archive:h.tar:foo@sha256:" + std::string(64, 'a') +
           "': 'foo@sha256:" + std::string(64, 'a') +
           "' is not an image name (expected docker-archive:FILE[:NAME[:TAG]])"},
  };
  for (const auto& [text, message] : cases) {
    INFO(text);
    auto r = ImageRef::parse(text);
    CHECK(code_of(r) == ExitCode::invalid_input);
    CHECK(error_of(r) == message);
  }
}

// ---------------------------------------------------------------------------------------------
// OCI layout directories

TEST_CASE("an OCI layout with one image resolves to its verified manifest and config", "[image]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor m = layout.image({"layer one", "layer two"});
  layout.write_index({LayoutWriter::tagged(m, "latest")});

  auto image = resolve_ref("oci:" + layout.dir().string());
  REQUIRE(image);
  CHECK(image->manifest_digest == m.digest);
  CHECK(sha256_of(image->manifest_bytes) == m.digest);
  CHECK(image->manifest_media_type == k_media_manifest);
  REQUIRE(image->manifest.layers.size() == 2);
  CHECK(image->manifest.layers[0].digest == sha256_of("layer one"));
  CHECK(image->diff_ids == std::vector<Digest>{sha256_of("layer one"), sha256_of("layer two")});
  CHECK(sha256_of(image->config_bytes) == image->manifest.config.digest);
  CHECK(image->config["os"] == "linux");
  CHECK(image->platform == Platform{"linux", "amd64", ""});
  CHECK(image->ref_name == "latest");
  CHECK_FALSE(image->synthesized_manifest);

  SelectOptions arm;
  arm.platform = Platform{"linux", "arm64", ""};
  CHECK(error_of(resolve_ref("oci:" + layout.dir().string(), arm)) ==
        fmt::format("oci:{}: the image is for linux/amd64, not linux/arm64", layout.dir().string()));
}

TEST_CASE("a tag picks the image with that ref.name; SelectOptions.tag overrides the reference's",
          "[image]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor v1 = layout.image({"one"});
  Descriptor v2 = layout.image({"two"});
  layout.write_index({LayoutWriter::tagged(v1, "v1"), LayoutWriter::tagged(v2, "v2")});
  std::string dir = layout.dir().string();

  auto a = resolve_ref("oci:" + dir + ":v1");
  REQUIRE(a);
  CHECK(a->manifest_digest == v1.digest);
  CHECK(a->ref_name == "v1");

  SelectOptions by_option;
  by_option.tag = "v2";
  auto b = resolve_ref("oci:" + dir + ":v1", by_option);
  REQUIRE(b);
  CHECK(b->manifest_digest == v2.digest);

  auto missing = resolve_ref("oci:" + dir + ":v9");
  CHECK(error_of(missing) == "oci:" + dir + ":v9: no image tagged 'v9' (available: v1, v2)");
}

TEST_CASE("a digest pin selects a manifest and must agree with the tag", "[image]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor v1 = layout.image({"one"});
  Descriptor v2 = layout.image({"two"});
  layout.write_index({LayoutWriter::tagged(v1, "v1"), LayoutWriter::tagged(v2, "v2")});
  std::string dir = layout.dir().string();

  SelectOptions pin_v1;
  pin_v1.digest = v1.digest;
  auto match = resolve_ref("oci:" + dir + ":v1", pin_v1);
  REQUIRE(match);
  CHECK(match->manifest_digest == v1.digest);

  auto by_digest = resolve_ref("oci:" + dir, pin_v1);
  REQUIRE(by_digest);
  CHECK(by_digest->manifest_digest == v1.digest);
  CHECK(by_digest->ref_name == "v1");

  auto mismatch = resolve_ref("oci:" + dir + ":v2", pin_v1);
  CHECK(code_of(mismatch) == ExitCode::invalid_input);
  CHECK(error_of(mismatch) == fmt::format("oci:{}:v2: manifest digest is {}, but the spec pins {}", dir,
                                          v2.digest.str(), v1.digest.str()));

  SelectOptions pin_other;
  pin_other.digest = sha256_of("nothing");
  auto absent = resolve_ref("oci:" + dir, pin_other);
  CHECK(error_of(absent) == fmt::format("oci:{}: no manifest {} (available: {} (v1), {} (v2))", dir,
                                        sha256_of("nothing").str(), v1.digest.str(), v2.digest.str()));
}

TEST_CASE("several images and no tag is an error that lists the ref names", "[image]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor v1 = layout.image({"one"});
  Descriptor v2 = layout.image({"two"});
  Descriptor untagged = layout.image({"three"});
  untagged.platform.reset();
  layout.write_index({LayoutWriter::tagged(v1, "v1"), LayoutWriter::tagged(v2, "v2"), untagged});
  std::string dir = layout.dir().string();
  auto r = resolve_ref("oci:" + dir);
  CHECK(error_of(r) == fmt::format("oci:{} holds 3 images; choose one with oci:{}:TAG (available: v1, v2, {} "
                                   "(untagged))",
                                   dir, dir, untagged.digest.str()));

  layout.write_index({});
  CHECK(error_of(resolve_ref("oci:" + dir)) ==
        fmt::format("oci:{} holds no images (index.json lists none)", dir));
}

TEST_CASE("a nested index is descended by platform", "[image]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor amd = layout.image({"amd"});
  ImageOptions arm_opts;
  arm_opts.architecture = "arm64";
  arm_opts.variant = "v8";
  Descriptor arm = layout.image({"arm"}, arm_opts);
  ImageOptions ppc_opts;
  ppc_opts.architecture = "ppc64le";
  Descriptor ppc = layout.image({"ppc"}, ppc_opts);
  Descriptor index = layout.index_blob({amd, arm, ppc});
  layout.write_index({LayoutWriter::tagged(index, "multi")});
  std::string ref = "oci:" + layout.dir().string();

  auto dflt = resolve_ref(ref);
  REQUIRE(dflt);
  CHECK(dflt->manifest_digest == amd.digest);
  CHECK(dflt->ref_name == "multi");

  SelectOptions want_arm;
  want_arm.platform = Platform{"linux", "arm64", ""}; // no variant asked: arm64/v8 matches
  auto a = resolve_ref(ref + ":multi", want_arm);
  REQUIRE(a);
  CHECK(a->manifest_digest == arm.digest);
  CHECK(a->platform == Platform{"linux", "arm64", "v8"});

  SelectOptions pin_index; // a pin may name the index the manifest was reached through
  pin_index.digest = index.digest;
  pin_index.platform = Platform{"linux", "ppc64le", ""};
  auto p = resolve_ref(ref + ":multi", pin_index);
  REQUIRE(p);
  CHECK(p->manifest_digest == ppc.digest);

  SelectOptions want_s390x;
  want_s390x.platform = Platform{"linux", "s390x", ""};
  auto none = resolve_ref(ref, want_s390x);
  CHECK(error_of(none) ==
        fmt::format("{}: no image for platform linux/s390x in index {} (available: linux/amd64, "
                    "linux/arm64/v8, linux/ppc64le)",
                    ref, index.digest.str()));
}

TEST_CASE("hostile digests in index.json are refused before they become paths", "[image][hostile]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  std::string dir = layout.dir().string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sha256:" + std::string(64, 'A'), "sha256 needs exactly 64 lowercase hex digits"},
      {"sha256:" + std::string(63, 'a'), "sha256 needs exactly 64 lowercase hex digits"},
      {"sha256:../../etc/passwd", "sha256 needs exactly 64 lowercase hex digits"},
      {"md5:d41d8cd98f00b204e9800998ecf8427e",
       "unsupported algorithm 'md5' (sha256 and sha512 are supported)"},
  };
  for (const auto& [digest, why] : cases) {
    INFO(digest);
    layout.write_index_text(
        fmt::format(R"({{"schemaVersion":2,"manifests":[{{"mediaType":"{}","digest":"{}",)"
                    R"("size":10}}]}})",
                    k_media_manifest, digest));
    auto r = resolve_ref("oci:" + dir);
    CHECK(code_of(r) == ExitCode::invalid_input);
    CHECK(error_of(r) ==
          fmt::format("oci:{}: index.json.manifests[0]: invalid digest '{}': {}", dir, digest, why));
  }
}

TEST_CASE("a blob whose content does not match its digest is refused", "[image][hostile]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor m = layout.image({"one"});
  layout.write_index({m});
  std::string manifest = test::slurp(layout.blob_path(m.digest));
  std::string forged = manifest;
  forged[forged.size() - 2] = ' '; // same size, other bytes
  fs::remove(layout.blob_path(m.digest));
  std::ofstream(layout.blob_path(m.digest), std::ios::binary) << forged;
  auto r = resolve_ref("oci:" + layout.dir().string());
  CHECK(code_of(r) == ExitCode::invalid_input);
  CHECK(error_of(r) == fmt::format("blob {} in oci:{} has digest {}, expected {}; the layout is corrupt",
                                   m.digest.str(), layout.dir().string(), sha256_of(forged).str(),
                                   m.digest.str()));
}

TEST_CASE("a blob whose size differs from its descriptor is refused before reading", "[image][hostile]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor m = layout.image({"one"});
  Descriptor lying = m;
  lying.size += 1;
  layout.write_index({lying});
  auto r = resolve_ref("oci:" + layout.dir().string());
  CHECK(error_of(r) == fmt::format("blob {} in oci:{} has {} bytes, expected {}; the layout is corrupt",
                                   m.digest.str(), layout.dir().string(), m.size, m.size + 1));
}

TEST_CASE("a blob that is a symbolic link is refused", "[image][hostile]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor m = layout.image({"one"});
  layout.write_index({m});
  // The link points at a file with the right content: still refused (it could point anywhere).
  fs::path real = tmp.write("elsewhere/manifest", test::slurp(layout.blob_path(m.digest)));
  fs::remove(layout.blob_path(m.digest));
  fs::create_symlink(real, layout.blob_path(m.digest));
  auto r = resolve_ref("oci:" + layout.dir().string());
  CHECK(error_of(r) == fmt::format("blob {} in oci:{} is a symbolic link; refusing it", m.digest.str(),
                                   layout.dir().string()));
}

TEST_CASE("a missing blob is named with the path looked at", "[image][hostile]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor m = layout.image({"one"});
  layout.write_index({m});
  auto image = resolve_ref("oci:" + layout.dir().string());
  REQUIRE(image);
  const Digest& config = image->manifest.config.digest;
  fs::remove(layout.blob_path(config));
  auto r = resolve_ref("oci:" + layout.dir().string());
  CHECK(error_of(r) == fmt::format("blob {} is missing from oci:{} (no file {})", config.str(),
                                   layout.dir().string(), layout.blob_path(config).string()));
}

TEST_CASE("index.json that is not JSON is refused", "[image][hostile]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  layout.write_index_text("{\"schemaVersion\": 2, \"manifests\": [");
  auto r = resolve_ref("oci:" + layout.dir().string());
  CHECK(code_of(r) == ExitCode::invalid_input);
  CHECK(error_of(r) == fmt::format("oci:{}: index.json: not valid JSON", layout.dir().string()));
}

TEST_CASE("a config with a different number of diff_ids than the manifest has layers is refused",
          "[image][hostile]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  ImageOptions opts;
  opts.edit_config = [](json& c) { c["rootfs"]["diff_ids"].erase(1); };
  Descriptor m = layout.image({"one", "two"}, opts);
  layout.write_index({m});
  auto image = resolve_ref("oci:" + layout.dir().string());
  REQUIRE_FALSE(image);
  auto manifest = Manifest::parse(test::slurp(layout.blob_path(m.digest)), "m");
  REQUIRE(manifest);
  CHECK(error_of(image) == fmt::format("oci:{}: config {} lists 1 diff_ids, but manifest {} has 2 layers",
                                       layout.dir().string(), manifest->config.digest.str(), m.digest.str()));
}

TEST_CASE("config labels must be strings, and configs may nest at most 128 levels", "[image][hostile]") {
  test::TempDirFixture tmp;
  const auto resolve_with = [&](const std::string& name, const std::function<void(json&)>& labels) {
    LayoutWriter layout(tmp.dir() / name);
    ImageOptions opts;
    opts.edit_config = [&](json& c) { labels(c["config"]["Labels"]); };
    Descriptor m = layout.image({"one"}, opts);
    layout.write_index({m});
    auto manifest = Manifest::parse(test::slurp(layout.blob_path(m.digest)), "m");
    REQUIRE(manifest);
    return std::make_pair(
        resolve_ref("oci:" + layout.dir().string()),
        fmt::format("oci:{}: config {}: ", layout.dir().string(), manifest->config.digest.str()));
  };
  auto [ok, unused] = resolve_with("strings", [](json& l) { l = {{"team", "hpc"}}; });
  REQUIRE_OK(ok);
  auto [number, where] = resolve_with("number", [](json& l) { l = {{"team", "hpc"}, {"version", 7}}; });
  CHECK(code_of(number) == ExitCode::invalid_input);
  CHECK(error_of(number) == where + "the image config's label 'version' is a number, not a string (the OCI "
                                    "image spec allows only strings)");
  auto [object, where2] = resolve_with("object", [](json& l) { l = {{"nested", {{"a", "b"}}}}; });
  CHECK(error_of(object) == where2 + "the image config's label 'nested' is an object, not a string (the OCI "
                                     "image spec allows only strings)");
  auto [deep, where3] = resolve_with("deep", [](json& l) {
    json v = json::array();
    for (int i = 0; i < 200; ++i) {
      v = json::array({std::move(v)});
    }
    l = {{"deep", std::move(v)}};
  });
  CHECK(code_of(deep) == ExitCode::invalid_input);
  CHECK(error_of(deep).find("JSON nested more than 128 levels deep") != std::string::npos);
  CHECK(error_of(deep).rfind(where3.substr(0, where3.size() - 2), 0) == 0);
}

TEST_CASE("a directory without a valid oci-layout file is not an image layout", "[image][hostile]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img", false);
  layout.write_index({layout.image({"one"})});
  std::string dir = layout.dir().string();
  CHECK(error_of(resolve_ref("oci:" + dir)) == dir + " is not an OCI image layout (no oci-layout file)");

  tmp.write("img/oci-layout", R"({"imageLayoutVersion":"2.0.0"})");
  CHECK(error_of(resolve_ref("oci:" + dir)) ==
        fmt::format("oci:{}: oci-layout: unsupported imageLayoutVersion '2.0.0' (expected 1.0.0)", dir));

  CHECK(error_of(resolve_ref("oci:" + dir + "/nope")) ==
        fmt::format("oci:{}/nope: {}/nope does not exist", dir, dir));
}

TEST_CASE("read_blob refuses a blob above the caller's limit", "[image]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor big = layout.blob(std::string(100, 'x'), k_media_layer_tar);
  layout.write_index({layout.image({"one"})});
  auto source = ImageSource::open(*ImageRef::parse("oci:" + layout.dir().string()));
  REQUIRE(source);
  auto ok = (*source)->read_blob(big, 100);
  REQUIRE(ok);
  CHECK(*ok == std::string(100, 'x'));
  CHECK(error_of((*source)->read_blob(big, 99)) ==
        fmt::format("blob {} in oci:{} is 100 bytes, more than the limit of 99 bytes", big.digest.str(),
                    layout.dir().string()));
}

TEST_CASE("fetch_blob copies a verified blob into the store and publishes nothing for a lying one",
          "[image][store]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor layer = layout.blob("layer bytes", k_media_layer_tar);
  Descriptor lying = layout.blob("original bytes", k_media_layer_tar);
  layout.write_index({layout.image({"one"})});
  std::ofstream(layout.blob_path(lying.digest), std::ios::binary | std::ios::trunc) << "tampered bytes";
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  auto source = ImageSource::open(*ImageRef::parse("oci:" + layout.dir().string()));
  REQUIRE(source);

  REQUIRE((*source)->fetch_blob(layer, *store));
  CHECK(store->has(layer.digest, layer.size));
  CHECK(*store->read(layer.digest) == "layer bytes");
  REQUIRE((*source)->fetch_blob(layer, *store)); // already there: a no-op

  auto r = (*source)->fetch_blob(lying, *store);
  CHECK(code_of(r) == ExitCode::invalid_input);
  CHECK(error_of(r) ==
        fmt::format("blob {} in oci:{} (the layout is corrupt): digest mismatch: expected {}, got "
                    "{} (14 bytes)",
                    lying.digest.str(), layout.dir().string(), lying.digest.str(),
                    sha256_of("tampered bytes").str()));
  CHECK_FALSE(store->has(lying.digest));
  CHECK(test::count_files(store->root() / "tmp") == 0);
  CHECK(test::count_files(store->root() / "blobs") == 1);
}

// ---------------------------------------------------------------------------------------------
// Tar member names

TEST_CASE("tar member names are normalised, and absolute or '..' names refused", "[image][tar]") {
  CHECK(*normalize_member_name("./a//b/./c/") == "a/b/c");
  CHECK(*normalize_member_name("./") == "");
  CHECK(*normalize_member_name("index.json") == "index.json");
  CHECK(error_of(normalize_member_name("/etc/passwd")) ==
        "archive member '/etc/passwd' has an absolute name");
  CHECK(error_of(normalize_member_name("a/../../x")) == "archive member 'a/../../x' has a '..' component");
  CHECK(error_of(normalize_member_name("a/..")) == "archive member 'a/..' has a '..' component");
}

// ---------------------------------------------------------------------------------------------
// OCI archives

TEST_CASE("an OCI archive resolves like the layout it holds, compressed or not", "[image][archive]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor v1 = layout.image({"one"});
  Descriptor v2 = layout.image({"two", "three"});
  layout.write_index({LayoutWriter::tagged(v1, "v1"), LayoutWriter::tagged(v2, "v2")});
  auto entries = test::tar_entries_of(layout.dir());
  for (bool gzip : {false, true}) {
    INFO("gzip " << gzip);
    fs::path tar = tmp.dir() / (gzip ? "img.tar.gz" : "img.tar");
    test::write_tar(tar, entries, gzip);
    auto a = resolve_ref("oci-archive:" + tar.string() + ":v2");
    REQUIRE(a);
    CHECK(a->manifest_digest == v2.digest);
    CHECK(a->diff_ids.size() == 2);
    CHECK(a->ref_name == "v2");
    auto none = resolve_ref("oci-archive:" + tar.string());
    CHECK(error_of(none) == fmt::format("oci-archive:{} holds 2 images; choose one with oci-archive:{}:TAG "
                                        "(available: v1, v2)",
                                        tar.string(), tar.string()));
  }
}

TEST_CASE("hostile OCI archive members refuse the archive", "[image][archive][hostile]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor m = layout.image({"one"});
  layout.write_index({m});
  auto good = test::tar_entries_of(layout.dir());
  fs::path tar = tmp.dir() / "bad.tar";
  std::string ref = "oci-archive:" + tar.string();
  struct Case {
    std::string what;
    TarEntry extra;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"parent",
       {"blobs/../../evil", "x"},
       ref + ": archive member 'blobs/../../evil' has a '..' component; refusing the archive"},
      {"dotdot",
       {"../evil", "x"},
       ref + ": archive member '../evil' has a '..' component; refusing the archive"},
      {"absolute",
       {"/etc/passwd", "x"},
       ref + ": archive member '/etc/passwd' has an absolute name; refusing the archive"},
      {"duplicate",
       {"./index.json", "{}"},
       ref + ": archive member 'index.json' occurs more than once; refusing an ambiguous archive"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto entries = good;
    entries.push_back(c.extra);
    test::write_tar(tar, entries);
    auto r = resolve_ref(ref);
    CHECK(code_of(r) == ExitCode::invalid_input);
    CHECK(error_of(r) == c.message);
  }
}

TEST_CASE("links in an archive are never followed outside it", "[image][archive][hostile]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor m = layout.image({"one"});
  layout.write_index({m});
  std::string manifest_member = "blobs/sha256/" + m.digest.hex();
  std::vector<TarEntry> entries;
  for (auto& e : test::tar_entries_of(layout.dir())) {
    if (e.name != manifest_member) {
      entries.push_back(e);
    }
  }
  fs::path tar = tmp.dir() / "links.tar";
  std::string location = "oci-archive:" + tar.string();

  SECTION("an absolute symlink") {
    entries.push_back({manifest_member, "", TarEntry::Type::symlink, "/etc/passwd"});
    test::write_tar(tar, entries);
    CHECK(error_of(resolve_ref(location)) ==
          fmt::format(
              "{}: blob {}: archive member '{}' is a symbolic link to '/etc/passwd', outside the archive; "
              "refusing it",
              location, m.digest.str(), manifest_member));
  }
  SECTION("a relative symlink that climbs out") {
    entries.push_back({manifest_member, "", TarEntry::Type::symlink, "../../../x"});
    test::write_tar(tar, entries);
    CHECK(error_of(resolve_ref(location)) ==
          fmt::format(
              "{}: blob {}: archive member '{}' is a symbolic link to '../../../x', outside the archive; "
              "refusing it",
              location, m.digest.str(), manifest_member));
  }
  SECTION("a symlink to another member is resolved inside the archive (old docker save)") {
    entries.push_back({"elsewhere/manifest", test::slurp(layout.blob_path(m.digest))});
    entries.push_back({manifest_member, "", TarEntry::Type::symlink, "../../elsewhere/manifest"});
    test::write_tar(tar, entries);
    auto r = resolve_ref(location);
    REQUIRE(r);
    CHECK(r->manifest_digest == m.digest);
  }
}

TEST_CASE("a non-archive and a layout given as an archive are refused clearly", "[image][archive]") {
  test::TempDirFixture tmp;
  fs::path junk = tmp.write("junk.tar", std::string(2048, 'j'));
  auto r = resolve_ref("oci-archive:" + junk.string());
  CHECK(code_of(r) == ExitCode::invalid_input);
  CHECK(error_of(r).rfind("oci-archive:" + junk.string() + ": not a valid tar archive", 0) == 0);

  LayoutWriter layout(tmp.dir() / "img");
  CHECK(error_of(resolve_ref("oci-archive:" + layout.dir().string())) ==
        fmt::format("oci-archive:{0}: {0} is a directory (for an OCI layout directory, use oci:{0})",
                    layout.dir().string()));
}

TEST_CASE("big archive members are streamed: fetch_blob verifies them and publishes nothing on a lie",
          "[image][archive][store]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  std::string big(9 << 20, 'b'); // above the 8 MiB kept in memory
  Descriptor m = layout.image({big, "small"});
  layout.write_index({m});
  auto entries = test::tar_entries_of(layout.dir());
  fs::path tar = tmp.dir() / "big.tar";
  test::write_tar(tar, entries);
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  auto source = ImageSource::open(*ImageRef::parse("oci-archive:" + tar.string()));
  REQUIRE(source);
  auto image = (*source)->resolve({});
  REQUIRE(image);
  for (const auto& l : image->manifest.layers) {
    REQUIRE((*source)->fetch_blob(l, *store));
    CHECK(store->has(l.digest, l.size));
  }
  CHECK(*(*source)->read_blob(image->manifest.layers[0], 10 << 20) == big);

  // The same archive with the big layer's bytes changed (same size).
  std::string layer_member = "blobs/sha256/" + sha256_of(big).hex();
  for (auto& e : entries) {
    if (e.name == layer_member) {
      e.data[100] = 'X';
    }
  }
  test::write_tar(tar, entries);
  auto store2 = BlobStore::open(tmp.dir() / "cache2");
  REQUIRE(store2);
  auto lying = ImageSource::open(*ImageRef::parse("oci-archive:" + tar.string()));
  REQUIRE(lying);
  auto r = (*lying)->fetch_blob(image->manifest.layers[0], *store2);
  CHECK(code_of(r) == ExitCode::invalid_input);
  CHECK_FALSE(store2->has(sha256_of(big)));
  CHECK(test::count_files(store2->root()) == 0);
}

// ---------------------------------------------------------------------------------------------
// docker-archives

namespace {

// A legacy `docker save` layout: manifest.json, <id>.json configs, <id>/layer.tar layers.
struct DockerArchive {
  std::vector<TarEntry> entries;
  json manifest = json::array();

  // Adds one image; returns the config bytes.
  std::string add(const std::string& id, const std::vector<std::string>& layers,
                  const std::vector<std::string>& repo_tags) {
    json config = {{"architecture", "amd64"},
                   {"os", "linux"},
                   {"config", {{"Cmd", {"/bin/sh"}}}},
                   {"rootfs", {{"type", "layers"}, {"diff_ids", json::array()}}}};
    json item = {{"Config", id + ".json"}, {"RepoTags", repo_tags}, {"Layers", json::array()}};
    for (std::size_t i = 0; i < layers.size(); ++i) {
      std::string dir = fmt::format("{}-{}", id, i);
      entries.push_back({dir + "/layer.tar", layers[i]});
      item["Layers"].push_back(dir + "/layer.tar");
      config["rootfs"]["diff_ids"].push_back(sha256_of(layers[i]).str());
    }
    std::string bytes = config.dump();
    entries.push_back({id + ".json", bytes});
    manifest.push_back(item);
    return bytes;
  }

  void write(const fs::path& tar) {
    auto all = entries;
    all.push_back({"manifest.json", manifest.dump()});
    test::write_tar(tar, all);
  }
};

} // namespace

TEST_CASE("a docker-archive without an OCI layout gets a synthesised manifest", "[image][docker]") {
  test::TempDirFixture tmp;
  DockerArchive archive;
  std::string config = archive.add("abc", {k_gzip_layer, k_zstd_layer, k_tar_layer}, {"hello:v1"});
  fs::path tar = tmp.dir() / "hello.tar";
  archive.write(tar);

  auto image = resolve_ref("docker-archive:" + tar.string());
  REQUIRE(image);
  CHECK(image->synthesized_manifest);
  CHECK(image->ref_name == "hello:v1");
  CHECK(image->manifest.media_type == k_media_manifest);
  CHECK(image->manifest_media_type == k_media_manifest);
  CHECK(image->manifest_digest == sha256_of(image->manifest_bytes));
  CHECK(image->manifest.config.digest == sha256_of(config));
  CHECK(image->config_bytes == config);
  REQUIRE(image->manifest.layers.size() == 3);
  CHECK(image->manifest.layers[0].media_type == k_docker_layer_gzip);
  CHECK(image->manifest.layers[1].media_type == k_media_layer_zstd);
  CHECK(image->manifest.layers[2].media_type == k_docker_layer_tar);
  CHECK(image->manifest.layers[0].digest == sha256_of(k_gzip_layer));
  CHECK(image->manifest.layers[2].size == static_cast<std::int64_t>(k_tar_layer.size()));

  // Its blobs can be read and fetched like any other.
  auto source = ImageSource::open(*ImageRef::parse("docker-archive:" + tar.string()));
  REQUIRE(source);
  REQUIRE((*source)->resolve({}));
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  REQUIRE((*source)->fetch_blob(image->manifest.layers[1], *store));
  CHECK(*store->read(image->manifest.layers[1].digest) == k_zstd_layer);

  // Synthesis is deterministic.
  auto again = resolve_ref("docker-archive:" + tar.string());
  REQUIRE(again);
  CHECK(again->manifest_digest == image->manifest_digest);
}

TEST_CASE("big legacy docker-archive layers are hashed by streaming", "[image][docker]") {
  test::TempDirFixture tmp;
  DockerArchive archive;
  std::string big = std::string("\x1f\x8b", 2) + std::string(9 << 20, 'g');
  archive.add("abc", {big, k_tar_layer}, {"big:1"});
  fs::path tar = tmp.dir() / "big.tar";
  archive.write(tar);
  auto source = ImageSource::open(*ImageRef::parse("docker-archive:" + tar.string()));
  REQUIRE(source);
  auto image = (*source)->resolve({});
  REQUIRE(image);
  REQUIRE(image->manifest.layers.size() == 2);
  CHECK(image->manifest.layers[0].digest == sha256_of(big));
  CHECK(image->manifest.layers[0].media_type == k_docker_layer_gzip);
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  REQUIRE((*source)->fetch_blob(image->manifest.layers[0], *store));
  CHECK(store->has(sha256_of(big), static_cast<std::int64_t>(big.size())));
}

TEST_CASE("a docker-archive with several images is selected by RepoTag", "[image][docker]") {
  test::TempDirFixture tmp;
  DockerArchive archive;
  archive.add("aaa", {"a layer"}, {"hello:v1", "hello:latest"});
  archive.add("bbb", {"b layer", "b2"}, {"docker.io/library/hello:v2"});
  fs::path tar = tmp.dir() / "all.tar";
  archive.write(tar);
  std::string file = tar.string();

  auto v2 = resolve_ref("docker-archive:" + file + ":hello:v2");
  REQUIRE(v2);
  CHECK(v2->diff_ids.size() == 2);
  CHECK(v2->ref_name == "docker.io/library/hello:v2");
  auto latest = resolve_ref("docker-archive:" + file + ":docker.io/library/hello");
  REQUIRE(latest);
  CHECK(latest->diff_ids.size() == 1);

  CHECK(error_of(resolve_ref("docker-archive:" + file)) ==
        fmt::format(
            "docker-archive:{0} holds 2 images; choose one with docker-archive:{0}:NAME:TAG (available: "
            "hello:v1, hello:latest, docker.io/library/hello:v2)",
            file));
  CHECK(error_of(resolve_ref("docker-archive:" + file + ":other:v1")) ==
        fmt::format(
            "docker-archive:{}:other:v1: no image tagged 'other:v1' in manifest.json (available: hello:v1, "
            "hello:latest, docker.io/library/hello:v2)",
            file));
}

TEST_CASE("docker-archive paths and links are checked like any member name", "[image][docker][hostile]") {
  test::TempDirFixture tmp;
  fs::path tar = tmp.dir() / "d.tar";
  std::string location = "docker-archive:" + tar.string();
  DockerArchive archive;
  archive.add("abc", {"one", "two"}, {"hello:v1"});

  SECTION("a layer path with '..'") {
    archive.manifest[0]["Layers"][1] = "abc-0/../../etc/passwd";
    archive.write(tar);
    CHECK(error_of(resolve_ref(location)) ==
          location +
              ": manifest.json Layers[1]: archive member 'abc-0/../../etc/passwd' has a '..' component; "
              "refusing the archive");
  }
  SECTION("an absolute config path") {
    archive.manifest[0]["Config"] = "/etc/passwd";
    archive.write(tar);
    CHECK(error_of(resolve_ref(location)) ==
          location +
              ": manifest.json Config: archive member '/etc/passwd' has an absolute name; refusing the "
              "archive");
  }
  SECTION("a repeated layer linked as ../<id>/layer.tar, as docker 20.10 writes it") {
    archive.entries.erase(archive.entries.begin() + 1); // abc-1/layer.tar
    archive.entries.push_back({"abc-1/layer.tar", "", TarEntry::Type::symlink, "../abc-0/layer.tar"});
    archive.manifest[0]["Layers"][1] = "abc-1/layer.tar";
    archive.write(tar);
    // diff_ids still name "two" for layer 1, but the image only has to be readable here.
    auto r = resolve_ref(location);
    REQUIRE(r);
    CHECK(r->manifest.layers[1].digest == sha256_of("one"));
  }
  SECTION("a missing layer") {
    archive.manifest[0]["Layers"][1] = "nope/layer.tar";
    archive.write(tar);
    CHECK(error_of(resolve_ref(location)) ==
          location + ": manifest.json Layers[1]: no archive member 'nope/layer.tar'");
  }
  SECTION("manifest.json that is not an array") {
    archive.manifest = json::object();
    archive.write(tar);
    CHECK(error_of(resolve_ref(location)) ==
          location + ": manifest.json: expected a non-empty JSON array of images");
  }
}

TEST_CASE("a docker-archive holding an OCI layout is read through index.json", "[image][docker]") {
  test::TempDirFixture tmp;
  LayoutWriter layout(tmp.dir() / "img");
  Descriptor hello = layout.image({"hello layer"});
  Descriptor other = layout.image({"other layer"});
  hello = LayoutWriter::tagged(hello, "v1");
  hello.annotations["io.containerd.image.name"] = "docker.io/library/hello:v1";
  other = LayoutWriter::tagged(other, "v1");
  other.annotations["io.containerd.image.name"] = "docker.io/team/other:v1";
  layout.write_index({hello, other});
  auto entries = test::tar_entries_of(layout.dir());
  // Modern docker save also writes manifest.json pointing into blobs/.
  json manifest =
      json::array({{{"Config", "blobs/sha256/x"}, {"RepoTags", {"hello:v1"}}, {"Layers", json::array()}}});
  entries.push_back({"manifest.json", manifest.dump()});
  fs::path tar = tmp.dir() / "modern.tar";
  test::write_tar(tar, entries);
  std::string file = tar.string();

  auto h = resolve_ref("docker-archive:" + file + ":hello:v1");
  REQUIRE(h);
  CHECK_FALSE(h->synthesized_manifest);
  CHECK(h->manifest_digest == hello.digest);
  CHECK(h->ref_name == "docker.io/library/hello:v1");

  auto o = resolve_ref("docker-archive:" + file + ":team/other:v1");
  REQUIRE(o);
  CHECK(o->manifest_digest == other.digest);

  CHECK(error_of(resolve_ref("docker-archive:" + file)) ==
        fmt::format(
            "docker-archive:{0} holds 2 images; choose one with docker-archive:{0}:NAME:TAG (available: "
            "docker.io/library/hello:v1, docker.io/team/other:v1)",
            file));

  // Both carry ref.name "v1": a bare tag is ambiguous unless a pin says which.
  CHECK(
      error_of(resolve_ref("docker-archive:" + file + ":v1")) ==
      fmt::format("docker-archive:{}:v1: 'v1' names 2 different images ({} (docker.io/library/hello:v1), {} "
                  "(docker.io/team/other:v1)); pin one by digest",
                  file, hello.digest.str(), other.digest.str()));
  SelectOptions pin;
  pin.digest = other.digest;
  auto pinned = resolve_ref("docker-archive:" + file + ":v1", pin);
  REQUIRE(pinned);
  CHECK(pinned->manifest_digest == other.digest);
}

TEST_CASE("docker references are normalised the way Docker does", "[image][docker]") {
  // Exercised through selection: all of these name docker.io/library/hello:latest.
  test::TempDirFixture tmp;
  DockerArchive archive;
  archive.add("aaa", {"a"}, {"docker.io/library/hello:latest"});
  archive.add("bbb", {"b"}, {"example.com:5000/hello:latest"});
  fs::path tar = tmp.dir() / "n.tar";
  archive.write(tar);
  for (std::string name :
       {"hello", "hello:latest", "library/hello", "docker.io/hello", "index.docker.io/hello"}) {
    INFO(name);
    auto r = resolve_ref("docker-archive:" + tar.string() + ":" + name);
    REQUIRE(r);
    CHECK(r->ref_name == "docker.io/library/hello:latest");
  }
  auto r = resolve_ref("docker-archive:" + tar.string() + ":example.com:5000/hello");
  REQUIRE(r);
  CHECK(r->ref_name == "example.com:5000/hello:latest");
}
