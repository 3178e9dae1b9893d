// load_spec: every key's happy path, and every kind of error with its whole rendered message.
#include "envspec/load/load.hpp"
#include "envspec/spec/spec.hpp"
#include "tests/unit/envspec/fixtures/spec_fixture.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

using namespace lockstep;
using envspec::BaseImage;
using envspec::LoadOptions;
using envspec::ModePolicy;
using envspec::OwnerPolicy;
using envspec::Spec;
using test::SpecFixture;
namespace fs = std::filesystem;

namespace {

const std::string k_hex(64, 'a');

} // namespace

// ---------------------------------------------------------------------------------------------
// Happy paths

TEST_CASE_METHOD(SpecFixture, "A minimal spec gets the defaults", "[spec]") {
  Spec spec = load_ok("lockstep: 1\nname: hello\n");
  CHECK(spec.schema == 1);
  CHECK(spec.name == "hello");
  CHECK(spec.platform.str() == "linux/amd64");
  CHECK(spec.base.kind == BaseImage::Kind::scratch);
  CHECK(spec.copy.empty());
  CHECK(spec.env.empty());
  CHECK(spec.labels.empty());
  CHECK_FALSE(spec.entrypoint);
  CHECK_FALSE(spec.cmd);
  CHECK_FALSE(spec.workdir);
  CHECK_FALSE(spec.user);
  CHECK_FALSE(spec.outputs.oci);
  CHECK_FALSE(spec.outputs.oci_archive);
  CHECK_FALSE(spec.outputs.docker_archive);
  CHECK(spec.outputs.compression == Codec::gzip);
  CHECK(spec.file == dir() / "lockstep.yaml");
  CHECK(spec.dir == dir());
  CHECK(spec.files == std::vector<fs::path>{dir() / "lockstep.yaml"});
  CHECK(spec.digest.algorithm() == "sha256");
}

TEST_CASE_METHOD(SpecFixture, "Every key of a full spec is read into the Spec", "[spec]") {
  make_oci_layout("base");
  write("files/run.sh", "#!/bin/sh\n");
  Spec spec = load_ok("lockstep: 1\n"
                      "name: team/hello-world\n"
                      "platform: linux/arm64/v8\n"
                      "base: {oci: ./base@sha256:" +
                      k_hex +
                      ", tag: v1.0}\n"
                      "copy:\n"
                      "  - {from: ./files, to: /opt/app/}\n"
                      "  - from: ./files/run.sh\n"
                      "    to: /usr/local/bin/run\n"
                      "    mode: 0755\n"
                      "    owner: 1000:100\n"
                      "  - {from: files/, to: /srv, mode: preserve, owner: preserve}\n"
                      "  - {from: files/run.sh, to: /x, owner: 42, mode: \"4755\"}\n"
                      "env:\n"
                      "  PATH: /usr/bin:/bin\n"
                      "  A_1: 1\n"
                      "  _flag: true\n"
                      "labels:\n"
                      "  org.opencontainers.image.title: hello\n"
                      "  answer: 42\n"
                      "entrypoint: [/bin/sh, -c]\n"
                      "cmd: [\"echo hi\"]\n"
                      "workdir: /opt//app/./\n"
                      "user: app:staff\n"
                      "outputs:\n"
                      "  oci: build/hello\n"
                      "  oci_archive: /var/tmp/hello.tar\n"
                      "  docker_archive: ./build/../out/hello-docker.tar\n"
                      "  compression: zstd\n");
  CHECK(spec.name == "team/hello-world");
  CHECK(spec.platform.os == "linux");
  CHECK(spec.platform.architecture == "arm64");
  CHECK(spec.platform.variant == "v8");

  CHECK(spec.base.kind == BaseImage::Kind::oci);
  CHECK(spec.base.path == dir() / "base");
  CHECK(spec.base.path_text == "./base");
  CHECK(spec.base.tag == "v1.0");
  REQUIRE(spec.base.pin);
  CHECK(spec.base.pin->str() == "sha256:" + k_hex);
  CHECK(spec.base.location.line == 4);
  CHECK(spec.base.location.column == 13); // the `oci` value: later errors about the image point at it

  REQUIRE(spec.copy.size() == 4);
  const auto& c0 = spec.copy[0];
  CHECK(c0.from == dir() / "files");
  CHECK(c0.from_text == "./files");
  CHECK(c0.to == "/opt/app");
  CHECK(c0.to_is_dir);
  CHECK(c0.mode_policy == ModePolicy::normalize);
  CHECK(c0.owner_policy == OwnerPolicy::fixed);
  CHECK(c0.uid == 0);
  CHECK(c0.gid == 0);
  CHECK(c0.location.line == 6);
  CHECK(c0.location.column == 5);
  CHECK(c0.from_location.line == 6);
  CHECK(c0.from_location.column == 12);
  CHECK(c0.from_location.length == 7);
  const auto& c1 = spec.copy[1];
  CHECK(c1.from == dir() / "files/run.sh");
  CHECK(c1.to == "/usr/local/bin/run");
  CHECK_FALSE(c1.to_is_dir);
  CHECK(c1.mode_policy == ModePolicy::fixed);
  CHECK(c1.mode == 0755);
  CHECK(c1.owner_policy == OwnerPolicy::fixed);
  CHECK(c1.uid == 1000);
  CHECK(c1.gid == 100);
  const auto& c2 = spec.copy[2];
  CHECK(c2.from == dir() / "files");
  CHECK(c2.to == "/srv");
  CHECK(c2.mode_policy == ModePolicy::preserve);
  CHECK(c2.owner_policy == OwnerPolicy::preserve);
  const auto& c3 = spec.copy[3];
  CHECK(c3.mode_policy == ModePolicy::fixed);
  CHECK(c3.mode == 04755);
  CHECK(c3.uid == 42);
  CHECK(c3.gid == 42);

  using Env = std::vector<std::pair<std::string, std::string>>;
  CHECK(spec.env == Env{{"A_1", "1"}, {"PATH", "/usr/bin:/bin"}, {"_flag", "true"}});
  CHECK(spec.labels ==
        std::map<std::string, std::string>{{"answer", "42"}, {"org.opencontainers.image.title", "hello"}});
  CHECK(spec.entrypoint == std::vector<std::string>{"/bin/sh", "-c"});
  CHECK(spec.cmd == std::vector<std::string>{"echo hi"});
  CHECK(spec.workdir == "/opt/app");
  CHECK(spec.user == "app:staff");
  CHECK(spec.outputs.oci == dir() / "build/hello");
  CHECK(spec.outputs.oci_archive == fs::path("/var/tmp/hello.tar"));
  CHECK(spec.outputs.docker_archive == dir() / "out/hello-docker.tar");
  CHECK(spec.outputs.compression == Codec::zstd);
}

