// The rule for host paths a spec makes lockstep read: inside the directory of the file that names
// them (through symlinks) unless --allow-outside, judged before anything is opened; and a file named
// in `extends` that is not a spec is reported without its text.
#include "envspec/load/load.hpp"
#include "envspec/spec/host_paths.hpp"
#include "envspec/spec/spec.hpp"
#include "tests/unit/envspec/fixtures/spec_fixture.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>

using namespace lockstep;
using envspec::LoadOptions;
using test::SpecFixture;
namespace fs = std::filesystem;

namespace {

const std::string k_secret = "root:$6$SECRET-HASH:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n";
const std::string k_not_shown =
    " (lockstep shows the text of a file named in 'extends' only once it reads as a "
    "spec: a YAML map of spec keys)\n";

LoadOptions allow_outside() {
  LoadOptions o;
  o.allow_outside = true;
  return o;
}

} // namespace

TEST_CASE_METHOD(SpecFixture, "extends of a file outside the spec's directory is refused unread",
                 "[host_paths][errors]") {
  write("shadow", k_secret);
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\nextends: [../shadow]\n");
  CHECK(errors_of("proj/lockstep.yaml") ==
        path("proj/lockstep.yaml") + ":3:11: error: extends[0]: ../shadow is outside the spec's directory " +
            path("proj") + " (resolved to " + path("shadow") +
            "); use --allow-outside to allow it\n"
            "    3 | extends: [../shadow]\n"
            "      |           ^~~~~~~~~\n");
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\nextends: " + path("shadow") + "\n");
  CHECK_THAT(errors_of("proj/lockstep.yaml"),
             Catch::Contains("error: extends: " + path("shadow") + " is outside the spec's directory") &&
                 !Catch::Contains("SECRET"));
  // Missing outside is "outside" too: nothing tells what exists there.
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\nextends: ../nope.yaml\n");
  CHECK_THAT(errors_of("proj/lockstep.yaml"),
             Catch::Contains("../nope.yaml is outside the spec's directory"));
}

TEST_CASE_METHOD(SpecFixture, "extends through a symlink that leads outside is refused unread",
                 "[host_paths][errors]") {
  write("shadow", k_secret);
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\nextends: team.yaml\n");
  fs::create_symlink(dir() / "shadow", dir() / "proj/team.yaml");
  CHECK(errors_of("proj/lockstep.yaml") == path("proj/lockstep.yaml") +
                                               ":3:10: error: extends: team.yaml leads outside " +
                                               path("proj") + " through a symlink (to " + path("shadow") +
                                               "); use --allow-outside to allow it\n"
                                               "    3 | extends: team.yaml\n"
                                               "      |          ^~~~~~~~~\n");
  // An extended file's own extends stays inside its own directory, as its copy.from does.
  write("proj/team/base.yaml", "extends: ../../shadow\n");
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\nextends: team/base.yaml\n");
  CHECK_THAT(errors_of("proj/lockstep.yaml"),
             Catch::Contains("error: extends: ../../shadow is outside the spec's "
                             "directory " +
                             path("proj/team")));
}

TEST_CASE_METHOD(SpecFixture, "extends may leave the spec's directory with --allow-outside", "[host_paths]") {
  write("team/base.yaml", "env: {TEAM: ml}\n");
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\nextends: [../team/base.yaml]\n");
  CHECK_THAT(errors_of("proj/lockstep.yaml"), Catch::Contains("is outside the spec's directory"));
  Result<envspec::Spec> spec = load("proj/lockstep.yaml", allow_outside());
  REQUIRE_OK(spec);
  CHECK(spec->env == std::vector<std::pair<std::string, std::string>>{{"TEAM", "ml"}});
}

