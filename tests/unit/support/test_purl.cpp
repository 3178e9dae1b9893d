// Package URLs as the package-url specification writes them (support/supplychain/purl.hpp).
#include "support/supplychain/purl.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;

TEST_CASE("purl components are percent-encoded except unreserved characters and ':'", "[purl]") {
  CHECK(purl_encode("1:2.4.47-2+b1") == "1:2.4.47-2%2Bb1");
  CHECK(purl_encode("a b@c/d?e#f%") == "a%20b%40c%2Fd%3Fe%23f%25");
  CHECK(purl_encode("docker.io/library/debian", true) == "docker.io/library/debian");
  CHECK(purl_encode("~x_y.z-") == "~x_y.z-");
  CHECK(purl_encode("\xc3\xa9") == "%C3%A9");
}

TEST_CASE("Debian, PyPI and OCI purls", "[purl]") {
  CHECK(deb_purl("debian", "attr", "1:2.4.47-2+b1", "amd64", "debian-12") ==
        "pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64&distro=debian-12");
  CHECK(deb_purl("Ubuntu", "libc6", "2.35-0ubuntu3.8", "arm64", "ubuntu-22.04") ==
        "pkg:deb/ubuntu/libc6@2.35-0ubuntu3.8?arch=arm64&distro=ubuntu-22.04");
  CHECK(pypi_purl("typing-extensions", "4.12.2") == "pkg:pypi/typing-extensions@4.12.2");
  CHECK(pypi_purl("torch", "2.4.1+cu121") == "pkg:pypi/torch@2.4.1%2Bcu121");
  CHECK(oci_purl("docker.io/library/debian", "sha256:244fd47e07d1", "bookworm") ==
        "pkg:oci/debian@sha256:244fd47e07d1?repository_url=docker.io/library/debian&tag=bookworm");
  CHECK(oci_purl("ghcr.io/Org/Image", "sha256:ab") ==
        "pkg:oci/image@sha256:ab?repository_url=ghcr.io/Org/Image");
}

TEST_CASE("qualifiers are sorted by key and empty ones left out; a subpath follows '#'", "[purl]") {
  PackageUrl p;
  p.type = "GENERIC";
  p.namespace_segments = {"team", ""};
  p.name = "data set";
  p.version = "1.0";
  p.qualifiers = {{"vcs_url", "git+https://example.org/x.git@abc"}, {"arch", ""}, {"checksum", "sha256:00"}};
  p.subpath = "sub/dir";
  CHECK(p.str() == "pkg:generic/team/data%20set@1.0?checksum=sha256:00&vcs_url=git%2Bhttps://example.org/"
                   "x.git%40abc#sub/dir");
}
