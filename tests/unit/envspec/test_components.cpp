// The component model of `lockstep diff`: specs, locks and snapshots as component lists, the
// comparison rules (coverage, version equality, kinds compared by class) and the output forms.
#include "envspec/documents/components.hpp"
#include "tests/unit/envspec/fixtures/spec_fixture.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace lockstep;
using envspec::Component;
using envspec::ComponentChange;
using envspec::ComponentSet;
using envspec::Coverage;
using test::SpecFixture;

namespace {

envspec::LockedArtifact artifact(std::string kind, std::string name, std::string version,
                                 std::string arch = "amd64") {
  envspec::LockedArtifact a;
  a.kind = std::move(kind);
  a.name = std::move(name);
  a.version = std::move(version);
  a.arch = std::move(arch);
  a.sha256 = sha256_of(a.name);
  a.url = "http://example.invalid/" + a.name;
  return a;
}

envspec::Lock lock_of(std::vector<envspec::LockedArtifact> artifacts) {
  envspec::Lock lock;
  lock.platform = "linux/amd64";
  lock.artifacts = std::move(artifacts);
  return lock;
}

ComponentSet set_of(std::string kind, std::vector<Component> components,
                    std::map<std::string, Coverage> coverage) {
  ComponentSet s;
  s.kind = std::move(kind);
  s.what = s.kind + ".file";
  s.components = std::move(components);
  s.coverage = std::move(coverage);
  REQUIRE(s.finish().ok());
  return s;
}

} // namespace

TEST_CASE("Wheels and python packages are one comparison class", "[components]") {
  CHECK(envspec::component_class("wheel") == "python");
  CHECK(envspec::component_class("python-package") == "python");
  CHECK(envspec::component_class("deb") == "deb");
  CHECK(envspec::component_class("stack") == "stack");
}

TEST_CASE("A lock becomes debs, wheels, git sources and the stack facts its image records", "[components]") {
  envspec::LockedArtifact git = artifact("git", "https://example.org/repo.git", std::string(40, 'c'), "");
  git.rev = "v1.0";
  const envspec::Lock lock =
      lock_of({artifact("deb", "ls-lib", "2.0-1"), artifact("deb", "libfoo", "1.0", "i386"),
               artifact("deb", "ls-data", "1.0-1", "all"),
               artifact("wheel", "Demo_Pkg", "1.0", "py3-none-any"), git});
  envspec::ImageFacts facts;
  facts.mpi_impl = "openmpi";
  facts.mpi = {"4.1.4", "libopenmpi3 4.1.4-3"};
  const ComponentSet set = envspec::lock_components(lock, facts, "a.lock");
  std::vector<std::string> rows;
  for (const Component& c : set.components) {
    rows.push_back(c.kind + " " + c.name + " " + c.version + (c.rev.empty() ? "" : " " + c.rev));
  }
  CHECK(rows == std::vector<std::string>{"deb libfoo:i386 1.0", "deb ls-data 1.0-1", "deb ls-lib 2.0-1",
                                         "git https://example.org/repo.git " + std::string(40, 'c') + " v1.0",
                                         "wheel demo-pkg 1.0", "stack mpi.impl openmpi",
                                         "stack mpi.version 4.1.4"});
  CHECK(set.coverage.at("deb") == Coverage::complete);
  CHECK(set.coverage.at("stack") == Coverage::complete);
}

