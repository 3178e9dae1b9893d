// The canonical form and spec digest: what it ignores, what it notices, and a pinned golden value.
#include "envspec/spec/spec.hpp"
#include "support/codec/digest.hpp"
#include "tests/unit/envspec/fixtures/spec_fixture.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

using namespace lockstep;
using envspec::Spec;
using test::SpecFixture;
namespace fs = std::filesystem;

namespace {

// A spec fixture that loads specs from sub-directories and returns their digests.
class CanonicalFixture : public SpecFixture {
public:
  CanonicalFixture() {
    for (const char* d : {"one", "two"}) {
      write(std::string(d) + "/files/app.py", "print('hi')\n");
      make_oci_layout(std::string(d) + "/base");
    }
  }

  /// Writes `text` as dir()/sub/lockstep.yaml and returns the loaded spec.
  Spec spec_in(const std::string& sub, const std::string& text) const {
    write(sub + "/lockstep.yaml", text);
    Result<Spec> spec = load(sub + "/lockstep.yaml");
    if (!spec) {
      FAIL(spec.error().message);
    }
    return *spec;
  }

  /// The digest of `text` written as dir()/sub/lockstep.yaml.
  std::string digest_in(const std::string& sub, const std::string& text) const {
    return spec_in(sub, text).digest.str();
  }
};

const std::string k_reference = "lockstep: 1\n"
                                "name: app\n"
                                "platform: linux/amd64\n"
                                "copy:\n"
                                "  - {from: ./files, to: /opt/app/, mode: 0755}\n"
                                "env:\n"
                                "  B: two\n"
                                "  A: one\n"
                                "labels: {team: ml}\n"
                                "cmd: [python, /opt/app/app.py]\n"
                                "outputs: {oci: build/app}\n";

} // namespace

TEST_CASE_METHOD(CanonicalFixture, "The digest is the sha256 of the canonical form's compact dump",
                 "[canonical]") {
  Spec spec = spec_in("one", k_reference);
  CHECK(spec.digest == sha256_of(spec.canonical.dump()));
  CHECK(spec.canonical.at("lockstep") == 1);
  CHECK_FALSE(spec.canonical.contains("extends"));
}

TEST_CASE_METHOD(CanonicalFixture, "The canonical form of a fixed spec is pinned (golden)", "[canonical]") {
  Spec spec =
      spec_in("one", "lockstep: 1\n"
                     "name: golden\n"
                     "base: {oci: ./base@sha256:" +
                         std::string(64, '0') +
                         ", tag: v1}\n"
                         "copy:\n"
                         "  - {from: files/app.py, to: /opt/app/app.py, mode: 0755, owner: 1000:1000}\n"
                         "  - {from: files, to: /srv/, mode: preserve, owner: preserve}\n"
                         "env: {PYTHONUNBUFFERED: 1, LANG: C.UTF-8}\n"
                         "labels: {org.opencontainers.image.title: golden}\n"
                         "entrypoint: [python]\n"
                         "cmd: [/opt/app/app.py]\n"
                         "workdir: /opt/app\n"
                         "user: 1000:1000\n"
                         "outputs: {oci: build/golden, docker_archive: /var/tmp/golden.tar}\n");
  // A change to either line changes every spec digest ever computed: it must be deliberate.
  CHECK(
      spec.canonical.dump() ==
      R"({"base":{"oci":"base","pin":"sha256:0000000000000000000000000000000000000000000000000000000000000000",)"
      R"("tag":"v1"},"cmd":["/opt/app/app.py"],"copy":[{"from":"files/app.py","mode":"0755",)"
      R"("owner":"1000:1000","to":"/opt/app/app.py"},{"from":"files","mode":"preserve","owner":"preserve",)"
      R"("to":"/srv/"}],"entrypoint":["python"],"env":{"LANG":"C.UTF-8","PYTHONUNBUFFERED":"1"},)"
      R"("labels":{"org.opencontainers.image.title":"golden"},"lockstep":1,"name":"golden",)"
      R"("outputs":{"compression":"gzip"},)"
      R"("platform":"linux/amd64","user":"1000:1000","workdir":"/opt/app"})");
  CHECK(spec.digest.str() == "sha256:07ace866b2924297d605d08729cef1249355e6c15571ad28a7546314428c0e66");
}

TEST_CASE_METHOD(CanonicalFixture, "The digest ignores key order, comments, whitespace and YAML style",
                 "[canonical]") {
  const std::string reference = digest_in("one", k_reference);
  CHECK(digest_in("one", "# The app image.\n"
                         "outputs:\n"
                         "    oci: build/app   # where it goes\n"
                         "cmd:\n"
                         "    - python\n"
                         "    - /opt/app/app.py\n"
                         "labels:\n"
                         "    team: ml\n"
                         "env: {A: one, B: two}\n"
                         "copy: [{mode: \"0755\", to: \"/opt/app/\", from: \"./files\"}]\n"
                         "\n\n"
                         "name: 'app'\n"
                         "lockstep:   1\n") == reference);
}

