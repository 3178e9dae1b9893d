// The rsh relay (runner/launch/relay.cpp): the agent words mpirun gets, the remote command that
// starts a node's preflight beside mpirun's daemon, a whole relayed call between a relay process
// and the run's socket, and a relayed gated preflight (runner/launch/job.cpp).
#include "runner/launch/job.hpp"
#include "runner/launch/relay.hpp"
#include "runner/runtime/join.hpp"
#include "support/system/process.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>

using namespace lockstep;
using namespace lockstep::runner;
using test::TempDirFixture;
namespace fs = std::filesystem;

TEST_CASE("the relay's agent words carry the user's agent, and -x for ssh as mpirun adds it", "[relay]") {
  CHECK(relay_agent("/ls/lockstep", "/runs/j1", {"/site/rsh"}) ==
        std::vector<std::string>{"/ls/lockstep", "rsh-relay", "/runs/j1", "1", "/site/rsh"});
  CHECK(relay_agent("/ls/lockstep", "/runs/j1", {"ssh", "-p", "2222"}) ==
        std::vector<std::string>{"/ls/lockstep", "rsh-relay", "/runs/j1", "4", "ssh", "-p", "2222", "-x"});
  CHECK(relay_agent("/ls/lockstep", "/runs/j1", {"/usr/bin/ssh", "-X"})->at(3) == "2");
  // mpirun splits its agent at spaces: a run directory with one can't be relayed.
  CHECK_FALSE(relay_agent("/ls/lockstep", "/runs/my job", {"ssh"}).has_value());
  CHECK_FALSE(relay_agent("/ls/lockstep", "/runs/j1", {""}).has_value());
}

TEST_CASE("a relayed call's stdout is the preflight's alone; the daemon's output goes to stderr", "[relay]") {
  const std::string cmd =
      relayed_command("read w; echo \"word=$w\"; echo to-stderr >&2", {"echo", "daemon", "'up'"});
  Result<CaptureResult> r = run_capture_with_input({"/bin/sh", "-c", cmd}, "go\n");
  REQUIRE(r.ok());
  CHECK(r->status == 0);
  // The preflight's stderr joins its stdout (lockstep run reads both there); the daemon's words are
  // joined with spaces and read by the shell, as ssh does.
  CHECK(r->out == "word=go\nto-stderr\n");
  CHECK(r->err == "daemon up\n");
}

TEST_CASE("the agent's exit status is read from the end of the relayed stderr and stripped", "[relay]") {
  std::string err = "node-rsh: unknown host 'n9'\n\x1elockstep-rsh-relay: exit 255\n";
  CHECK(relayed_exit_status(err) == 255);
  CHECK(err == "node-rsh: unknown host 'n9'\n");
  std::string none = "still running\n";
  CHECK(relayed_exit_status(none) == -1);
  CHECK(none == "still running\n");
}

TEST_CASE("this node's names are recognised as mpirun recognises them", "[relay]") {
  std::array<char, 256> name{};
  REQUIRE(::gethostname(name.data(), name.size() - 1) == 0);
  CHECK(name_this_node({"localhost", "127.0.0.1", name.data(), "no-such-node.invalid"}) ==
        std::vector<bool>{true, true, true, false});
}

namespace {

// Runs rsh_relay_main(args) in a child process; its exit status is the relay's.
pid_t start_relay(const std::vector<std::string>& args) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::_exit(rsh_relay_main(args));
  }
  return pid;
}

