// Pieces of `lockstep lock` that need no network: layer groups by name, the change summary that
// `lock` prints, and index decompression (the end-to-end lock runs in tests/cli/test_lock.sh).
#include "builder/apt_repo.hpp"
#include "builder/lock.hpp"
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