TEST_CASE_METHOD(SpecFixture, "A base can be an OCI archive file and need not be pinned", "[spec]") {
  write("base.tar", "not really a tar; load_spec only checks that it is a file");
  Spec spec = load_ok("lockstep: 1\nname: a\nbase:\n  oci: base.tar\n");
  CHECK(spec.base.kind == BaseImage::Kind::oci);
  CHECK(spec.base.path == dir() / "base.tar");
  CHECK_FALSE(spec.base.pin);
  CHECK(spec.base.tag.empty());
}

TEST_CASE_METHOD(SpecFixture, "base: scratch written out is the default", "[spec]") {
  Spec spec = load_ok("lockstep: 1\nname: a\nbase: scratch\n");
  CHECK(spec.base.kind == BaseImage::Kind::scratch);
}

TEST_CASE_METHOD(SpecFixture, "copy.to may be the image root", "[spec]") {
  write("rootfs/etc/hostname", "x\n");
  Spec spec = load_ok("lockstep: 1\nname: a\ncopy: [{from: rootfs, to: /}]\n");
  REQUIRE(spec.copy.size() == 1);
  CHECK(spec.copy[0].to == "/");
}

TEST_CASE_METHOD(SpecFixture, "Empty env, labels, copy and cmd lists are allowed", "[spec]") {
  Spec spec = load_ok("lockstep: 1\nname: a\nenv: {}\nlabels: {}\ncopy: []\ncmd: []\n");
  CHECK(spec.env.empty());
  CHECK(spec.labels.empty());
  CHECK(spec.copy.empty());
  REQUIRE(spec.cmd);
  CHECK(spec.cmd->empty());
}

TEST_CASE_METHOD(SpecFixture, "A symlink inside the spec's directory that stays inside is fine", "[spec]") {
  write("files/a.txt", "a\n");
  fs::create_directory_symlink("files", dir() / "alias");
  Spec spec = load_ok("lockstep: 1\nname: a\ncopy: [{from: alias, to: /a}]\n");
  REQUIRE(spec.copy.size() == 1);
  CHECK(spec.copy[0].from == dir() / "alias");
}

TEST_CASE_METHOD(SpecFixture, "A spec can be loaded from a string", "[spec]") {
  Result<Spec> spec =
      envspec::load_spec_from_string("lockstep: 1\nname: from-text\n", dir() / "virtual.yaml");
  REQUIRE(spec.ok());
  CHECK(spec->name == "from-text");
  CHECK(spec->file == dir() / "virtual.yaml");
}

TEST_CASE_METHOD(SpecFixture, "Diagnostics of a spec loaded from a string quote the string", "[spec]") {
  Result<Spec> spec =
      envspec::load_spec_from_string("lockstep: 1\nname: a\nlabls: {}\n", dir() / "virtual.yaml");
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.error().message == path("virtual.yaml") +
                                    ":3:1: error: labls: unknown key; did you mean 'labels'?\n"
                                    "    3 | labls: {}\n"
                                    "      | ^~~~~\n");
}

// ---------------------------------------------------------------------------------------------
// The file itself

TEST_CASE_METHOD(SpecFixture, "A missing spec file is a plain invalid_input error", "[spec][errors]") {
  Result<Spec> spec = load("nope.yaml");
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.error().code == ExitCode::invalid_input);
  CHECK_FALSE(spec.error().rendered);
  CHECK(spec.error().message == "can't open " + path("nope.yaml") + ": No such file or directory");
}

TEST_CASE_METHOD(SpecFixture, "An empty spec file is an error", "[spec][errors]") {
  CHECK(errors("") ==
        path() + ":1:1: error: empty spec file; a spec starts with 'lockstep: 1' and 'name: ...'\n");
  CHECK(errors("# only a comment\n") ==
        path() + ":1:1: error: empty spec file; a spec starts with 'lockstep: 1' and 'name: ...'\n"
                 "    1 | # only a comment\n"
                 "      | ^\n");
}

TEST_CASE_METHOD(SpecFixture, "A top level that is not a map is an error", "[spec][errors]") {
  CHECK(errors("- lockstep: 1\n- name: a\n") ==
        path() + ":1:1: error: expected a map of spec keys at the top level, found a list\n"
                 "    1 | - lockstep: 1\n"
                 "      | ^\n");
}

TEST_CASE_METHOD(SpecFixture, "A YAML syntax error is located", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: [a, b\nenv: {}\n") ==
        path() + ":3:4: error: invalid YAML: end of sequence flow not found\n"
                 "    3 | env: {}\n"
                 "      |    ^\n");
  CHECK(errors("lockstep: 1\nname: a: b\n") == path() + ":2:8: error: invalid YAML: illegal map value\n"
                                                        "    2 | name: a: b\n"
                                                        "      |        ^\n");
  CHECK(errors("lockstep: 1\nname: a\n\tenv: {}\n") ==
        path() + ":3:1: error: invalid YAML: illegal tab when looking for indentation\n"
                 "    3 | \tenv: {}\n"
                 "      | ^\n");
}

TEST_CASE_METHOD(SpecFixture, "A file that is not UTF-8 is an error", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: caf\xe9\n") ==
        path() + ":2:10: error: not valid UTF-8 (byte 21); spec files must be UTF-8\n"
                 "    2 | name: caf\xe9\n"
                 "      |          ^\n");
}

