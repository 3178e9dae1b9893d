#include "envspec/stack/recipes.hpp"
#include "runner/launch/preflight.hpp"
#include "support/system/fs.hpp"
#include "tests/unit/support/test_image_fixture.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;
using Status = Check::Status;

namespace {

/// Points $LOCKSTEP_CACHE somewhere for one scope, restoring the previous value.
class ScopedCache {
public:
  explicit ScopedCache(const fs::path& dir) {
    if (const char* old = std::getenv("LOCKSTEP_CACHE"); old != nullptr) {
      m_old = old;
    }
    ::setenv("LOCKSTEP_CACHE", dir.c_str(), 1);
  }
  ~ScopedCache() {
    if (m_old) {
      ::setenv("LOCKSTEP_CACHE", m_old->c_str(), 1);
    } else {
      ::unsetenv("LOCKSTEP_CACHE");
    }
  }
  ScopedCache(const ScopedCache&) = delete;
  ScopedCache& operator=(const ScopedCache&) = delete;

private:
  std::optional<std::string> m_old;
};

const Digest k_digest = sha256_of("the image");

/// A GPU node with the image's MPI stack: every check passes.
HostProbe good_host() {
  HostProbe h;
  h.hostname = "n1";
  h.mpi = {"/usr/bin/mpirun", "openmpi", "4.1.4", "mpirun (Open MPI) 4.1.4", ""};
  h.pmix = "4.2.2";
  h.ucx = "1.13.1";
  h.driver_version = "535.104.05";
  h.gpu_count = 4;
  h.userns = {UsernsState::allowed, ""};
  h.space = {"/home/u/.cache/lockstep", 100ULL << 30, ""};
  return h;
}

ImageProbe good_image() {
  ImageProbe i;
  i.state = ImageProbe::State::present;
  i.path = "/images/train.sif";
  i.kind = ImageArg::Kind::sif;
  i.digest = k_digest;
  return i;
}

PreflightRequest good_request() {
  PreflightRequest r;
  r.image = "/images/train.sif";
  r.image_digest = k_digest.str();
  r.model = "hybrid";
  r.launcher = "mpirun";
  r.gpus_per_node = 2;
  r.facts.mpi_impl = "openmpi";
  r.facts.mpi.version = "4.1.4";
  r.facts.pmix.version = "4.2.2";
  r.facts.cuda.version = "12.1";
  r.facts.cuda_driver_floor = "530.30.02";
  r.unpack_bytes = 2ULL << 30;
  return r;
}

/// "name status detail" per check, for whole-report comparisons.
std::vector<std::string> lines_of_report(const NodeReport& r) {
  std::vector<std::string> out;
  for (const Check& c : r.checks) {
    out.push_back(fmt::format("{} {} {}", c.name, status_name(c.status), c.detail));
  }
  return out;
}

} // namespace

TEST_CASE("preflight: versions compare as the recipes do (numerically per component, a pre-release first, a "
          "malformed one last)",
          "[preflight]") {
  struct Case {
    std::string a, b;
    int sign;
  };
  const std::vector<Case> cases = {
      {"535.104.05", "530.30.02", 1},
      {"470.57.02", "530.30.02", -1},
      {"530.30.02", "530.30.2", 0},
      {"525.60.13", "525.60.13", 0},
      {"10.0", "9.9", 1},
      {"4.2.2rc2", "4.2.2", -1},
      {"4.2", "4.2.0", 0},
      {"4.2.1", "4.2", 1},
      {"1.10", "1.9", 1},
      {"", "0", 1},
      {"x", "1", 1},
  };
  for (const Case& c : cases) {
    INFO(c.a << " vs " << c.b);
    const int got = envspec::compare_dotted(c.a, c.b);
    CHECK((got > 0 ? 1 : got < 0 ? -1 : 0) == c.sign);
    const int back = envspec::compare_dotted(c.b, c.a);
    CHECK((back > 0 ? 1 : back < 0 ? -1 : 0) == -c.sign);
  }
}

