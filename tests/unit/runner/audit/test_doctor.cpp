// `lockstep doctor`: the parsers of tool output and host files, a capture from the fake node tree in
// tests/fixtures/doctor/node (copied into a temp dir per test), the venv, conda and system-prefix
// readers, the snapshot JSON and its strict parser, and the verdict for a target.
#include "runner/audit/doctor.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;

namespace {

const fs::path k_fixture = test::source_dir() / "tests/fixtures/doctor";

/// A copy of the fake node tree, and options that read it with no tool on PATH.
struct NodeFixture : test::TempDirFixture {
  NodeFixture() {
    fs::copy(k_fixture / "node", root(), fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    fs::create_directories(dir() / "empty-bin");
    options.host_root = root();
    options.path_list = (dir() / "empty-bin").string();
  }
  [[nodiscard]] fs::path root() const { return dir() / "root"; }
  /// Puts the fixture's stand-in tools (nvidia-smi, mpirun, sinfo) on PATH.
  void with_tools() { options.path_list = (k_fixture / "bin").string(); }
  Capture capture_ok() const {
    Result<Capture> c = capture(options);
    REQUIRE_OK(c);
    return *c;
  }
  DoctorOptions options;
};

std::vector<std::string> package_lines(const PythonEnv& env) {
  std::vector<std::string> out;
  for (const PythonPackage& p : env.packages) {
    out.push_back(p.name + " " + p.version + " " + p.from + " " + p.installer + " " + p.build + " " +
                  p.channel);
  }
  return out;
}

envspec::ImageFacts cuda_openmpi_facts() {
  envspec::ImageFacts facts;
  facts.mpi_impl = "openmpi";
  facts.mpi = {"4.1.4", "libopenmpi3 4.1.4-3+b1"};
  facts.pmix = {"4.2.2", "libpmix2 4.2.2-1+deb12u1"};
  facts.cuda = {"12.1", "cuda-cudart-12-1 12.1.105-1"};
  facts.cuda_driver_floor = "530.30.02";
  return facts;
}

} // namespace

// ---- parsers ------------------------------------------------------------------------------------

TEST_CASE("doctor: nvidia-smi's CSV query output gives the GPUs and the driver", "[doctor]") {
  const auto report = parse_nvidia_smi("1, NVIDIA A100-SXM4-80GB, GPU-bbbb, 8.0, 81920, 535.104.05\n"
                                       "0, NVIDIA A100-SXM4-80GB, GPU-aaaa, 8.0, 81920, 535.104.05\n");
  REQUIRE_OK(report);
  CHECK(report->driver_version == "535.104.05");
  REQUIRE(report->gpus.size() == 2);
  CHECK(report->gpus[0] == SnapshotGpu{0, "NVIDIA A100-SXM4-80GB", "GPU-aaaa", "8.0", 81920});
  CHECK(report->gpus[1].uuid == "GPU-bbbb");

  const auto odd =
      parse_nvidia_smi("0, Tesla K80, Model 2, GPU-cccc, [N/A], [Not Supported], 470.223.02\r\n\n");
  REQUIRE_OK(odd);
  CHECK(odd->gpus.at(0) == SnapshotGpu{0, "Tesla K80, Model 2", "GPU-cccc", "", std::nullopt});
  CHECK(odd->driver_version == "470.223.02");

  // Text from the tool ends up in terminals and in snapshots that are parsed strictly.
  const auto hostile = parse_nvidia_smi("0, Evil\x1b[31mGPU\xc2\x85, GPU-1, 9.0, 1, 535.1\n");
  REQUIRE_OK(hostile);
  CHECK(hostile->gpus.at(0).name == "Evil?[31mGPU??");
  Snapshot with_gpu;
  with_gpu.tool = "lockstep 0.1.0";
  with_gpu.host.gpus = hostile->gpus;
  CHECK(parse_snapshot(render_snapshot(with_gpu), "s.json").ok());

  CHECK(parse_nvidia_smi("").value().gpus.empty());
  const auto bad = parse_nvidia_smi("Field \"compute_cap\" is not a valid field to query.\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "nvidia-smi output line 1: expected 6 comma-separated fields, got \"Field "
                               "\"compute_cap\" is not a valid field to query.\"");
  CHECK(parse_nvidia_smi("x, a, b, 9.0, 1, 535.1\n").error().message ==
        "nvidia-smi output line 1: the index \"x\" is not a number");
}

TEST_CASE("doctor: os-release, glibc's banner, Slurm's --version and the dpkg database are read",
          "[doctor]") {
  CHECK(os_pretty_name("NAME=\"Rocky Linux\"\nPRETTY_NAME=\"Rocky Linux 9.3 (Blue Onyx)\"\n") ==
        "Rocky Linux 9.3 (Blue Onyx)");
  CHECK(os_pretty_name("# comment\nPRETTY_NAME='Say \"hi\"'\n") == "Say \"hi\"");
  CHECK(os_pretty_name("PRETTY_NAME=\"A \\\"quoted\\\" name\"\n") == "A \"quoted\" name");
  CHECK(os_pretty_name("NAME=Alpine\nVERSION_ID=3.19.1\n") == "Alpine 3.19.1");
  CHECK(os_pretty_name("ID=x\n").empty());

  static constexpr char k_banner[] =
      "\0\0GNU C Library (Ubuntu GLIBC 2.35-0ubuntu3.6) stable release version 2.35.\n";
  CHECK(glibc_version_in(std::string(k_banner, sizeof(k_banner) - 1)) == "2.35");
  CHECK(glibc_version_in("GNU C Library (GNU libc) stable release version 2.17, by Roland McGrath") ==
        "2.17");
  CHECK(glibc_version_in("GNU C Library is mentioned, no banner").empty());

  CHECK(slurm_version_from("slurm 22.05.8\n") == "22.05.8");
  CHECK(slurm_version_from("slurm-wlm 21.08.5\n") == "21.08.5");
  CHECK(slurm_version_from("sinfo: error: could not establish a configuration source\n").empty());

  const std::string status = "Package: libfabric1\nStatus: install ok installed\nVersion: 1:1.17.0-3\n\n"
                             "Package: libucx0\nStatus: deinstall ok config-files\nVersion: 1.13.1-1\n\n"
                             "Package: libpmix2\nStatus: install ok installed\nVersion: 4.2.2-1+deb12u1\n";
  CHECK(dpkg_installed_versions(status, {"libfabric1", "libucx0", "libpmix2"}) ==
        std::map<std::string, std::string>{{"libfabric1", "1.17.0"}, {"libpmix2", "4.2.2"}});
  CHECK(dpkg_installed_versions("not deb822 at all\n", {"libfabric1"}).empty());
}

// ---- capture from a fake node ---------------------------------------------------------------------

TEST_CASE_METHOD(NodeFixture,
                 "doctor: a fake node's /proc, /etc, libc and dpkg database are read inside the root",
                 "[doctor]") {
  const Capture c = capture_ok();
  const SnapshotHost& h = c.snapshot.host;
  CHECK(h.arch == "x86_64");
  CHECK(h.os == "Debian GNU/Linux 12 (bookworm)"); // etc/os-release -> /usr/lib/os-release inside the root
  CHECK(h.kernel == "6.1.0-18-amd64");
  CHECK(h.glibc == "2.36");
  CHECK(h.user_namespaces);
  CHECK(h.driver == SnapshotDriver{"535.104.05", "/proc/driver/nvidia/version"});
  CHECK(c.gpus_from == "/proc/driver/nvidia/gpus");
  REQUIRE(h.gpus.size() == 2);
  CHECK(h.gpus[0] == SnapshotGpu{0, "NVIDIA H100 80GB HBM3", "GPU-8d3f5c1e-1111-2222-3333-444455556666", "",
                                 std::nullopt});
  CHECK(h.gpus[1].index == 1);
  CHECK(h.gpus[1].uuid == "GPU-0a1b2c3d-7777-8888-9999-aaaabbbbcccc");
  CHECK_FALSE(h.mpi);
  CHECK(h.pmix == "4.2.2"); // the root's dpkg database, not this machine's library
  CHECK(h.ucx.empty());     // only its config files are left
  CHECK(h.libfabric == "1.17.0");
  CHECK(h.slurm.empty());
  CHECK_FALSE(c.snapshot.python);
  CHECK(c.warnings.empty());
  CHECK(c.probe.driver_version == "535.104.05");
  CHECK(c.probe.gpu_count == 2);
  CHECK(c.probe.userns.state == UsernsState::allowed);
}

TEST_CASE_METHOD(NodeFixture, "doctor: nvidia-smi, mpirun and sinfo on PATH fill in what files can't say",
                 "[doctor]") {
  with_tools();
  const Capture c = capture_ok();
  const SnapshotHost& h = c.snapshot.host;
  CHECK(c.gpus_from == "nvidia-smi");
  REQUIRE(h.gpus.size() == 2);
  CHECK(h.gpus[1] ==
        SnapshotGpu{1, "NVIDIA H100 80GB HBM3", "GPU-0a1b2c3d-7777-8888-9999-aaaabbbbcccc", "9.0", 81559});
  CHECK(h.driver == SnapshotDriver{"535.104.05", "/proc/driver/nvidia/version"});
  REQUIRE(h.mpi);
  CHECK(*h.mpi == SnapshotMpi{"openmpi", "4.1.4", (k_fixture / "bin/mpirun").string()});
  CHECK(h.slurm == "22.05.8");

  // Without the /proc driver files, nvidia-smi's driver version is the one reported.
  fs::remove_all(root() / "proc/driver");
  const Capture smi_only = capture_ok();
  CHECK(smi_only.snapshot.host.driver == SnapshotDriver{"535.104.05", "nvidia-smi"});
  CHECK(smi_only.snapshot.host.gpus.size() == 2);
}

TEST_CASE_METHOD(NodeFixture,
                 "doctor: without a driver or with user namespaces disabled, the snapshot says so",
                 "[doctor]") {
  fs::remove_all(root() / "proc/driver");
  test::TempDirFixture::write("root/proc/sys/user/max_user_namespaces", "0\n");
  const Capture c = capture_ok();
  CHECK_FALSE(c.snapshot.host.driver);
  CHECK(c.snapshot.host.gpus.empty());
  CHECK_FALSE(c.snapshot.host.user_namespaces);
  CHECK(c.probe.userns.state == UsernsState::disabled);

  test::TempDirFixture::write("root/proc/sys/user/max_user_namespaces", "100\n");
  test::TempDirFixture::write("root/proc/sys/kernel/unprivileged_userns_clone", "0\n");
  CHECK_FALSE(capture_ok().snapshot.host.user_namespaces);
}

TEST_CASE_METHOD(NodeFixture, "doctor: a symlink in the root can't lead out of it", "[doctor]") {
  fs::remove(root() / "etc/os-release");
  fs::remove(root() / "usr/lib/os-release");
  // Absolute and ../ targets that would name this machine's os-release outside the root.
  fs::create_symlink("/etc/os-release", root() / "usr/lib/os-release");
  fs::create_symlink("../../../../../../../../etc/os-release", root() / "etc/os-release");
  const Capture c = capture_ok();
  CHECK(c.snapshot.host.os.empty());
}

TEST_CASE_METHOD(NodeFixture, "doctor: a host root that is not a directory is refused", "[doctor]") {
  options.host_root = dir() / "missing";
  const Result<Capture> c = capture(options);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().code == ExitCode::invalid_input);
  CHECK(c.error().message == "--host-root " + (dir() / "missing").string() + ": not a directory");
}

