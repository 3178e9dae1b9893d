#include "runner/runtime/exec.hpp"
#include "runner/runtime/join.hpp"
#include "runner/runtime/sandbox.hpp"
#include "support/system/process.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;

namespace {

join::KeyInputs sample_inputs() {
  join::KeyInputs in;
  in.argv = {"/usr/bin/lockstep", "exec",  "--mpi-rank", "--rank-report",
             "/runs/job/ranks",   "x.sif", "--",         "true"};
  in.env.assign(join::k_key_environment.size(), std::nullopt);
  in.env[0] = "/home/u";
  in.cwd = "/home/u/work";
  in.host = "n1";
  in.uid = 1000;
  in.gid = 1000;
  return in;
}

} // namespace

TEST_CASE("a request, a grant and a refusal survive encoding; malformed bytes are refused", "[join]") {
  join::Request q{"key\0with a NUL", {"A=1", "EMPTY=", std::string("B=x\0y", 5)}};
  Result<join::Request> q2 = join::decode_request(join::encode(q));
  REQUIRE(q2.ok());
  CHECK(*q2 == q);

  join::Grant g;
  g.argv = {"python3", "/opt/hello/hello.py"};
  g.env = {"PATH=/usr/bin", "PWD=/opt/hello"};
  g.cwd = "/opt/hello";
  g.set_ids = true;
  g.uid = 1000;
  g.gid = 100;
  Result<join::Reply> r = join::decode_reply(join::encode_grant(g));
  REQUIRE(r.ok());
  CHECK(r->granted);
  CHECK(r->grant.argv == g.argv);
  CHECK(r->grant.env == g.env);
  CHECK(r->grant.cwd == g.cwd);
  CHECK(r->grant.set_ids);
  CHECK(r->grant.uid == 1000);
  CHECK(r->grant.gid == 100);

  r = join::decode_reply(join::encode_refusal("the image is missing"));
  REQUIRE(r.ok());
  CHECK_FALSE(r->granted);
  CHECK(r->reason == "the image is missing");

  const std::string bytes = join::encode_grant(g);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) { // every truncation is refused
    CHECK_FALSE(join::decode_reply(bytes.substr(0, cut)).ok());
  }
  CHECK_FALSE(join::decode_reply(bytes + "x").ok());
  CHECK_FALSE(join::decode_request(bytes).ok()); // a grant is no request
  // A request claiming 2^31 variables in a few bytes.
  const std::string huge_count = std::string("Q\x03\0\0\0key", 8) + std::string("\xff\xff\xff\x7f", 4);
  CHECK(join::decode_request(std::string("Q\x03\0\0\0key\0\0\0\0", 12)).ok());
  CHECK_FALSE(join::decode_request(huge_count).ok());
  join::Grant none;
  CHECK_FALSE(join::decode_reply(join::encode_grant(none)).ok()); // no command
}

TEST_CASE(
    "the key changes with the command line, the container's environment, the directory, the ids and the "
    "host",
    "[join]") {
  const join::KeyInputs base = sample_inputs();
  const std::string key = join::key_of(base);
  CHECK(join::key_of(base) == key);
  std::vector<join::KeyInputs> variants(8, base);
  variants[0].argv.back() = "false";
  variants[1].argv[4] = "/runs/other-job/ranks";
  variants[2].env[0] = "/home/v";
  variants[3].env[1] = ""; // PATH set but empty differs from unset
  variants[4].cwd = "/home/u";
  variants[5].host = "n2";
  variants[6].uid = 1001;
  variants[7].gid = 1001;
  std::set<std::string> names = {join::socket_name(key)};
  for (const join::KeyInputs& v : variants) {
    CHECK(join::key_of(v) != key);
    names.insert(join::socket_name(join::key_of(v)));
  }
  CHECK(names.size() == variants.size() + 1);
  // {"ab", "c"} and {"a", "bc"} are different command lines.
  join::KeyInputs split1 = base;
  join::KeyInputs split2 = base;
  split1.argv = {"ab", "c"};
  split2.argv = {"a", "bc"};
  CHECK(join::key_of(split1) != join::key_of(split2));

  const std::string name = join::socket_name(key);
  CHECK(name.front() == '\0'); // abstract: nothing in a file system
  CHECK(name.substr(1, 14) == "lockstep-join-");
  CHECK(name.size() == 1 + 14 + 32);
}

