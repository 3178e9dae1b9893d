#include "builder/image/wheel_install.hpp"
#include "support/oci/tar_writer.hpp"
#include "support/python/wheel_archive.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

using namespace lockstep;
using namespace lockstep::builder;
namespace fs = std::filesystem;

namespace {

// Builds a wheel from a JSON spec with python3's zipfile, writing RECORD from the files as
// bdist_wheel does. Options: "order": "reverse" (members in reverse order), "tamper": names whose
// content changes by one byte after RECORD is written, "raw": extra members [name, content,
// external_attr_high] not in RECORD, "record_extra": extra RECORD lines, "no_record": [names].
constexpr const char* k_make_wheel = R"PY(
import base64, hashlib, json, sys, warnings, zipfile
warnings.simplefilter("ignore")
spec = json.load(open(sys.argv[1]))
dist_info = spec["dist_info"]
rows = []
entries = []
for name, content, mode in spec["files"]:
    data = content.encode()
    if name not in spec.get("no_record", []):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    if name in spec.get("tamper", []):
        data = data[:-1] + bytes([data[-1] ^ 1])
    entries.append((name, data, mode))
rows += spec.get("record_extra", [])
rows.append(dist_info + "/RECORD,,")
entries.append((dist_info + "/RECORD", ("\n".join(rows) + "\n").encode(), 0o644))
if spec.get("order") == "reverse":
    entries.reverse()
with zipfile.ZipFile(sys.argv[2], "w") as z:
    for name, data, mode in entries:
        info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, data)
    for name, content, attr in spec.get("raw", []):
        info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = attr << 16
        z.writestr(info, content.encode())
)PY";

using json = nlohmann::json;

json demo_files() {
  const int file = 0644;
  const int exec = 0755;
  return json::array({
      {"demo/__init__.py", "from demo.core import greet\n", file},
      {"demo/core.py",
       "def greet():\n    return 'hello from demo'\n\n\ndef main():\n    print(greet())\n    return 0\n",
       file},
      {"demo/tool.sh", "#!/bin/sh\necho tool\n", exec},
      {"demo/sub/data.txt", "sub data\n", file},
      {"demo-1.0.data/scripts/demo-script", "#!python -u\nimport demo\nprint('script', demo.greet())\n",
       file},
      {"demo-1.0.data/scripts/plain.sh", "#!/bin/sh\necho plain\n", file},
      {"demo-1.0.data/data/share/demo/readme.txt", "readme\n", file},
      {"demo-1.0.data/headers/demo.h", "#define DEMO 1\n", file},
      {"demo-1.0.data/purelib/demo_extra.py", "X = 1\n", file},
      {"demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: six\n",
       file},
      {"demo-1.0.dist-info/WHEEL",
       "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n", file},
      {"demo-1.0.dist-info/entry_points.txt",
       "[console_scripts]\ndemo = demo.core:main\n\n[gui_scripts]\ndemo-gui = demo.core:main\n", file},
      {"demo-1.0.dist-info/top_level.txt", "demo\ndemo_extra\n", file},
      {"demo-1.0.dist-info/INSTALLER", "pip\n", file},
  });
}

json demo_spec() {
  return json{{"dist_info", "demo-1.0.dist-info"}, {"files", demo_files()}};
}

struct Fixture : test::TempDirFixture {
  fs::path make_wheel(const json& spec, const std::string& filename = "demo-1.0-py3-none-any.whl") const {
    auto script = write("mkwheel.py", k_make_wheel);
    auto spec_file = write("spec.json", spec.dump());
    fs::path out = dir() / filename;
    test::run_command("python3 " + script.string() + " " + spec_file.string() + " " + out.string());
    return out;
  }

  std::string python() const {
    std::string p = test::run_command("command -v python3");
    return p.substr(0, p.find('\n'));
  }
};

struct Installed {
  std::string tar;
  WheelInstallInfo info;
};