// ---- Python environments --------------------------------------------------------------------------

TEST_CASE_METHOD(NodeFixture, "doctor: a venv is read from pyvenv.cfg and its dist-info records",
                 "[doctor]") {
  options.virtual_env = "/opt/venv";
  options.conda_prefix = "/opt/conda"; // an active venv wins over the conda environment it came from
  const Capture c = capture_ok();
  REQUIRE(c.snapshot.python);
  const PythonEnv& env = *c.snapshot.python;
  CHECK(env.kind == "venv");
  CHECK(env.prefix == "/opt/venv");
  CHECK(env.version == "3.11.2");
  CHECK(c.python_home == "/usr/bin");
  CHECK_FALSE(c.system_site_packages);
  // Sorted by PEP 503 name: numpy, pyyaml, typing-extensions, zope-interface.
  CHECK(package_lines(env) == std::vector<std::string>{"numpy 1.26.4 dist-info pip  ",
                                                       "PyYAML 6.0.1 dist-info pip  ",
                                                       "typing_extensions 4.9.0 dist-info uv  ",
                                                       "zope.interface 6.1 dist-info   "});
  const std::string broken =
      (root() / "opt/venv/lib/python3.11/site-packages/broken-1.0.dist-info/METADATA").string();
  CHECK(c.warnings == std::vector<std::string>{broken + ": no valid Name header; skipped"});
}