TEST_CASE_METHOD(SpecFixture, "A duplicate key is an error that names the first one", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nenv: {A: 1}\nlabels: {}\nenv: {B: 2}\n") ==
        path() + ":5:1: error: env: duplicate key 'env' (first at line 3)\n"
                 "    5 | env: {B: 2}\n"
                 "      | ^~~\n");
  CHECK(errors("lockstep: 1\nname: a\nenv: {A: 1, A: 2}\n") ==
        path() + ":3:13: error: env.A: duplicate key 'A' (first at line 3)\n"
                 "    3 | env: {A: 1, A: 2}\n"
                 "      |             ^\n");
}

TEST_CASE_METHOD(SpecFixture, "A second YAML document is an error", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\n---\nname: b\n") ==
        path() + ":3:1: error: a spec file holds one YAML document; a second one starts here\n"
                 "    3 | ---\n"
                 "      | ^\n");
}

// ---------------------------------------------------------------------------------------------
// Top-level keys

TEST_CASE_METHOD(SpecFixture, "An unknown key close to a known one gets a suggestion", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nlabls: {a: b}\n") ==
        path() + ":3:1: error: labls: unknown key; did you mean 'labels'?\n"
                 "    3 | labls: {a: b}\n"
                 "      | ^~~~~\n");
  CHECK(errors("lockstep: 1\nname: a\nentrypiont: [x]\n") ==
        path() + ":3:1: error: entrypiont: unknown key; did you mean 'entrypoint'?\n"
                 "    3 | entrypiont: [x]\n"
                 "      | ^~~~~~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "An unknown key far from every known one lists the keys", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nfrobnicate: yes\n") ==
        path() +
            ":3:1: error: frobnicate: unknown key; expected one of: base, cmd, conda, copy, entrypoint, env, "
            "extends, "
            "labels, lockstep, mirrors, name, outputs, packages, platform, platforms, repos, run, stack, "
            "user, workdir\n"
            "    3 | frobnicate: yes\n"
            "      | ^~~~~~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A YAML merge key points to extends", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\n<<: {env: {A: 1}}\n") ==
        path() + ":3:1: error: <<: YAML merge keys are not supported; use 'extends' to share settings\n"
                 "    3 | <<: {env: {A: 1}}\n"
                 "      | ^~\n");
}

TEST_CASE_METHOD(SpecFixture, "Keys planned for later versions say so", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nlaunch: {nodes: 2}\n") ==
        path() + ":3:1: error: launch: not supported by this lockstep version yet\n"
                 "    3 | launch: {nodes: 2}\n"
                 "      | ^~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A stack needs repositories to come from", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nstack: {cuda: \"12.1\"}\n") ==
        path() +
            ":3:1: error: stack: needs an apt repository in 'repos' (CUDA, cuDNN and NCCL come from NVIDIA's "
            "CUDA "
            "repository, MPI and Python from Debian), e.g. {apt: "
            "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/, flat: true, keyring: "
            "keys/cuda.gpg}\n"
            "    3 | stack: {cuda: \"12.1\"}\n"
            "      | ^~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A missing schema version is reported at 1:1", "[spec][errors]") {
  CHECK(errors("name: a\n") == path() + ":1:1: error: lockstep: missing 'lockstep: 1' (the schema version)\n"
                                        "    1 | name: a\n"
                                        "      | ^\n");
}

TEST_CASE_METHOD(SpecFixture, "Another schema version is unsupported", "[spec][errors]") {
  CHECK(errors("lockstep: 2\nname: a\n") ==
        path() + ":1:11: error: lockstep: unsupported schema version 2; this lockstep reads version 1\n"
                 "    1 | lockstep: 2\n"
                 "      |           ^\n");
}

TEST_CASE_METHOD(SpecFixture, "The schema version must be an integer", "[spec][errors]") {
  CHECK(
      errors("lockstep: \"1\"\nname: a\n") ==
      path() +
          ":1:11: error: lockstep: expected the schema version as an integer (lockstep: 1), found a string\n"
          "    1 | lockstep: \"1\"\n"
          "      |           ^~~\n");
  CHECK(
      errors("lockstep: 1.0\nname: a\n") ==
      path() +
          ":1:11: error: lockstep: expected the schema version as an integer (lockstep: 1), found a number\n"
          "    1 | lockstep: 1.0\n"
          "      |           ^~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A missing name is reported at 1:1", "[spec][errors]") {
  CHECK(errors("lockstep: 1\n") ==
        path() + ":1:1: error: name: missing 'name' (the image name, e.g. 'name: my-app')\n"
                 "    1 | lockstep: 1\n"
                 "      | ^\n");
}

TEST_CASE_METHOD(SpecFixture, "A name that is not a repository name says what is allowed", "[spec][errors]") {
  CHECK(
      errors("lockstep: 1\nname: My_App\n") ==
      path() +
          ":2:7: error: name: invalid name 'My_App': use lowercase letters, digits and separators ('.', '_', "
          "'__', '-'), with '/' between components, e.g. 'my-app'\n"
          "    2 | name: My_App\n"
          "      |       ^~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A name of the wrong type or empty is an error", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: [a]\n") == path() + ":2:7: error: name: expected a string, found a list\n"
                                                       "    2 | name: [a]\n"
                                                       "      |       ^\n");
  CHECK(errors("lockstep: 1\nname:\n") == path() + ":2:1: error: name: expected a string, found nothing\n"
                                                   "    2 | name:\n"
                                                   "      | ^~~~\n");
  CHECK(errors("lockstep: 1\nname: ''\n") ==
        path() + ":2:7: error: name: expected the image name, found an empty string\n"
                 "    2 | name: ''\n"
                 "      |       ^~\n");
}

TEST_CASE_METHOD(SpecFixture, "A bad platform carries the parser's message", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nplatform: linux/x86\n") ==
        path() + ":3:11: error: platform: invalid platform 'linux/x86': unknown architecture 'x86' (e.g. "
                 "amd64, arm64, "
                 "ppc64le)\n"
                 "    3 | platform: linux/x86\n"
                 "      |           ^~~~~~~~~\n");
  CHECK(errors("lockstep: 1\nname: a\nplatform: {os: linux}\n") ==
        path() + ":3:11: error: platform: expected a string, found a map\n"
                 "    3 | platform: {os: linux}\n"
                 "      |           ^\n");
}

