#include "runner/runtime/gpu.hpp"
#include "tests/unit/runner/fixtures/gpu/fake_driver.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdlib>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_uuid0 = "GPU-6a0a0d8e-2bf6-8a43-4b7f-54d1f0c8a7f2";
constexpr const char* k_uuid1 = "GPU-1c3e5f7a-9b0d-4e2f-8a6c-3d5e7f9a1b2c";

/// A fake driver tree with two GPUs in a fresh temporary directory.
struct FakeHost {
  test::TempDirFixture tmp;
  GpuHost host;
  explicit FakeHost(const test::FakeDriverOptions& options = {}) {
    host.root = tmp.dir();
    test::make_fake_driver(tmp.dir(), options);
  }
  [[nodiscard]] std::string at(const std::string& rel) const { return (tmp.dir() / rel).string(); }
};

/// "SOURCE -> TARGET ro|rw", one per bind, with the fake root shown as ROOT.
std::vector<std::string> describe_binds(const GpuPlan& plan, const fs::path& root) {
  std::vector<std::string> out;
  for (const GpuBind& b : plan.binds) {
    std::string source = b.source.string();
    if (source.starts_with(root.string())) {
      source = "ROOT" + source.substr(root.string().size());
    }
    out.push_back(fmt::format("{} -> {} {}", source, b.target, b.read_only ? "ro" : "rw"));
  }
  return out;
}

/// The device nodes with the fake root shown as ROOT.
std::vector<std::string> relative_nodes(const GpuPlan& plan, const fs::path& root) {
  std::vector<std::string> out;
  for (const std::string& n : plan.device_nodes) {
    out.push_back(n.starts_with(root.string()) ? "ROOT" + n.substr(root.string().size()) : n);
  }
  return out;
}

const std::vector<std::string> k_all_binds = {
    "ROOT/usr/lib/x86_64-linux-gnu/libGLX.so.0.0.0 -> /.singularity.d/libs/libGLX.so.0 ro",
    "ROOT/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05 -> /.singularity.d/libs/libcuda.so ro",
    "ROOT/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05 -> /.singularity.d/libs/libcuda.so.1 ro",
    "ROOT/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05 -> /.singularity.d/libs/libnvidia-ml.so.1 ro",
    "ROOT/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.535.104.05 -> "
    "/.singularity.d/libs/libnvidia-ptxjitcompiler.so.1 ro",
    "ROOT/usr/bin/nvidia-smi -> /usr/bin/nvidia-smi ro",
    "ROOT/usr/sbin/nvidia-cuda-mps-control -> /usr/bin/nvidia-cuda-mps-control ro",
    "ROOT/usr/share/glvnd/egl_vendor.d/10_nvidia.json -> /usr/share/glvnd/egl_vendor.d/10_nvidia.json ro",
    "ROOT/etc/vulkan/icd.d/nvidia_icd.json -> /etc/vulkan/icd.d/nvidia_icd.json ro",
    "ROOT/run/nvidia-persistenced/socket -> /var/run/nvidia-persistenced/socket rw",
};

const std::vector<std::string> k_control_nodes = {"ROOT/dev/nvidiactl", "ROOT/dev/nvidia-uvm",
                                                  "ROOT/dev/nvidia-uvm-tools"};

using Env = std::vector<std::pair<std::string, std::string>>;

Env env_for(const std::string& visible) {
  return {{"NVIDIA_VISIBLE_DEVICES", visible}, {"LD_LIBRARY_PATH", "/.singularity.d/libs"}};
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Error plan_error(std::string_view visible, const GpuHost& host) {
  auto r = plan_gpu_passthrough(visible, host);
  REQUIRE_FALSE(r.ok());
  return r.error();
}

/// Sets an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char* name, const std::string& value) : m_name(name) { ::setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(m_name); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
  const char* m_name;
};

} // namespace

