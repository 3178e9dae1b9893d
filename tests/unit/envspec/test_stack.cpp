// The `stack:` solver over the built-in recipes: what it picks for real requests, and the whole
// message for impossible ones (located at the constraint to change, saying what would work).
#include "envspec/stack/recipes.hpp"
#include "envspec/stack/stack.hpp"
#include "tests/unit/envspec/fixtures/spec_fixture.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace lockstep;
using test::SpecFixture;

namespace {

// A spec with a Debian `base` (empty: scratch) and both kinds of repository, plus `stack`.
std::string spec_text(const std::string& stack, const std::string& suite = "bookworm") {
  std::string s = "lockstep: 1\nname: gpu\n";
  if (!suite.empty()) {
    s += "base: {debian: " + suite + "}\n";
  }
  s += "repos:\n"
       "  - {apt: http://deb.debian.org/debian/, suite: bookworm, components: [main], keyring: "
       "keys/debian.gpg}\n"
       "  - {pypi: https://pypi.org/simple}\n"
       "stack: " +
       stack + "\n";
  return s;
}

class StackFixture : public SpecFixture {
public:
  StackFixture() { write("keys/debian.gpg", "key"); }

  Result<envspec::StackSolution> solve(const std::string& stack, const std::string& suite = "bookworm",
                                       const envspec::StackContext* over_base = nullptr) {
    const envspec::Spec spec = load_ok(spec_text(stack, suite));
    REQUIRE(spec.stack.has_value());
    Result<const envspec::RecipeSet*> recipes = envspec::builtin_recipes();
    REQUIRE(recipes.ok());
    return envspec::solve_stack(*spec.stack, **recipes,
                                over_base != nullptr ? *over_base : envspec::stack_context(spec));
  }

  envspec::LockedStack solved(const std::string& stack, const std::string& suite = "bookworm") {
    Result<envspec::StackSolution> r = solve(stack, suite);
    if (!r) {
      FAIL(r.error().message);
    }
    return r->locked;
  }

  // The message of the one diagnostic, after "error: ", and its key path and line:column.
  std::string failure(const std::string& stack, const std::string& suite = "bookworm") {
    Result<envspec::StackSolution> r = solve(stack, suite);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK(r.error().rendered);
    const std::string& m = r.error().message;
    const std::string prefix = path() + ":";
    REQUIRE(m.rfind(prefix, 0) == 0);
    const std::string rest = m.substr(prefix.size());
    return rest.substr(0, rest.find('\n'));
  }
};

// "component=version(via)" for each choice, for compact assertions.
std::vector<std::string> summary(const envspec::LockedStack& st) {
  std::vector<std::string> out;
  for (const auto& c : st.choices) {
    out.push_back(c.component + "=" + (c.name == c.component ? "" : c.name + " ") + c.version +
                  (c.variant.empty() ? "" : " " + c.variant) + "(" + c.via + ")");
  }
  return out;
}

std::vector<std::string> packages(const envspec::LockedStack& st, const std::string& component) {
  for (const auto& c : st.choices) {
    if (c.component == component) {
      return c.packages;
    }
  }
  return {};
}

} // namespace

TEST_CASE_METHOD(StackFixture, "stack: pytorch 2.1 with CUDA 12 takes the cu121 wheels and their pins",
                 "[stack]") {
  const envspec::LockedStack st = solved(R"({framework: pytorch@2.1, cuda: "12"})");
  CHECK(summary(st) == std::vector<std::string>{"python=3.11(apt)", "cuda=12.1(wheels)",
                                                "cudnn=8.9.2.26(wheels)", "nccl=2.18.1(wheels)",
                                                "framework=pytorch 2.1.0 cu121(wheels)"});
  const std::vector<std::string> fw = packages(st, "framework");
  REQUIRE(fw.size() == 13);
  CHECK(fw.front() == "torch==2.1.0");
  CHECK(std::find(fw.begin(), fw.end(), "nvidia-nccl-cu12==2.18.1") != fw.end());
  CHECK(std::find(fw.begin(), fw.end(), "nvidia-cudnn-cu12==8.9.2.26") != fw.end());
  CHECK(std::find(fw.begin(), fw.end(), "triton==2.1.0") != fw.end());
  CHECK(packages(st, "python") == std::vector<std::string>{"python3.11"});
  CHECK(st.cuda == "12.1");
  CHECK(st.driver_floor == "530.30.02");
  CHECK(st.min_cc == "5.0");
  CHECK(st.nvidia_require_cuda == "cuda>=12.1,driver>=530.30.02,arch>=5.0");
  CHECK(st.recipes == "builtin");
  // Facts say where they come from.
  const auto& c = st.choices.back();
  REQUIRE_FALSE(c.facts.empty());
  CHECK(c.facts.front().find("recipes/pytorch/pytorch.yaml:") != std::string::npos);
}