TEST_CASE("every variable exec reads on its way to the container is part of the key", "[join]") {
  const std::set<std::string> key(join::k_key_environment.begin(), join::k_key_environment.end());
  for (std::string_view name : join::k_launcher_dir_variables) {
    CHECK(key.count(std::string(name)) == 1);
  }
  const fs::path src = test::source_dir();
  std::vector<fs::path> files = {src / "envspec/settings/store_root.cpp", src / "cli/cmd_exec.cpp"};
  for (const auto& e : fs::directory_iterator(src / "runner/runtime")) {
    if (e.path().extension() == ".cpp") {
      files.push_back(e.path());
    }
  }
  const std::regex literal(R"(getenv\("([A-Za-z_][A-Za-z0-9_]*)\"\))");
  int found = 0;
  for (const fs::path& f : files) {
    const std::string text = test::slurp(f);
    for (std::sregex_iterator it(text.begin(), text.end(), literal), end; it != end; ++it) {
      INFO(f.string() << " reads " << (*it)[1].str());
      CHECK(key.count((*it)[1].str()) == 1);
      ++found;
    }
  }
  CHECK(found >= 8);
}

TEST_CASE("a launcher's session directory counts only where a rank binds it: outside /tmp, an existing "
          "directory",
          "[join]") {
  const fs::path in_tmp = fs::path("/tmp") / ("lockstep-join-test-" + std::to_string(::getpid()));
  fs::create_directories(in_tmp);
  CHECK_FALSE(join::launcher_dir_to_bind(nullptr));
  CHECK_FALSE(join::launcher_dir_to_bind("relative/dir"));
  CHECK_FALSE(join::launcher_dir_to_bind("/"));
  CHECK_FALSE(join::launcher_dir_to_bind("/tmp"));
  CHECK_FALSE(join::launcher_dir_to_bind(in_tmp.c_str())); // below /tmp: bound with it
  CHECK_FALSE(join::launcher_dir_to_bind("/no/such/dir"));
  CHECK(join::launcher_dir_to_bind("/usr/./lib/") == "/usr/lib");
  // A rank whose PMIx session directory lies in /tmp has the key of a process without one (the
  // holder preflight starts under mpirun); one outside /tmp does not.
  const std::vector<std::string> argv = {"/usr/bin/lockstep", "exec", "x.sif", "--", "true"};
  ::unsetenv("PMIX_SERVER_TMPDIR");
  const std::string without = join::key_of(join::key_inputs(argv));
  ::setenv("PMIX_SERVER_TMPDIR", in_tmp.c_str(), 1);
  CHECK(join::key_of(join::key_inputs(argv)) == without);
  ::setenv("PMIX_SERVER_TMPDIR", "/usr/lib", 1);
  CHECK(join::key_of(join::key_inputs(argv)) != without);
  ::unsetenv("PMIX_SERVER_TMPDIR");
  fs::remove(in_tmp);
}

TEST_CASE("the ranks on this node come from Open MPI, MPICH or Slurm's tasks per node", "[join]") {
  CHECK(join::local_rank_count({"A=1", "OMPI_COMM_WORLD_LOCAL_SIZE=8"}) == 8);
  CHECK(join::local_rank_count({"MPI_LOCALNRANKS=4"}) == 4);
  CHECK(join::local_rank_count({"SLURM_STEP_TASKS_PER_NODE=2(x3),1", "SLURM_NODEID=2"}) == 2);
  CHECK(join::local_rank_count({"SLURM_STEP_TASKS_PER_NODE=2(x3),1", "SLURM_NODEID=3"}) == 1);
  CHECK(join::local_rank_count({"SLURM_STEP_TASKS_PER_NODE=3,5", "SLURM_NODEID=1"}) == 5);
  CHECK_FALSE(join::local_rank_count({"SLURM_STEP_TASKS_PER_NODE=2(x3)", "SLURM_NODEID=3"}));
  CHECK_FALSE(join::local_rank_count({"SLURM_STEP_TASKS_PER_NODE=2(x", "SLURM_NODEID=0"}));
  CHECK_FALSE(join::local_rank_count({"OMPI_COMM_WORLD_LOCAL_SIZE=0"}));
  CHECK_FALSE(join::local_rank_count({"OMPI_COMM_WORLD_LOCAL_SIZE=x"}));
  CHECK_FALSE(join::local_rank_count({}));
}