TEST_CASE_METHOD(NodeFixture,
                 "doctor: a venv without pyvenv.cfg or with hostile records still gives a snapshot",
                 "[doctor]") {
  options.virtual_env = "/opt/venv";
  fs::remove(root() / "opt/venv/pyvenv.cfg");
  const std::string site = "root/opt/venv/lib/python3.11/site-packages/";
  test::TempDirFixture::write(site + "evil-1.dist-info/METADATA", "Name: evil\x1b[2J\nVersion: 1\n");
  test::TempDirFixture::write(site + "badversion-1.dist-info/METADATA", "Name: badversion\nVersion: 1 0\n");
  fs::create_directories(root() / "opt/venv/lib/python3.11/site-packages/nometa-1.dist-info");
  const Capture c = capture_ok();
  REQUIRE(c.snapshot.python);
  CHECK(c.snapshot.python->version == "3.11"); // from lib/python3.11
  CHECK(c.snapshot.python->packages.size() == 4);
  const std::string shown = (root() / "opt/venv").string();
  CHECK(
      c.warnings ==
      std::vector<std::string>{
          "can't open " + shown +
              "/pyvenv.cfg: No such file or directory; the venv's Python version is unknown",
          shown + "/lib/python3.11/site-packages/badversion-1.dist-info/METADATA: no valid Version header; "
                  "skipped",
          shown +
              "/lib/python3.11/site-packages/broken-1.0.dist-info/METADATA: no valid Name header; skipped",
          shown + "/lib/python3.11/site-packages/evil-1.dist-info/METADATA: no valid Name header; skipped",
          "can't open " + shown +
              "/lib/python3.11/site-packages/nometa-1.dist-info/METADATA: No such file or directory; skipped",
      });
}

