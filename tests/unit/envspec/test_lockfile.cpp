// The lock-related spec keys (base.debian, repos, packages, copy.git) and the lockfile format:
// rendering, strict parsing, and staleness.
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "tests/unit/envspec/fixtures/spec_fixture.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace lockstep;
using envspec::BaseImage;
using envspec::Lock;
using envspec::LockedArtifact;
using envspec::Repo;
using envspec::Spec;
using test::SpecFixture;

namespace {

const std::string k_apt_spec =
    "lockstep: 1\n"
    "name: mpi\n"
    "base: {debian: bookworm}\n"
    "repos:\n"
    "  - {apt: http://deb.debian.org/debian/, suite: bookworm, components: [main], "
    "keyring: keys/debian.gpg}\n"
    "  - {pypi: https://pypi.org/simple}\n"
    "packages:\n"
    "  apt: [openmpi-bin, \"libc6=2.36-9\", \"libfoo1:i386\"]\n"
    "  pip: [\"numpy==1.26.4\"]\n"
    "copy:\n"
    "  - {git: https://example.org/repo.git, rev: v1.0, to: /opt/repo}\n";

Lock sample_lock() {
  Lock lock;
  lock.tool = "lockstep 0.1.0";
  lock.spec_digest = sha256_of("spec");
  lock.epoch = 1700000000;
  lock.platform = "linux/amd64";
  lock.inputs = nlohmann::json{{"platform", "linux/amd64"}, {"packages", {{"apt", {"openmpi-bin"}}}}};
  lock.repos.push_back(envspec::LockedRepo{"apt",
                                           "http://deb.debian.org/debian",
                                           "bookworm",
                                           {"main"},
                                           "Sat, 15 Mar 2025 10:00:00 UTC",
                                           std::string(64, 'b')});
  LockedArtifact deb;
  deb.kind = "deb";
  deb.name = "libc6";
  deb.version = "2.36-9+deb12u10";
  deb.arch = "amd64";
  deb.group = "base";
  deb.size = 2757936;
  deb.sha256 = sha256_of("libc6");
  deb.url = "http://deb.debian.org/debian/pool/main/g/glibc/libc6_2.36-9+deb12u10_amd64.deb";
  deb.repo = 0;
  deb.reason = "base (Essential)";
  LockedArtifact git;
  git.kind = "git";
  git.name = "https://example.org/repo.git";
  git.version = std::string(40, 'c');
  git.rev = "v1.0";
  git.size = 10240;
  git.sha256 = sha256_of("tree");
  git.url = "https://example.org/repo.git";
  lock.artifacts = {git, deb};
  envspec::sort_artifacts(lock.artifacts);
  return lock;
}

} // namespace

TEST_CASE_METHOD(SpecFixture, "Lock keys of the spec are read", "[spec][lock]") {
  write("keys/debian.gpg", "key");
  Spec spec = load_ok(k_apt_spec);
  CHECK(spec.base.kind == BaseImage::Kind::debian);
  CHECK(spec.base.suite == "bookworm");
  CHECK(spec.base.variant == envspec::DebianVariant::apt);
  REQUIRE(spec.repos.size() == 2);
  CHECK(spec.repos[0].kind == Repo::Kind::apt);
  CHECK(spec.repos[0].url == "http://deb.debian.org/debian"); // trailing '/' dropped
  CHECK(spec.repos[0].components == std::vector<std::string>{"main"});
  CHECK(spec.repos[0].keyring == dir() / "keys/debian.gpg");
  CHECK(spec.repos[1].kind == Repo::Kind::pypi);
  REQUIRE(spec.packages.apt.size() == 3);
  CHECK(spec.packages.apt[1].name == "libc6");
  CHECK(spec.packages.apt[1].version == "2.36-9");
  CHECK(spec.packages.apt[2].arch == "i386");
  CHECK(spec.packages.pip[0].text == "numpy==1.26.4");
  REQUIRE(spec.copy.size() == 1);
  CHECK(spec.copy[0].git == "https://example.org/repo.git");
  CHECK(spec.copy[0].rev == "v1.0");
  CHECK(spec.needs_lock());
  CHECK(envspec::debian_arch(spec.platform) == "amd64");
}

