// Launch planning (runner/launch/launch.cpp): the default launcher, the node/rank arithmetic, and the exact
// command lines for mpirun, srun, the container model and the other runtimes.
#include "runner/launch/launch.hpp"
#include "support/system/process.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>

using namespace lockstep;
using namespace lockstep::runner;
using test::lines_of;
using test::run_command;
using test::slurp;
using test::TempDirFixture;
namespace fs = std::filesystem;

namespace {

envspec::ImageFacts openmpi_facts() {
  envspec::ImageFacts f;
  f.mpi_impl = "openmpi";
  f.mpi = {"4.1.4", "libopenmpi3 4.1.4-3+b1"};
  f.pmix = {"4.2.2", "libpmix2 4.2.2-1+deb12u1"};
  return f;
}

LaunchSite site_with(std::vector<HostSlots> hosts = {}) {
  LaunchSite s;
  s.lockstep = "/opt/ls/bin/lockstep";
  s.root = false;
  s.hostfile = std::move(hosts);
  s.run_dir = "/runs/job1";
  return s;
}

LaunchRequest request(std::vector<std::string> cmd = {"python3", "/opt/hello/hello.py"}) {
  LaunchRequest r;
  r.image = "sif:/img/mpi.sif";
  r.command = std::move(cmd);
  return r;
}

std::string plan_text(const LaunchRequest& r, const LaunchSite& s,
                      const envspec::ImageFacts& f = openmpi_facts()) {
  Result<LaunchPlan> p = plan_launch(r, s, f);
  REQUIRE(p.ok());
  return shell_join(p->argv);
}

std::string plan_error(const LaunchRequest& r, const LaunchSite& s,
                       const envspec::ImageFacts& f = openmpi_facts()) {
  Result<LaunchPlan> p = plan_launch(r, s, f);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().code == ExitCode::invalid_input);
  return p.error().message;
}

const std::vector<HostSlots> k_three = {{"n1", 2}, {"n2", 2}, {"n3", 2}};

} // namespace

TEST_CASE("hostfiles are read as Open MPI writes them", "[launch]") {
  auto hosts =
      parse_hostfile("# cluster\nn1 slots=2\nn2:4   # four\n\nn3 slots=1 max_slots=8\nn1 slots=1\n", "hosts");
  REQUIRE(hosts.ok());
  CHECK(*hosts == std::vector<HostSlots>{{"n1", 3}, {"n2", 4}, {"n3", 1}});
  CHECK(parse_hostfile("n1 cpus=2\n", "hosts").error().message ==
        "hosts:1: unknown hostfile field 'cpus=2' (write HOST slots=N)");
  CHECK(parse_hostfile("n1\n$(reboot) slots=1\n", "hosts").error().message ==
        "hosts:2: '$(reboot)' is not a host name");
  CHECK(parse_hostfile("n1 slots=0\n", "h").error().message == "h:1: n1 has 0 slots");
  CHECK(parse_hostfile("n1 slots=x\n", "h").error().message == "h:1: slots: 'x' is not a count");
  CHECK(parse_hostfile("# nothing\n", "h").error().message == "h: the hostfile lists no hosts");
}

TEST_CASE("the default launcher: slurm in an allocation, mpirun with a hostfile, local otherwise",
          "[launch]") {
  LaunchRequest r = request();
  CHECK(unwrap(plan_launch(r, site_with(), openmpi_facts())).launcher == Launcher::local);
  LaunchSite in_job = site_with();
  in_job.slurm_job_id = "42";
  CHECK(unwrap(plan_launch(r, in_job, openmpi_facts())).launcher == Launcher::slurm);
  r.hostfile = "hosts";
  CHECK(unwrap(plan_launch(r, site_with(k_three), openmpi_facts())).launcher == Launcher::mpirun);
  LaunchRequest n3 = request();
  n3.nodes = 3;
  n3.hostfile = "hosts";
  CHECK(unwrap(plan_launch(n3, site_with(k_three), openmpi_facts())).launcher == Launcher::mpirun);
}

TEST_CASE("one local process is a plain lockstep exec with a rank report", "[launch]") {
  CHECK(plan_text(request(), site_with()) == "/opt/ls/bin/lockstep exec --rank-report /runs/job1/ranks "
                                             "sif:/img/mpi.sif -- python3 /opt/hello/hello.py");
}