TEST_CASE("messages and descriptors pass over a socket; a peer that leaves is an error", "[join]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  UniqueFd a(sv[0]);
  UniqueFd b(sv[1]);
  UniqueFd passed(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const std::string big(200000, 'x'); // larger than one socket buffer: sent while being read
  pid_t pid = ::fork();
  if (pid == 0) {
    bool ok = join::send_message(a.get(), big, {passed.get()}).ok();
    _exit(ok ? 0 : 1);
  }
  std::vector<int> fds;
  Result<std::string> got = join::receive_message(b.get(), join::k_max_message, fds);
  REQUIRE(got.ok());
  CHECK(*got == big);
  REQUIRE(fds.size() == 1);
  struct stat st1 {};
  struct stat st2 {};
  CHECK(::fstat(fds[0], &st1) == 0);
  CHECK(::stat("/", &st2) == 0);
  CHECK(st1.st_ino == st2.st_ino);
  CHECK((::fcntl(fds[0], F_GETFD) & FD_CLOEXEC) != 0);
  ::close(fds[0]);
  CHECK(wait_exit_code(pid) == 0);
  CHECK(join::peer_uid(b.get()).value() == ::geteuid());

  REQUIRE(join::send_message(a.get(), "abc").ok());
  fds.clear();
  CHECK_FALSE(join::receive_message(b.get(), 2, fds).ok()); // over the limit
  a.reset();
  fds.clear();
  Result<std::string> gone = join::receive_message(b.get(), join::k_max_message, fds);
  REQUIRE_FALSE(gone.ok());
  CHECK_THAT(gone.error().message, Catch::Contains("went away"));
}

TEST_CASE("processes join a held container: its mount namespace and root, the working directory, their own "
          "environment",
          "[join][run]") {
  if (::access("/bin/busybox", X_OK) != 0) {
    WARN("busybox-static is not installed; skipped");
    return;
  }
  test::TempDirFixture tmp;
  const fs::path root = tmp.dir() / "root";
  fs::create_directories(root / "bin");
  fs::create_directories(root / "work");
  fs::create_directories(tmp.dir() / "out");
  fs::copy_file("/bin/busybox", root / "bin/busybox");
  for (const char* applet : {"sh", "readlink", "cat", "test", "echo", "pwd", "touch"}) {
    fs::create_symlink("busybox", root / "bin" / applet);
  }
  tmp.write("root/marker", "inside\n");
  SandboxConfig c;
  c.root = root;
  c.env = {"PATH=/bin"};
  c.argv = {"/bin/true"};
  c.cwd = "/work";
  c.binds.push_back(BindSpec{tmp.dir() / "out", "/out"});
  Result<HeldContainer> held = hold_sandbox(c);
  REQUIRE(held.ok());
  CHECK(held->cwd == "/work");
  CHECK(held->mount_ns.valid());
  CHECK(held->user_ns.valid() == (::geteuid() != 0));

  auto join_and_run = [&](const std::string& name, const std::string& script) {
    join::Joined j;
    j.mount_ns = UniqueFd(::dup(held->mount_ns.get()));
    if (held->user_ns.valid()) {
      j.user_ns = UniqueFd(::dup(held->user_ns.get()));
    }
    j.grant.argv = {"sh", "-c", script};
    j.grant.env = {"PATH=/bin", "RANK=" + name};
    j.grant.cwd = held->cwd;
    bool could_not_join = true;
    Result<int> r = join::run_joined(j, could_not_join);
    CHECK_FALSE(could_not_join);
    return r;
  };
  const std::string script =
      "test \"$(cat /marker)\" = inside || exit 10; test \"$(pwd)\" = /work || exit 11; "
      "touch /marker 2>/dev/null && exit 12; "
      "readlink /proc/self/ns/mnt > /out/ns-$RANK; exit 7";
  Result<int> r1 = join_and_run("a", script);
  Result<int> r2 = join_and_run("b", script);
  REQUIRE(r1.ok());
  REQUIRE(r2.ok());
  CHECK(*r1 == 7);
  CHECK(*r2 == 7);
  const std::string ns = test::slurp(tmp.dir() / "out/ns-a");
  CHECK(ns == test::slurp(tmp.dir() / "out/ns-b")); // one container
  CHECK(ns != fs::read_symlink("/proc/self/ns/mnt").string() + "\n");

  Result<int> missing = [&] {
    join::Joined j;
    j.mount_ns = UniqueFd(::dup(held->mount_ns.get()));
    if (held->user_ns.valid()) {
      j.user_ns = UniqueFd(::dup(held->user_ns.get()));
    }
    j.grant.argv = {"no-such-command"};
    j.grant.env = {"PATH=/bin"};
    j.grant.cwd = "/";
    bool could_not_join = true;
    Result<int> r = join::run_joined(j, could_not_join);
    CHECK_FALSE(could_not_join);
    return r;
  }();
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().exit_status == k_exit_not_found);
  CHECK_THAT(missing.error().message, Catch::Contains("not found in PATH (/bin)"));

  join::Joined bad; // a descriptor that is no namespace: joining fails, nothing runs
  bad.mount_ns = UniqueFd(::open("/", O_RDONLY | O_CLOEXEC));
  bad.grant.argv = {"sh"};
  bool could_not_join = false;
  Result<int> refused = join::run_joined(bad, could_not_join);
  REQUIRE_FALSE(refused.ok());
  CHECK(could_not_join);
  CHECK_THAT(refused.error().message, Catch::Contains("can't join the node's container"));
}