TEST_CASE("preflight: a node with the image's stack passes every check, in the fixed order", "[preflight]") {
  const NodeReport r = evaluate_preflight(good_request(), good_host(), good_image());
  CHECK(r.node == "n1");
  CHECK(r.ok());
  CHECK(lines_of_report(r) == std::vector<std::string>{
                                  "image ok " + k_digest.str(),
                                  "driver ok driver 535.104.05 (the image's CUDA 12.1 needs 530.30.02)",
                                  "gpus ok 4 GPUs, 2 requested per node",
                                  "mpi ok Open MPI 4.1.4 on host and image",
                                  "pmix ok PMIx 4.2.2 on host and image",
                                  "userns ok allowed",
                                  "space ok 100.0 GiB free in /home/u/.cache/lockstep, 2.3 GiB needed",
                              });
  CHECK(r.host == HostFacts{"openmpi", "4.1.4", "4.2.2", "1.13.1", "535.104.05", 4});
}

TEST_CASE("preflight: each problem is one check's result with a detail that says what to do", "[preflight]") {
  struct Case {
    std::string what;
    std::function<void(PreflightRequest&, HostProbe&, ImageProbe&)> change;
    std::string check;
    Status status;
    std::string detail;
  };
  const std::string other = sha256_of("another image").str();
  const std::vector<Case> cases = {
      {"image missing",
       [](auto&, auto&, ImageProbe& i) {
         i = {};
         i.path = "/images/train.sif";
       },
       "image", Status::fail, "missing: /images/train.sif"},
      {"image unreadable",
       [](auto&, auto&, ImageProbe& i) {
         i.state = ImageProbe::State::unreadable;
         i.digest.reset();
         i.error = "/images/train.sif: not a SIF file";
       },
       "image", Status::fail, "can't read the image: /images/train.sif: not a SIF file"},
      {"another digest", [&](PreflightRequest& r, auto&, auto&) { r.image_digest = other; }, "image",
       Status::fail, k_digest.str() + " found, " + other + " expected (copy the same image to every node)"},
      {"no digest expected", [](PreflightRequest& r, auto&, auto&) { r.image_digest.clear(); }, "image",
       Status::ok, k_digest.str()},
      {"a directory, digest expected", [](auto&, auto&, ImageProbe& i) { i.digest.reset(); }, "image",
       Status::fail, "a directory has no digest, " + k_digest.str() + " expected"},
      {"a directory",
       [](PreflightRequest& r, auto&, ImageProbe& i) {
         r.image_digest.clear();
         i.digest.reset();
       },
       "image", Status::ok, "a directory (no digest)"},
      {"old driver", [](auto&, HostProbe& h, auto&) { h.driver_version = "470.57.02"; }, "driver",
       Status::fail,
       "driver 470.57.02 is older than 530.30.02, the floor of the image's CUDA 12.1 (update the driver or "
       "use an "
       "image built for an older CUDA)"},
      {"a driver version that is none", [](auto&, HostProbe& h, auto&) { h.driver_version = "N/A"; },
       "driver", Status::fail,
       "the driver version 'N/A' is not a version; the image's CUDA 12.1 needs 530.30.02 or newer"},
      {"driver at the floor", [](auto&, HostProbe& h, auto&) { h.driver_version = "530.30.02"; }, "driver",
       Status::ok, "driver 530.30.02 (the image's CUDA 12.1 needs 530.30.02)"},
      {"no driver", [](auto&, HostProbe& h, auto&) { h.driver_version.clear(); }, "driver", Status::fail,
       "no NVIDIA driver (the image's CUDA 12.1 needs 530.30.02 or newer)"},
      {"no driver, gpus", [](auto&, HostProbe& h, auto&) { h.driver_version.clear(); }, "gpus", Status::fail,
       "no NVIDIA driver, 2 GPUs requested per node"},
      {"unreadable GPU list", [](auto&, HostProbe& h, auto&) { h.gpu_error = "can't list the GPUs"; }, "gpus",
       Status::fail, "can't list the GPUs"},
      {"no floor recorded", [](PreflightRequest& r, auto&, auto&) { r.facts.cuda_driver_floor.clear(); },
       "driver", Status::skipped, "the image records no CUDA driver floor"},
      {"too few GPUs", [](auto&, HostProbe& h, auto&) { h.gpu_count = 1; }, "gpus", Status::fail,
       "1 GPU on this node, 2 requested per node"},
      {"no GPUs requested", [](PreflightRequest& r, auto&, auto&) { r.gpus_per_node = 0; }, "gpus",
       Status::skipped, "no GPUs requested"},
      {"no GPUs requested, driver", [](PreflightRequest& r, auto&, auto&) { r.gpus_per_node = 0; }, "driver",
       Status::skipped, "no GPUs requested"},
      {"newer host Open MPI", [](auto&, HostProbe& h, auto&) { h.mpi.version = "5.0.3"; }, "mpi",
       Status::fail,
       "host Open MPI 5.0.3, image Open MPI 4.1.4: the hybrid model needs the same major.minor (rebuild the "
       "image "
       "with the host's MPI or use --mpi-model container)"},
      {"another minor", [](auto&, HostProbe& h, auto&) { h.mpi.version = "4.0.7"; }, "mpi", Status::fail,
       "host Open MPI 4.0.7, image Open MPI 4.1.4: the hybrid model needs the same major.minor (rebuild the "
       "image "
       "with the host's MPI or use --mpi-model container)"},
      {"another patch", [](auto&, HostProbe& h, auto&) { h.mpi.version = "4.1.6"; }, "mpi", Status::warn,
       "host Open MPI 4.1.6, image Open MPI 4.1.4: the patch releases differ (the same major.minor should "
       "work; "
       "the same version is safest)"},
      {"MPICH on the host",
       [](auto&, HostProbe& h, auto&) {
         h.mpi.impl = "mpich";
         h.mpi.version = "4.0.2";
       },
       "mpi", Status::fail,
       "host MPICH 4.0.2, image Open MPI 4.1.4: the hybrid model needs the host's MPI in the image (rebuild "
       "the "
       "image with the host's MPI or use --mpi-model container)"},
      {"Intel MPI on the host",
       [](auto&, HostProbe& h, auto&) {
         h.mpi.impl = "unknown";
         h.mpi.version.clear();
         h.mpi.banner = "Intel(R) MPI Library for Linux* OS, Version 2021.10";
       },
       "mpi", Status::fail,
       "host 'Intel(R) MPI Library for Linux* OS, Version 2021.10', image Open MPI 4.1.4: the hybrid model "
       "needs "
       "the host's MPI in the image (rebuild the image with the host's MPI or use --mpi-model container)"},
      {"no mpirun", [](auto&, HostProbe& h, auto&) { h.mpi = {}; }, "mpi", Status::fail,
       "no mpirun on PATH: the hybrid model starts the ranks with the host's Open MPI 4.1.4 (install it, or "
       "use "
       "--launcher slurm or --mpi-model container)"},
      {"no mpirun, local launcher",
       [](PreflightRequest& r, HostProbe& h, auto&) {
         r.launcher = "local";
         h.mpi = {};
       },
       "mpi", Status::skipped, "no mpirun on PATH (the local launcher doesn't need one)"},
      {"mpirun broken",
       [](auto&, HostProbe& h, auto&) {
         h.mpi = {"/opt/mpi/bin/mpirun", "", "", "",
                  "`/opt/mpi/bin/mpirun --version` did not finish within 2 s"};
       },
       "mpi", Status::fail,
       "can't tell which MPI /opt/mpi/bin/mpirun is: `/opt/mpi/bin/mpirun --version` did not finish within 2 "
       "s"},
      {"under Slurm",
       [](PreflightRequest& r, HostProbe& h, auto&) {
         r.launcher = "slurm";
         h.mpi = {};
       },
       "mpi", Status::skipped, "srun starts the ranks: the host's mpirun is not used"},
      {"container model", [](PreflightRequest& r, auto&, auto&) { r.model = "container"; }, "mpi",
       Status::skipped, "the container model uses the image's own mpirun"},
      {"no MPI in the image", [](PreflightRequest& r, auto&, auto&) { r.facts.mpi_impl.clear(); }, "mpi",
       Status::skipped, "the image records no MPI"},
      {"PMIx major differs", [](auto&, HostProbe& h, auto&) { h.pmix = "3.2.3"; }, "pmix", Status::fail,
       "host PMIx 3.2.3, image PMIx 4.2.2: the major versions differ (build the image with PMIx 3.x or use "
       "--mpi-model container)"},
      {"PMIx minor differs", [](auto&, HostProbe& h, auto&) { h.pmix = "4.1.2"; }, "pmix", Status::warn,
       "host PMIx 4.1.2, image PMIx 4.2.2: the minor versions differ (the same major should work; the same "
       "version is safest)"},
      {"PMIx patch differs", [](auto&, HostProbe& h, auto&) { h.pmix = "4.2.2rc2"; }, "pmix", Status::ok,
       "host PMIx 4.2.2rc2, image PMIx 4.2.2"},
      {"no host PMIx under Slurm",
       [](PreflightRequest& r, HostProbe& h, auto&) {
         r.launcher = "slurm";
         h.pmix.clear();
       },
       "pmix", Status::warn,
       "no libpmix.so.2 on this host: srun --mpi=pmix needs Slurm's PMIx plugin, built with PMIx 4.x like "
       "the "
       "image's 4.2.2"},
      {"no host PMIx with mpirun", [](auto&, HostProbe& h, auto&) { h.pmix.clear(); }, "pmix",
       Status::skipped, "no libpmix.so.2 on this host (a PMIx built into mpirun is not checked)"},
      {"no PMIx in the image", [](PreflightRequest& r, auto&, auto&) { r.facts.pmix.version.clear(); },
       "pmix", Status::skipped, "the image records no PMIx"},
      {"root",
       [](auto&, HostProbe& h, auto&) {
         h.userns = {UsernsState::not_needed, ""};
       },
       "userns", Status::ok, "not needed (root)"},
      {"user namespaces disabled",
       [](auto&, HostProbe& h, auto&) {
         h.userns = {UsernsState::disabled,
                     "user namespaces are disabled: /proc/sys/user/max_user_namespaces is 0"};
       },
       "userns", Status::fail, "user namespaces are disabled: /proc/sys/user/max_user_namespaces is 0"},
      {"too little space", [](auto&, HostProbe& h, auto&) { h.space.free_bytes = 1ULL << 30; }, "space",
       Status::fail,
       "1.0 GiB free in /home/u/.cache/lockstep, 2.3 GiB needed (free some space or point LOCKSTEP_CACHE at "
       "a "
       "larger disk)"},
      {"the margin counts",
       [](auto&, HostProbe& h, auto&) { h.space.free_bytes = (2ULL << 30) + (100ULL << 20); }, "space",
       Status::fail,
       "2.1 GiB free in /home/u/.cache/lockstep, 2.3 GiB needed (free some space or point LOCKSTEP_CACHE at "
       "a "
       "larger disk)"},
      {"space unknown",
       [](auto&, HostProbe& h, auto&) { h.space.error = "can't measure the free space of /x"; }, "space",
       Status::fail, "can't measure the free space of /x"},
      {"nothing to unpack", [](PreflightRequest& r, auto&, auto&) { r.unpack_bytes = 0; }, "space",
       Status::ok, "nothing to unpack"},
      {"control characters from the host",
       [](auto&, HostProbe& h, auto&) {
         h.mpi.impl = "unknown";
         h.mpi.banner = "\x1b[2Jx";
       },
       "mpi", Status::fail,
       "host '?[2Jx', image Open MPI 4.1.4: the hybrid model needs the host's MPI in the image (rebuild the "
       "image with the host's MPI or use --mpi-model container)"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    PreflightRequest req = good_request();
    HostProbe host = good_host();
    ImageProbe image = good_image();
    c.change(req, host, image);
    const NodeReport r = evaluate_preflight(req, host, image);
    REQUIRE(r.checks.size() == 7);
    const Check* check = r.find(c.check);
    REQUIRE(check != nullptr);
    CHECK(status_name(check->status) == status_name(c.status));
    CHECK(check->detail == c.detail);
    CHECK(r.ok() == (c.status != Status::fail));
  }
}

TEST_CASE("preflight: a CPU job in the container model checks only image, user namespaces and space",
          "[preflight]") {
  PreflightRequest req = good_request();
  req.model = "container";
  req.gpus_per_node = 0;
  req.unpack_bytes = 0;
  HostProbe host = good_host();
  host.hostname.clear();
  const NodeReport r = evaluate_preflight(req, host, good_image());
  CHECK(r.node == "(unknown)");
  CHECK(lines_of_report(r) == std::vector<std::string>{
                                  "image ok " + k_digest.str(),
                                  "driver skipped no GPUs requested",
                                  "gpus skipped no GPUs requested",
                                  "mpi skipped the container model uses the image's own mpirun",
                                  "pmix skipped the container model uses the image's own PMIx",
                                  "userns ok allowed",
                                  "space ok nothing to unpack",
                              });
}

TEST_CASE("preflight: a report is one JSON line with fixed keys, and reads back the same", "[preflight]") {
  HostProbe host = good_host();
  host.mpi.version = "4.1.6";
  const NodeReport r = evaluate_preflight(good_request(), host, good_image());
  const std::string line = to_json(r).dump();
  CHECK(
      line ==
      fmt::format(
          R"j({{"preflight":1,"node":"n1","ok":true,"checks":[{{"name":"image","status":"ok","detail":"{}"}},)j"
          R"j({{"name":"driver","status":"ok","detail":)j"
          R"j("driver 535.104.05 (the image's CUDA 12.1 needs 530.30.02)"}},)j"
          R"j({{"name":"gpus","status":"ok","detail":"4 GPUs, 2 requested per node"}},)j"
          R"j({{"name":"mpi","status":"warn","detail":"host Open MPI 4.1.6, image Open MPI 4.1.4: the patch )j"
          R"j(releases differ (the same major.minor should work; the same version is safest)"}},)j"
          R"j({{"name":"pmix","status":"ok","detail":"PMIx 4.2.2 on host and image"}},)j"
          R"j({{"name":"userns","status":"ok","detail":"allowed"}},)j"
          R"j({{"name":"space","status":"ok","detail":)j"
          R"j("100.0 GiB free in /home/u/.cache/lockstep, 2.3 GiB needed"}}],)j"
          R"j("host":{{"mpi_impl":"openmpi","mpi_version":"4.1.6","pmix":"4.2.2","ucx":"1.13.1",)j"
          R"j("driver":"535.104.05","gpus":4}}}})j",
          k_digest.str()));
  Result<NodeReport> back = node_report_from_json(line + "\n");
  REQUIRE_OK(back);
  CHECK(*back == r);

  // A failing report (ok false) and a report with another check (the lead's "reach") read back too.
  HostProbe bad = good_host();
  bad.mpi = {};
  NodeReport failing = evaluate_preflight(good_request(), bad, good_image());
  failing.checks.push_back({"reach", Status::fail, "ssh: connect to host n1 port 22: Connection refused"});
  Result<NodeReport> failing_back = node_report_from_json(to_json(failing).dump());
  REQUIRE_OK(failing_back);
  CHECK(*failing_back == failing);
  CHECK_FALSE(failing_back->ok());
}