// ---------------------------------------------------------------------------------------------
// base

TEST_CASE_METHOD(SpecFixture, "A bad base pin carries the digest parser's message, under the pin",
                 "[spec][errors]") {
  make_oci_layout("base");
  CHECK(errors("lockstep: 1\nname: a\nbase: {oci: ./base@sha256:abc}\n") ==
        path() + ":3:20: error: base.oci: invalid digest 'sha256:abc': sha256 needs exactly 64 lowercase hex "
                 "digits\n"
                 "    3 | base: {oci: ./base@sha256:abc}\n"
                 "      |                    ^~~~~~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A missing base path is an error at the path", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nbase:\n  oci: \"./img@sha256:" + k_hex + "\"\n") ==
        path() + ":4:9: error: base.oci: no such file or directory: ./img (resolved to " + path("img") +
            ")\n"
            "    4 |   oci: \"./img@sha256:" +
            k_hex +
            "\"\n"
            "      |         ^~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A base directory that is not an OCI layout is an error", "[spec][errors]") {
  write("img/readme", "x");
  CHECK(errors("lockstep: 1\nname: a\nbase: {oci: img}\n") ==
        path() + ":3:13: error: base.oci: " + path("img") +
            " is not an OCI layout (it has no oci-layout file)\n"
            "    3 | base: {oci: img}\n"
            "      |             ^~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A base that is neither scratch nor a map is an error", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nbase: alpine:3.19\n") ==
        path() +
            ":3:7: error: base: expected 'scratch' or a map {image: REF}, {oci: PATH} or {debian: SUITE}, "
            "found 'alpine:3.19' (an image in a registry is {image: docker://alpine:3.19})\n"
            "    3 | base: alpine:3.19\n"
            "      |       ^~~~~~~~~~~\n");
  CHECK(errors("lockstep: 1\nname: a\nbase: [x]\n") ==
        path() +
            ":3:7: error: base: expected 'scratch' or a map {image: REF}, {oci: PATH} or {debian: SUITE}, "
            "found a list\n"
            "    3 | base: [x]\n"
            "      |       ^\n");
}

TEST_CASE_METHOD(SpecFixture, "A base map needs oci or image, has known keys only, and a valid tag",
                 "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nbase: {imag: alpine, tag: \"bad tag\"}\n") ==
        path() +
            ":3:7: error: base: missing 'image' or 'oci' (e.g. {image: docker://debian:bookworm} or {oci: "
            "./base}, an OCI layout directory or OCI archive)\n"
            "    3 | base: {imag: alpine, tag: \"bad tag\"}\n"
            "      |       ^\n" +
            path() +
            ":3:8: error: base.imag: unknown key; did you mean 'image'?\n"
            "    3 | base: {imag: alpine, tag: \"bad tag\"}\n"
            "      |        ^~~~\n" +
            path() +
            ":3:27: error: base.tag: invalid tag 'bad tag': letters and digits separated by '-', '.', '_', "
            "':', '@', '+' or '/'\n"
            "    3 | base: {imag: alpine, tag: \"bad tag\"}\n"
            "      |                           ^~~~~~~~~\n"
            "3 errors\n");
}

TEST_CASE_METHOD(SpecFixture, "A registry base is a docker:// reference, normalised as Docker does",
                 "[spec]") {
  Spec spec = load_ok("lockstep: 1\nname: a\nbase: {image: \"docker://debian:bookworm\"}\n");
  CHECK(spec.base.kind == BaseImage::Kind::registry);
  CHECK(spec.base.remote.str() == "docker.io/library/debian:bookworm");
  CHECK_FALSE(spec.base.pin);
  CHECK(spec.base.key == "base.image");
  CHECK(spec.base.location.line == 3);
  CHECK(spec.base.location.column == 15); // the `image` value: build errors about the image point at it
  CHECK(spec.needs_lock());               // its tag may move: the lock pins the manifest

  spec = load_ok("lockstep: 1\nname: a\nbase:\n  image: docker://127.0.0.1:5000/team/app:v1@sha256:" + k_hex +
                 "\n");
  CHECK(spec.base.kind == BaseImage::Kind::registry);
  CHECK(spec.base.remote.host == "127.0.0.1:5000");
  CHECK(spec.base.remote.repository == "team/app");
  CHECK(spec.base.remote.tag == "v1");
  REQUIRE(spec.base.pin);
  CHECK(spec.base.pin->str() == "sha256:" + k_hex);
  CHECK(spec.base.remote.digest == spec.base.pin);
}

TEST_CASE_METHOD(SpecFixture, "image: oci: and oci-archive: name the same base as oci: does", "[spec]") {
  make_oci_layout("layouts/base");
  write("base.tar", "load_spec only checks that it is a file");
  Spec spec = load_ok("lockstep: 1\nname: a\nbase: {image: \"oci:layouts/base:v1.0\"}\n");
  CHECK(spec.base.kind == BaseImage::Kind::oci);
  CHECK(spec.base.path == dir() / "layouts/base");
  CHECK(spec.base.path_text == "layouts/base");
  CHECK(spec.base.tag == "v1.0");
  CHECK(spec.base.key == "base.image");
  const Digest same = load_ok("lockstep: 1\nname: a\nbase: {oci: ./layouts/base, tag: v1.0}\n").digest;
  CHECK(spec.digest == same);

  spec = load_ok("lockstep: 1\nname: a\nbase: {image: \"oci-archive:base.tar\"}\n");
  CHECK(spec.base.kind == BaseImage::Kind::oci);
  CHECK(spec.base.path == dir() / "base.tar");
  CHECK(spec.base.tag.empty());
}

