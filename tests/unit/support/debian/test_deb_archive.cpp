// Reading files out of a .deb's data.tar: real dpkg-deb builds the packages.
#include "support/debian/deb_archive.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <fstream>

using namespace lockstep;
namespace fs = std::filesystem;
using test::run_command;
using test::slurp;
using test::TempDirFixture;

namespace {

using Files = std::vector<std::pair<std::string, std::string>>;

constexpr const char* k_metadata_name = "usr/lib/python3/dist-packages/foo-1.0.dist-info/METADATA";
constexpr const char* k_pkg_info_name = "usr/lib/python3/dist-packages/foo-1.0.egg-info/PKG-INFO";
const std::string k_metadata = "Metadata-Version: 2.1\nName: foo\nVersion: 1.0\nRequires-Dist: bar>=2\n";
const std::string k_pkg_info = "Metadata-Version: 1.1\nName: foo\nVersion: 1.0\n";

bool have_dpkg_deb() {
  return test::have_tool("dpkg-deb");
}

void write_file(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << content;
}

// Bytes that no compressor shrinks, so that a cut through the package lands in data.tar.
std::string noise(std::size_t size) {
  std::string out(size, '\0');
  std::uint32_t x = 12345;
  for (char& c : out) {
    x = x * 1103515245U + 12345U;
    c = static_cast<char>(x >> 24);
  }
  return out;
}

// python3-foo, built by dpkg-deb with `compressor` (xz, gzip, zstd, none): the metadata of a
// distribution in both layouts, other files, a symlink and a hard link to METADATA under names
// the tests want.
fs::path build_foo_deb(const fs::path& dir, const std::string& compressor) {
  const fs::path src = dir / ("src-" + compressor);
  write_file(src / "DEBIAN/control", "Package: python3-foo\nVersion: 1.0-1\nArchitecture: all\n"
                                     "Maintainer: T <t@example.org>\nDescription: foo\n");
  const fs::path site = src / "usr/lib/python3/dist-packages";
  write_file(site / "foo-1.0.dist-info/METADATA", k_metadata);
  write_file(site / "foo-1.0.dist-info/RECORD", "foo/__init__.py,,\n");
  write_file(site / "foo-1.0.egg-info/PKG-INFO", k_pkg_info);
  write_file(site / "foo/__init__.py", "VERSION = '1.0'\n");
  write_file(src / "usr/share/doc/python3-foo/copyright", "public domain\n");
  write_file(src / "usr/share/python3-foo/noise", noise(64U << 10));
  fs::create_directories(site / "link-1.0.dist-info");
  fs::create_symlink("../foo-1.0.dist-info/METADATA", site / "link-1.0.dist-info/METADATA");
  fs::create_directories(site / "zzz-1.0.dist-info");
  fs::create_hard_link(site / "foo-1.0.dist-info/METADATA", site / "zzz-1.0.dist-info/METADATA");
  const fs::path deb = dir / ("foo-" + compressor + ".deb");
  run_command("dpkg-deb -Z" + compressor + " --build --root-owner-group '" + src.string() + "' '" +
              deb.string() + "' >/dev/null");
  return deb;
}

bool is_metadata(std::string_view name) {
  return name.ends_with("/METADATA") || name.ends_with("/PKG-INFO");
}

} // namespace

TEST_CASE("read_deb_files returns the wanted regular files of data.tar with their contents",
          "[deb_archive]") {
  if (!have_dpkg_deb()) {
    WARN("dpkg-deb not installed; skipping");
    return;
  }
  TempDirFixture fx;
  for (const std::string compressor : {"xz", "gzip", "zstd", "none"}) {
    INFO(compressor);
    const fs::path deb = build_foo_deb(fx.dir(), compressor);
    // Only the regular files: not the symlink, not the hard link (zzz-1.0.dist-info/METADATA).
    auto files = read_deb_files(deb, is_metadata, 1024, "foo.deb");
    REQUIRE_OK(files);
    CHECK(*files == Files{{k_metadata_name, k_metadata}, {k_pkg_info_name, k_pkg_info}});

    auto none = read_deb_files(
        deb, [](std::string_view) { return false; }, 0, "foo.deb");
    REQUIRE_OK(none);
    CHECK(none->empty());

    // Every regular file of data.tar, and nothing of control.tar.
    auto all = read_deb_files(
        deb, [](std::string_view) { return true; }, 1U << 20, "foo.deb");
    REQUIRE_OK(all);
    std::vector<std::string> names;
    for (const auto& [name, content] : *all) {
      names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{"usr/lib/python3/dist-packages/foo-1.0.dist-info/METADATA",
                                            "usr/lib/python3/dist-packages/foo-1.0.dist-info/RECORD",
                                            "usr/lib/python3/dist-packages/foo-1.0.egg-info/PKG-INFO",
                                            "usr/lib/python3/dist-packages/foo/__init__.py",
                                            "usr/share/doc/python3-foo/copyright",
                                            "usr/share/python3-foo/noise"});
  }
}