TEST_CASE("gpu: --gpus all binds the driver's libraries, programs, files, socket and every device node",
          "[gpu]") {
  FakeHost fake;
  for (std::string_view all : {"all", "", "ALL", " all "}) {
    INFO("--gpus '" << all << "'");
    auto plan = plan_gpu_passthrough(all, fake.host);
    REQUIRE(plan.ok());
    CHECK(plan->driver_version == "535.104.05");
    // Not bound: the i386 libcuda (flags ELF), the 470 driver's libnvidia-ml, libzfake, the
    // non-executable nvidia-debugdump.
    CHECK(describe_binds(*plan, fake.tmp.dir()) == k_all_binds);
    CHECK(relative_nodes(*plan, fake.tmp.dir()) ==
          with(k_control_nodes, {"ROOT/dev/nvidia0", "ROOT/dev/nvidia1"}));
    CHECK(plan->all_devices);
    CHECK(plan->hidden_device_nodes.empty());
    CHECK(plan->env == env_for("all"));
  }
}

TEST_CASE("gpu: selecting one GPU by index, UUID or PCI address exposes only its node", "[gpu]") {
  FakeHost fake;
  struct Case {
    std::string selection;
    std::string node;
    std::string hidden;
    std::string visible;
  };
  for (const Case& c : std::vector<Case>{
           {"0", "ROOT/dev/nvidia0", "/dev/nvidia1", k_uuid0},
           {"1", "ROOT/dev/nvidia1", "/dev/nvidia0", k_uuid1},
           {k_uuid1, "ROOT/dev/nvidia1", "/dev/nvidia0", k_uuid1},
           {"gpu-6A0A0D8E-2BF6-8A43-4B7F-54D1F0C8A7F2", "ROOT/dev/nvidia0", "/dev/nvidia1", k_uuid0},
           {"0000:af:00.0", "ROOT/dev/nvidia1", "/dev/nvidia0", k_uuid1},
           {"3b:00.0", "ROOT/dev/nvidia0", "/dev/nvidia1", k_uuid0},
       }) {
    INFO("--gpus " << c.selection);
    auto plan = plan_gpu_passthrough(c.selection, fake.host);
    REQUIRE(plan.ok());
    CHECK(describe_binds(*plan, fake.tmp.dir()) == k_all_binds);
    CHECK(relative_nodes(*plan, fake.tmp.dir()) == with(k_control_nodes, {c.node}));
    CHECK_FALSE(plan->all_devices);
    CHECK(plan->hidden_device_nodes == std::vector<std::string>{c.hidden});
    CHECK(plan->env == env_for(c.visible));
  }
}

TEST_CASE("gpu: a list keeps its order and drops repeats; both GPUs listed is all of them", "[gpu]") {
  FakeHost fake;
  auto plan = plan_gpu_passthrough(fmt::format("1, 0,{}", k_uuid1), fake.host);
  REQUIRE(plan.ok());
  CHECK(relative_nodes(*plan, fake.tmp.dir()) ==
        with(k_control_nodes, {"ROOT/dev/nvidia1", "ROOT/dev/nvidia0"}));
  CHECK(plan->all_devices);
  CHECK(plan->hidden_device_nodes.empty());
  CHECK(plan->env == env_for(fmt::format("{},{}", k_uuid1, k_uuid0)));
}

