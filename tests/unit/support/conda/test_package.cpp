// Reading conda package archives (support/conda/package): packages cph packs read back with the
// payload cph itself extracts, the info/ files parsed, the legacy path list, and hostile archives
// refused with a named error.
#include "support/codec/digest.hpp"
#include "support/conda/package.hpp"
#include "support/conda/package_info.hpp"
#include "tests/unit/support/conda/package_builder.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sys/stat.h>

#include <map>
#include <string>

namespace fs = std::filesystem;
using namespace lockstep;
using namespace lockstep::conda;
using lockstep::test::CondaTree;
using lockstep::test::TarMember;
using nlohmann::json;

namespace {

const std::string k_placeholder = "/tmp/build/_h_env_placehold_placehold_placehold_placehold_placehold_pl";

/// A package with one of everything: a script with a placeholder shebang, a binary with a
/// placeholder, a plain file, a symlink, an empty directory.
CondaTree sample_tree(const fs::path& root) {
  CondaTree t(root, "sample", "1.2.3", "h1234_0", json{{"depends", {"libzlib >=1.2"}}, {"license", "MIT"}});
  t.file("bin/sample-tool", "#!" + k_placeholder + "/bin/python3.11\nprint('hi')\n", 0755, k_placeholder);
  t.file("lib/libsample.so.1",
         std::string("\x7f"
                     "ELF\0\0",
                     6) +
             k_placeholder + "/lib" + std::string(1, '\0') + "tail",
         0755, k_placeholder, "binary");
  t.file("share/sample/README", "plain text\n");
  t.symlink("lib/libsample.so", "libsample.so.1");
  t.directory("share/sample/empty");
  return t;
}

/// Every path under `dir` outside info/, with what it is: "file:<sha256>:<exec>", "symlink:<target>"
/// or "dir".
std::map<std::string, std::string> extracted_tree(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = it->path().lexically_relative(dir).string();
    if (rel == "info" || rel.starts_with("info/")) {
      continue;
    }
    struct stat st {};
    REQUIRE(::lstat(it->path().c_str(), &st) == 0);
    if (S_ISLNK(st.st_mode)) {
      out[rel] = "symlink:" + fs::read_symlink(it->path()).string();
    } else if (S_ISDIR(st.st_mode)) {
      out[rel] = "dir";
    } else {
      out[rel] =
          fmt::format("file:{}:{}", sha256_of(test::slurp(it->path())).hex(), (st.st_mode & 0111U) != 0);
    }
  }
  return out;
}

/// The payload in the same form; directories an extraction creates implicitly are added.
std::map<std::string, std::string> payload_tree(const Package& pkg) {
  std::map<std::string, std::string> out;
  for (const PayloadEntry& e : pkg.payload) {
    for (std::size_t slash = e.path.find('/'); slash != std::string::npos;
         slash = e.path.find('/', slash + 1)) {
      out[e.path.substr(0, slash)] = "dir";
    }
    switch (e.kind) {
    case EntryKind::file:
      out[e.path] = fmt::format("file:{}:{}", sha256_of(e.data).hex(), (e.mode & 0111U) != 0);
      break;
    case EntryKind::symlink:
      out[e.path] = "symlink:" + e.target;
      break;
    case EntryKind::directory:
      out[e.path] = "dir";
      break;
    }
  }
  return out;
}

/// The error of reading `bytes` as `filename`, which must be invalid_input.
std::string refusal(const std::string& bytes, const std::string& filename, const PackageLimits& limits = {}) {
  auto r = read_package(bytes, filename, limits);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  return r.error().message;
}

/// A minimal valid package's members plus `extra`, with `paths` as its paths.json entries.
std::vector<TarMember> members_with(const json& paths, const std::vector<TarMember>& extra) {
  std::vector<TarMember> m = {
      test::tar_file("info/index.json", test::index_json_text("evil", "1.0", "0")),
      test::tar_file("info/paths.json", json{{"paths_version", 1}, {"paths", paths}}.dump()),
  };
  m.insert(m.end(), extra.begin(), extra.end());
  return m;
}

} // namespace