TEST_CASE("mpirun across a hostfile: hybrid, one lockstep exec per rank", "[launch]") {
  LaunchRequest r = request();
  r.nodes = 3;
  r.ranks = 4;
  r.hostfile = "hosts";
  LaunchSite s = site_with(k_three);
  s.root = true;
  LaunchPlan p = unwrap(plan_launch(r, s, openmpi_facts()));
  CHECK(p.model == MpiModel::hybrid);
  CHECK(p.nodes == 3);
  CHECK(p.ranks == 4);
  CHECK(p.hostfile_text() == "n1 slots=2\nn2 slots=2\nn3 slots=2\n");
  CHECK(shell_join(p.argv) ==
        "mpirun -n 4 --hostfile /runs/job1/hostfile --map-by node --allow-run-as-root /opt/ls/bin/lockstep "
        "exec "
        "--mpi-rank --rank-report /runs/job1/ranks sif:/img/mpi.sif -- python3 /opt/hello/hello.py");
}

TEST_CASE("a relayed mpirun gets lockstep's relay as its one rsh agent, and no tree spawn", "[launch]") {
  LaunchRequest r = request({"true"});
  r.hostfile = "hosts";
  r.launcher_args = {"--mca", "plm_rsh_agent", "/site/ssh-wrap", "--mca", "btl", "tcp,self"};
  r.relay_agent = {"/opt/ls/bin/lockstep", "rsh-relay", "/runs/job1", "1", "/site/ssh-wrap"};
  const std::string text = plan_text(r, site_with(k_three));
  CHECK(text ==
        "mpirun -n 6 --hostfile /runs/job1/hostfile --map-by node --mca btl tcp,self --mca plm_rsh_agent "
        "'/opt/ls/bin/lockstep rsh-relay /runs/job1 1 /site/ssh-wrap' --mca plm_rsh_no_tree_spawn 1 "
        "/opt/ls/bin/lockstep exec --mpi-rank --rank-report /runs/job1/ranks sif:/img/mpi.sif -- true");
  // A tree spawn the user asks for stays (those daemons' nodes get their preflight directly).
  r.launcher_args = {"-mca", "plm_rsh_no_tree_spawn", "0"};
  const std::string tree = plan_text(r, site_with(k_three));
  CHECK(tree.find("-mca plm_rsh_no_tree_spawn 0 --mca plm_rsh_agent") != std::string::npos);
  CHECK(tree.find("plm_rsh_no_tree_spawn 1") == std::string::npos);
  // MPICH's mpirun has no such agent: its arguments stay as given.
  envspec::ImageFacts mpich = openmpi_facts();
  mpich.mpi_impl = "mpich";
  CHECK(plan_text(r, site_with(k_three), mpich).find("rsh-relay") == std::string::npos);
}

TEST_CASE("ranks per node map with ppr with ppr and sizes the hostfile", "[launch]") {
  LaunchRequest r = request();
  r.nodes = 2;
  r.ranks_per_node = 3;
  r.hostfile = "hosts";
  r.launcher_args = {"--mca", "plm_rsh_agent", "/x/rsh"};
  LaunchPlan p = unwrap(plan_launch(r, site_with(k_three), openmpi_facts()));
  CHECK(p.ranks == 6);
  CHECK(p.hostfile_text() == "n1 slots=3\nn2 slots=3\n");
  CHECK(shell_join(p.argv) ==
        "mpirun -n 6 --hostfile /runs/job1/hostfile --map-by ppr:3:node --mca plm_rsh_agent /x/rsh "
        "/opt/ls/bin/lockstep exec --mpi-rank --rank-report /runs/job1/ranks sif:/img/mpi.sif -- python3 "
        "/opt/hello/hello.py");
}

TEST_CASE("a hostfile's slots decide the ranks when -n is not given", "[launch]") {
  LaunchRequest r = request();
  r.hostfile = "hosts";
  LaunchPlan p = unwrap(plan_launch(r, site_with(k_three), openmpi_facts()));
  CHECK(p.ranks == 6);
  CHECK(p.nodes == 3);
}