TEST_CASE_METHOD(StackFixture, "stack: without a CUDA constraint the PyPI default build wins", "[stack]") {
  CHECK(summary(solved("{framework: pytorch@2.1}"))[1] == "cuda=12.1(wheels)");
  CHECK(summary(solved(R"({framework: pytorch@2.1, cuda: "11.8"})"))[1] == "cuda=11.8(wheels)");
  CHECK(summary(solved("{framework: pytorch@2.1.0}")).back() == "framework=pytorch 2.1.0 cu121(wheels)");
}

TEST_CASE_METHOD(StackFixture, "stack: system CUDA and NCCL from NVIDIA's repository names", "[stack]") {
  const envspec::LockedStack st = solved(R"({cuda: "12.1", nccl: "2.18"})");
  CHECK(summary(st) == std::vector<std::string>{"cuda=12.1(apt)", "nccl=2.18(apt)"});
  CHECK(packages(st, "cuda") == std::vector<std::string>{"cuda-cudart-12-1"});
  CHECK(packages(st, "nccl") ==
        std::vector<std::string>{"libnccl2=2.18*-*+cuda12.1", "libnccl-dev=2.18*-*+cuda12.1"});
  CHECK(st.driver_floor == "530.30.02");

  const envspec::LockedStack devel = solved(R"({cuda: "12.4", cuda_flavor: devel, cudnn: "9.17"})");
  CHECK(packages(devel, "cuda") == std::vector<std::string>{"cuda-toolkit-12-4"});
  CHECK(packages(devel, "cudnn") == std::vector<std::string>{"libcudnn9-cuda-12=9.17*-1"});
  CHECK(devel.min_cc == "7.5"); // cuDNN 9.17 starts at Turing
  CHECK(devel.nvidia_require_cuda == "cuda>=12.4,driver>=550.54.14,arch>=7.5");

  const envspec::LockedStack cudnn8 = solved(R"({cuda: "12.1", cudnn: "8.9"})");
  CHECK(packages(cudnn8, "cudnn") == std::vector<std::string>{"libcudnn8=8.9*-1+cuda12.*"});
}

TEST_CASE_METHOD(StackFixture, "stack: over a base image with CUDA and Python, the stack uses them",
                 "[stack][base]") {
  envspec::StackContext base;
  base.base_name = "docker://nvcr.example/cuda:12.4.1-runtime-ubuntu22.04";
  base.base_cuda = "12.4";
  base.base_cuda_package = "cuda-cudart-12-4 12.4.127-1";
  base.base_python = "3.10";
  Result<envspec::StackSolution> r = solve(R"({cuda: "12", nccl: "2.21"})", "", &base);
  REQUIRE(r.ok());
  CHECK(summary(r->locked) == std::vector<std::string>{"cuda=12.4(apt)", "nccl=2.21(apt)"});
  CHECK(r->locked.driver_floor == "550.54.14");
  const auto& facts = r->locked.choices.front().facts;
  CHECK(std::find(facts.begin(), facts.end(),
                  "the base image docker://nvcr.example/cuda:12.4.1-runtime-ubuntu22.04 has CUDA 12.4 "
                  "(cuda-cudart-12-4 12.4.127-1 installed)") != facts.end());
  CHECK(packages(r->locked, "nccl") ==
        std::vector<std::string>{"libnccl2=2.21*-*+cuda12.4", "libnccl-dev=2.21*-*+cuda12.4"});

  r = solve(R"({cuda: "12.1"})", "", &base);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().message);
  CHECK(r.error().message.find(":6:16: error: stack.cuda: the base image "
                               "docker://nvcr.example/cuda:12.4.1-runtime-ubuntu22.04 has CUDA 12.4 "
                               "(cuda-cudart-12-4 12.4.127-1 installed), and a stack over it uses that CUDA; "
                               "ask for cuda: \"12.4\", or build on a base with CUDA 12.1") !=
        std::string::npos);

  // The framework's Python is the base's python3.10.
  r = solve(R"({framework: pytorch, cuda: "12"})", "", &base);
  REQUIRE(r.ok());
  CHECK(summary(r->locked).front() == "python=3.10(apt)");
}