TEST_CASE("preflight: a hostile report line is refused, saying why", "[preflight]") {
  const NodeReport r = evaluate_preflight(good_request(), good_host(), good_image());
  const nlohmann::json good = nlohmann::json::parse(to_json(r).dump());
  REQUIRE_OK(node_report_from_json(good.dump()));
  auto edited = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    return j.dump();
  };
  struct Case {
    std::string line;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", "not valid JSON"},
      {"{\"preflight\":1", "not valid JSON"},
      {"[]", "report is not an object"},
      {std::string(70000, ' '), "longer than 65536 bytes"},
      {std::string(5, '[') + std::string(5, ']'), "nested too deeply"},
      {edited([](auto& j) { j["checks"][0]["detail"] = nlohmann::json::parse("[[[]]]"); }),
       "nested too deeply"},
      {edited([](auto& j) { j.erase("host"); }), "report has no 'host'"},
      {edited([](auto& j) { j["extra"] = 1; }), "unknown key 'extra' in report"},
      {edited([](auto& j) { j["preflight"] = 2; }),
       "'preflight' is not 1 (a lockstep of another version on that node?)"},
      {edited([](auto& j) { j["ok"] = false; }), "'ok' does not agree with the checks"},
      {edited([](auto& j) { j["ok"] = "yes"; }), "'ok' does not agree with the checks"},
      {edited([](auto& j) { j["node"] = ""; }), "report.node is empty"},
      {edited([](auto& j) { j["node"] = "n1 n2"; }), "node name 'n1 n2' contains spaces"},
      {edited([](auto& j) { j["node"] = std::string(300, 'n'); }), "report.node is longer than 255 bytes"},
      {edited([](auto& j) { j["checks"] = nlohmann::json::object(); }),
       "'checks' is not an array of at most 32 checks"},
      {edited([](auto& j) {
         for (int i = 0; i < 30; ++i) {
           j["checks"].push_back({{"name", fmt::format("c{}", i)}, {"status", "ok"}, {"detail", ""}});
         }
       }),
       "'checks' is not an array of at most 32 checks"},
      {edited([](auto& j) { j["checks"][1]["status"] = "passed"; }), "unknown check status 'passed'"},
      {edited([](auto& j) { j["checks"][1]["name"] = "image"; }), "check 'image' appears twice"},
      {edited([](auto& j) { j["checks"][1]["name"] = "Driver!"; }),
       "checks[1].name 'Driver!' is not a check name"},
      {edited([](auto& j) { j["checks"][1].erase("detail"); }), "checks[1] has no 'detail'"},
      {edited([](auto& j) { j["checks"][1]["detail"] = 5; }), "checks[1].detail is not a string"},
      {edited([](auto& j) { j["checks"][1]["detail"] = "\x1b[31mred"; }),
       "checks[1].detail contains control characters"},
      {edited([](auto& j) {
         j["checks"][1]["detail"] = "\xc2\x9b"
                                    "31m";
       }),
       "checks[1].detail contains control characters"},
      {edited([](auto& j) { j["checks"][1]["detail"] = std::string(2000, 'x'); }),
       "checks[1].detail is longer than 1024 bytes"},
      {edited([](auto& j) { j["host"]["mpi_impl"] = "lam"; }),
       "host.mpi_impl 'lam' is not openmpi, mpich or unknown"},
      {edited([](auto& j) { j["host"]["gpus"] = -1; }), "host.gpus is not a count from 0 to 1048576"},
      {edited([](auto& j) { j["host"]["gpus"] = "4"; }), "host.gpus is not a count from 0 to 1048576"},
      {edited([](auto& j) { j["host"]["cuda"] = "12.1"; }), "unknown key 'cuda' in host"},
  };
  for (const Case& c : cases) {
    INFO(c.line.substr(0, 300));
    Result<NodeReport> got = node_report_from_json(c.line);
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code == ExitCode::invalid_input);
    CHECK(got.error().message == "malformed preflight report: " + c.message);
  }
}