TEST_CASE("srun in an allocation: --mpi from the image's MPI, teardown on a bad exit", "[launch]") {
  LaunchRequest r = request();
  r.nodes = 2;
  r.ranks = 4;
  r.gpus_per_node = 2;
  LaunchSite s = site_with();
  s.slurm_job_id = "7";
  CHECK(plan_text(r, s) == "srun --mpi=pmix --nodes=2 --ntasks=4 --gpus-per-node=2 --kill-on-bad-exit=1 "
                           "/opt/ls/bin/lockstep exec --mpi-rank --rank-report /runs/job1/ranks --gpus "
                           "sif:/img/mpi.sif -- python3 /opt/hello/hello.py");
  envspec::ImageFacts mpich;
  mpich.mpi_impl = "mpich";
  mpich.mpi = {"4.0.2", "libmpich12 4.0.2-3"};
  CHECK(unwrap(plan_launch(request(), s, mpich)).pmi == "pmi2");
  CHECK(unwrap(plan_launch(request(), s, envspec::ImageFacts{})).pmi == "none");
  LaunchRequest forced = request();
  forced.pmi = "pmi2";
  LaunchPlan p = unwrap(plan_launch(forced, s, openmpi_facts()));
  CHECK(p.pmi == "pmi2");
  REQUIRE(p.notes.size() == 1);
  CHECK(p.notes[0] ==
        "--pmi pmi2 with Open MPI needs an Open MPI built with Slurm's PMI-2 (Debian's is not); "
        "pmix is the usual choice");
}

TEST_CASE("the container model runs the image's mpirun on this node", "[launch]") {
  LaunchRequest r = request();
  r.ranks = 4;
  LaunchSite s = site_with();
  s.root = true;
  LaunchPlan p = unwrap(plan_launch(r, s, openmpi_facts()));
  CHECK(p.model == MpiModel::container);
  CHECK(shell_join(p.argv) == "/opt/ls/bin/lockstep exec --rank-report /runs/job1/ranks sif:/img/mpi.sif -- "
                              "mpirun -n 4 --allow-run-as-root python3 /opt/hello/hello.py");
  CHECK(plan_error(r, s, envspec::ImageFacts{}) == "sif:/img/mpi.sif records no MPI, so --mpi-model "
                                                   "container has no mpirun to start; use -n 1 or an image "
                                                   "with Open MPI or MPICH");
}

TEST_CASE("inconsistent requests are refused with what to write instead", "[launch]") {
  LaunchRequest r = request();
  r.nodes = 3;
  r.model = MpiModel::container;
  r.launcher = Launcher::mpirun;
  CHECK(
      plan_error(r, site_with(k_three)) ==
      "--mpi-model container runs the image's own mpirun on this node; it can't be combined with --launcher "
      "mpirun (use --mpi-model hybrid)");
  LaunchRequest far = request();
  far.nodes = 4;
  far.hostfile = "hosts";
  CHECK(plan_error(far, site_with(k_three)) == "-N 4 but the hostfile hosts lists only 3 hosts");
  LaunchRequest no_hosts = request();
  no_hosts.nodes = 2;
  no_hosts.launcher = Launcher::mpirun;
  CHECK(plan_error(no_hosts, site_with()) ==
        "-N 2 with --launcher mpirun needs --hostfile FILE naming the nodes");
  LaunchRequest slurm = request();
  slurm.launcher = Launcher::slurm;
  CHECK(plan_error(slurm, site_with()) == "--launcher slurm runs inside an allocation (SLURM_JOB_ID is not "
                                          "set): use salloc or sbatch (lockstep run "
                                          "--emit sbatch FILE writes a batch script)");
  LaunchRequest fit = request();
  fit.nodes = 2;
  fit.ranks = 5;
  fit.ranks_per_node = 2;
  fit.hostfile = "hosts";
  CHECK(plan_error(fit, site_with(k_three)) == "-n 5 ranks don't fit on -N 2 nodes x --ranks-per-node 2");
  LaunchRequest local = request();
  local.nodes = 2;
  local.launcher = Launcher::local;
  CHECK(plan_error(local, site_with()) ==
        "-N 2 needs more than this node: give --hostfile (mpirun) or run inside "
        "a Slurm allocation (salloc/sbatch)");
  CHECK(plan_error(request({}), site_with()) ==
        "give the command each rank runs: lockstep run IMAGE -- CMD...");
}