TEST_CASE("gpu: none binds the driver without any GPU; void disables passthrough", "[gpu]") {
  FakeHost fake;
  auto none = plan_gpu_passthrough("none", fake.host);
  REQUIRE(none.ok());
  CHECK(describe_binds(*none, fake.tmp.dir()) == k_all_binds);
  CHECK(relative_nodes(*none, fake.tmp.dir()) == k_control_nodes);
  CHECK_FALSE(none->all_devices);
  CHECK(none->hidden_device_nodes == std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia1"});
  CHECK(none->env == env_for("none"));

  test::TempDirFixture empty;
  for (const GpuHost& host : {fake.host, GpuHost{empty.dir()}}) {
    auto plan = plan_gpu_passthrough("void", host);
    REQUIRE(plan.ok());
    CHECK(plan->binds.empty());
    CHECK(plan->device_nodes.empty());
    CHECK(plan->all_devices);
    CHECK(plan->env.empty());
    CHECK(plan->driver_version.empty());
  }
}

TEST_CASE("gpu: a GPU that does not exist is invalid input naming the GPUs there are", "[gpu]") {
  FakeHost fake;
  const std::string gpus =
      fmt::format("this host has 2 GPUs: 0 ({} at 0000:3b:00.0), 1 ({} at 0000:af:00.0)", k_uuid0, k_uuid1);
  struct Case {
    std::string selection;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"2", "--gpus 2: there is no GPU with index 2; " + gpus},
           {"0,7", "--gpus 0,7: there is no GPU with index 7; " + gpus},
           {"99999999999999999999", "--gpus 99999999999999999999: there is no GPU with index "
                                    "99999999999999999999; " +
                                        gpus},
           {"GPU-00000000-0000-0000-0000-000000000000",
            "--gpus GPU-00000000-0000-0000-0000-000000000000: there is no GPU with UUID "
            "GPU-00000000-0000-0000-0000-000000000000; " +
                gpus},
           {"0000:01:00.0", "--gpus 0000:01:00.0: there is no GPU at PCI address 0000:01:00.0; " + gpus},
           {"0,,1", "--gpus 0,,1: empty entry in the list; name GPUs by index (0,1), UUID (GPU-...) or PCI "
                    "address, or use all or none"},
           {"all,0", "--gpus all,0: 'all' can't be combined with other entries"},
           {"0,none", "--gpus 0,none: 'none' can't be combined with other entries"},
           {"MIG-4f2c", "--gpus MIG-4f2c: MIG devices ('MIG-4f2c') are not supported; select the whole GPU"},
           {"0:1", "--gpus 0:1: MIG devices ('0:1') are not supported; select the whole GPU"},
           {"first",
            "--gpus first: can't read 'first': name GPUs by index (0,1), UUID (GPU-...) or PCI address "
            "(0000:3b:00.0), or use all or none"},
       }) {
    INFO("--gpus " << c.selection);
    const Error e = plan_error(c.selection, fake.host);
    CHECK(e.code == ExitCode::invalid_input);
    CHECK(e.message == c.message);
  }
}

TEST_CASE("gpu: a host without the NVIDIA driver fails with what was looked for and what to do", "[gpu]") {
  test::TempDirFixture empty;
  const std::string root = empty.dir().string();
  for (std::string_view selection : {"all", "0", "none", ""}) {
    const Error e = plan_error(selection, GpuHost{empty.dir()});
    CHECK(e.code == ExitCode::external);
    CHECK(e.message ==
          fmt::format("--gpus: no NVIDIA driver on this host: {0}/proc/driver/nvidia/version does "
                      "not exist (lockstep looks for {0}/proc/driver/nvidia/version and "
                      "{0}/dev/nvidiactl); drop --gpus, or run on a node with the NVIDIA driver "
                      "loaded",
                      root));
  }
  // The version file alone is not enough: the control node is missing.
  empty.write("proc/driver/nvidia/version",
              "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  x\n");
  const Error e = plan_error("all", GpuHost{empty.dir()});
  CHECK(e.code == ExitCode::external);
  CHECK(e.message == fmt::format("--gpus: no NVIDIA driver on this host: {0}/dev/nvidiactl does not exist "
                                 "(lockstep looks for {0}/proc/driver/nvidia/version and {0}/dev/nvidiactl); "
                                 "drop --gpus, or run on a node with the NVIDIA driver loaded",
                                 root));
}

TEST_CASE("gpu: a driver without GPUs or without a GPU's device node fails clearly", "[gpu]") {
  {
    test::FakeDriverOptions options;
    options.gpus.clear();
    FakeHost fake(options);
    const Error e = plan_error("all", fake.host);
    CHECK(e.code == ExitCode::external);
    CHECK(e.message ==
          fmt::format("--gpus: the NVIDIA driver 535.104.05 is loaded but reports no GPU (nothing "
                      "in {}); drop --gpus, or run on a node with a GPU",
                      fake.at("proc/driver/nvidia/gpus")));
    auto none = plan_gpu_passthrough("none", fake.host);
    REQUIRE(none.ok());
    CHECK(none->all_devices);
  }
  FakeHost fake;
  fs::remove(fake.tmp.dir() / "dev/nvidia1");
  CHECK(plan_gpu_passthrough("0", fake.host).ok());
  const Error e = plan_error("all", fake.host);
  CHECK(e.code == ExitCode::external);
  CHECK(e.message == fmt::format("--gpus: GPU 1 ({}) has no device node {}; create it as root with "
                                 "`nvidia-modprobe -c=1` (or run nvidia-smi once as root)",
                                 k_uuid1, fake.at("dev/nvidia1")));
}

