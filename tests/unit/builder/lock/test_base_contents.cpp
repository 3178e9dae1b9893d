// What the stack solver learns from a base image's dpkg database: its CUDA and its Python.
#include "builder/lock/base_contents.hpp"
#include "builder/lock/wheel_lock.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace lockstep;
using namespace lockstep::builder;

namespace {

std::string installed(const std::string& name, const std::string& version,
                      const std::string& status = "installed") {
  return "Package: " + name + "\nStatus: install ok " + status +
         "\nArchitecture: amd64\nVersion: " + version + "\n\n";
}

} // namespace

TEST_CASE("The stack context over a base takes its highest installed CUDA runtime and python3.X",
          "[base][stack]") {
  BaseMetadata base;
  base.has_dpkg_status = true;
  base.dpkg_status = installed("cuda-cudart-12-1", "12.1.105-1") +
                     installed("cuda-cudart-12-4", "12.4.127-1") +
                     installed("cuda-cudart-dev-12-4", "12.4.127-1") + installed("python3.10", "3.10.12-1") +
                     installed("python3.10-minimal", "3.10.12-1") +
                     installed("python3.12", "3.12.3-1", "config-files") + installed("python3", "3.10.6-1");
  auto ctx = stack_context_over_base(envspec::Spec{}, base, "docker://r/cuda:12.4");
  REQUIRE_OK(ctx);
  CHECK(ctx->base_name == "docker://r/cuda:12.4");
  CHECK(ctx->base_cuda == "12.4");
  CHECK(ctx->base_cuda_package == "cuda-cudart-12-4 12.4.127-1");
  CHECK(ctx->base_python == "3.10"); // 3.12 left only its configuration files

  base.dpkg_status = installed("libc6", "2.36-9");
  ctx = stack_context_over_base(envspec::Spec{}, base, "oci:base");
  REQUIRE_OK(ctx);
  CHECK(ctx->base_cuda.empty());
  CHECK(ctx->base_python.empty());

  base.dpkg_status = "Package: broken\n\n";
  CHECK_FALSE(stack_context_over_base(envspec::Spec{}, base, "oci:base"));
}

TEST_CASE("The base's apt sources the spec lacks are warned about with the repos entry to add",
          "[base][sources]") {
  BaseMetadata base;
  base.apt_sources["etc/apt/sources.list"] = "deb http://archive.ubuntu.com/ubuntu/ jammy main universe\n"
                                             "deb http://archive.ubuntu.com/ubuntu/ jammy-updates main\n";
  base.apt_sources["etc/apt/sources.list.d/cuda.list"] =
      "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
      "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/ /\n";
  base.apt_sources["etc/apt/sources.list.d/broken.list"] = "deb nothing\n";
  envspec::Spec spec;
  envspec::Repo jammy;
  jammy.url = "http://mirror.example/ubuntu";
  jammy.suite = "jammy";
  jammy.components = {"main"};
  spec.repos.push_back(jammy);
  envspec::Repo cuda;
  cuda.url = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64";
  cuda.flat = true;
  std::vector<std::string> w = sources_the_spec_lacks(spec, base);
  REQUIRE(w.size() == 4);
  CHECK(w[0] ==
        "the base image's /etc/apt/sources.list:1 has `deb http://archive.ubuntu.com/ubuntu/ jammy main "
        "universe`, whose component universe the spec's repos lack (lockstep never uses a base's apt "
        "sources on its own); to install from it, add to repos:\n"
        "  - {apt: http://archive.ubuntu.com/ubuntu/, suite: jammy, components: [main, universe], keyring: "
        "KEYRING}");
  CHECK(
      w[1].starts_with("the base image's /etc/apt/sources.list:2 has `deb http://archive.ubuntu.com/ubuntu/ "
                       "jammy-updates main`, which the spec's repos lack"));
  CHECK(w[2].starts_with("the base image's /etc/apt/sources.list.d/broken.list can't be read: "));
  CHECK(
      w[3].ends_with("  - {apt: https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/, "
                     "flat: true, keyring: cuda-archive-keyring.gpg}"));
  spec.repos.push_back(cuda);
  CHECK(sources_the_spec_lacks(spec, base).size() == 3); // the flat repository is there now
  spec.repos.front().suite.clear();
  spec.repos.front().suites = {"jammy", "jammy-updates"}; // `suites:` covers both lines' suites
  w = sources_the_spec_lacks(spec, base);
  REQUIRE(w.size() == 2);
  CHECK(w[0].starts_with("the base image's /etc/apt/sources.list:1 has "));
  CHECK(w[1].starts_with("the base image's /etc/apt/sources.list.d/broken.list can't be read: "));
}

