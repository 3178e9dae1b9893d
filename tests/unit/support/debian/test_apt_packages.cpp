// Packages indexes: validated records, the paragraph kept byte for byte, and hostile entries refused
// with the index, line and package named.
#include "support/debian/apt_packages.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>

using namespace lockstep;

namespace {

const std::string k_sha_a(64, 'a');

std::string paragraph(const std::string& name, const std::string& extra = "") {
  return "Package: " + name +
         "\n"
         "Version: 1.0-1\n"
         "Architecture: amd64\n" +
         extra + "Filename: pool/main/l/" + name + "/" + name +
         "_1.0-1_amd64.deb\n"
         "Size: 1234\n"
         "SHA256: " +
         k_sha_a + "\n";
}

std::string error_of(const std::string& text) {
  auto r = parse_packages_index(text, "Packages", 0);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  return r.error().message;
}

} // namespace

TEST_CASE("A Packages index gives one validated record per paragraph, with its text kept verbatim",
          "[apt][packages]") {
  const std::string first = "Package: ls-app\n"
                            "Source: ls-src (2.0-3)\n"
                            "Version: 1:2.0-3+b1\n"
                            "Installed-Size: 12\n"
                            "Maintainer: Someone <someone@example.org>\n"
                            "Architecture: amd64\n"
                            "Multi-Arch: no\n"
                            "Provides: ls-virtual (= 2.0), ls-other\n"
                            "Pre-Depends: ls-init\n"
                            "Depends: ls-lib (>= 1.0) | ls-lib-alt, python3:any\n"
                            "Recommends: ls-docs\n"
                            "Conflicts: ls-old\n"
                            "Breaks: ls-lib (<< 0.9)\n"
                            "Replaces: ls-old\n"
                            "Description: an application\n"
                            " with a long description\n"
                            "Priority: optional\n"
                            "Section: utils\n"
                            "Filename: pool/main/l/ls-src/ls-app_2.0-3+b1_amd64.deb\n"
                            "Size: 4242\n"
                            "MD5sum: 0123456789abcdef0123456789abcdef\n"
                            "SHA256: " +
                            std::string(64, 'B') + "\n";
  const std::string second = "Package: ls-base\n"
                             "Essential: yes\n"
                             "Priority: required\n"
                             "Version: 3\n"
                             "Architecture: all\n"
                             "Multi-Arch: foreign\n"
                             "Filename: pool/main/l/ls-base/ls-base_3_all.deb\n"
                             "Size: 0\n"
                             "SHA256: " +
                             k_sha_a + "\n";
  auto r = parse_packages_index("# a comment\n" + first + "\n\n" + second, "Packages", 3);
  REQUIRE(r);
  REQUIRE(r->size() == 2);
  const AptPackage& app = (*r)[0];
  CHECK(app.name == "ls-app");
  CHECK(app.version.str() == "1:2.0-3+b1");
  CHECK(app.architecture == "amd64");
  CHECK(app.multi_arch.empty());
  CHECK_FALSE(app.essential);
  CHECK(app.priority == "optional");
  CHECK(app.section == "utils");
  CHECK(app.source == "ls-src");
  REQUIRE(app.provides.size() == 2);
  CHECK(app.provides[0].str() == "ls-virtual (= 2.0)");
  CHECK(app.provides[1].str() == "ls-other");
  REQUIRE(app.depends.size() == 2);
  CHECK(app.depends[0].size() == 2);
  CHECK(app.depends[1][0].arch_qualifier == "any");
  CHECK(app.pre_depends.size() == 1);
  CHECK(app.recommends.size() == 1);
  CHECK(app.conflicts.size() == 1);
  CHECK(app.breaks[0][0].str() == "ls-lib (<< 0.9)");
  CHECK(app.replaces.size() == 1);
  CHECK(app.filename == "pool/main/l/ls-src/ls-app_2.0-3+b1_amd64.deb");
  CHECK(app.size == 4242);
  CHECK(app.sha256.str() == "sha256:" + std::string(64, 'b'));
  CHECK(app.control == "# a comment\n" + first);
  CHECK(app.repo == 3);

  const AptPackage& base = (*r)[1];
  CHECK(base.essential);
  CHECK(base.priority == "required");
  CHECK(base.multi_arch == "foreign");
  CHECK(base.source == "ls-base");
  CHECK(base.size == 0);
  CHECK(base.control == second);
}

