// The launch room's part of `lockstep run` between the plan and the record: the preflight fan-out
// (real processes: a stand-in rsh agent script answers for the hosts) and the verdict of a launch.
#include "runner/launch/job.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;

namespace {

PreflightRequest request() {
  PreflightRequest r;
  r.image = "oci:/images/app:v1";
  r.image_digest = "sha256:" + std::string(64, 'a');
  r.launcher = "mpirun";
  r.model = "hybrid";
  r.gpus_per_node = 2;
  r.facts.mpi_impl = "openmpi";
  r.facts.mpi.version = "4.1.4";
  r.facts.pmix.version = "4.2.2";
  r.facts.cuda_driver_floor = "530.30.02";
  r.unpack_bytes = 123;
  return r;
}

LaunchPlan mpirun_plan(const std::vector<std::string>& hosts) {
  LaunchPlan p;
  p.launcher = Launcher::mpirun;
  for (const std::string& h : hosts) {
    p.hosts.push_back({h, 2});
  }
  return p;
}

// A stand-in rsh agent (HOST REMOTE-COMMAND) and the fan-out through it: "up*" hosts print a line
// of noise and a passing report naming themselves, then run the shell text `up_then`; "mute" prints
// nothing; any other host fails as ssh does.
PreflightFanout stand_in_agent(const test::TempDirFixture& tmp, const std::string& up_then) {
  NodeReport ok;
  ok.node = "NODE";
  ok.checks.push_back({"image", Check::Status::ok, "present"});
  const fs::path agent =
      tmp.write("agent", "#!/bin/sh\n"
                         "case \"$1\" in\n"
                         "  up*) echo 'Warning: permanently added'; echo '" +
                             to_json(ok).dump() + "' | sed \"s/NODE/$1/\"; " + up_then +
                             " ;;\n"
                             "  mute) exit 0 ;;\n"
                             "  *) echo \"ssh: connect to host $1 port 22: Connection refused\" "
                             ">&2; exit 255 ;;\n"
                             "esac\n");
  REQUIRE(::chmod(agent.c_str(), 0755) == 0);
  PreflightFanout how;
  how.lockstep = "lockstep";
  how.launcher_args = {"--mca", "plm_rsh_agent", agent.string()};
  how.timeout = std::chrono::seconds(30);
  return how;
}

RankReport rank(int r, const std::string& node, int exit_code, const std::string& error = "") {
  RankReport x;
  x.rank = r;
  x.node = node;
  x.exit_code = exit_code;
  x.error = error;
  return x;
}

} // namespace

TEST_CASE("run: the rsh agent comes from --mca plm_rsh_agent, then the environment, then ssh in batch mode",
          "[job]") {
  CHECK(rsh_agent({}, "") == std::vector<std::string>{"ssh", "-o", "BatchMode=yes"});
  CHECK(rsh_agent({}, "rsh") == std::vector<std::string>{"rsh"});
  CHECK(rsh_agent({}, "/usr/bin/ssh : rsh") ==
        std::vector<std::string>{"/usr/bin/ssh", "-o", "BatchMode=yes"});
  CHECK(rsh_agent({"--mca", "plm_rsh_agent", "ssh -p 2222"}, "rsh") ==
        std::vector<std::string>{"ssh", "-p", "2222"});
  CHECK(rsh_agent({"-mca", "plm_rsh_agent", "/opt/agent"}, "") == std::vector<std::string>{"/opt/agent"});
  CHECK(rsh_agent({"--mca", "plm_rsh_agent", "  "}, "") ==
        std::vector<std::string>{"ssh", "-o", "BatchMode=yes"});
}

TEST_CASE("run: a node's preflight command carries the image's facts", "[job]") {
  CHECK(preflight_argv("/opt/lockstep", request()) ==
        std::vector<std::string>{"/opt/lockstep",
                                 "preflight",
                                 "--json",
                                 "--launcher",
                                 "mpirun",
                                 "--mpi-model",
                                 "hybrid",
                                 "--digest",
                                 "sha256:" + std::string(64, 'a'),
                                 "--gpus-per-node",
                                 "2",
                                 "--expect-mpi",
                                 "openmpi@4.1.4",
                                 "--expect-pmix",
                                 "4.2.2",
                                 "--cuda-floor",
                                 "530.30.02",
                                 "--unpack-bytes",
                                 "123",
                                 "oci:/images/app:v1"});
  PreflightRequest bare;
  bare.image = "sif:/x.sif";
  bare.launcher = "local";
  bare.model = "container";
  CHECK(preflight_argv("lockstep", bare) ==
        std::vector<std::string>{"lockstep", "preflight", "--json", "--launcher", "local", "--mpi-model",
                                 "container", "--unpack-bytes", "0", "sif:/x.sif"});
  // Staging's rounds create the store; under mpirun the ranks' exec line follows the image, after --.
  bare.prepare_store = true;
  bare.hold_exec = {"lockstep", "exec", "--mpi-rank", "sif:/x.sif", "--", "a", "--", "b"};
  bare.hold_cwd = "/home/u";
  CHECK(
      preflight_argv("lockstep", bare) ==
      std::vector<std::string>{"lockstep",    "preflight",  "--json",         "--launcher", "local",
                               "--mpi-model", "container",  "--unpack-bytes", "0",          "--prepare-store",
                               "--hold-cwd",  "/home/u",    "sif:/x.sif",     "--",         "lockstep",
                               "exec",        "--mpi-rank", "sif:/x.sif",     "--",         "a",
                               "--",          "b"});
}

