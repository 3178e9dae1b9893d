// `extends`: merge rules, nesting, relative paths, and the errors of extending.
#include "envspec/spec/spec.hpp"
#include "tests/unit/envspec/fixtures/spec_fixture.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

using namespace lockstep;
using envspec::BaseImage;
using envspec::Spec;
using test::SpecFixture;
namespace fs = std::filesystem;
using Env = std::vector<std::pair<std::string, std::string>>;
using Files = std::vector<fs::path>;

TEST_CASE_METHOD(SpecFixture, "Extending merges maps deeply, appends lists and overrides scalars",
                 "[merge]") {
  write("a.txt", "a");
  write("b.txt", "b");
  write("base.yaml", "name: base-name\n"
                     "platform: linux/arm64\n"
                     "env: {A: base, B: base}\n"
                     "labels: {team: ml}\n"
                     "copy: [{from: a.txt, to: /a}]\n"
                     "outputs: {oci: build/base, compression: zstd}\n");
  Spec spec = load_ok("lockstep: 1\n"
                      "extends: [base.yaml]\n"
                      "name: app\n"
                      "env: {B: app, C: app}\n"
                      "copy: [{from: b.txt, to: /b}]\n"
                      "outputs: {oci: build/app}\n");
  CHECK(spec.name == "app");
  CHECK(spec.platform.str() == "linux/arm64");
  CHECK(spec.env == Env{{"A", "base"}, {"B", "app"}, {"C", "app"}});
  CHECK(spec.labels == std::map<std::string, std::string>{{"team", "ml"}});
  REQUIRE(spec.copy.size() == 2);
  CHECK(spec.copy[0].to == "/a");
  CHECK(spec.copy[1].to == "/b");
  CHECK(spec.outputs.oci == dir() / "build/app");
  CHECK(spec.outputs.compression == Codec::zstd);
  CHECK(spec.files == Files{dir() / "lockstep.yaml", dir() / "base.yaml"});
}

TEST_CASE_METHOD(SpecFixture, "Several extended files merge in order, the spec last", "[merge]") {
  write("f", "x");
  write("a.yaml", "name: from-a\nuser: a\ncopy: [{from: f, to: /a}]\nlabels: {who: a, a: 1}\n");
  write("b.yaml", "name: from-b\ncopy: [{from: f, to: /b}]\nlabels: {who: b, b: 1}\n");
  Spec spec = load_ok("lockstep: 1\nextends: [a.yaml, b.yaml]\ncopy: [{from: f, to: /main}]\n");
  CHECK(spec.name == "from-b");
  CHECK(spec.user == "a");
  REQUIRE(spec.copy.size() == 3);
  CHECK(spec.copy[0].to == "/a");
  CHECK(spec.copy[1].to == "/b");
  CHECK(spec.copy[2].to == "/main");
  CHECK(spec.labels == std::map<std::string, std::string>{{"a", "1"}, {"b", "1"}, {"who", "b"}});
  CHECK(spec.files == Files{dir() / "lockstep.yaml", dir() / "a.yaml", dir() / "b.yaml"});
}

TEST_CASE_METHOD(SpecFixture, "extends may be a single path", "[merge]") {
  write("base.yaml", "name: base\n");
  Spec spec = load_ok("lockstep: 1\nextends: base.yaml\n");
  CHECK(spec.name == "base");
}

TEST_CASE_METHOD(SpecFixture, "Extended files can extend others; the deepest merges first", "[merge]") {
  write("c.yaml", "name: from-c\nenv: {C: c, X: c}\n");
  write("a.yaml", "lockstep: 1\nextends: [c.yaml]\nenv: {A: a, X: a}\n");
  write("b.yaml", "env: {B: b}\n");
  Spec spec = load_ok("lockstep: 1\nextends: [a.yaml, b.yaml]\nenv: {X: main}\n");
  CHECK(spec.name == "from-c");
  CHECK(spec.env == Env{{"A", "a"}, {"B", "b"}, {"C", "c"}, {"X", "main"}});
  CHECK(spec.files == Files{dir() / "lockstep.yaml", dir() / "c.yaml", dir() / "a.yaml", dir() / "b.yaml"});
}

