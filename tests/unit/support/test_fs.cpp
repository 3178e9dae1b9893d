#include "support/base/interrupt.hpp"
#include "support/system/fs.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

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

TEST_CASE("publishing a hard link over a name of the same file leaves no temporary name", "[fs]") {
  test::TempDirFixture tmp;
  tmp.write("store/blob", "content");
  const fs::path blob = tmp.dir() / "store/blob";
  const fs::path out = tmp.dir() / "out/image.sif";
  fs::create_directories(out.parent_path());
  auto names = [&] {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(out.parent_path())) {
      v.push_back(e.path().filename().string());
    }
    return v;
  };
  // First export, then the same again: the second rename(2) has nothing to do (same inode).
  for (int round = 0; round < 3; ++round) {
    auto linked = replace_with_link(blob, out);
    REQUIRE(linked);
    CHECK(*linked);
    CHECK(names() == std::vector<std::string>{"image.sif"});
    CHECK(fs::equivalent(blob, out));
    CHECK(fs::hard_link_count(blob) == 2);
  }
  // rename_into_place of a name that already is a hard link of the target removes that name.
  const fs::path extra = out.parent_path() / ".lockstep-tmp-image.sif-x";
  fs::create_hard_link(out, extra);
  REQUIRE(rename_into_place(extra, out));
  CHECK(names() == std::vector<std::string>{"image.sif"});
  CHECK(test::slurp(out) == "content");
  // A failed publish (the target is a directory) leaves no temporary name either.
  const fs::path blocked = tmp.dir() / "blocked";
  fs::create_directories(blocked / "image.sif");
  auto r = replace_with_link(blob, blocked / "image.sif");
  REQUIRE_FALSE(r);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(blocked)) {
    left.push_back(e.path().filename().string());
  }
  CHECK(left == std::vector<std::string>{"image.sif"});
}

namespace {

// Runs `blocking` in a child process with the interrupt handlers installed, sends it SIGTERM once
// it is blocked, and returns the child's exit status: the Error code `blocking` returned (0 when it
// succeeded), or -1 when the signal killed it or it still hung after 10 s (then it is killed).
int exit_code_after_sigterm(const std::function<Result<void>()>& blocking) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    install_interrupt_handlers();
    (void)!::write(ready[1], "r", 1);
    Result<void> r = blocking();
    ::_exit(r ? 0 : static_cast<int>(r.error().code));
  }
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300)); // into the blocking call
  ::kill(pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 1000; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

} // namespace

TEST_CASE("input files that are not regular files are refused without blocking", "[fs][input]") {
  test::TempDirFixture tmp;
  const fs::path fifo = tmp.dir() / "lockstep.lock";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No writer ever opens the FIFO: a blocking open(2) would wait here for ever.
  const auto start = std::chrono::steady_clock::now();
  auto r = read_file(fifo);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message == "can't read " + fifo.string() + ": it is a FIFO, not a regular file");
  auto dir = read_file(tmp.dir());
  REQUIRE_FALSE(dir);
  CHECK(dir.error().code == ExitCode::invalid_input);
  CHECK(dir.error().message ==
        "can't read " + tmp.dir().string() + ": it is a directory, not a regular file");
  auto dev = open_input_file("/dev/null");
  REQUIRE_FALSE(dev);
  CHECK(dev.error().message == "can't read /dev/null: it is a character device, not a regular file");
  // A regular file comes back in blocking mode.
  const fs::path file = tmp.write("spec.yaml", "lockstep: 1\n");
  auto fd = open_input_file(file);
  REQUIRE_OK(fd);
  CHECK((::fcntl(fd->get(), F_GETFL) & O_NONBLOCK) == 0);
  CHECK(*read_file(file) == "lockstep: 1\n");
}

TEST_CASE("SIGTERM ends a blocking open or read with an interrupted error", "[fs][input]") {
  test::TempDirFixture tmp;
  const fs::path fifo = tmp.dir() / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // open(2) of a FIFO without O_NONBLOCK waits for a writer.
  CHECK(exit_code_after_sigterm([&]() -> Result<void> {
          LS_TRY(open_file(fifo, O_RDONLY));
          return {};
        }) == static_cast<int>(ExitCode::interrupted));
  // read(2) of a pipe whose writer stays silent.
  CHECK(exit_code_after_sigterm([]() -> Result<void> {
          int p[2];
          if (::pipe(p) != 0) {
            return io_error("pipe");
          }
          char c = 0;
          LS_TRY(read_some(p[0], &c, 1, "a silent pipe"));
          return {};
        }) == static_cast<int>(ExitCode::interrupted));
}