TEST_CASE("preflight: the table has a row per node in natural order and a line per problem", "[preflight]") {
  HostProbe h10 = good_host();
  h10.hostname = "n10";
  HostProbe h2 = good_host();
  h2.hostname = "n2";
  h2.mpi.version = "5.0.3";
  h2.pmix = "4.1.2";
  PreflightRequest req = good_request();
  req.gpus_per_node = 0;
  NodeReport unreachable;
  unreachable.node = "n1";
  unreachable.checks.push_back(
      {"reach", Status::fail, "ssh: connect to host n1 port 22: Connection refused"});
  const std::vector<NodeReport> reports = {evaluate_preflight(req, h10, good_image()),
                                           evaluate_preflight(req, h2, good_image()), unreachable};
  CHECK(render_preflight_table(reports) == "NODE  image  driver  gpus  mpi   pmix  userns  space  reach\n"
                                           "n1    -      -       -     -     -     -       -      FAIL\n"
                                           "n2    ok     -       -     FAIL  WARN  ok      ok     -\n"
                                           "n10   ok     -       -     ok    ok    ok      ok     -\n"
                                           "\n"
                                           "n1  reach: ssh: connect to host n1 port 22: Connection refused\n"
                                           "n2  mpi: host Open MPI 5.0.3, image Open MPI 4.1.4: the hybrid "
                                           "model needs the same major.minor (rebuild "
                                           "the image with the host's MPI or use --mpi-model container)\n"
                                           "n2  pmix: host PMIx 4.1.2, image PMIx 4.2.2: the minor versions "
                                           "differ (the same major should work; the "
                                           "same version is safest)\n");
  // The order of the input doesn't matter.
  CHECK(render_preflight_table({reports[2], reports[0], reports[1]}) == render_preflight_table(reports));
  // A clean run is the table alone.
  CHECK(render_preflight_table({reports[0]}) == "NODE  image  driver  gpus  mpi  pmix  userns  space\n"
                                                "n10   ok     -       -     ok   ok    ok      ok\n");
  CHECK(render_preflight_table({}) == "NODE\n");
}