TEST_CASE("a .conda and a .tar.bz2 made by cph read back with the payload cph extracts", "[conda][package]") {
  if (!test::have_cph()) {
    return;
  }
  test::TempDirFixture tmp;
  CondaTree tree = sample_tree(tmp.dir() / "src");
  for (const std::string ext : {".conda", ".tar.bz2"}) {
    INFO(ext);
    const fs::path archive = tree.pack(tmp.dir() / ("out" + ext), ext);
    auto pkg = read_package_file(archive);
    REQUIRE_OK(pkg);
    CHECK(pkg->format == (ext == ".conda" ? PackageFormat::conda : PackageFormat::tar_bz2));
    CHECK(pkg->stem == "sample-1.2.3-h1234_0");
    CHECK(pkg->paths_source == PathsSource::paths_json);
    const fs::path extracted = tmp.dir() / ("x" + ext);
    test::run_command(fmt::format("cph x '{}' --dest '{}' >&2", archive.string(), extracted.string()));
    CHECK(fmt::format("{}", payload_tree(*pkg)) == fmt::format("{}", extracted_tree(extracted)));
  }
}

TEST_CASE("the info files of a package are parsed with every field lockstep uses", "[conda][package]") {
  if (!test::have_cph()) {
    return;
  }
  test::TempDirFixture tmp;
  CondaTree tree = sample_tree(tmp.dir() / "src");
  auto pkg = read_package_file(tree.pack(tmp.dir(), ".conda"));
  REQUIRE_OK(pkg);
  CHECK(pkg->index.name == "sample");
  CHECK(pkg->index.version == "1.2.3");
  CHECK(pkg->index.build == "h1234_0");
  CHECK(pkg->index.depends == std::vector<std::string>{"libzlib >=1.2"});
  CHECK(pkg->index.license == "MIT");
  CHECK(pkg->index.subdir == "linux-64");
  CHECK(pkg->index.noarch == NoArch::none);
  REQUIRE(pkg->paths.size() == 5);
  CHECK(pkg->paths[0].path == "bin/sample-tool");
  CHECK(pkg->paths[0].file_mode == FileMode::text);
  CHECK(pkg->paths[1].path == "lib/libsample.so");
  CHECK(pkg->paths[1].type == PathType::softlink);
  const PathsEntry& lib = pkg->paths[2];
  CHECK(lib.path == "lib/libsample.so.1");
  CHECK(lib.file_mode == FileMode::binary);
  CHECK(lib.prefix_placeholder == k_placeholder);
  CHECK(lib.sha256.size() == 64);
  CHECK(pkg->paths[4].type == PathType::directory);
  CHECK_FALSE(pkg->link.has_value());
  const PayloadEntry* tool = pkg->find("bin/sample-tool");
  REQUIRE(tool != nullptr);
  CHECK(tool->mode == 0755);
  CHECK(tool->data.starts_with("#!" + k_placeholder));
}

TEST_CASE("a package without paths.json is read from info/files, has_prefix and no_link",
          "[conda][package]") {
  const std::string stem = "old-0.1-0";
  const std::vector<TarMember> members = {
      test::tar_file("info/index.json", test::index_json_text("old", "0.1", "0")),
      test::tar_file("info/files", "bin/old\nlib/libold.so\nlib/link\nshare/data\n"),
      test::tar_file("info/has_prefix", "bin/old\n\"/pfx/placeholder\" binary \"lib/libold.so\"\n"),
      test::tar_file("info/no_link", "share/data\n"),
      test::tar_file("bin/old", "#!/opt/anaconda1anaconda2anaconda3/bin/sh\n", 0755),
      test::tar_file("lib/libold.so", std::string("/pfx/placeholder\0", 17)),
      test::tar_symlink("lib/link", "libold.so"),
      test::tar_file("share/data", "data"),
  };
  auto pkg = read_package(test::conda_bytes(stem, members), stem + ".conda");
  REQUIRE_OK(pkg);
  CHECK(pkg->paths_source == PathsSource::legacy);
  REQUIRE(pkg->paths.size() == 4);
  CHECK(pkg->paths[0].prefix_placeholder == k_legacy_placeholder);
  CHECK(pkg->paths[0].file_mode == FileMode::text);
  CHECK(pkg->paths[0].sha256 == sha256_of("#!/opt/anaconda1anaconda2anaconda3/bin/sh\n").hex());
  CHECK(pkg->paths[1].prefix_placeholder == "/pfx/placeholder");
  CHECK(pkg->paths[1].file_mode == FileMode::binary);
  CHECK(pkg->paths[2].type == PathType::softlink);
  CHECK(pkg->paths[3].no_link);
}