TEST_CASE_METHOD(NodeFixture, "doctor: a conda environment lists conda-meta and the pip-installed dist-info",
                 "[doctor]") {
  options.conda_prefix = "/opt/conda";
  const Capture c = capture_ok();
  REQUIRE(c.snapshot.python);
  const PythonEnv& env = *c.snapshot.python;
  CHECK(env.kind == "conda");
  CHECK(env.version == "3.11.5");
  CHECK(package_lines(env) ==
        std::vector<std::string>{
            "cuda-cudart 12.1.105 conda  0 https://conda.anaconda.org/nvidia/label/cuda-12.1.1/linux-64",
            "numpy 1.26.4 conda  py311h64a7726_0 https://conda.anaconda.org/conda-forge/linux-64",
            "python 3.11.5 conda  h955ad1f_0 https://repo.anaconda.com/pkgs/main/linux-64",
            "python-dateutil 2.8.2 dist-info   ",
            "requests 2.31.0 dist-info pip  ",
        });
  CHECK(c.warnings ==
        std::vector<std::string>{(root() / "opt/conda/conda-meta/truncated-1.0-0.json").string() +
                                 ": not valid JSON (at byte 51); skipped"});
}

TEST_CASE_METHOD(NodeFixture, "doctor: --python reads a system prefix's dist-packages and egg-info",
                 "[doctor]") {
  options.python_prefix = "/usr/";
  const Capture c = capture_ok();
  REQUIRE(c.snapshot.python);
  CHECK(c.snapshot.python->kind == "prefix");
  CHECK(c.snapshot.python->prefix == "/usr");
  CHECK(package_lines(*c.snapshot.python) ==
        std::vector<std::string>{"distro-info 1.5+deb12u1 egg-info   ", "six 1.16.0 egg-info   "});

  options.python_prefix = "/opt/conda";
  CHECK(capture_ok().snapshot.python->kind == "conda");
  options.python_prefix = "/nowhere";
  const Result<Capture> missing = capture(options);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ExitCode::invalid_input);
  CHECK(missing.error().message ==
        "--python /nowhere: " + (root() / "nowhere").string() + " is not a directory");
}

