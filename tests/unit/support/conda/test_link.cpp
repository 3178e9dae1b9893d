// Linking conda packages into a prefix (support/conda/link): the installed prefix equals the tests'
// own reading of conda's rules (conda_expected_prefix.py over cph's extraction), prefix replacement
// and shebangs case by case, noarch: python, the conda-meta record, and the merge of many packages.
#include "support/base/json.hpp"
#include "support/codec/digest.hpp"
#include "support/conda/link.hpp"
#include "support/system/process.hpp"
#include "tests/unit/support/conda/package_builder.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

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
constexpr std::int64_t k_generated = 1'750'000'000;
constexpr std::int64_t k_archive_mtime = 1'600'000'000;

/// A platform package exercising every rule: text and binary placeholders, a shebang, a symlink,
/// an empty directory, a no_link file, an unchanged file with a known mtime, a post-link script.
CondaTree platform_tree(const fs::path& root) {
  CondaTree t(root, "tool", "2.0", "h0_1", json{{"depends", {"libc"}}, {"license", "BSD-3-Clause"}});
  t.file("bin/tool", "#!" + k_placeholder + "/bin/perl -w\nprint \"" + k_placeholder + "\";\n", 0755,
         k_placeholder);
  t.file("etc/tool.conf", "root=" + k_placeholder + "\nagain=" + k_placeholder + "/x\n", 0644, k_placeholder);
  t.file("lib/libtool.so",
         std::string("\x7f"
                     "ELF",
                     4) +
             std::string(1, '\0') + k_placeholder + "/lib:" + k_placeholder + "/lib64" +
             std::string(1, '\0') + "end",
         0755, k_placeholder, "binary");
  t.file("share/tool/unchanged.txt", "nothing to replace\n", 0644, "", "text", true);
  t.set_mtime("share/tool/unchanged.txt", k_archive_mtime);
  t.file("bin/.tool-post-link.sh", "echo hi >> \"$PREFIX/.messages.txt\"\n", 0755);
  t.symlink("lib/libtool.so.2", "libtool.so");
  t.directory("var/tool/empty");
  return t;
}

/// A noarch: python package with site-packages, python-scripts and entry points.
CondaTree python_tree(const fs::path& root) {
  CondaTree t(root, "pyfoo", "0.3", "pyhd8ed1ab_0", json{{"noarch", "python"}, {"subdir", "noarch"}});
  t.file("site-packages/pyfoo/__init__.py", "VERSION = '0.3'\n");
  t.file("site-packages/pyfoo/cli.py", "def main():\n    return 0\n");
  t.file("site-packages/pyfoo-0.3.dist-info/METADATA", "Name: pyfoo\n");
  t.file("python-scripts/pyfoo-helper", "#!" + k_placeholder + "/bin/python\nimport pyfoo\n", 0755,
         k_placeholder);
  t.link_json("python", {"pyfoo = pyfoo.cli:main", "pyfoo-admin = pyfoo.cli:main"});
  return t;
}

LinkOptions options(const std::string& prefix = "/opt/conda") {
  LinkOptions o;
  o.prefix = prefix;
  o.python_version = "3.11";
  o.generated_mtime = k_generated;
  return o;
}

PackageOrigin origin_of(const std::string& subdir = "linux-64") {
  PackageOrigin o;
  o.channel = "https://conda.anaconda.org/conda-forge";
  o.url = "https://conda.anaconda.org/conda-forge/" + subdir + "/x";
  o.requested_specs = {"tool >=2"};
  return o;
}

/// Packs `tree` with cph, reads it, plans it with `opts`; the extracted tree goes to `extracted`.
PackagePlan plan_of(CondaTree& tree, const fs::path& work, const LinkOptions& opts,
                    const fs::path& extracted) {
  const fs::path archive = tree.pack(work, ".conda");
  test::run_command(fmt::format("cph x '{}' --dest '{}' >&2", archive.string(), extracted.string()));
  auto pkg = read_package_file(archive);
  REQUIRE_OK(pkg);
  PackageOrigin origin = origin_of(pkg->index.subdir);
  origin.url += "/" + archive.filename().string();
  auto plan = plan_package(std::move(*pkg), origin, opts);
  REQUIRE_OK(plan);
  return std::move(*plan);
}

