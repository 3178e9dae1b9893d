// The image facts: which locked packages they come from, version reduction, the labels and their
// round trip, the JSON file's exact text, and the CUDA driver table (the embedded recipe's copy of
// NVIDIA's table is read from the source tree here; the build reads the embedded bytes).
#include "envspec/lock/image_facts.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;
using namespace lockstep::envspec;

namespace {

LockedArtifact deb(const std::string& name, const std::string& version, const std::string& group = "mpi") {
  LockedArtifact a;
  a.kind = "deb";
  a.name = name;
  a.version = version;
  a.arch = "amd64";
  a.group = group;
  a.sha256 = sha256_of(name + version);
  a.repo = 0;
  return a;
}

Lock lock_of(std::vector<LockedArtifact> artifacts) {
  Lock lock;
  lock.artifacts = std::move(artifacts);
  sort_artifacts(lock.artifacts);
  return lock;
}

CudaDriverTable repo_driver_table() {
  const std::filesystem::path file = test::source_dir() / "recipes/cuda/drivers.yaml";
  auto table = parse_cuda_driver_table(test::slurp(file), file);
  REQUIRE_OK(table);
  return *table;
}

// The bookworm Open MPI stack of examples/mpi-hello, plus CUDA 12.1 from NVIDIA's repository.
Lock mpi_cuda_lock() {
  return lock_of(
      {deb("libc6", "2.36-9+deb12u10", "base"), deb("openmpi-bin", "4.1.4-3+b1"),
       deb("libopenmpi3", "4.1.4-3+b1"), deb("openmpi-common", "4.1.4-3"), deb("libpmix2", "4.2.2-1+deb12u1"),
       deb("libucx0", "1.13.1-1"), deb("libfabric1", "1.17.0-3"), deb("libopenmpi-dev", "4.1.4-3+b1"),
       deb("cuda-cudart-12-1", "12.1.105-1", "cuda"), deb("cuda-cudart-dev-12-1", "12.1.105-1", "cuda"),
       deb("cuda-toolkit-config-common", "12.3.101-1", "cuda")});
}

} // namespace

TEST_CASE("Image facts come from the lock's MPI, PMIx, UCX, libfabric and CUDA packages", "[image_facts]") {
  const ImageFacts facts = facts_from_lock(mpi_cuda_lock(), repo_driver_table());
  CHECK(facts.mpi_impl == "openmpi");
  CHECK(facts.mpi == FactSource{"4.1.4", "libopenmpi3 4.1.4-3+b1"});
  CHECK(facts.pmix == FactSource{"4.2.2", "libpmix2 4.2.2-1+deb12u1"});
  CHECK(facts.ucx == FactSource{"1.13.1", "libucx0 1.13.1-1"});
  CHECK(facts.libfabric == FactSource{"1.17.0", "libfabric1 1.17.0-3"});
  CHECK(facts.cuda == FactSource{"12.1", "cuda-cudart-12-1 12.1.105-1"});
  CHECK(facts.cuda_driver_floor == "530.30.02");
  CHECK_FALSE(facts.empty());
}

TEST_CASE("A conda environment's MPI, UCX and CUDA are image facts", "[image_facts][conda]") {
  const auto conda = [](const std::string& name, const std::string& version) {
    LockedArtifact a = deb(name, version);
    a.kind = "conda";
    a.arch.clear();
    a.group.clear();
    return a;
  };
  ImageFacts facts = facts_from_lock(
      lock_of({conda("openmpi", "4.1.6"), conda("ucx", "1.15.0"), conda("cudatoolkit", "11.8.0"),
               conda("cuda-version", "12.1"), conda("python", "3.11.9")}),
      repo_driver_table());
  CHECK(facts.mpi_impl == "openmpi");
  CHECK(facts.mpi == FactSource{"4.1.6", "openmpi 4.1.6"});
  CHECK(facts.ucx == FactSource{"1.15.0", "ucx 1.15.0"});
  CHECK(facts.cuda == FactSource{"12.1", "cuda-version 12.1 (conda)"});
  CHECK(facts.cuda_driver_floor == "530.30.02");
  // Without cuda-version, the toolkit's X.Y.
  facts = facts_from_lock(lock_of({conda("cudatoolkit", "11.8.0"), conda("mpich", "4.2.1")}),
                          repo_driver_table());
  CHECK(facts.cuda == FactSource{"11.8", "cudatoolkit 11.8.0 (conda)"});
  CHECK(facts.mpi_impl == "mpich");
}