TEST_CASE_METHOD(CanonicalFixture, "The digest applies defaults, so writing them out changes nothing",
                 "[canonical]") {
  const std::string implicit = digest_in("one", "lockstep: 1\nname: app\n");
  CHECK(digest_in("one", "lockstep: 1\n"
                         "name: app\n"
                         "platform: linux/amd64\n"
                         "base: scratch\n"
                         "copy: []\n"
                         "env: {}\n"
                         "labels: {}\n"
                         "outputs: {compression: gzip}\n") == implicit);
}

TEST_CASE_METHOD(CanonicalFixture, "Equivalent spellings of modes, owners and paths give the same digest",
                 "[canonical]") {
  const std::string reference = digest_in(
      "one", "lockstep: 1\nname: app\ncopy: [{from: files, to: /opt/app, mode: 0644, owner: 7:7}]\n");
  CHECK(digest_in("one",
                  "lockstep: 1\nname: app\ncopy: [{from: ./files/, to: /opt//app/., mode: \"644\", owner: "
                  "\"7\"}]\n") == reference);
}

TEST_CASE_METHOD(CanonicalFixture, "The digest ignores how extends splits the content", "[canonical]") {
  const std::string single = digest_in("one", k_reference);
  write("one/team.yaml", "# shared by the team\n"
                         "platform: linux/amd64\n"
                         "env: {B: two}\n"
                         "labels: {team: ml}\n"
                         "copy:\n"
                         "  - {from: ./files, to: /opt/app/, mode: 0755}\n");
  CHECK(digest_in("one", "lockstep: 1\n"
                         "extends: [team.yaml]\n"
                         "name: app\n"
                         "env: {A: one}\n"
                         "cmd: [python, /opt/app/app.py]\n"
                         "outputs: {oci: build/app}\n") == single);
}

TEST_CASE_METHOD(CanonicalFixture,
                 "Paths from an extended file in another directory are written relative to the spec",
                 "[canonical]") {
  write("one/sub/files/f", "x");
  const std::string single = digest_in("one", "lockstep: 1\nname: app\ncopy: [{from: sub/files, to: /x}]\n");
  write("one/sub/part.yaml", "copy: [{from: files, to: /x}]\n");
  CHECK(digest_in("one", "lockstep: 1\nname: app\nextends: sub/part.yaml\n") == single);
}

TEST_CASE_METHOD(CanonicalFixture, "The same spec in two directories has the same digest", "[canonical]") {
  CHECK(digest_in("one", k_reference) == digest_in("two", k_reference));
  const std::string with_base =
      "lockstep: 1\nname: app\nbase: {oci: base}\noutputs: {oci_archive: /var/tmp/x.tar}\n";
  CHECK(digest_in("one", with_base) == digest_in("two", with_base));
}

TEST_CASE_METHOD(CanonicalFixture, "Changing any value changes the digest", "[canonical]") {
  const std::string reference = digest_in("one", k_reference);
  auto changed = [&](const std::string& from, const std::string& to) {
    std::string text = k_reference;
    const std::size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    return digest_in("one", text);
  };
  CHECK(changed("name: app", "name: app2") != reference);
  CHECK(changed("platform: linux/amd64", "platform: linux/arm64") != reference);
  CHECK(changed("mode: 0755", "mode: 0644") != reference);
  CHECK(changed("mode: 0755", "mode: preserve") != reference);
  CHECK(changed("to: /opt/app/", "to: /opt/app") != reference);
  CHECK(changed("B: two", "B: three") != reference);
  CHECK(changed("team: ml", "team: ml2") != reference);
  CHECK(changed("cmd: [python, /opt/app/app.py]", "cmd: [/opt/app/app.py, python]") != reference);
  CHECK(changed("cmd: [python, /opt/app/app.py]", "entrypoint: [python, /opt/app/app.py]") != reference);
  CHECK(changed("outputs: {oci: build/app}", "outputs: {oci: build/app, compression: zstd}") != reference);
  // Where the image is written is not what it is.
  CHECK(changed("outputs: {oci: build/app}", "outputs: {oci: build/other}") == reference);
  CHECK(changed("labels: {team: ml}", "labels: {team: ml}\nworkdir: /opt") != reference);
  CHECK(changed("labels: {team: ml}", "labels: {team: ml}\nuser: \"1000\"") != reference);
}

TEST_CASE_METHOD(CanonicalFixture, "The order of copy items matters", "[canonical]") {
  const std::string ab =
      digest_in("one", "lockstep: 1\nname: app\ncopy: [{from: files, to: /a}, {from: files, to: /b}]\n");
  const std::string ba =
      digest_in("one", "lockstep: 1\nname: app\ncopy: [{from: files, to: /b}, {from: files, to: /a}]\n");
  CHECK(ab != ba);
}