TEST_CASE("run: node reports are read from JSON lines; other lines are ignored, bad reports named", "[job]") {
  NodeReport n;
  n.node = "n1";
  n.checks.push_back({"image", Check::Status::ok, "present"});
  const std::string line = to_json(n).dump();
  std::vector<std::string> bad;
  std::vector<NodeReport> got =
      reports_from_output("srun: warning\n" + line + "\n{\"node\": 3}\n\n" + line + "\n", bad);
  REQUIRE(got.size() == 2);
  CHECK(got[0] == n);
  REQUIRE(bad.size() == 1);
}

TEST_CASE("run: a dry run lists the preflight command of every launcher without running it", "[job]") {
  std::vector<std::vector<std::string>> commands;
  PreflightFanout how;
  how.lockstep = "/opt/lockstep";
  how.dry_run = true;
  auto r = preflight_nodes(mpirun_plan({"a", "b"}), request(), how, commands);
  REQUIRE(r);
  CHECK(r->empty());
  REQUIRE(commands.size() == 2);
  CHECK(commands[0][0] == "ssh");
  CHECK(commands[0][3] == "a");
  CHECK(commands[1][3] == "b");
  CHECK_THAT(commands[1][4], Catch::StartsWith("/opt/lockstep preflight --json"));

  commands.clear();
  LaunchPlan slurm;
  slurm.launcher = Launcher::slurm;
  slurm.nodes = 4;
  REQUIRE(preflight_nodes(slurm, request(), how, commands));
  REQUIRE(commands.size() == 1);
  CHECK(std::vector<std::string>(commands[0].begin(), commands[0].begin() + 6) ==
        std::vector<std::string>{"srun", "--ntasks-per-node=1", "--mpi=none", "--kill-on-bad-exit=0",
                                 "--nodes=4", "--ntasks=4"});

  commands.clear();
  REQUIRE(preflight_nodes(LaunchPlan{}, request(), how, commands));
  REQUIRE(commands.size() == 1);
  CHECK(commands[0][1] == "preflight");
}

TEST_CASE("run: the preflight reaches every host through the rsh agent, in parallel, in the plan's order",
          "[job]") {
  test::TempDirFixture tmp;
  const PreflightFanout how = stand_in_agent(tmp, "true");
  std::vector<std::vector<std::string>> commands;
  auto r = preflight_nodes(mpirun_plan({"up1", "down", "up2", "mute"}), request(), how, commands);
  REQUIRE(r);
  REQUIRE(r->size() == 4);
  CHECK((*r)[0].node == "up1");
  CHECK((*r)[0].ok());
  CHECK((*r)[2].node == "up2");
  CHECK((*r)[2].ok());
  CHECK((*r)[1].node == "down");
  REQUIRE((*r)[1].find("reach") != nullptr);
  CHECK((*r)[1].find("reach")->status == Check::Status::fail);
  CHECK_THAT((*r)[1].find("reach")->detail,
             Catch::Contains("didn't report (exit 255)") && Catch::Contains("Connection refused"));
  CHECK((*r)[3].node == "mute");
  CHECK_FALSE((*r)[3].ok());
}

TEST_CASE("run: a gated preflight reads every node's report, then tells every node the verdict and ends",
          "[job]") {
  test::TempDirFixture tmp;
  // The "up*" hosts write down the word they are told, then wait for the end of their input.
  const std::string dir = tmp.dir().string();
  const PreflightFanout how = stand_in_agent(
      tmp, "read word; echo \"$word\" >" + dir + "/heard-$1; cat >/dev/null; touch " + dir + "/ended-$1");
  PreflightRequest req = request();
  req.gate = "/runs/job/ranks";
  for (const bool go : {true, false}) {
    std::vector<std::vector<std::string>> commands;
    for (const char* f : {"heard-up1", "heard-up2", "ended-up1", "ended-up2"}) {
      fs::remove(tmp.dir() / f);
    }
    GatedPreflight pre =
        std::move(*GatedPreflight::start(mpirun_plan({"up1", "down", "up2"}), req, how, commands));
    REQUIRE(commands.size() == 3);
    CHECK_THAT(commands[0].back(), Catch::Contains("--gate /runs/job/ranks"));
    const std::vector<NodeReport> r = pre.reports();
    REQUIRE(r.size() == 3);
    CHECK(r[0].node == "up1");
    CHECK(r[0].ok());
    CHECK(r[2].node == "up2");
    REQUIRE(r[1].find("reach") != nullptr);
    CHECK_THAT(r[1].find("reach")->detail,
               Catch::Contains("didn't report (exit 255)") && Catch::Contains("Connection refused"));
    // Nobody has been told anything yet: the nodes wait.
    CHECK_FALSE(fs::exists(tmp.dir() / "heard-up1"));
    pre.tell(go);
    pre.finish();
    for (const char* host : {"up1", "up2"}) {
      CHECK(test::slurp(tmp.dir() / (std::string("heard-") + host)) == (go ? "go\n" : "stop\n"));
      CHECK(fs::exists(tmp.dir() / (std::string("ended-") + host)));
    }
  }
  // A preflight never told is told stop when it goes.
  {
    std::vector<std::vector<std::string>> commands;
    fs::remove(tmp.dir() / "heard-up1");
    GatedPreflight pre = std::move(*GatedPreflight::start(mpirun_plan({"up1"}), req, how, commands));
    REQUIRE(pre.reports().at(0).ok());
  }
  CHECK(test::slurp(tmp.dir() / "heard-up1") == "stop\n");
}