TEST_CASE_METHOD(StackFixture, "stack: MPI series map to Debian packages", "[stack]") {
  CHECK(packages(solved("{mpi: openmpi@4.1}"), "mpi") ==
        std::vector<std::string>{"openmpi-bin=4.1*", "libopenmpi-dev=4.1*"});
  CHECK(packages(solved("{mpi: openmpi}"), "mpi") ==
        std::vector<std::string>{"openmpi-bin", "libopenmpi-dev"});
  CHECK(summary(solved("{mpi: mpich@4.0}")) == std::vector<std::string>{"mpi=mpich 4.0(apt)"});
}

TEST_CASE_METHOD(StackFixture, "stack: TensorFlow and JAX take CUDA from the system", "[stack]") {
  const envspec::LockedStack tf = solved("{framework: tensorflow@2.15}");
  CHECK(summary(tf) == std::vector<std::string>{"python=3.11(apt)", "cuda=12.2(apt)", "cudnn=8.9(apt)",
                                                "framework=tensorflow 2.15.0 tested(wheels)"});
  CHECK(packages(tf, "framework") == std::vector<std::string>{"tensorflow==2.15.0"});

  const envspec::LockedStack jax = solved(R"({framework: jax@0.4.30, cuda: "12.4"})");
  CHECK(summary(jax).front() == "python=3.11(apt)");
  CHECK(summary(jax).back() == "framework=jax 0.4.30 cuda12(wheels)");
  CHECK(packages(jax, "framework") == std::vector<std::string>{"jax==0.4.30", "jaxlib==0.4.30",
                                                               "jax-cuda12-plugin==0.4.30",
                                                               "jax-cuda12-pjrt==0.4.30"});
  CHECK(jax.cuda == "12.4");
}

TEST_CASE_METHOD(StackFixture, "stack: impossible requests name the key to change and what would work",
                 "[stack]") {
  struct Case {
    std::string stack;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({framework: pytorch@2.1, cuda: "12.4"})",
       R"(7:40: error: stack.cuda: pytorch 2.1 has no build for CUDA 12.4 (its builds: cu121 = CUDA 12.1, cu118 = CUDA 11.8); what would work: cuda: "12.1" or "11.8" with pytorch 2.1; or pytorch@2.6, 2.5 or 2.4 with cuda "12.4")"},
      {R"({framework: pytorch@2.1, python: "3.12"})",
       R"(7:42: error: stack.python: pytorch 2.1 has no build for Python 3.12 (its builds: Python >=3.8,<3.12); what would work: python: "3.11" with pytorch 2.1)"},
      {R"({framework: pytorch@2.1, cudnn: "9"})",
       R"(7:41: error: stack.cudnn: pytorch 2.1 has no build for cuDNN 9 (its builds: cu121 = cuDNN 8.9.2.26, cu118 = cuDNN 8.7.0.84); what would work: cudnn: "8.9.2.26" or "8.7.0.84" with pytorch 2.1; or pytorch@2.14, 2.13, 2.12.1, 2.12.0, 2.11, ... with cudnn "9")"},
      {"{framework: pytorch@3.0}",
       R"(7:28: error: stack.framework: the recipes know no pytorch release matching '3.0'; known: 2.14, 2.13, 2.12.1, 2.12.0, 2.11, ...)"},
      {"{framework: tensorflow@2.11}",
       R"(7:20: error: stack.framework: tensorflow 2.11 supports Python >=3.7,<3.11, but the image's Python is 3.11 (Debian bookworm's python3); what would work: tensorflow@2.18, 2.17, 2.16, 2.15, 2.14, ...)"},
      {"{framework: jax}",
       R"(7:20: error: stack.framework: jax needs an exact release, e.g. jax@0.4.30 (the recipes don't list jax releases; they pin the version you give))"},
      {R"({cuda: "11.8", nccl: "2.18"})",
       R"(7:16: error: stack.cuda: CUDA 11.8 does not fit the rest of the stack (the recipes know NCCL 2.18.1 for CUDA 12.1, 12); what would work: cuda: "12.9", "12.8", "12.6", "12.5", "12.4", ... with nccl "2.18"; or nccl: "2.16.2", "2.21.5", "2.20.5", "2.19.3", "2.14.3", ... with cuda "11.8")"},
      {R"({cuda: "12.1", cudnn: "9.1"})",
       R"(7:31: error: stack.cudnn: cuDNN 9.1 does not fit the rest of the stack (the recipes know no cuDNN matching "9.1"); what would work: cudnn: "9.17", "9.10", "9.5", "9.0" or "8.9" with cuda "12.1")"},
      {R"({python: "3.12"})",
       R"(7:18: error: stack.python: Python 3.12 is not Debian bookworm's python3 (3.11); what would work: python: "3.11")"},
      {R"({mpi: "openmpi@9"})",
       R"(7:23: error: stack.mpi: the recipes know no openmpi series matching '9'; known: 5.0, 4.1 or 4.0)"},
  };
  for (const Case& c : cases) {
    INFO(c.stack);
    CHECK(failure(c.stack) == c.message);
  }
}