TEST_CASE("A paragraph at the end of an index without a final newline keeps its text", "[apt][packages]") {
  std::string text = paragraph("ls-a");
  text.pop_back();
  auto r = parse_packages_index(text, "Packages", 0);
  REQUIRE(r);
  REQUIRE(r->size() == 1);
  CHECK(r->front().control == paragraph("ls-a"));
  auto empty = parse_packages_index("\n\n# nothing\n", "Packages", 0);
  REQUIRE(empty);
  CHECK(empty->empty());
}

TEST_CASE("A leading ./ in Filename (flat repositories made by NVIDIA's repo-debian.sh) is dropped",
          "[apt][packages]") {
  auto r = parse_packages_index(
      fmt::format("Package: cuda-cudart-12-1\nVersion: 12.1.105-1\nArchitecture: amd64\n"
                  "Filename: ./cuda-cudart-12-1_12.1.105-1_amd64.deb\nSize: 1\nSHA256: {}\n",
                  k_sha_a),
      "Packages", 0);
  REQUIRE(r);
  REQUIRE(r->size() == 1);
  CHECK(r->front().filename == "cuda-cudart-12-1_12.1.105-1_amd64.deb");
}

TEST_CASE("Malformed and hostile Packages entries are refused with the index, line and package",
          "[apt][packages][errors]") {
  const std::string ok = paragraph("ls-ok") + "\n";
  CHECK(error_of(ok + "Package: ls-bad\nVersion: 1\nArchitecture: amd64\nSize: 1\nSHA256: " + k_sha_a +
                 "\n") == "Packages:8: ls-bad has no Filename field");
  CHECK(error_of(ok + "Package: ls-bad\nVersion: 1\nArchitecture: amd64\nFilename: a.deb\nSize: 1\n"
                      "MD5sum: 0123456789abcdef0123456789abcdef\n") ==
        "Packages:8: ls-bad has no SHA256 field (lockstep checks every package against its SHA-256; MD5 and "
        "SHA1 are not trusted)");
  CHECK(error_of(ok + "Version: 1\n") == "Packages:8: a paragraph without a Package field");
  CHECK(error_of(ok + paragraph("Ls-Bad")) ==
        "Packages:8: 'Ls-Bad' is not a valid package name (lowercase letters, digits, '+', '-' and '.', at "
        "least two characters, starting with a letter or digit)");
  CHECK(error_of(ok + "Package: ls-bad\nVersion: a1\nArchitecture: amd64\nFilename: a.deb\nSize: 1\n") ==
        "Packages:9: ls-bad: version 'a1': the upstream part 'a1' must start with a digit");
  CHECK(error_of(ok + "Package: ls-bad\nVersion: 1\nArchitecture: AMD64\n") ==
        "Packages:10: ls-bad: 'AMD64' is not a valid architecture");
  for (const std::string filename : {"../../etc/passwd", "/etc/passwd", "pool/../x.deb", "pool//x.deb",
                                     "pool/./x.deb", "pool\\x.deb", "./../x.deb", "././", "./"}) {
    const std::string text = fmt::format("{}Package: ls-bad\nVersion: 1\nArchitecture: amd64\nFilename: {}\n"
                                         "Size: 1\nSHA256: {}\n",
                                         ok, filename, k_sha_a);
    CHECK(error_of(text) ==
          fmt::format("Packages:11: ls-bad: Filename '{}' must be a relative path inside the "
                      "repository (no '..', '.' or empty components, no leading '/')",
                      filename));
  }
  CHECK(error_of(ok +
                 "Package: ls-bad\nVersion: 1\nArchitecture: amd64\nFilename: a.deb\nSize: 12k\nSHA256: " +
                 k_sha_a + "\n") == "Packages:12: ls-bad: Size '12k' is not a number of bytes");
  CHECK(error_of(ok +
                 "Package: ls-bad\nVersion: 1\nArchitecture: amd64\nFilename: a.deb\nSize: "
                 "99999999999999999999999\nSHA256: " +
                 k_sha_a + "\n") ==
        "Packages:12: ls-bad: Size '99999999999999999999999' is not a number of bytes");
  CHECK(error_of(ok + "Package: ls-bad\nVersion: 1\nArchitecture: amd64\nFilename: a.deb\nSize: 1\nSHA256: "
                      "abc\n") == "Packages:13: ls-bad: SHA256 'abc' is not 64 hexadecimal digits");
  CHECK(error_of(ok + paragraph("ls-bad", "Depends: ls-lib (>= )\n")) ==
        "Packages:11: ls-bad: Depends: 'ls-lib (>= )': empty version");
  CHECK(error_of(ok + paragraph("ls-bad", "Provides: ls-virtual (>= 1.0)\n")) ==
        "Packages:11: ls-bad: Provides: ls-virtual (>= 1.0): a provided version must be exact ('=')");
  CHECK(error_of(ok + paragraph("ls-bad", "Provides: ls-a | ls-b\n")) ==
        "Packages:11: ls-bad: Provides can't list alternatives ('|')");
  CHECK(error_of(ok + paragraph("ls-bad", "Multi-Arch: sometimes\n")) ==
        "Packages:11: ls-bad: Multi-Arch 'sometimes' is not one of no, same, foreign, allowed");
  CHECK(error_of(ok + paragraph("ls-bad", "Essential: maybe\n")) ==
        "Packages:11: ls-bad: Essential 'maybe' is neither yes nor no");
  // deb822 syntax errors keep the index's own line numbers.
  CHECK(error_of(ok + ok + "Package: ls-bad\nnot a field\n") ==
        "Packages:16: expected 'Field: value', found 'not a field'");
}

