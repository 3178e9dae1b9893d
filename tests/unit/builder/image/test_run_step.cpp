#include "builder/image/run_step.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>

using namespace lockstep;
using namespace lockstep::builder;
namespace fs = std::filesystem;

namespace {

std::string listing(const LayerPlan& plan) {
  std::string out;
  for (const auto& e : plan.entries) {
    const TarEntry& t = e.tar;
    const char* type = "?";
    switch (t.type) {
    case TarEntry::Type::file:
      type = "f";
      break;
    case TarEntry::Type::dir:
      type = "d";
      break;
    case TarEntry::Type::symlink:
      type = "l";
      break;
    case TarEntry::Type::hardlink:
      type = "h";
      break;
    default:
      type = "o";
      break;
    }
    out += fmt::format("{} {} {:04o} {}:{} {}{}\n", type, t.path, t.mode, t.uid, t.gid, t.mtime,
                       t.link_target.empty() ? "" : " -> " + t.link_target);
  }
  return out;
}

void set_mtime(const fs::path& p, std::int64_t t) {
  struct timespec ts[2] = {{t, 0}, {t, 0}};
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
}

struct UpperFixture : test::TempDirFixture {
  fs::path upper = dir() / "upper";
  fs::path lower = dir() / "lower";
  UpperFixture() {
    fs::create_directories(upper);
    fs::create_directories(lower);
  }
};

} // namespace

TEST_CASE_METHOD(UpperFixture, "A step's upper directory becomes a sorted layer with whiteouts", "[run]") {
  if (::geteuid() != 0) {
    WARN("creating overlay whiteouts (char device 0:0) needs root; this case runs in CI as root");
    return;
  }
  write("upper/etc/app.conf", "x=1\n");
  write("upper/opt/new/a", "a");
  fs::create_directories(upper / "var/cache");
  REQUIRE(::mknod((upper / "etc/old.conf").c_str(), S_IFCHR | 0, makedev(0, 0)) == 0);
  REQUIRE(::setxattr((upper / "opt/new").c_str(), "user.overlay.opaque", "y", 1, 0) == 0);
  ::chmod((upper / "etc/app.conf").c_str(), 0600);
  REQUIRE(::link((upper / "opt/new/a").c_str(), (upper / "opt/new/b").c_str()) == 0);
  fs::create_symlink("../etc/app.conf", upper / "opt/link");
  for (const char* p : {"etc", "etc/app.conf", "opt", "opt/new", "opt/new/a", "var", "var/cache"}) {
    set_mtime(upper / p, 4000000000);
  }
  set_mtime(upper / "opt/link", 100);
  UpperLayout layout;
  auto plan = plan_upper_layer(upper, lower, layout, 1000);
  REQUIRE(plan);
  CHECK(listing(*plan) == "d etc 0755 0:0 1000\n"
                          "f etc/.wh.old.conf 0644 0:0 1000\n"
                          "f etc/app.conf 0600 0:0 1000\n"
                          "d opt 0755 0:0 1000\n"
                          "l opt/link 0777 0:0 100\n"
                          "d opt/new 0755 0:0 1000\n"
                          "f opt/new/.wh..wh..opq 0644 0:0 1000\n"
                          "f opt/new/a 0644 0:0 1000\n"
                          "h opt/new/b 0644 0:0 1000 -> opt/new/a\n"
                          "d var 0755 0:0 1000\n"
                          "d var/cache 0755 0:0 1000\n");
  CHECK(plan->content_bytes == 5);
}

TEST_CASE_METHOD(UpperFixture, "Files owned by the host user who ran the step are recorded as root",
                 "[run]") {
  write("upper/f", "x");
  struct stat st {};
  REQUIRE(::lstat((upper / "f").c_str(), &st) == 0);
  UpperLayout layout;
  layout.uids = {{static_cast<std::uint32_t>(st.st_uid), 1, 0}};
  layout.gids = {{static_cast<std::uint32_t>(st.st_gid), 1, 0}};
  if (st.st_uid == 0) {
    REQUIRE(::chown((upper / "f").c_str(), 1234, 1235) == 0);
    layout.uids = {{1234, 1, 0}};
    layout.gids = {{1235, 1, 0}};
  }
  set_mtime(upper / "f", 10);
  auto plan = plan_upper_layer(upper, lower, layout, 1000);
  REQUIRE(plan);
  CHECK(listing(*plan) == "f f 0644 0:0 10\n");
}

TEST_CASE_METHOD(UpperFixture,
                 "A root build's confined id range maps back to the image's ids; ids outside it are "
                 "refused",
                 "[run]") {
  if (::geteuid() != 0) {
    WARN("needs root to chown into the confined range; skipped");
    return;
  }
  write("upper/a", "x");
  write("upper/b", "y");
  REQUIRE(::chown((upper / "a").c_str(), 0x80000000U, 0x80000000U + 42) == 0);
  REQUIRE(::chown((upper / "b").c_str(), 0x80000000U + 1000, 0x80000000U + 1000) == 0);
  set_mtime(upper / "a", 10);
  set_mtime(upper / "b", 10);
  UpperLayout layout;
  layout.uids = {{0x80000000U, 0x7FFFFFFFU, 0}};
  layout.gids = layout.uids;
  auto plan = plan_upper_layer(upper, lower, layout, 1000);
  REQUIRE(plan);
  CHECK(listing(*plan) == "f a 0644 0:42 10\nf b 0644 1000:1000 10\n");
  REQUIRE(::chown((upper / "b").c_str(), 0, 0) == 0); // host root: no id the step could have
  plan = plan_upper_layer(upper, lower, layout, 1000);
  REQUIRE_FALSE(plan);
  CHECK_THAT(plan.error().message,
             Catch::Contains("/b is owned by host ids 0:0, outside the build sandbox's id range"));
}

