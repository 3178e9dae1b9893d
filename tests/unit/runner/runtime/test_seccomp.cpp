#include "runner/runtime/seccomp.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

using namespace lockstep;
using namespace lockstep::runner;

namespace {

// Loads the filter in a forked child, runs `probe` there and returns its exit status.
template <typename Probe> int in_filtered_child(const std::vector<sock_filter>& program, Probe probe) {
  pid_t pid = ::fork();
  if (pid == 0) {
    struct sock_fprog prog {};
    prog.len = static_cast<unsigned short>(program.size());
    prog.filter = const_cast<sock_filter*>(program.data());
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      _exit(100);
    }
    _exit(probe());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

} // namespace

TEST_CASE(
    "the confinement filter refuses mounts, namespaces and kernel calls, and lets ordinary calls through",
    "[seccomp]") {
  Result<std::vector<sock_filter>> program = confinement_filter();
  REQUIRE(program.ok());
  CHECK_FALSE(program->empty());
  // Each probe returns 0 when the call failed as the filter says.
  CHECK(in_filtered_child(*program, [] {
          return ::mount("none", "/tmp", "tmpfs", 0, nullptr) < 0 && errno == EPERM ? 0 : 1;
        }) == 0);
  CHECK(in_filtered_child(*program, [] { return ::unshare(CLONE_NEWUSER) < 0 && errno == EPERM ? 0 : 1; }) ==
        0);
  CHECK(in_filtered_child(*program, [] {
          return ::syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0) < 0 && errno == EPERM ? 0 : 1;
        }) == 0);
  CHECK(in_filtered_child(
            *program, [] { return ::syscall(SYS_clone3, nullptr, 0) < 0 && errno == ENOSYS ? 0 : 1; }) == 0);
  CHECK(in_filtered_child(*program,
                          [] { return ::syscall(SYS_keyctl, 0, -3, 0) < 0 && errno == EPERM ? 0 : 1; }) == 0);
  CHECK(in_filtered_child(
            *program, [] { return ::syscall(SYS_bpf, 0, nullptr, 0) < 0 && errno == EPERM ? 0 : 1; }) == 0);
  // Ordinary work goes on: fork, files, pids.
  CHECK(in_filtered_child(*program, [] {
          pid_t child = ::fork();
          if (child == 0) {
            _exit(7);
          }
          int status = 0;
          ::waitpid(child, &status, 0);
          return WIFEXITED(status) && WEXITSTATUS(status) == 7 && ::getpid() > 0 ? 0 : 1;
        }) == 0);
}

TEST_CASE("the denied list names the calls the security review asked for", "[seccomp]") {
  const auto& denied = confinement_denied_syscalls();
  for (const char* name : {"mount", "fsopen", "kexec_load", "init_module", "keyctl", "bpf", "perf_event_open",
                           "open_by_handle_at", "unshare", "setns"}) {
    INFO(name);
    CHECK(std::any_of(denied.begin(), denied.end(), [&](const DeniedSyscall& d) { return d.name == name; }));
  }
}