Result<Installed> install(const fs::path& whl, const WheelTarget& target, std::set<std::string>& seen,
                          const std::string& what = "demo-1.0-py3-none-any.whl") {
  test::StringSink sink;
  TarWriter tar(sink);
  log::Progress progress("install", 0);
  LS_TRY_ASSIGN(auto info, install_wheel(tar, progress, whl, target, seen, what));
  tar.finish();
  return Installed{sink.out, std::move(info)};
}

Installed install_ok(const fs::path& whl, const WheelTarget& target) {
  std::set<std::string> seen;
  auto r = install(whl, target, seen, whl.filename().string());
  if (!r) {
    FAIL(r.error().message);
  }
  return *r;
}

std::string install_error(const fs::path& whl, const std::string& what = "demo-1.0-py3-none-any.whl") {
  std::set<std::string> seen;
  auto r = install(whl, WheelTarget{}, seen, what);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  return r.error().message;
}

fs::path extract(const test::TempDirFixture& tmp, const std::string& tar_bytes, const std::string& name) {
  auto tar_path = tmp.write(name + ".tar", tar_bytes);
  fs::path root = tmp.dir() / name;
  fs::create_directories(root);
  test::run_command("tar -xf " + tar_path.string() + " -C " + root.string());
  return root;
}

// The tar's members as "TYPE MODE UID GID MTIME NAME", read with python's tarfile.
std::vector<std::string> tar_listing(const test::TempDirFixture& tmp, const std::string& tar_bytes) {
  auto tar_path = tmp.write("listing.tar", tar_bytes);
  auto script = tmp.write("list.py", "import sys, tarfile\n"
                                     "for m in tarfile.open(sys.argv[1]):\n"
                                     "    t = 'd' if m.isdir() else 'f' if m.isfile() else '?'\n"
                                     "    print(t, oct(m.mode), m.uid, m.gid, m.mtime, m.name)\n");
  return test::lines_of(test::run_python(script, {tar_path.string()}));
}

} // namespace

