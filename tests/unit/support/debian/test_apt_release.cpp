#include "support/debian/apt_release.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace lockstep;

namespace {

const std::string k_hash_a(64, 'a');
const std::string k_hash_b(64, 'b');

std::string release_text() {
  return "Origin: Debian\n"
         "Label: Debian\n"
         "Suite: stable\n"
         "Version: 12.8\n"
         "Codename: bookworm\n"
         "Date: Sat, 09 Nov 2024 10:45:12 UTC\n"
         "Acquire-By-Hash: yes\n"
         "Architectures: all amd64 arm64\n"
         "Components: main contrib non-free-firmware\n"
         "MD5Sum:\n"
         " 0123456789abcdef0123456789abcdef 100 main/binary-amd64/Packages\n"
         "SHA256:\n"
         " " +
         k_hash_a +
         "  8786182 main/binary-amd64/Packages.xz\n"
         " " +
         k_hash_b + " 45 main/binary-amd64/Release\n";
}

} // namespace

TEST_CASE("A Release file gives the suite and the SHA-256 of every index", "[debian]") {
  auto r = AptRelease::parse(release_text(), "Release");
  REQUIRE(r);
  CHECK(r->suite == "stable");
  CHECK(r->codename == "bookworm");
  CHECK(r->acquire_by_hash);
  CHECK(r->architectures == std::vector<std::string>{"all", "amd64", "arm64"});
  CHECK(r->components == std::vector<std::string>{"main", "contrib", "non-free-firmware"});
  REQUIRE(r->sha256.size() == 2);
  auto xz = r->index("main/binary-amd64/Packages.xz");
  REQUIRE(xz);
  CHECK(xz->sha256.hex() == k_hash_a);
  CHECK(xz->size == 8786182);
  auto missing = r->index("main/binary-amd64/Packages.gz");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message ==
        "the Release file of 'stable' lists no main/binary-amd64/Packages.gz (it has: "
        "main/binary-amd64/Packages.xz, main/binary-amd64/Release)");
}

TEST_CASE("Release files without trustworthy checksums are refused", "[debian][errors]") {
  auto message = [](const std::string& text) {
    auto r = AptRelease::parse(text, "Release");
    REQUIRE_FALSE(r);
    return r.error().message;
  };
  CHECK(message("Suite: x\nMD5Sum:\n 0123 1 a\n") ==
        "Release: no SHA256 field; lockstep only trusts SHA-256 index checksums");
  CHECK(message("Suite: x\nSHA256:\n " + k_hash_a + " 12\n") ==
        "Release: SHA256 entry 1 is not 'HASH SIZE PATH': '" + k_hash_a + " 12'");
  CHECK(message("Suite: x\nSHA256:\n ABC 12 main/x\n") ==
        "Release: SHA256 entry 1 is not 'HASH SIZE PATH': 'ABC 12 main/x'");
  CHECK(message("Suite: x\n\nSuite: y\n") == "Release: expected one paragraph in a Release file, found 2");
}

TEST_CASE("The signed text of an InRelease is the message without armor and dash-escaping", "[debian]") {
  std::string inrelease = "-----BEGIN PGP SIGNED MESSAGE-----\n"
                          "Hash: SHA512\n"
                          "\n"
                          "Suite: stable\n"
                          "- -----odd line\n"
                          "SHA256:\n"
                          " " +
                          k_hash_a +
                          " 1 main/x\n"
                          "-----BEGIN PGP SIGNATURE-----\n"
                          "\n"
                          "iQIzBAEBCgAdFiEE\n"
                          "-----END PGP SIGNATURE-----\n";
  auto text = clearsigned_text(inrelease, "InRelease");
  REQUIRE(text);
  CHECK(*text == "Suite: stable\n-----odd line\nSHA256:\n " + k_hash_a + " 1 main/x\n");
  auto bad = clearsigned_text("Suite: stable\n", "InRelease");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        "InRelease: not a clearsigned message (no '-----BEGIN PGP SIGNED MESSAGE-----' line)");
  auto unsigned_msg =
      clearsigned_text("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nSuite: x\n", "InRelease");
  REQUIRE_FALSE(unsigned_msg);
  CHECK(unsigned_msg.error().message ==
        "InRelease: malformed clearsigned message (no header end or no signature)");
}

TEST_CASE("An Ubuntu Release file (no Valid-Until, MD5Sum and SHA256, Acquire-By-Hash) is read", "[debian]") {
  // As archive.ubuntu.com's dists/jammy-updates/Release has it: the uncompressed Packages is listed
  // though only .gz and .xz are served, and there is no Valid-Until.
  const std::string text = "Origin: Ubuntu\n"
                           "Label: Ubuntu\n"
                           "Suite: jammy-updates\n"
                           "Version: 22.04\n"
                           "Codename: jammy\n"
                           "Date: Fri, 05 Dec 2025 08:02:31 UTC\n"
                           "Architectures: amd64 arm64 armhf i386 ppc64el riscv64 s390x\n"
                           "Components: main restricted universe multiverse\n"
                           "Description: Ubuntu Jammy Updates\n"
                           "MD5Sum:\n"
                           " 0123456789abcdef0123456789abcdef  3027474 main/binary-amd64/Packages\n"
                           "SHA256:\n"
                           " " +
                           k_hash_a +
                           "          3027474 main/binary-amd64/Packages\n"
                           " " +
                           k_hash_b +
                           "           581772 main/binary-amd64/Packages.xz\n"
                           "Acquire-By-Hash: yes\n";
  auto r = AptRelease::parse(text, "dists/jammy-updates/Release");
  REQUIRE(r);
  CHECK(r->origin == "Ubuntu");
  CHECK(r->label == "Ubuntu");
  CHECK(r->suite == "jammy-updates");
  CHECK(r->codename == "jammy");
  CHECK(r->version == "22.04");
  CHECK(r->date == "Fri, 05 Dec 2025 08:02:31 UTC");
  CHECK(r->valid_until.empty());
  CHECK(r->acquire_by_hash);
  CHECK(r->components == std::vector<std::string>{"main", "restricted", "universe", "multiverse"});
  REQUIRE(r->sha256.size() == 2);
  CHECK(r->sha256.at("main/binary-amd64/Packages.xz").size == 581772);
}

TEST_CASE("apt reads an architecture's indexes only where the Release lists it", "[debian]") {
  const auto release = [](const std::string& extra) {
    auto r = AptRelease::parse(
        "Suite: s\n" + extra +
            "SHA256:\n"
            " 0000000000000000000000000000000000000000000000000000000000000000 0 main/binary-all/Packages\n",
        "Release");
    REQUIRE(r);
    return *r;
  };
  // bookworm: `all` listed, but its packages are in each architecture's index.
  AptRelease r = release("Architectures: all amd64 arm64\nNo-Support-for-Architecture-all: Packages\n");
  CHECK(r.supports_architecture("amd64"));
  CHECK_FALSE(r.supports_architecture("all"));
  // bookworm-security: no `all` among the architectures, though its checksums name binary-all.
  r = release("Architectures: amd64 arm64\n");
  CHECK_FALSE(r.supports_architecture("all"));
  CHECK_FALSE(r.supports_architecture("riscv64"));
  // A repository with its own binary-all, and one that names no architectures at all.
  CHECK(release("Architectures: all amd64\n").supports_architecture("all"));
  CHECK(release("").supports_architecture("all"));
  CHECK(release("").supports_architecture("arm64"));
}