TEST_CASE("Changing one package between two locks shows exactly that change", "[components]") {
  const envspec::ImageFacts none;
  const ComponentSet a = envspec::lock_components(
      lock_of({artifact("deb", "ls-lib", "1.0-1"), artifact("deb", "ls-app", "1.0-1")}), none, "a.lock");
  const ComponentSet b = envspec::lock_components(
      lock_of({artifact("deb", "ls-lib", "2.0-1"), artifact("deb", "ls-app", "1.0-1")}), none, "b.lock");
  const envspec::ComponentDiff diff = envspec::diff_components(a, b);
  REQUIRE(diff.changes.size() == 1);
  CHECK(diff.changes[0] ==
        ComponentChange{ComponentChange::Status::changed, "deb", "ls-lib", "1.0-1", "2.0-1"});
  CHECK(diff.same == 1);
  CHECK(envspec::render_diff_text(a, b, diff) ==
        "A: lock a.lock\n"
        "B: lock b.lock\n"
        "STATUS   KIND  NAME    A      B\n"
        "changed  deb   ls-lib  1.0-1  2.0-1\n"
        "1 changed, 0 added, 0 removed, 1 the same (deb, git, python, stack)\n");
  CHECK(envspec::diff_json(a, b, diff).dump() ==
        R"({"a":{"kind":"lock","what":"a.lock"},"b":{"kind":"lock","what":"b.lock"},)"
        R"("changes":[{"change":"changed","kind":"deb","name":"ls-lib","a":"1.0-1","b":"2.0-1"}],)"
        R"("same":1,"compared":["deb","git","python","stack"],"skipped":[]})");
}

TEST_CASE("A multi-platform lock lists what its platforms share once, the rest per platform",
          "[components][platforms]") {
  const envspec::ImageFacts none;
  const std::map<std::string, Coverage> deb = {{"deb", Coverage::complete}};
  const ComponentSet amd =
      set_of("lock", {{"deb", "libc6", "2.36-9", ""}, {"deb", "ls-lib", "1.0-1", ""}}, deb);
  const ComponentSet arm = set_of(
      "lock", {{"deb", "libc6", "2.36-9", ""}, {"deb", "ls-lib", "1.0-1+b1", ""}, {"deb", "sve", "1", ""}},
      deb);
  const ComponentSet both =
      envspec::merge_platform_components({{"linux/amd64", amd}, {"linux/arm64", arm}}, "m.lock");
  std::vector<std::string> rows;
  for (const Component& c : both.components) {
    rows.push_back(c.name + " " + c.version);
  }
  CHECK(rows == std::vector<std::string>{"libc6 2.36-9", "ls-lib (linux/amd64) 1.0-1",
                                         "ls-lib (linux/arm64) 1.0-1+b1", "sve (linux/arm64) 1"});
  CHECK(both.architecture.empty());
  CHECK(both.coverage.at("deb") == Coverage::complete);
  CHECK(
      envspec::lock_components(lock_of({artifact("deb", "ls-lib", "1.0-1")}), none, "a.lock").architecture ==
      "amd64");
}

TEST_CASE("Added and removed components are sorted by kind then name", "[components]") {
  const std::map<std::string, Coverage> all = {{"deb", Coverage::complete}, {"python", Coverage::complete}};
  const ComponentSet a =
      set_of("image", {{"wheel", "zeta", "1.0", ""}, {"deb", "b", "1", ""}, {"deb", "a", "1", ""}}, all);
  const ComponentSet b =
      set_of("image", {{"deb", "c", "1", ""}, {"wheel", "alpha", "2.0", ""}, {"deb", "a", "1", ""}}, all);
  const envspec::ComponentDiff diff = envspec::diff_components(a, b);
  CHECK(envspec::render_diff_text(a, b, diff) == "A: image image.file\n"
                                                 "B: image image.file\n"
                                                 "STATUS   KIND   NAME   A    B\n"
                                                 "removed  deb    b      1    -\n"
                                                 "added    deb    c      -    1\n"
                                                 "added    wheel  alpha  -    2.0\n"
                                                 "removed  wheel  zeta   1.0  -\n"
                                                 "0 changed, 2 added, 2 removed, 1 the same (deb, python)\n");
}