TEST_CASE_METHOD(CanonicalFixture, "A registry base enters the digest normalised, its pin too",
                 "[canonical]") {
  auto with_image = [&](const std::string& ref) {
    return digest_in("one", "lockstep: 1\nname: app\nbase: {image: \"" + ref + "\"}\n");
  };
  const std::string short_name = with_image("docker://debian:bookworm");
  CHECK(spec_in("one", "lockstep: 1\nname: app\nbase: {image: \"docker://debian:bookworm\"}\n")
            .canonical["base"] == nlohmann::json{{"image", "docker://docker.io/library/debian:bookworm"}});
  CHECK(with_image("docker://docker.io/library/debian:bookworm") == short_name);
  CHECK(with_image("docker://index.docker.io/library/debian:bookworm") == short_name);
  CHECK(with_image("docker://debian:trixie") != short_name);
  CHECK(with_image("docker://debian:bookworm@sha256:" + std::string(64, 'a')) != short_name);
  CHECK(with_image("docker://debian:bookworm@sha256:" + std::string(64, 'a')) !=
        with_image("docker://debian:bookworm@sha256:" + std::string(64, 'b')));
  CHECK(digest_in("one", "lockstep: 1\nname: app\nbase: {oci: base}\n") != short_name);
}

TEST_CASE_METHOD(CanonicalFixture,
                 "An apt repository with several suites lists them in order; one suite is 'suite'",
                 "[canonical][repos]") {
  write("one/keys/ubuntu.gpg", "key");
  const auto repos_of = [this](const std::string& repo) {
    return spec_in("one", "lockstep: 1\nname: app\nrepos:\n  - " + repo + "\n").canonical.at("repos").dump();
  };
  // The form locks made before `suites:` have: a single suite must keep it, so they stay fresh.
  const std::string single =
      R"([{"apt":"http://archive.ubuntu.com/ubuntu","components":["main"],"suite":"jammy"}])";
  CHECK(repos_of("{apt: http://archive.ubuntu.com/ubuntu/, suite: jammy, components: [main], keyring: "
                 "keys/ubuntu.gpg}") == single);
  CHECK(repos_of("{apt: http://archive.ubuntu.com/ubuntu, suites: [jammy], components: [main], keyring: "
                 "keys/ubuntu.gpg}") == single);
  CHECK(repos_of("{apt: http://archive.ubuntu.com/ubuntu, suites: [jammy, jammy-updates], components: [main, "
                 "universe], keyring: keys/ubuntu.gpg}") ==
        R"([{"apt":"http://archive.ubuntu.com/ubuntu","components":["main","universe"],)"
        R"("suites":["jammy","jammy-updates"]}])");
  // The order of the suites is kept as written (it is the order their Release files are recorded in).
  CHECK(
      repos_of("{apt: http://archive.ubuntu.com/ubuntu, suites: [jammy-updates, jammy], components: [main], "
               "keyring: keys/ubuntu.gpg}") !=
      repos_of("{apt: http://archive.ubuntu.com/ubuntu, suites: [jammy, jammy-updates], components: [main], "
               "keyring: keys/ubuntu.gpg}"));
}

TEST_CASE_METHOD(CanonicalFixture,
                 "An apt entry's priority is read, checked, and in the digest only when given",
                 "[canonical][repos]") {
  write("one/keys/debian.gpg", "key");
  const std::string entry =
      "{apt: http://deb.debian.org/debian-security, suite: bookworm-security, components: "
      "[main], keyring: keys/debian.gpg";
  const auto spec_of = [&](const std::string& extra) {
    return spec_in("one", "lockstep: 1\nname: app\nrepos:\n  - " + entry + extra + "}\n");
  };
  const Spec plain = spec_of("");
  CHECK(plain.repos.at(0).priority == 500);
  CHECK(plain.canonical.at("repos").at(0).contains("priority") == false);
  CHECK(spec_of(", priority: 500").digest == plain.digest);
  const Spec overlay = spec_of(", priority: 1001");
  CHECK(overlay.repos.at(0).priority == 1001);
  CHECK(overlay.canonical.at("repos").at(0).at("priority") == 1001);
  CHECK(overlay.digest != plain.digest);
  for (const char* bad : {"0", "10000", "\"900\"", "high", "-1"}) {
    INFO(bad);
    write("one/lockstep.yaml", "lockstep: 1\nname: app\nrepos:\n  - " + entry + ", priority: " + bad + "}\n");
    CHECK(errors_of("one/lockstep.yaml")
              .find("repos[0].priority: expected an apt pin priority from 1 to 9999") != std::string::npos);
  }
}