int exit_status(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace

TEST_CASE("a relayed call: the run gets the preflight's dialogue, the daemon runs beside it", "[relay]") {
  TempDirFixture tmp;
  // The agent: ssh-like, drops its options and the host, runs the words with sh -c.
  const std::string agent = tmp.write(
      "agent", "#!/bin/sh\nwhile [ \"${1#-}\" != \"$1\" ]; do shift; done\nshift\nexec /bin/sh -c \"$*\"\n");
  REQUIRE(::chmod(agent.c_str(), 0755) == 0);
  const std::string run_dir = (tmp.dir() / "runs" / "job").string();
  Result<UniqueFd> listener = join::bind_relay(run_dir);
  REQUIRE(listener.ok());
  const pid_t relay = start_relay({run_dir, "1", agent, "-q", "nodeA", "echo", "daemon", "ran"});
  UniqueFd conn(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  REQUIRE(conn.valid());
  Result<std::vector<std::string>> words = relay_call_words(conn.get());
  REQUIRE(words.ok());
  REQUIRE(words->size() == 5);
  CHECK((*words)[0] == "-q");
  CHECK((*words)[1] == "nodeA");
  Result<Dialogue> d =
      relay_preflight(std::move(conn), 1, "echo '{\"report\":1}'; read w; echo \"told $w\" >&2");
  REQUIRE(d.ok());
  const auto deadline = Dialogue::Clock::now() + std::chrono::seconds(20);
  std::optional<std::string> line =
      d->read_line([](std::string_view l) { return l.starts_with("{"); }, deadline);
  REQUIRE(line.has_value());
  CHECK(*line == "{\"report\":1}");
  d->say("go\n");
  CaptureResult end = d->finish(deadline);
  CHECK(end.out.find("told go\n") != std::string::npos); // the preflight's stderr, in its stdout
  CHECK(relayed_exit_status(end.err) == 0);
  CHECK(end.err == "daemon ran\n"); // the daemon's output, passed on as the agent's stderr
  CHECK(exit_status(relay) == 0);
}

TEST_CASE("a relay nobody listens for, or told to pass, is the agent itself", "[relay]") {
  TempDirFixture tmp;
  const std::string agent = tmp.write("agent", "#!/bin/sh\nshift\nexec /bin/sh -c \"$*\"\n");
  REQUIRE(::chmod(agent.c_str(), 0755) == 0);
  const std::string run_dir = (tmp.dir() / "job").string();
  // No run: the agent's own status.
  CHECK(exit_status(start_relay({run_dir, "1", agent, "nodeA", "exit", "7"})) == 7);
  // A pass: the same.
  Result<UniqueFd> listener = join::bind_relay(run_dir);
  REQUIRE(listener.ok());
  const pid_t relay = start_relay({run_dir, "1", agent, "nodeA", "exit", "5"});
  UniqueFd conn(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  REQUIRE(conn.valid());
  REQUIRE(relay_call_words(conn.get()).ok());
  relay_pass(conn.get());
  CHECK(exit_status(relay) == 5);
  // Usage errors end with ssh's 255.
  CHECK(exit_status(start_relay({run_dir, "x", agent, "nodeA", "true"})) == 255);
}

TEST_CASE("run: relayed, each node's preflight rides on mpirun's agent call; a host not called gets its own",
          "[job][relay]") {
  test::TempDirFixture tmp;
  const std::string dir = tmp.dir().string();
  // The agent runs the remote command as ssh would (NODE set to the host); "down" can't be reached.
  const fs::path agent =
      tmp.write("agent", "#!/bin/sh\nhost=$1; shift\n"
                         "[ \"$host\" = down ] && { echo \"ssh: connect to host down port 22: "
                         "Connection refused\" >&2; exit 255; }\n"
                         "NODE=$host exec /bin/sh -c \"$*\"\n");
  NodeReport ok;
  ok.node = "NODE";
  ok.checks.push_back({"image", Check::Status::ok, "present"});
  // The node's `lockstep preflight`: a report, then the word it is told, then the end of its input.
  const fs::path lockstep =
      tmp.write("lockstep", "#!/bin/sh\necho '" + to_json(ok).dump() +
                                "' | sed \"s/NODE/$NODE/\"; read word; echo \"$word\" >" + dir +
                                "/heard-$NODE; cat >/dev/null; touch " + dir + "/ended-$NODE\n");
  for (const fs::path& f : {agent, lockstep}) {
    REQUIRE(::chmod(f.c_str(), 0755) == 0);
  }
  PreflightFanout how;
  how.lockstep = lockstep.string();
  how.launcher_args = {"--mca", "plm_rsh_agent", agent.string()};
  how.timeout = std::chrono::seconds(30);
  LaunchPlan plan;
  plan.launcher = Launcher::mpirun;
  for (const char* h : {"up1", "down", "up2", "late"}) {
    plan.hosts.push_back({h, 2});
  }
  PreflightRequest req;
  req.image = "oci:/images/app:v1";
  req.launcher = "mpirun";
  req.model = "hybrid";
  req.gate = dir + "/ranks";
  const std::string run_dir = dir + "/run";
  std::vector<std::vector<std::string>> commands;
  Result<GatedPreflight> started = GatedPreflight::start(plan, req, how, commands, run_dir);
  REQUIRE(started.ok());
  GatedPreflight pre = std::move(*started);
  // mpirun calls its agent for three hosts; "late" never is, and gets its preflight directly.
  const std::vector<pid_t> relays = {start_relay({run_dir, "1", agent.string(), "up1", "true"}),
                                     start_relay({run_dir, "1", agent.string(), "down", "true"}),
                                     start_relay({run_dir, "1", agent.string(), "up2", "true"})};
  const std::vector<NodeReport> r = pre.reports([] { return true; });
  REQUIRE(r.size() == 4);
  CHECK(r[0].node == "up1");
  CHECK(r[0].ok());
  CHECK(r[2].node == "up2");
  CHECK(r[2].ok());
  CHECK(r[3].node == "late");
  CHECK(r[3].ok());
  REQUIRE(r[1].find("reach") != nullptr);
  CHECK_THAT(r[1].find("reach")->detail,
             Catch::Contains("didn't report (exit 255)") && Catch::Contains("Connection refused"));
  CHECK_FALSE(fs::exists(tmp.dir() / "heard-up1"));
  pre.tell(true);
  CHECK(exit_status(relays[0]) == 0); // the daemon's end is the call's, not the preflight's
  CHECK(exit_status(relays[1]) == 255);
  CHECK(exit_status(relays[2]) == 0);
  pre.finish();
  for (const char* host : {"up1", "up2", "late"}) {
    CHECK(test::slurp(tmp.dir() / (std::string("heard-") + host)) == "go\n");
    CHECK(fs::exists(tmp.dir() / (std::string("ended-") + host)));
  }
}