TEST_CASE("preflight: natural node order handles numbers, zeros and prefixes", "[preflight]") {
  std::vector<NodeReport> reports;
  for (const char* name : {"gpu10", "gpu2", "gpu02", "cpu1", "gpu1a", "gpu", "gpu1"}) {
    NodeReport r;
    r.node = name;
    reports.push_back(r);
  }
  CHECK(render_preflight_table(reports) == "NODE\ncpu1\ngpu\ngpu1\ngpu1a\ngpu02\ngpu2\ngpu10\n");
}

TEST_CASE("preflight: the image probe tells a missing image from a broken one", "[preflight]") {
  test::TempDirFixture tmp;
  ScopedCache cache(tmp.dir() / "cache");

  ImageProbe missing = probe_image((tmp.dir() / "nothing.sif").string());
  CHECK(missing.state == ImageProbe::State::missing);
  CHECK(missing.path == (tmp.dir() / "nothing.sif").string());
  ImageProbe missing_oci = probe_image("oci:" + (tmp.dir() / "no-layout").string() + ":v1");
  CHECK(missing_oci.state == ImageProbe::State::missing);
  CHECK(missing_oci.path == (tmp.dir() / "no-layout").string());

  fs::create_directories(tmp.dir() / "rootfs" / "bin");
  ImageProbe dir = probe_image((tmp.dir() / "rootfs").string());
  CHECK(dir.state == ImageProbe::State::present);
  CHECK(dir.kind == ImageArg::Kind::directory);
  CHECK_FALSE(dir.digest.has_value());

  test::LayoutWriter layout(tmp.dir() / "layout");
  const oci::Descriptor manifest = test::LayoutWriter::tagged(layout.image({"layer"}), "v1");
  layout.write_index({manifest});
  ImageProbe oci_image = probe_image("oci:" + layout.dir().string() + ":v1");
  CHECK(oci_image.state == ImageProbe::State::present);
  REQUIRE(oci_image.digest.has_value());
  CHECK(*oci_image.digest == manifest.digest);

  ImageProbe no_tag = probe_image("oci:" + layout.dir().string() + ":v2");
  CHECK(no_tag.state == ImageProbe::State::unreadable);
  CHECK_FALSE(no_tag.error.empty());

  tmp.write("layout/index.json", "{not json");
  ImageProbe broken = probe_image("oci:" + layout.dir().string());
  CHECK(broken.state == ImageProbe::State::unreadable);
  CHECK(broken.error.find("not valid JSON") != std::string::npos);

  tmp.write("odd-file", "neither a SIF nor a directory");
  ImageProbe odd = probe_image((tmp.dir() / "odd-file").string());
  CHECK(odd.state == ImageProbe::State::unreadable);
  CHECK(odd.error.find("is not an image") != std::string::npos);
}