TEST_CASE("Image facts fall back to the launcher and toolkit packages", "[image_facts]") {
  SECTION("openmpi-bin without libopenmpi3") {
    const ImageFacts facts = facts_from_lock(lock_of({deb("openmpi-bin", "1:4.1.6-5")}));
    CHECK(facts.mpi_impl == "openmpi");
    CHECK(facts.mpi == FactSource{"4.1.6", "openmpi-bin 1:4.1.6-5"});
  }
  SECTION("MPICH: libmpich12 before mpich") {
    const ImageFacts facts =
        facts_from_lock(lock_of({deb("mpich", "4.0.2-3"), deb("libmpich12", "4.0.2-3")}));
    CHECK(facts.mpi_impl == "mpich");
    CHECK(facts.mpi == FactSource{"4.0.2", "libmpich12 4.0.2-3"});
  }
  SECTION("both MPIs: Open MPI is recorded") {
    const ImageFacts facts =
        facts_from_lock(lock_of({deb("libmpich12", "4.0.2-3"), deb("libopenmpi40", "5.0.7-1")}));
    CHECK(facts.mpi_impl == "openmpi");
    CHECK(facts.mpi == FactSource{"5.0.7", "libopenmpi40 5.0.7-1"});
  }
  SECTION("CUDA from cuda-toolkit-X-Y, and the cudart package wins over it") {
    CHECK(facts_from_lock(lock_of({deb("cuda-toolkit-12-4", "12.4.1-1", "cuda")})).cuda ==
          FactSource{"12.4", "cuda-toolkit-12-4 12.4.1-1"});
    CHECK(facts_from_lock(lock_of({deb("cuda-libraries-11-8", "11.8.0-1", "cuda")})).cuda ==
          FactSource{"11.8", "cuda-libraries-11-8 11.8.0-1"});
    CHECK(facts_from_lock(lock_of({deb("cuda-toolkit-12-4", "12.4.1-1", "cuda"),
                                   deb("cuda-cudart-12-1", "12.1.105-1", "cuda")}))
              .cuda.version == "12.1");
    // Two runtimes: the higher X.Y (numerically, 12.10 > 12.9) needs the newer driver.
    CHECK(facts_from_lock(lock_of({deb("cuda-cudart-12-9", "12.9.79-1", "cuda"),
                                   deb("cuda-cudart-12-10", "12.10.1-1", "cuda")}))
              .cuda.version == "12.10");
  }
  SECTION("no table or a CUDA the table lacks: no driver floor") {
    CHECK(facts_from_lock(mpi_cuda_lock()).cuda_driver_floor.empty());
    CHECK(facts_from_lock(lock_of({deb("cuda-cudart-13-4", "13.4.1-1", "cuda")}), repo_driver_table())
              .cuda_driver_floor.empty());
  }
}

