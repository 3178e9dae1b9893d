// The pure policies of `lockstep run`'s job: which names a job's record directory may take, and
// which images' MPI lets each node's preflight ride on mpirun's rsh agent call.
#include "runner/launch/run_job.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace lockstep;
using namespace lockstep::runner;

namespace {

envspec::ImageFacts mpi(const std::string& impl, const std::string& version) {
  envspec::ImageFacts facts;
  facts.mpi_impl = impl;
  facts.mpi.version = version;
  return facts;
}

} // namespace

TEST_CASE("a job's name is a plain directory name", "[run_job]") {
  CHECK(check_job_name("20260101T000000Z-node1-4242"));
  CHECK(check_job_name("train.v2"));
  CHECK(check_job_name("..x"));
  CHECK(check_job_name(std::string(200, 'j')));
  for (const std::string& bad : {std::string(), std::string("."), std::string(".."), std::string("a/b"),
                                 std::string("/abs"), std::string("tab\there"), std::string(201, 'j')}) {
    INFO(bad);
    const Result<void> r = check_job_name(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
  }
  CHECK(check_job_name("bell\a").error().message ==
        "--job 'bell\\x07' must be a plain directory name (no '/', no control characters)");
}

TEST_CASE("the preflight rides on mpirun's agent call only with Open MPI before 5", "[run_job]") {
  CHECK(relay_fits_mpi(mpi("openmpi", "4.1.4")));
  CHECK(relay_fits_mpi(mpi("openmpi", "3.1.6")));
  CHECK(relay_fits_mpi(mpi("openmpi", "1.10.7")));
  CHECK(relay_fits_mpi(mpi("", "")));        // no MPI facts: assumed to fit
  CHECK(relay_fits_mpi(mpi("openmpi", ""))); // an unknown version counts as before 5
  CHECK_FALSE(relay_fits_mpi(mpi("openmpi", "5.0.3")));
  CHECK_FALSE(relay_fits_mpi(mpi("openmpi", "10.0")));
  CHECK_FALSE(relay_fits_mpi(mpi("openmpi", "4")));
  CHECK_FALSE(relay_fits_mpi(mpi("mpich", "4.0.2")));
  CHECK_FALSE(relay_fits_mpi(mpi("mpich", "")));
}