TEST_CASE("preflight: a SIF's digest is the file's sha256, remembered by its identity", "[preflight]") {
  test::TempDirFixture tmp;
  ScopedCache cache(tmp.dir() / "cache");
  // A fresh file is hashed (and, changed within the last 2 s, not remembered: its times may not
  // have ticked yet).
  const fs::path fresh = tmp.write("fresh.sif", "SIF bytes");
  Result<std::optional<Digest>> d = image_digest(ImageArg{ImageArg::Kind::sif, {}, fresh, {}});
  REQUIRE_OK(d);
  CHECK(d->value() == sha256_of("SIF bytes"));

  // Remembering needs a file unchanged for 2 s: a system file stands in for an old SIF.
  std::optional<fs::path> old;
  for (const char* candidate : {"/usr/bin/env", "/bin/sh", "/usr/bin/true"}) {
    std::error_code ec;
    const fs::path p = fs::canonical(candidate, ec);
    struct stat st {};
    if (!ec && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        std::chrono::system_clock::now().time_since_epoch() - std::chrono::seconds(st.st_ctim.tv_sec) >
            std::chrono::seconds(10)) {
      old = p;
      break;
    }
  }
  REQUIRE(old.has_value());
  const ImageArg arg{ImageArg::Kind::sif, {}, *old, {}};
  Result<Digest> truth = sha256_of_file(*old);
  REQUIRE_OK(truth);
  REQUIRE_OK(image_digest(arg));
  CHECK(image_digest(arg)->value() == *truth);

  const fs::path records = tmp.dir() / "cache" / "records" / "sif-digests";
  REQUIRE(test::count_files(records) == 1);
  const fs::path record = fs::directory_iterator(records)->path();
  CHECK(test::slurp(record) == truth->hex());

  // The second time the record answers: a planted digest comes back without hashing.
  const std::string planted(64, '0');
  REQUIRE_OK(write_file_atomic(record, planted));
  CHECK(image_digest(arg)->value().str() == "sha256:" + planted);

  // A corrupt record costs a rehash, never a wrong digest.
  REQUIRE_OK(write_file_atomic(record, std::string(64, 'z')));
  CHECK(image_digest(arg)->value() == *truth);
  REQUIRE_OK(write_file_atomic(record, "0123"));
  CHECK(image_digest(arg)->value() == *truth);
  CHECK(test::slurp(record) == truth->hex());
}