TEST_CASE("Apptainer, Singularity and Enroot get their own command lines", "[launch]") {
  LaunchRequest r = request();
  r.nodes = 2;
  r.ranks = 4;
  r.hostfile = "hosts";
  r.gpus_per_node = 1;
  r.runtime = ContainerRuntime::apptainer;
  r.exec_args = {"--bind", "/data:/data:ro", "--env", "A=1", "--cleanenv"};
  // --env values reach the ranks through the launcher's environment, never their command lines.
  CHECK(plan_text(r, site_with(k_three)) == "mpirun -n 4 --hostfile /runs/job1/hostfile --map-by node "
                                            "-x APPTAINERENV_A apptainer exec --nv --bind /data:/data:ro "
                                            "--cleanenv /img/mpi.sif python3 /opt/hello/hello.py");
  CHECK(unwrap(plan_launch(r, site_with(k_three), openmpi_facts())).env ==
        std::vector<std::string>{"APPTAINERENV_A=1"});
  r.runtime = ContainerRuntime::singularity;
  r.image = "oci:/img/layout:latest";
  LaunchPlan p = unwrap(plan_launch(r, site_with(k_three), openmpi_facts()));
  CHECK(shell_join(p.rank) ==
        "singularity exec --nv --bind /data:/data:ro --cleanenv oci:/img/layout:latest");
  CHECK(p.env == std::vector<std::string>{"SINGULARITYENV_A=1"});
  REQUIRE(p.notes.size() == 1);
  CHECK(p.notes[0] ==
        "singularity converts oci:/img/layout:latest to a temporary SIF at every start; build the "
        "spec's SIF output and run that instead");

  LaunchRequest e = request();
  e.runtime = ContainerRuntime::enroot;
  e.image = "/img/mpi.sqsh";
  e.ranks = 4;
  e.exec_args = {"--bind", "/data:/data", "--env", "A=1"};
  LaunchSite s = site_with();
  s.slurm_job_id = "9";
  LaunchPlan pyxis = unwrap(plan_launch(e, s, openmpi_facts()));
  CHECK(shell_join(pyxis.argv) ==
        "srun --mpi=pmix --ntasks=4 --kill-on-bad-exit=1 --container-image=/img/mpi.sqsh "
        "--container-mounts=/data:/data python3 /opt/hello/hello.py");
  CHECK(pyxis.env == std::vector<std::string>{"A=1"});
}

TEST_CASE("emitting sbatch writes a batch script that runs lockstep run inside the allocation", "[launch]") {
  LaunchRequest r = request();
  r.nodes = 4;
  r.ranks_per_node = 8;
  r.gpus_per_node = 8;
  r.exec_args = {"--bind", "/scratch"};
  r.launcher_args = {"--exclusive"};
  CHECK(render_sbatch(r, site_with(), "sha256:abc") ==
        "#!/bin/sh\n"
        "#SBATCH --job-name=lockstep-mpi.sif\n"
        "#SBATCH --nodes=4\n"
        "#SBATCH --ntasks-per-node=8\n"
        "#SBATCH --gpus-per-node=8\n"
        "# Written by `lockstep run --emit sbatch`. Inside the allocation lockstep checks every node\n"
        "# (preflight), starts the ranks with srun and writes the run record.\n"
        "# image: sif:/img/mpi.sif (sha256:abc)\n"
        "exec /opt/ls/bin/lockstep run --launcher slurm -N 4 --ranks-per-node 8 --gpus-per-node 8 "
        "--launcher-arg=--exclusive --bind /scratch sif:/img/mpi.sif -- python3 /opt/hello/hello.py\n");
}