TEST_CASE("link.json's entry points are parsed and bad ones refused", "[conda][package]") {
  auto ok = parse_entry_point("black = black.main:patched_main", "pkg");
  REQUIRE_OK(ok);
  CHECK(ok->command == "black");
  CHECK(ok->module == "black.main");
  CHECK(ok->function == "patched_main");
  auto attr = parse_entry_point("x=pkg:obj.run", "pkg");
  REQUIRE_OK(attr);
  CHECK(attr->function == "obj.run");
  for (const char* bad : {"no-equals", "cmd = module", "../x = m:f", ".hidden = m:f", "a/b = m:f",
                          "x = 1mod:f", "x = m:class", "x = m:f [extra]", " = m:f", "x = m.:f"}) {
    INFO(bad);
    auto r = parse_entry_point(bad, "pkg");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ExitCode::invalid_input);
  }
}

TEST_CASE("a hostile tar member is refused with a named error", "[conda][package]") {
  struct Case {
    const char* what;
    std::vector<TarMember> extra;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"absolute name", {test::tar_file("/etc/passwd", "x")}, "has an absolute name"},
      {"dot-dot", {test::tar_file("lib/../../etc/passwd", "x")}, "has a '..' component"},
      {"hard link",
       {test::tar_file("a", "x"), test::tar_other("b", TarMember::Type::hardlink, "a")},
       "is a hard link"},
      {"device", {test::tar_other("dev/null", TarMember::Type::chardev)}, "device node, FIFO or socket"},
      {"fifo", {test::tar_other("pipe", TarMember::Type::fifo)}, "device node, FIFO or socket"},
      {"duplicate", {test::tar_file("a", "x"), test::tar_file("a", "y")}, "is in the package twice"},
      {"symlink out", {test::tar_symlink("lib/evil", "../../etc")}, "resolves outside the prefix"},
      {"absolute symlink", {test::tar_symlink("lib/evil", "/etc/passwd")}, "resolves outside the prefix"},
      {"symlink chain out",
       {test::tar_symlink("a", "."), test::tar_symlink("lib/b", "../a/../x")},
       "resolves outside the prefix"},
      {"under a symlink",
       {test::tar_symlink("lib", "share"), test::tar_file("lib/x", "x")},
       "lies under the symlink 'lib'"},
      {"control character", {test::tar_file("bad\x1bname", "x")}, "not a clean UTF-8 path"},
      {"not UTF-8", {test::tar_file("bad\xffname", "x")}, "not a clean UTF-8 path"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const std::string bytes = test::conda_bytes("evil-1.0-0", members_with(json::array(), c.extra));
    const std::string message = refusal(bytes, "evil-1.0-0.conda");
    CHECK_THAT(message, Catch::Contains(c.message));
    CHECK_THAT(message, Catch::StartsWith("evil-1.0-0.conda"));
  }
}

TEST_CASE("a paths.json that escapes the prefix or lies about the payload is refused", "[conda][package]") {
  const std::string data = "payload";
  const std::string sha = sha256_of(data).hex();
  const TarMember file = test::tar_file("lib/a", data);
  struct Case {
    const char* what;
    json entry;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"dot-dot", {{"_path", "../../etc/passwd"}, {"sha256", sha}}, "escapes the prefix"},
      {"absolute", {{"_path", "/etc/passwd"}}, "escapes the prefix"},
      {"not in payload", {{"_path", "lib/missing"}}, "not in the package"},
      {"wrong sha256", {{"_path", "lib/a"}, {"sha256", std::string(64, '0')}}, "has sha256 " + sha},
      {"wrong size", {{"_path", "lib/a"}, {"size_in_bytes", 3}}, "is 7 bytes, paths.json says 3"},
      {"wrong type",
       {{"_path", "lib/a"}, {"path_type", "softlink"}},
       "paths.json says 'lib/a' is a softlink"},
      {"conda-meta", {{"_path", "conda-meta/x.json"}}, "lies in conda-meta/"},
      {"unknown type",
       {{"_path", "lib/a"}, {"path_type", "pyc_file"}},
       "is not hardlink, softlink or directory"},
      {"bad sha256", {{"_path", "lib/a"}, {"sha256", "xyz"}}, "sha256 is not 64 hex digits"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const std::string bytes = test::conda_bytes("evil-1.0-0", members_with(json::array({c.entry}), {file}));
    CHECK_THAT(refusal(bytes, "evil-1.0-0.conda"), Catch::Contains(c.message));
  }
  SECTION("a path listed twice") {
    const json twice = json::array({{{"_path", "lib/a"}}, {{"_path", "lib/a"}}});
    CHECK_THAT(refusal(test::conda_bytes("evil-1.0-0", members_with(twice, {file})), "evil-1.0-0.conda"),
               Catch::Contains("lists 'lib/a' twice"));
  }
}