TEST_CASE("preflight: an image's facts come from its dev.lockstep labels", "[preflight]") {
  test::TempDirFixture tmp;
  auto layout_with = [&](const std::string& name, const nlohmann::json& labels) {
    test::LayoutWriter layout(tmp.dir() / name);
    test::ImageOptions opts;
    opts.edit_config = [labels](nlohmann::json& c) { c["config"]["Labels"] = labels; };
    layout.write_index({layout.image({"layer"}, opts)});
    return ImageArg{
        ImageArg::Kind::oci, oci::ImageRef::parse("oci:" + layout.dir().string()).value(), {}, {}};
  };
  Result<envspec::ImageFacts> facts =
      image_facts(layout_with("mpi", {{"dev.lockstep.mpi.impl", "openmpi"},
                                      {"dev.lockstep.mpi.version", "4.1.4"},
                                      {"dev.lockstep.pmix.version", "4.2.2"},
                                      {"dev.lockstep.cuda.version", "12.1"},
                                      {"dev.lockstep.cuda.driver-floor", "530.30.02"},
                                      {"org.example.count", "3"}}));
  REQUIRE_OK(facts);
  CHECK(facts->mpi_impl == "openmpi");
  CHECK(facts->mpi.version == "4.1.4");
  CHECK(facts->pmix.version == "4.2.2");
  CHECK(facts->cuda.version == "12.1");
  CHECK(facts->cuda_driver_floor == "530.30.02");

  Result<envspec::ImageFacts> none = image_facts(layout_with("plain", nullptr));
  REQUIRE_OK(none);
  CHECK(none->empty());

  Result<envspec::ImageFacts> bad = image_facts(layout_with("bad", {{"dev.lockstep.mpi.impl", "lam"}}));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ExitCode::invalid_input);
  CHECK(bad.error().message.find("dev.lockstep.mpi.impl") != std::string::npos);

  // Labels are strings (the OCI image spec), lockstep's own or not.
  for (const char* key : {"dev.lockstep.mpi.version", "org.example.count"}) {
    Result<envspec::ImageFacts> not_string = image_facts(layout_with(std::string("num-") + key, {{key, 4}}));
    REQUIRE_FALSE(not_string.ok());
    CHECK(not_string.error().code == ExitCode::invalid_input);
    CHECK(not_string.error().message.find(fmt::format(
              "the image config's label '{}' is a number, not a string", key)) != std::string::npos);
  }

  fs::create_directories(tmp.dir() / "rootfs");
  Result<envspec::ImageFacts> dir =
      image_facts(ImageArg{ImageArg::Kind::directory, {}, tmp.dir() / "rootfs", {}});
  REQUIRE_OK(dir);
  CHECK(dir->empty());
}