TEST_CASE("Image facts ignore packages that only look alike", "[image_facts]") {
  const ImageFacts facts = facts_from_lock(lock_of({
      deb("libopenmpi-dev", "4.1.4-3"), // not the runtime library
      deb("openmpi-common", "4.1.4-3"), // not the launcher
      deb("libpmix-dev", "4.2.2-1"),    // -dev
      deb("libucx-dev", "1.13.1-1"),    // -dev
      deb("libfabric-bin", "1.17.0-3"), // tools
      deb("cuda-cudart-dev-12-1", "12.1.105-1", "cuda"),
      deb("cuda-toolkit-config-common", "12.3.101-1", "cuda"),
      deb("cuda-toolkit-12-config-common", "12.3.101-1", "cuda"),
  }));
  CHECK(facts.empty());
  Lock wheels = lock_of({});
  LockedArtifact wheel = deb("libopenmpi3", "4.1.4-3");
  wheel.kind = "wheel";
  wheels.artifacts.push_back(wheel);
  CHECK(facts_from_lock(wheels).empty());
  CHECK(facts_from_lock(Lock{}).empty());
}

TEST_CASE("Upstream versions drop the epoch and the Debian revision", "[image_facts]") {
  CHECK(upstream_version("1:2.3-4") == "2.3");
  CHECK(upstream_version("4.1.4-3+b1") == "4.1.4");
  CHECK(upstream_version("4.2.2-1+deb12u1") == "4.2.2");
  CHECK(upstream_version("2.3+b1") == "2.3+b1"); // a native package: no revision to drop
  CHECK(upstream_version("1.14") == "1.14");
  CHECK(upstream_version("2:1.2-3-4") == "1.2-3"); // the last '-' starts the revision
  CHECK(upstream_version("3.3+20.604758e7-6.2") == "3.3+20.604758e7");
  CHECK(upstream_version("12.1.105-1") == "12.1.105");
  CHECK(upstream_version("").empty());
  CHECK(upstream_version("x1.0-1").empty());
  CHECK(upstream_version("1:").empty());
}

TEST_CASE("Image facts become labels and come back from them", "[image_facts]") {
  const ImageFacts facts = facts_from_lock(mpi_cuda_lock(), repo_driver_table());
  const std::map<std::string, std::string> labels = facts_labels(facts);
  CHECK(labels == std::map<std::string, std::string>{
                      {"dev.lockstep.cuda.driver-floor", "530.30.02"},
                      {"dev.lockstep.cuda.version", "12.1"},
                      {"dev.lockstep.libfabric.version", "1.17.0"},
                      {"dev.lockstep.mpi.impl", "openmpi"},
                      {"dev.lockstep.mpi.version", "4.1.4"},
                      {"dev.lockstep.pmix.version", "4.2.2"},
                      {"dev.lockstep.ucx.version", "1.13.1"},
                  });
  std::map<std::string, std::string> config_labels = labels;
  config_labels["org.opencontainers.image.title"] = "other labels are ignored";
  config_labels["dev.lockstep.spec.digest"] = "so is this one";
  auto back = facts_from_labels(config_labels);
  REQUIRE_OK(back);
  ImageFacts expected = facts;
  for (FactSource* f : {&expected.mpi, &expected.pmix, &expected.ucx, &expected.libfabric, &expected.cuda}) {
    f->from.clear(); // labels hold versions only
  }
  CHECK(*back == expected);

  CHECK(facts_labels(ImageFacts{}).empty());
  auto none = facts_from_labels({{"org.opencontainers.image.title", "x"}});
  REQUIRE_OK(none);
  CHECK(none->empty());
  // Only what is present: an MPI-only image.
  auto mpi_only =
      facts_from_labels({{"dev.lockstep.mpi.impl", "mpich"}, {"dev.lockstep.mpi.version", "4.0.2"}});
  REQUIRE_OK(mpi_only);
  CHECK(mpi_only->mpi_impl == "mpich");
  CHECK(mpi_only->cuda.version.empty());
}