TEST_CASE("Versions compare by their own rules: dpkg's, PEP 440's, names PEP 503-normalised",
          "[components]") {
  const std::map<std::string, Coverage> all = {{"deb", Coverage::complete}, {"python", Coverage::complete}};
  const ComponentSet a = set_of("lock", {{"deb", "x", "0:1.0-1", ""}, {"wheel", "foo-bar", "1.0", ""}}, all);
  const ComponentSet b =
      set_of("snapshot", {{"deb", "x", "1.0-1", ""}, {"python-package", "foo-bar", "1.0.0", ""}}, all);
  const envspec::ComponentDiff diff = envspec::diff_components(a, b);
  CHECK(diff.changes.empty());
  CHECK(diff.same == 2);
}

TEST_CASE("A spec is compared only by the names it asks for", "[components]") {
  const std::map<std::string, Coverage> partial = {
      {"deb", Coverage::partial}, {"python", Coverage::partial}, {"git", Coverage::complete}};
  const ComponentSet spec = set_of("spec",
                                   {{"deb", "ls-lib", "1.0-1", ""},
                                    {"deb", "ls-app", "", ""},
                                    {"deb", "ls-gone", "", ""},
                                    {"git", "https://x/repo", "", "v2"}},
                                   partial);
  envspec::LockedArtifact git = artifact("git", "https://x/repo", std::string(40, 'a'), "");
  git.rev = "v1";
  const ComponentSet lock = envspec::lock_components(
      lock_of({artifact("deb", "ls-lib", "2.0-1"), artifact("deb", "ls-app", "1.0-1"),
               artifact("deb", "ls-data", "1.0-1"), git}),
      envspec::ImageFacts{}, "l.lock");
  const envspec::ComponentDiff diff = envspec::diff_components(spec, lock);
  CHECK(envspec::diff_json(spec, lock, diff)["changes"].dump() ==
        R"([{"change":"removed","kind":"deb","name":"ls-gone","a":"*","b":null},)"
        R"({"change":"changed","kind":"deb","name":"ls-lib","a":"1.0-1","b":"2.0-1"},)"
        R"x({"change":"changed","kind":"git","name":"https://x/repo","a":"v2","b":"aaaaaaaaaaaa (v1)"}])x");
  CHECK(diff.same == 1); // ls-app: unpinned matches 1.0-1; ls-data is not asked for
  CHECK(diff.skipped == std::vector<std::string>{"stack"});
}

TEST_CASE_METHOD(SpecFixture, "A spec's requests become components", "[components]") {
  write("keys/k.gpg", "key");
  const envspec::Spec spec =
      load_ok("lockstep: 1\n"
              "name: s\n"
              "repos:\n"
              "  - {apt: http://x/debian, suite: s, components: [main], keyring: keys/k.gpg}\n"
              "  - {pypi: https://pypi.org/simple}\n"
              "packages:\n"
              "  apt: [ls-app, \"ls-lib=1.0-1\", \"libfoo1:i386\"]\n"
              "  pip: [\"Demo_Pkg==1.0\"]\n"
              "copy:\n"
              "  - {git: https://example.org/repo.git, rev: v1.0, to: /opt/repo}\n");
  const ComponentSet set = envspec::spec_components(spec, "lockstep.yaml");
  std::vector<std::string> rows;
  for (const Component& c : set.components) {
    rows.push_back(c.kind + " " + c.name + " " + c.version + " " + c.rev);
  }
  CHECK(rows == std::vector<std::string>{"deb libfoo1:i386  ", "deb ls-app  ", "deb ls-lib 1.0-1 ",
                                         "git https://example.org/repo.git  v1.0", "wheel demo-pkg 1.0 "});
}

TEST_CASE("A snapshot gives host facts and python packages", "[components]") {
  const nlohmann::json snap = nlohmann::json::parse(R"({
    "lockstep-snapshot": 1, "tool": "lockstep 0.1.0",
    "host": {"arch": "x86_64", "os": "Debian GNU/Linux 12", "kernel": "6.1.0", "glibc": "2.36",
             "user_namespaces": true, "driver": {"version": "535.104.05", "from": "nvidia-smi"},
             "gpus": [{"index": 0, "name": "NVIDIA H100", "compute_capability": "9.0"},
                      {"index": 1, "name": "NVIDIA H100", "compute_capability": "9.0"}],
             "mpi": {"impl": "openmpi", "version": "4.1.4", "path": "/usr/bin/mpirun"},
             "pmix": null, "ucx": "1.13.1", "libfabric": null, "slurm": null},
    "python": {"kind": "venv", "prefix": "/home/u/venv", "version": "3.11.2",
               "packages": [{"name": "NumPy", "version": "1.26.4", "from": "dist-info"}]}})");
  auto set = envspec::snapshot_components(snap, "snap.json");
  REQUIRE(set.ok());
  std::vector<std::string> rows;
  for (const Component& c : set->components) {
    rows.push_back(c.kind + " " + c.name + " = " + c.version);
  }
  CHECK(rows == std::vector<std::string>{
                    "host arch = x86_64", "host driver = 535.104.05", "host glibc = 2.36",
                    "host gpu NVIDIA H100 = 9.0 x2", "host kernel = 6.1.0", "host mpi = openmpi 4.1.4",
                    "host os = Debian GNU/Linux 12", "host python = 3.11.2", "host python.kind = venv",
                    "host ucx = 1.13.1", "python-package numpy = 1.26.4"});

  // A snapshot against a lock compares the lock's wheels with the snapshot's packages by name.
  const ComponentSet lock = envspec::lock_components(lock_of({artifact("wheel", "numpy", "1.26.3", "cp311")}),
                                                     envspec::ImageFacts{}, "l.lock");
  const envspec::ComponentDiff diff = envspec::diff_components(*set, lock);
  REQUIRE(diff.changes.size() == 1);
  CHECK(diff.changes[0] ==
        ComponentChange{ComponentChange::Status::changed, "python-package", "numpy", "1.26.4", "1.26.3"});
  CHECK(diff.compared == std::vector<std::string>{"python"});
  CHECK(diff.skipped == std::vector<std::string>{"deb", "git", "host", "stack"});

  nlohmann::json bad = snap;
  bad["host"]["gpus"][1]["name"] = 7;
  auto err = envspec::snapshot_components(bad, "snap.json");
  REQUIRE_FALSE(err.ok());
  CHECK(err.error().code == ExitCode::invalid_input);
  CHECK(err.error().message == "snap.json: host.gpus[1].name: expected a string or null");
}