/// Our plan against conda_expected_prefix.py's reading of the same extraction.
void check_against_expectation(const PackagePlan& plan, const fs::path& extracted, const LinkOptions& opts) {
  const std::string out = test::run_python(
      test::source_dir() / "tests/unit/support/conda/conda_expected_prefix.py",
      {shell_quote(extracted.string()), shell_quote(opts.prefix), "--python", opts.python_version});
  const json expected = json::parse(out)["paths"];
  std::map<std::string, const PrefixPath*> ours;
  for (const PrefixPath& p : plan.paths) {
    ours[p.path] = &p;
  }
  REQUIRE(ours.size() == expected.size());
  for (const auto& [path, want] : expected.items()) {
    INFO(path);
    REQUIRE(ours.contains(path));
    const PrefixPath& got = *ours[path];
    const std::string kind = want["kind"];
    if (kind == "symlink") {
      CHECK(got.kind == PrefixKind::symlink);
      CHECK(got.target == want["target"]);
    } else if (kind == "directory") {
      CHECK(got.kind == PrefixKind::directory);
    } else {
      CHECK(got.kind == PrefixKind::file);
      CHECK(((got.mode & 0111U) != 0) == want["exec"].get<bool>());
      if (kind == "file") {
        CHECK(sha256_of(got.data).hex() == want["sha256"]);
      }
    }
  }
}

const PrefixPath& path_of(const PackagePlan& plan, const std::string& path) {
  for (const PrefixPath& p : plan.paths) {
    if (p.path == path) {
      return p;
    }
  }
  FAIL("no " << path << " in the plan");
  throw std::logic_error("unreachable");
}

} // namespace

TEST_CASE("a package's installed prefix equals an independent reading of conda's rules", "[conda][link]") {
  if (!test::have_cph()) {
    return;
  }
  test::TempDirFixture tmp;
  for (const std::string prefix :
       {"/opt/conda", "/opt/env with space",
        "/opt/a-prefix-long-enough-that-the-perl-shebang-passes-127-bytes/x/y/z"}) {
    INFO(prefix);
    CondaTree tree = platform_tree(tmp.dir() / ("src" + std::to_string(prefix.size())));
    const fs::path extracted = tmp.dir() / ("x" + std::to_string(prefix.size()));
    const PackagePlan plan = plan_of(tree, tmp.dir() / "out", options(prefix), extracted);
    check_against_expectation(plan, extracted, options(prefix));
  }
}

TEST_CASE("a noarch: python package is relocated into site-packages with entry points", "[conda][link]") {
  if (!test::have_cph()) {
    return;
  }
  test::TempDirFixture tmp;
  CondaTree tree = python_tree(tmp.dir() / "src");
  const fs::path extracted = tmp.dir() / "x";
  const PackagePlan plan = plan_of(tree, tmp.dir() / "out", options(), extracted);
  check_against_expectation(plan, extracted, options());
  const PrefixPath& init = path_of(plan, "lib/python3.11/site-packages/pyfoo/__init__.py");
  CHECK(init.data == "VERSION = '0.3'\n");
  CHECK(path_of(plan, "bin/pyfoo-helper").data == "#!/opt/conda/bin/python\nimport pyfoo\n");
  const PrefixPath& ep = path_of(plan, "bin/pyfoo");
  CHECK(ep.mode == 0755);
  CHECK(ep.mtime == k_generated);
  CHECK(ep.data == "#!/opt/conda/bin/python3.11\n"
                   "# -*- coding: utf-8 -*-\n"
                   "import re\n"
                   "import sys\n"
                   "\n"
                   "from pyfoo.cli import main\n"
                   "\n"
                   "if __name__ == '__main__':\n"
                   "    sys.argv[0] = re.sub(r'(-script\\.pyw?|\\.exe)?$', '', sys.argv[0])\n"
                   "    sys.exit(main())\n");
  for (const PrefixPath& p : plan.paths) {
    CHECK_FALSE(p.path.ends_with(".pyc"));
  }
  SECTION("with the python record's site-packages path") {
    LinkOptions o = options();
    o.python_site_packages_path = "lib/python3.13t/site-packages";
    auto pkg = read_package_file(tree.pack(tmp.dir() / "again", ".conda"));
    REQUIRE_OK(pkg);
    auto relocated = plan_package(std::move(*pkg), origin_of("noarch"), o);
    REQUIRE_OK(relocated);
    CHECK(path_of(*relocated, "lib/python3.13t/site-packages/pyfoo/cli.py").kind == PrefixKind::file);
  }
  SECTION("without the environment's python version") {
    auto pkg = read_package_file(tree.pack(tmp.dir() / "again", ".conda"));
    REQUIRE_OK(pkg);
    LinkOptions o = options();
    o.python_version = "";
    auto r = plan_package(std::move(*pkg), origin_of("noarch"), o);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("needs the environment's python version"));
  }
}

