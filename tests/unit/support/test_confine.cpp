// Confinement of host paths: judged by where they lead through symlinks, before anything is opened.
#include "support/system/confine.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

using namespace lockstep;
namespace fs = std::filesystem;

TEST_CASE("is_within compares whole path components", "[confine]") {
  CHECK(is_within("/a/b", "/a/b"));
  CHECK(is_within("/a/b/c", "/a/b"));
  CHECK(is_within("/a/b/c", "/a/b/"));
  CHECK_FALSE(is_within("/a/bc", "/a/b"));
  CHECK_FALSE(is_within("/a", "/a/b"));
  CHECK_FALSE(is_within("/etc/shadow", "/a/b"));
}

TEST_CASE("A path inside a root is inside, through symlinks that stay inside", "[confine]") {
  test::TempDirFixture tmp;
  tmp.write("proj/src/main.c", "int main;");
  fs::create_directory_symlink("src", tmp.dir() / "proj/alias");
  auto c = confine_path(tmp.dir() / "proj/alias/main.c", {tmp.dir() / "proj"});
  REQUIRE_OK(c);
  CHECK(c->inside());
  CHECK(*c->root == tmp.dir() / "proj");
  CHECK(c->real == fs::canonical(tmp.dir() / "proj/src/main.c"));
}

TEST_CASE("A path outside every root is outside, and a symlink out is named as such", "[confine]") {
  test::TempDirFixture tmp;
  const fs::path secret = tmp.write("secret", "s");
  fs::create_directories(tmp.dir() / "proj");
  fs::create_symlink(secret, tmp.dir() / "proj/link");

  auto direct = confine_path(secret, {tmp.dir() / "proj"});
  REQUIRE_OK(direct);
  CHECK_FALSE(direct->inside());
  CHECK_FALSE(direct->through_symlink);

  auto dotdot = confine_path(tmp.dir() / "proj/../secret", {tmp.dir() / "proj"});
  REQUIRE_OK(dotdot);
  CHECK_FALSE(dotdot->inside());
  CHECK_FALSE(dotdot->through_symlink);

  auto link = confine_path(tmp.dir() / "proj/link", {tmp.dir() / "proj"});
  REQUIRE_OK(link);
  CHECK_FALSE(link->inside());
  CHECK(link->through_symlink);
  CHECK(link->real == fs::canonical(secret));
}

TEST_CASE("Confinement opens nothing and does not tell what exists outside", "[confine]") {
  test::TempDirFixture tmp;
  fs::create_directories(tmp.dir() / "proj");
  // A FIFO would block an open(2): judging it returns at once.
  REQUIRE(::mkfifo((tmp.dir() / "fifo").c_str(), 0600) == 0);
  auto fifo = confine_path(tmp.dir() / "fifo", {tmp.dir() / "proj"});
  REQUIRE_OK(fifo);
  CHECK_FALSE(fifo->inside());
  // Missing outside is "outside", like present outside; missing inside is inside (the caller reports it).
  auto missing = confine_path(tmp.dir() / "nope/file", {tmp.dir() / "proj"});
  REQUIRE_OK(missing);
  CHECK_FALSE(missing->inside());
  auto missing_inside = confine_path(tmp.dir() / "proj/nope", {tmp.dir() / "proj"});
  REQUIRE_OK(missing_inside);
  CHECK(missing_inside->inside());
}

TEST_CASE("A root that does not exist holds nothing; the first root that holds the path is named",
          "[confine]") {
  test::TempDirFixture tmp;
  tmp.write("b/f", "x");
  auto c = confine_path(tmp.dir() / "b/f", {tmp.dir() / "missing", tmp.dir() / "a", tmp.dir() / "b"});
  REQUIRE_OK(c);
  CHECK(*c->root == tmp.dir() / "b");
  auto none = confine_path(tmp.dir() / "missing/f", {tmp.dir() / "missing"});
  REQUIRE_OK(none);
  CHECK_FALSE(none->inside());
}

TEST_CASE("A symlink loop is an error naming the path", "[confine]") {
  test::TempDirFixture tmp;
  fs::create_directories(tmp.dir() / "proj");
  fs::create_symlink("loop", tmp.dir() / "proj/loop");
  auto c = confine_path(tmp.dir() / "proj/loop/x", {tmp.dir() / "proj"});
  REQUIRE_FALSE(c);
  CHECK(c.error().code == ExitCode::io);
  CHECK_THAT(c.error().message, Catch::StartsWith("can't resolve " + (tmp.dir() / "proj/loop/x").string()));
}