TEST_CASE("gpu: without /proc/driver/nvidia/gpus the /dev/nvidiaN nodes stand for the GPUs", "[gpu]") {
  FakeHost fake;
  fs::remove_all(fake.tmp.dir() / "proc/driver/nvidia/gpus");
  fake.tmp.write("dev/nvidia3", "");
  auto all = plan_gpu_passthrough("all", fake.host);
  REQUIRE(all.ok());
  CHECK(relative_nodes(*all, fake.tmp.dir()) ==
        with(k_control_nodes, {"ROOT/dev/nvidia0", "ROOT/dev/nvidia1", "ROOT/dev/nvidia3"}));
  auto third = plan_gpu_passthrough("2", fake.host);
  REQUIRE(third.ok());
  CHECK(relative_nodes(*third, fake.tmp.dir()) == with(k_control_nodes, {"ROOT/dev/nvidia3"}));
  CHECK(third->hidden_device_nodes == std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia1"});
  CHECK(third->env == env_for("2"));
}

TEST_CASE("gpu: the driver version is read from both kernel module banners", "[gpu]") {
  FakeHost fake;
  fake.tmp.write("proc/driver/nvidia/version",
                 "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build  "
                 "(dvs-builder@U16-I3-B03-4-3)  Thu Aug 17 00:30:47 UTC 2023\nGCC version:  gcc 12\n");
  auto plan = plan_gpu_passthrough("all", fake.host);
  REQUIRE(plan.ok());
  CHECK(plan->driver_version == "535.104.05");

  // Another driver version: none of the versioned libraries match, only the GLVND loader is bound.
  fake.tmp.write("proc/driver/nvidia/version",
                 "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  x\n");
  auto other = plan_gpu_passthrough("all", fake.host);
  REQUIRE(other.ok());
  CHECK(other->driver_version == "550.54.15");
  CHECK(describe_binds(*other, fake.tmp.dir())[0] ==
        "ROOT/usr/lib/x86_64-linux-gnu/libGLX.so.0.0.0 -> /.singularity.d/libs/libGLX.so.0 ro");
  CHECK(describe_binds(*other, fake.tmp.dir())[1] == "ROOT/usr/bin/nvidia-smi -> /usr/bin/nvidia-smi ro");

  fake.tmp.write("proc/driver/nvidia/version", "NVRM version: something else\n");
  const Error e = plan_error("all", fake.host);
  CHECK(e.code == ExitCode::external);
  CHECK(e.message == fmt::format("--gpus: can't find the driver version in {}: its first line is \"NVRM "
                                 "version: something else\"",
                                 fake.at("proc/driver/nvidia/version")));
}

TEST_CASE("gpu: a missing or corrupt ld.so cache is an external error that says to run ldconfig", "[gpu]") {
  FakeHost fake;
  fake.tmp.write("etc/ld.so.cache", "garbage");
  Error e = plan_error("all", fake.host);
  CHECK(e.code == ExitCode::external);
  CHECK(e.message ==
        fmt::format("--gpus: can't find the NVIDIA driver libraries: invalid ld.so cache {}: not an "
                    "ld.so cache: it starts with neither \"glibc-ld.so.cache1.1\" nor "
                    "\"ld.so-1.7.0\"; run ldconfig on the host to rebuild the cache",
                    fake.at("etc/ld.so.cache")));
  fs::remove(fake.tmp.dir() / "etc/ld.so.cache");
  e = plan_error("all", fake.host);
  CHECK(e.code == ExitCode::external);
  CHECK(e.message.starts_with("--gpus: can't find the NVIDIA driver libraries: "));
  CHECK(e.message.find(fake.at("etc/ld.so.cache")) != std::string::npos);
}

TEST_CASE("gpu: --gpus without a value follows NVIDIA_VISIBLE_DEVICES, then all", "[gpu]") {
  CHECK(effective_gpu_selection(std::string("0"), "1") == "0");
  CHECK(effective_gpu_selection(std::string(""), "1") == "");
  CHECK(effective_gpu_selection(std::nullopt, "1,GPU-x") == "1,GPU-x");
  CHECK(effective_gpu_selection(std::nullopt, "void") == "void");
  CHECK(effective_gpu_selection(std::nullopt, "") == "all");
  CHECK(effective_gpu_selection(std::nullopt, nullptr) == "all");
}

TEST_CASE("gpu: the plan's environment is merged over the container's", "[gpu]") {
  GpuPlan plan;
  plan.env = env_for("0");
  std::vector<std::string> env = {"PATH=/usr/bin", "NVIDIA_VISIBLE_DEVICES=all", "LD_LIBRARY_PATH=/opt/lib"};
  merge_gpu_env(plan, env);
  CHECK(env == std::vector<std::string>{"PATH=/usr/bin", "NVIDIA_VISIBLE_DEVICES=0",
                                        "LD_LIBRARY_PATH=/opt/lib:/.singularity.d/libs"});
  std::vector<std::string> bare = {"PATH=/usr/bin", "LD_LIBRARY_PATH="};
  merge_gpu_env(plan, bare);
  CHECK(bare == std::vector<std::string>{"PATH=/usr/bin", "LD_LIBRARY_PATH=/.singularity.d/libs",
                                         "NVIDIA_VISIBLE_DEVICES=0"});
}

TEST_CASE("gpu: LOCKSTEP_GPU_HOST_ROOT points the plan at another tree", "[gpu]") {
  ::unsetenv("LOCKSTEP_GPU_HOST_ROOT");
  CHECK(gpu_host_from_env().root == "/");
  ScopedEnv env("LOCKSTEP_GPU_HOST_ROOT", "/srv/fake-root");
  CHECK(gpu_host_from_env().root == "/srv/fake-root");
}

TEST_CASE("gpu: the embedded recipe is recipes/gpu/nvidia.yaml and every entry names its source", "[gpu]") {
  ::unsetenv("LOCKSTEP_RECIPES_DIR");
  auto embedded = load_gpu_recipe();
  REQUIRE(embedded.ok());
  auto from_source = parse_gpu_recipe(test::slurp(test::source_dir() / "recipes/gpu/nvidia.yaml"),
                                      "recipes/gpu/nvidia.yaml");
  REQUIRE(from_source.ok());
  CHECK(embedded->libraries.size() == from_source->libraries.size());
  CHECK(embedded->binaries.size() == from_source->binaries.size());
  CHECK(embedded->files.size() == from_source->files.size());
  CHECK(embedded->ipc.size() == from_source->ipc.size());
  CHECK(embedded->config_dirs == std::vector<std::string>{"/etc", "/usr/share"});
  CHECK(embedded->gpu_device_prefix == "nvidia");
  REQUIRE(embedded->control_devices.size() == 4);
  CHECK(embedded->control_devices[0].name == "nvidiactl");
  CHECK(embedded->control_devices[0].required);
  std::vector<std::string> names;
  for (const auto& lib : embedded->libraries) {
    names.push_back(lib.name);
  }
  for (const char* expected : {"libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so",
                               "libnvcuvid.so", "libGLX_nvidia.so", "libnvidia-ngx.so"}) {
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());
  }
}