TEST_CASE("unchanged files keep their archive mtime and rewritten ones get the caller's", "[conda][link]") {
  if (!test::have_cph()) {
    return;
  }
  test::TempDirFixture tmp;
  CondaTree tree = platform_tree(tmp.dir() / "src");
  const PackagePlan plan = plan_of(tree, tmp.dir() / "out", options(), tmp.dir() / "x");
  CHECK(path_of(plan, "share/tool/unchanged.txt").mtime == k_archive_mtime);
  CHECK_FALSE(path_of(plan, "share/tool/unchanged.txt").generated);
  CHECK(path_of(plan, "etc/tool.conf").mtime == k_generated);
  CHECK(path_of(plan, "etc/tool.conf").generated);
  CHECK(path_of(plan, "etc/tool.conf").data == "root=/opt/conda\nagain=/opt/conda/x\n");
  CHECK(path_of(plan, "bin/tool").mode == 0755);
  CHECK(plan.link_scripts == std::vector<std::string>{"bin/.tool-post-link.sh"});
  CHECK(plan.conda_meta.mtime == k_generated);
}

TEST_CASE("the conda-meta record is conda's, deterministic and free of host paths", "[conda][link]") {
  if (!test::have_cph()) {
    return;
  }
  test::TempDirFixture tmp;
  CondaTree tree = platform_tree(tmp.dir() / "src");
  const PackagePlan plan = plan_of(tree, tmp.dir() / "out", options(), tmp.dir() / "x");
  CHECK(plan.conda_meta.path == "conda-meta/tool-2.0-h0_1.json");
  CHECK(plan.history_id == "conda-forge/linux-64::tool-2.0-h0_1");
  const std::string& text = plan.conda_meta.data;
  CHECK(text.find(tmp.dir().string()) == std::string::npos);
  CHECK(text.starts_with("{\n  \"build\": \"h0_1\",\n  \"build_number\": 0,\n  \"channel\": "
                         "\"https://conda.anaconda.org/conda-forge/linux-64\",\n"));
  auto parsed = parse_json(text, "conda-meta");
  REQUIRE_OK(parsed);
  const json& j = *parsed;
  CHECK(j["name"] == "tool");
  CHECK(j["fn"] == "tool-2.0-h0_1.conda");
  CHECK(j["depends"] == json::array({"libc"}));
  CHECK(j["license"] == "BSD-3-Clause");
  CHECK(j["extracted_package_dir"] == "/opt/conda/pkgs/tool-2.0-h0_1");
  CHECK(j["package_tarball_full_path"] == "/opt/conda/pkgs/tool-2.0-h0_1.conda");
  CHECK(j["link"] == json{{"source", "/opt/conda/pkgs/tool-2.0-h0_1"}, {"type", 3}});
  CHECK(j["requested_spec"] == "tool >=2");
  CHECK(j["requested_specs"] == json::array({"tool >=2"}));
  CHECK(j["paths_data"]["paths_version"] == 1);
  CHECK(j["files"].size() == plan.paths.size());
  for (const json& p : j["paths_data"]["paths"]) {
    INFO(p.dump());
    const PrefixPath& ours = path_of(plan, p["_path"]);
    if (p["path_type"] == "hardlink") {
      CHECK(p["sha256_in_prefix"] == sha256_of(ours.data).hex());
      CHECK(p["size_in_bytes"] == ours.data.size());
    }
    if (p["_path"] == "lib/libtool.so") {
      CHECK(p["file_mode"] == "binary");
      CHECK(p["prefix_placeholder"] == k_placeholder);
      CHECK(p["sha256"] != p["sha256_in_prefix"]);
    }
    if (p["_path"] == "share/tool/unchanged.txt") {
      CHECK(p["no_link"] == true);
      CHECK(p["sha256"] == p["sha256_in_prefix"]);
    }
  }
  const PackagePlan again = plan_of(tree, tmp.dir() / "out2", options(), tmp.dir() / "x2");
  CHECK(again.conda_meta.data == text);
}