TEST_CASE_METHOD(StackFixture, "stack: the spec's stack section is checked for form first", "[stack]") {
  write("lockstep.yaml",
        spec_text(R"({framework: torch@2.1, cudnn: "8.9", cuda_flavor: big, nccl: "2.x"})", ""));
  const std::string out = errors_of("lockstep.yaml");
  CHECK(out.find("stack.framework: unknown framework 'torch'; expected one of: pytorch, tensorflow, jax") !=
        std::string::npos);
  CHECK(out.find("stack.cuda_flavor: unknown CUDA flavor 'big'") != std::string::npos);
  CHECK(out.find("stack.nccl: ") != std::string::npos);
  CHECK(out.find("stack.cudnn: needs stack.cuda (or a framework)") != std::string::npos);
}

TEST_CASE_METHOD(StackFixture, "stack: choices go into the image config", "[stack]") {
  const envspec::StackImageConfig cfg =
      envspec::stack_image_config(solved(R"({framework: pytorch@2.1, cuda: "12"})"));
  REQUIRE(cfg.env.size() == 1);
  CHECK(cfg.env[0].first == "NVIDIA_REQUIRE_CUDA");
  CHECK(cfg.env[0].second == "cuda>=12.1,driver>=530.30.02,arch>=5.0");
  CHECK(cfg.labels.at("dev.lockstep.stack.framework") == "pytorch 2.1.0 cu121");
  CHECK(cfg.labels.at("dev.lockstep.stack.nccl") == "2.18.1");
  CHECK(cfg.labels.at("dev.lockstep.gpu.min-cc") == "5.0");
}

TEST_CASE_METHOD(StackFixture, "stack: the lock records the choices and reads them back strictly",
                 "[stack][lock]") {
  envspec::Lock lock;
  lock.tool = "lockstep 0.1.0";
  lock.spec_digest = sha256_of("spec");
  lock.platform = "linux/amd64";
  lock.inputs = nlohmann::json::object();
  lock.stack = solved(R"({framework: pytorch@2.1, cuda: "12", mpi: openmpi@4.1})");
  const std::string text = envspec::render_lock(lock);
  // One choice per line, after the stack's summary keys.
  CHECK(text.find("  \"stack\": {\"recipes\":\"builtin\",\"recipes-digest\":\"sha256:") != std::string::npos);
  CHECK(
      text.find(
          "\n    "
          "{\"component\":\"framework\",\"name\":\"pytorch\",\"version\":\"2.1.0\",\"variant\":\"cu121\"") !=
      std::string::npos);
  Result<envspec::Lock> back = envspec::parse_lock(text, "lockstep.lock");
  REQUIRE(back.ok());
  REQUIRE(back->stack.has_value());
  CHECK(*back->stack == *lock.stack);
  CHECK(envspec::render_lock(*back) == text);

  std::string bad = text;
  bad.replace(bad.find("\"via\":\"wheels\""), 14, "\"via\":\"pixi\"");
  Result<envspec::Lock> r = envspec::parse_lock(bad, "lockstep.lock");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("stack.choices[1].via: expected apt, wheels, conda or base, found 'pixi'") !=
        std::string::npos);
}

TEST_CASE_METHOD(StackFixture,
                 "stack: every framework build in the recipes can be asked for by version and CUDA",
                 "[stack]") {
  Result<const envspec::RecipeSet*> recipes = envspec::builtin_recipes();
  REQUIRE(recipes.ok());
  int solved_count = 0;
  for (const envspec::FrameworkRecipe& fw : (*recipes)->frameworks) {
    for (const envspec::FrameworkRelease& rel : fw.releases) {
      if (!rel.why.usable() || rel.series == "*") {
        continue;
      }
      for (const envspec::FrameworkVariant& v : rel.variants) {
        // Wheels that carry an exact CUDA X.Y (not a system range).
        if (!v.why.usable() || v.cuda.empty() || v.cuda.find_first_of("<>=,") != std::string::npos) {
          continue;
        }
        const std::string stack =
            "{framework: " + fw.name + "@" + rel.versions.front() + ", cuda: \"" + v.cuda + "\"}";
        INFO(stack);
        Result<envspec::StackSolution> r = solve(stack, ""); // no Debian base: no Python constraint
        REQUIRE(r.ok());
        const envspec::LockedStack& st = r->locked;
        CHECK(st.cuda == v.cuda.substr(0, v.cuda.find('.', v.cuda.find('.') + 1)));
        CHECK(st.nvidia_require_cuda.rfind("cuda>=" + st.cuda, 0) == 0);
        CHECK_FALSE(st.driver_floor.empty());
        CHECK(st.choices.back().component == "framework");
        CHECK(st.choices.back().version == rel.versions.front());
        ++solved_count;
      }
    }
  }
  CHECK(solved_count >= 40);
}

