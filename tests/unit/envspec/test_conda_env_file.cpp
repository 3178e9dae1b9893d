// An environment.yml read as conda packages for `lockstep init` (envspec/load/conda_env_file.hpp).
#include "envspec/load/conda_env_file.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;
using namespace lockstep::envspec;

namespace {

std::string error_of(const std::string& text) {
  Result<CondaEnvFile> r = read_conda_env_file(text, "environment.yml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  return r.error().message;
}

} // namespace

TEST_CASE("an environment.yml keeps its channels, MatchSpecs and pip section", "[conda][init]") {
  Result<CondaEnvFile> r = read_conda_env_file("name: train\n"
                                               "channels: [pytorch, nodefaults, conda-forge]\n"
                                               "variables: {OMP_NUM_THREADS: '1'}\n"
                                               "dependencies:\n"
                                               "  - python=3.11.9\n"
                                               "  - 'cuda-version 12.4.*'\n"
                                               "  - conda-forge::numpy >=1.26\n"
                                               "  - pip: [einops]\n",
                                               "environment.yml");
  REQUIRE(r.ok());
  CHECK(r->name == "train");
  CHECK(r->channels == std::vector<std::string>{"pytorch", "conda-forge"});
  CHECK(r->nodefaults);
  CHECK(r->specs ==
        std::vector<std::string>{"python=3.11.9", "cuda-version 12.4.*", "conda-forge::numpy >=1.26"});
  CHECK(r->pip == std::vector<std::string>{"einops"});
  CHECK(r->python == "3.11");
  CHECK(r->python_line == 5);
  CHECK(r->cuda == "12.4");
  CHECK(r->notes.size() == 1);
}

TEST_CASE("a malformed environment.yml is a located error", "[conda][init]") {
  CHECK_THAT(error_of("dependencies:\n  - numpy\n  - conda: [x]\n"),
             Catch::Matchers::Contains("environment.yml:3: expected a conda package or {pip: [...]}"));
  CHECK_THAT(error_of("channels: conda-forge\ndependencies: [numpy]\n"),
             Catch::Matchers::Contains("channels: expected a list"));
  CHECK_THAT(error_of("name: x\n"), Catch::Matchers::Contains("no 'dependencies:' list"));
  CHECK_THAT(error_of("dependencies:\n  - 'numpy[version=>1'\n"),
             Catch::Matchers::Contains("environment.yml:2: 'numpy[version=>1' is not a conda MatchSpec"));
}

TEST_CASE("an installed package is pinned by channel, build and hash", "[conda][init]") {
  CondaPrefixPackage p{"numpy", "1.26.4", "py311h64a7726_0", "https://conda.anaconda.org/conda-forge",
                       "",      "0a1b"};
  CHECK(exact_match_spec(p) == "conda-forge::numpy==1.26.4=py311h64a7726_0[md5=0a1b]");
  p.sha256 = "ff00";
  p.channel = "http://127.0.0.1:8000/ch";
  CHECK(exact_match_spec(p) == "http://127.0.0.1:8000/ch::numpy==1.26.4=py311h64a7726_0[sha256=ff00]");
}
