// What the stack solver learns from a base image's dpkg database: its CUDA and its Python.
#include "builder/lock/base_contents.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

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