TEST_CASE("run: the verdict is the first failed rank's own status, else the launcher's", "[job]") {
  RunVerdict v = judge_run(0, {rank(0, "a", 0), rank(1, "b", 0)}, "mpirun", 2);
  CHECK(v.exit_status == 0);
  CHECK(v.message.empty());
  CHECK_FALSE(v.failure);

  v = judge_run(1, {rank(0, "a", 0), rank(1, "b", 3)}, "mpirun", 2);
  CHECK(v.exit_status == 3);
  CHECK(v.message == "rank 1 on b exited with status 3");
  REQUIRE(v.failure);
  CHECK(v.failure->rank == 1);

  v = judge_run(137, {rank(0, "a", 137)}, "mpirun", 4);
  CHECK(v.exit_status == 137);
  CHECK(v.message == "rank 0 on a was killed by signal 9 (1 of 4 ranks reported)");

  v = judge_run(0, {rank(2, "c", 127, "not found in PATH")}, "srun", 1);
  CHECK(v.exit_status == 127);
  CHECK(v.message == "rank 2 on c could not start: not found in PATH");

  v = judge_run(1, {}, "mpirun", 2);
  CHECK(v.exit_status == 1);
  CHECK(v.message ==
        "mpirun exited with status 1 before any rank reported a failure (0 of 2 ranks reported)");

  // A launcher that could not run at all: its error's own exit status, passed through.
  v = judge_run(Error{ExitCode::external, "can't run mpirun: not found", false, 127}, {}, "mpirun", 2);
  CHECK(v.exit_status == 127);
  CHECK(v.message == "can't run mpirun: not found");
}

TEST_CASE("run: a node whose call mpirun cut after another node failed was not checked; it did not fail",
          "[job]") {
  auto failed = [](const std::string& node, const std::string& why) {
    NodeReport r;
    r.node = node;
    r.checks.push_back({"reach", Check::Status::fail, why});
    return r;
  };
  NodeReport healthy;
  healthy.node = "n2";
  healthy.checks.push_back({"image", Check::Status::ok, ""});

  // n9 can't be reached; mpirun then cut n1's call before n1 reported; n2 reported.
  std::vector<NodeReport> out = judge_cut_nodes({{failed("n1", "didn't report (exit 143)"), true},
                                                 {healthy, false},
                                                 {failed("n9", "didn't report (exit 255)"), false}});
  REQUIRE(out.size() == 3);
  CHECK(out[0].node == "n1");
  CHECK(out[0].ok());
  REQUIRE(out[0].find("reach") != nullptr);
  CHECK(out[0].find("reach")->status == Check::Status::warn);
  CHECK(out[0].find("reach")->detail == "not checked: mpirun stopped its launch when n9 failed");
  CHECK(out[1] == healthy);
  CHECK_FALSE(out[2].ok());
  CHECK(out[2].find("reach")->detail == "didn't report (exit 255)");

  // Every failed node was cut: nothing else explains it (mpirun itself was stopped), so they fail.
  out = judge_cut_nodes({{failed("n1", "didn't report (exit 143)"), true}, {healthy, false}});
  CHECK_FALSE(out[0].ok());
  CHECK(out[0].find("reach")->detail == "didn't report (exit 143)");
}

TEST_CASE("run: the record's rank exits list every report", "[job]") {
  RankReport r = rank(0, "a", 0);
  r.start_ns = 0;
  r.end_ns = 1000000000;
  nlohmann::ordered_json j = rank_exits_json({r, rank(1, "b", 2, "boom")});
  REQUIRE(j.size() == 2);
  CHECK(j[0]["end"] == "1970-01-01T00:00:01.000Z");
  CHECK_FALSE(j[0].contains("error"));
  CHECK(j[1]["error"] == "boom");
  CHECK(j[1]["exit_code"] == 2);
}