TEST_CASE("preflight: a malformed request is refused before probing", "[preflight]") {
  PreflightRequest req = good_request();
  req.model = "bind";
  Result<NodeReport> r = preflight_node(req);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "unknown MPI model 'bind': use hybrid or container");
  req = good_request();
  req.launcher = "pbs";
  r = preflight_node(req);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "unknown launcher 'pbs': use local, mpirun or slurm");
  req = good_request();
  req.image_digest = "sha256:abc";
  r = preflight_node(req);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
}

TEST_CASE("preflight: every truncation and single-byte edit of a report line is read or refused",
          "[preflight]") {
  HostProbe host = good_host();
  host.mpi.version = "5.0.3";
  const std::string line = to_json(evaluate_preflight(good_request(), host, good_image())).dump();
  std::size_t accepted = 0;
  auto try_line = [&](const std::string& edited) {
    Result<NodeReport> r = node_report_from_json(edited);
    if (r) {
      ++accepted;
      // Whatever is accepted writes back to a line that reads back the same.
      Result<NodeReport> again = node_report_from_json(to_json(*r).dump());
      REQUIRE_OK(again);
      CHECK(*again == *r);
    } else {
      CHECK(r.error().code == ExitCode::invalid_input);
    }
  };
  for (std::size_t i = 0; i < line.size(); ++i) {
    try_line(line.substr(0, i));
    try_line(line.substr(0, i) + line.substr(i + 1));
    for (char c : {'\0', '"', '{', ']', '\x1b', '9'}) {
      std::string edited = line;
      edited[i] = c;
      try_line(edited);
    }
  }
  CHECK(accepted > 0); // edits inside details and versions keep a valid report
}
