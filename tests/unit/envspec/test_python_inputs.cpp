// pyproject.toml and environment.yml read into requirements (envspec/load/python_inputs.hpp), and the
// starting spec of `lockstep init` (envspec/load/init_spec.hpp).
#include "envspec/load/init_spec.hpp"
#include "envspec/load/python_inputs.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;
using namespace lockstep::envspec;

namespace {

std::vector<std::string> texts(const std::vector<ImportedRequirement>& reqs) {
  std::vector<std::string> out;
  for (const auto& r : reqs) {
    out.push_back(r.text + " @" + r.where);
  }
  return out;
}

} // namespace

TEST_CASE("conda version specs become PEP 440 specifiers", "[python_inputs]") {
  CHECK(conda_version_to_pep440("") == "");
  CHECK(conda_version_to_pep440("=1.26") == "==1.26.*");
  CHECK(conda_version_to_pep440("=1.26.4=py311h64a7726_0") == "==1.26.4.*");
  CHECK(conda_version_to_pep440("==1.26.4") == "==1.26.4");
  CHECK(conda_version_to_pep440("==1.26.4=py311h_0") == "==1.26.4");
  CHECK(conda_version_to_pep440("1.26.*") == "==1.26.*");
  CHECK(conda_version_to_pep440("1.26") == "==1.26.*");
  CHECK(conda_version_to_pep440(">=1.2,<2") == ">=1.2,<2");
}

TEST_CASE("pyproject.toml gives dependencies, then the extras asked for, expanding self-references",
          "[python_inputs]") {
  const std::string text = R"([project]
name = "Trainer"
version = "0.1"
dependencies = ["numpy>=1.26", "torch==2.4.1"]

[project.optional-dependencies]
tracking = ["wandb"]
all = ["trainer[tracking]", "rich"]
)";
  auto reqs = read_pyproject(text, "pyproject.toml", {"all"});
  REQUIRE(reqs);
  CHECK(texts(*reqs) == std::vector<std::string>{"numpy>=1.26 @pyproject.toml:4",
                                                 "torch==2.4.1 @pyproject.toml:4", "rich @pyproject.toml:8",
                                                 "wandb @pyproject.toml:7"});
  auto info = read_pyproject_info(text, "pyproject.toml");
  REQUIRE(info);
  CHECK(info->extras == std::vector<std::string>{"all", "tracking"});
}

TEST_CASE("pyproject.toml problems are listed together", "[python_inputs]") {
  const std::string text = R"([project]
name = "x"
dynamic = ["dependencies"]
optional-dependencies = {a = [1]}
)";
  auto reqs = read_pyproject(text, "p.toml", {"a", "nope"});
  REQUIRE_FALSE(reqs);
  CHECK(reqs.error().message ==
        "p.toml:3: [project] declares dependencies dynamic: only the build backend knows them, and lockstep "
        "does "
        "not run it; list them in [project] or use a requirements file\n"
        "p.toml:4: [project.optional-dependencies].a must hold requirement strings\n"
        "p.toml: no optional dependencies 'nope' in [project.optional-dependencies] (it has a)");
  CHECK_FALSE(read_pyproject("[tool.x]\n", "q.toml", {}));
  CHECK_FALSE(read_pyproject("[project\n", "r.toml", {}));
}

TEST_CASE("non-ASCII text where whitespace may start is a parse error or a value, never undefined",
          "[python_inputs]") {
  // toml++ 3.3.0 treats U+00A1..U+0499 there as unreachable (support/base/toml.hpp).
  auto bad = read_pyproject("\xC3\xA9 = 1\n", "p.toml", {});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.rfind("p.toml:1:", 0) == 0);
  auto nbsp = read_pyproject("[project]\nname = \"x\"\xC2\xA0\ndependencies = []\n", "n.toml", {});
  REQUIRE_FALSE(nbsp); // TOML allows only tab and space as whitespace
  auto cafe = read_pyproject("[project]\nname = \"caf\xC3\xA9\"\ndependencies = [\"numpy\"]\n", "c.toml", {});
  REQUIRE(cafe);
  CHECK(texts(*cafe) == std::vector<std::string>{"numpy @c.toml:3"});
}

TEST_CASE("an environment.yml maps conda packages through the names table", "[python_inputs]") {
  const std::string text = R"(name: t
channels: [pytorch, conda-forge]
dependencies:
  - python=3.11
  - pytorch::pytorch=2.4
  - pytorch-cuda=12.1
  - conda-forge::numpy>=1.26
  - huggingface_hub
  - mpi4py
  - openmpi=4.1
  - libgcc-ng
  - pip:
      - einops==0.8.0
)";
  auto env = read_conda_env(text, "environment.yml");
  REQUIRE(env);
  REQUIRE(env->python);
  CHECK(env->python->text == "3.11");
  CHECK(texts(env->pip) ==
        std::vector<std::string>{"torch==2.4.* @environment.yml:5", "numpy>=1.26 @environment.yml:7",
                                 "huggingface-hub @environment.yml:8", "einops==0.8.0 @environment.yml:13"});
  CHECK(texts(env->apt) == std::vector<std::string>{"python3-mpi4py @environment.yml:9"});
  CHECK(env->stack.at("cuda").text == "12.1");
  CHECK(env->stack.at("mpi").text == "openmpi@4.1");
  CHECK(env->system == std::vector<std::string>{"libgcc-ng"});
}

TEST_CASE("conda packages without an equivalent are listed in one error, with lines", "[python_inputs]") {
  auto env = read_conda_env("dependencies:\n  - nosuchpkg=1\n  - numpy\n  - other-conda-only\n", "env.yml");
  REQUIRE_FALSE(env);
  CHECK(env.error().message ==
        "conda packages without a known PyPI or Debian equivalent (recipes/conda/conda-names.yaml):\n"
        "  env.yml:2: nosuchpkg\n"
        "  env.yml:4: other-conda-only\n"
        "if PyPI has them, move them to the environment's pip: section (with their PyPI names); if they are "
        "system libraries, add them to packages.apt by their Debian names");
  CHECK_FALSE(read_conda_env("name: x\n", "e.yml"));
}

TEST_CASE("init picks the Debian suite whose python3 fits, and the framework's stack", "[python_inputs]") {
  auto recipes = builtin_recipes();
  REQUIRE(recipes);
  InitRequest r;
  r.name = "demo";
  r.from = InitRequest::From::requirements;
  r.file = "requirements.in";
  r.pip = {"torch==2.4.1+cu121", "numpy"};
  auto text = init_spec_text(r, **recipes);
  REQUIRE(text);
  CHECK(text->find("base: {debian: bookworm}") != std::string::npos);
  CHECK(text->find("framework: pytorch@2.4.1\n") != std::string::npos);
  r.python = "3.13";
  r.pip = {"jax"};
  text = init_spec_text(r, **recipes);
  REQUIRE(text);
  CHECK(text->find("base: {debian: trixie}") != std::string::npos);
  CHECK(text->find("framework: jax\n") != std::string::npos);
  r.python = "3.12";
  text = init_spec_text(r, **recipes);
  REQUIRE(text);
  CHECK(text->find("base: {image: \"docker://python:3.12-slim-bookworm\", python: /usr/local/bin/python3}") !=
        std::string::npos);
}
