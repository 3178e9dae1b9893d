// `lockstep export`: the Dockerfile and Apptainer definition file written from a spec and a lock:
// what is pinned and how, the limitations block, quoting of hostile values, determinism. Whole files
// are compared against golden files in tests/cli/test_export.sh.
#include "builder/image/export.hpp"
#include "envspec/load/load.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace lockstep;
using namespace lockstep::builder;
using test::lines_of;
using test::slurp;
using test::TempDirFixture;

namespace {

const std::string k_a = std::string(64, 'a');
const std::string k_b = std::string(64, 'b');
const std::string k_c = std::string(64, 'c');
const std::string k_commit = "0123456789abcdef0123456789abcdef01234567";

envspec::Spec spec_of(const TempDirFixture& tmp, const std::string& body) {
  tmp.write("keyring.asc", "not read\n");
  tmp.write("app/main.py", "print(1)\n");
  auto s = envspec::load_spec_from_string("lockstep: 1\nname: t\n" + body, tmp.dir() / "lockstep.yaml");
  REQUIRE_OK(s);
  return *s;
}

envspec::LockedArtifact artifact(const std::string& kind, const std::string& name, const std::string& version,
                                 const std::string& hex, const std::string& url) {
  envspec::LockedArtifact a;
  a.kind = kind;
  a.name = name;
  a.version = version;
  a.arch = kind == "deb" ? "amd64" : "";
  a.sha256 = *Digest::parse("sha256:" + hex);
  a.url = url;
  return a;
}

envspec::Lock lock_of(std::vector<envspec::LockedArtifact> artifacts) {
  envspec::Lock lock;
  lock.epoch = 1704067200;
  lock.platform = "linux/amd64";
  lock.artifacts = std::move(artifacts);
  return lock;
}

const char* const k_debian = R"(base: {debian: bookworm}
repos:
  - {apt: http://deb.debian.org/debian, suite: bookworm, components: [main], keyring: keyring.asc}
  - {pypi: https://pypi.org/simple}
packages: {apt: [python3-pip, libnccl2], pip: [numpy==1.26.4]}
copy:
  - {git: https://github.com/example/tools.git, rev: v1, to: /opt/tools}
  - {from: app, to: /opt/app/}
run:
  - make -C /opt/app
env: {GREETING: "it's $HOME \"here\""}
entrypoint: [python3]
cmd: [/opt/app/main.py]
workdir: /opt/app
user: "1000"
)";

std::vector<envspec::LockedArtifact> debian_artifacts() {
  auto pip =
      artifact("deb", "python3-pip", "23.0.1+dfsg-1", k_a,
               "http://deb.debian.org/debian/pool/main/p/python-pip/python3-pip_23.0.1+dfsg-1_all.deb");
  pip.arch = "all";
  auto git = artifact("git", "https://github.com/example/tools.git", k_commit, k_c,
                      "https://github.com/example/tools.git");
  git.rev = "v1";
  return {artifact("deb", "libnccl2", "1:2.18.3-1+cuda12.1", k_b, "https://example.org/cuda/libnccl2.deb"),
          pip,
          artifact(
              "wheel", "numpy", "1.26.4", k_c,
              "https://files.example.org/numpy-1.26.4%2Blocal-cp311-cp311-manylinux_2_17_x86_64.whl#sha256=" +
                  k_c),
          git};
}

bool has_line(const std::string& text, const std::string& line) {
  auto lines = lines_of(text);
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

ExportOptions as(ExportFormat format) {
  ExportOptions o;
  o.format = format;
  return o;
}

} // namespace

TEST_CASE("A Dockerfile pins every deb and wheel by URL and sha256 and every git source by commit",
          "[export]") {
  TempDirFixture tmp;
  const envspec::Spec spec = spec_of(tmp, k_debian);
  auto r = export_recipe(spec, lock_of(debian_artifacts()), as(ExportFormat::dockerfile));
  REQUIRE_OK(r);
  const std::string& d = r->text;
  CHECK(lines_of(d).front() == "# syntax=docker/dockerfile:1.6");
  // Fetched by exact URL, checked by BuildKit, named like the pool (the epoch dropped) or the wheel.
  CHECK(has_line(d, "ADD --checksum=sha256:" + k_b +
                        " https://example.org/cuda/libnccl2.deb /debs/libnccl2_2.18.3-1+cuda12.1_amd64.deb"));
  CHECK(
      has_line(d, "ADD --checksum=sha256:" + k_c +
                      " https://files.example.org/numpy-1.26.4%2Blocal-cp311-cp311-manylinux_2_17_x86_64.whl "
                      "/wheels/numpy-1.26.4+local-cp311-cp311-manylinux_2_17_x86_64.whl"));
  // dpkg in the lock's order.
  CHECK(d.find("    dpkg -i \\\n      /tmp/lockstep/debs/libnccl2_2.18.3-1+cuda12.1_amd64.deb \\\n"
               "      /tmp/lockstep/debs/python3-pip_23.0.1+dfsg-1_all.deb\n") != std::string::npos);
  CHECK(d.find("python3 -m pip install --no-deps --no-index --no-cache-dir \\\n"
               "      /tmp/lockstep/wheels/numpy-1.26.4+local-cp311-cp311-manylinux_2_17_x86_64.whl\n") !=
        std::string::npos);
  CHECK(has_line(d, "FROM --platform=linux/amd64 debian:bookworm"));
  CHECK(has_line(d, "ARG SOURCE_DATE_EPOCH=1704067200"));
  CHECK(has_line(d, "ADD https://github.com/example/tools.git#" + k_commit + " /opt/tools/"));
  CHECK(has_line(d, "COPY app /opt/app/"));
  CHECK(has_line(d, R"(ENV GREETING="it's \$HOME \"here\"")"));
  CHECK(has_line(d, "WORKDIR /opt/app"));
  CHECK(has_line(d, "RUN --network=none make -C /opt/app"));
  CHECK(has_line(d, "USER 1000"));
  CHECK(has_line(d, R"(ENTRYPOINT ["python3"])"));
  CHECK(has_line(d, R"(CMD ["/opt/app/main.py"])"));
  // The order of lockstep's build: packages, git, copy, env, workdir, run, user, config.
  std::vector<std::size_t> at;
  for (const char* mark : {"FROM --platform", "dpkg -i", "pip install", "ADD https://github", "COPY app",
                           "ENV ", "WORKDIR", "RUN --network", "USER", "ENTRYPOINT", "CMD"}) {
    at.push_back(d.find(mark));
  }
  CHECK(std::is_sorted(at.begin(), at.end()));
  CHECK(std::find(at.begin(), at.end(), std::string::npos) == at.end());

  CHECK(
      r->limitations ==
      std::vector<std::string>{
          "the base image is not pinned by digest: debian:bookworm is a moving tag (lockstep bootstraps the "
          "base from the lock's packages; here they are installed over it)",
          "lockstep's deterministic layer tars and epoch normalisation are not reproduced: the image digest "
          "will differ from lockstep build's",
          "lockstep's own labels and annotations (dev.lockstep.*: lock digest, image facts) are not written",
          "git sources are pinned by commit (SHA-1) only: lockstep's sha256 of the tree is not checked",
          "copy: from host paths become COPY lines relative to the spec directory (build with it as the "
          "context); lockstep's mode and owner normalisation is not applied",
          "`run:` steps are copied as-is; their outputs are not pinned"});
  for (const std::string& l : r->limitations) {
    CHECK(has_line(d, "#   - " + l));
  }
}

TEST_CASE("An Apptainer definition fetches and checks on the host, installs in %post, quotes for the shell",
          "[export]") {
  TempDirFixture tmp;
  const envspec::Spec spec = spec_of(tmp, k_debian);
  auto r = export_recipe(spec, lock_of(debian_artifacts()), as(ExportFormat::apptainer_def));
  REQUIRE_OK(r);
  const std::string& d = r->text;
  CHECK(has_line(d, "Bootstrap: docker"));
  CHECK(has_line(d, "From: debian:bookworm"));
  CHECK(has_line(d, "    fetch https://example.org/cuda/libnccl2.deb " + k_b +
                        " \"$d/debs/libnccl2_2.18.3-1+cuda12.1_amd64.deb\""));
  CHECK(has_line(d, "        echo \"$2  $3\" | sha256sum -c --quiet -"));
  CHECK(has_line(d, "    git -C \"$APPTAINER_ROOTFS\"/opt/tools.lockstep-git checkout --quiet --detach " +
                        k_commit));
  CHECK(has_line(d, "    app/. /opt/app/"));
  CHECK(has_line(d, R"(    export GREETING='it'\''s $HOME "here"')"));
  CHECK(has_line(d, "    /bin/sh -c 'make -C /opt/app'"));
  CHECK(has_line(d, "    if [ \"$#\" -eq 0 ]; then set -- /opt/app/main.py; fi"));
  CHECK(has_line(d, "    exec python3 \"$@\""));
  std::vector<std::size_t> at;
  for (const char* mark : {"\nBootstrap:", "\n%setup\n", "\n%files\n", "\n%environment\n", "\n%post\n",
                           "    dpkg -i", "pip install", "    /bin/sh -c", "\n%runscript\n"}) {
    at.push_back(d.find(mark));
  }
  CHECK(std::is_sorted(at.begin(), at.end()));
  CHECK(std::find(at.begin(), at.end(), std::string::npos) == at.end());
  CHECK(std::count(r->limitations.begin(), r->limitations.end(),
                   "user: Apptainer runs as the calling user; `user: 1000` is not applied") == 1);
  CHECK(std::count(
            r->limitations.begin(), r->limitations.end(),
            "`run:` steps get the network in %post (lockstep gives a step none unless network: true)") == 1);
}

TEST_CASE("The same spec and lock give the same recipe", "[export]") {
  TempDirFixture tmp;
  const envspec::Spec spec = spec_of(tmp, k_debian);
  for (ExportFormat f : {ExportFormat::dockerfile, ExportFormat::apptainer_def}) {
    auto a = export_recipe(spec, lock_of(debian_artifacts()), as(f));
    auto b = export_recipe(spec, lock_of(debian_artifacts()), as(f));
    REQUIRE_OK(a);
    REQUIRE_OK(b);
    CHECK(a->text == b->text);
    CHECK(a->text.back() == '\n');
  }
}

TEST_CASE("Values a recipe can't hold safely are refused, naming them", "[export]") {
  TempDirFixture tmp;
  const envspec::Spec spec = spec_of(tmp, k_debian);
  struct Case {
    envspec::LockedArtifact artifact;
    std::string message;
  };
  const std::vector<Case> cases = {
      {artifact("deb", "ls-a", "1.0", k_a, "https://example.org/a'; rm -rf /.deb"),
       "lock: deb ls-a 1.0: URL 'https://example.org/a'; rm -rf /.deb' has characters a recipe can't hold "
       "safely "
       "(quotes, '$', spaces or control characters)"},
      {artifact("deb", "ls-a", "1.0", k_a, "https://example.org/$HOME.deb"),
       "lock: deb ls-a 1.0: URL 'https://example.org/$HOME.deb' has characters a recipe can't hold safely "
       "(quotes, '$', spaces or control characters)"},
      {artifact("deb", "ls-a", "1.0/../../x", k_a, "https://example.org/a.deb"),
       "lock: deb ls-a 1.0/../../x: name, version or architecture has characters a file name can't hold"},
      {artifact("deb", "ls-a", "1.0", k_a, "../../etc/passwd"),
       "lock: deb ls-a 1.0: '../../etc/passwd' is not a path a recipe can hold safely (letters, digits and - "
       ". _ "
       "+ @ % = , : ~ /; no '..')"},
      {artifact("wheel", "demo", "1.0", k_a, "https://example.org/simple/demo/"),
       "lock: wheel demo 1.0: the URL 'https://example.org/simple/demo/' does not end in a wheel's file "
       "name"},
      {artifact("wheel", "demo", "1.0", k_a, "https://example.org/..%2F..%2Fx.whl"),
       "lock: wheel demo 1.0: the URL 'https://example.org/..%2F..%2Fx.whl' does not end in a wheel's file "
       "name"},
  };
  for (const Case& c : cases) {
    auto artifacts = debian_artifacts();
    artifacts.insert(artifacts.begin(), c.artifact);
    for (ExportFormat f : {ExportFormat::dockerfile, ExportFormat::apptainer_def}) {
      auto r = export_recipe(spec, lock_of(artifacts), as(f));
      REQUIRE_FALSE(r);
      CHECK(r.error().code == ExitCode::invalid_input);
      CHECK(r.error().message == c.message);
    }
  }
  // A git source the lock has no commit for.
  auto artifacts = debian_artifacts();
  artifacts.pop_back();
  auto r = export_recipe(spec, lock_of(artifacts), as(ExportFormat::dockerfile));
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "the lock has no commit for the git source https://github.com/example/tools.git "
                             "(rev v1); run `lockstep "
                             "lock`");
}

TEST_CASE("What a format can't hold is left out and listed, not mangled", "[export]") {
  TempDirFixture tmp;
  const envspec::Spec spec = spec_of(tmp, "env: {MOTD: \"line one\\nline two\", OK: yes}\n"
                                          "labels: {multi: \"a\\nb\", fine: ok}\n");
  auto docker = export_recipe(spec, lock_of({}), as(ExportFormat::dockerfile));
  REQUIRE_OK(docker);
  CHECK_FALSE(has_line(docker->text, "line two\""));
  CHECK(has_line(docker->text, R"(ENV OK="yes")"));
  CHECK(has_line(docker->text, R"(LABEL "fine"="ok")"));
  CHECK(docker->text.find("multi") == docker->text.rfind("multi")); // only in the limitations block
  CHECK(std::count(
            docker->limitations.begin(), docker->limitations.end(),
            "env MOTD has a newline or control character, which a Dockerfile ENV can't hold: left out") == 1);
  CHECK(std::count(docker->limitations.begin(), docker->limitations.end(),
                   "label multi has a newline or control character: left out") == 1);
  // Apptainer's %environment is a shell script: the newline is kept, quoted.
  auto def = export_recipe(spec, lock_of({}), as(ExportFormat::apptainer_def));
  REQUIRE_OK(def);
  CHECK(def->text.find("    export MOTD='line one\nline two'\n") != std::string::npos);
  CHECK(has_line(def->text, "    fine ok"));
}

TEST_CASE("Bases: an OCI image keeps its digest, scratch gets its packages unpacked", "[export]") {
  TempDirFixture tmp;
  tmp.write("base/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  tmp.write("base/index.json", R"({"schemaVersion":2,"manifests":[]})");
  const std::string pin = "sha256:" + k_a;
  const envspec::Spec oci = spec_of(tmp, "base: {oci: ./base@" + pin + "}\n");
  auto r = export_recipe(oci, lock_of({}), as(ExportFormat::dockerfile));
  REQUIRE_OK(r);
  CHECK(has_line(r->text, "ARG LOCKSTEP_BASE_IMAGE=lockstep-base@" + pin));
  CHECK(has_line(r->text, "FROM --platform=linux/amd64 ${LOCKSTEP_BASE_IMAGE}"));
  CHECK(r->limitations.front() ==
        "the base is the OCI image ./base@" + pin +
            " on the build host: the builder needs the same image, as LOCKSTEP_BASE_IMAGE");
  auto def = export_recipe(oci, lock_of({}), as(ExportFormat::apptainer_def));
  REQUIRE_OK(def);
  CHECK(has_line(def->text, "Bootstrap: oci"));
  CHECK(has_line(def->text, "From: ./base"));

  const envspec::Spec scratch = spec_of(tmp, "repos: [{apt: https://example.org/flat, flat: true, keyring: "
                                             "keyring.asc}]\npackages: {apt: [ls-flat]}\n");
  auto local = artifact("deb", "ls-flat", "1.0-1", k_b, "flat/ls-flat_1.0-1_all.deb");
  local.arch = "all";
  r = export_recipe(scratch, lock_of({local}), as(ExportFormat::dockerfile));
  REQUIRE_OK(r);
  CHECK(has_line(r->text, "COPY flat/ls-flat_1.0-1_all.deb /debs/ls-flat_1.0-1_all.deb"));
  CHECK(has_line(r->text, "    echo '" + k_b +
                              "  /tmp/lockstep/debs/ls-flat_1.0-1_all.deb' | sha256sum -c --quiet - && \\"));
  CHECK(has_line(r->text, "    dpkg-deb -x /tmp/lockstep/debs/ls-flat_1.0-1_all.deb /rootfs"));
  CHECK(has_line(r->text, "COPY --from=lockstep-unpack /rootfs/ /"));
  CHECK(r->text.find("dpkg -i") == std::string::npos);
  def = export_recipe(scratch, lock_of({local}), as(ExportFormat::apptainer_def));
  REQUIRE_OK(def);
  CHECK(has_line(def->text, "Bootstrap: scratch"));
  CHECK(has_line(def->text,
                 "    fetch flat/ls-flat_1.0-1_all.deb " + k_b + " \"$d/debs/ls-flat_1.0-1_all.deb\""));
  CHECK(has_line(def->text, "    dpkg-deb -x \"$d/debs/ls-flat_1.0-1_all.deb\" \"$APPTAINER_ROOTFS\""));
  CHECK(def->text.find("dpkg -i") == std::string::npos);
}

TEST_CASE("Bases: a registry image is named as Docker and Apptainer pull it, pin included", "[export]") {
  TempDirFixture tmp;
  const std::string pin = "sha256:" + k_a;
  const envspec::Spec pinned = spec_of(tmp, "base: {image: \"docker://debian:bookworm@" + pin + "\"}\n");
  auto r = export_recipe(pinned, lock_of({}), as(ExportFormat::dockerfile));
  REQUIRE_OK(r);
  CHECK(has_line(r->text, "FROM --platform=linux/amd64 docker.io/library/debian:bookworm@" + pin));
  CHECK(std::none_of(r->limitations.begin(), r->limitations.end(),
                     [](const std::string& l) { return l.find("not pinned") != std::string::npos; }));
  auto def = export_recipe(pinned, lock_of({}), as(ExportFormat::apptainer_def));
  REQUIRE_OK(def);
  CHECK(has_line(def->text, "Bootstrap: docker"));
  CHECK(has_line(def->text, "From: docker.io/library/debian:bookworm@" + pin));

  const envspec::Spec moving = spec_of(tmp, "base: {image: \"docker://lab.example:5000/team/cuda:12\"}\n");
  r = export_recipe(moving, lock_of({}), as(ExportFormat::dockerfile));
  REQUIRE_OK(r);
  CHECK(has_line(r->text, "FROM --platform=linux/amd64 lab.example:5000/team/cuda:12"));
  CHECK(
      r->limitations.front() ==
      "the base image is not pinned by digest: the spec names docker://lab.example:5000/team/cuda:12 without "
      "@sha256:");
}

TEST_CASE("A multi-line run step keeps its newlines in the exec form", "[export]") {
  TempDirFixture tmp;
  const envspec::Spec spec = spec_of(tmp, "run:\n  - {sh: \"echo a\\necho b\", network: true}\n");
  auto r = export_recipe(spec, lock_of({}), as(ExportFormat::dockerfile));
  REQUIRE_OK(r);
  CHECK(has_line(r->text, R"(RUN ["/bin/sh","-c","echo a\necho b"])"));
  auto def = export_recipe(spec, lock_of({}), as(ExportFormat::apptainer_def));
  REQUIRE_OK(def);
  CHECK(def->text.find("    /bin/sh -c 'echo a\necho b'\n") != std::string::npos);
}

TEST_CASE("The stack's NVIDIA_REQUIRE_CUDA joins the environment unless the spec sets it", "[export]") {
  TempDirFixture tmp;
  envspec::Lock lock = lock_of({});
  lock.stack.emplace();
  lock.stack->nvidia_require_cuda = "cuda>=12.1 driver>=530";
  auto r = export_recipe(spec_of(tmp, "env: {A: b}\n"), lock, as(ExportFormat::dockerfile));
  REQUIRE_OK(r);
  CHECK(r->text.find("ENV A=\"b\"\nENV NVIDIA_REQUIRE_CUDA=\"cuda>=12.1 driver>=530\"\n") !=
        std::string::npos);
  r = export_recipe(spec_of(tmp, "env: {NVIDIA_REQUIRE_CUDA: mine}\n"), lock,
                    as(ExportFormat::apptainer_def));
  REQUIRE_OK(r);
  CHECK(has_line(r->text, "    export NVIDIA_REQUIRE_CUDA=mine"));
  CHECK(r->text.find("driver>=530") == std::string::npos);
}

namespace {

// The body of a definition file's section `name` ("%environment"): the lines up to the next section.
std::string section(const std::string& def, const std::string& name) {
  std::string out;
  bool in = false;
  for (const std::string& line : lines_of(def)) {
    if (!line.empty() && line.front() == '%') {
      in = line == name;
    } else if (in) {
      out += line + "\n";
    }
  }
  while (out.ends_with("\n\n")) { // the blank line before the next section
    out.pop_back();
  }
  return out;
}

} // namespace

TEST_CASE("Comments escape control characters: no value adds a line to a recipe", "[export][hardening]") {
  TempDirFixture tmp;
  tmp.write("b\nRUN touch x/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  tmp.write("b\nRUN touch x/index.json", R"({"schemaVersion":2,"manifests":[]})");
  const envspec::Spec spec =
      spec_of(tmp, "base: {oci: \"./b\\nRUN touch x\"}\nlabels: {\"a\\nRUN touch y\": v, \"%post\": w}\n");
  ExportOptions o = as(ExportFormat::dockerfile);
  o.lock_name = "x\nRUN touch z.lock";
  o.spec_name = "s\r\n%post.yaml";
  auto r = export_recipe(spec, lock_of({}), o);
  REQUIRE_OK(r);
  for (const std::string& line : lines_of(r->text)) {
    CHECK_FALSE(line.starts_with("RUN touch"));
    CHECK_FALSE(line.starts_with("%post"));
  }
  CHECK(r->text.find("from x\\x0aRUN touch z.lock (sha256:") != std::string::npos);
  CHECK(r->text.find(") and s\\x0d\\x0a%post.yaml (spec sha256:") != std::string::npos);
  CHECK(has_line(r->text,
                 "# base: ./b\\x0aRUN touch x: load that image into the builder as lockstep-base (or pass"));
  CHECK(has_line(r->text, "#   - label a\\x0aRUN touch y has a newline or control character: left out"));
  CHECK(has_line(r->text, R"(LABEL "%post"="w")"));
  CHECK(std::count(r->limitations.begin(), r->limitations.end(),
                   "label a\\x0aRUN touch y has a newline or control character: left out") == 1);
  // The definition file: the same header; a label key starting with '%' would start a section.
  const envspec::Spec plain = spec_of(tmp, "labels: {\"a\\nRUN touch y\": v, \"%post\": w, ok: fine}\n");
  o.format = ExportFormat::apptainer_def;
  r = export_recipe(plain, lock_of({}), o);
  REQUIRE_OK(r);
  CHECK(r->text.find("from x\\x0aRUN touch z.lock (sha256:") != std::string::npos);
  CHECK(section(r->text, "%labels") == "    ok fine\n");
  CHECK(std::count(r->limitations.begin(), r->limitations.end(),
                   "label %post has a newline, control character, a space in its key or a key starting with "
                   "'%': left out") == 1);
}

TEST_CASE("A run step BuildKit would read differently is written in the exec form", "[export][hardening]") {
  TempDirFixture tmp;
  const envspec::Spec spec = spec_of(tmp, "run:\n"
                                          "  - \"echo a \\\\ \"\n"
                                          "  - \"cat <<EOF\"\n"
                                          "  - \"[ -f /x ] || true\"\n"
                                          "  - \"echo \\x01\"\n"
                                          "  - echo plain $(id) `id`; true\n");
  auto r = export_recipe(spec, lock_of({}), as(ExportFormat::dockerfile));
  REQUIRE_OK(r);
  CHECK(has_line(r->text, R"(RUN --network=none ["/bin/sh","-c","echo a \\ "])"));
  CHECK(has_line(r->text, R"(RUN --network=none ["/bin/sh","-c","cat <<EOF"])"));
  CHECK(has_line(r->text, R"(RUN --network=none ["/bin/sh","-c","[ -f /x ] || true"])"));
  CHECK(has_line(r->text, R"(RUN --network=none ["/bin/sh","-c","echo \u0001"])"));
  CHECK(has_line(r->text, "RUN --network=none echo plain $(id) `id`; true"));
}

TEST_CASE("Values in a definition file round-trip through sh, and none can start a section or stage",
          "[export][hardening]") {
  TempDirFixture tmp;
  const std::string marker = (tmp.dir() / "PWNED").string();
  const std::string hostile = "it's \"q\" $(touch " + marker + ") `touch " + marker + "`; touch " + marker +
                              "\n  #%not a section\nlast \\";
  tmp.write("values.yaml", "env: {V: " + nlohmann::json(hostile).dump() + "}\ncmd: [printf, '[%s]', " +
                               nlohmann::json(hostile).dump() + ", \"\"]\n");
  const envspec::Spec spec = spec_of(tmp, slurp(tmp.dir() / "values.yaml"));
  auto r = export_recipe(spec, lock_of({}), as(ExportFormat::apptainer_def));
  REQUIRE_OK(r);
  CHECK(section(r->text, "%environment") == "    export V='it'\\''s \"q\" $(touch " + marker + ") `touch " +
                                                marker + "`; touch " + marker +
                                                "\n  #%not a section\nlast \\'\n");
  tmp.write("env.sh", section(r->text, "%environment"));
  CHECK(test::run_command(". " + (tmp.dir() / "env.sh").string() + "; printf '%s' \"$V\"") == hostile);
  tmp.write("run.sh", section(r->text, "%runscript"));
  CHECK(test::run_command("sh " + (tmp.dir() / "run.sh").string()) == "[" + hostile + "][]");
  CHECK_FALSE(std::filesystem::exists(marker));

  struct Case {
    std::string yaml;
    std::string message;
  };
  const std::vector<Case> refused = {
      {"env: {BAD: \"a\\n%post\\ntouch x\"}",
       "env BAD: the line '%post' would start a new section of the Apptainer definition file; reword it (or "
       "export --dockerfile)"},
      {"env: {BAD: \"a\\n \\t\\u00a0%runscript\"}",
       "env BAD: the line '\u00a0%runscript' would start a new section of the Apptainer definition file; "
       "reword it (or export --dockerfile)"},
      {"run: [\"echo\\nBootstrap: docker\\nFrom: evil\"]",
       "run[0] (" + (tmp.dir() / "lockstep.yaml").string() +
           ":3): the line 'Bootstrap: docker' would start a new stage of the Apptainer definition file; "
           "reword it (or export --dockerfile)"},
      {"run: [\"echo\\nboot\\u017ftrap: x\"]",
       "run[0] (" + (tmp.dir() / "lockstep.yaml").string() +
           ":3): the line 'boot\u017ftrap: x' would start a new stage of the Apptainer definition file; "
           "reword it (or export --dockerfile)"},
      {"cmd: [sh, \"x\\n%test\"]",
       "cmd[1]: the line '%test' would start a new section of the Apptainer definition file; reword it (or "
       "export --dockerfile)"},
      {"entrypoint: [\"x\\r\\n%files\"]",
       "entrypoint[0]: the line '%files' would start a new section of the Apptainer definition file; reword "
       "it (or export --dockerfile)"},
  };
  for (const Case& c : refused) {
    INFO(c.yaml);
    r = export_recipe(spec_of(tmp, c.yaml + "\n"), lock_of({}), as(ExportFormat::apptainer_def));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK(r.error().message == c.message);
  }
  // The Dockerfile holds the same run step safely: one exec-form line.
  r = export_recipe(spec_of(tmp, "run: [\"echo\\nBootstrap: docker\"]\n"), lock_of({}),
                    as(ExportFormat::dockerfile));
  REQUIRE_OK(r);
  CHECK(has_line(r->text, R"(RUN --network=none ["/bin/sh","-c","echo\nBootstrap: docker"])"));
}