TEST_CASE("read_deb_files refuses a wanted file over the size bound, naming it", "[deb_archive]") {
  if (!have_dpkg_deb()) {
    WARN("dpkg-deb not installed; skipping");
    return;
  }
  TempDirFixture fx;
  const fs::path deb = build_foo_deb(fx.dir(), "xz");
  REQUIRE_OK(read_deb_files(deb, is_metadata, k_metadata.size(), "foo.deb"));
  auto r = read_deb_files(deb, is_metadata, k_metadata.size() - 1, "foo.deb");
  REQUIRE_FALSE(r.ok());
  INFO(r.error().message);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK_THAT(r.error().message, Catch::StartsWith("foo.deb: ") && Catch::Contains(k_metadata_name));
}

TEST_CASE("read_deb_files refuses what is not a whole Debian package", "[deb_archive]") {
  TempDirFixture fx;
  struct Case {
    std::string name;
    std::string bytes;
    std::string message; // a part of the error
  };
  std::vector<Case> cases = {
      {"garbage", "hello world\n", "not a Debian package (an ar archive)"},
      {"empty", "", "not a Debian package"},
      {"no-data", test::ar_archive({{"debian-binary", "2.0\n"}, {"control.tar.gz", "anything"}}),
       "the package ends before its data.tar member"},
      {"format-3", test::ar_archive({{"debian-binary", "3.0\n"}, {"control.tar", ""}, {"data.tar", ""}}),
       "unsupported Debian package format '3.0'"},
      {"garbage-data",
       test::ar_archive({{"debian-binary", "2.0\n"}, {"control.tar", ""}, {"data.tar.xz", noise(4096)}}),
       "data.tar.xz"},
  };
  if (have_dpkg_deb()) {
    const std::string whole = slurp(build_foo_deb(fx.dir(), "zstd"));
    cases.push_back({"truncated", whole.substr(0, whole.size() * 2 / 3), "data.tar.zst"});
  }
  if (test::have_tool("tar")) {
    // The same wanted name twice in data.tar.
    const std::string d = fx.dir().string();
    fs::create_directories(fx.dir() / "twice/usr");
    write_file(fx.dir() / "twice/usr/METADATA", "x\n");
    run_command("cd '" + d + "' && tar --format=gnu -cf twice.tar -C twice ./usr/METADATA && " +
                "tar --format=gnu -rf twice.tar -C twice ./usr/METADATA");
    cases.push_back(
        {"twice",
         test::ar_archive(
             {{"debian-binary", "2.0\n"}, {"control.tar", ""}, {"data.tar", slurp(fx.dir() / "twice.tar")}}),
         "lists 'usr/METADATA' twice"});
  }
  for (const Case& c : cases) {
    INFO(c.name);
    const fs::path deb = fx.write(c.name + ".deb", c.bytes);
    const std::string what = c.name + ".deb";
    auto r = read_deb_files(deb, is_metadata, 1U << 20, what);
    REQUIRE_FALSE(r.ok());
    INFO(r.error().message);
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK_THAT(r.error().message, Catch::StartsWith(what + ": ") && Catch::Contains(c.message));
  }

  auto dir = read_deb_files(fx.dir(), is_metadata, 1U << 20, "a directory");
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.error().code == ExitCode::invalid_input);
  CHECK_THAT(dir.error().message, Catch::Contains("is not a regular file"));
}