TEST_CASE("A Packages paragraph larger than 1 MiB is refused", "[apt][packages][errors]") {
  const std::string big =
      paragraph("ls-big", "Description: x\n" + std::string(k_max_apt_paragraph, 'x') + "\n");
  CHECK(
      error_of(paragraph("ls-ok") + "\n" + big) ==
      fmt::format("Packages:8: a paragraph of {} bytes, more than the 1048576 lockstep accepts", big.size()));
}

TEST_CASE("Debian package names follow policy 5.6.7", "[apt][packages]") {
  CHECK(valid_debian_package_name("libc6"));
  CHECK(valid_debian_package_name("g++"));
  CHECK(valid_debian_package_name("0ad"));
  CHECK(valid_debian_package_name("libstdc++6"));
  CHECK_FALSE(valid_debian_package_name("a"));
  CHECK_FALSE(valid_debian_package_name("-ab"));
  CHECK_FALSE(valid_debian_package_name("Abc"));
  CHECK_FALSE(valid_debian_package_name("a_b"));
  CHECK_FALSE(valid_debian_package_name("a b"));
}

namespace {

// As dpkg writes /var/lib/dpkg/status (bookworm's, trimmed), with one package on hold, one whose
// configuration files are all that is left and one never installed.
const std::string k_status = R"(Package: libc6
Status: install ok installed
Priority: optional
Section: libs
Installed-Size: 12988
Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>
Architecture: amd64
Multi-Arch: same
Source: glibc
Version: 2.36-9+deb12u10
Replaces: libc6-amd64
Depends: libgcc-s1
Breaks: aide (<< 0.17.3-4+b3), busybox (<< 1.30.1-6)
Conffiles:
 /etc/ld.so.conf.d/x86_64-linux-gnu.conf d4e7a7b88a71b5ffd9e2644e71a0cfab
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 the system.

Package: libnccl2
Status: hold ok installed
Architecture: amd64
Version: 2.21.5-1+cuda12.4
Provides: libnccl (= 2.21.5)
Description: NVIDIA Collective Communication Library (NCCL) Runtime

Package: old-tool
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0-1
Conffiles:
 /etc/old-tool.conf 0123456789abcdef0123456789abcdef

Package: never
Status: purge ok not-installed
)";

TEST_CASE("A dpkg status file gives each package with its selection and state", "[debian][dpkg]") {
  auto r = parse_dpkg_status(k_status, "status");
  REQUIRE(r);
  REQUIRE(r->size() == 4);
  const InstalledPackage& libc = (*r)[0];
  CHECK(libc.installed());
  CHECK_FALSE(libc.held());
  CHECK(libc.package.name == "libc6");
  CHECK(libc.package.version.str() == "2.36-9+deb12u10");
  CHECK(libc.package.multi_arch == "same");
  CHECK(libc.package.source == "glibc");
  CHECK(libc.package.breaks.size() == 2);
  CHECK(libc.package.control.rfind("Package: libc6\nStatus: install ok installed\n", 0) == 0);
  CHECK(libc.package.control.find(" the system.\n") != std::string::npos);
  const InstalledPackage& nccl = (*r)[1];
  CHECK(nccl.installed());
  CHECK(nccl.held());
  REQUIRE(nccl.package.provides.size() == 1);
  CHECK(nccl.package.provides[0].name == "libnccl");
  CHECK_FALSE((*r)[2].installed());
  CHECK((*r)[2].state == "config-files");
  CHECK((*r)[2].package.version.str() == "1.0-1");
  CHECK_FALSE((*r)[3].installed());
  CHECK((*r)[3].want == "purge");
}