TEST_CASE_METHOD(NodeFixture, "doctor: a VIRTUAL_ENV that is gone is a warning, not an error", "[doctor]") {
  options.virtual_env = "/opt/gone";
  const Capture c = capture_ok();
  CHECK_FALSE(c.snapshot.python);
  CHECK(c.warnings == std::vector<std::string>{"VIRTUAL_ENV=/opt/gone: " + (root() / "opt/gone").string() +
                                               " is not a directory; no Python environment read"});
}

// ---- the snapshot document ------------------------------------------------------------------------

TEST_CASE_METHOD(NodeFixture, "doctor: a snapshot survives render and parse unchanged", "[doctor]") {
  with_tools();
  options.conda_prefix = "/opt/conda";
  Capture c = capture_ok();
  c.snapshot.target = evaluate_target("lock", "lockstep.lock", cuda_openmpi_facts(), c, nullptr, 0);
  const std::string text = render_snapshot(c.snapshot);
  const Result<Snapshot> back = parse_snapshot(text, "snap.json");
  REQUIRE_OK(back);
  CHECK(*back == c.snapshot);
  CHECK(render_snapshot(*back) == text);
  CHECK(text.starts_with("{\n  \"lockstep-snapshot\": 1,\n  \"tool\": \"lockstep "));
  CHECK(text.back() == '\n');
}

TEST_CASE("doctor: a snapshot's keys and types are checked strictly", "[doctor]") {
  Snapshot s;
  s.tool = "lockstep 0.1.0";
  s.host.arch = "x86_64";
  s.host.gpus.push_back(SnapshotGpu{0, "GPU", "GPU-1", "9.0", 80});
  s.python =
      PythonEnv{"venv", "/v", "3.11.2", {PythonPackage{"numpy", "1.26.4", "dist-info", "pip", "", ""}}};
  const std::string good = snapshot_json(s).dump();
  REQUIRE_OK(parse_snapshot(good, "s.json"));

  auto error_of = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const std::size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    const Result<Snapshot> r = parse_snapshot(text, "s.json");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  CHECK(error_of("\"slurm\":null", "\"slurm\":null,\"extra\":1") == "s.json: host: unknown key 'extra'");
  CHECK(error_of("\"memory_mib\":80", "\"memory_mib\":\"80\"") ==
        "s.json: host.gpus[0].memory_mib: expected an integer or null");
  CHECK(error_of(",\"ucx\":null", "") == "s.json: host: missing key 'ucx'");
  CHECK(error_of("\"lockstep-snapshot\":1", "\"lockstep-snapshot\":2") ==
        "s.json: lockstep-snapshot: expected 1 (a snapshot from another lockstep version?)");
  CHECK(error_of("\"from\":\"dist-info\"", "\"from\":\"pip\"") ==
        "s.json: python.packages[0].from: 'pip' is not one of dist-info, egg-info, conda");
  CHECK(error_of("\"name\":\"numpy\"", "\"name\":\"num py\"") ==
        "s.json: python.packages[0].name: 'num py' is not a package name");
  CHECK(error_of("\"arch\":\"x86_64\"", "\"arch\":\"x86\\u001b64\"") ==
        "s.json: host.arch: contains control characters");
  CHECK(error_of("\"prefix\":\"/v\"", "\"prefix\":\"v\"") ==
        "s.json: python.prefix: expected an absolute path");
  CHECK(parse_snapshot("[1,2]", "s.json").error().message == "s.json: (top level): expected an object");
  CHECK(parse_snapshot("{", "s.json").error().message == "s.json: (top level): not valid JSON");
  CHECK(parse_snapshot(std::string(40, '[') + std::string(40, ']'), "s.json").error().message ==
        "s.json: (top level): nested more than 16 levels deep");

  // A target's can_run must agree with its checks.
  s.target = TargetReport{"lock", "x.lock", {}, {Check{"driver", Check::Status::fail, "too old"}}};
  std::string text = snapshot_json(s).dump();
  REQUIRE_OK(parse_snapshot(text, "s.json"));
  text.replace(text.find("\"can_run\":false"), 15, "\"can_run\":true");
  CHECK(parse_snapshot(text, "s.json").error().message ==
        "s.json: target.can_run: does not agree with the checks (a failed check means false)");
}

