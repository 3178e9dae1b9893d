#include "support/oci/image_writer.hpp"
#include "support/oci/oci.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;

TEST_CASE("a registry host is recognised the way Docker does", "[oci]") {
  CHECK(oci::registry_host_length("hello:latest") == 0);
  CHECK(oci::registry_host_length("team/app:v1") == 0);
  CHECK(oci::registry_host_length("localhost/app") == 9);
  CHECK(oci::registry_host_length("localhost:5000/team/app:v1") == 14);
  CHECK(oci::registry_host_length("registry.example/app") == 16);
  CHECK(oci::normalize_docker_reference("hello:latest") == "docker.io/library/hello:latest");
  CHECK(oci::normalize_docker_reference("team/app:v1") == "docker.io/team/app:v1");
  CHECK(oci::normalize_docker_reference("localhost:5000/app:v1") == "localhost:5000/app:v1");
}
