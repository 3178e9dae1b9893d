// The stack recipes: the version grammar (constraints, ordering, prefixes), every recipe file kind
// read from a small text, the loader's located errors asserted whole, the CUDA helpers (compute
// capability floor, driver floor), where recipe files come from (embedded, LOCKSTEP_RECIPES_DIR, a
// recipes directory) and the digest the lock records.
#include "envspec/stack/recipes.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>

using namespace lockstep;
using namespace lockstep::envspec;

namespace {

namespace fs = std::filesystem;

/// Sets (or with nullptr unsets) an environment variable for one scope, restoring it afterwards.
class ScopedEnv {
public:
  ScopedEnv(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) {
      m_old = old;
    }
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (m_old) {
      ::setenv(m_name, m_old->c_str(), 1);
    } else {
      ::unsetenv(m_name);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
  const char* m_name;
  std::optional<std::string> m_old;
};

/// A small but complete recipe set: every file kind with a few rows.
std::map<std::string, std::string> small_set() {
  return {
      {"cuda/cuda.yaml", R"(recipe: cuda
sources: {nv: NVIDIA CUDA release notes https://docs.nvidia.com/cuda/}
lines:
  - {cuda: "13.4", driver_branch: R615, source: nv}
  - {cuda: "12.4", source: nv}
  - {cuda: "12.1", source: nv}
mvc:
  - {major: "13", linux_min: "580", source: nv}
  - {major: "12", linux_min: "525", linux_below: "580", source: nv}
  - {major: "11", linux_min: "450.80.02", linux_below: "525", source: nv, confidence: unverified}
compute:
  - {cuda: "11.0", min_cc: "3.5", source: nv}
  - {cuda: "12.0", min_cc: "5.0", source: nv}
  - {cuda: "12.8", added: ["10.0", "12.0"], source: nv}
  - {cuda: "12.9", min_cc: "7.0", source: nv, confidence: unverified, note: a guess}
  - {cuda: "13.0", min_cc: "7.5", source: nv}
apt:
  repo: "https://developer.download.nvidia.com/compute/cuda/repos/{distro}/{arch}/"
  flavors:
    base: [{name: "cuda-cudart-{cuda_major}-{cuda_minor}"}]
    runtime: [{name: "cuda-libraries-{cuda_major}-{cuda_minor}"}]
    devel: [{name: "cuda-toolkit-{cuda_major}-{cuda_minor}"}]
  source: nv
)"},
      {"cuda/drivers.yaml", R"(recipe: cuda-drivers
sources: {nv: Table 3}
toolkit_drivers:
  - {cuda: "12.2.0", release: GA, linux: "535.54.03", source: nv}
  - {cuda: "12.1.1", release: Update 1, linux: "530.30.02", source: nv}
  - {cuda: "12.1.0", release: GA, linux: "530.30.02", source: nv}
)"},
      {"cudnn/cudnn.yaml", R"(recipe: cudnn
sources: {nv: cuDNN support matrix}
series:
  - {series: "9.1", cuda: {"12": "12.0-12.4", "11": "11.8"}, min_cc: "5.0", source: nv}
  - {series: "8.9", cuda: {"11": "11.0-11.8", "12": "12.0-12.2"}, min_cc: "5.0", source: nv}
apt:
  "8": [{name: libcudnn8, version: "{version}*-1+cuda{cuda_major}.*"}]
  "9": [{name: "libcudnn9-cuda-{cuda_major}", version: "{version}*-1"}]
pip: "nvidia-cudnn-cu{cuda_major}"
rules: [{text: cuDNN 9 ships one package per CUDA major, source: nv}]
)"},
      {"nccl/nccl.yaml", R"(recipe: nccl
sources: {nv: NCCL release notes}
releases:
  - {nccl: "2.19.3", cuda: ["12.3", "12.2", "12"], source: nv}
  - {nccl: "2.18.1", cuda: ["12.1", "11.8", "12", "11"], source: nv}
apt:
  - {name: libnccl2, version: "{version}*-*+cuda{cuda}"}
  - {name: libnccl-dev, version: "{version}*-*+cuda{cuda}"}
pip: "nvidia-nccl-cu{cuda_major}"
rules: [{text: NCCL wheels carry their own CUDA, source: nv}]
)"},
      {"openmpi/openmpi.yaml", R"(recipe: openmpi
sources: {ompi: Open MPI docs}
series:
  - {series: "5.0", pmix: ">=4.2.0", soname: libmpi.so.40, source: ompi}
  - series: "4.1"
    pmix: "3.2"
    soname: libmpi.so.40
    notes: [{text: bundles PMIx 3.2, source: ompi}]
    source: ompi
apt: [{name: openmpi-bin, version: "{version}*"}, {name: libopenmpi-dev, version: "{version}*"}]
rules: [{text: Open MPI 4.x and 5.x share libmpi.so.40, source: ompi}]
)"},
      {"mpich/mpich.yaml", R"(recipe: mpich
sources: {mpich: MPICH ABI}
series:
  - {series: "4.0", soname: libmpi.so.12, source: mpich}
apt: [{name: mpich}, {name: libmpich-dev}]
rules: []
)"},
      {"ucx/ucx.yaml", R"(recipe: ucx
sources: {ucx: UCX docs}
apt: [{name: libucx0}]
facts: [{text: UCX 1.x keeps its ABI, source: ucx, confidence: secondary}]
)"},
      {"pmix/pmix.yaml", R"(recipe: pmix
sources: {pmix: PMIx docs}
apt: [{name: libpmix2}]
facts: []
)"},
      {"python/python.yaml", R"(recipe: python
sources: {debian: Debian package tracker}
versions:
  - {python: "3.12", debian: [trixie], source: debian}
  - {python: "3.11", debian: [bookworm], source: debian}
apt: [{name: "python{version}"}]
)"},
      {"pytorch/pytorch.yaml", R"(recipe: framework
name: pytorch
package: torch
sources: {rel: PyTorch RELEASE.md, logs: pip install logs}
rules: [{text: one CUDA per wheel, source: rel}]
releases:
  - series: "2.1"
    versions: ["2.1.2", "2.1.0"]
    python: ">=3.8,<=3.11"
    source: rel
    variants:
      - tag: cu121
        cuda: "12.1"
        cudnn: "8.9.2.26"
        nccl: "2.18.1"
        archs: ["5.0", "8.0", "9.0"]
        pypi_default: true
        status: stable
        index: "https://download.pytorch.org/whl/cu121"
        wheels: ["torch=={version}"]
        pins: {nvidia-nccl-cu12: "2.18.1", triton: "2.1.0"}
        source: [logs, rel]
        confidence: observed
      - tag: cu118
        cuda: "11.8"
        status: stable
        index: "https://download.pytorch.org/whl/cu118"
        wheels: ["torch=={version}"]
        source: rel
)"},
      {"tensorflow/tensorflow.yaml", R"(recipe: framework
name: tensorflow
package: tensorflow
sources: {tested: TensorFlow tested build configurations}
releases:
  - series: "2.15"
    versions: ["2.15.0"]
    python: ">=3.9,<=3.11"
    source: tested
    variants:
      - {tag: tested, cuda: "12.2", cudnn: "8.9", status: stable, wheels: ["tensorflow=={version}"],
         system: [cuda, cudnn], source: tested}
)"},
      {"jax/jax.yaml", R"(recipe: framework
name: jax
package: jax
sources: {jax: JAX installation guide}
releases:
  - series: "*"
    versions: []
    python: ">=3.10"
    source: jax
    variants:
      - tag: cuda12
        cuda: ">=12.1"
        cudnn: ">=9.8,<10"
        nccl: ">=2.18"
        driver_min: "525"
        min_cc: "5.2"
        status: stable
        wheels: ["jax=={version}", "jaxlib=={version}", "jax-cuda12-plugin=={version}", "jax-cuda12-pjrt=={version}"]
        system: [cuda, cudnn, nccl]
        source: jax
)"},
  };
}

/// Parses the small set with `rel` replaced by `text`.
Result<RecipeSet> parse_with(const std::string& rel, const std::string& text) {
  auto files = small_set();
  files[rel] = text;
  return parse_recipes(files, "recipes", RecipeOrigin{"builtin", "", "", {}});
}

/// The whole rendered error of parsing the small set with `rel` replaced by `text`.
std::string error_of(const std::string& rel, const std::string& text) {
  auto r = parse_with(rel, text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().rendered);
  return r.error().message;
}

bool matches(std::string_view constraint, std::string_view version) {
  auto c = VersionConstraint::parse(constraint);
  REQUIRE_OK(c);
  return c->matches(version);
}

std::string parse_error(std::string_view constraint) {
  auto c = VersionConstraint::parse(constraint);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().code == ExitCode::invalid_input);
  return c.error().message;
}

} // namespace

// ---- The version grammar ----------------------------------------------------------------------

TEST_CASE("A bare version matches itself and what it is a prefix of at a dot", "[recipes]") {
  struct Case {
    const char* constraint;
    const char* version;
    bool expected;
  };
  const Case cases[] = {
      {"12.1", "12.1", true},          {"12.1", "12.1.0", true},     {"12.1", "12.1.105", true},
      {"12.1", "12.10", false},        {"12.1", "12.10.1", false},   {"12.1", "12", false},
      {"12.1", "12.2", false},         {"12", "12.4.1", true},       {"12", "120.1", false},
      {"12.1.0", "12.1", true},        {"12.1.5", "12.1", false},    {"12.1", "12.1rc1", true},
      {"2.1.0rc1", "2.1.0rc1", true},  {"2.1.0rc1", "2.1.0", false}, {"2.1.0rc1", "2.1.0rc2", false},
      {"530.30.02", "530.30.2", true},
  };
  for (const Case& c : cases) {
    INFO(c.constraint << " vs " << c.version);
    CHECK(matches(c.constraint, c.version) == c.expected);
  }
}

TEST_CASE("Constraint clauses compare numerically and must all hold", "[recipes]") {
  struct Case {
    const char* constraint;
    const char* version;
    bool expected;
  };
  const Case cases[] = {
      {">=9.8,<10", "9.8", true},
      {">=9.8,<10", "9.8.0.1", true},
      {">=9.8,<10", "9.10.2", true},
      {">=9.8,<10", "9.7.9", false},
      {">=9.8,<10", "10", false},
      {">=9.8,<10", "10.0.1", false},
      {">= 9.8 , < 10", "9.9", true},
      {"==2.18.1", "2.18.1", true},
      {"==2.18.1", "2.18.1.0", true},
      {"==2.18.1", "2.18.10", false},
      {"!=2.18.2", "2.18.1", true},
      {"!=2.18.2", "2.18.2", false},
      {">2.18,<=2.19.3", "2.18", false},
      {">2.18,<=2.19.3", "2.18.1", true},
      {">2.18,<=2.19.3", "2.19.3", true},
      {">2.18,<=2.19.3", "2.19.4", false},
      {">=3.8,<=3.11", "3.11", true},
      {">=3.8,<=3.11", "3.12", false},
      {">=2.1", "2.1.0rc1", false},
      {"<2.1", "2.1.0rc1", true},
      {">=2.1.0rc1", "2.1.0rc2", true},
      {">=12.1", "not-a-version", false},
      {"12", "", false},
  };
  for (const Case& c : cases) {
    INFO(c.constraint << " vs " << c.version);
    CHECK(matches(c.constraint, c.version) == c.expected);
  }
  auto prefix = VersionConstraint::parse("12.1");
  REQUIRE_OK(prefix);
  CHECK(prefix->is_prefix());
  CHECK(prefix->text == "12.1");
  auto range = VersionConstraint::parse(">=9.8, <10");
  REQUIRE_OK(range);
  CHECK_FALSE(range->is_prefix());
  REQUIRE(range->clauses.size() == 2);
  CHECK(range->clauses[0].op == ">=");
  CHECK(range->clauses[0].version == "9.8");
  CHECK(range->clauses[1].op == "<");
  CHECK(range->clauses[1].version == "10");
  CHECK(range->text == ">=9.8, <10");
}

TEST_CASE("A malformed constraint says what is wrong with it", "[recipes]") {
  CHECK(parse_error("") ==
        "empty version constraint; write a version such as \"12.1\" or clauses such as \">=9.8,<10\"");
  CHECK(parse_error("  ") == parse_error(""));
  CHECK(parse_error(">=9.8,,<10") ==
        "version constraint \">=9.8,,<10\": empty clause; clauses are separated by single commas");
  CHECK(parse_error("12.1,") ==
        "version constraint \"12.1,\": empty clause; clauses are separated by single commas");
  CHECK(parse_error("~=2.1") ==
        "version constraint \"~=2.1\": unknown operator '~='; expected >=, <=, >, <, ==, "
        "!= or a bare version");
  CHECK(parse_error("=>2.1") ==
        "version constraint \"=>2.1\": unknown operator '=>'; expected >=, <=, >, <, ==, "
        "!= or a bare version");
  CHECK(parse_error("=2.1") ==
        "version constraint \"=2.1\": unknown operator '='; expected >=, <=, >, <, ==, != "
        "or a bare version");
  CHECK(parse_error(">=") == "version constraint \">=\": '>=' needs a version after it");
  CHECK(parse_error("12.x") ==
        "version constraint \"12.x\": '12.x' is not a dotted version such as 12.1 or 2.1.0rc1");
  CHECK(parse_error("==12.1.*") ==
        "version constraint \"==12.1.*\": '12.1.*' is not a dotted version such as 12.1 or 2.1.0rc1");
  CHECK(parse_error("v12") ==
        "version constraint \"v12\": 'v12' is not a dotted version such as 12.1 or 2.1.0rc1");
  CHECK(parse_error("1.0dev1") ==
        "version constraint \"1.0dev1\": '1.0dev1' is not a dotted version such as 12.1 or 2.1.0rc1");
  CHECK(parse_error("2.1rc1.0") ==
        "version constraint \"2.1rc1.0\": '2.1rc1.0' is not a dotted version such as 12.1 or 2.1.0rc1");
  CHECK(parse_error("12. 1") ==
        "version constraint \"12. 1\": '12. 1' is not a dotted version such as 12.1 or 2.1.0rc1");
  CHECK(parse_error("1.2.3.4.5.6.7.8.9") ==
        "version constraint \"1.2.3.4.5.6.7.8.9\": '1.2.3.4.5.6.7.8.9' is not "
        "a dotted version such as 12.1 or 2.1.0rc1");
  CHECK(parse_error(">1,>2,>3,>4,>5,>6,>7,>8,>9") ==
        "version constraint \">1,>2,>3,>4,>5,>6,>7,>8,>9\": more than 8 clauses");
  CHECK(parse_error(std::string(300, '1')) == "version constraint is longer than 256 characters");
}

TEST_CASE("Dotted versions compare part by part, pre-releases first", "[recipes]") {
  struct Case {
    const char* a;
    const char* b;
    int expected;
  };
  const Case cases[] = {
      {"12.1", "12.1.0", 0},        {"12.1", "12.10", -1},
      {"12.9", "12.10", -1},        {"12.10", "12.9", 1},
      {"530.30.02", "530.30.2", 0}, {"8.9.2.26", "8.9.7", -1},
      {"2.1.0rc1", "2.1.0", -1},    {"2.1rc1", "2.1.0", -1},
      {"2.1.0a1", "2.1.0b1", -1},   {"2.1.0b2", "2.1.0rc1", -1},
      {"2.1.0rc1", "2.1.0rc2", -1}, {"2.1.0rc", "2.1.0rc0", 0},
      {"2.1.1rc1", "2.1.0", 1},     {"abc", "1.0", 1},
      {"1.0", "abc", -1},           {"abc", "abd", -1},
  };
  for (const Case& c : cases) {
    INFO(c.a << " vs " << c.b);
    CHECK(compare_dotted(c.a, c.b) == c.expected);
  }
  CHECK(dotted_prefix("12.1", "12.1.105"));
  CHECK(dotted_prefix("12.1", "12.1"));
  CHECK_FALSE(dotted_prefix("12.1", "12.10"));
  CHECK_FALSE(dotted_prefix("12.1.105", "12.1"));
  CHECK(dotted_prefix("x", "x"));
  CHECK_FALSE(dotted_prefix("x", "x.1"));
}

TEST_CASE("Confidence names", "[recipes]") {
  CHECK(to_string(Confidence::primary) == "primary");
  CHECK(to_string(Confidence::secondary) == "secondary");
  CHECK(to_string(Confidence::observed) == "observed");
  CHECK(to_string(Confidence::unverified) == "unverified");
}

// ---- Every file kind --------------------------------------------------------------------------

TEST_CASE("Every recipe file kind is read into the model", "[recipes]") {
  auto set = parse_recipes(small_set(), "recipes", RecipeOrigin{"git", "https://example.org/r.git", "", {}});
  REQUIRE_OK(set);
  CHECK(set->origin.kind == "git");
  CHECK(set->origin.url == "https://example.org/r.git");
  CHECK(set->origin.digest.algorithm() == "sha256");

  const CudaRecipe& cuda = set->cuda;
  REQUIRE(cuda.lines.size() == 3);
  CHECK(cuda.lines[0].version == "13.4");
  CHECK(cuda.lines[0].driver_branch == "R615");
  CHECK(cuda.lines[0].why.sources == std::vector<std::string>{"nv"});
  CHECK(cuda.lines[0].why.confidence == Confidence::primary);
  CHECK(cuda.lines[0].why.where == "recipes/cuda/cuda.yaml:4");
  CHECK(cuda.lines[2].driver_branch.empty());
  REQUIRE(cuda.mvc.size() == 3);
  CHECK(cuda.mvc[1].major == "12");
  CHECK(cuda.mvc[1].linux_min == "525");
  CHECK(cuda.mvc[1].linux_below == "580");
  CHECK(cuda.mvc[0].linux_below.empty());
  CHECK(cuda.mvc[2].why.confidence == Confidence::unverified);
  CHECK_FALSE(cuda.mvc[2].why.usable());
  CHECK(cuda.mvc[1].why.usable());
  REQUIRE(cuda.compute.size() == 5);
  CHECK(cuda.compute[2].min_cc.empty());
  CHECK(cuda.compute[2].added == std::vector<std::string>{"10.0", "12.0"});
  CHECK(cuda.apt_repo == "https://developer.download.nvidia.com/compute/cuda/repos/{distro}/{arch}/");
  REQUIRE(cuda.apt.size() == 3);
  CHECK(cuda.apt.at("base")[0].name == "cuda-cudart-{cuda_major}-{cuda_minor}");
  CHECK(cuda.apt.at("devel")[0].name == "cuda-toolkit-{cuda_major}-{cuda_minor}");
  CHECK(cuda.apt.at("devel")[0].version.empty());
  REQUIRE(cuda.sources.size() == 1);
  CHECK(cuda.sources[0].id == "nv");
  CHECK(cuda.sources[0].text == "NVIDIA CUDA release notes https://docs.nvidia.com/cuda/");
  CHECK(cuda.drivers.rows.size() == 3);

  REQUIRE(set->cudnn.series.size() == 2);
  CHECK(set->cudnn.series[1].series == "8.9");
  CHECK(set->cudnn.series[1].cuda ==
        std::map<std::string, std::string>{{"11", "11.0-11.8"}, {"12", "12.0-12.2"}});
  CHECK(set->cudnn.series[0].cuda.at("11") == "11.8");
  CHECK(set->cudnn.series[1].min_cc == "5.0");
  CHECK(set->cudnn.apt.at("8")[0].version == "{version}*-1+cuda{cuda_major}.*");
  CHECK(set->cudnn.apt.at("9")[0].name == "libcudnn9-cuda-{cuda_major}");
  CHECK(set->cudnn.pip == "nvidia-cudnn-cu{cuda_major}");
  REQUIRE(set->cudnn.rules.size() == 1);
  CHECK(set->cudnn.rules[0].text == "cuDNN 9 ships one package per CUDA major");

  REQUIRE(set->nccl.releases.size() == 2);
  CHECK(set->nccl.releases[1].version == "2.18.1");
  CHECK(set->nccl.releases[1].cuda_builds == std::vector<std::string>{"12.1", "11.8", "12", "11"});
  REQUIRE(set->nccl.apt.size() == 2);
  CHECK(set->nccl.apt[0].name == "libnccl2");
  CHECK(set->nccl.apt[0].version == "{version}*-*+cuda{cuda}");
  CHECK(set->nccl.pip == "nvidia-nccl-cu{cuda_major}");

  const MpiRecipe* ompi = set->mpi("openmpi");
  REQUIRE(ompi == &set->openmpi);
  CHECK(ompi->impl == "openmpi");
  REQUIRE(ompi->series.size() == 2);
  CHECK(ompi->series[0].pmix == ">=4.2.0");
  CHECK(ompi->series[1].pmix == "3.2");
  CHECK(ompi->series[1].soname == "libmpi.so.40");
  REQUIRE(ompi->series[1].notes.size() == 1);
  CHECK(ompi->series[1].notes[0].text == "bundles PMIx 3.2");
  CHECK(ompi->series[1].notes[0].why.where == "recipes/openmpi/openmpi.yaml:8");
  CHECK(ompi->apt[1].name == "libopenmpi-dev");
  CHECK(set->mpi("mpich") == &set->mpich);
  CHECK(set->mpich.series[0].soname == "libmpi.so.12");
  CHECK(set->mpich.rules.empty());
  CHECK(set->mpi("intelmpi") == nullptr);

  CHECK(set->ucx.name == "ucx");
  CHECK(set->ucx.apt[0].name == "libucx0");
  REQUIRE(set->ucx.facts.size() == 1);
  CHECK(set->ucx.facts[0].why.confidence == Confidence::secondary);
  CHECK(set->pmix.name == "pmix");
  CHECK(set->pmix.facts.empty());

  REQUIRE(set->python.versions.size() == 2);
  CHECK(set->python.versions[1].version == "3.11");
  CHECK(set->python.versions[1].debian == std::vector<std::string>{"bookworm"});
  CHECK(set->python.apt[0].name == "python{version}");

  REQUIRE(set->frameworks.size() == 3);
  CHECK(set->frameworks[0].name == "pytorch");
  CHECK(set->frameworks[1].name == "tensorflow");
  CHECK(set->frameworks[2].name == "jax");
  const FrameworkRecipe* torch = set->framework("pytorch");
  REQUIRE(torch == &set->frameworks[0]);
  CHECK(torch->package == "torch");
  REQUIRE(torch->releases.size() == 1);
  const FrameworkRelease& r21 = torch->releases[0];
  CHECK(r21.series == "2.1");
  CHECK(r21.versions == std::vector<std::string>{"2.1.2", "2.1.0"});
  CHECK(r21.python == ">=3.8,<=3.11");
  REQUIRE(r21.variants.size() == 2);
  const FrameworkVariant& cu121 = r21.variants[0];
  CHECK(cu121.tag == "cu121");
  CHECK(cu121.cuda == "12.1");
  CHECK(cu121.cudnn == "8.9.2.26");
  CHECK(cu121.nccl == "2.18.1");
  CHECK(cu121.archs == std::vector<std::string>{"5.0", "8.0", "9.0"});
  CHECK(cu121.pypi_default);
  CHECK(cu121.status == "stable");
  CHECK(cu121.index == "https://download.pytorch.org/whl/cu121");
  CHECK(cu121.wheels == std::vector<std::string>{"torch=={version}"});
  REQUIRE(cu121.pins.size() == 2);
  CHECK(cu121.pins[0].name == "nvidia-nccl-cu12");
  CHECK(cu121.pins[0].version == "2.18.1");
  CHECK(cu121.pins[1].name == "triton");
  CHECK(cu121.why.sources == std::vector<std::string>{"logs", "rel"});
  CHECK(cu121.why.confidence == Confidence::observed);
  CHECK(cu121.system.empty());
  CHECK_FALSE(r21.variants[1].pypi_default);
  CHECK(r21.variants[1].cudnn.empty());

  const FrameworkRecipe* tf = set->framework("tensorflow");
  REQUIRE(tf != nullptr);
  CHECK(tf->releases[0].variants[0].system == std::vector<std::string>{"cuda", "cudnn"});
  CHECK(tf->releases[0].variants[0].cudnn == "8.9");
  const FrameworkRecipe* jax = set->framework("jax");
  REQUIRE(jax != nullptr);
  CHECK(jax->releases[0].series == "*");
  CHECK(jax->releases[0].versions.empty());
  const FrameworkVariant& cuda12 = jax->releases[0].variants[0];
  CHECK(cuda12.cudnn == ">=9.8,<10");
  CHECK(cuda12.driver_min == "525");
  CHECK(cuda12.min_cc == "5.2");
  CHECK(cuda12.wheels.size() == 4);
  CHECK(cuda12.system == std::vector<std::string>{"cuda", "cudnn", "nccl"});
  CHECK(set->framework("mxnet") == nullptr);
}

TEST_CASE("The CUDA helpers use only usable rows", "[recipes]") {
  auto set = parse_recipes(small_set(), "recipes", RecipeOrigin{"builtin", "", "", {}});
  REQUIRE_OK(set);
  const CudaRecipe& cuda = set->cuda;
  CHECK(cuda.min_cc_for("10.2").empty());
  CHECK(cuda.min_cc_for("11.8") == "3.5");
  CHECK(cuda.min_cc_for("12.0") == "5.0");
  CHECK(cuda.min_cc_for("12.8") == "5.0"); // 12.8 only added capabilities
  CHECK(cuda.min_cc_for("12.9") == "5.0"); // the 12.9 row is unverified
  CHECK(cuda.min_cc_for("13.0") == "7.5");
  CHECK(cuda.min_cc_for("13.4") == "7.5");

  CHECK(cuda.driver_floor_for("12.1") == "530.30.02"); // the GA row, not Update 1
  CHECK(cuda.driver_floor_for("12.1.105") == "530.30.02");
  CHECK(cuda.driver_floor_for("12.2") == "535.54.03");
  CHECK(cuda.driver_floor_for("12.4") == "525"); // no GA row: the 12.x MVC minimum
  CHECK(cuda.driver_floor_for("13.4") == "580");
  CHECK(cuda.driver_floor_for("11.8").empty()); // the 11.x MVC row is unverified
  CHECK(cuda.driver_floor_for("10.2").empty());
}

// ---- Errors -------------------------------------------------------------------------------------

TEST_CASE("Unknown keys are located errors", "[recipes]") {
  CHECK(
      error_of("python/python.yaml", R"(recipe: python
sources: {debian: Debian package tracker}
versions:
  - {python: "3.11", debain: [bookworm], source: debian}
apt: [{name: "python{version}"}]
extra: 1
)") ==
      R"(recipes/python/python.yaml:4:22: error: versions[0].debain: unknown key; expected one of: python, debian, source, confidence, note
    4 |   - {python: "3.11", debain: [bookworm], source: debian}
      |                      ^~~~~~
recipes/python/python.yaml:6:1: error: extra: unknown key; expected one of: recipe, sources, versions, apt
    6 | extra: 1
      | ^~~~~
2 errors
)");
}

TEST_CASE("A source must name a key of sources:", "[recipes]") {
  CHECK(
      error_of("ucx/ucx.yaml", R"(recipe: ucx
sources: {ucx: UCX docs}
apt: [{name: libucx0}]
facts:
  - {text: one, source: uxc}
  - {text: two, source: [ucx, nowhere]}
  - {text: three}
)") ==
      R"(recipes/ucx/ucx.yaml:5:25: error: facts[0].source: unknown source 'uxc'; sources are the keys of 'sources:'
    5 |   - {text: one, source: uxc}
      |                         ^~~
recipes/ucx/ucx.yaml:6:31: error: facts[1].source: unknown source 'nowhere'; sources are the keys of 'sources:'
    6 |   - {text: two, source: [ucx, nowhere]}
      |                               ^~~~~~~
recipes/ucx/ucx.yaml:7:5: error: facts[2]: missing key 'source' (where this fact comes from)
    7 |   - {text: three}
      |     ^
3 errors
)");
}

TEST_CASE("Confidence is one of four, and unverified rows are loaded but not usable", "[recipes]") {
  CHECK(
      error_of("ucx/ucx.yaml", R"(recipe: ucx
sources: {ucx: UCX docs}
apt: [{name: libucx0}]
facts: [{text: one, source: ucx, confidence: likely}]
)") ==
      R"(recipes/ucx/ucx.yaml:4:46: error: facts[0].confidence: unknown confidence 'likely'; expected primary, secondary, observed or unverified
    4 | facts: [{text: one, source: ucx, confidence: likely}]
      |                                              ^~~~~~
)");
  auto set = parse_with("ucx/ucx.yaml", R"(recipe: ucx
sources: {ucx: UCX docs}
apt: [{name: libucx0}]
facts: [{text: maybe, source: ucx, confidence: unverified}]
)");
  REQUIRE_OK(set);
  REQUIRE(set->ucx.facts.size() == 1);
  CHECK(set->ucx.facts[0].why.confidence == Confidence::unverified);
  CHECK_FALSE(set->ucx.facts[0].why.usable());
}

TEST_CASE("Package patterns may only use the known placeholders", "[recipes]") {
  CHECK(
      error_of("nccl/nccl.yaml", R"(recipe: nccl
sources: {nv: NCCL release notes}
releases:
  - {nccl: "2.18.1", cuda: ["12.1"], source: nv}
apt:
  - {name: libnccl2, version: "{version}*-*+cuda{cuda_version}"}
  - {name: "libnccl-{cuda_major", version: "{version}*"}
  - {name: LibNccl}
pip: "nvidia-nccl-cu{major"
)") ==
      R"(recipes/nccl/nccl.yaml:6:31: error: apt[0].version: unknown placeholder '{cuda_version}'; expected {version}, {major}, {minor}, {cuda}, {cuda_major} or {cuda_minor}
    6 |   - {name: libnccl2, version: "{version}*-*+cuda{cuda_version}"}
      |                               ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
recipes/nccl/nccl.yaml:7:12: error: apt[1].name: a '{' without its '}'
    7 |   - {name: "libnccl-{cuda_major", version: "{version}*"}
      |            ^~~~~~~~~~~~~~~~~~~~~
recipes/nccl/nccl.yaml:8:12: error: apt[2].name: 'LibNccl' is not a Debian package name (lowercase letters, digits, '.', '+', '-', and placeholders)
    8 |   - {name: LibNccl}
      |            ^~~~~~~
recipes/nccl/nccl.yaml:9:6: error: pip: a '{' without its '}'
    9 | pip: "nvidia-nccl-cu{major"
      |      ^~~~~~~~~~~~~~~~~~~~~~
4 errors
)");
}

TEST_CASE("Newest-first lists are checked for order and duplicates", "[recipes]") {
  CHECK(
      error_of("cuda/cuda.yaml", R"(recipe: cuda
sources: {nv: notes}
lines:
  - {cuda: "12.1", source: nv}
  - {cuda: "12.10", source: nv}
  - {cuda: "12.4", source: nv}
  - {cuda: "12.4", source: nv}
mvc:
  - {major: "12", linux_min: "525", linux_below: "520", source: nv}
  - {major: "13", linux_min: "580", source: nv}
compute:
  - {cuda: "12.0", min_cc: "5.0", source: nv}
  - {cuda: "11.0", min_cc: "3.5", source: nv}
apt:
  repo: "https://example.org/{distro}/{arch}/"
  flavors: {base: [{name: cuda-cudart}], runtime: [{name: cuda-libraries}], devel: [{name: cuda-toolkit}]}
  source: nv
)") ==
      R"(recipes/cuda/cuda.yaml:5:12: error: lines[1].cuda: CUDA 12.10 comes after 12.1, but this list is newest first
    5 |   - {cuda: "12.10", source: nv}
      |            ^~~~~~~
recipes/cuda/cuda.yaml:7:12: error: lines[3].cuda: CUDA 12.4 is listed twice (first on line 6)
    7 |   - {cuda: "12.4", source: nv}
      |            ^~~~~~
recipes/cuda/cuda.yaml:9:50: error: mvc[0].linux_below: linux_below 520 is not above linux_min 525
    9 |   - {major: "12", linux_min: "525", linux_below: "520", source: nv}
      |                                                  ^~~~~
recipes/cuda/cuda.yaml:10:13: error: mvc[1].major: CUDA major 13 comes after 12, but this list is newest first
   10 |   - {major: "13", linux_min: "580", source: nv}
      |             ^~~~
recipes/cuda/cuda.yaml:13:12: error: compute[1].cuda: CUDA 11.0 comes after 12.0, but this list is oldest first
   13 |   - {cuda: "11.0", min_cc: "3.5", source: nv}
      |            ^~~~~~
5 errors
)");
}

TEST_CASE("A framework variant names the platforms it has wheels for", "[recipes][platforms]") {
  const std::string errors = error_of("pytorch/pytorch.yaml", R"(recipe: framework
name: pytorch
package: torch
sources: {rel: notes}
releases:
  - series: "2.7"
    versions: ["2.7.1"]
    python: ">=3.9"
    source: rel
    variants:
      - {tag: cu128, cuda: "12.8", status: stable, platforms: [linux/arm64, linux/riscv64], arm64_archs: ["9"], wheels: ["torch=={version}"], source: rel}
      - {tag: cu126, cuda: "12.6", status: stable, arm64_archs: ["9.0"], wheels: ["torch=={version}"], source: rel}
)");
  CHECK_THAT(errors,
             Catch::Contains("releases[0].variants[0].platforms[1]: expected linux/amd64 or linux/arm64, "
                             "found 'linux/riscv64'"));
  CHECK_THAT(errors,
             Catch::Contains("releases[0].variants[0].arm64_archs[0]: expected a compute capability"));
  CHECK_THAT(errors,
             Catch::Contains("releases[0].variants[1].arm64_archs: arm64_archs is for a variant whose "
                             "platforms include linux/arm64"));
}

TEST_CASE("Framework releases: versions in their series, newest first, one PyPI default", "[recipes]") {
  CHECK(
      error_of("pytorch/pytorch.yaml", R"(recipe: framework
name: torch
package: torch
sources: {rel: notes}
releases:
  - series: "2.0"
    versions: ["2.0.0", "2.0.1", "2.1.0", "2.0.x"]
    python: ">=3.8,<=3.11"
    source: rel
    variants:
      - {tag: cu117, cuda: "11.7", pypi_default: true, status: stable, wheels: ["torch=={version}"], source: rel}
      - {tag: cu118, cuda: "11.8.*", pypi_default: true, status: beta, wheels: ["torch=={ver}"], source: rel}
      - {tag: cu117, system: [cuda, cuda, rocm], pins: {triton: "2.0.0.post1"}, status: stable, wheels: [], source: rel}
  - series: "2.1"
    python: "3.8+"
    source: rel
    variants: []
)") ==
      R"(recipes/pytorch/pytorch.yaml:2:7: error: name: expected 'pytorch' (the name of the file's directory), found 'torch'
    2 | name: torch
      |       ^~~~~
recipes/pytorch/pytorch.yaml:7:25: error: releases[0].versions[1]: PyTorch 2.0.1 comes after 2.0.0, but this list is newest first
    7 |     versions: ["2.0.0", "2.0.1", "2.1.0", "2.0.x"]
      |                         ^~~~~~~
recipes/pytorch/pytorch.yaml:7:34: error: releases[0].versions[2]: PyTorch 2.1.0 is not in series 2.0
    7 |     versions: ["2.0.0", "2.0.1", "2.1.0", "2.0.x"]
      |                                  ^~~~~~~
recipes/pytorch/pytorch.yaml:7:43: error: releases[0].versions[3]: expected a dotted version such as 2.18.1, found '2.0.x'
    7 |     versions: ["2.0.0", "2.0.1", "2.1.0", "2.0.x"]
      |                                           ^~~~~~~
recipes/pytorch/pytorch.yaml:12:28: error: releases[0].variants[1].cuda: version constraint "11.8.*": '11.8.*' is not a dotted version such as 12.1 or 2.1.0rc1
   12 |       - {tag: cu118, cuda: "11.8.*", pypi_default: true, status: beta, wheels: ["torch=={ver}"], source: rel}
      |                            ^~~~~~~~
recipes/pytorch/pytorch.yaml:12:52: error: releases[0].variants[1].pypi_default: variants 'cu117' and 'cu118' are both pypi_default; PyPI has one plain wheel
   12 |       - {tag: cu118, cuda: "11.8.*", pypi_default: true, status: beta, wheels: ["torch=={ver}"], source: rel}
      |                                                    ^~~~
recipes/pytorch/pytorch.yaml:12:66: error: releases[0].variants[1].status: expected stable or experimental, found 'beta'
   12 |       - {tag: cu118, cuda: "11.8.*", pypi_default: true, status: beta, wheels: ["torch=={ver}"], source: rel}
      |                                                                  ^~~~
recipes/pytorch/pytorch.yaml:12:81: error: releases[0].variants[1].wheels[0]: unknown placeholder '{ver}'; expected {version}
   12 |       - {tag: cu118, cuda: "11.8.*", pypi_default: true, status: beta, wheels: ["torch=={ver}"], source: rel}
      |                                                                                 ^~~~~~~~~~~~~~
recipes/pytorch/pytorch.yaml:13:15: error: releases[0].variants[2].tag: variant 'cu117' is listed twice in this release
   13 |       - {tag: cu117, system: [cuda, cuda, rocm], pins: {triton: "2.0.0.post1"}, status: stable, wheels: [], source: rel}
      |               ^~~~~
recipes/pytorch/pytorch.yaml:13:37: error: releases[0].variants[2].system[1]: 'cuda' is listed twice
   13 |       - {tag: cu117, system: [cuda, cuda, rocm], pins: {triton: "2.0.0.post1"}, status: stable, wheels: [], source: rel}
      |                                     ^~~~
recipes/pytorch/pytorch.yaml:13:43: error: releases[0].variants[2].system[2]: expected cuda, cudnn or nccl, found 'rocm'
   13 |       - {tag: cu117, system: [cuda, cuda, rocm], pins: {triton: "2.0.0.post1"}, status: stable, wheels: [], source: rel}
      |                                           ^~~~
recipes/pytorch/pytorch.yaml:13:65: error: releases[0].variants[2].pins.triton: expected a dotted version such as 2.18.1, found '2.0.0.post1'
   13 |       - {tag: cu117, system: [cuda, cuda, rocm], pins: {triton: "2.0.0.post1"}, status: stable, wheels: [], source: rel}
      |                                                                 ^~~~~~~~~~~~~
recipes/pytorch/pytorch.yaml:13:105: error: releases[0].variants[2].wheels: expected at least one wheel to request
   13 |       - {tag: cu117, system: [cuda, cuda, rocm], pins: {triton: "2.0.0.post1"}, status: stable, wheels: [], source: rel}
      |                                                                                                         ^
recipes/pytorch/pytorch.yaml:14:13: error: releases[1].series: PyTorch 2.1 comes after 2.0, but this list is newest first
   14 |   - series: "2.1"
      |             ^~~~~
recipes/pytorch/pytorch.yaml:15:13: error: releases[1].python: version constraint "3.8+": '3.8+' is not a dotted version such as 12.1 or 2.1.0rc1
   15 |     python: "3.8+"
      |             ^~~~~~
recipes/pytorch/pytorch.yaml:17:15: error: releases[1].variants: expected at least one variant
   17 |     variants: []
      |               ^
16 errors
)");
}

TEST_CASE("Malformed versions, ranges and kinds are located errors", "[recipes]") {
  CHECK(error_of("cudnn/cudnn.yaml", R"(recipe: cuDNN
sources: {nv: matrix}
series:
  - {series: "9.x", cuda: {"12": "12.0-11.8", "cuda13": "13.0"}, min_cc: "7", source: nv}
  - {series: "8.9", cuda: {"11": "11.0-12.2"}, source: nv}
  - {series: "8.8", source: nv}
apt: {"8": [{name: libcudnn8}], "nine": [{name: libcudnn9}]}
pip: "nvidia-cudnn-cu{cuda_major}"
)") == R"(recipes/cudnn/cudnn.yaml:1:9: error: recipe: expected 'cudnn', found 'cuDNN'
    1 | recipe: cuDNN
      |         ^~~~~
recipes/cudnn/cudnn.yaml:4:14: error: series[0].series: expected a dotted version such as 2.18.1, found '9.x'
    4 |   - {series: "9.x", cuda: {"12": "12.0-11.8", "cuda13": "13.0"}, min_cc: "7", source: nv}
      |              ^~~~~
recipes/cudnn/cudnn.yaml:4:34: error: series[0].cuda.12: expected a range of CUDA 12 versions such as 12.0-12.2, found '12.0-11.8'
    4 |   - {series: "9.x", cuda: {"12": "12.0-11.8", "cuda13": "13.0"}, min_cc: "7", source: nv}
      |                                  ^~~~~~~~~~~
recipes/cudnn/cudnn.yaml:4:47: error: series[0].cuda.cuda13: expected a CUDA major such as 12, found 'cuda13'
    4 |   - {series: "9.x", cuda: {"12": "12.0-11.8", "cuda13": "13.0"}, min_cc: "7", source: nv}
      |                                               ^~~~~~~~
recipes/cudnn/cudnn.yaml:4:74: error: series[0].min_cc: expected a compute capability X.Y such as 8.6, found '7'
    4 |   - {series: "9.x", cuda: {"12": "12.0-11.8", "cuda13": "13.0"}, min_cc: "7", source: nv}
      |                                                                          ^~~
recipes/cudnn/cudnn.yaml:5:34: error: series[1].cuda.11: expected a range of CUDA 11 versions such as 11.0-11.2, found '11.0-12.2'
    5 |   - {series: "8.9", cuda: {"11": "11.0-12.2"}, source: nv}
      |                                  ^~~~~~~~~~~
recipes/cudnn/cudnn.yaml:6:5: error: series[2].cuda: expected a map from CUDA majors to ranges such as {"12": "12.0-12.2"}
    6 |   - {series: "8.8", source: nv}
      |     ^
recipes/cudnn/cudnn.yaml:7:33: error: apt.nine: expected a cuDNN major such as 9, found 'nine'
    7 | apt: {"8": [{name: libcudnn8}], "nine": [{name: libcudnn9}]}
      |                                 ^~~~~~
8 errors
)");
}

TEST_CASE("A missing file, a non-map file and a YAML syntax error are all reported together", "[recipes]") {
  auto files = small_set();
  files.erase("mpich/mpich.yaml");
  files["ucx/ucx.yaml"] = "- just a list\n";
  files["pmix/pmix.yaml"] = "recipe: pmix\nsources: {a: [unclosed\n";
  files["jax/jax.yaml"] = "recipe: framework\nname: [unclosed\n";
  auto r = parse_recipes(files, "team", RecipeOrigin{"dir", "team", "", {}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  const std::string& m = r.error().message;
  CHECK(m.find("team/mpich/mpich.yaml: error: missing recipe file; docs/recipes.md lists every file\n") !=
        std::string::npos);
  CHECK(m.find("team/pmix/pmix.yaml:") != std::string::npos);
  // Each file is parsed once: its syntax error is reported once.
  const std::size_t jax = m.find("team/jax/jax.yaml:");
  REQUIRE(jax != std::string::npos);
  CHECK(m.find("team/jax/jax.yaml:", jax + 1) == std::string::npos);
  CHECK(
      m.find("team/ucx/ucx.yaml:1:1: error: expected a map with 'recipe:' and 'sources:', found a list\n") !=
      std::string::npos);
}

// ---- Where recipes come from -------------------------------------------------------------------

TEST_CASE("The digest covers every file's path, size and bytes in recipe_files() order", "[recipes]") {
  const auto files = small_set();
  auto set = parse_recipes(files, "recipes", RecipeOrigin{"builtin", "", "", {}});
  REQUIRE_OK(set);
  std::string stream;
  REQUIRE(recipe_files().size() == files.size());
  for (const std::string& rel : recipe_files()) {
    const std::string& text = files.at(rel);
    stream += rel + std::string(1, '\0') + std::to_string(text.size()) + std::string(1, '\0') + text;
  }
  CHECK(set->origin.digest == sha256_of(stream));
  CHECK(std::is_sorted(recipe_files().begin(), recipe_files().end()));

  auto changed = small_set();
  changed["ucx/ucx.yaml"] += "# a comment\n";
  auto other = parse_recipes(changed, "recipes", RecipeOrigin{"builtin", "", "", {}});
  REQUIRE_OK(other);
  CHECK(other->origin.digest != set->origin.digest);
}

TEST_CASE("A recipes directory is read whole, refusing symbolic links", "[recipes]") {
  test::TempDirFixture tmp;
  for (const auto& [rel, text] : small_set()) {
    tmp.write("team/" + rel, text);
  }
  auto loaded =
      load_recipes_dir(tmp.dir() / "team", RecipeOrigin{"git", "https://example.org/r.git", "", {}});
  REQUIRE_OK(loaded);
  auto parsed = parse_recipes(small_set(), "recipes", RecipeOrigin{});
  REQUIRE_OK(parsed);
  CHECK(loaded->origin.kind == "git");
  CHECK(loaded->origin.digest == parsed->origin.digest);
  CHECK(loaded->cuda.lines[0].why.where == (tmp.dir() / "team/cuda/cuda.yaml").string() + ":4");

  fs::remove(tmp.dir() / "team/ucx/ucx.yaml");
  fs::create_symlink(tmp.dir() / "team/pmix/pmix.yaml", tmp.dir() / "team/ucx/ucx.yaml");
  auto linked = load_recipes_dir(tmp.dir() / "team", RecipeOrigin{});
  REQUIRE_FALSE(linked.ok());
  CHECK(linked.error().code == ExitCode::invalid_input);
  CHECK(linked.error().message == (tmp.dir() / "team/ucx/ucx.yaml").string() +
                                      " is a symbolic link; a recipes directory must hold plain files");

  auto missing = load_recipes_dir(tmp.dir() / "nowhere", RecipeOrigin{});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ExitCode::io);
}

TEST_CASE("read_builtin_recipe reads the embedded copy, or LOCKSTEP_RECIPES_DIR's", "[recipes]") {
  {
    ScopedEnv env("LOCKSTEP_RECIPES_DIR", nullptr);
    fs::path origin;
    auto text = read_builtin_recipe("gpu/nvidia.yaml", origin);
    REQUIRE_OK(text);
    CHECK(origin == "recipes/gpu/nvidia.yaml");
    CHECK(*text == test::slurp(test::source_dir() / "recipes/gpu/nvidia.yaml"));

    auto absent = read_builtin_recipe("gpu/amd.yaml", origin);
    REQUIRE_FALSE(absent.ok());
    CHECK(absent.error().code == ExitCode::internal);
    auto escaping = read_builtin_recipe("../CMakeLists.txt", origin);
    REQUIRE_FALSE(escaping.ok());
    CHECK(escaping.error().message == "'../CMakeLists.txt' is not a path inside recipes/");
  }
  test::TempDirFixture tmp;
  tmp.write("cuda/cuda.yaml", "recipe: cuda\n");
  ScopedEnv env("LOCKSTEP_RECIPES_DIR", tmp.dir().c_str());
  fs::path origin;
  auto text = read_builtin_recipe("cuda/cuda.yaml", origin);
  REQUIRE_OK(text);
  CHECK(*text == "recipe: cuda\n");
  CHECK(origin == tmp.dir() / "cuda/cuda.yaml");
  auto missing = read_builtin_recipe("nccl/nccl.yaml", origin);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ExitCode::io);
  CHECK(origin == tmp.dir() / "nccl/nccl.yaml");
}

// ---- The recipes shipped in recipes/ ------------------------------------------------------------

TEST_CASE("The built-in recipes load without errors and are the source tree's", "[recipes]") {
  ScopedEnv env("LOCKSTEP_RECIPES_DIR", nullptr);
  auto builtin = builtin_recipes();
  REQUIRE_OK(builtin);
  const RecipeSet& set = **builtin;
  CHECK(set.origin.kind == "builtin");
  auto again = builtin_recipes();
  REQUIRE_OK(again);
  CHECK(*again == *builtin); // parsed once, cached

  // The embedded bytes are the source tree's (the digest covers every file).
  auto source = load_recipes_dir(test::source_dir() / "recipes", RecipeOrigin{"dir", "", "", {}});
  REQUIRE_OK(source);
  CHECK(source->origin.digest == set.origin.digest);

  const FrameworkRecipe* torch = set.framework("pytorch");
  REQUIRE(torch != nullptr);
  const FrameworkVariant* cu121 = nullptr;
  for (const FrameworkRelease& r : torch->releases) {
    for (const FrameworkVariant& v : r.variants) {
      if (r.series == "2.1" && v.tag == "cu121") {
        cu121 = &v;
      }
    }
  }
  REQUIRE(cu121 != nullptr);
  CHECK(cu121->nccl == "2.18.1");
  CHECK(cu121->cuda == "12.1");
  CHECK(set.cuda.driver_floor_for("12.1") == "530.30.02");
  const CudnnSeries* cudnn89 = nullptr;
  for (const CudnnSeries& s : set.cudnn.series) {
    if (s.series == "8.9") {
      cudnn89 = &s;
    }
  }
  REQUIRE(cudnn89 != nullptr);
  // cuDNN 8.9's support matrices list CUDA 12.0-12.2; the recipe may extend the range where a
  // framework's tested configuration shows more (TensorFlow 2.16: CUDA 12.3 with cuDNN 8.9).
  const std::string range12 = cudnn89->cuda.at("12");
  CHECK(range12.starts_with("12.0-"));
  CHECK(compare_dotted(range12.substr(range12.find('-') + 1), "12.2") >= 0);
  CHECK(set.framework("tensorflow") != nullptr);
  CHECK(set.framework("jax") != nullptr);
}

TEST_CASE("A recipes directory without some files takes them from the built-in set", "[recipes]") {
  ScopedEnv env("LOCKSTEP_RECIPES_DIR", nullptr);
  test::TempDirFixture tmp;
  tmp.write("python/python.yaml", small_set().at("python/python.yaml"));
  auto loaded = load_recipes_dir(tmp.dir(), RecipeOrigin{"git", "https://example.org/r.git", "", {}});
  REQUIRE_OK(loaded);
  REQUIRE(loaded->python.versions.size() == 2);
  CHECK(loaded->python.versions[0].why.where == (tmp.dir() / "python/python.yaml").string() + ":4");
  REQUIRE_FALSE(loaded->cuda.lines.empty());
  CHECK(loaded->cuda.lines[0].why.where.starts_with("recipes/cuda/cuda.yaml:"));
  auto builtin = builtin_recipes();
  REQUIRE_OK(builtin);
  CHECK(loaded->origin.digest != (*builtin)->origin.digest);
}
