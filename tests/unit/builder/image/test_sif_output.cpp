#include "builder/image/sif_output.hpp"
#include "support/codec/compress.hpp"
#include "support/oci/sif.hpp"
#include "support/oci/squashfs.hpp"
#include "support/oci/tar_writer.hpp"
#include "support/system/fs.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>

using namespace lockstep;
using namespace lockstep::builder;
namespace fs = std::filesystem;
using nlohmann::json;
using test::slurp;
using test::TempDirFixture;

namespace {

// Runs a shell command line whatever its exit status (some cases print it), returning its stdout.
std::string shell(const std::string& cmd) {
  return test::run_command(cmd, test::ExitCheck::ignore);
}

json config_with(const json& inner) {
  return json{{"architecture", "amd64"}, {"os", "linux"}, {"config", inner}};
}

std::string layer_tar(const std::vector<std::pair<std::string, std::string>>& files) {
  test::StringSink sink;
  TarWriter tar(sink);
  for (const auto& [path, data] : files) {
    TarEntry e;
    e.path = path;
    e.mode = 0755;
    e.mtime = 5;
    e.size = static_cast<std::int64_t>(data.size());
    tar.add(e);
    tar.write_data(data.data(), data.size());
  }
  tar.finish();
  return sink.out;
}

// An image with the given layers and config, stored in `store`.
oci::StoredImage store_image(const BlobStore& store, const std::vector<std::string>& layers,
                             const json& config, std::int64_t epoch = 1000) {
  oci::Manifest m;
  m.media_type = std::string(oci::k_media_manifest);
  oci::StoredImage image;
  for (const auto& l : layers) {
    auto info = store.put(l);
    REQUIRE(info);
    m.layers.push_back(
        oci::Descriptor{std::string(oci::k_media_layer_tar), info->digest, info->size, {}, {}, {}, {}});
  }
  auto cfg = store.put(config.dump());
  REQUIRE(cfg);
  m.config = oci::Descriptor{std::string(oci::k_media_config), cfg->digest, cfg->size, {}, {}, {}, {}};
  m.annotations["org.opencontainers.image.title"] = "demo";
  m.annotations["dev.lockstep.spec.digest"] = "not a label";
  auto man = store.put(m.serialize());
  REQUIRE(man);
  image.manifest =
      oci::Descriptor{std::string(oci::k_media_manifest), man->digest, man->size, {}, {}, {}, {}};
  image.blobs.push_back(m.config);
  image.blobs.insert(image.blobs.end(), m.layers.begin(), m.layers.end());
  image.epoch = epoch;
  return image;
}

SifSettings settings() {
  SifSettings s;
  s.deffile = "lockstep: 1\nname: demo\n";
  s.spec_digest = sha256_of("spec");
  s.arch = "amd64";
  return s;
}

std::string object(const fs::path& sif, std::uint32_t id) {
  auto img = sif::read_image(sif);
  REQUIRE(img);
  const sif::Descriptor* d = img->find(id);
  REQUIRE(d != nullptr);
  return slurp(sif).substr(static_cast<std::size_t>(d->offset), static_cast<std::size_t>(d->size));
}

} // namespace