TEST_CASE("A wheel installs into a layer that python imports from", "[wheel_install]") {
  if (!test::have_tool("python3")) {
    WARN("python3 is not installed: wheel installation is not tested");
    return;
  }
  Fixture tmp;
  auto whl = tmp.make_wheel(demo_spec());
  WheelTarget target;
  target.python = tmp.python();
  target.epoch = 1700000000;
  auto installed = install_ok(whl, target);
  const auto& info = installed.info;
  CHECK(info.project == "demo");
  CHECK(info.version.str() == "1.0");
  CHECK(info.dist_info == "usr/local/lib/python3.11/dist-packages/demo-1.0.dist-info");
  CHECK(info.metadata.requires_dist.at(0).name == "six");
  CHECK(info.scripts == std::vector<std::string>{"usr/local/bin/demo", "usr/local/bin/demo-gui"});
  CHECK(info.zip_passes == 1);

  fs::path root = extract(tmp, installed.tar, "root");
  const std::string site = (root / "usr/local/lib/python3.11/dist-packages").string();
  const std::string env = "PYTHONPATH=" + site + " PYTHONDONTWRITEBYTECODE=1 ";

  // Python imports it, the console script and the rewritten script run.
  CHECK(test::run_command(env + "python3 -c 'import demo, demo_extra; print(demo.greet(), demo_extra.X)'") ==
        "hello from demo 1\n");
  CHECK(test::run_command(env + (root / "usr/local/bin/demo").string()) == "hello from demo\n");
  CHECK(test::run_command(env + (root / "usr/local/bin/demo-script").string()) == "script hello from demo\n");
  CHECK(test::slurp(root / "usr/local/bin/demo-script").rfind("#!" + target.python + "\nimport demo\n", 0) ==
        0);
  CHECK(test::run_command((root / "usr/local/bin/plain.sh").string()) == "plain\n");
  CHECK(test::slurp(root / "usr/local/share/demo/readme.txt") == "readme\n");
  CHECK(test::slurp(root / "usr/local/include/python3.11/demo/demo.h") == "#define DEMO 1\n");
  CHECK(test::slurp(root / "usr/local/bin/demo") ==
        "#!" + target.python +
            "\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom demo.core import main\n"
            "if __name__ == '__main__':\n    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', "
            "sys.argv[0])\n"
            "    sys.exit(main())\n");

  // importlib.metadata sees the distribution, installed by lockstep; pip lists it.
  CHECK(test::run_command(env + "python3 -c \"import importlib.metadata as m; d = m.distribution('demo'); "
                                "print(d.version, d.read_text('INSTALLER').strip(), "
                                "sorted(e.name for e in d.entry_points))\"") ==
        "1.0 lockstep ['demo', 'demo-gui']\n");
  auto pip_list = test::run_command("python3 -m pip list --disable-pip-version-check --path " + site +
                                        " --format=freeze 2>/dev/null",
                                    test::ExitCheck::ignore);
  if (!pip_list.empty()) {
    CHECK(pip_list == "demo==1.0\n");
  }

  // RECORD lists exactly the installed files (relative to site-packages), with their hashes.
  auto check =
      tmp.write("check_record.py",
                "import base64, csv, hashlib, os, sys\n"
                "root, site = sys.argv[1], sys.argv[2]\n"
                "rows = list(csv.reader(open(os.path.join(site, 'demo-1.0.dist-info/RECORD'))))\n"
                "listed = set()\n"
                "for path, h, size in rows:\n"
                "    full = os.path.normpath(os.path.join(site, path))\n"
                "    listed.add(full)\n"
                "    if not h:\n"
                "        print('nohash', path); continue\n"
                "    data = open(full, 'rb').read()\n"
                "    d = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()\n"
                "    if h != 'sha256=' + d or int(size) != len(data): print('bad', path)\n"
                "for d, _, files in os.walk(root):\n"
                "    for f in files:\n"
                "        if os.path.join(d, f) not in listed: print('unlisted', os.path.join(d, f))\n");
  CHECK(test::run_command("python3 " + check.string() + " " + root.string() + " " + site) ==
        "nohash demo-1.0.dist-info/RECORD\n");
  auto record = test::slurp(fs::path(site) / "demo-1.0.dist-info/RECORD");
  CHECK(record.find("../../../bin/demo,sha256=") != std::string::npos);
  CHECK(record.find("../../../include/python3.11/demo/demo.h,") != std::string::npos);
  CHECK(record.find("demo-1.0.dist-info/INSTALLER,sha256=") != std::string::npos);
  CHECK(test::slurp(fs::path(site) / "demo-1.0.dist-info/INSTALLER") == "lockstep\n");

  // Members: parents first, tree order, fixed modes, owner and time.
  auto listing = tar_listing(tmp, installed.tar);
  REQUIRE(listing.size() >= 10);
  CHECK(listing[0] == "d 0o755 0 0 1700000000 usr");
  CHECK(listing[1] == "d 0o755 0 0 1700000000 usr/local");
  CHECK(listing[2] == "d 0o755 0 0 1700000000 usr/local/bin");
  CHECK(listing[3] == "f 0o755 0 0 1700000000 usr/local/bin/demo");
  std::vector<std::string> names;
  for (const auto& line : listing) {
    names.push_back(line.substr(line.rfind(' ') + 1));
    CHECK(line.find(" 0 0 1700000000 ") != std::string::npos);
  }
  auto mode_of = [&](const std::string& name) {
    for (const auto& line : listing) {
      if (line.substr(line.rfind(' ') + 1) == name) {
        return line.substr(0, line.find(' ', 2));
      }
    }
    return std::string("missing");
  };
  const std::string sp = "usr/local/lib/python3.11/dist-packages/";
  CHECK(mode_of(sp + "demo/tool.sh") == "f 0o755");
  CHECK(mode_of(sp + "demo/core.py") == "f 0o644");
  CHECK(mode_of("usr/local/bin/plain.sh") == "f 0o755");
  CHECK(mode_of(sp + "demo/sub") == "d 0o755");
  // Depth-first: demo/ and its subtree before demo-1.0.dist-info, demo/sub/ in name order among demo's files.
  auto at = [&](const std::string& name) {
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  CHECK(at(sp + "demo/core.py") < at(sp + "demo/sub"));
  CHECK(at(sp + "demo/sub/data.txt") < at(sp + "demo/tool.sh"));
  CHECK(at(sp + "demo/tool.sh") < at(sp + "demo-1.0.dist-info"));
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
}

TEST_CASE("Wheel installation does not depend on zip member order or the buffer size", "[wheel_install]") {
  if (!test::have_tool("python3")) {
    WARN("python3 is not installed: wheel installation is not tested");
    return;
  }
  Fixture tmp;
  auto whl = tmp.make_wheel(demo_spec());
  json reversed = demo_spec();
  reversed["order"] = "reverse";
  auto whl_reversed = tmp.make_wheel(reversed, "reversed-demo-1.0-py3-none-any.whl");
  REQUIRE(test::slurp(whl) != test::slurp(whl_reversed));
  WheelTarget target;
  auto a = install_ok(whl, target);
  auto b = install_ok(whl, target);
  auto c = install_ok(whl_reversed, target);
  CHECK(a.tar == b.tar);
  CHECK(a.tar == c.tar);
  target.buffer_bytes = 0; // every out-of-order member waits for another pass
  auto d = install_ok(whl_reversed, target);
  CHECK(d.tar == a.tar);
  CHECK(d.info.zip_passes > 1);
}

TEST_CASE("A wheel's METADATA is read without installing it", "[wheel_install]") {
  if (!test::have_tool("python3")) {
    WARN("python3 is not installed: wheel metadata is not tested");
    return;
  }
  Fixture tmp;
  auto md = read_wheel_metadata(tmp.make_wheel(demo_spec()), "demo-1.0-py3-none-any.whl");
  REQUIRE(md);
  CHECK(md->project == "demo");
  CHECK(md->version.str() == "1.0");
  REQUIRE(md->requires_dist.size() == 1);
  CHECK(md->requires_dist[0].project == "six");
  json two = demo_spec();
  two["files"].push_back(json::array({"other-1.0.dist-info/METADATA", "Name: other\nVersion: 1.0\n", 0644}));
  CHECK(read_wheel_metadata(tmp.make_wheel(two), "w").error().message ==
        "w: expected exactly one .dist-info directory with a METADATA file; not a valid wheel");
}

TEST_CASE("A tampered wheel is refused naming the member", "[wheel_install][errors]") {
  if (!test::have_tool("python3")) {
    WARN("python3 is not installed: wheel installation is not tested");
    return;
  }
  Fixture tmp;
  json spec = demo_spec();
  spec["tamper"] = json::array({"demo/core.py"});
  auto whl = tmp.make_wheel(spec);
  std::string message = install_error(whl);
  CHECK(message.rfind("demo-1.0-py3-none-any.whl: demo/core.py does not match the wheel's RECORD (sha256 ",
                      0) == 0);
  CHECK(message.find("); the wheel was modified or is corrupt") != std::string::npos);

  json script = demo_spec();
  script["tamper"] = json::array({"demo-1.0.dist-info/METADATA"}); // read during the listing
  CHECK(install_error(tmp.make_wheel(script))
            .find("demo-1.0.dist-info/METADATA does not match the wheel's RECORD") != std::string::npos);
}

TEST_CASE("Hostile or malformed wheels are refused with the reason", "[wheel_install][errors]") {
  if (!test::have_tool("python3")) {
    WARN("python3 is not installed: wheel installation is not tested");
    return;
  }
  Fixture tmp;
  auto with_raw = [&](const std::string& name, const std::string& content, int attr) {
    json spec = demo_spec();
    spec["raw"] = json::array({json::array({name, content, attr})});
    return tmp.make_wheel(spec);
  };
  auto with_file = [&](const std::string& name, const std::string& content) {
    json spec = demo_spec();
    spec["files"].push_back(json::array({name, content, 0644}));
    return tmp.make_wheel(spec);
  };
  const std::string w = "demo-1.0-py3-none-any.whl: ";
  CHECK(install_error(with_file("../evil.py", "x")) ==
        w + "zip member '../evil.py' has a '..' component; refusing the wheel");
  CHECK(install_error(with_file("demo/../../evil.py", "x")) ==
        w + "zip member 'demo/../../evil.py' has a '..' component; refusing the wheel");
  CHECK(install_error(with_file("/etc/evil.py", "x")) ==
        w + "zip member '/etc/evil.py' has an absolute name; "
            "refusing the wheel");
  // libarchive reads '\' in zip names as '/' (as Windows tools mean it), so such a member can only
  // ever land inside the tree, and must match a RECORD row with '/'.
  CHECK(install_error(with_file("demo\\evil.py", "x")) ==
        w + "RECORD lists demo\\evil.py, which is not in the wheel");
  CHECK(install_error(with_file("..\\..\\evil.py", "x")) ==
        w + "zip member '../../evil.py' has a '..' component; refusing the wheel");
  CHECK(install_error(with_file("demo/./x.py", "x")) ==
        w + "zip member 'demo/./x.py' has an empty or '.' component; refusing the wheel");
  CHECK(install_error(with_raw("demo/link", "/etc/passwd", 0120777)) ==
        w + "zip member 'demo/link' is a symbolic link; refusing the wheel");
  CHECK(install_error(with_raw("demo/core.py", "print('evil')\n", 0100644)) ==
        w + "zip member 'demo/core.py' appears twice; refusing the wheel");
  CHECK(install_error(with_raw("demo/extra.py", "x", 0100644)) ==
        w + "demo/extra.py is not listed in the wheel's RECORD; refusing the wheel");
  {
    json spec = demo_spec();
    spec["record_extra"] =
        json::array({"demo/missing.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0"});
    CHECK(install_error(tmp.make_wheel(spec)) ==
          w + "RECORD lists demo/missing.py, which is not in the wheel");
  }
  {
    json spec = demo_spec();
    spec["no_record"] = json::array({"demo/core.py"});
    spec["record_extra"] = json::array({"demo/core.py,,"});
    CHECK(install_error(tmp.make_wheel(spec)) ==
          w + "RECORD has no hash or size for demo/core.py; refusing the wheel");
  }
  {
    json spec = demo_spec();
    spec["no_record"] = json::array({"demo/core.py"});
    spec["record_extra"] = json::array({"demo/core.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,3"});
    CHECK(install_error(tmp.make_wheel(spec)) ==
          w + "demo/core.py does not match the wheel's RECORD (88 bytes, "
              "RECORD says 3); the wheel was modified or is corrupt");
  }
  CHECK(install_error(with_file("other-1.0.dist-info/METADATA", "Name: other\nVersion: 1.0\n")) ==
        w + "expected exactly one .dist-info directory, found 2; not a valid wheel");
  CHECK(install_error(with_file("demo-1.0.data/lib/x.py", "x")) ==
        w + "demo-1.0.data/lib/x.py: unknown .data scheme 'lib' (expected purelib, platlib, scripts, data or "
            "headers)");
  CHECK(install_error(with_file("demo-2.0.data/purelib/x.py", "x")) ==
        w + "unexpected data directory 'demo-2.0.data' (expected demo-1.0.data)");
  CHECK(install_error(with_file("demo-1.0.data/purelib/demo/core.py", "x")) ==
        w + "two members would be installed as /usr/local/lib/python3.11/dist-packages/demo/core.py");
  CHECK(install_error(with_file("demo/core.py/x", "x")) ==
        w + "/usr/local/lib/python3.11/dist-packages/demo/core.py would be both a file and a directory");
  {
    json spec = demo_spec();
    spec["files"][10][1] = "Wheel-Version: 2.0\nRoot-Is-Purelib: true\n";
    CHECK(install_error(tmp.make_wheel(spec)) ==
          w + "demo-1.0.dist-info/WHEEL: wheel "
              "format version 2.0 is not supported (lockstep installs 1.x "
              "wheels)");
  }
  {
    json spec = demo_spec();
    spec["files"][9][1] = "Metadata-Version: 2.1\nName: other\nVersion: 1.0\n";
    CHECK(install_error(tmp.make_wheel(spec)) ==
          w + "METADATA says other 1.0, but the .dist-info directory is demo-1.0.dist-info");
  }
  {
    json spec = demo_spec();
    spec["files"][11][1] = "[console_scripts]\n../evil = demo.core:main\n";
    CHECK(install_error(tmp.make_wheel(spec)) ==
          w + "entry point '../evil = demo.core:main' cannot be installed as a script");
  }
  CHECK(install_error(tmp.make_wheel(demo_spec()), "other-1.0-py3-none-any.whl") ==
        "other-1.0-py3-none-any.whl: the wheel contains demo-1.0.dist-info, which is not other 1.0");
  auto not_zip = tmp.write("junk-1.0-py3-none-any.whl", "not a zip");
  CHECK(install_error(not_zip, "junk").rfind("junk: not a valid zip archive", 0) == 0);
}

TEST_CASE("Wheels in one layer share directories and may not overwrite each other", "[wheel_install]") {
  if (!test::have_tool("python3")) {
    WARN("python3 is not installed: wheel installation is not tested");
    return;
  }
  Fixture tmp;
  auto demo = tmp.make_wheel(demo_spec());
  json other = {{"dist_info", "other-2.0.dist-info"},
                {"files", json::array({{"other/__init__.py", "", 0644},
                                       {"other-2.0.dist-info/METADATA", "Name: other\nVersion: 2.0\n", 0644},
                                       {"other-2.0.dist-info/WHEEL", "Wheel-Version: 1.0\n", 0644}})}};
  auto other_whl = tmp.make_wheel(other, "other-2.0-py3-none-any.whl");
  test::StringSink sink;
  TarWriter tar(sink);
  log::Progress progress("install", 0);
  std::set<std::string> seen;
  REQUIRE(install_wheel(tar, progress, demo, WheelTarget{}, seen, "demo-1.0-py3-none-any.whl"));
  CHECK(seen.count("usr/local/lib/python3.11/dist-packages/") == 1);
  CHECK(seen.count("usr/local/lib/python3.11/dist-packages/demo/core.py") == 1);
  auto second = install_wheel(tar, progress, other_whl, WheelTarget{}, seen, "other-2.0-py3-none-any.whl");
  REQUIRE(second);
  CHECK(second->files.front() == "usr/local/lib/python3.11/dist-packages/other/__init__.py");
  tar.finish();
  auto listing = tar_listing(tmp, sink.out);
  std::set<std::string> unique;
  for (const auto& line : listing) {
    CHECK(unique.insert(line.substr(line.rfind(' ') + 1)).second);
  }
  CHECK(unique.count("usr/local/lib/python3.11/dist-packages/other") == 1);

  test::StringSink sink2;
  TarWriter tar2(sink2);
  auto again = install_wheel(tar2, progress, demo, WheelTarget{}, seen, "demo-1.0-py3-none-any.whl");
  REQUIRE_FALSE(again);
  CHECK(again.error().message ==
        "demo-1.0-py3-none-any.whl: /usr/local/lib/python3.11/dist-packages/demo/__init__.py is already "
        "installed "
        "in this layer by another wheel");
}

TEST_CASE("Wheel targets must stay inside the image", "[wheel_install][errors]") {
  test::TempDirFixture tmp;
  std::set<std::string> seen;
  auto whl = tmp.write("x-1.0-py3-none-any.whl", "");
  WheelTarget target;
  target.site_packages = "/usr/lib/python3/dist-packages";
  CHECK(install(whl, target, seen).error().message ==
        "wheel target site_packages '/usr/lib/python3/dist-packages' must be a relative path inside the "
        "image (like "
        "usr/local/bin)");
  target = WheelTarget{};
  target.scripts_dir = "usr/../../bin";
  CHECK_FALSE(install(whl, target, seen));
  target = WheelTarget{};
  target.python = "/opt/my python/bin/python3";
  CHECK(install(whl, target, seen).error().message ==
        "wheel target python '/opt/my python/bin/python3' must be an "
        "absolute path without spaces, at most 127 bytes");
}

TEST_CASE("pip's own wheel installs and runs", "[wheel_install][peer]") {
  if (!test::have_tool("python3")) {
    WARN("python3 is not installed: the pip wheel is not installed");
    return;
  }
  // Debian's python3-pip-whl, or the copy CPython bundles for ensurepip.
  std::string found = test::run_command(
      "ls /usr/share/python-wheels/pip-*.whl 2>/dev/null | head -1; python3 -c 'import ensurepip, glob, os; "
      "print(\"\\n\".join(glob.glob(os.path.join(os.path.dirname(ensurepip.__file__), \"_bundled\", "
      "\"pip-*.whl\"))))' 2>/dev/null",
      test::ExitCheck::ignore);
  auto candidates = test::lines_of(found);
  if (candidates.empty() || candidates[0].empty()) {
    WARN("no pip wheel found (python3-pip-whl or ensurepip): skipped");
    return;
  }
  Fixture tmp;
  fs::path whl = candidates[0];
  WheelTarget target;
  target.python = tmp.python();
  auto installed = install_ok(whl, target);
  CHECK(installed.info.project == "pip");
  CHECK(std::find(installed.info.scripts.begin(), installed.info.scripts.end(), "usr/local/bin/pip") !=
        installed.info.scripts.end());
  fs::path root = extract(tmp, installed.tar, "root");
  const std::string site = (root / "usr/local/lib/python3.11/dist-packages").string();
  auto version = test::run_command("PYTHONPATH=" + site + " PYTHONDONTWRITEBYTECODE=1 " +
                                   (root / "usr/local/bin/pip").string() + " --version");
  INFO(version);
  CHECK(version.rfind("pip " + installed.info.version.str() + " from " + site + "/pip ", 0) == 0);
  // No bytecode was written into the layer.
  CHECK(test::run_command("find " + root.string() + " -name '*.pyc' | wc -l") == "0\n");
}

// Not run by default: `LOCKSTEP_BENCH_WHEEL=path.whl unit_builder "[.wheel_install_bench]"` prints
// how long installing a big wheel into a discarded tar takes, the passes and the peak memory
// (docs/wheels.md quotes it).
TEST_CASE("Installing a big wheel (measurement)", "[.wheel_install_bench]") {
  const char* path = std::getenv("LOCKSTEP_BENCH_WHEEL");
  if (path == nullptr) {
    WARN("set LOCKSTEP_BENCH_WHEEL to a wheel");
    return;
  }
  struct CountingSink final : ByteSink {
    void write(const void*, std::size_t size) override { bytes += size; }
    std::uint64_t bytes = 0;
  };
  for (std::uint64_t buffer : {std::uint64_t{256} << 20, std::uint64_t{0}}) {
    CountingSink sink;
    TarWriter tar(sink);
    log::Progress progress("install", 0);
    std::set<std::string> seen;
    WheelTarget target;
    target.buffer_bytes = buffer;
    auto start = std::chrono::steady_clock::now();
    auto info = install_wheel(tar, progress, path, target, seen, fs::path(path).filename().string());
    REQUIRE(info);
    tar.finish();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    struct rusage usage {};
    ::getrusage(RUSAGE_SELF, &usage);
    WARN(fmt::format("{}: buffer {} MiB: {} files, {} MiB tar in {:.2f} s, {} zip pass(es), peak RSS {} MiB",
                     path, buffer >> 20, info->files.size(), sink.bytes >> 20, seconds, info->zip_passes,
                     usage.ru_maxrss / 1024));
  }
}