TEST_CASE("Malformed fact labels are invalid input naming the label", "[image_facts]") {
  auto error_of = [](const std::map<std::string, std::string>& labels) {
    auto r = facts_from_labels(labels);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  const std::string advice =
      "these labels are written by `lockstep build` from the lock: rebuild the image with "
      "lockstep, or remove the dev.lockstep.* labels it was given by hand";
  CHECK(
      error_of({{"dev.lockstep.mpi.impl", "lam"}, {"dev.lockstep.mpi.version", "7.1"}}) ==
      "label dev.lockstep.mpi.impl: 'lam' is not an MPI implementation lockstep knows (openmpi or mpich); " +
          advice);
  CHECK(error_of({{"dev.lockstep.mpi.impl", "openmpi"}, {"dev.lockstep.mpi.version", "four"}}) ==
        "label dev.lockstep.mpi.version: 'four' is not a version (such as 4.1.4); " + advice);
  CHECK(error_of({{"dev.lockstep.ucx.version", ""}}) ==
        "label dev.lockstep.ucx.version: '' is not a version (such as 1.13.1); " + advice);
  CHECK(error_of({{"dev.lockstep.pmix.version", "4.2.2; rm -rf /"}})
            .starts_with("label dev.lockstep.pmix.version: "));
  CHECK(error_of({{"dev.lockstep.libfabric.version", std::string(200, '1')}})
            .starts_with("label dev.lockstep.libfabric.version: "));
  CHECK(error_of({{"dev.lockstep.cuda.version", "12"}}) ==
        "label dev.lockstep.cuda.version: '12' is not a CUDA major.minor version (such as 12.1); " + advice);
  CHECK(error_of({{"dev.lockstep.cuda.version", "12.1"}, {"dev.lockstep.cuda.driver-floor", "530.x"}}) ==
        "label dev.lockstep.cuda.driver-floor: '530.x' is not a driver version (such as 530.30.02); " +
            advice);
  // Every malformed label is named, not only the first.
  CHECK(error_of({{"dev.lockstep.cuda.version", "x"}, {"dev.lockstep.ucx.version", "y"}}) ==
        "label dev.lockstep.ucx.version: 'y' is not a version (such as 1.13.1); label "
        "dev.lockstep.cuda.version: "
        "'x' is not a CUDA major.minor version (such as 12.1); " +
            advice);
  // Inconsistent sets.
  CHECK(error_of({{"dev.lockstep.mpi.version", "4.1.4"}}) ==
        "label dev.lockstep.mpi.version is set without dev.lockstep.mpi.impl; " + advice);
  CHECK(error_of({{"dev.lockstep.mpi.impl", "openmpi"}}) ==
        "label dev.lockstep.mpi.impl is set without dev.lockstep.mpi.version; " + advice);
  CHECK(error_of({{"dev.lockstep.cuda.driver-floor", "530.30.02"}}) ==
        "label dev.lockstep.cuda.driver-floor is set without dev.lockstep.cuda.version; " + advice);
}

TEST_CASE("The facts file is fixed-order JSON with the sources", "[image_facts]") {
  const ImageFacts facts = facts_from_lock(mpi_cuda_lock(), repo_driver_table());
  CHECK(facts_json(facts).dump() ==
        R"({"schema":1,"mpi":{"impl":"openmpi","version":"4.1.4","from":"libopenmpi3 4.1.4-3+b1"},)"
        R"("pmix":{"version":"4.2.2","from":"libpmix2 4.2.2-1+deb12u1"},)"
        R"("ucx":{"version":"1.13.1","from":"libucx0 1.13.1-1"},)"
        R"("libfabric":{"version":"1.17.0","from":"libfabric1 1.17.0-3"},)"
        R"("cuda":{"version":"12.1","driver_floor":"530.30.02","from":"cuda-cudart-12-1 12.1.105-1"}})");
  // Absent components are left out, and so is an unknown driver floor.
  const ImageFacts partial =
      facts_from_lock(lock_of({deb("libucx0", "1.13.1-1"), deb("cuda-cudart-13-4", "13.4.1-1", "cuda")}));
  CHECK(render_facts_file(partial) == R"({
  "schema": 1,
  "ucx": {
    "version": "1.13.1",
    "from": "libucx0 1.13.1-1"
  },
  "cuda": {
    "version": "13.4",
    "from": "cuda-cudart-13-4 13.4.1-1"
  }
}
)");
  CHECK(facts_json(ImageFacts{}).dump() == R"({"schema":1})");
}