TEST_CASE("a damaged, foreign or wrongly compressed .conda is refused", "[conda][package]") {
  const std::vector<TarMember> members = members_with(json::array(), {test::tar_file("lib/a", "a")});
  const std::string good = test::conda_bytes("evil-1.0-0", members);
  REQUIRE_OK(read_package(good, "evil-1.0-0.conda"));
  CHECK_THAT(refusal(good.substr(0, good.size() / 2), "evil-1.0-0.conda"),
             Catch::Contains("not a valid .conda"));
  CHECK_THAT(refusal("garbage, not a zip at all", "evil-1.0-0.conda"), Catch::Contains("not a valid .conda"));
  CHECK_THAT(refusal(good, "other-1.0-0.conda"), Catch::Contains("lacks info-other-1.0-0.tar.zst"));
  CHECK_THAT(refusal(good, "evil-1.0-0.zip"), Catch::Contains("not a conda package name"));
  std::string flipped = good;
  flipped[good.find("pkg-evil-1.0-0.tar.zst") + 30] ^= 0x55; // inside the first member's data
  CHECK_THAT(refusal(flipped, "evil-1.0-0.conda"), Catch::Contains("does not match its CRC-32"));
  std::vector<TarMember> info;
  std::vector<TarMember> pkg;
  for (const TarMember& m : members) {
    (m.name.starts_with("info/") ? info : pkg).push_back(m);
  }
  SECTION("a deflated member") {
    const std::string deflated =
        test::zip_bytes({{"metadata.json", R"({"conda_pkg_format_version": 2})", 8},
                         {"pkg-evil-1.0-0.tar.zst", test::tar_bytes(pkg, "zstd")},
                         {"info-evil-1.0-0.tar.zst", test::tar_bytes(info, "zstd")}});
    CHECK_THAT(refusal(deflated, "evil-1.0-0.conda"),
               Catch::Contains("zip member 'metadata.json' is compressed (method 8)") &&
                   Catch::Contains("must be STORED"));
  }
  SECTION("a tar compressed otherwise than its name says") {
    const std::string bz2 = test::zip_bytes({{"metadata.json", R"({"conda_pkg_format_version": 2})"},
                                             {"pkg-evil-1.0-0.tar.zst", test::tar_bytes(pkg, "bzip2")},
                                             {"info-evil-1.0-0.tar.zst", test::tar_bytes(info, "zstd")}});
    CHECK_THAT(refusal(bz2, "evil-1.0-0.conda"), Catch::Contains("pkg-evil-1.0-0.tar.zst"));
  }
  SECTION("a format version other than 2") {
    const std::string v3 = test::zip_bytes({{"metadata.json", R"({"conda_pkg_format_version": 3})"},
                                            {"pkg-evil-1.0-0.tar.zst", test::tar_bytes(pkg, "zstd")},
                                            {"info-evil-1.0-0.tar.zst", test::tar_bytes(info, "zstd")}});
    CHECK_THAT(refusal(v3, "evil-1.0-0.conda"), Catch::Contains("conda_pkg_format_version 2"));
  }
  SECTION("a .tar.bz2 that is not bzip2") {
    CHECK_THAT(refusal(test::tar_bytes(members, "zstd"), "evil-1.0-0.tar.bz2"),
               Catch::Contains("evil-1.0-0.tar.bz2"));
  }
}

