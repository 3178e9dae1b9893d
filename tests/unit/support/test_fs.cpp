#include "support/fs.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

using namespace lockstep;
namespace fs = std::filesystem;

TEST_CASE("image paths are normalised and never climb out of the root", "[fs]") {
  CHECK(*normalize_image_path("/") == "/");
  CHECK(*normalize_image_path("/opt//app/./bin/") == "/opt/app/bin");
  CHECK(*normalize_image_path("/./") == "/");
  auto rel = normalize_image_path("opt/app");
  REQUIRE_FALSE(rel);
  CHECK(rel.error().message == "'opt/app' is not an absolute path");
  auto up = normalize_image_path("/opt/../../etc");
  REQUIRE_FALSE(up);
  CHECK(up.error().message == "'/opt/../../etc' contains a '..' component");
}

TEST_CASE("an atomic file is invisible until committed and gone if abandoned", "[fs]") {
  test::TempDirFixture tmp;
  fs::path target = tmp.dir() / "out.json";
  {
    auto f = AtomicFile::create(target, 0644);
    REQUIRE(f);
    REQUIRE(f->write("partial"));
    CHECK_FALSE(fs::exists(target));
  }
  CHECK_FALSE(fs::exists(target));
  CHECK(fs::is_empty(tmp.dir()));
  REQUIRE(write_file_atomic(target, "done", 0640));
  CHECK(test::slurp(target) == "done");
  struct stat st {};
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
}

TEST_CASE("file modes do not depend on the umask", "[fs]") {
  test::TempDirFixture tmp;
  mode_t old = ::umask(077);
  REQUIRE(write_file_atomic(tmp.dir() / "a", "x", 0644));
  ::umask(old);
  struct stat st {};
  REQUIRE(::stat((tmp.dir() / "a").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);
}

TEST_CASE("replace_directory swaps a staged directory in", "[fs]") {
  test::TempDirFixture tmp;
  tmp.write("old/file", "old");
  tmp.write("new/file", "new");
  REQUIRE(replace_directory(tmp.dir() / "new", tmp.dir() / "old"));
  CHECK(test::slurp(tmp.dir() / "old" / "file") == "new");
  CHECK_FALSE(fs::exists(tmp.dir() / "new"));
  REQUIRE(replace_directory(tmp.dir() / "old", tmp.dir() / "fresh"));
  CHECK(test::slurp(tmp.dir() / "fresh" / "file") == "new");
}