TEST_CASE("The CUDA driver table gives the GA driver of each minor release", "[image_facts]") {
  const CudaDriverTable table = repo_driver_table();
  // Anchors from NVIDIA's Table 3.
  CHECK(table.floor_for("11.8") == "520.61.05");
  CHECK(table.floor_for("12.0") == "525.60.13");
  CHECK(table.floor_for("12.1") == "530.30.02");
  CHECK(table.floor_for("12.4") == "550.54.14");
  CHECK(table.floor_for("12.8") == "570.26");
  CHECK(table.floor_for("13.0") == "580.65.06");
  CHECK(table.floor_for("13.2") == "595.45.04");
  CHECK(table.floor_for("11.0") == "450.51.05"); // 11.0.2 is the GA; 11.0.1 was an RC
  CHECK(table.floor_for("12.10").empty());
  CHECK(table.floor_for("1").empty());
  CHECK(table.floor_for("").empty());
  CHECK(table.floor_for("13.4").empty()); // NVIDIA lists only a branch (R615) from 13.4 on
  // Every minor release from 11.0 to 13.3 has its GA row (12.7 was never released).
  for (int minor = 0; minor <= 8; ++minor) {
    CHECK_FALSE(table.floor_for("11." + std::to_string(minor)).empty());
  }
  for (int minor = 0; minor <= 9; ++minor) {
    if (minor != 7) {
      CHECK_FALSE(table.floor_for("12." + std::to_string(minor)).empty());
    }
  }
  CHECK(table.rows.size() == 55);
}

TEST_CASE("CUDA driver table mistakes are reported at their place", "[image_facts]") {
  const std::string text = R"(recipe: cuda-drivers
sources: {nv: NVIDIA}
toolkit_drivers:
  - {cuda: "12.1.0", release: GA, linux: "530.30.02", source: nv}
  - {cuda: "12.1", release: GA, linux: "530.30.02", source: nv}
  - {cuda: "12.2.0", release: Beta, linux: "535", source: theirs}
  - {cuda: "12.1.1", release: GA, linux: "530.30.02", source: nv, windows: "531.14"}
  - {cuda: "12.1.0", release: "Update 1", linux: "530.30.02", source: nv}
)";
  auto r = parse_cuda_driver_table(text, "drivers.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  const std::string& m = r.error().message;
  for (const char* expected : {
           "drivers.yaml:5:12: error: toolkit_drivers[1].cuda: expected a toolkit release X.Y.Z, found "
           "'12.1'",
           "drivers.yaml:6:59: error: toolkit_drivers[2].source: unknown source 'theirs'",
           "drivers.yaml:6:31: error: toolkit_drivers[2].release: expected GA, RC or Update N, found 'Beta'",
           "drivers.yaml:6:44: error: toolkit_drivers[2].linux: expected a driver version such as 530.30.02, "
           "found '535'",
           "drivers.yaml:7:67: error: toolkit_drivers[3].windows: unknown key; expected one of: cuda, "
           "release, linux, source",
           "drivers.yaml:7:31: error: toolkit_drivers[3].release: CUDA 12.1 has a GA row already",
           "drivers.yaml:8:12: error: toolkit_drivers[4].cuda: CUDA 12.1.0 has a row already",
       }) {
    INFO(m);
    CHECK(m.find(expected) != std::string::npos);
  }
  auto wrong_kind = parse_cuda_driver_table("recipe: gpu\nsources: {nv: x}\ntoolkit_drivers: []\n", "d.yaml");
  REQUIRE_FALSE(wrong_kind.ok());
  CHECK(wrong_kind.error().message.find("d.yaml:1:9: error: recipe: expected 'cuda-drivers', found 'gpu'") !=
        std::string::npos);
}
