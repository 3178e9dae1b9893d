#include "runner/launch/host_probe.hpp"
#include "runner/runtime/gpu.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;

namespace {

/// Writes an executable shell script.
fs::path write_script(const test::TempDirFixture& tmp, const std::string& rel, const std::string& body) {
  fs::path p = tmp.write(rel, "#!/bin/sh\n" + body);
  ::chmod(p.c_str(), 0755);
  return p;
}

} // namespace

TEST_CASE("host probe: mpirun --version of Open MPI, MPICH's Hydra and others", "[host_probe]") {
  struct Case {
    std::string output;
    std::string impl;
    std::string version;
    std::string banner;
  };
  const std::vector<Case> cases = {
      {"mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n", "openmpi",
       "4.1.4", "mpirun (Open MPI) 4.1.4"},
      {"mpirun (Open MPI) 5.0.0rc12\n", "openmpi", "5.0.0rc12", "mpirun (Open MPI) 5.0.0rc12"},
      {"HYDRA build details:\n    Version:                                 4.0.2\n"
       "    Release Date:                            Thu Apr  7 12:34:45 CDT 2022\n",
       "mpich", "4.0.2", "HYDRA build details:"},
      {"Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n"
       "Copyright 2003-2023, Intel Corporation.\n",
       "unknown", "", "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)"},
      {"mpirun (Open MPI)\n", "unknown", "", "mpirun (Open MPI)"},
      {"\x1b]0;title\x07mpirun\n", "unknown", "", "?]0;title?mpirun"},
      {"\n\n", "", "", ""},
      {"", "", "", ""},
  };
  for (const Case& c : cases) {
    INFO(c.output);
    const HostMpi mpi = parse_mpirun_version(c.output);
    CHECK(mpi.impl == c.impl);
    CHECK(mpi.version == c.version);
    CHECK(mpi.banner == c.banner);
  }
  CHECK(parse_mpirun_version(std::string(500, 'x')).banner == std::string(160, 'x'));
}

TEST_CASE("host probe: the first mpirun on PATH is run and read", "[host_probe]") {
  test::TempDirFixture tmp;
  write_script(tmp, "a/mpirun", "echo 'mpirun (Open MPI) 5.0.3'\n");
  write_script(tmp, "b/mpirun", "echo 'mpirun (Open MPI) 4.1.4'\n");
  write_script(tmp, "silent/mpirun", "exit 3\n");
  write_script(tmp, "stderr/mpirun", "echo 'HYDRA build details:' >&2; echo '  Version: 4.1.1' >&2\n");
  const std::string a = (tmp.dir() / "a").string();
  const std::string b = (tmp.dir() / "b").string();

  HostMpi mpi = probe_mpirun(tmp.dir().string() + "/none:" + a + ":" + b);
  CHECK(mpi.path == a + "/mpirun");
  CHECK(mpi.impl == "openmpi");
  CHECK(mpi.version == "5.0.3");
  CHECK(mpi.error.empty());

  mpi = probe_mpirun((tmp.dir() / "stderr").string());
  CHECK(mpi.impl == "mpich");
  CHECK(mpi.version == "4.1.1");

  const std::string silent = (tmp.dir() / "silent").string();
  mpi = probe_mpirun(silent);
  CHECK(mpi.path == silent + "/mpirun");
  CHECK(mpi.impl.empty());
  CHECK(mpi.error == "`" + silent + "/mpirun --version` printed nothing (exit status 3)");

  mpi = probe_mpirun((tmp.dir() / "none").string());
  CHECK(mpi.path.empty());
  CHECK(mpi.impl.empty());
  CHECK(mpi.error.empty());
}

TEST_CASE("host probe: the PMIx release from PMIx_Get_version's text", "[host_probe]") {
  CHECK(pmix_version_from("OpenPMIx 4.2.2rc2 (PMIx Standard: 4.2, Stable ABI: 0.0, Provisional ABI: 0.0)") ==
        "4.2.2rc2");
  CHECK(pmix_version_from("OpenPMIx 3.2.3 (PMIx Standard: 3.1, API: 3.1.1)") == "3.2.3");
  CHECK(pmix_version_from("PMIx v2.1.1 ...") == "2.1.1");
  CHECK(pmix_version_from("PMIx (no version)") == "");
  CHECK(pmix_version_from("") == "");
}