TEST_CASE("Image labels become stack components without the provenance labels", "[components]") {
  const auto components = envspec::stack_components({{"dev.lockstep.mpi.version", "4.1.4"},
                                                     {"dev.lockstep.lock.digest", "sha256:x"},
                                                     {"dev.lockstep.stack.cuda", "cuda 12.1"},
                                                     {"org.example.team", "x"}});
  REQUIRE(components.size() == 2);
  CHECK(components[0] == Component{"stack", "mpi.version", "4.1.4", ""});
  CHECK(components[1] == Component{"stack", "stack.cuda", "cuda 12.1", ""});
}

TEST_CASE("Diff inputs are recognised by their content", "[components]") {
  using envspec::DocumentKind;
  CHECK(envspec::detect_document(R"({"lockstep-lock":1,"tool":"x"})") == DocumentKind::lock);
  CHECK(envspec::detect_document("  {\"lockstep-snapshot\": 1}") == DocumentKind::snapshot);
  CHECK(envspec::detect_document("# a spec\nlockstep: 1\nname: x\n") == DocumentKind::spec);
  CHECK(envspec::detect_document(R"({"x": {"lockstep-lock": 1}})") == DocumentKind::unknown);
  CHECK(envspec::detect_document("name: x\n  lockstep: 1\n") == DocumentKind::unknown);
  CHECK(envspec::detect_document(std::string("\x7f"
                                             "ELF\0\0lockstep:",
                                             15)) == DocumentKind::unknown);
  CHECK(envspec::detect_document("") == DocumentKind::unknown);
}