TEST_CASE_METHOD(StackFixture, "stack: over conda every part is a conda request", "[stack][conda]") {
  envspec::StackContext conda;
  conda.conda = true;
  conda.base_cuda = "12.4"; // a base's CUDA plays no part over conda
  conda.base_cuda_package = "cuda-cudart-12-4 12.4.127-1";
  Result<envspec::StackSolution> r = solve(
      R"({framework: "pytorch@>=2.1,<2.4", cuda: "12.1", nccl: "2.18", python: "3.11", mpi: openmpi@4.1})",
      "", &conda);
  REQUIRE(r.ok());
  CHECK(r->apt.empty());
  CHECK(r->pip.empty());
  std::vector<std::string> texts;
  for (const envspec::PackageRequest& q : r->conda) {
    texts.push_back(q.text + (q.if_offered ? " ?" : "") + " <- " + q.origin);
  }
  CHECK(texts == std::vector<std::string>{"python 3.11.* <- stack.python",
                                          "cuda-version 12.1.* <- stack.cuda", "nccl 2.18.* <- stack.nccl",
                                          "openmpi 4.1.* <- stack.mpi",
                                          "pytorch >=2.1,<2.4 *cuda* <- stack.framework",
                                          "pytorch-cuda 12.1.* ? <- stack.framework"});
  CHECK(summary(r->locked) == std::vector<std::string>{"python=3.11(conda)", "cuda=12.1(conda)",
                                                       "nccl=2.18(conda)", "mpi=openmpi 4.1(conda)",
                                                       "framework=pytorch >=2.1,<2.4 cuda(conda)"});
  CHECK(r->locked.nvidia_require_cuda.rfind("cuda>=12.1,driver>=", 0) == 0);

  // JAX's CUDA code is jaxlib's build.
  r = solve(R"({framework: jax@0.4.30, cuda: "12.4"})", "", &conda);
  REQUIRE(r.ok());
  texts.clear();
  for (const envspec::PackageRequest& q : r->conda) {
    texts.push_back(q.text);
  }
  CHECK(texts == std::vector<std::string>{"cuda-version 12.4.*", "jax 0.4.30.*", "jaxlib * *cuda*"});

  // What conda solved completes the report.
  envspec::LockedStack st = r->locked;
  const auto artifact = [](const std::string& name, const std::string& version, const std::string& build) {
    envspec::LockedArtifact a;
    a.kind = "conda";
    a.name = name;
    a.version = version;
    a.url = "https://conda.example/cf/linux-64/" + name + "-" + version + "-" + build + ".conda";
    a.reason = "needed by jaxlib";
    a.conda = envspec::LockedCondaRecord{};
    a.conda->build = build;
    return a;
  };
  Result<const envspec::RecipeSet*> recipes = envspec::builtin_recipes();
  REQUIRE(recipes.ok());
  envspec::complete_conda_stack(
      st, **recipes,
      {artifact("cuda-version", "12.4", "h3060b56_3"), artifact("jax", "0.4.30", "pyhd8ed1ab_0"),
       artifact("jaxlib", "0.4.30", "cuda120py311h_200"), artifact("cudnn", "9.1.1.17", "hbdc656c_0"),
       artifact("python", "3.11.9", "h_cpython")});
  CHECK(summary(st) == std::vector<std::string>{"python=3.11.9(conda)", "cuda=12.4(conda)",
                                                "cudnn=9.1.1.17(conda)", "framework=jax 0.4.30 cuda(conda)"});
  const auto& fw = st.choices.back().facts;
  CHECK(std::find(fw.begin(), fw.end(),
                  "conda solved jaxlib 0.4.30 cuda120py311h_200 from https://conda.example/cf/linux-64") !=
        fw.end());
}