TEST_CASE("the runscript runs ENTRYPOINT and CMD as Apptainer's OCI conveyor does", "[sif]") {
  TempDirFixture tmp;
  json cfg = config_with({{"Entrypoint", {"printf", "%s|"}}, {"Cmd", {"a b", "it's", "$HOME"}}});
  fs::path rs = tmp.write("runscript", sif_runscript(cfg));
  std::string sh = "HOME=/h sh " + rs.string();
  // No arguments: ENTRYPOINT + CMD, each word exactly as written (no expansion of $HOME).
  CHECK(shell(sh) == "a b|it's|$HOME|");
  // Arguments replace CMD; Apptainer's default evaluates them through the shell once more.
  CHECK(shell(sh + " 'x y' '$HOME'") == "x y|/h|");
  // SINGULARITY_NO_EVAL: OCI-exact, the arguments are not evaluated.
  CHECK(shell("SINGULARITY_NO_EVAL=1 " + sh + " 'x y' '$HOME'") == "x y|$HOME|");
  CHECK(shell("SINGULARITY_NO_EVAL=1 " + sh) == "a b|it's|$HOME|");

  fs::path cmd_only = tmp.write("cmd-only", sif_runscript(config_with({{"Cmd", {"echo", "default"}}})));
  CHECK(shell("sh " + cmd_only.string()) == "default\n");
  CHECK(shell("sh " + cmd_only.string() + " echo other") == "other\n");
  fs::path none = tmp.write("none", sif_runscript(config_with(json::object())));
  CHECK(shell("sh " + none.string() + " 2>&1; echo rc=$?") ==
        "This image has no ENTRYPOINT or CMD: give a command to run.\nrc=1\n");
  CHECK(shell("sh " + none.string() + " echo given") == "given\n");
  CHECK(sif_runscript(cfg).rfind("#!/bin/sh\nOCI_ENTRYPOINT='\"printf\" \"%s|\"'\n"
                                 "OCI_CMD='\"a b\" \"it'\\''s\" \"\\$HOME\"'\n",
                                 0) == 0);
}

TEST_CASE("the environment script keeps host values except PATH", "[sif]") {
  TempDirFixture tmp;
  json cfg = config_with(
      {{"Env",
        {"PATH=/opt/x/bin:/usr/bin", "A=image", "B=q\"uote $dollar `tick` \\back}", "1BAD=x", "C", "D=d"}}});
  std::string script = sif_env_script(cfg);
  CHECK(script == "#!/bin/sh\n"
                  "export PATH=\"/opt/x/bin:/usr/bin\"\n"
                  "export A=\"${A:-\"image\"}\"\n"
                  "export B=\"${B:-\"q\\\"uote \\$dollar \\`tick\\` \\\\back}\"}\"\n"
                  "export C=\"${C:-}\"\n"
                  "export D=\"${D:-\"d\"}\"\n");
  fs::path env = tmp.write("env.sh", script);
  CHECK(shell("env -i A=host PATH=/bin:/usr/bin sh -c '. " + env.string() +
              "; printf \"%s\\n\" \"$PATH\" \"$A\" \"$B\" \"$D\"'") ==
        "/opt/x/bin:/usr/bin\nhost\nq\"uote $dollar `tick` \\back}\nd\n");
}

