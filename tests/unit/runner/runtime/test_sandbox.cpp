#include "runner/runtime/sandbox.hpp"
#include "runner/runtime/sif_mount.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_busybox = "/bin/busybox";

// A root directory holding a static busybox and the applets the tests use.
struct BusyboxRoot {
  test::TempDirFixture tmp;
  fs::path root = tmp.dir() / "root";
  fs::path outside = tmp.dir() / "outside";

  BusyboxRoot() {
    fs::create_directories(root / "bin");
    fs::create_directories(root / "etc");
    fs::create_directories(outside);
    fs::copy_file(k_busybox, root / "bin/busybox");
    for (const char* applet : {"sh", "true", "cat", "env", "id", "ls", "touch", "pwd", "kill", "echo", "test",
                               "grep", "sort", "tr", "mount", "head", "wc"}) {
      fs::create_symlink("busybox", root / "bin" / applet);
    }
  }

  // A config running `sh -c SCRIPT` with no home, the default binds and PATH=/bin.
  [[nodiscard]] SandboxConfig config(const std::string& script) const {
    SandboxConfig c;
    c.root = root;
    c.env = {"PATH=/bin"};
    c.argv = {"/bin/sh", "-c", script};
    return c;
  }
};

bool have_busybox() {
  struct stat st {};
  return ::stat(k_busybox, &st) == 0;
}

} // namespace

TEST_CASE("a mount point is looked up inside the root, never through a symlink out of it", "[sandbox]") {
  test::TempDirFixture tmp;
  fs::path root = tmp.dir() / "root";
  fs::create_directories(root / "etc");
  fs::create_directories(root / "var");
  fs::create_symlink("/etc", root / "mnt");              // absolute: means the root's /etc
  fs::create_symlink("../../../../../etc", root / "up"); // climbs: stops at the root
  fs::create_symlink("/run", root / "var/run");          // to a directory the image lacks
  fs::create_symlink("loop2", root / "loop1");
  fs::create_symlink("loop1", root / "loop2");
  tmp.write("root/etc/hosts", "");

  Result<MountPointLookup> r = lookup_mount_point(root, "/mnt/foo");
  REQUIRE(r.ok());
  CHECK(r->path == "/etc/foo");
  CHECK(r->kind == PathKind::missing);

  r = lookup_mount_point(root, "/up/hosts");
  REQUIRE(r.ok());
  CHECK(r->path == "/etc/hosts");
  CHECK(r->kind == PathKind::other);

  r = lookup_mount_point(root, "/var/run/app");
  REQUIRE(r.ok());
  CHECK(r->path == "/run/app");
  CHECK(r->kind == PathKind::missing);

  r = lookup_mount_point(root, "/mnt");
  REQUIRE(r.ok());
  CHECK(r->path == "/etc");
  CHECK(r->kind == PathKind::directory);

  r = lookup_mount_point(root, "/loop1/x");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("too many levels of symbolic links"));

  r = lookup_mount_point(root, "/etc/hosts/x");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("not a directory"));
}

TEST_CASE("a created mount point lands inside the root even through an absolute symlink", "[sandbox]") {
  test::TempDirFixture tmp;
  fs::path root = tmp.dir() / "root";
  fs::path outside = tmp.dir() / "outside";
  fs::create_directories(root);
  fs::create_directories(outside);
  fs::create_symlink(outside, root / "mnt"); // a host path, taken as a path inside the root

  REQUIRE(create_in_root(root, "/mnt/foo", PathKind::directory).ok());
  CHECK(fs::is_empty(outside));
  CHECK(fs::is_directory(root / outside.relative_path() / "foo"));

  REQUIRE(create_in_root(root, "/mnt/file", PathKind::other).ok());
  CHECK(fs::is_regular_file(root / outside.relative_path() / "file"));
  CHECK(fs::is_empty(outside));

  Result<PathKind> k = probe_in_root(root, "/mnt/foo");
  REQUIRE(k.ok());
  CHECK(*k == PathKind::directory);
  k = probe_in_root(root, "/mnt/none");
  REQUIRE(k.ok());
  CHECK(*k == PathKind::missing);
}

TEST_CASE("the SIF mount path is one of auto, loop, fuse or extract", "[sandbox][sif]") {
  for (SifMountMode m :
       {SifMountMode::automatic, SifMountMode::loop, SifMountMode::fuse, SifMountMode::extract}) {
    Result<SifMountMode> parsed = parse_sif_mount_mode(sif_mount_mode_name(m));
    REQUIRE(parsed.ok());
    CHECK(*parsed == m);
  }
  Result<SifMountMode> bad = parse_sif_mount_mode("nfs");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("auto, loop, fuse or extract"));
}