namespace {

// A base shaped like the official python:3.11-slim image: Debian's libc6, CPython built into
// /usr/local, python3 -> python3.11 in /usr/local/bin, and /bin -> usr/bin.
BaseMetadata python_slim() {
  BaseMetadata base;
  base.has_dpkg_status = true;
  base.dpkg_status = installed("libc6", "2.36-9+deb12u7");
  base.symlinks = {{"bin", "usr/bin"},
                   {"usr/local/bin/python3", "python3.11"},
                   {"usr/local/bin/python", "python3"},
                   {"opt/py", "/usr/local"}};
  base.python_executables = {"usr/bin/python3.11", "usr/local/bin/python3.11"};
  base.python_headers = {{"usr/local/include/python3.11/patchlevel.h",
                          "/* Version as a string */\n#define PY_VERSION              \"3.11.9\"\n"}};
  base.config_env = {"PATH=/usr/local/bin:/usr/bin", "PYTHON_VERSION=3.11.8"};
  base.dist_info = {{"usr/local/lib/python3.11/site-packages/pip-24.0.dist-info",
                     "Metadata-Version: 2.1\nName: pip\nVersion: 24.0\n"},
                    {"usr/lib/python3/dist-packages/six-1.16.0.dist-info",
                     "Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n"}};
  return base;
}

} // namespace

TEST_CASE("base.python is followed through the base's links to its CPython and its version",
          "[base][python]") {
  BaseMetadata base = python_slim();
  for (const char* path : {"/usr/local/bin/python3", "/usr/local/bin/python", "/opt/py/bin/python3.11"}) {
    INFO(path);
    auto py = find_base_python(base, path);
    REQUIRE_OK(py);
    CHECK(py->file == "usr/local/bin/python3.11");
    CHECK(py->version == "3.11");
    CHECK(py->full_version == "3.11.9"); // patchlevel.h wins over the config's PYTHON_VERSION
    CHECK(py->prefix == "usr/local");
    CHECK(py->bin == "usr/local/bin");
    CHECK(py->site == "usr/local/lib/python3.11/site-packages");
    CHECK(py->from == "/usr/local/include/python3.11/patchlevel.h");
  }
  // Without the header, the config's PYTHON_VERSION; a pre-release keeps its tag.
  base.python_headers.clear();
  base.config_env = {"PYTHON_VERSION=3.11.0rc2"};
  auto py = find_base_python(base, "/usr/local/bin/python3");
  REQUIRE_OK(py);
  CHECK(py->full_version == "3.11.0rc2");
  CHECK(py->from == "the config's PYTHON_VERSION=3.11.0rc2");
  // A PYTHON_VERSION of another X.Y doesn't count.
  base.config_env = {"PYTHON_VERSION=3.12.1"};
  py = find_base_python(base, "/usr/local/bin/python3");
  REQUIRE_FALSE(py);
  CHECK_THAT(py.error().message, Catch::Contains("no /usr/local/include/python3.11/patchlevel.h") &&
                                     Catch::Contains("PYTHON_VERSION=3.11.N"));
}

TEST_CASE("base.python that is no interpreter of the base is refused, naming what the base has",
          "[base][python]") {
  BaseMetadata base = python_slim();
  auto py = find_base_python(base, "/usr/local/bin/python3.12");
  REQUIRE_FALSE(py);
  CHECK_THAT(py.error().message,
             Catch::Contains("is not a python3 or python3.N file in the base image") &&
                 Catch::Contains("the base has /usr/bin/python3.11, /usr/local/bin/python3.11"));
  base.symlinks["usr/local/bin/loop"] = "loop";
  py = find_base_python(base, "/usr/local/bin/loop");
  REQUIRE_FALSE(py);
  CHECK_THAT(py.error().message, Catch::Contains("more than 40 symbolic links"));
  base.python_executables.push_back("usr/local/python3.11");
  std::sort(base.python_executables.begin(), base.python_executables.end());
  py = find_base_python(base, "/usr/local/python3.11");
  REQUIRE_FALSE(py);
  CHECK_THAT(py.error().message, Catch::Contains("PREFIX/bin"));
}

TEST_CASE("Wheels over base.python target that Python, its prefix and its site-packages only",
          "[base][python]") {
  const BaseMetadata base = python_slim();
  const oci::Platform amd64{"linux", "amd64", ""};
  auto t = python_target(envspec::Lock{}, amd64, &base, "/usr/local/bin/python3");
  REQUIRE_OK(t);
  CHECK(t->describe() == "cp311 manylinux x86_64 (CPython 3.11.9, glibc 2.36)");
  CHECK(t->interpreter == "/usr/local/bin/python3");
  CHECK(t->site_packages() == "usr/local/lib/python3.11/site-packages");
  CHECK(t->scripts_dir == "usr/local/bin");
  CHECK(t->data_dir == "usr/local");
  CHECK_FALSE(t->debian);
  CHECK(t->package == "/usr/local/bin/python3 (base image, /usr/local/include/python3.11/patchlevel.h)");

  // Without a libc6 in the base, glibc is unknown.
  BaseMetadata no_libc = base;
  no_libc.dpkg_status = installed("base-files", "12.4");
  t = python_target(envspec::Lock{}, amd64, &no_libc, "/usr/local/bin/python3");
  REQUIRE_FALSE(t);
  CHECK_THAT(t.error().message, Catch::Contains("no libc6"));

  // The stack takes its version and installs no Python.
  envspec::Spec spec;
  spec.base.python = "/usr/local/bin/python3";
  auto ctx = stack_context_over_base(spec, base, "docker://python:3.11-slim");
  REQUIRE_OK(ctx);
  CHECK(ctx->base_python == "3.11");
  CHECK(ctx->base_python_path == "/usr/local/bin/python3");
}