TEST_CASE_METHOD(SpecFixture, "A bad base image reference is an error at base.image", "[spec][errors]") {
  make_oci_layout("layout");
  write("base.tar", "x");
  auto one = [&](const std::string& value) {
    return errors("lockstep: 1\nname: a\nbase: {image: \"" + value + "\"}\n");
  };
  // The message at `column`, underlined for `length` characters.
  auto at = [&](int column, std::size_t length, const std::string& message, const std::string& value) {
    return path() + ":3:" + std::to_string(column) + ": error: base.image: " + message +
           "\n    3 | base: {image: \"" + value + "\"}\n      | " + std::string(column - 1, ' ') + "^" +
           std::string(length - 1, '~') + "\n";
  };
  const std::string forms =
      "docker://[HOST[:PORT]/]REPO[:TAG][@sha256:HEX], oci:DIR[:TAG] or oci-archive:FILE[:TAG]";
  // The whole value, quotes included, when the reference is wrong.
  CHECK(one("debian:bookworm") ==
        at(15, 17,
           "'debian:bookworm' names no transport; expected " + forms + " (e.g. docker://debian:bookworm)",
           "debian:bookworm"));
  CHECK(one("sif:app.sif") == at(15, 13, "'sif:' images can't be a base; expected " + forms, "sif:app.sif"));
  CHECK(one("oras://h.io/a:v1") ==
        at(15, 18, "'oras://' images can't be a base; expected " + forms, "oras://h.io/a:v1"));
  CHECK(one("docker://Team/App") ==
        at(15, 19, "invalid image reference 'Team/App': repository names must be lower case",
           "docker://Team/App"));
  CHECK(one("docker://h.io/a@sha256:abc") ==
        at(15, 28,
           "invalid image reference 'h.io/a@sha256:abc': 'sha256:abc' is not a sha256 digest (sha256: and 64 "
           "lower-case hex digits)",
           "docker://h.io/a@sha256:abc"));
  // The path alone when the file is wrong.
  CHECK(one("oci:missing") ==
        at(20, 7, "no such file or directory: missing (resolved to " + path("missing") + ")", "oci:missing"));
  CHECK(one("oci:base.tar") == at(20, 8,
                                  path("base.tar") + " is not an OCI layout directory (it has no oci-layout "
                                                     "file); an OCI archive is oci-archive:FILE",
                                  "oci:base.tar"));
  CHECK(one("oci-archive:layout") ==
        at(28, 6, path("layout") + " is not an OCI archive file; an OCI layout directory is oci:DIR",
           "oci-archive:layout"));
}