// ---- the verdict ----------------------------------------------------------------------------------

TEST_CASE_METHOD(NodeFixture, "doctor: a target's CUDA floor and MPI are checked by preflight's rules",
                 "[doctor]") {
  with_tools();
  test::TempDirFixture::write(
      "root/proc/driver/nvidia/version",
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  525.60.13  Wed Nov 30 UTC 2022\n");
  Capture c = capture_ok();
  TargetReport old_driver = evaluate_target("lock", "l.lock", cuda_openmpi_facts(), c, nullptr, 0);
  CHECK_FALSE(old_driver.can_run());
  REQUIRE(old_driver.checks.size() == 5);
  CHECK(old_driver.checks[0] == Check{"driver", Check::Status::fail,
                                      "driver 525.60.13 is older than 530.30.02, the floor of the image's "
                                      "CUDA 12.1 (update the driver or use "
                                      "an image built for an older CUDA)"});
  CHECK(old_driver.checks[1] == Check{"gpus", Check::Status::ok, "2 GPUs, 1 requested per node"});
  CHECK(old_driver.checks[2] == Check{"mpi", Check::Status::ok, "Open MPI 4.1.4 on host and image"});
  CHECK(old_driver.checks[3] == Check{"pmix", Check::Status::ok, "PMIx 4.2.2 on host and image"});
  CHECK(old_driver.checks[4].name == "userns");
  CHECK(old_driver.facts.mpi.from.empty());

  test::TempDirFixture::write(
      "root/proc/driver/nvidia/version",
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 UTC 2023\n");
  c = capture_ok();
  envspec::ImageFacts mpich = cuda_openmpi_facts();
  CHECK(evaluate_target("lock", "l.lock", mpich, c, nullptr, 0).can_run());
  mpich.mpi_impl = "mpich";
  mpich.mpi.version = "4.0.2";
  const TargetReport other_mpi = evaluate_target("lock", "l.lock", mpich, c, nullptr, 0);
  CHECK_FALSE(other_mpi.can_run());
  CHECK(other_mpi.checks[2].detail ==
        "host Open MPI 4.1.4, image MPICH 4.0.2: the hybrid model needs the host's "
        "MPI in the image (rebuild the image with the host's MPI or use --mpi-model "
        "container)");

  // No mpirun and no Slurm: a single-node (local) run doesn't need one; CPU-only images ask for no GPU.
  options.path_list = (dir() / "empty-bin").string();
  c = capture_ok();
  envspec::ImageFacts cpu_only = cuda_openmpi_facts();
  cpu_only.cuda = {};
  cpu_only.cuda_driver_floor.clear();
  const TargetReport local = evaluate_target("lock", "l.lock", cpu_only, c, nullptr, 0);
  CHECK(local.can_run());
  REQUIRE(local.checks.size() == 2); // the mpi check is skipped
  CHECK(local.checks[0].name == "pmix");
  CHECK(local.checks[1].name == "userns");
}

TEST_CASE_METHOD(NodeFixture, "doctor: GPUs older than the target's lowest compute capability fail gpu-arch",
                 "[doctor]") {
  with_tools();
  test::TempDirFixture::write(
      "root/proc/driver/nvidia/version",
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 UTC 2023\n");
  const Capture c = capture_ok();
  REQUIRE(c.snapshot.host.gpus.size() == 2);
  REQUIRE(c.snapshot.host.gpus[0].compute_capability == "9.0");
  const TargetReport ok = evaluate_target("lock", "l.lock", cuda_openmpi_facts(), c, nullptr, 0, "7.5");
  CHECK(ok.can_run());
  CHECK(ok.checks.back() ==
        Check{"gpu-arch", Check::Status::ok, "2 GPUs at compute capability 7.5 or newer"});
  const TargetReport too_old = evaluate_target("lock", "l.lock", cuda_openmpi_facts(), c, nullptr, 0, "10.0");
  CHECK_FALSE(too_old.can_run());
  CHECK(too_old.checks.back().name == "gpu-arch");
  CHECK(too_old.checks.back().status == Check::Status::fail);
  CHECK(too_old.checks.back().detail.find("GPU 0 (") == 0);
  CHECK(too_old.checks.back().detail.find(", compute capability 9.0), GPU 1 (") != std::string::npos);
  CHECK(too_old.checks.back().detail.find(
            " are older than 10.0, the lowest compute capability the target's CUDA "
            "stack supports (use newer GPUs, or a stack built for older ones)") != std::string::npos);
  // No minimum recorded: no check.
  CHECK(evaluate_target("lock", "l.lock", cuda_openmpi_facts(), c, nullptr, 0).checks.back().name !=
        "gpu-arch");
}

TEST_CASE_METHOD(NodeFixture, "doctor: the report is a table of the host then the verdict", "[doctor]") {
  with_tools();
  options.virtual_env = "/opt/venv";
  const Capture c = capture_ok();
  const TargetReport t = evaluate_target("lock", "l.lock", cuda_openmpi_facts(), c, nullptr, 0);
  const std::string report = render_doctor_report(c, t);
  const std::string mpirun = (k_fixture / "bin/mpirun").string();
  CHECK(
      report ==
      "arch             x86_64\n"
      "os               Debian GNU/Linux 12 (bookworm)\n"
      "kernel           6.1.0-18-amd64\n"
      "glibc            2.36\n"
      "user namespaces  yes\n"
      "NVIDIA driver    535.104.05 (from /proc/driver/nvidia/version)\n"
      "GPUs             2 (from nvidia-smi)\n"
      "  0              NVIDIA H100 80GB HBM3, cc 9.0, 81559 MiB, GPU-8d3f5c1e-1111-2222-3333-444455556666\n"
      "  1              NVIDIA H100 80GB HBM3, cc 9.0, 81559 MiB, GPU-0a1b2c3d-7777-8888-9999-aaaabbbbcccc\n"
      "mpirun           Open MPI 4.1.4 (" +
          mpirun +
          ")\n"
          "PMIx             4.2.2\n"
          "UCX              not found\n"
          "libfabric        1.17.0\n"
          "Slurm            22.05.8\n"
          "Python           venv /opt/venv, Python 3.11.2, 4 packages\n"
          "\n"
          "target        l.lock (lock): CUDA 12.1 (driver >= 530.30.02), Open MPI 4.1.4, PMIx 4.2.2\n"
          "can run here  yes\n"
          "  driver      ok    driver 535.104.05 (the image's CUDA 12.1 needs 530.30.02)\n"
          "  gpus        ok    2 GPUs, 1 requested per node\n"
          "  mpi         ok    Open MPI 4.1.4 on host and image\n"
          "  pmix        ok    PMIx 4.2.2 on host and image\n"
          "  userns      ok    allowed\n");
}
