#include "support/system/process.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

using namespace lockstep;

namespace {

int wait_status(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

} // namespace

TEST_CASE("start_sharing_child: the child executes a program; its status is the parent's to collect") {
  static char sh[] = "/bin/sh";
  static char c[] = "-c";
  static char script[] = "exit 7";
  const pid_t pid = start_sharing_child(
      [](void*) -> int {
        char* argv[] = {sh, c, script, nullptr};
        ::execv(sh, argv);
        _exit(127);
      },
      nullptr);
  REQUIRE(pid > 0);
  const int status = wait_status(pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
}

TEST_CASE("start_sharing_child: a child that can't execute exits, and the parent goes on") {
  const pid_t pid = start_sharing_child(
      [](void* arg) -> int {
        char* argv[] = {static_cast<char*>(arg), nullptr};
        ::execv(argv[0], argv);
        _exit(errno == ENOENT ? 3 : 4);
      },
      const_cast<char*>("/nonexistent/program"));
  REQUIRE(pid > 0);
  const int status = wait_status(pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
}