TEST_CASE_METHOD(SpecFixture, "A base.image map takes no tag and no oci beside it", "[spec][errors]") {
  make_oci_layout("layout");
  CHECK(errors("lockstep: 1\nname: a\nbase: {image: \"docker://a\", tag: v1}\n") ==
        path() + ":3:29: error: base.tag: with 'image' the tag is part of the reference (e.g. {image: "
                 "docker://debian:bookworm})\n"
                 "    3 | base: {image: \"docker://a\", tag: v1}\n"
                 "      |                             ^~~\n");
  CHECK(errors("lockstep: 1\nname: a\nbase: {oci: layout, image: \"docker://a\"}\n") ==
        path() + ":3:21: error: base.image: a base is either {image: REF} or {oci: PATH}, not both\n"
                 "    3 | base: {oci: layout, image: \"docker://a\"}\n"
                 "      |                     ^~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "base.python names an image base's own interpreter, normalised", "[spec]") {
  make_oci_layout("layout");
  Spec spec = load_ok("lockstep: 1\nname: a\nbase: {oci: layout, python: /usr/local//bin/./python3}\n");
  CHECK(spec.base.python == "/usr/local/bin/python3");
  CHECK(spec.base.python_location.line == 3);
  Spec image = load_ok(
      "lockstep: 1\nname: a\nbase: {image: \"docker://python:3.11-slim\", python: /usr/local/bin/python3}\n");
  CHECK(image.base.python == "/usr/local/bin/python3");
  // It is part of what the spec asks for.
  Spec plain = load_ok("lockstep: 1\nname: a\nbase: {image: \"docker://python:3.11-slim\"}\n");
  CHECK_FALSE(plain.digest == image.digest);

  CHECK(errors("lockstep: 1\nname: a\nbase: {oci: layout, python: usr/bin/python3}\n") ==
        path() +
            ":3:29: error: base.python: invalid interpreter path 'usr/bin/python3': expected an absolute "
            "path in the image without '..' or spaces, e.g. /usr/local/bin/python3.11\n"
            "    3 | base: {oci: layout, python: usr/bin/python3}\n"
            "      |                             ^~~~~~~~~~~~~~~\n");
  CHECK_THAT(errors("lockstep: 1\nname: a\nbase: {oci: layout, python: /opt/../python3}\n"),
             Catch::Contains("base.python: invalid interpreter path '/opt/../python3'"));
  CHECK_THAT(errors("lockstep: 1\nname: a\nbase: {debian: bookworm, python: /usr/bin/python3}\n"),
             Catch::Contains("base.python: a Debian base's Python is its python3 package"));
}

// ---------------------------------------------------------------------------------------------
// copy

TEST_CASE_METHOD(SpecFixture, "copy.to must be absolute", "[spec][errors]") {
  write("f", "x");
  CHECK(errors("lockstep: 1\nname: a\ncopy:\n  - {from: f, to: opt/f}\n") ==
        path() +
            ":4:19: error: copy[0].to: must be an absolute path in the image (e.g. /opt/app), found 'opt/f'\n"
            "    4 |   - {from: f, to: opt/f}\n"
            "      |                   ^~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "copy.to must not contain '..'", "[spec][errors]") {
  write("f", "x");
  CHECK(
      errors("lockstep: 1\nname: a\ncopy:\n  - {from: f, to: /opt/../../etc/f}\n") ==
      path() +
          ":4:19: error: copy[0].to: '/opt/../../etc/f' contains a '..' component; paths in the image can't "
          "leave its root\n"
          "    4 |   - {from: f, to: /opt/../../etc/f}\n"
          "      |                   ^~~~~~~~~~~~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A missing copy.from is an error at the from value", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\ncopy:\n  - from: ./files\n    to: /opt\n") ==
        path() + ":4:11: error: copy[0].from: no such file or directory: ./files (resolved to " +
            path("files") +
            ")\n"
            "    4 |   - from: ./files\n"
            "      |           ^~~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "copy.from outside the spec's directory is an error unless allowed",
                 "[spec][errors]") {
  write("secret", "s");
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\ncopy: [{from: ../secret, to: /s}]\n");
  CHECK(errors_of("proj/lockstep.yaml") ==
        path("proj/lockstep.yaml") +
            ":3:15: error: copy[0].from: ../secret is outside the spec's directory " + path("proj") +
            " (resolved to " + path("secret") +
            "); use --allow-outside to allow it\n"
            "    3 | copy: [{from: ../secret, to: /s}]\n"
            "      |               ^~~~~~~~~\n");

  LoadOptions allow;
  allow.allow_outside = true;
  Result<Spec> spec = load("proj/lockstep.yaml", allow);
  REQUIRE(spec.ok());
  REQUIRE(spec->copy.size() == 1);
  CHECK(spec->copy[0].from == dir() / "secret");
}

TEST_CASE_METHOD(SpecFixture, "An absolute copy.from outside the spec's directory is an escape too",
                 "[spec][errors]") {
  write("secret", "s");
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\ncopy: [{from: " + path("secret") + ", to: /s}]\n");
  CHECK(errors_of("proj/lockstep.yaml") ==
        path("proj/lockstep.yaml") + ":3:15: error: copy[0].from: " + path("secret") +
            " is outside the spec's directory " + path("proj") + " (resolved to " + path("secret") +
            "); use --allow-outside to allow it\n"
            "    3 | copy: [{from: " +
            path("secret") + ", to: /s}]\n" + "      |               ^" +
            std::string(path("secret").size() - 1, '~') + "\n");
}

TEST_CASE_METHOD(SpecFixture, "A copy.from symlink that leads outside is an escape", "[spec][errors]") {
  write("secret/key", "s");
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\ncopy: [{from: ./link/key, to: /s}]\n");
  fs::create_directory_symlink("../secret", dir() / "proj/link");
  CHECK(errors_of("proj/lockstep.yaml") == path("proj/lockstep.yaml") +
                                               ":3:15: error: copy[0].from: ./link/key leads outside " +
                                               path("proj") + " through a symlink (to " + path("secret/key") +
                                               "); use --allow-outside to allow it\n"
                                               "    3 | copy: [{from: ./link/key, to: /s}]\n"
                                               "      |               ^~~~~~~~~~\n");

  LoadOptions allow;
  allow.allow_outside = true;
  CHECK(load("proj/lockstep.yaml", allow).ok());
}

TEST_CASE_METHOD(SpecFixture, "A bad mode says what a mode looks like", "[spec][errors]") {
  write("f", "x");
  CHECK(
      errors("lockstep: 1\nname: a\ncopy: [{from: f, to: /f, mode: 0855}]\n") ==
      path() +
          ":3:32: error: copy[0].mode: invalid mode '0855': expected octal permission bits like 0755 or 0644 "
          "(at most 07777), or 'preserve'\n"
          "    3 | copy: [{from: f, to: /f, mode: 0855}]\n"
          "      |                                ^~~~\n");
  CHECK(errors("lockstep: 1\nname: a\ncopy: [{from: f, to: /f, mode: 017777}]\n") ==
        path() +
            ":3:32: error: copy[0].mode: invalid mode '017777': expected octal permission bits like 0755 or "
            "0644 (at most 07777), or 'preserve'\n"
            "    3 | copy: [{from: f, to: /f, mode: 017777}]\n"
            "      |                                ^~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "An owner by name is an error", "[spec][errors]") {
  write("f", "x");
  CHECK(errors("lockstep: 1\nname: a\ncopy: [{from: f, to: /f, owner: root}]\n") ==
        path() + ":3:33: error: copy[0].owner: owner must be numeric UID[:GID] or 'preserve', found 'root'\n"
                 "    3 | copy: [{from: f, to: /f, owner: root}]\n"
                 "      |                                 ^~~~\n");
  CHECK(errors("lockstep: 1\nname: a\ncopy: [{from: f, to: /f, owner: \"1000:\"}]\n") ==
        path() + ":3:33: error: copy[0].owner: owner must be numeric UID[:GID] or 'preserve', found '1000:'\n"
                 "    3 | copy: [{from: f, to: /f, owner: \"1000:\"}]\n"
                 "      |                                 ^~~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A copy item needs from and to, and known keys only", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\ncopy:\n  - {src: f}\n") ==
        path() +
            ":4:5: error: copy[0]: missing 'from' (the file or directory to copy)\n"
            "    4 |   - {src: f}\n"
            "      |     ^\n" +
            path() +
            ":4:5: error: copy[0]: missing 'to' (the absolute path in the image)\n"
            "    4 |   - {src: f}\n"
            "      |     ^\n" +
            path() +
            ":4:6: error: copy[0].src: unknown key; expected one of: from, git, mode, owner, rev, to\n"
            "    4 |   - {src: f}\n"
            "      |      ^~~\n"
            "3 errors\n");
}

TEST_CASE_METHOD(SpecFixture, "copy must be a list of maps", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\ncopy: {from: f, to: /f}\n") ==
        path() + ":3:7: error: copy: expected a list, found a map\n"
                 "    3 | copy: {from: f, to: /f}\n"
                 "      |       ^\n");
  CHECK(errors("lockstep: 1\nname: a\ncopy: [./f]\n") ==
        path() + ":3:8: error: copy[0]: expected a map {from: HOST_PATH, to: IMAGE_PATH}, found a string\n"
                 "    3 | copy: [./f]\n"
                 "      |        ^~~\n");
}

// ---------------------------------------------------------------------------------------------
// env, labels, entrypoint, cmd, workdir, user, outputs

TEST_CASE_METHOD(SpecFixture, "A bad env name is an error at the name", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nenv:\n  MY-VAR: x\n  1ST: y\n") ==
        path() +
            ":4:3: error: env.MY-VAR: invalid variable name 'MY-VAR': use letters, digits and '_', not "
            "starting "
            "with a digit\n"
            "    4 |   MY-VAR: x\n"
            "      |   ^~~~~~\n" +
            path() +
            ":5:3: error: env.1ST: invalid variable name '1ST': use letters, digits and '_', not starting "
            "with a digit\n"
            "    5 |   1ST: y\n"
            "      |   ^~~\n"
            "2 errors\n");
}

TEST_CASE_METHOD(SpecFixture, "An env value must be a scalar", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nenv:\n  A:\n  B: [x]\n") ==
        path() +
            ":4:3: error: env.A: expected a value, found nothing; write \"\" for an empty string\n"
            "    4 |   A:\n"
            "      |   ^\n" +
            path() +
            ":5:6: error: env.B: expected a string, found a list\n"
            "    5 |   B: [x]\n"
            "      |      ^\n"
            "2 errors\n");
  CHECK(errors("lockstep: 1\nname: a\nenv: [A=1]\n") == path() +
                                                            ":3:6: error: env: expected a map, found a list\n"
                                                            "    3 | env: [A=1]\n"
                                                            "      |      ^\n");
}

TEST_CASE_METHOD(SpecFixture, "labels must be a map of scalars", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nlabels: team=ml\n") ==
        path() + ":3:9: error: labels: expected a map, found a string\n"
                 "    3 | labels: team=ml\n"
                 "      |         ^~~~~~~\n");
  CHECK(errors("lockstep: 1\nname: a\nlabels: {a: {b: c}}\n") ==
        path() + ":3:13: error: labels.a: expected a string, found a map\n"
                 "    3 | labels: {a: {b: c}}\n"
                 "      |             ^\n");
}

