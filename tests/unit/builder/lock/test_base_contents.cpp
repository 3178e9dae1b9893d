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
