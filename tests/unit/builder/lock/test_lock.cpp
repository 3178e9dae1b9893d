// Pieces of `lockstep lock` that need no network: layer groups by name, the change summary that
// `lock` prints, and index decompression (the end-to-end lock runs in tests/cli/test_lock.sh).
#include "builder/lock/apt_repo.hpp"
#include "builder/lock/lock.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;
using builder::apt_group_of;
using builder::describe_lock_changes;

namespace {

envspec::LockedArtifact deb(const std::string& name, const std::string& version, const std::string& sha) {
  envspec::LockedArtifact a;
  a.kind = "deb";
  a.name = name;
  a.version = version;
  a.arch = "amd64";
  a.group = "app";
  a.sha256 = sha256_of(sha);
  a.repo = 0;
  return a;
}

} // namespace

TEST_CASE("Requested packages land in their layer group by name", "[lock]") {
  CHECK(apt_group_of("openmpi-bin") == "mpi");
  CHECK(apt_group_of("libopenmpi3") == "mpi");
  CHECK(apt_group_of("python3-mpi4py") == "mpi");
  CHECK(apt_group_of("libucx0") == "mpi");
  CHECK(apt_group_of("cuda-cudart-12-1") == "cuda");
  CHECK(apt_group_of("libnccl2") == "cuda");
  CHECK(apt_group_of("libcudnn8") == "cuda");
  CHECK(apt_group_of("python3-numpy") == "python");
  CHECK(apt_group_of("python3") == "python");
  CHECK(apt_group_of("git") == "app");
  CHECK(apt_group_of("ca-certificates") == "app");
}

TEST_CASE("Lock changes are listed added, changed and removed", "[lock]") {
  envspec::Lock before;
  before.artifacts = {deb("a", "1", "a1"), deb("b", "1", "b1"), deb("c", "1", "c1")};
  envspec::Lock after;
  after.artifacts = {deb("a", "1", "a1"), deb("b", "2", "b2"), deb("d", "1", "d1")};
  CHECK(describe_lock_changes(before, after) == std::vector<std::string>{"~ b 1 -> 2", "+ d 1", "- c 1"});
  CHECK(describe_lock_changes(after, after).empty());
}

TEST_CASE("Indexes decompress by their name and are bounded", "[lock]") {
  test::TempDirFixture tmp;
  const std::string text = "Package: a\nVersion: 1\n";
  const auto plain = tmp.write("Packages", text);
  test::run_command("cd " + tmp.dir().string() + " && xz -k Packages && gzip -k Packages");
  const auto xz = builder::decompress_index(test::slurp(tmp.dir() / "Packages.xz"), "Packages.xz", 1 << 20);
  REQUIRE(xz);
  CHECK(*xz == text);
  const auto gz = builder::decompress_index(test::slurp(tmp.dir() / "Packages.gz"), "Packages.gz", 1 << 20);
  REQUIRE(gz);
  CHECK(*gz == text);
  const auto raw = builder::decompress_index(text, "Packages", 1 << 20);
  REQUIRE(raw);
  CHECK(*raw == text);
  const auto big = builder::decompress_index(test::slurp(tmp.dir() / "Packages.xz"), "Packages.xz", 5);
  REQUIRE_FALSE(big);
  CHECK(big.error().message == "Packages.xz: decompresses to more than 5 bytes");
}

TEST_CASE("A lock's local files must lie in the project or a local repository the spec names", "[lock]") {
  namespace fs = std::filesystem;
  test::TempDirFixture tmp;
  const fs::path proj = tmp.dir() / "a/b/proj";
  tmp.write("a/b/proj/debs/ok_1_amd64.deb", "in the project");
  tmp.write("mirror/pool/m_1_amd64.deb", "in a named repository");
  const fs::path secret = tmp.write("a/secret", "root:SECRET\n");
  fs::create_symlink(secret, proj / "debs/link.deb");
  envspec::Spec spec;
  spec.dir = proj;
  envspec::Repo mirror;
  mirror.kind = envspec::Repo::Kind::apt;
  mirror.url = "file://" + (tmp.dir() / "mirror").string();
  spec.repos.push_back(mirror);

  const auto with_url = [](const std::string& url) {
    envspec::Lock lock;
    lock.artifacts = {deb("ls-lib", "2.0-1", "x")};
    lock.artifacts[0].url = url;
    return lock;
  };
  for (const std::string& url :
       {std::string("debs/ok_1_amd64.deb"), "file://" + (proj / "debs/ok_1_amd64.deb").string(),
        (tmp.dir() / "mirror/pool/m_1_amd64.deb").string(),
        std::string("https://deb.example.org/pool/x.deb")}) {
    INFO(url);
    REQUIRE_OK(builder::check_lock_local_files(with_url(url), spec));
  }
  for (const std::string& url :
       {"file://" + secret.string(), secret.string(), std::string("../secret"),
        std::string("../../../a/secret"), std::string("debs/link.deb"), std::string("file:///etc/shadow")}) {
    INFO(url);
    auto r = builder::check_lock_local_files(with_url(url), spec);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK_THAT(
        r.error().message,
        Catch::StartsWith("the lock names local files outside the spec's directory " + proj.string() +
                          " and the local repositories the spec names; nothing was read:\n  deb ls-lib "
                          "2.0-1 (url " +
                          url + ") leads to ") &&
            Catch::EndsWith("\nA lock names local files only there: lock again with `lockstep lock` (do "
                            "not use a lock edited by hand or made elsewhere), or name the local "
                            "repository that holds them in the spec's repos"));
  }
  auto bad = builder::check_lock_local_files(with_url("file://host/etc/shadow"), spec);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == ExitCode::invalid_input);
}