TEST_CASE("the locked record is what conda-meta says, and must name the archive's package", "[conda][link]") {
  const std::string stem = "rec-1.0-0";
  const std::vector<TarMember> members = {
      test::tar_file("info/index.json",
                     test::index_json_text("rec", "1.0", "0", json{{"depends", {"old-dep"}}})),
      test::tar_file("info/paths.json", json{{"paths_version", 1}, {"paths", json::array()}}.dump())};
  const std::string bytes = test::conda_bytes(stem, members);
  const std::string sha256 = sha256_of(bytes).hex(); // outlives the record, which may view it
  PackageOrigin origin = origin_of();
  origin.record.filename = "rec-1.0-0.conda";
  origin.record.name = "rec";
  origin.record.version = "1.0";
  origin.record.build = "0";
  origin.record.depends = {"patched-dep >=2"}; // the channel's repodata patch
  origin.record.subdir = "linux-64";
  origin.record.md5 = "0123456789abcdef0123456789abcdef";
  origin.record.sha256 = sha256;
  origin.record.size = bytes.size();
  auto pkg = read_package(bytes, stem + ".conda");
  REQUIRE_OK(pkg);
  auto plan = plan_package(*pkg, origin, options());
  REQUIRE_OK(plan);
  auto meta = parse_json(plan->conda_meta.data, "conda-meta");
  REQUIRE_OK(meta);
  CHECK((*meta)["depends"] == json::array({"patched-dep >=2"}));
  CHECK((*meta)["md5"] == "0123456789abcdef0123456789abcdef");
  CHECK((*meta)["sha256"] == sha256);
  CHECK((*meta)["size"] == bytes.size());
  origin.record.version = "2.0";
  auto other = plan_package(*pkg, origin, options());
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().message ==
        "rec-1.0-0: the lock names rec-2.0-0, the archive holds rec-1.0-0; refusing it");
}

TEST_CASE("a binary placeholder shorter than the prefix is refused naming the file", "[conda][link]") {
  const std::string stem = "bin-1.0-0";
  const std::string data = std::string("\x7f"
                                       "ELF",
                                       4) +
                           std::string(1, '\0') + "/short" + std::string(1, '\0');
  const json paths = json::array({{{"_path", "lib/libx.so"},
                                   {"file_mode", "binary"},
                                   {"prefix_placeholder", "/short"},
                                   {"sha256", sha256_of(data).hex()}}});
  const std::vector<TarMember> members = {
      test::tar_file("info/index.json", test::index_json_text("bin", "1.0", "0")),
      test::tar_file("info/paths.json", json{{"paths_version", 1}, {"paths", paths}}.dump()),
      test::tar_file("lib/libx.so", data)};
  auto pkg = read_package(test::conda_bytes(stem, members), stem + ".conda");
  REQUIRE_OK(pkg);
  auto r = plan_package(std::move(*pkg), origin_of(), options());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message ==
        "bin-1.0-0: lib/libx.so: the prefix /opt/conda (10 bytes) is longer than the binary "
        "placeholder /short (6 bytes); choose a shorter prefix");
}

TEST_CASE("binary replacement keeps each C string's length and pads it with NULs", "[conda][link]") {
  const std::string nul(1, '\0');
  auto r = replace_prefix_binary("A" + nul + "/placeholder/lib:/placeholder/x" + nul + "B/placeholder",
                                 "/placeholder", "/opt", "f");
  REQUIRE_OK(r);
  CHECK(*r == "A" + nul + "/opt/lib:/opt/x" + std::string(16, '\0') + nul + "B/placeholder");
  REQUIRE_OK(replace_prefix_binary("/short-without-nul", "/short", "/much/longer/prefix", "f"));
}

TEST_CASE("text replacement rewrites shebangs as conda does", "[conda][link]") {
  const std::string ph = "/ph";
  CHECK(replace_prefix_text("#!/ph/bin/python -u\nx = '/ph'\n", ph, "/opt/conda") ==
        "#!/opt/conda/bin/python -u\nx = '/opt/conda'\n");
  CHECK(replace_prefix_text("#!/ph/bin/python -u\n", ph, "/opt/my env") == "#!/usr/bin/env python -u\n");
  const std::string long_prefix = "/opt/" + std::string(120, 'p');
  CHECK(replace_prefix_text("#!/ph/bin/perl\nprint 1;\n", ph, long_prefix) ==
        "#!/usr/bin/env perl\nprint 1;\n");
  CHECK(replace_prefix_text("#!/usr/bin/env python\n/ph\n", ph, long_prefix) ==
        "#!/usr/bin/env python\n" + long_prefix + "\n");
  CHECK(replace_prefix_text("no shebang /ph/x", ph, "/p") == "no shebang /p/x");
}