TEST_CASE_METHOD(SpecFixture, "Lock keys report their errors at the key", "[spec][lock][errors]") {
  const std::string out = errors("lockstep: 1\n"
                                 "name: a\n"
                                 "repos:\n"
                                 "  - {apt: ftp://x, suite: bookworm, components: [main]}\n"
                                 "  - {apt: http://x, components: [main], keyring: keys/nonexistent.gpg}\n"
                                 "packages: {apt: [\"Bad Name\"], npm: [x]}\n"
                                 "copy:\n"
                                 "  - {git: https://h/r, to: /opt/r}\n");
  CHECK(out.find(":4:11: error: repos[0].apt: unsupported URL scheme 'ftp': use http, https or file") !=
        std::string::npos);
  CHECK(out.find("repos[0]: missing 'keyring'") != std::string::npos);
  CHECK(out.find("repos[1].keyring: no such file: keys/nonexistent.gpg") != std::string::npos);
  CHECK(out.find("repos[1]: missing 'suite' (e.g. suite: bookworm) or 'suites' (e.g. suites: [jammy, "
                 "jammy-updates]), or 'flat: true' for a flat repository") != std::string::npos);
  CHECK(out.find("packages.apt[0]: invalid package 'Bad Name'") != std::string::npos);
  CHECK(out.find("packages.npm: unknown key; expected one of: apt, conda, pip") != std::string::npos);
  CHECK(out.find("copy[0]: missing 'rev' (a full commit id or a tag; the lock pins it to a commit)") !=
        std::string::npos);
}