TEST_CASE_METHOD(UpperFixture, "Mount points the sandbox created stay out of the layer", "[run]") {
  fs::create_directories(upper / "proc");
  fs::create_directories(upper / "home/user");
  write("upper/etc/resolv.conf", "");
  write("upper/etc/hosts", "127.0.0.1 localhost\n"); // written by the step: kept
  fs::create_directories(upper / "dev");
  write("upper/dev/keep", "k"); // not empty: kept
  fs::create_directories(lower / "home");
  for (const char* p :
       {"proc", "home", "home/user", "etc", "etc/resolv.conf", "etc/hosts", "dev", "dev/keep"}) {
    set_mtime(upper / p, 5);
  }
  UpperLayout layout;
  layout.mount_points = {"proc", "dev", "home/user", "etc/resolv.conf", "etc/hosts"};
  auto plan = plan_upper_layer(upper, lower, layout, 1000);
  REQUIRE(plan);
  CHECK(listing(*plan) == "d dev 0755 0:0 5\n"
                          "f dev/keep 0644 0:0 5\n"
                          "d etc 0755 0:0 5\n"
                          "f etc/hosts 0644 0:0 5\n"
                          "d home 0755 0:0 5\n");
}

TEST_CASE_METHOD(UpperFixture, "A step can't create names reserved for whiteouts", "[run]") {
  write("upper/opt/.wh.x", "");
  auto plan = plan_upper_layer(upper, lower, UpperLayout{}, 0);
  REQUIRE_FALSE(plan);
  CHECK(plan.error().message == "the step created /opt/.wh.x, a name reserved for layer whiteouts");
}

TEST_CASE_METHOD(UpperFixture, "Normalising drops logs and caches and clamps .pyc source times", "[run]") {
  write("upper/var/log/dpkg.log", "2026-11-30 install\n");
  write("upper/var/log/apt/history.log", "Start-Date: now\n");
  write("upper/var/log/keep.log", "mine\n");
  write("upper/var/cache/ldconfig/aux-cache", "x");
  write("upper/tmp/scratch", "x");
  write("upper/root/.cache/pip/http/1", "x");
  // A timestamp-based pyc (flags 0) recording source mtime 2000000000, and a hash-based one.
  std::string pyc("\x6f\x0d\x0d\x0a", 4);
  std::string ts = pyc + std::string("\0\0\0\0", 4);
  std::uint32_t mtime = 2000000000;
  ts.append(reinterpret_cast<const char*>(&mtime), 4);
  ts.append("\x05\0\0\0code", 8);
  std::string hashed = pyc + std::string("\x01\0\0\0", 4) + "12345678" + "code";
  write("upper/usr/lib/python3/__pycache__/m.cpython-311.pyc", ts);
  write("upper/usr/lib/python3/__pycache__/h.cpython-311.pyc", hashed);

  auto dropped = normalize_upper(upper, 1700000000);
  REQUIRE(dropped);
  CHECK(*dropped == std::vector<std::string>{"var/log/dpkg.log", "var/log/apt/history.log",
                                             "var/cache/ldconfig/aux-cache", "root/.cache/pip",
                                             "tmp/scratch"});
  CHECK(fs::exists(upper / "var/log/keep.log"));
  CHECK(fs::is_directory(upper / "var/log/apt"));
  std::string fixed = test::slurp(upper / "usr/lib/python3/__pycache__/m.cpython-311.pyc");
  std::uint32_t got = 0;
  std::memcpy(&got, fixed.data() + 8, 4);
  CHECK(got == 1700000000);
  CHECK(fixed.substr(12) == ts.substr(12));
  CHECK(test::slurp(upper / "usr/lib/python3/__pycache__/h.cpython-311.pyc") == hashed);
}

TEST_CASE("A step's fingerprint covers what it runs over and what it runs", "[run]") {
  envspec::RunStep step;
  step.sh = "make";
  RunStepInputs in;
  in.parent_diff_ids = {Digest::parse("sha256:" + std::string(64, 'a')).value()};
  in.env = {"PATH=/bin"};
  in.workdir = "/";
  in.settings = "gzip";
  const Digest base = run_step_fingerprint(step, in);
  CHECK(run_step_fingerprint(step, in) == base);
  auto changed = [&](auto mutate) {
    envspec::RunStep s = step;
    RunStepInputs i = in;
    mutate(s, i);
    return run_step_fingerprint(s, i) != base;
  };
  CHECK(changed([](envspec::RunStep& s, RunStepInputs&) { s.sh = "make all"; }));
  CHECK(changed([](envspec::RunStep& s, RunStepInputs&) { s.network = true; }));
  CHECK(changed([](envspec::RunStep&, RunStepInputs& i) { i.parent_diff_ids.clear(); }));
  CHECK(changed([](envspec::RunStep&, RunStepInputs& i) { i.env.push_back("A=1"); }));
  CHECK(changed([](envspec::RunStep&, RunStepInputs& i) { i.workdir = "/opt"; }));
  CHECK(changed([](envspec::RunStep&, RunStepInputs& i) { i.epoch = 1; }));
  CHECK(changed([](envspec::RunStep&, RunStepInputs& i) { i.settings = "zstd"; }));
}