TEST_CASE_METHOD(SpecFixture, "Relative paths in an extended file resolve against that file's directory",
                 "[merge]") {
  write("team/files/tool", "t");
  make_oci_layout("team/base-image");
  write("team/shared/more.yaml", "labels: {shared: yes}\noutputs: {oci_archive: out/image.tar}\n");
  write("team/base.yaml", "extends: [shared/more.yaml]\n"
                          "base: {oci: base-image}\n"
                          "copy: [{from: files/tool, to: /usr/bin/tool}]\n");
  Spec spec = load_ok("lockstep: 1\nname: app\nextends: [team/base.yaml]\n");
  CHECK(spec.base.kind == BaseImage::Kind::oci);
  CHECK(spec.base.path == dir() / "team/base-image");
  REQUIRE(spec.copy.size() == 1);
  CHECK(spec.copy[0].from == dir() / "team/files/tool");
  CHECK(spec.outputs.oci_archive == dir() / "team/shared/out/image.tar");
  CHECK(spec.labels.at("shared") == "yes");
  CHECK(spec.files ==
        Files{dir() / "lockstep.yaml", dir() / "team/shared/more.yaml", dir() / "team/base.yaml"});
}

TEST_CASE_METHOD(SpecFixture, "An extended file's copy.from stays inside its own directory", "[merge]") {
  write("team/files/tool", "t");
  write("team/base.yaml", "copy: [{from: ../secret, to: /s}]\n");
  write("secret", "s");
  CHECK(errors("lockstep: 1\nname: app\nextends: [team/base.yaml]\n") ==
        path("team/base.yaml") + ":1:15: error: copy[0].from: ../secret is outside the spec's directory " +
            path("team") + " (resolved to " + path("secret") +
            "); use --allow-outside to allow it\n"
            "    1 | copy: [{from: ../secret, to: /s}]\n"
            "      |               ^~~~~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "entrypoint and cmd from the spec replace those of an extended file",
                 "[merge]") {
  write("base.yaml", "entrypoint: [/bin/sh, -c]\ncmd: [bash]\n");
  Spec spec = load_ok("lockstep: 1\nname: a\nextends: base.yaml\ncmd: [python, main.py]\n");
  CHECK(spec.entrypoint == std::vector<std::string>{"/bin/sh", "-c"});
  CHECK(spec.cmd == std::vector<std::string>{"python", "main.py"});
}

TEST_CASE_METHOD(SpecFixture, "A scalar in the spec replaces a map from an extended file", "[merge]") {
  make_oci_layout("img");
  write("base.yaml", "base: {oci: img}\n");
  Spec spec = load_ok("lockstep: 1\nname: a\nextends: base.yaml\nbase: scratch\n");
  CHECK(spec.base.kind == BaseImage::Kind::scratch);
}

TEST_CASE_METHOD(SpecFixture, "A file reached twice through extends is merged twice and listed once",
                 "[merge]") {
  write("f", "x");
  write("common.yaml", "copy: [{from: f, to: /common}]\n");
  write("a.yaml", "extends: common.yaml\n");
  write("b.yaml", "extends: common.yaml\n");
  Spec spec = load_ok("lockstep: 1\nname: a\nextends: [a.yaml, b.yaml]\n");
  CHECK(spec.copy.size() == 2);
  CHECK(spec.files ==
        Files{dir() / "lockstep.yaml", dir() / "common.yaml", dir() / "a.yaml", dir() / "b.yaml"});
}

TEST_CASE_METHOD(SpecFixture, "An extends cycle is an error that shows the chain", "[merge][errors]") {
  write("a.yaml", "extends: [b.yaml]\n");
  write("b.yaml", "env: {X: 1}\nextends:\n  - a.yaml\n");
  CHECK(errors("lockstep: 1\nname: app\nextends: [a.yaml]\n") ==
        path("b.yaml") + ":3:5: error: extends[0]: extends cycle: a.yaml -> b.yaml -> a.yaml\n"
                         "    3 |   - a.yaml\n"
                         "      |     ^~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A spec that extends itself is a cycle", "[merge][errors]") {
  CHECK(errors("lockstep: 1\nname: app\nextends: ./lockstep.yaml\n") ==
        path() + ":3:10: error: extends: extends cycle: lockstep.yaml -> lockstep.yaml\n"
                 "    3 | extends: ./lockstep.yaml\n"
                 "      |          ^~~~~~~~~~~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "A missing extended file is an error at its entry", "[merge][errors]") {
  CHECK(errors("lockstep: 1\nname: app\nextends: [team/base.yaml]\n") ==
        path() + ":3:11: error: extends[0]: no such file or directory: team/base.yaml (resolved to " +
            path("team/base.yaml") +
            ")\n"
            "    3 | extends: [team/base.yaml]\n"
            "      |           ^~~~~~~~~~~~~~\n");
}

TEST_CASE_METHOD(SpecFixture, "extends must be a path or a list of paths", "[merge][errors]") {
  CHECK(errors("lockstep: 1\nname: app\nextends: {file: a.yaml}\n") ==
        path() + ":3:10: error: extends: expected a path or a list of paths, found a map\n"
                 "    3 | extends: {file: a.yaml}\n"
                 "      |          ^\n");
  CHECK(errors("lockstep: 1\nname: app\nextends: [[a.yaml]]\n") ==
        path() + ":3:11: error: extends[0]: expected a path, found a list\n"
                 "    3 | extends: [[a.yaml]]\n"
                 "      |           ^\n");
}

TEST_CASE_METHOD(SpecFixture, "Errors in an extended file point into that file, after the spec's own",
                 "[merge][errors]") {
  write("base.yaml", "# team defaults\nenv:\n  BAD-NAME: 1\nlabls: {}\n");
  CHECK(errors("lockstep: 1\nname: app\nextends: base.yaml\nworkdir: rel\n") ==
        path() +
            ":4:10: error: workdir: must be an absolute path in the image (e.g. /opt/app), found 'rel'\n"
            "    4 | workdir: rel\n"
            "      |          ^~~\n" +
            path("base.yaml") +
            ":3:3: error: env.BAD-NAME: invalid variable name 'BAD-NAME': use letters, digits and '_', not "
            "starting with a digit\n"
            "    3 |   BAD-NAME: 1\n"
            "      |   ^~~~~~~~\n" +
            path("base.yaml") +
            ":4:1: error: labls: unknown key; did you mean 'labels'?\n"
            "    4 | labls: {}\n"
            "      | ^~~~~\n"
            "3 errors\n");
}

TEST_CASE_METHOD(SpecFixture, "An extended file may omit lockstep but not name another version",
                 "[merge][errors]") {
  write("base.yaml", "lockstep: 2\nenv: {A: 1}\n");
  CHECK(errors("lockstep: 1\nname: app\nextends: base.yaml\n") ==
        path("base.yaml") +
            ":1:11: error: lockstep: unsupported schema version 2; this lockstep reads version 1\n"
            "    1 | lockstep: 2\n"
            "      |           ^\n");
}

TEST_CASE_METHOD(SpecFixture, "A syntax error in an extended file stops before schema checks",
                 "[merge][errors]") {
  write("base.yaml", "name: [unclosed\n");
  // No "missing 'name'" noise: the name may well be in the file that could not be read.
  CHECK(errors("lockstep: 1\nextends: base.yaml\n") ==
        path("base.yaml") +
            ":2:1: error: invalid YAML: end of sequence flow not found (lockstep shows the "
            "text of a file named in 'extends' only once it reads as a spec: a YAML map of spec "
            "keys)\n");
}

TEST_CASE_METHOD(SpecFixture, "An extended file must be a non-empty map", "[merge][errors]") {
  write("empty.yaml", "");
  write("list.yaml", "- a\n");
  CHECK(
      errors("lockstep: 1\nname: app\nextends: [empty.yaml, list.yaml]\n") ==
      path("empty.yaml") +
          ":1:1: error: not a spec: the file is empty (lockstep shows the text of a file named in 'extends' "
          "only once it reads as a spec: a YAML map of spec keys)\n" +
          path("list.yaml") +
          ":1:1: error: not a spec: its top level is a list, not a map (lockstep shows the text of a file "
          "named "
          "in 'extends' only once it reads as a spec: a YAML map of spec keys)\n"
          "2 errors\n");
}
