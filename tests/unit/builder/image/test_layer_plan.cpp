#include "builder/image/layer_plan.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <thread>

using namespace lockstep;
using namespace lockstep::builder;
namespace fs = std::filesystem;

namespace {

envspec::CopyItem item(const fs::path& from, const std::string& to) {
  envspec::CopyItem it;
  it.from = from;
  it.from_text = from.filename().string();
  // As envspec gives it: normalised, with a trailing '/' recorded in to_is_dir.
  it.to_is_dir = to.size() > 1 && to.back() == '/';
  it.to = it.to_is_dir ? to.substr(0, to.size() - 1) : to;
  return it;
}

std::string listing(const LayerPlan& plan) {
  std::string out;
  for (const auto& e : plan.entries) {
    const TarEntry& t = e.tar;
    out += fmt::format("{} {} {:04o} {}:{}{}\n", static_cast<int>(t.type), t.path, t.mode, t.uid, t.gid,
                       t.type == TarEntry::Type::hardlink ? " -> " + t.link_target : "");
  }
  return out;
}

void set_mtime(const fs::path& p, std::int64_t t) {
  struct timespec ts[2] = {{t, 0}, {t, 0}};
  ::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW);
}

} // namespace

TEST_CASE("members are ordered depth-first with names sorted bytewise in each directory", "[plan]") {
  test::TempDirFixture tmp;
  tmp.write("src/a/z", "1");
  tmp.write("src/a-b", "2");
  tmp.write("src/B", "3");
  tmp.write("src/a/A", "4");
  auto plan = plan_copy_layer({item(tmp.dir() / "src", "/opt/x")}, 0, "test");
  REQUIRE(plan);
  std::vector<std::string> paths;
  for (const auto& e : plan->entries) {
    paths.push_back(e.tar.path);
  }
  CHECK(paths == std::vector<std::string>{"opt", "opt/x", "opt/x/B", "opt/x/a", "opt/x/a/A", "opt/x/a/z",
                                          "opt/x/a-b"});
}

TEST_CASE("modes are normalised by default and never depend on the umask", "[plan]") {
  test::TempDirFixture tmp;
  auto f = tmp.write("src/data.txt", "x");
  auto x = tmp.write("src/run", "x");
  auto s = tmp.write("src/suid", "x");
  ::chmod(f.c_str(), 0664);
  ::chmod(x.c_str(), 0700);
  ::chmod(s.c_str(), 04755);
  ::chmod((tmp.dir() / "src").c_str(), 0700);
  auto plan = plan_copy_layer({item(tmp.dir() / "src", "/")}, 0, "test");
  REQUIRE(plan);
  CHECK(listing(*plan) == "0 data.txt 0644 0:0\n"
                          "0 run 0755 0:0\n"
                          "0 suid 0755 0:0\n");
}

TEST_CASE("mode: preserve keeps every permission bit and owner: preserve keeps ids", "[plan]") {
  test::TempDirFixture tmp;
  auto s = tmp.write("src/suid", "x");
  ::chmod(s.c_str(), 04750);
  ::chmod((tmp.dir() / "src").c_str(), 01777);
  auto it = item(tmp.dir() / "src", "/t");
  it.mode_policy = envspec::ModePolicy::preserve;
  it.owner_policy = envspec::OwnerPolicy::preserve;
  auto plan = plan_copy_layer({it}, 0, "test");
  REQUIRE(plan);
  std::string ids = fmt::format("{}:{}", ::getuid(), ::getgid());
  CHECK(listing(*plan) == "1 t 1777 " + ids + "\n0 t/suid 4750 " + ids + "\n");
}

TEST_CASE("a fixed mode and owner apply to files; directories stay 0755", "[plan]") {
  test::TempDirFixture tmp;
  tmp.write("src/sub/f", "x");
  auto it = item(tmp.dir() / "src", "/t");
  it.mode_policy = envspec::ModePolicy::fixed;
  it.mode = 0640;
  it.uid = 1000;
  it.gid = 100;
  auto plan = plan_copy_layer({it}, 0, "test");
  REQUIRE(plan);
  CHECK(listing(*plan) == "1 t 0755 1000:100\n1 t/sub 0755 1000:100\n0 t/sub/f 0640 1000:100\n");
}

TEST_CASE("mtimes are clamped to the epoch", "[plan]") {
  test::TempDirFixture tmp;
  auto old_file = tmp.write("src/old", "x");
  auto new_file = tmp.write("src/new", "x");
  set_mtime(old_file, 1000);
  set_mtime(new_file, 2000000000);
  auto plan = plan_copy_layer({item(tmp.dir() / "src", "/")}, 1700000000, "test");
  REQUIRE(plan);
  REQUIRE(plan->entries.size() == 2);
  CHECK(plan->entries[0].tar.path == "new");
  CHECK(plan->entries[0].tar.mtime == 1700000000);
  CHECK(plan->entries[1].tar.mtime == 1000);
}