TEST_CASE("the SIF scripts quote hostile ENTRYPOINT, CMD and Env values: each arrives whole, none runs",
          "[sif][hardening]") {
  TempDirFixture tmp;
  const std::string marker = (tmp.dir() / "PWNED").string();
  const std::vector<std::string> hostile = {"a\ntouch " + marker + "\n",
                                            "it's \"q\"",
                                            "$(touch " + marker + ")",
                                            "`touch " + marker + "`",
                                            "; touch " + marker,
                                            "x'; touch " + marker + "; '",
                                            "}\\",
                                            ""};
  json env = json::array();
  for (std::size_t i = 0; i < hostile.size(); ++i) {
    env.push_back(fmt::format("V{}={}", i, hostile[i]));
  }
  env.push_back("PATH=/usr/bin:/bin:$(touch " + marker + ")");
  json cfg = config_with({{"Entrypoint", {"printf", "%s|"}}, {"Cmd", hostile}, {"Env", env}});
  std::string want;
  for (const std::string& w : hostile) {
    want += w + "|";
  }
  fs::path rs = tmp.write("runscript", sif_runscript(cfg));
  CHECK(shell("sh " + rs.string()) == want);
  CHECK(shell("SINGULARITY_NO_EVAL=1 sh " + rs.string()) == want);
  CHECK(shell("SINGULARITY_NO_EVAL=1 bash " + rs.string()) == want);
  fs::path script = tmp.write("env.sh", sif_env_script(cfg));
  std::string vars;
  for (std::size_t i = 0; i < hostile.size(); ++i) {
    vars += fmt::format(" \"$V{}\"", i);
  }
  for (const char* sh : {"sh", "bash"}) {
    CHECK(shell(fmt::format("env -i {} -c '. {}; printf \"%s|\"{} \"$PATH\"'", sh, script.string(), vars)) ==
          want + "/usr/bin:/bin:$(touch " + marker + ")|");
  }
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("labels.json merges build labels, image annotations and config labels", "[sif]") {
  json cfg =
      config_with({{"Labels", {{"org.example.team", "hpc"}, {"org.opencontainers.image.title", "mine"}}}});
  std::map<std::string, std::string> annotations = {{"org.opencontainers.image.title", "demo"},
                                                    {"org.opencontainers.image.revision", "abc"},
                                                    {"dev.lockstep.spec.digest", "sha256:x"}};
  CHECK(sif_labels(cfg, annotations, 86400 * 365, "arm64") ==
        "{\n"
        "\t\"org.example.team\": \"hpc\",\n"
        "\t\"org.label-schema.build-arch\": \"arm64\",\n"
        "\t\"org.label-schema.build-date\": \"Friday_1_January_1971_0:0:0_UTC\",\n"
        "\t\"org.label-schema.schema-version\": \"1.0\",\n"
        "\t\"org.opencontainers.image.created\": \"1971-01-01T00:00:00Z\",\n"
        "\t\"org.opencontainers.image.revision\": \"abc\",\n"
        "\t\"org.opencontainers.image.title\": \"mine\"\n"
        "}");
}

TEST_CASE("the Apptainer layout keeps what the image has and adds /.singularity.d", "[sif]") {
  auto layout = singularity_layout(config_with(json::object()), "{}");
  std::string listing;
  for (const auto& e : layout) {
    listing += fmt::format("{} {} {:o} {}\n", e.entry.path, static_cast<int>(e.entry.type), e.entry.mode,
                           e.when == LayoutEntry::When::always ? "always" : "if-absent");
  }
  CHECK(listing.find("/tmp 1 755 if-absent\n") != std::string::npos);
  CHECK(listing.find("/etc/hosts 0 644 if-absent\n") != std::string::npos);
  CHECK(listing.find("/.singularity.d/env/90-environment.sh 0 755 always\n") != std::string::npos);
  CHECK(listing.find("/.singularity.d/labels.json 0 644 always\n") != std::string::npos);
  CHECK(listing.find("/singularity 2 777 if-absent\n") != std::string::npos);
  CHECK(listing.find("/environment 2 777 if-absent\n") != std::string::npos);
  CHECK(layout.size() == 33);
}

TEST_CASE("write_sif writes the objects, the squashfs and a reproducible file, then reuses it", "[sif]") {
  TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  json cfg =
      config_with({{"Env", {"PATH=/usr/bin"}}, {"Entrypoint", {"/bin/app"}}, {"Labels", {{"k", "v"}}}});
  auto image = store_image(*store,
                           {layer_tar({{"bin/app", "#!/bin/sh\necho app\n"}, {"etc/hosts", "127.0.0.1 x\n"}}),
                            layer_tar({{"etc/.wh.hosts", ""}, {"data/big", std::string(300000, 'x')}})},
                           cfg);
  fs::path a = tmp.dir() / "out" / "a.sif";
  auto r = write_sif(*store, image, settings(), a);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  CHECK_FALSE(r->cached);
  CHECK(r->digest == *sha256_of_file(a));
  struct stat st {};
  REQUIRE(::stat(a.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);

  auto img = sif::read_image(a);
  REQUIRE(img);
  REQUIRE(img->descriptors.size() == 5);
  CHECK(img->created_at == 1000);
  CHECK(object(a, 1) == "lockstep: 1\nname: demo\n");
  CHECK(img->descriptors[1].type == sif::DataType::labels);
  CHECK(json::parse(object(a, 2))["k"] == "v");
  json link = json::parse(object(a, 3));
  CHECK(link["manifest_digest"] == image.manifest.digest.str());
  CHECK(link["spec_digest"] == sha256_of("spec").str());
  CHECK(img->descriptors[3].name == "oci-config.json");
  CHECK(object(a, 4) == cfg["config"].dump());
  const sif::Descriptor* part = img->primary_partition();
  REQUIRE(part != nullptr);
  CHECK(part->offset % 4096 == 0);
  CHECK(part->arch == "amd64");

  // The partition holds the layers (with the whiteout applied) plus the Apptainer layout.
  fs::path root = tmp.dir() / "root";
  fs::create_directories(root);
  UniqueFd dfd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(extract_squashfs(a, part->offset, dfd.get(), false));
  CHECK(slurp(root / "bin/app") == "#!/bin/sh\necho app\n");
  CHECK(slurp(root / "etc/hosts").empty()); // deleted by layer 2, so the empty mount point is added
  CHECK(fs::file_size(root / "data/big") == 300000);
  CHECK(slurp(root / ".singularity.d/env/10-docker2singularity.sh") ==
        "#!/bin/sh\nexport PATH=\"/usr/bin\"\n");
  CHECK(fs::read_symlink(root / "singularity") == ".singularity.d/runscript");
  CHECK(fs::is_directory(root / "proc"));

  // Same input, another thread count: the same bytes. And it comes from the cache, in place.
  ::setenv("LOCKSTEP_THREADS", "1", 1);
  fs::path b = tmp.dir() / "out" / "b.sif";
  auto again = write_sif(*store, image, settings(), b);
  REQUIRE(again);
  CHECK(again->cached);
  CHECK(slurp(a) == slurp(b));
  REQUIRE(fs::remove_all(tmp.dir() / "cache" / "records" / "sif") > 0);
  fs::path c = tmp.dir() / "out" / "c.sif";
  auto rebuilt = write_sif(*store, image, settings(), c);
  ::unsetenv("LOCKSTEP_THREADS");
  REQUIRE(rebuilt);
  CHECK_FALSE(rebuilt->cached);
  CHECK(slurp(a) == slurp(c));

  // Another compressor is another SIF.
  SifSettings zstd = settings();
  zstd.compression = SquashfsCompressor::zstd;
  auto z = write_sif(*store, image, zstd, tmp.dir() / "out" / "z.sif");
  REQUIRE(z);
  CHECK_FALSE(z->cached);
  CHECK(z->digest != r->digest);
}

TEST_CASE("a cached SIF modified in place is not reused", "[sif]") {
  TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  auto image = store_image(*store, {layer_tar({{"f", "data"}})}, config_with(json::object()));
  fs::path a = tmp.dir() / "a.sif";
  auto first = write_sif(*store, image, settings(), a);
  REQUIRE(first);
  {
    // What `apptainer sign` or `siftool add` do to an output that shares its file with the store.
    UniqueFd fd(::open(a.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
    REQUIRE(fd.valid());
    REQUIRE(::write(fd.get(), "signature", 9) == 9);
  }
  fs::path b = tmp.dir() / "b.sif";
  auto second = write_sif(*store, image, settings(), b);
  REQUIRE(second);
  CHECK_FALSE(second->cached);
  CHECK(second->digest == first->digest);
  CHECK(*sha256_of_file(b) == first->digest);
}

TEST_CASE("write_sif refuses an architecture SIF has no code for", "[sif]") {
  TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  auto image = store_image(*store, {layer_tar({{"f", "x"}})}, config_with(json::object()));
  SifSettings s = settings();
  s.arch = "wasm";
  auto r = write_sif(*store, image, s, tmp.dir() / "x.sif");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message ==
        "can't write SIF " + (tmp.dir() / "x.sif").string() + ": SIF has no architecture code for 'wasm'");
  CHECK_FALSE(fs::exists(tmp.dir() / "x.sif"));
}