TEST_CASE_METHOD(SpecFixture, "An entrypoint written as a string gets the list hint", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nentrypoint: /bin/sh -c 'echo hi'\n") ==
        path() + ":3:13: error: entrypoint: expected a list, found a string; write it as a list, e.g. "
                 "[\"/bin/sh\", \"-c\", \"...\"]\n"
                 "    3 | entrypoint: /bin/sh -c 'echo hi'\n"
                 "      |             ^~~~~~~~~~~~~~~~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "cmd items must be strings", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\ncmd: [python, {x: 1}]\n") ==
        path() + ":3:15: error: cmd[1]: expected a string, found a map\n"
                 "    3 | cmd: [python, {x: 1}]\n"
                 "      |               ^\n");
  CHECK(errors("lockstep: 1\nname: a\ncmd: {a: b}\n") ==
        path() + ":3:6: error: cmd: expected a list, found a map\n"
                 "    3 | cmd: {a: b}\n"
                 "      |      ^\n");
}

TEST_CASE_METHOD(SpecFixture, "workdir must be an absolute image path", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nworkdir: app\n") ==
        path() + ":3:10: error: workdir: must be an absolute path in the image (e.g. /opt/app), found 'app'\n"
                 "    3 | workdir: app\n"
                 "      |          ^~~\n");
  CHECK(errors("lockstep: 1\nname: a\nworkdir: /app/..\n") ==
        path() + ":3:10: error: workdir: '/app/..' contains a '..' component; paths in the image can't leave "
                 "its root\n"
                 "    3 | workdir: /app/..\n"
                 "      |          ^~~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "user must be NAME or UID with an optional group and no spaces",
                 "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nuser: \"app user\"\n") ==
        path() + ":3:7: error: user: invalid user 'app user': expected NAME or UID, optionally followed by "
                 ":GROUP or "
                 ":GID, without spaces\n"
                 "    3 | user: \"app user\"\n"
                 "      |       ^~~~~~~~~~\n");
  CHECK(errors("lockstep: 1\nname: a\nuser: \"a:b:c\"\n") ==
        path() +
            ":3:7: error: user: invalid user 'a:b:c': expected NAME or UID, optionally followed by :GROUP or "
            ":GID, without spaces\n"
            "    3 | user: \"a:b:c\"\n"
            "      |       ^~~~~~~\n");
  CHECK(errors("lockstep: 1\nname: a\nuser: \"\"\n") ==
        path() + ":3:7: error: user: expected a user, found an empty string\n"
                 "    3 | user: \"\"\n"
                 "      |       ^~\n");
}

TEST_CASE_METHOD(SpecFixture, "outputs has known keys and gzip or zstd compression", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\noutputs:\n  oci_archiv: x.tar\n  sif_compression: lzo\n  compression: "
               "xz\n") ==
        path() +
            ":4:3: error: outputs.oci_archiv: unknown key; did you mean 'oci_archive'?\n"
            "    4 |   oci_archiv: x.tar\n"
            "      |   ^~~~~~~~~~\n" +
            path() +
            ":5:20: error: outputs.sif_compression: expected 'gzip', 'zstd', 'xz' or 'lz4', found 'lzo'\n"
            "    5 |   sif_compression: lzo\n"
            "      |                    ^~~\n" +
            path() +
            ":6:16: error: outputs.compression: expected 'gzip' or 'zstd', found 'xz'\n"
            "    6 |   compression: xz\n"
            "      |                ^~\n"
            "3 errors\n");
  CHECK(errors("lockstep: 1\nname: a\noutputs: [oci]\n") ==
        path() + ":3:10: error: outputs: expected a map, found a list\n"
                 "    3 | outputs: [oci]\n"
                 "      |          ^\n");
}

// ---------------------------------------------------------------------------------------------
// Many errors at once