TEST_CASE("the sandbox returns the command's exit status, 128+N for a signal", "[sandbox][run]") {
  if (!have_busybox()) {
    WARN("busybox-static is not installed; skipped");
    return;
  }
  BusyboxRoot b;
  Result<int> r = run_in_sandbox(b.config("exit 42"));
  REQUIRE(r.ok());
  CHECK(*r == 42);
  r = run_in_sandbox(b.config("kill -TERM $$"));
  REQUIRE(r.ok());
  CHECK(*r == 128 + 15);
  SandboxConfig pid = b.config("exit 3");
  pid.pid_namespace = true;
  r = run_in_sandbox(pid);
  REQUIRE(r.ok());
  CHECK(*r == 3);
}

TEST_CASE("a confined command is root of a user namespace of its own, sees only its own processes and can't "
          "mount",
          "[sandbox][run]") {
  if (!have_busybox()) {
    WARN("busybox-static is not installed; skipped");
    return;
  }
  BusyboxRoot b;
  SandboxConfig c = b.config("test \"$(id -u)\" = 0 || exit 10; "
                             "cat /proc/self/uid_map > /tmp/map; read a b n < /tmp/map; "
                             "test \"$a\" = 0 || exit 11; "
                             "test \"$(ls /proc | grep -c '^[0-9]')\" -le 8 || exit 12; "
                             "mount -t tmpfs none /tmp 2>/dev/null && exit 13; "
                             "test \"$(cat /proc/1/environ 2>/dev/null | wc -c)\" = 0 || exit 14; "
                             "read line </dev/stdin && exit 15; "
                             "echo \"$b $n\" > /out/result");
  fs::create_directories(b.root / "out");
  fs::permissions(b.outside, fs::perms::all); // the confined ids are no owner of it
  c.binds.push_back(BindSpec{b.outside, "/out"});
  c.confined = true;
  c.pid_namespace = true;
  c.dev.mode = DevPolicy::Mode::minimal;
  c.network = NetworkPolicy::none;
  c.uid = 0;
  c.gid = 0;
  Result<int> r = run_in_sandbox(c);
  REQUIRE(r.ok());
  CHECK(*r == 0);
  // As root the namespace maps the confined range, never host root; unprivileged, the caller's uid.
  const std::string expected =
      ::geteuid() == 0 ? fmt::format("{} {}\n", k_confined_host_first, k_confined_id_count) : "0 1\n";
  CHECK(test::slurp(b.outside / "result") == expected);

  SandboxConfig wrong = c;
  wrong.pid_namespace = false;
  r = run_in_sandbox(wrong);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("pid namespace"));
}

TEST_CASE("a command that can't be found or executed is an error with 127 or 126", "[sandbox][run]") {
  if (!have_busybox()) {
    WARN("busybox-static is not installed; skipped");
    return;
  }
  BusyboxRoot b;
  b.tmp.write("root/bin/notexec", "#!/bin/sh\n");
  SandboxConfig c = b.config("");
  c.argv = {"no-such-command"};
  Result<int> r = run_in_sandbox(c);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_status == k_exit_not_found);
  CHECK_THAT(r.error().message,
             Catch::Contains("no-such-command") && Catch::Contains("not found in PATH (/bin)"));
  c.argv = {"/bin/notexec"};
  r = run_in_sandbox(c);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit_status == k_exit_not_executable);
  CHECK_THAT(r.error().message, Catch::Contains("Permission denied"));
}

TEST_CASE("the root is read-only, /tmp a tmpfs, the environment exactly the one given", "[sandbox][run]") {
  if (!have_busybox()) {
    WARN("busybox-static is not installed; skipped");
    return;
  }
  BusyboxRoot b;
  SandboxConfig c = b.config("touch /x 2>/dev/null && exit 10; touch /tmp/y || exit 11; "
                             "test \"$(env | grep -v ^PWD= | grep -v ^SHLVL= | sort | tr '\\n' ' ')\" = "
                             "'A=1 PATH=/bin ' || exit 12; test \"$PWD\" = / || exit 13");
  c.env.push_back("A=1");
  Result<int> r = run_in_sandbox(c);
  REQUIRE(r.ok());
  CHECK(*r == 0);
  CHECK_FALSE(fs::exists(b.root / "x"));
  CHECK_FALSE(fs::exists(b.root / "tmp")); // made in the overlay, not in the image
}