TEST_CASE("an sbatch script quotes every value and escapes the comment: nothing injected runs",
          "[launch][hardening]") {
  TempDirFixture tmp;
  const std::string marker = (tmp.dir() / "PWNED").string();
  // A stub for lockstep: writes its arguments, NUL-terminated, where the test reads them.
  const std::string argv_out = (tmp.dir() / "argv").string();
  const fs::path stub = tmp.write(
      "bin/lock step'$(x)", "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done >\"$ARGV_OUT\"\n");
  fs::permissions(stub, fs::perms::owner_all);
  LaunchSite site = site_with();
  site.lockstep = stub.string();
  LaunchRequest r = request({"sh", "-c", "echo \"$1\"; `touch " + marker + "`", "$(touch " + marker + ")"});
  r.image = "oci:/img/a\ntouch " + marker + "\n";
  r.nodes = 2;
  r.exec_args = {"--env", "TOKEN=it's \"q\"; touch " + marker, "--bind", "/data/a b:/mnt"};
  r.launcher_args = {"--comment=x\n#SBATCH --exclusive"};
  r.job = "j'$(touch " + marker + ")";
  r.runs_dir = "/runs/a;touch " + marker;
  const std::string script = render_sbatch(r, site, "sha256:abc");
  CHECK(script ==
        "#!/bin/sh\n"
        "#SBATCH --job-name=lockstep-PWNED-\n"
        "#SBATCH --nodes=2\n"
        "# Written by `lockstep run --emit sbatch`. Inside the allocation lockstep checks every node\n"
        "# (preflight), starts the ranks with srun and writes the run record.\n"
        "# image: oci:/img/a\\x0atouch " +
            marker +
            "\\x0a (sha256:abc)\n"
            "exec '" +
            (tmp.dir() / "bin").string() +
            "/lock step'\\''$(x)' run "
            "--launcher slurm -N 2 '--launcher-arg=--comment=x\n#SBATCH --exclusive' --env "
            "'TOKEN=it'\\''s \"q\"; touch " +
            marker + "' --bind '/data/a b:/mnt' --runs-dir '/runs/a;touch " + marker +
            "' --job 'j'\\''$(touch " + marker + ")' 'oci:/img/a\ntouch " + marker +
            "\n' -- sh -c 'echo \"$1\"; `touch " + marker + "`' '$(touch " + marker + ")'\n");
  // sbatch reads #SBATCH lines up to the first command: only lockstep's own.
  std::vector<std::string> directives;
  for (const std::string& line : lines_of(script)) {
    if (line.starts_with("exec ")) {
      break;
    }
    if (line.starts_with("#SBATCH")) {
      directives.push_back(line);
    }
  }
  CHECK(directives == std::vector<std::string>{"#SBATCH --job-name=lockstep-PWNED-", "#SBATCH --nodes=2"});
  // Run by sh and bash: the stub gets every word exactly, and nothing else runs.
  const fs::path file = tmp.write("job.sh", script);
  LaunchRequest inside = r;
  inside.launcher = Launcher::slurm;
  std::vector<std::string> expected = run_command_line(inside, site);
  expected.erase(expected.begin());
  for (const char* shell : {"sh", "bash"}) {
    run_command(fmt::format("{} -n {}", shell, file.string()));
    run_command(fmt::format("ARGV_OUT={} {} {}", argv_out, shell, file.string()));
    std::vector<std::string> got;
    const std::string raw = slurp(argv_out);
    for (std::size_t pos = 0; pos < raw.size();) {
      const std::size_t end = raw.find('\0', pos);
      got.push_back(raw.substr(pos, end - pos));
      pos = end + 1;
    }
    CHECK(got == expected);
    CHECK_FALSE(fs::exists(marker));
  }
}

TEST_CASE("run's --env values are on no rank's command line: the launcher's environment carries them",
          "[launch][hardening]") {
  LaunchRequest r = request();
  r.nodes = 2;
  r.ranks = 4;
  r.hostfile = "hosts";
  r.runtime = ContainerRuntime::native;
  r.exec_args = {"--env", "TOKEN=s3cret", "--bind", "--env", "--cleanenv"};
  LaunchPlan p = unwrap(plan_launch(r, site_with(k_three), openmpi_facts()));
  const std::string argv = shell_join(p.argv);
  CHECK(argv.find("s3cret") == std::string::npos);
  CHECK(argv.find("-x LOCKSTEP_ENV_TOKEN ") != std::string::npos);
  INFO(argv);
  CHECK(argv.find("--bind --env --cleanenv sif:/img/mpi.sif --") != std::string::npos);
  CHECK(p.env == std::vector<std::string>{"LOCKSTEP_ENV_TOKEN=s3cret"});
  // enroot start outside Slurm: the name on the command line, the value in the environment.
  r.runtime = ContainerRuntime::enroot;
  r.image = "/img/mpi.sqsh";
  r.exec_args = {"--env", "TOKEN=s3cret"};
  p = unwrap(plan_launch(r, site_with(k_three), openmpi_facts()));
  CHECK(shell_join(p.rank) == "enroot start --env TOKEN /img/mpi.sqsh");
  CHECK(p.env == std::vector<std::string>{"TOKEN=s3cret"});
  CHECK(shell_join(p.argv).find("s3cret") == std::string::npos);
}