TEST_CASE("gpu: LOCKSTEP_RECIPES_DIR replaces the embedded recipe", "[gpu]") {
  FakeHost fake;
  test::TempDirFixture recipes;
  recipes.write("gpu/nvidia.yaml", R"(recipe: gpu
vendor: nvidia
sources: {mine: a test}
config_dirs: [/etc]
libraries:
  - {name: libcuda.so, capability: compute, source: mine}
binaries: []
files: []
ipc: []
devices:
  control: [{name: nvidiactl, required: true, source: mine}]
  gpu: {prefix: nvidia, source: mine}
)");
  ScopedEnv env("LOCKSTEP_RECIPES_DIR", recipes.dir().string());
  auto plan = plan_gpu_passthrough("0", fake.host);
  REQUIRE(plan.ok());
  CHECK(describe_binds(*plan, fake.tmp.dir()) ==
        std::vector<std::string>{
            "ROOT/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05 -> /.singularity.d/libs/libcuda.so ro",
            "ROOT/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05 -> /.singularity.d/libs/libcuda.so.1 ro",
        });
  CHECK(relative_nodes(*plan, fake.tmp.dir()) ==
        std::vector<std::string>{"ROOT/dev/nvidiactl", "ROOT/dev/nvidia0"});

  fs::remove(recipes.dir() / "gpu/nvidia.yaml");
  const Error e = plan_error("0", fake.host);
  CHECK(e.code == ExitCode::io);
  CHECK(e.message.starts_with("reading the GPU recipe (LOCKSTEP_RECIPES_DIR): "));
  CHECK(e.message.find((recipes.dir() / "gpu/nvidia.yaml").string()) != std::string::npos);
}

