// The image facts in a build: the CUDA driver table embedded in the binary (and its
// LOCKSTEP_RECIPES_DIR override) and the facts of a lock with the floor filled in. The image side
// (labels, /.lockstep/facts.json, the layer's caching) runs end to end in tests/cli/test_image_facts.sh.
#include "builder/image/image_facts.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>

using namespace lockstep;

namespace {

// Sets (or unsets, for nullptr) an environment variable for one scope.
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

envspec::LockedArtifact deb(const std::string& name, const std::string& version) {
  envspec::LockedArtifact a;
  a.kind = "deb";
  a.name = name;
  a.version = version;
  a.arch = "amd64";
  a.group = "cuda";
  a.sha256 = sha256_of(name);
  a.repo = 0;
  return a;
}

} // namespace

TEST_CASE("The embedded CUDA driver table is the recipe in the source tree", "[image_facts]") {
  ScopedEnv env("LOCKSTEP_RECIPES_DIR", nullptr);
  auto embedded = builder::load_cuda_driver_table();
  REQUIRE_OK(embedded);
  const std::filesystem::path file = test::source_dir() / "recipes/cuda/drivers.yaml";
  auto source = envspec::parse_cuda_driver_table(test::slurp(file), file);
  REQUIRE_OK(source);
  REQUIRE(embedded->rows.size() == source->rows.size());
  for (std::size_t i = 0; i < source->rows.size(); ++i) {
    CHECK(embedded->rows[i].cuda == source->rows[i].cuda);
    CHECK(embedded->rows[i].release == source->rows[i].release);
    CHECK(embedded->rows[i].linux_driver == source->rows[i].linux_driver);
  }
  CHECK(embedded->floor_for("12.1") == "530.30.02");
}

TEST_CASE("Image facts for a lock fill the driver floor from the table", "[image_facts]") {
  ScopedEnv env("LOCKSTEP_RECIPES_DIR", nullptr);
  envspec::Lock lock;
  lock.artifacts = {deb("cuda-cudart-12-4", "12.4.127-1"), deb("libucx0", "1.13.1-1")};
  auto facts = builder::image_facts_for(lock);
  REQUIRE_OK(facts);
  CHECK(facts->cuda.version == "12.4");
  CHECK(facts->cuda_driver_floor == "550.54.14");
  CHECK(facts->ucx.version == "1.13.1");
}

TEST_CASE("LOCKSTEP_RECIPES_DIR replaces the CUDA driver table", "[image_facts]") {
  test::TempDirFixture recipes;
  recipes.write("cuda/drivers.yaml", R"(recipe: cuda-drivers
sources: {mine: a test}
toolkit_drivers:
  - {cuda: "12.4.0", release: GA, linux: "999.1", source: mine}
)");
  ScopedEnv env("LOCKSTEP_RECIPES_DIR", recipes.dir().c_str());
  envspec::Lock lock;
  lock.artifacts = {deb("cuda-cudart-12-4", "12.4.127-1")};
  auto facts = builder::image_facts_for(lock);
  REQUIRE_OK(facts);
  CHECK(facts->cuda_driver_floor == "999.1");

  // Without CUDA in the lock the table is not read at all.
  std::filesystem::remove(recipes.dir() / "cuda/drivers.yaml");
  envspec::Lock no_cuda;
  no_cuda.artifacts = {deb("libucx0", "1.13.1-1")};
  REQUIRE_OK(builder::image_facts_for(no_cuda));
  auto missing = builder::image_facts_for(lock);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ExitCode::io);
  CHECK(missing.error().message.starts_with("reading the CUDA driver recipe (LOCKSTEP_RECIPES_DIR): "));
}