TEST_CASE("A malformed dpkg status is refused naming the line and package", "[debian][dpkg][errors]") {
  const auto error_of_status = [](const std::string& text) {
    auto r = parse_dpkg_status(text, "status");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  CHECK(error_of_status("Package: a1\nArchitecture: all\nVersion: 1\n") ==
        "status:1: a1 has no Status field");
  CHECK(error_of_status("Package: a1\nStatus: install ok\nVersion: 1\n") ==
        "status:2: a1: Status 'install ok' is not 'WANT FLAG STATE' as dpkg writes it");
  CHECK(error_of_status("Package: a1\nStatus: install ok installed\nArchitecture: all\n") ==
        "status:1: a1 has no Version field");
  CHECK(error_of_status("Package: a1\nStatus: install ok installed\nArchitecture: all\nVersion: 1\n"
                        "Depends: b1 (>> )\n")
            .rfind("status:5: a1: Depends: ", 0) == 0);
}

} // namespace

TEST_CASE("Ubuntu's Packages fields (Original-Maintainer, Task, Phased-Update-Percentage, ...) are read past",
          "[apt][packages]") {
  // A paragraph as archive.ubuntu.com's jammy-updates writes it: fields the archive adds (Task,
  // Description-md5, Phased-Update-Percentage, Supported) after the .deb's own (Origin, Bugs,
  // Original-Maintainer). The phased percentage changes nothing: a phased version is a candidate
  // like any other (docs/apt-resolver.md).
  const std::string text =
      "Package: libssl3\n"
      "Architecture: amd64\n"
      "Version: 3.0.2-0ubuntu1.15\n"
      "Multi-Arch: same\n"
      "Priority: important\n"
      "Section: libs\n"
      "Source: openssl\n"
      "Origin: Ubuntu\n"
      "Maintainer: Ubuntu Developers <ubuntu-devel-discuss@lists.ubuntu.com>\n"
      "Original-Maintainer: Debian OpenSSL Team <pkg-openssl-devel@alioth-lists.debian.net>\n"
      "Bugs: https://bugs.launchpad.net/ubuntu/+filebug\n"
      "Installed-Size: 5833\n"
      "Depends: libc6 (>= 2.34), debconf (>= 0.5) | debconf-2.0\n"
      "Filename: pool/main/o/openssl/libssl3_3.0.2-0ubuntu1.15_amd64.deb\n"
      "Size: 1905112\n"
      "MD5sum: 0123456789abcdef0123456789abcdef\n"
      "SHA1: 0123456789abcdef0123456789abcdef01234567\n"
      "SHA256: " +
      k_sha_a +
      "\n"
      "SHA512: " +
      std::string(128, 'c') +
      "\n"
      "Homepage: https://www.openssl.org/\n"
      "Description: Secure Sockets Layer toolkit - shared libraries\n"
      "Task: minimal, server-minimal\n"
      "Description-md5: 88547c6206c7fbc4fcc7d09ce100d210\n"
      "Phased-Update-Percentage: 30\n"
      "Supported: 5y\n";
  auto r = parse_packages_index(text, "jammy-updates/main/binary-amd64/Packages", 0);
  REQUIRE(r);
  REQUIRE(r->size() == 1);
  const AptPackage& p = r->front();
  CHECK(p.name == "libssl3");
  CHECK(p.version.str() == "3.0.2-0ubuntu1.15");
  CHECK(p.source == "openssl");
  CHECK(p.multi_arch == "same");
  CHECK(p.priority == "important");
  REQUIRE(p.depends.size() == 2);
  CHECK(p.depends[1].size() == 2);
  CHECK(p.filename == "pool/main/o/openssl/libssl3_3.0.2-0ubuntu1.15_amd64.deb");
  CHECK(p.sha256.hex() == k_sha_a);
  CHECK(p.control == text);
}

TEST_CASE("Security suites and archives are told apart from the others", "[apt][security]") {
  CHECK(is_security_suite("bookworm-security"));
  CHECK(is_security_suite("jammy-security"));
  CHECK(is_security_suite("buster/updates")); // Debian's security archive before bullseye
  CHECK_FALSE(is_security_suite("bookworm-updates"));
  CHECK_FALSE(is_security_suite("bookworm"));
  CHECK_FALSE(is_security_suite("security"));
  CHECK_FALSE(is_security_suite(""));
  CHECK(is_security_source("bookworm-security", "http://deb.debian.org/debian-security"));
  CHECK(is_security_source("bookworm", "http://security.debian.org/debian-security"));
  CHECK(is_security_source("jammy", "http://security.ubuntu.com/ubuntu"));
  CHECK_FALSE(is_security_source("jammy-updates", "http://archive.ubuntu.com/ubuntu"));
  CHECK_FALSE(is_security_source("bookworm", "http://deb.debian.org/debian"));
}