TEST_CASE("hard links become link members to the first path, only within one copy item", "[plan]") {
  test::TempDirFixture tmp;
  auto a = tmp.write("src/b-first", "data");
  ::link(a.c_str(), (tmp.dir() / "src/a-second").c_str());
  ::link(a.c_str(), (tmp.dir() / "src/c-third").c_str());
  auto plan =
      plan_copy_layer({item(tmp.dir() / "src", "/x"), item(tmp.dir() / "src/c-third", "/y")}, 0, "test");
  REQUIRE(plan);
  CHECK(listing(*plan) == "1 x 0755 0:0\n"
                          "0 x/a-second 0644 0:0\n"
                          "3 x/b-first 0644 0:0 -> x/a-second\n"
                          "3 x/c-third 0644 0:0 -> x/a-second\n"
                          "0 y 0644 0:0\n");
  CHECK(plan->entries[2].tar.size == 0);
}

TEST_CASE("later copy items override earlier ones at the same path", "[plan]") {
  test::TempDirFixture tmp;
  tmp.write("one/conf/a", "1");
  tmp.write("one/conf/b", "1");
  tmp.write("two/conf", "file now");
  tmp.write("three/x.txt", "3");
  auto plan = plan_copy_layer({item(tmp.dir() / "one", "/etc"), item(tmp.dir() / "two", "/etc"),
                               item(tmp.dir() / "three/x.txt", "/etc/conf.d/")},
                              0, "test");
  REQUIRE(plan);
  CHECK(listing(*plan) == "1 etc 0755 0:0\n"
                          "0 etc/conf 0644 0:0\n"
                          "1 etc/conf.d 0755 0:0\n"
                          "0 etc/conf.d/x.txt 0644 0:0\n");
}

TEST_CASE("symlinks are copied as symlinks; sockets are skipped", "[plan]") {
  test::TempDirFixture tmp;
  tmp.write("src/target", "x");
  fs::create_symlink("../outside/secret", tmp.dir() / "src/link");
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::string sock = (tmp.dir() / "src/sock").string();
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.c_str());
  REQUIRE(::bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) == 0);
  auto plan = plan_copy_layer({item(tmp.dir() / "src", "/")}, 0, "test");
  ::close(fd);
  REQUIRE(plan);
  REQUIRE(plan->entries.size() == 2);
  PlannedEntry link = plan->entries[0];
  CHECK(link.tar.type == TarEntry::Type::symlink);
  REQUIRE(complete_entry(link));
  CHECK(link.tar.link_target == "../outside/secret");
  CHECK(link.tar.mode == 0777);
}

TEST_CASE("the fingerprint is stable and follows every input", "[plan]") {
  test::TempDirFixture tmp;
  auto f = tmp.write("src/f", "one");
  auto fp = [&](std::int64_t epoch = 0, const std::string& settings = "s") {
    auto plan = plan_copy_layer({item(tmp.dir() / "src", "/")}, epoch, settings);
    REQUIRE(plan);
    return plan->fingerprint;
  };
  Digest first = fp();
  CHECK(fp() == first);
  CHECK(fp(1) != first);
  CHECK(fp(0, "other settings") != first);
  ::chmod(f.c_str(), 0755);
  Digest after_chmod = fp();
  CHECK(after_chmod != first);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  tmp.write("src/f", "two"); // same size: only the timestamps and content differ
  CHECK(fp() != after_chmod);
}

TEST_CASE("sources changed in the last two seconds make the plan uncacheable", "[plan]") {
  test::TempDirFixture tmp;
  auto f = tmp.write("src/f", "x");
  auto plan = plan_copy_layer({item(tmp.dir() / "src", "/")}, 0, "s");
  REQUIRE(plan);
  CHECK_FALSE(plan->cacheable);
}

TEST_CASE("a missing source is an error naming it", "[plan]") {
  test::TempDirFixture tmp;
  auto plan = plan_copy_layer({item(tmp.dir() / "nope", "/")}, 0, "s");
  REQUIRE_FALSE(plan);
  CHECK(plan.error().message ==
        "can't copy nope (" + (tmp.dir() / "nope").string() + "): No such file or directory");
}

TEST_CASE("a top-level symlink to a directory is followed; links inside are not", "[plan]") {
  test::TempDirFixture tmp;
  tmp.write("real/inner/file", "x");
  fs::create_symlink("inner", tmp.dir() / "real/link-to-inner");
  fs::create_symlink("real", tmp.dir() / "top");
  auto plan = plan_copy_layer({item(tmp.dir() / "top", "/t")}, 0, "test");
  REQUIRE(plan);
  CHECK(listing(*plan) == "1 t 0755 0:0\n"
                          "1 t/inner 0755 0:0\n"
                          "0 t/inner/file 0644 0:0\n"
                          "2 t/link-to-inner 0777 0:0\n");
}