TEST_CASE("records, --dry-run and --debug show --env names only unless --record-env-values", "[launch]") {
  LaunchRequest r = request();
  r.exec_args = {"--bind", "--env", "--env", "TOKEN=s3cret=x", "--env", "EMPTY=", "--cleanenv"};
  CHECK(without_env_values(r).exec_args ==
        std::vector<std::string>{"--bind", "--env", "--env", "TOKEN", "--env", "EMPTY", "--cleanenv"});
  CHECK(
      shell_join(run_command_line(without_env_values(r), site_with())) ==
      "/opt/ls/bin/lockstep run --bind --env --env TOKEN --env EMPTY --cleanenv sif:/img/mpi.sif -- python3 "
      "/opt/hello/hello.py");
  // Pyxis takes the variables in the launcher's environment: names only there too.
  LaunchRequest pyxis = request();
  pyxis.runtime = ContainerRuntime::enroot;
  pyxis.exec_args = {"--env", "TOKEN=s3cret"};
  LaunchSite slurm = site_with();
  slurm.slurm_job_id = "42";
  Result<LaunchPlan> shown = plan_launch(without_env_values(pyxis), slurm, openmpi_facts());
  REQUIRE(shown.ok());
  CHECK(shown->env == std::vector<std::string>{"TOKEN"});
  // Asked for, the values stay, and the repeated command line asks for them again.
  r.record_env_values = true;
  CHECK(shell_join(run_command_line(r, site_with())) ==
        "/opt/ls/bin/lockstep run --bind --env --env TOKEN=s3cret=x --env EMPTY= --cleanenv "
        "--record-env-values sif:/img/mpi.sif -- python3 /opt/hello/hello.py");
}

TEST_CASE("shell quoting survives sh -c", "[launch][process]") {
  std::vector<std::string> words = {"echo", "it's", "a b", "$HOME", "", "plain-word_1.2:/x=y,z@h%"};
  CHECK(shell_join(words) == "echo 'it'\\''s' 'a b' '$HOME' '' plain-word_1.2:/x=y,z@h%");
  CaptureResult r = unwrap(run_capture({"sh", "-c", "printf '%s|' " + shell_join(words)}));
  CHECK(r.out == "echo|it's|a b|$HOME||plain-word_1.2:/x=y,z@h%|");
  // Hostile words: each arrives whole and nothing in them runs.
  TempDirFixture tmp;
  const std::string marker = (tmp.dir() / "PWNED").string();
  const std::vector<std::string> hostile = {"a\ntouch " + marker + "\n",
                                            "it's \"q\"",
                                            "$(touch " + marker + ")",
                                            "`touch " + marker + "`",
                                            "; touch " + marker,
                                            "x'; touch " + marker + "; '",
                                            "\\'\\",
                                            "\t\r\x01"};
  for (const char* shell : {"sh", "bash"}) {
    r = unwrap(run_capture({shell, "-c", "printf '%s|' " + shell_join(hostile)}));
    std::string want;
    for (const std::string& w : hostile) {
      want += w + "|";
    }
    CHECK(r.out == want);
    CHECK_FALSE(fs::exists(marker));
  }
  // A first word with '=' is the command, not an assignment.
  CHECK(shell_join({"A=B", "C=D"}) == "'A=B' C=D");
  CHECK(unwrap(run_capture({"sh", "-c", shell_join({"A=B", "C=D"})})).status == 127);
}

TEST_CASE("run_capture bounds output, reports status and times out", "[process]") {
  CaptureResult r = unwrap(run_capture({"sh", "-c", "echo out; echo err >&2; exit 3"}));
  CHECK(r.out == "out\n");
  CHECK(r.err == "err\n");
  CHECK(r.status == 3);
  CaptureOptions small;
  small.max_output = 4;
  CHECK(unwrap(run_capture({"sh", "-c", "yes | head -c 100000"}, small)).out == "y\ny\n");
  CaptureOptions quick;
  quick.timeout = std::chrono::milliseconds(200);
  CaptureResult slow = unwrap(run_capture({"sh", "-c", "sleep 5 & sleep 5"}, quick));
  CHECK(slow.timed_out);
  CHECK(slow.status == 128 + 9);
  Result<CaptureResult> missing = run_capture({"/nonexistent/tool"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ExitCode::external);
}