TEST_CASE_METHOD(SpecFixture, "An apt repository may name several suites; one of them is the same as suite",
                 "[spec][lock]") {
  write("keys/ubuntu.gpg", "key");
  Spec spec =
      load_ok("lockstep: 1\n"
              "name: u\n"
              "repos:\n"
              "  - {apt: http://archive.ubuntu.com/ubuntu, suites: [jammy, jammy-updates, jammy-security],\n"
              "     components: [main, universe, restricted], keyring: keys/ubuntu.gpg}\n"
              "  - {apt: http://archive.ubuntu.com/ubuntu, suite: jammy-backports, components: [main],\n"
              "     keyring: keys/ubuntu.gpg}\n"
              "  - {apt: http://archive.ubuntu.com/ubuntu, suites: [noble], components: [main],\n"
              "     keyring: keys/ubuntu.gpg}\n"
              "packages: {apt: [htop]}\n");
  REQUIRE(spec.repos.size() == 3);
  CHECK(spec.repos[0].suites == std::vector<std::string>{"jammy", "jammy-updates", "jammy-security"});
  CHECK(spec.repos[0].suite.empty());
  CHECK(spec.repos[0].components == std::vector<std::string>{"main", "universe", "restricted"});
  CHECK(spec.repos[1].suite == "jammy-backports");
  CHECK(spec.repos[1].suites == std::vector<std::string>{"jammy-backports"});
  CHECK(spec.repos[2].suite == "noble");
  CHECK(spec.repos[2].suites == std::vector<std::string>{"noble"});
  CHECK(envspec::lock_inputs(spec).at("repos").dump() ==
        R"([{"apt":"http://archive.ubuntu.com/ubuntu","components":["main","universe","restricted"],)"
        R"("suites":["jammy","jammy-updates","jammy-security"]},)"
        R"({"apt":"http://archive.ubuntu.com/ubuntu","components":["main"],"suite":"jammy-backports"},)"
        R"({"apt":"http://archive.ubuntu.com/ubuntu","components":["main"],"suite":"noble"}])");
}

TEST_CASE_METHOD(SpecFixture, "A wrong suites list is reported at the item", "[spec][lock][errors]") {
  write("keys/k.gpg", "key");
  const std::string out =
      errors("lockstep: 1\n"
             "name: a\n"
             "repos:\n"
             "  - {apt: http://x, suites: [jammy, jammy], components: [main], keyring: keys/k.gpg}\n"
             "  - {apt: http://x, suites: [], components: [main], keyring: keys/k.gpg}\n"
             "  - {apt: http://x, suites: [jammy, ../up], components: [main], keyring: keys/k.gpg}\n"
             "  - {apt: http://x, suite: jammy, suites: [jammy-updates], components: [main], "
             "keyring: keys/k.gpg}\n"
             "  - {apt: http://x, flat: true, suites: [jammy], keyring: keys/k.gpg}\n"
             "  - {apt: http://x, suites: jammy, components: [main], keyring: keys/k.gpg}\n");
  CHECK(out.find(":4:37: error: repos[0].suites[1]: suite 'jammy' is listed twice\n") != std::string::npos);
  CHECK(out.find(":5:29: error: repos[1].suites: expected a non-empty list such as [jammy, jammy-updates], "
                 "found a list\n") != std::string::npos);
  CHECK(out.find(":6:37: error: repos[2].suites[1]: invalid suite '../up'\n") != std::string::npos);
  CHECK(out.find(":7:35: error: repos[3].suites: give 'suite' or 'suites', not both (suites: [bookworm, "
                 "bookworm-updates] lists several)\n") != std::string::npos);
  CHECK(out.find(":8:5: error: repos[4]: a flat repository has no 'suite', 'suites' or 'components'\n") !=
        std::string::npos);
  CHECK(out.find(":9:29: error: repos[5].suites: expected a non-empty list such as [jammy, jammy-updates], "
                 "found a string\n") != std::string::npos);
}

TEST_CASE_METHOD(SpecFixture, "Packages need a repository of their kind", "[spec][lock][errors]") {
  const std::string out =
      errors("lockstep: 1\nname: a\nbase: {debian: bookworm}\npackages: {pip: [numpy]}\n");
  CHECK(out.find(":3:16: error: base.debian: needs an apt repository in 'repos'") != std::string::npos);
  CHECK(out.find("packages.pip: needs a Python package index or wheelhouse in 'repos'") != std::string::npos);
}

TEST_CASE_METHOD(SpecFixture, "Lock inputs ignore what doesn't change the lock", "[spec][lock]") {
  write("keys/debian.gpg", "key");
  Spec a = load_ok(k_apt_spec);
  Spec b = load_ok(k_apt_spec + "env: {A: 1}\nlabels: {x: y}\n");
  CHECK(a.digest != b.digest);
  CHECK(envspec::lock_inputs(a) == envspec::lock_inputs(b));
  CHECK(envspec::describe_input_changes(envspec::lock_inputs(a), envspec::lock_inputs(b)).empty());
  std::string text = k_apt_spec;
  text.replace(text.find("openmpi-bin"), 11, "htop");
  Spec c = load_ok(text);
  CHECK(envspec::describe_input_changes(envspec::lock_inputs(a), envspec::lock_inputs(c)) ==
        std::vector<std::string>{"packages.apt: added htop", "packages.apt: removed openmpi-bin"});
}

TEST_CASE("A lock renders one artifact per line and parses back", "[lock]") {
  Lock lock = sample_lock();
  const std::string text = envspec::render_lock(lock);
  CHECK(text.find(
            "\n    {\"kind\":\"deb\",\"name\":\"libc6\",\"version\":\"2.36-9+deb12u10\",\"arch\":\"amd64\","
            "\"group\":\"base\",\"size\":2757936,") != std::string::npos);
  CHECK(text.find("{\"kind\":\"deb\"") < text.find("{\"kind\":\"git\"")); // debs sort first
  auto parsed = envspec::parse_lock(text, "lockstep.lock");
  REQUIRE(parsed);
  CHECK(envspec::render_lock(*parsed) == text);
  CHECK(parsed->epoch == 1700000000);
  CHECK(parsed->artifacts[0].sha256 == sha256_of("libc6"));
  CHECK(parsed->artifacts[1].rev == "v1.0");
}

TEST_CASE("A malformed lock is refused naming the key", "[lock][errors]") {
  const std::string text = envspec::render_lock(sample_lock());
  const auto error_of = [](const std::string& t) {
    auto r = envspec::parse_lock(t, "lockstep.lock");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  std::string bad_sha = text;
  bad_sha.replace(bad_sha.find(sha256_of("libc6").hex()), 64, std::string(63, 'a') + "G");
  CHECK(error_of(bad_sha) ==
        "lockstep.lock: artifacts[0].sha256: expected 64 lowercase hex digits; run `lockstep "
        "lock` to write a new lock");
  std::string schema = text;
  schema.replace(schema.find("\"lockstep-lock\": 1"), 18, "\"lockstep-lock\": 2");
  CHECK(error_of(schema) ==
        "lockstep.lock: lockstep-lock: unsupported lock schema 2; this lockstep reads schema 1; "
        "run `lockstep lock` to write a new lock");
  std::string extra = text;
  extra.replace(extra.find("\"epoch\""), 7, "\"epoch2\": 1, \"epoch\"");
  CHECK(error_of(extra) == "lockstep.lock: epoch2: unknown key; run `lockstep lock` to write a new lock");
  std::string repo = text;
  repo.replace(repo.find("\"repo\":0"), 8, "\"repo\":7");
  CHECK(error_of(repo) ==
        "lockstep.lock: artifacts[0].repo: no repository 7 (the lock has 1); run `lockstep lock` "
        "to write a new lock");
}

TEST_CASE("The lock lives beside the spec", "[lock]") {
  CHECK(envspec::default_lock_path("/a/lockstep.yaml") == "/a/lockstep.lock");
  CHECK(envspec::default_lock_path("/a/team.yml") == "/a/team.lock");
  CHECK(envspec::default_lock_path("/a/spec") == "/a/spec.lock");
}

TEST_CASE("A lock with two artifacts for one package is refused, naming both", "[lock][errors]") {
  const auto error_of = [](const Lock& lock) {
    auto r = envspec::parse_lock(envspec::render_lock(lock), "lockstep.lock");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  Lock lock = sample_lock(); // artifacts: [0] deb libc6 amd64, [1] git
  LockedArtifact again = lock.artifacts[0];
  again.version = "2.36-9+deb12u9";
  lock.artifacts.push_back(again);
  CHECK(error_of(lock) ==
        "lockstep.lock: artifacts[2]: duplicate deb package 'libc6' (amd64), first at artifacts[0]; a lock "
        "holds one artifact for each; run `lockstep lock` to write a new lock");
  // Another architecture of the same package is another package (multiarch).
  lock.artifacts.back().arch = "i386";
  REQUIRE(envspec::parse_lock(envspec::render_lock(lock), "lockstep.lock"));

  LockedArtifact wheel;
  wheel.kind = "wheel";
  wheel.name = "typing-extensions";
  wheel.version = "4.12.2";
  wheel.arch = "py3-none-any";
  wheel.group = "python";
  wheel.size = 10;
  wheel.sha256 = sha256_of("w");
  wheel.url = "https://files.example.org/typing_extensions-4.12.2-py3-none-any.whl";
  lock = sample_lock();
  lock.artifacts.push_back(wheel);
  wheel.name = "Typing_Extensions"; // the same project, spelled otherwise
  lock.artifacts.push_back(wheel);
  CHECK(error_of(lock) ==
        "lockstep.lock: artifacts[3]: duplicate wheel project 'Typing_Extensions', first at artifacts[2]; a "
        "lock holds one artifact for each; run `lockstep lock` to write a new lock");

  // Two copies of one repository at one rev repeat the same entry (allowed); another commit is not.
  lock = sample_lock();
  lock.artifacts.push_back(lock.artifacts[1]);
  REQUIRE(envspec::parse_lock(envspec::render_lock(lock), "lockstep.lock"));
  lock.artifacts.back().version = std::string(40, 'd');
  CHECK(error_of(lock) ==
        "lockstep.lock: artifacts[2]: duplicate git repository 'https://example.org/repo.git' "
        "at 'v1.0', first at artifacts[1]; a lock holds one artifact for each; run `lockstep "
        "lock` to write a new lock");
}

TEST_CASE("Integers beyond 2^63-1 in a lock are too large, not negative", "[lock][errors]") {
  const std::string text = envspec::render_lock(sample_lock());
  std::string big = text;
  big.replace(big.find("\"size\":2757936"), 14, "\"size\":9223372036854775808");
  auto r = envspec::parse_lock(big, "lockstep.lock");
  REQUIRE_FALSE(r);
  CHECK(r.error().message ==
        "lockstep.lock: artifacts[0].size: 9223372036854775808 is too large (the limit is "
        "9223372036854775807); run `lockstep lock` to write a new lock");
  std::string max = text;
  max.replace(max.find("\"size\":2757936"), 14, "\"size\":9223372036854775807");
  auto ok = envspec::parse_lock(max, "lockstep.lock");
  REQUIRE(ok);
  CHECK(ok->artifacts[0].size == 9223372036854775807ULL);
  std::string negative = text;
  negative.replace(negative.find("\"size\":2757936"), 14, "\"size\":-1");
  CHECK(envspec::parse_lock(negative, "lockstep.lock").error().message ==
        "lockstep.lock: artifacts[0].size: negative; run `lockstep lock` to write a new lock");
}

TEST_CASE("A lock nested deeper than JSON input may be is refused before it is built", "[lock][errors]") {
  const std::string text = envspec::render_lock(sample_lock());
  std::string deep = text;
  const std::size_t at = deep.find("\"inputs\": ") + 10;
  deep.insert(at, "{\"x\": " + std::string(200000, '[') + std::string(200000, ']') + ", \"y\": ");
  deep.insert(deep.find('\n', at) - 1, "}");
  auto r = envspec::parse_lock(deep, "lockstep.lock");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message == "lockstep.lock: JSON nested more than 128 levels deep (line 7, column 145); "
                             "refusing it");
}

TEST_CASE("A pypi or wheels repository in a lock has no apt keys", "[lock][errors]") {
  Lock lock = sample_lock();
  lock.repos.push_back(envspec::LockedRepo{"pypi", "https://pypi.org/simple", "", {}, "", ""});
  std::string text = envspec::render_lock(lock);
  REQUIRE(envspec::parse_lock(text, "lockstep.lock"));
  // The renderer writes apt's keys for apt repositories only: a lock that has them elsewhere would
  // lose them when rewritten.
  text.replace(text.find("\"url\":\"https://pypi.org/simple\""), 31,
               "\"url\":\"https://pypi.org/simple\",\"suite\":\"bookworm\"");
  auto r = envspec::parse_lock(text, "lockstep.lock");
  REQUIRE_FALSE(r);
  CHECK(r.error().message ==
        "lockstep.lock: repos[1].suite: unknown key; run `lockstep lock` to write a new lock");
}

TEST_CASE("A repository with one suite keeps its line; several suites record each one's Release", "[lock]") {
  Lock lock = sample_lock();
  lock.repos.push_back(
      envspec::LockedRepo{"apt",
                          "http://archive.ubuntu.com/ubuntu",
                          "",
                          {"main", "universe"},
                          "",
                          "",
                          {{"jammy", "Thu, 21 Apr 2022 17:16:08 UTC", std::string(64, 'c')},
                           {"jammy-updates", "Fri, 05 Dec 2025 08:00:00 UTC", std::string(64, 'd')}}});
  const std::string text = envspec::render_lock(lock);
  // The single-suite line is the one locks had before `suites:`: committed locks still read and verify.
  CHECK(text.find("\n    {\"kind\":\"apt\",\"url\":\"http://deb.debian.org/debian\",\"suite\":\"bookworm\","
                  "\"components\":[\"main\"],\"release-date\":\"Sat, 15 Mar 2025 10:00:00 "
                  "UTC\",\"release-sha256\":\"" +
                  std::string(64, 'b') + "\"},\n") != std::string::npos);
  CHECK(text.find(
            "\n    {\"kind\":\"apt\",\"url\":\"http://archive.ubuntu.com/ubuntu\",\"suites\":["
            "{\"suite\":\"jammy\",\"release-date\":\"Thu, 21 Apr 2022 17:16:08 UTC\",\"release-sha256\":\"" +
            std::string(64, 'c') +
            "\"},{\"suite\":\"jammy-updates\",\"release-date\":\"Fri, 05 Dec 2025 08:00:00 UTC\","
            "\"release-sha256\":\"" +
            std::string(64, 'd') + "\"}],\"components\":[\"main\",\"universe\"]}\n  ],\n") !=
        std::string::npos);
  auto parsed = envspec::parse_lock(text, "lockstep.lock");
  REQUIRE(parsed);
  REQUIRE(parsed->repos.size() == 2);
  CHECK(parsed->repos[0].suites.empty());
  CHECK(parsed->repos[0].suite == "bookworm");
  CHECK(parsed->repos[1].suite.empty());
  CHECK(parsed->repos[1].suites == lock.repos[1].suites);
  CHECK(envspec::render_lock(*parsed) == text);

  const auto error_of = [&text](const std::string& from, const std::string& to) {
    std::string t = text;
    const std::size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    t.replace(at, from.size(), to);
    auto r = envspec::parse_lock(t, "lockstep.lock");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  const std::string suffix = "; run `lockstep lock` to write a new lock";
  CHECK(error_of("\"suites\":[", "\"suites\":[{\"suite\":\"jammy-security\",\"release-date\":\"x\","
                                 "\"release-sha256\":\"e\",\"valid-until\":\"y\"},") ==
        "lockstep.lock: repos[1].suites[0].valid-until: unknown key" + suffix);
  CHECK(error_of("{\"suite\":\"jammy-updates\"", "{\"suite\":\"jammy\"") ==
        "lockstep.lock: repos[1].suites[1].suite: suite 'jammy' is listed twice" + suffix);
  CHECK(error_of("{\"suite\":\"jammy-updates\"", "{\"suites\":\"jammy-updates\"") ==
        "lockstep.lock: repos[1].suites[1].suites: unknown key" + suffix);
  CHECK(error_of("\"suites\":[", "\"suite\":\"jammy\",\"suites\":[") ==
        "lockstep.lock: repos[1]: has both 'suites' and 'suite' or 'release-*': each suite's Release goes in "
        "'suites'" +
            suffix);
  // The list itself: one suite, or not a list.
  const std::size_t begin = text.find("\"suites\":[") + 9;
  const std::size_t second = text.find(",{\"suite\":\"jammy-updates\"");
  const std::size_t end = text.find("],\"components\"", second) + 1;
  const std::string one_suite = text.substr(begin, second - begin) + "]";
  for (const std::string& list : {one_suite, std::string("\"jammy\"")}) {
    std::string t = text;
    t.replace(begin, end - begin, list);
    auto r = envspec::parse_lock(t, "lockstep.lock");
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "lockstep.lock: repos[1].suites: expected a list of two or more suites (one "
                               "suite is written as suite, release-date, release-sha256)" +
                                   suffix);
  }
}

namespace {

TEST_CASE("An image base is locked on one line and parses back; a malformed one names its key", "[lock]") {
  Lock lock = sample_lock();
  lock.base = envspec::LockedBase{"docker://docker.io/library/debian:bookworm", sha256_of("manifest"),
                                  sha256_of("config"), "linux/amd64"};
  const std::string text = envspec::render_lock(lock);
  CHECK(text.find("\n  \"base\": {\"image\":\"docker://docker.io/library/debian:bookworm\",\"manifest\":\"" +
                  sha256_of("manifest").str() + "\",\"config\":\"" + sha256_of("config").str() +
                  "\",\"platform\":\"linux/amd64\"},\n") != std::string::npos);
  auto parsed = envspec::parse_lock(text, "lockstep.lock");
  REQUIRE(parsed);
  REQUIRE(parsed->base);
  CHECK(*parsed->base == *lock.base);
  CHECK(envspec::render_lock(*parsed) == text);

  const auto error_of = [&text](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    auto r = envspec::parse_lock(t, "lockstep.lock");
    REQUIRE_FALSE(r);
    return r.error().message;
  };
  CHECK(error_of("\"manifest\":\"sha256:", "\"manifest\":\"md5:") ==
        "lockstep.lock: base.manifest: expected sha256:<64 hex digits>; run `lockstep lock` to write a new "
        "lock");
  CHECK(error_of("\"image\":\"docker://", "\"image\":\"http://") ==
        "lockstep.lock: base.image: expected docker://REF or oci:PATH, found "
        "'http://docker.io/library/debian:bookworm'; run `lockstep lock` to write a new lock");
  CHECK(error_of("{\"image\":", "{\"tag\":\"x\",\"image\":") ==
        "lockstep.lock: base.tag: unknown key; run `lockstep lock` to write a new lock");
}

} // namespace

namespace {

// sample_lock() for linux/amd64 and linux/arm64: libc6 per platform, the git source shared.
Lock two_platform_lock() {
  Lock lock = sample_lock();
  lock.platforms = {"linux/amd64", "linux/arm64"};
  lock.platform_spec_digests = {sha256_of("spec amd64"), sha256_of("spec arm64")};
  lock.inputs = nlohmann::json{{"platforms", {"linux/amd64", "linux/arm64"}}};
  lock.repos.push_back({});
  lock.repos.back().kind = "conda";
  lock.repos.back().url = "https://conda.example/forge";
  lock.repos.back().subdirs = {"linux-64", "noarch", "linux-aarch64"};
  for (LockedArtifact& a : lock.artifacts) {
    if (a.kind == "deb") {
      a.platforms = {"linux/amd64"};
      LockedArtifact arm = a;
      arm.arch = "arm64";
      arm.url = "http://deb.debian.org/debian/pool/main/g/glibc/libc6_2.36-9+deb12u10_arm64.deb";
      arm.sha256 = sha256_of("libc6 arm64");
      arm.platforms = {"linux/arm64"};
      lock.artifacts.push_back(arm);
      break;
    }
  }
  envspec::sort_artifacts(lock.artifacts);
  return lock;
}

} // namespace

TEST_CASE("A multi-platform lock round-trips and gives each platform its share", "[lock][platforms]") {
  const Lock lock = two_platform_lock();
  const std::string text = envspec::render_lock(lock);
  CHECK(text.find("\"platforms\": [\"linux/amd64\",\"linux/arm64\"],\n") != std::string::npos);
  CHECK(text.find("\"platform\": ") == std::string::npos);
  auto parsed = envspec::parse_lock(text, "lockstep.lock");
  REQUIRE(parsed);
  CHECK(envspec::render_lock(*parsed) == text);
  CHECK(parsed->platform == "linux/amd64");
  CHECK(envspec::lock_platforms(*parsed) == std::vector<std::string>{"linux/amd64", "linux/arm64"});
  CHECK(parsed->platform_spec_digests == lock.platform_spec_digests);
  CHECK(text.find("\"platform-spec-digests\": [\"" + sha256_of("spec amd64").str()) != std::string::npos);
  const Lock arm = envspec::lock_for_platform(*parsed, "linux/arm64");
  CHECK(arm.platform == "linux/arm64");
  CHECK(arm.platforms.empty());
  // Exactly the lock of the spec that names linux/arm64 alone: its spec digest, inputs, subdirs.
  CHECK(arm.spec_digest == sha256_of("spec arm64"));
  CHECK(arm.platform_spec_digests.empty());
  CHECK(arm.inputs == nlohmann::json{{"platform", "linux/arm64"}});
  CHECK(arm.repos.back().subdirs == std::vector<std::string>{"linux-aarch64", "noarch"});
  CHECK(envspec::lock_for_platform(*parsed, "linux/amd64").repos.back().subdirs ==
        std::vector<std::string>{"linux-64", "noarch"});
  CHECK(envspec::render_lock(arm).find("platform-spec-digests") == std::string::npos);
  const std::optional<envspec::Lock> arm_share = envspec::lock_share_for_arch(*parsed, "arm64");
  REQUIRE(arm_share);
  CHECK(arm_share->platform == "linux/arm64");
  CHECK_FALSE(envspec::lock_share_for_arch(*parsed, "riscv64"));
  REQUIRE(arm.artifacts.size() == 2); // its libc6 and the shared git source
  for (const LockedArtifact& a : arm.artifacts) {
    CHECK(a.platforms.empty());
    CHECK((a.kind == "git" || a.arch == "arm64"));
  }
  // A single-platform lock is its own share.
  CHECK(envspec::render_lock(envspec::lock_for_platform(sample_lock(), "linux/amd64")) ==
        envspec::render_lock(sample_lock()));
}

TEST_CASE("A malformed multi-platform lock is refused naming the key", "[lock][platforms][errors]") {
  const std::string text = envspec::render_lock(two_platform_lock());
  const auto error_of = [](const std::string& t) {
    auto r = envspec::parse_lock(t, "lockstep.lock");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  const auto edit = [](std::string t, const std::string& from, const std::string& to) {
    REQUIRE(t.find(from) != std::string::npos);
    return t.replace(t.find(from), from.size(), to);
  };
  const std::string both = "\"platforms\": [\"linux/amd64\",\"linux/arm64\"]";
  const std::string arm_only = "\"platforms\":[\"linux/arm64\"]";
  CHECK_THAT(error_of(edit(text, arm_only, "\"platforms\":[\"linux/ppc64le\"]")),
             Catch::Contains("platforms: 'linux/ppc64le' is not one of the lock's platforms"));
  CHECK_THAT(error_of(edit(text, both, "\"platforms\": [\"linux/arm64\",\"linux/arm64\"]")),
             Catch::Contains("platforms[1]: 'linux/arm64' is listed twice"));
  CHECK_THAT(error_of(edit(text, both, "\"platforms\": [\"linux/amd64\"]")),
             Catch::Contains("expected two or more platforms"));
  CHECK_THAT(error_of(edit(text, "[\"" + sha256_of("spec amd64").str() + "\",", "[")),
             Catch::Contains("platform-spec-digests: expected one spec digest per platform"));
  CHECK_THAT(error_of(edit(text, sha256_of("spec arm64").str(), "sha256:12")),
             Catch::Contains("platform-spec-digests[1]"));
  CHECK_THAT(error_of(edit(envspec::render_lock(sample_lock()),
                           "\"inputs\":", "\"platform-spec-digests\": [],\n  \"inputs\":")),
             Catch::Contains("only a multi-platform lock"));
  // Two libc6 debs of one architecture for one platform.
  const std::string dup = edit(edit(text, "\"arch\":\"arm64\"", "\"arch\":\"amd64\""), arm_only,
                               "\"platforms\":[\"linux/amd64\"]");
  CHECK_THAT(error_of(dup), Catch::Contains("duplicate deb package 'libc6' (amd64) for linux/amd64"));
  // An artifact that names platforms in a lock of one.
  CHECK_THAT(error_of(edit(envspec::render_lock(sample_lock()), "\"repo\":0",
                           "\"repo\":0,\"platforms\":[\"linux/amd64\"]")),
             Catch::Contains("only an artifact of a multi-platform lock names platforms"));
}

TEST_CASE_METHOD(SpecFixture, "platforms: lists the platforms of one spec", "[spec][platforms]") {
  const Spec loaded = load_ok("lockstep: 1\nname: x\nplatforms: [linux/amd64, linux/arm64]\n");
  const Spec* spec = &loaded;
  REQUIRE(spec->platforms.size() == 2);
  CHECK(spec->platform.str() == "linux/amd64");
  CHECK(spec->platforms[1].str() == "linux/arm64");
  CHECK(spec->canonical["platforms"] == nlohmann::json{"linux/amd64", "linux/arm64"});
  CHECK_FALSE(spec->canonical.contains("platform"));
  // Each platform's view is the spec that names it alone: the same canonical form and digest.
  const Spec single = load_ok("lockstep: 1\nname: x\nplatform: linux/arm64\n");
  const Spec* alone = &single;
  const Spec arm = envspec::spec_for_platform(*spec, spec->platforms[1]);
  CHECK(arm.canonical == alone->canonical);
  CHECK(arm.digest == alone->digest);
  CHECK(alone->platforms.size() == 1);
  CHECK(envspec::lock_inputs(arm) == envspec::lock_inputs(*alone));
}

TEST_CASE_METHOD(SpecFixture, "A wrong platforms list is reported at the item", "[spec][platforms][errors]") {
  CHECK_THAT(errors("lockstep: 1\nname: x\nplatform: linux/amd64\nplatforms: [linux/arm64]\n"),
             Catch::Contains("give 'platform: linux/amd64' or 'platforms: [...]', not both"));
  CHECK_THAT(errors("lockstep: 1\nname: x\nplatforms: [linux/arm64, linux/arm64/v8]\n"),
             Catch::Contains(":3:26: error: platforms: linux/arm64/v8 is listed twice"));
  CHECK_THAT(errors("lockstep: 1\nname: x\nplatforms: []\n"), Catch::Contains("platforms"));
  // Each platform reads its own conda subdir: a channel's subdirs would give both platforms one.
  CHECK_THAT(
      errors("lockstep: 1\nname: x\nplatforms: [linux/amd64, linux/arm64]\n"
             "repos:\n  - {conda: https://conda.example/forge, subdirs: [linux-64, noarch]}\n"
             "packages:\n  conda: [python]\n"),
      Catch::Contains(":5:5: error: repos: a spec of several platforms reads each platform's conda subdir"));
}