TEST_CASE("a .conda written with zip64 records reads as the plain one", "[conda][package]") {
  const std::vector<TarMember> members =
      members_with(json::array({{{"_path", "lib/a"}}}), {test::tar_file("lib/a", "payload")});
  std::vector<TarMember> info;
  std::vector<TarMember> pkg;
  for (const TarMember& m : members) {
    (m.name.starts_with("info/") ? info : pkg).push_back(m);
  }
  const std::string zip64 = test::zip_bytes({{"metadata.json", R"({"conda_pkg_format_version": 2})"},
                                             {"pkg-evil-1.0-0.tar.zst", test::tar_bytes(pkg, "zstd")},
                                             {"info-evil-1.0-0.tar.zst", test::tar_bytes(info, "zstd")}},
                                            true);
  auto r = read_package(zip64, "evil-1.0-0.conda");
  REQUIRE_OK(r);
  REQUIRE(r->payload.size() == 1);
  CHECK(r->payload[0].data == "payload");
  if (test::have_tool("python3")) { // the peer: Python's zipfile reads the same records
    test::TempDirFixture tmp;
    const fs::path file = tmp.write("evil-1.0-0.conda", zip64);
    CHECK(test::run_command(fmt::format("python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); "
                                        "print(z.testzip(), len(z.namelist()))' '{}'",
                                        file.string())) == "None 3\n");
  }
  SECTION("a zip64 end record that points nowhere") {
    std::string broken = zip64;
    broken[broken.size() - 22 - 20 + 8] ^= 0x40; // the locator's offset of the zip64 end record
    CHECK_THAT(refusal(broken, "evil-1.0-0.conda"), Catch::Contains("points at no zip64 end record"));
  }
}

TEST_CASE("a package past its limits or with the wrong identity is refused", "[conda][package]") {
  std::vector<TarMember> extra;
  for (int i = 0; i < 20; ++i) {
    extra.push_back(test::tar_file(fmt::format("share/f{}", i), std::string(100, 'x')));
  }
  const std::string bytes = test::conda_bytes("evil-1.0-0", members_with(json::array(), extra));
  REQUIRE_OK(read_package(bytes, "evil-1.0-0.conda"));
  PackageLimits few;
  few.max_entries = 10;
  CHECK_THAT(refusal(bytes, "evil-1.0-0.conda", few), Catch::Contains("more than 10 archive members"));
  PackageLimits small;
  small.max_total_bytes = 1000;
  CHECK_THAT(refusal(bytes, "evil-1.0-0.conda", small), Catch::Contains("past 1000 bytes unpacked"));
  PackageLimits shallow;
  shallow.max_json_depth = 1;
  CHECK_THAT(refusal(bytes, "evil-1.0-0.conda", shallow), Catch::Contains("paths.json"));
  const std::string renamed = test::conda_bytes("evil-2.0-0", members_with(json::array(), extra));
  CHECK_THAT(refusal(renamed, "evil-2.0-0.conda"), Catch::Contains("info/index.json names evil-1.0-0"));
}

TEST_CASE("an archive is checked against the lock's sha256 and size", "[conda][package]") {
  const std::string bytes = "archive bytes";
  const std::string sha = sha256_of(bytes).hex();
  REQUIRE_OK(verify_archive(bytes, sha, bytes.size(), "x.conda"));
  auto size = verify_archive(bytes, sha, 99, "x.conda");
  REQUIRE_FALSE(size.ok());
  CHECK(size.error().code == ExitCode::invalid_input);
  CHECK(size.error().message == "x.conda: the archive is 13 bytes, the lock says 99; refusing it");
  auto digest = verify_archive(bytes, std::string(64, 'a'), bytes.size(), "x.conda");
  REQUIRE_FALSE(digest.ok());
  CHECK(digest.error().message ==
        fmt::format("x.conda: the archive has sha256 {}, the lock says {}; refusing it", sha,
                    std::string(64, 'a')));
}

TEST_CASE("symlink targets are followed through other symlinks to decide whether they stay inside",
          "[conda][package]") {
  const std::map<std::string, std::string, std::less<>> links = {
      {"lib/up", ".."}, {"top", "."}, {"loop1", "loop2"}, {"loop2", "loop1"}, {"deep/a/b", "../../lib"}};
  CHECK(symlink_stays_inside("lib/x", "y", links));
  CHECK(symlink_stays_inside("lib/x", "../share/y", links));
  CHECK(symlink_stays_inside("lib/x", "up/lib", links));
  CHECK_FALSE(symlink_stays_inside("lib/x", "../../y", links));
  CHECK_FALSE(symlink_stays_inside("lib/x", "up/..", links));
  CHECK_FALSE(symlink_stays_inside("x", "top/../etc", links));
  CHECK_FALSE(symlink_stays_inside("x", "/etc", links));
  CHECK_FALSE(symlink_stays_inside("x", "loop1", links));
  CHECK(symlink_stays_inside("x", "deep/a/b/x", links));
}