TEST_CASE("gpu: recipe mistakes are reported at their place in the file", "[gpu]") {
  const std::string text = R"(recipe: gpu
vendor: nvidia
sources: {mine: a test}
config_dirs: [etc]
libraries:
  - {name: libcuda.so, capability: compute, source: theirs}
  - {name: libnvidia-ml.so, capability: telepathy, source: mine}
  - {name: libnvcuvid.so, capabilty: video, source: mine}
  - {name: libnvidia-cfg.so, capability: utility}
binaries: [{name: /usr/bin/nvidia-smi, capability: utility, source: mine}]
devices:
  control: [{name: nvidiactl, required: yes, source: mine}]
  gpu: {prefix: nvidia, source: mine}
)";
  auto r = parse_gpu_recipe(text, "nvidia.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().rendered);
  CHECK(r.error().message == R"(nvidia.yaml:4:15: error: config_dirs[0]: expected an absolute directory path
    4 | config_dirs: [etc]
      |               ^~~
nvidia.yaml:6:53: error: libraries[0].source: unknown source 'theirs'; sources are the keys of 'sources:'
    6 |   - {name: libcuda.so, capability: compute, source: theirs}
      |                                                     ^~~~~~
nvidia.yaml:7:41: error: libraries[1].capability: unknown capability 'telepathy'; expected utility, compute, video, graphics or ngx
    7 |   - {name: libnvidia-ml.so, capability: telepathy, source: mine}
      |                                         ^~~~~~~~~
nvidia.yaml:8:27: error: libraries[2].capabilty: unknown key; expected one of: name, capability, driver_versioned, source
    8 |   - {name: libnvcuvid.so, capabilty: video, source: mine}
      |                           ^~~~~~~~~
nvidia.yaml:8:5: error: libraries[2]: missing key 'capability'
    8 |   - {name: libnvcuvid.so, capabilty: video, source: mine}
      |     ^
nvidia.yaml:9:5: error: libraries[3]: missing key 'source' (where this fact comes from)
    9 |   - {name: libnvidia-cfg.so, capability: utility}
      |     ^
nvidia.yaml:10:19: error: binaries[0].name: expected a program name, not a path
   10 | binaries: [{name: /usr/bin/nvidia-smi, capability: utility, source: mine}]
      |                   ^~~~~~~~~~~~~~~~~~~
nvidia.yaml:12:41: error: devices.control[0].required: expected true or false, found a string
   12 |   control: [{name: nvidiactl, required: yes, source: mine}]
      |                                         ^~~
8 errors
)");
}

TEST_CASE("gpu: a recipe entry without its path is an error, not a crash", "[gpu]") {
  auto r = parse_gpu_recipe(R"(recipe: gpu
vendor: nvidia
sources: {mine: a test}
ipc: [{capability: utility, source: mine}]
files: [{capability: graphics, source: mine}]
devices:
  control: [{source: mine}]
  gpu: {prefix: nvidia, source: mine}
)",
                            "nvidia.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("nvidia.yaml:4:7: error: ipc[0]: missing key 'path'") != std::string::npos);
  CHECK(r.error().message.find("nvidia.yaml:5:9: error: files[0]: missing key 'path'") != std::string::npos);
  CHECK(r.error().message.find("nvidia.yaml:7:13: error: devices.control[0]: missing key 'name'") !=
        std::string::npos);
}