TEST_CASE("a bind through a symlink in the image lands inside the root", "[sandbox][run]") {
  if (!have_busybox()) {
    WARN("busybox-static is not installed; skipped");
    return;
  }
  BusyboxRoot b;
  fs::path data = b.tmp.dir() / "data";
  fs::create_directories(data);
  b.tmp.write("data/marker", "from the host");
  fs::create_symlink(b.outside, b.root / "mnt"); // /mnt -> a host directory's path
  SandboxConfig c = b.config("cat /mnt/foo/marker && cat " + (b.outside / "foo/marker").string());
  c.binds.push_back(BindSpec{data, "/mnt/foo", BindSpec::Access::read_only, BindSpec::Need::required,
                             BindSpec::Depth::single});
  Result<int> r = run_in_sandbox(c);
  REQUIRE(r.ok());
  CHECK(*r == 0);
  CHECK(fs::is_empty(b.outside)); // nothing created or mounted on the host's side of the link
  CHECK_FALSE(fs::exists(b.root / b.outside.relative_path()));
}

TEST_CASE("a missing working directory is an error, or / when asked", "[sandbox][run]") {
  if (!have_busybox()) {
    WARN("busybox-static is not installed; skipped");
    return;
  }
  BusyboxRoot b;
  SandboxConfig c = b.config("test \"$(pwd)\" = /");
  c.cwd = "/no/such/dir";
  Result<int> r = run_in_sandbox(c);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK_THAT(r.error().message, Catch::Contains("/no/such/dir does not exist"));
  for (const char* escape : {"/proc/self/root", "/proc/self/fd/0", "/proc/self/cwd/bin"}) {
    INFO(escape);
    c.cwd = escape; // CVE-2024-21626: a working directory through a magic link
    r = run_in_sandbox(c);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK_THAT(r.error().message, Catch::Contains("magic link"));
  }
  c.cwd = "/no/such/dir";
  c.cwd_missing = CwdMissing::use_root;
  r = run_in_sandbox(c);
  REQUIRE(r.ok());
  CHECK(*r == 0);
  c = b.config("test \"$(pwd)\" = /srv/app");
  c.cwd = "/srv/app";
  c.cwd_missing = CwdMissing::create;
  r = run_in_sandbox(c);
  REQUIRE(r.ok());
  CHECK(*r == 0);
  CHECK_FALSE(fs::exists(b.root / "srv"));
}

TEST_CASE("an invalid sandbox config is refused before anything starts", "[sandbox]") {
  SandboxConfig c;
  c.root = "/nonexistent-root";
  c.argv = {"/bin/true"};
  Result<int> r = run_in_sandbox(c);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  test::TempDirFixture tmp;
  c.root = tmp.dir();
  c.argv.clear();
  CHECK_FALSE(run_in_sandbox(c).ok());
  c.argv = {"/bin/true"};
  c.binds.push_back(BindSpec{"/tmp", "relative"});
  CHECK_FALSE(run_in_sandbox(c).ok());
  c.binds.back().target = "/a/../../b";
  CHECK_FALSE(run_in_sandbox(c).ok());
  c.binds.back().target = "/";
  CHECK_FALSE(run_in_sandbox(c).ok());
}

TEST_CASE("with caller-provided overlay directories, the upper directory holds only the command's changes",
          "[sandbox][run]") {
  if (!have_busybox()) {
    WARN("busybox-static is not installed; skipped");
    return;
  }
  BusyboxRoot b;
  b.tmp.write("root/etc/marker", "image\n");
  fs::path upper = b.tmp.dir() / "upper";
  fs::path work = b.tmp.dir() / "work";
  fs::create_directories(upper);
  fs::create_directories(work);
  SandboxConfig c =
      b.config("echo new > /new && rm /etc/marker && echo x > /dev/null && ls /proc/self >/dev/null");
  c.overlay = OverlayDirs{upper, work};
  c.read_only = false;
  c.network = NetworkPolicy::none;
  c.dev.mode = DevPolicy::Mode::minimal;
  c.uid = 0;
  c.gid = 0;
  Result<int> r = run_in_sandbox(c);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  CHECK(*r == 0);
  CHECK(test::slurp(upper / "new") == "new\n");
  struct stat st {};
  REQUIRE(::lstat((upper / "etc/marker").c_str(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode)); // overlayfs's whiteout
  CHECK(test::slurp(b.root / "etc/marker") == "image\n");
  for (const char* mount_point : {"dev", "proc", "sys", "tmp", "etc/hosts", "etc/resolv.conf"}) {
    INFO(mount_point);
    CHECK_FALSE(fs::exists(fs::symlink_status(upper / mount_point)));
    CHECK_FALSE(fs::exists(fs::symlink_status(b.root / mount_point)));
  }
}