TEST_CASE_METHOD(SpecFixture, "An extended file that is not a spec is reported without its text",
                 "[host_paths][errors]") {
  // Reached with --allow-outside, or inside the project: either way its lines are never shown.
  write("shadow", k_secret);
  write("netrc", "machine example.org login ci password SECRET\nmachine other.org\n");
  write("config.json", "{\"auths\": {\"registry.example.org\": {\"auth\": \"dXNlcjpTRUNSRVQ=\"}}}\n");
  write("broken.yaml", "password: [SECRET\n");
  write("tabs.yaml", "key: SECRET\n\tother: x\n");
  write("latin1.yaml", "token: SECRET\xe9\n");
  const LoadOptions allow = allow_outside();
  // "root:...:::" ends with a key indicator: a map whose key is the whole line.
  CHECK(errors("lockstep: 1\nname: a\nextends: shadow\n", allow) ==
        path("shadow") + ":1:1: error: not a spec: none of its top-level keys is a spec key" + k_not_shown);
  CHECK(errors("lockstep: 1\nname: a\nextends: netrc\n", allow) ==
        path("netrc") + ":1:1: error: not a spec: its top level is a string, not a map" + k_not_shown);
  CHECK(errors("lockstep: 1\nname: a\nextends: config.json\n", allow) ==
        path("config.json") + ":1:1: error: not a spec: none of its top-level keys is a spec key" +
            k_not_shown);
  const std::string broken = errors("lockstep: 1\nname: a\nextends: broken.yaml\n", allow);
  CHECK_THAT(broken, Catch::StartsWith(path("broken.yaml") + ":2:1: error: invalid YAML: ") &&
                         Catch::EndsWith(k_not_shown) && !Catch::Contains("SECRET") &&
                         !Catch::Contains(" | "));
  const std::string tabs = errors("lockstep: 1\nname: a\nextends: tabs.yaml\n", allow);
  CHECK_THAT(tabs, !Catch::Contains("SECRET") && !Catch::Contains(" | "));
  CHECK(errors("lockstep: 1\nname: a\nextends: latin1.yaml\n", allow) ==
        path("latin1.yaml") + ":1:14: error: not valid UTF-8 (byte 13); spec files must be UTF-8" +
            k_not_shown);
}

TEST_CASE_METHOD(SpecFixture, "An extended spec with a mistake still shows its line",
                 "[host_paths][errors]") {
  write("base.yaml", "env: {A: 1}\nlabls: {team: ml}\n");
  CHECK(errors("lockstep: 1\nname: a\nextends: base.yaml\n") ==
        path("base.yaml") + ":2:1: error: labls: unknown key; did you mean 'labels'?\n"
                            "    2 | labls: {team: ml}\n"
                            "      | ^~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "Every local path a spec reads is confined to the spec's directory",
                 "[host_paths][errors]") {
  write("outside/requirements.txt", "SECRET==1.0\n");
  write("outside/key.gpg", "k");
  write("outside/wheels/a-1.0-py3-none-any.whl", "w");
  write("outside/repo/Release", "r");
  write("proj/key.gpg", "k");
  const std::string outside = path("outside");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"packages: {pip: [{requirements: ../outside/requirements.txt}]}",
       "packages.pip[0].requirements: ../outside/requirements.txt is outside the spec's directory"},
      {"repos: [{wheels: ../outside/wheels}]",
       "repos[0].wheels: ../outside/wheels is outside the spec's directory"},
      {"repos: [{apt: ../outside/repo, flat: true, keyring: key.gpg}]",
       "repos[0].apt: ../outside/repo is outside the spec's directory"},
      {"repos: [{apt: \"file://" + outside + "/repo\", flat: true, keyring: key.gpg}]",
       "repos[0].apt: file://" + outside + "/repo is outside the spec's directory"},
      {"repos: [{pypi: \"file://" + outside + "/wheels\"}]",
       "repos[0].pypi: file://" + outside + "/wheels is outside the spec's directory"},
      {"repos: [{apt: https://deb.example.org, flat: true, keyring: ../outside/key.gpg}]",
       "repos[0].keyring: ../outside/key.gpg is outside the spec's directory " + path("proj") +
           " or the system keyring directories"},
      {"copy: [{git: ../outside/repo, rev: v1, to: /src}]",
       "copy[0].git: ../outside/repo is outside the spec's directory"},
      {"copy: [{git: \"file://" + outside + "/repo\", rev: v1, to: /src}]",
       "copy[0].git: file://" + outside + "/repo is outside the spec's directory"},
  };
  for (const auto& [yaml, message] : cases) {
    INFO(yaml);
    write("proj/lockstep.yaml", "lockstep: 1\nname: a\n" + yaml + "\n");
    const std::string out = errors_of("proj/lockstep.yaml");
    CHECK_THAT(out, Catch::Contains(message) && Catch::Contains("use --allow-outside to allow it") &&
                        !Catch::Contains("SECRET"));
    Result<envspec::Spec> allowed = load("proj/lockstep.yaml", allow_outside());
    if (!allowed) {
      CHECK_THAT(allowed.error().message, !Catch::Contains("use --allow-outside"));
    }
  }
}