TEST_CASE("a rank waits at its node's gate for the word; nobody keeping it is a timeout, not a start",
          "[join]") {
  const std::string dir = "/runs/gate-test-" + std::to_string(::getpid()) + "/ranks";
  std::string why;
  // Nobody keeps the gate yet: the rank keeps trying until its limit.
  CHECK(join::wait_at_gate(dir, std::chrono::milliseconds(60), why) == join::GateOutcome::timed_out);
  CHECK_THAT(why, Catch::Contains("no preflight kept this node's gate"));
  for (const join::GateWord word : {join::GateWord::go, join::GateWord::stop}) {
    Result<UniqueFd> gate = join::bind_gate(dir);
    REQUIRE(gate);
    CHECK_FALSE(join::bind_gate(dir)); // one keeper per job and node
    std::array<int, 2> until{-1, -1};
    REQUIRE(::pipe2(until.data(), O_CLOEXEC) == 0);
    UniqueFd until_read(until[0]);
    UniqueFd until_write(until[1]);
    std::thread keeper([&] { join::keep_gate(gate->get(), word, until_read.get()); });
    // Every rank that comes hears the same word, however many come.
    for (int i = 0; i < 3; ++i) {
      CHECK(join::wait_at_gate(dir, std::chrono::seconds(10), why) ==
            (word == join::GateWord::go ? join::GateOutcome::go : join::GateOutcome::stop));
    }
    until_write.reset(); // the launching node ends the preflight: the keeper leaves
    keeper.join();
  }
  // A keeper that goes without a word is a stop: the rank never runs on a guess.
  Result<UniqueFd> gate = join::bind_gate(dir);
  REQUIRE(gate);
  std::thread closer([&] {
    UniqueFd conn(::accept4(gate->get(), nullptr, nullptr, SOCK_CLOEXEC));
    // closes without a word
  });
  CHECK(join::wait_at_gate(dir, std::chrono::seconds(10), why) == join::GateOutcome::stop);
  closer.join();
}