TEST_CASE_METHOD(SpecFixture, "Every error of a spec is reported together, in source order",
                 "[spec][errors]") {
  write("f", "x");
  CHECK(errors("lockstep: 1\n"
               "name: Bad Name\n"
               "platfrom: linux/amd64\n"
               "copy:\n"
               "  - {from: f, to: rel, mode: 999}\n"
               "env: {ok: 1, bad-name: 2}\n"
               "cmd: echo\n") ==
        path() +
            ":2:7: error: name: invalid name 'Bad Name': use lowercase letters, digits and separators ('.', "
            "'_', "
            "'__', '-'), with '/' between components, e.g. 'my-app'\n"
            "    2 | name: Bad Name\n"
            "      |       ^~~~~~~~\n" +
            path() +
            ":3:1: error: platfrom: unknown key; did you mean 'platform'?\n"
            "    3 | platfrom: linux/amd64\n"
            "      | ^~~~~~~~\n" +
            path() +
            ":5:19: error: copy[0].to: must be an absolute path in the image (e.g. /opt/app), found 'rel'\n"
            "    5 |   - {from: f, to: rel, mode: 999}\n"
            "      |                   ^~~\n" +
            path() +
            ":5:30: error: copy[0].mode: invalid mode '999': expected octal permission bits like 0755 or "
            "0644 (at most 07777), or 'preserve'\n"
            "    5 |   - {from: f, to: rel, mode: 999}\n"
            "      |                              ^~~\n" +
            path() +
            ":6:14: error: env.bad-name: invalid variable name 'bad-name': use letters, digits and '_', "
            "not starting with a digit\n"
            "    6 | env: {ok: 1, bad-name: 2}\n"
            "      |              ^~~~~~~~\n" +
            path() +
            ":7:6: error: cmd: expected a list, found a string; write it as a list, e.g. [\"/bin/sh\", "
            "\"-c\", \"...\"]\n"
            "    7 | cmd: echo\n"
            "      |      ^~~~\n"
            "6 errors\n");
}

TEST_CASE_METHOD(SpecFixture, "outputs.sif is a path and sif_compression defaults to gzip", "[spec]") {
  auto spec = load_ok("lockstep: 1\nname: a\noutputs: {sif: out/a.sif}\n");
  REQUIRE(spec.outputs.sif);
  CHECK(*spec.outputs.sif == dir() / "out/a.sif");
  CHECK(spec.outputs.sif_compression == SquashfsCompressor::gzip);
  auto zstd = load_ok("lockstep: 1\nname: a\noutputs: {sif: out/a.sif, sif_compression: zstd}\n");
  CHECK(zstd.outputs.sif_compression == SquashfsCompressor::zstd);
  // The default compressor written out or left out is the same spec; another one is not.
  auto gzip = load_ok("lockstep: 1\nname: a\noutputs: {sif_compression: gzip}\n");
  CHECK(gzip.digest == load_ok("lockstep: 1\nname: a\n").digest);
  CHECK(zstd.digest != gzip.digest);
}

TEST_CASE_METHOD(SpecFixture, "run steps are commands or maps with sh and network", "[spec]") {
  auto spec =
      load_ok("lockstep: 1\nname: a\nrun:\n  - echo hi > /x\n  - {sh: apt-get update, network: true}\n");
  REQUIRE(spec.run.size() == 2);
  CHECK(spec.run[0].sh == "echo hi > /x");
  CHECK_FALSE(spec.run[0].network);
  CHECK(spec.run[1].sh == "apt-get update");
  CHECK(spec.run[1].network);
  CHECK(spec.run[1].location.line == 5);
  // Steps change the image, so they change the digest; their order matters.
  auto swapped =
      load_ok("lockstep: 1\nname: a\nrun:\n  - {sh: apt-get update, network: true}\n  - echo hi > /x\n");
  CHECK(swapped.digest != spec.digest);
  CHECK(load_ok("lockstep: 1\nname: a\nrun: []\n").digest == load_ok("lockstep: 1\nname: a\n").digest);
}

TEST_CASE_METHOD(SpecFixture, "run steps are validated", "[spec][errors]") {
  CHECK(errors("lockstep: 1\nname: a\nrun: make\n") ==
        path() + ":3:6: error: run: expected a list of commands, found a string\n"
                 "    3 | run: make\n"
                 "      |      ^~~~\n");
  CHECK(errors("lockstep: 1\nname: a\nrun:\n  - {network: yes, shell: x}\n  - \"\"\n") ==
        path() +
            ":4:5: error: run[0]: missing 'sh' (the shell command to run)\n"
            "    4 |   - {network: yes, shell: x}\n"
            "      |     ^\n" +
            path() +
            ":4:15: error: run[0].network: expected true or false, found 'yes'\n"
            "    4 |   - {network: yes, shell: x}\n"
            "      |               ^~~\n" +
            path() +
            ":4:20: error: run[0].shell: unknown key; expected one of: network, sh\n"
            "    4 |   - {network: yes, shell: x}\n"
            "      |                    ^~~~~\n" +
            path() +
            ":5:5: error: run[1]: expected a shell command, found an empty string\n"
            "    5 |   - \"\"\n"
            "      |     ^~\n"
            "4 errors\n");
}

TEST_CASE("snapshot services of known archives, and a pool file's snapshot URL", "[spec][snapshot]") {
  using lockstep::envspec::known_snapshot_base;
  using lockstep::envspec::snapshot_file_url;
  CHECK(known_snapshot_base("http://deb.debian.org/debian") == "https://snapshot.debian.org/archive/debian");
  CHECK(known_snapshot_base("https://security.debian.org/debian-security/") ==
        "https://snapshot.debian.org/archive/debian-security");
  CHECK(known_snapshot_base("http://archive.ubuntu.com/ubuntu") == "https://snapshot.ubuntu.com/ubuntu");
  CHECK(known_snapshot_base("http://mirror.example.org/debian").empty());
  CHECK(known_snapshot_base("http://deb.debian.org/debian/extra").empty());
  CHECK(
      snapshot_file_url("https://snapshot.debian.org/archive/debian", "http://deb.debian.org/debian",
                        "http://deb.debian.org/debian/pool/main/a/attr/attr_2.5.1-4_amd64.deb",
                        "Sat, 11 Jul 2026 20:16:37 UTC") ==
      "https://snapshot.debian.org/archive/debian/20260712T021637Z/pool/main/a/attr/attr_2.5.1-4_amd64.deb");
  CHECK(snapshot_file_url("https://s/archive/debian", "http://deb.debian.org/debian", "http://other/x.deb",
                          "Sat, 11 Jul 2026 20:16:37 UTC")
            .empty());
  CHECK(snapshot_file_url("https://s/archive/debian", "http://d/debian", "http://d/debian/pool/x.deb",
                          "garbage")
            .empty());
  CHECK(
      snapshot_file_url("", "http://d/debian", "http://d/debian/pool/x.deb", "Sat, 11 Jul 2026 20:16:37 UTC")
          .empty());
}