TEST_CASE_METHOD(SpecFixture, "Keyrings may also come from the system keyring directories", "[host_paths]") {
  const fs::path debian = "/usr/share/keyrings/debian-archive-keyring.gpg";
  if (!fs::exists(debian)) {
    WARN("no " << debian << ": skipping");
    return;
  }
  Result<envspec::Spec> spec =
      envspec::load_spec_from_string("lockstep: 1\nname: a\nrepos: [{apt: https://deb.debian.org/debian, "
                                     "suite: bookworm, components: [main], "
                                     "keyring: " +
                                         debian.string() + "}]\n",
                                     dir() / "lockstep.yaml");
  REQUIRE_OK(spec);
  CHECK(spec->repos[0].keyring == debian);
}

TEST_CASE_METHOD(SpecFixture, "A local git repository may not make git read objects from outside",
                 "[host_paths][errors]") {
  write("outside/objects/info/.keep", "");
  write("proj/repo.git/HEAD", "ref: refs/heads/main\n");
  write("proj/repo.git/objects/info/alternates", path("outside/objects") + "\n");
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\ncopy: [{git: repo.git, rev: v1, to: /src}]\n");
  CHECK_THAT(errors_of("proj/lockstep.yaml"),
             Catch::Contains("copy[0].git: repo.git: its objects/info/alternates makes git read " +
                             path("outside/objects") + ", outside " + path("proj") +
                             "; use --allow-outside to allow it"));
  // An alternate inside the project is fine.
  write("proj/other.git/objects/info/.keep", "");
  write("proj/repo.git/objects/info/alternates", "../../other.git/objects\n");
  REQUIRE_OK(load("proj/lockstep.yaml"));

  write("proj/work/.git", "gitdir: " + path("outside") + "\n");
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\ncopy: [{git: work, rev: v1, to: /src}]\n");
  CHECK_THAT(errors_of("proj/lockstep.yaml"),
             Catch::Contains("copy[0].git: work: its .git file makes git read " + path("outside")));
  write("proj/lockstep.yaml",
        "lockstep: 1\nname: a\nstack: {cuda: \"12.1\", recipes: {git: ../outside, rev: v1}}\n"
        "repos: [{apt: https://x, flat: true, keyring: key.gpg}]\n");
  write("proj/key.gpg", "k");
  CHECK_THAT(errors_of("proj/lockstep.yaml"),
             Catch::Contains("stack.recipes.git: ../outside is outside the spec's directory"));
}

TEST_CASE_METHOD(SpecFixture,
                 "A lock's local files may lie in the spec's directory and its local repositories",
                 "[host_paths]") {
  write("proj/house/a-1.0-py3-none-any.whl", "w");
  write("mirror/Release", "r");
  write("proj/key.gpg", "k");
  write("proj/lockstep.yaml", "lockstep: 1\nname: a\nrepos:\n"
                              "  - {wheels: house}\n"
                              "  - {apt: ../mirror, flat: true, keyring: key.gpg}\n"
                              "  - {pypi: https://pypi.org/simple}\n");
  Result<envspec::Spec> spec = load("proj/lockstep.yaml", allow_outside());
  REQUIRE_OK(spec);
  CHECK(envspec::local_roots(*spec) ==
        std::vector<fs::path>{dir() / "proj", dir() / "proj/house", dir() / "mirror"});
}