TEST_CASE("host probe: this host's PMIx and UCX libraries, when installed, match their packages",
          "[host_probe]") {
  // The peer: dpkg's record of the packages that ship libpmix.so.2 and libucp.so.0.
  auto package_version = [](const char* package) {
    std::string v =
        test::run_command(std::string("dpkg-query -W -f='${Status} ${Version}' ") + package + " 2>/dev/null",
                          test::ExitCheck::ignore);
    const std::string installed = "install ok installed ";
    if (v.rfind(installed, 0) != 0) {
      return std::string();
    }
    v = v.substr(installed.size());
    v = v.substr(v.find(':') == std::string::npos ? 0 : v.find(':') + 1); // epoch
    return v.substr(0, v.find_first_of("-+~"));                           // revision, suffixes
  };
  const std::string pmix = package_version("libpmix2");
  if (pmix.empty()) {
    CHECK(probe_pmix().empty());
  } else {
    CHECK(probe_pmix().rfind(pmix, 0) == 0); // "4.2.2rc2" for Debian's 4.2.2-1
  }
  const std::string ucx = package_version("libucx0");
  if (ucx.empty()) {
    CHECK(probe_ucx().empty());
  } else {
    CHECK(probe_ucx() == ucx);
  }
}

TEST_CASE("host probe: free space is measured where the cache is, or will be", "[host_probe]") {
  test::TempDirFixture tmp;
  const fs::path cache = tmp.dir() / "not" / "yet" / "cache";
  const HostSpace space = probe_space(cache);
  CHECK(space.path == cache);
  CHECK(space.error.empty());
  CHECK(space.free_bytes > 0);
}

TEST_CASE("host probe: the driver version and GPU count come from the driver's procfs files",
          "[host_probe]") {
  test::TempDirFixture tmp;
  GpuHost host{tmp.dir()};
  Result<GpuInventory> none = gpu_inventory(host);
  REQUIRE_OK(none);
  CHECK(none->driver_version.empty());
  CHECK(none->gpu_count == 0);

  tmp.write("proc/driver/nvidia/version",
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.57.02  Tue Jul 13 16:14:05 UTC 2021\n");
  for (const char* bus : {"0000:3b:00.0", "0000:af:00.0", "0000:d8:00.0"}) {
    tmp.write(std::string("proc/driver/nvidia/gpus/") + bus + "/information", "Model: x\nDevice Minor: 0\n");
  }
  Result<GpuInventory> three = gpu_inventory(host);
  REQUIRE_OK(three);
  CHECK(three->driver_version == "470.57.02");
  CHECK(three->gpu_count == 3);

  tmp.write("proc/driver/nvidia/gpus/0000:d8:00.0/information", "Model: x\n");
  Result<GpuInventory> broken = gpu_inventory(host);
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.error().code == ExitCode::external);
}

TEST_CASE("host probe: user namespaces are not needed as root, else tested in a child", "[host_probe]") {
  const HostUserns userns = probe_user_namespaces();
  if (::geteuid() == 0) {
    CHECK(userns.state == UsernsState::not_needed);
  } else {
    // The peer: util-linux's unshare creating one.
    const bool peer = std::system("unshare --user true >/dev/null 2>&1") == 0;
    CHECK((userns.state == UsernsState::allowed) == peer);
  }
}

TEST_CASE("host probe: user namespace settings alone say disabled, denied or allowed", "[host_probe]") {
  CHECK(userns_from_settings({}).state == UsernsState::allowed);
  CHECK(userns_from_settings({"15000", "1", "0"}).state == UsernsState::allowed);
  const HostUserns max = userns_from_settings({"0", "0", "1"});
  CHECK(max.state == UsernsState::disabled);
  CHECK(max.detail ==
        "user namespaces are disabled: /proc/sys/user/max_user_namespaces is 0 (an administrator "
        "can raise it with sysctl user.max_user_namespaces)");
  const HostUserns clone = userns_from_settings({"15000", "0", "1"});
  CHECK(clone.state == UsernsState::disabled);
  CHECK(clone.detail ==
        "unprivileged user namespaces are disabled: kernel.unprivileged_userns_clone is 0; an "
        "administrator can set it to 1");
  const HostUserns apparmor = userns_from_settings({"", "", "1"});
  CHECK(apparmor.state == UsernsState::denied);
  CHECK(apparmor.detail == "AppArmor restricts unprivileged user namespaces "
                           "(kernel.apparmor_restrict_unprivileged_userns is 1)");
}