TEST_CASE("an entry point of a long or spaced prefix uses the sh/python polyglot", "[conda][link]") {
  const EntryPoint ep{"tool", "pkg.mod", "obj.run"};
  const std::string script = entry_point_script(ep, "/opt/my env/bin/python3.11");
  CHECK(script.starts_with("#!/bin/sh\n'''exec' \"/opt/my env/bin/python3.11\" \"$0\" \"$@\"\n' '''\n"));
  CHECK_THAT(script, Catch::Contains("from pkg.mod import obj\n"));
  CHECK_THAT(script, Catch::Contains("sys.exit(obj.run())\n"));
  CHECK(entry_point_script(ep, "/opt/conda/bin/python3.11").starts_with("#!/opt/conda/bin/python3.11\n"));
}

namespace {

PrefixPath file_at(const std::string& path, const std::string& data) {
  PrefixPath p;
  p.path = path;
  p.data = data;
  return p;
}

PackagePlan plan_named(const std::string& name, std::vector<PrefixPath> paths,
                       std::vector<std::string> specs = {}) {
  PackagePlan p;
  p.name = name;
  p.dist = name + "-1.0-0";
  p.history_id = "conda-forge/linux-64::" + p.dist;
  p.paths = std::move(paths);
  p.conda_meta = file_at("conda-meta/" + p.dist + ".json", "{}");
  p.requested_specs = std::move(specs);
  return p;
}

} // namespace

TEST_CASE("merging plans lets the later package win a clobbered file and writes history", "[conda][link]") {
  PrefixPath dir;
  dir.path = "share";
  dir.kind = PrefixKind::directory;
  PackagePlan a = plan_named("a", {dir, file_at("share/common", "from a"), file_at("share/a", "a")}, {"a"});
  a.link_scripts = {"bin/.a-post-link.sh"};
  PackagePlan b = plan_named("b", {dir, file_at("share/common", "from b")}, {"b >=1", "a"});
  PrefixOptions opts;
  opts.time = 1'700'000'000;
  auto merged = merge_plans({a, b}, opts);
  REQUIRE_OK(merged);
  std::vector<std::string> paths;
  std::string common;
  for (const PrefixPath& p : merged->paths) {
    paths.push_back(p.path);
    if (p.path == "share/common") {
      common = p.data;
    }
  }
  CHECK(paths == std::vector<std::string>{"conda-meta/a-1.0-0.json", "conda-meta/b-1.0-0.json",
                                          "conda-meta/frozen", "conda-meta/history", "share", "share/a",
                                          "share/common"});
  CHECK(common == "from b");
  REQUIRE(merged->clobbers.size() == 1);
  CHECK(merged->clobbers[0].path == "share/common");
  CHECK(merged->clobbers[0].winner == "b-1.0-0");
  CHECK(merged->clobbers[0].loser == "a-1.0-0");
  CHECK(merged->link_scripts ==
        std::vector<std::pair<std::string, std::string>>{{"a-1.0-0", "bin/.a-post-link.sh"}});
  CHECK(history_text({a, b}, opts) == "==> 2023-11-14 22:13:20 <==\n"
                                      "# cmd: lockstep build\n"
                                      "+conda-forge/linux-64::a-1.0-0\n"
                                      "+conda-forge/linux-64::b-1.0-0\n"
                                      "# update specs: ['a', 'b >=1']\n");
}

TEST_CASE("merging plans refuses what a prefix can't hold", "[conda][link]") {
  PrefixPath dir;
  dir.path = "lib/x";
  dir.kind = PrefixKind::directory;
  PrefixPath link;
  link.path = "lib";
  link.kind = PrefixKind::symlink;
  link.target = "lib64";
  PrefixPath out_link;
  out_link.path = "lib/up";
  out_link.kind = PrefixKind::symlink;
  out_link.target = "../../..";
  struct Case {
    const char* what;
    std::vector<PackagePlan> plans;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"file over directory",
       {plan_named("a", {dir}), plan_named("b", {file_at("lib/x", "")})},
       "b-1.0-0 installs a file at 'lib/x' where a-1.0-0 has a directory"},
      {"under a symlink",
       {plan_named("a", {link}), plan_named("b", {file_at("lib/y", "")})},
       "'lib/y' of b-1.0-0 lies under the symlink 'lib' of a-1.0-0"},
      {"symlink out",
       {plan_named("a", {out_link})},
       "symlink 'lib/up' -> '../../..' of a-1.0-0 resolves outside"},
      {"twice", {plan_named("a", {}), plan_named("a", {})}, "'a' is installed twice"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto r = merge_plans(c.plans, {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK_THAT(r.error().message, Catch::Contains(c.message));
  }
}
