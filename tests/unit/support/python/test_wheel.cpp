#include "support/python/wheel.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

WheelName wheel(const char* name) {
  auto parsed = WheelName::parse(name);
  INFO(name);
  REQUIRE(parsed);
  return *parsed;
}

std::vector<WheelTag> tags_for(const char* python, const char* glibc, const char* machine) {
  auto tags = supported_tags(python, glibc, machine);
  REQUIRE(tags);
  return *tags;
}

std::size_t index_of(const std::vector<WheelTag>& tags, const std::string& tag) {
  for (std::size_t i = 0; i < tags.size(); ++i) {
    if (tags[i].str() == tag) {
      return i;
    }
  }
  FAIL("tag " << tag << " is not in the list");
  return 0;
}

} // namespace

TEST_CASE("Wheel file names parse into project, version, build and expanded tags", "[wheel]") {
  auto a = wheel("torch-2.1.0+cu121-cp311-cp311-linux_x86_64.whl");
  CHECK(a.distribution == "torch");
  CHECK(a.project == "torch");
  CHECK(a.version.str() == "2.1.0+cu121");
  CHECK_FALSE(a.build_number);
  REQUIRE(a.tags.size() == 1);
  CHECK(a.tags[0].str() == "cp311-cp311-linux_x86_64");

  auto b = wheel("typing_extensions-4.9.0-py3-none-any.whl");
  CHECK(b.project == "typing-extensions");

  auto c = wheel("six-1.16.0-1abc-py2.py3-none-any.whl");
  CHECK(c.build_number == 1U);
  CHECK(c.build_tag == "1abc");
  REQUIRE(c.tags.size() == 2);
  CHECK(c.tags[0].str() == "py2-none-any");
  CHECK(c.tags[1].str() == "py3-none-any");

  auto d = wheel("numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl");
  REQUIRE(d.tags.size() == 2);
  CHECK(d.tags[1].platform == "manylinux2014_x86_64");

  auto e = wheel("Pillow-10.0.0-CP311-CP311-Linux_X86_64.whl"); // tags are case-insensitive
  CHECK(e.tags[0].str() == "cp311-cp311-linux_x86_64");
  CHECK(e.project == "pillow");
}

TEST_CASE("Malformed wheel file names are refused with the part at fault", "[wheel][errors]") {
  auto message = [](const char* name) {
    auto r = WheelName::parse(name);
    INFO(name);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  CHECK(message("foo-1.0.tar.gz") ==
        "'foo-1.0.tar.gz' is not a valid wheel file name: it does not end in .whl");
  CHECK(message("foo-1.0-py3-none.whl") ==
        "'foo-1.0-py3-none.whl' is not a valid wheel file name: expected "
        "{distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl");
  CHECK(message("foo-1.0-x1-py3-none-any.whl") ==
        "'foo-1.0-x1-py3-none-any.whl' is not a valid wheel file name: "
        "the build tag must start with a number");
  CHECK(message("foo-one-py3-none-any.whl") ==
        "'foo-one-py3-none-any.whl' is not a valid wheel file name: 'one' "
        "is not a valid version (PEP 440: "
        "[N!]N(.N)*[{a|b|rc}N][.postN][.devN][+local])");
  CHECK(message("f/o-1.0-py3-none-any.whl") ==
        "'f/o-1.0-py3-none-any.whl' is not a valid wheel file name: the "
        "distribution name may only have letters, digits, '_' and '.'");
  CHECK(message("foo-1.0-py3-none-any..x.whl") ==
        "'foo-1.0-py3-none-any..x.whl' is not a valid wheel file name: "
        "invalid tag ''");
}

TEST_CASE("Supported tags follow packaging's order for CPython on glibc Linux", "[wheel]") {
  auto tags = tags_for("3.11", "2.36", "x86_64");
  CHECK(tags.front().str() == "cp311-cp311-manylinux_2_36_x86_64");
  CHECK(tags.back().str() == "py30-none-any");
  CHECK(index_of(tags, "cp311-cp311-manylinux2014_x86_64") ==
        index_of(tags, "cp311-cp311-manylinux_2_17_x86_64") + 1);
  CHECK(index_of(tags, "cp311-cp311-manylinux1_x86_64") + 1 == index_of(tags, "cp311-cp311-linux_x86_64"));
  CHECK(index_of(tags, "cp311-cp311-linux_x86_64") < index_of(tags, "cp311-abi3-manylinux_2_36_x86_64"));
  CHECK(index_of(tags, "cp32-abi3-linux_x86_64") < index_of(tags, "py311-none-manylinux_2_36_x86_64"));
  CHECK(index_of(tags, "py3-none-linux_x86_64") < index_of(tags, "cp311-none-any"));
  CHECK(index_of(tags, "cp311-none-any") + 1 == index_of(tags, "py311-none-any"));

  auto arm = tags_for("3.12", "2.28", "aarch64");
  CHECK(arm.front().str() == "cp312-cp312-manylinux_2_28_aarch64");
  CHECK(index_of(arm, "cp312-cp312-manylinux2014_aarch64") + 1 == index_of(arm, "cp312-cp312-linux_aarch64"));
  for (const auto& t : arm) {
    CHECK(t.platform.find("manylinux2010") == std::string::npos);
  }

  CHECK(supported_tags("2.7", "2.36", "x86_64").error().message ==
        "python version '2.7': expected 3.N (like 3.11)");
  CHECK(supported_tags("3.11", "musl", "x86_64").error().message ==
        "glibc version 'musl': expected 2.N (like 2.36)");
  CHECK_FALSE(supported_tags("3.11", "2.36", "sparc"));
}

TEST_CASE("Supported tags equal packaging.tags.sys_tags() of this machine's python3", "[wheel][peer]") {
  if (!test::have_tool("python3")) {
    WARN("python3 is not installed: the peer comparison is skipped");
    return;
  }
  std::string script =
      "import platform, os, sys\n"
      "try:\n"
      "    from packaging import tags\n"
      "except ImportError:\n"
      "    from pip._vendor.packaging import tags\n"
      "if platform.python_implementation() != 'CPython' or not sys.platform.startswith('linux'):\n"
      "    sys.exit(0)\n"
      "print('.'.join(platform.python_version_tuple()[:2]))\n"
      "print(os.confstr('CS_GNU_LIBC_VERSION').split()[1])\n"
      "print(platform.machine())\n"
      "for t in tags.sys_tags():\n"
      "    print(t)\n";
  test::TempDirFixture tmp;
  auto path = tmp.write("tags.py", script);
  auto lines =
      test::lines_of(test::run_command("python3 " + path.string() + " 2>/dev/null", test::ExitCheck::ignore));
  if (lines.size() < 4) {
    WARN("python3 is not CPython on glibc Linux, or has no packaging: the peer comparison is skipped");
    return;
  }
  auto ours = tags_for(lines[0].c_str(), lines[1].c_str(), lines[2].c_str());
  std::vector<std::string> theirs(lines.begin() + 3, lines.end());
  std::vector<std::string> ours_text;
  for (const auto& t : ours) {
    ours_text.push_back(t.str());
  }
  // packaging before 22.0 (pip < 24.1 vendors 21.3) did not list cpXY-none-any; later ones do.
  std::string cp_any = "cp" + lines[0].substr(0, 1) + lines[0].substr(2) + "-none-any";
  if (std::find(theirs.begin(), theirs.end(), cp_any) == theirs.end()) {
    ours_text.erase(std::find(ours_text.begin(), ours_text.end(), cp_any));
  }
  INFO("python " << lines[0] << ", glibc " << lines[1] << ", " << lines[2]);
  CHECK(ours_text == theirs);
}

TEST_CASE("The best tag of a wheel ranks it among candidates", "[wheel]") {
  auto tags = tags_for("3.11", "2.36", "x86_64");
  auto manylinux =
      best_tag_rank(wheel("numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"), tags);
  auto pure = best_tag_rank(wheel("numpy-1.26.4-py3-none-any.whl"), tags);
  auto abi3 = best_tag_rank(wheel("cryptography-42.0.0-cp39-abi3-manylinux_2_28_x86_64.whl"), tags);
  REQUIRE(manylinux);
  REQUIRE(pure);
  REQUIRE(abi3);
  CHECK(*manylinux < *abi3);
  CHECK(*abi3 < *pure);
  CHECK(*manylinux == index_of(tags, "cp311-cp311-manylinux_2_17_x86_64"));
  CHECK_FALSE(best_tag_rank(wheel("numpy-1.26.4-cp312-cp312-manylinux_2_17_x86_64.whl"), tags));
  CHECK_FALSE(best_tag_rank(wheel("numpy-1.26.4-cp311-cp311-manylinux_2_38_x86_64.whl"), tags));
  CHECK_FALSE(best_tag_rank(wheel("numpy-1.26.4-cp311-cp311-win_amd64.whl"), tags));
}

TEST_CASE("METADATA: name, version, requirements, Requires-Python and extras", "[wheel]") {
  std::string text = "Metadata-Version: 2.1\r\n"
                     "Name: Requests\n"
                     "Version: 2.31.0\n"
                     "Summary: Python HTTP for Humans.\n"
                     "Requires-Python: >=3.7\n"
                     "Requires-Dist: charset-normalizer (<4,>=2)\n"
                     "Requires-Dist: PySocks (!=1.5.7,>=1.5.6) ; extra == 'socks'\n"
                     "Provides-Extra: socks\n"
                     "Provides-Extra: Use_Chardet_On_Py3\n"
                     "Description-Content-Type: text/markdown\n"
                     "License: Apache 2.0\n"
                     "   continued\n"
                     "\n"
                     "Requires-Dist: not-a-header-but-the-body\n";
  auto md = parse_core_metadata(text, "requests-2.31.0.dist-info/METADATA");
  REQUIRE(md);
  CHECK(md->metadata_version == "2.1");
  CHECK(md->name == "Requests");
  CHECK(md->project == "requests");
  CHECK(md->version.str() == "2.31.0");
  REQUIRE(md->requires_python);
  CHECK(md->requires_python->str() == ">=3.7");
  REQUIRE(md->requires_dist.size() == 2);
  CHECK(md->requires_dist[1].str() == "PySocks!=1.5.7,>=1.5.6; extra == \"socks\"");
  CHECK(md->provides_extra == std::vector<std::string>{"socks", "use-chardet-on-py3"});

  auto headers = parse_email_headers(text, "METADATA");
  REQUIRE(headers);
  CHECK(headers->at(10).second == "Apache 2.0\ncontinued");

  auto message = [](const std::string& t) {
    auto r = parse_core_metadata(t, "x/METADATA");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  CHECK(message("Name: x\n") == "x/METADATA: no Version field");
  CHECK(message("Version: 1\n") == "x/METADATA: no Name field");
  CHECK(message("Name: x\nVersion: one\n") ==
        "x/METADATA: invalid Version: 'one' is not a valid version (PEP 440: "
        "[N!]N(.N)*[{a|b|rc}N][.postN][.devN][+local])");
  CHECK(
      message("Name: x\nVersion: 1\nRequires-Dist: y (>=\n") ==
      "x/METADATA: Requires-Dist: invalid requirement 'y (>=': expected ')' closing the version specifier at "
      "column 3");
  CHECK(message("Name: x\nVersion: 1\nRequires-Python: >=3.6.*\n") ==
        "x/METADATA: Requires-Python: version specifier '>=3.6.*': a '.*' suffix is only allowed with == and "
        "!=");
}

TEST_CASE("WHEEL: format version and purelib", "[wheel]") {
  auto info = parse_wheel_info("Wheel-Version: 1.0\nGenerator: bdist_wheel (0.41.2)\nRoot-Is-Purelib: True\n"
                               "Tag: py2-none-any\nTag: py3-none-any\n",
                               "WHEEL");
  REQUIRE(info);
  CHECK(info->version_major == 1);
  CHECK(info->root_is_purelib);
  CHECK(info->tags == std::vector<std::string>{"py2-none-any", "py3-none-any"});
  auto newer = parse_wheel_info("Wheel-Version: 1.9\nRoot-Is-Purelib: false\n", "WHEEL");
  REQUIRE(newer);
  CHECK(newer->version_minor == 9);
  CHECK_FALSE(newer->root_is_purelib);
  CHECK(parse_wheel_info("Wheel-Version: 2.0\n", "x/WHEEL").error().message ==
        "x/WHEEL: wheel format version 2.0 is not supported (lockstep installs 1.x wheels)");
  CHECK(parse_wheel_info("Root-Is-Purelib: true\n", "x/WHEEL").error().message ==
        "x/WHEEL: no Wheel-Version field");
  CHECK(parse_wheel_info("Wheel-Version: one\n", "x/WHEEL").error().message ==
        "x/WHEEL: invalid Wheel-Version 'one' (expected like 1.0)");
}

TEST_CASE("entry_points.txt: console and GUI scripts", "[wheel]") {
  auto eps = parse_entry_points("# comment\n"
                                "[console_scripts]\n"
                                "pip = pip._internal.cli.main:main\n"
                                "pip3.11=pip._internal.cli.main:main\n"
                                "tool = pkg.cli : App.run [cli, fast]\n"
                                "\n"
                                "[gui_scripts]\n"
                                "viewer = viewer\n"
                                "[other.group]\n"
                                "x = y:z\n",
                                "entry_points.txt");
  REQUIRE(eps);
  REQUIRE(eps->size() == 5);
  CHECK((*eps)[0].group == "console_scripts");
  CHECK((*eps)[0].name == "pip");
  CHECK((*eps)[0].module == "pip._internal.cli.main");
  CHECK((*eps)[0].attr == "main");
  CHECK((*eps)[1].name == "pip3.11");
  CHECK((*eps)[2].attr == "App.run");
  CHECK((*eps)[2].extras == std::vector<std::string>{"cli", "fast"});
  CHECK((*eps)[3].group == "gui_scripts");
  CHECK((*eps)[3].attr.empty());
  CHECK((*eps)[4].group == "other.group");

  CHECK(parse_entry_points("x = y\n", "e").error().message ==
        "e:1: expected 'name = module:attr' in a [section], found 'x = y'");
  CHECK(parse_entry_points("[a]\nx = os; rm -rf /:main\n", "e").error().message ==
        "e:2: malformed entry point 'x = os; rm -rf /:main' (expected 'name = module:attr [extras]')");
  CHECK(parse_entry_points("[a\n", "e").error().message == "e:1: malformed section header '[a'");
}

TEST_CASE("RECORD: parse and write as pip does", "[wheel]") {
  auto empty = sha256_of("");
  CHECK(record_hash(empty) == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
  auto parsed_hash = parse_record_hash("sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
  REQUIRE(parsed_hash);
  CHECK(*parsed_hash == empty);

  std::string text = "pkg/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\r\n"
                     "\"pkg/odd,name \"\"q\"\".py\",sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
                     "\n"
                     "pkg-1.0.dist-info/RECORD,,\n";
  auto rows = parse_record(text, "RECORD");
  REQUIRE(rows);
  REQUIRE(rows->size() == 3);
  CHECK((*rows)[0].path == "pkg/__init__.py");
  CHECK((*rows)[0].hash == empty);
  CHECK((*rows)[0].size == 0U);
  CHECK((*rows)[1].path == "pkg/odd,name \"q\".py");
  CHECK_FALSE((*rows)[2].hash);
  CHECK_FALSE((*rows)[2].size);
  CHECK(write_record(*rows) ==
        "pkg/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\r\n"
        "\"pkg/odd,name \"\"q\"\".py\",sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\r\n"
        "pkg-1.0.dist-info/RECORD,,\r\n");
  auto again = parse_record(write_record(*rows), "RECORD");
  REQUIRE(again);
  CHECK(*again == *rows);

  auto message = [](const std::string& t) {
    auto r = parse_record(t, "x/RECORD");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  CHECK(message("a,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU\n") ==
        "x/RECORD: row 1: expected 3 fields (path,hash,size), found 2");
  CHECK(message("a,md5=1B2M2Y8AsgTpgAmY7PhCfg,0\n") ==
        "x/RECORD: row 1 (a): hash algorithm 'md5' is not supported (lockstep checks sha256)");
  CHECK(message("a,sha256=abc,0\n") ==
        "x/RECORD: row 1 (a): hash 'sha256=abc' is not a sha256 digest in urlsafe "
        "base64");
  CHECK(message("a,,-1\n") == "x/RECORD: row 1 (a): invalid size '-1'");
  CHECK(message("\"a,,\n") == "x/RECORD: row 1: unterminated quoted field");
}

TEST_CASE("RECORD hashes agree with python's hashlib and base64", "[wheel][peer]") {
  if (!test::have_tool("python3")) {
    WARN("python3 is not installed: the peer comparison is skipped");
    return;
  }
  std::string data = "print('hello')\n";
  std::string theirs =
      test::run_command("python3 -c \"import hashlib, base64; print('sha256=' + "
                        "base64.urlsafe_b64encode(hashlib.sha256(b\\\"print('hello')\\\\n\\\")."
                        "digest()).rstrip(b'=').decode())\"");
  CHECK(record_hash(sha256_of(data)) + "\n" == theirs);
}

TEST_CASE("the license a METADATA declares, as an SPDX expression", "[wheel][license]") {
  CHECK(metadata_license("Metadata-Version: 2.4\nName: a\nVersion: 1\nLicense-Expression: mit OR Apache-2.0\n"
                         "License: BSD\n") == "MIT OR Apache-2.0");
  CHECK(metadata_license("Metadata-Version: 2.1\nName: a\nVersion: 1\nLicense: Apache License 2.0\n") ==
        "Apache-2.0");
  CHECK(metadata_license("Metadata-Version: 2.1\nName: a\nVersion: 1\nLicense: BSD\n"
                         "Classifier: License :: OSI Approved :: MIT License\n") == "MIT");
  // a License field holding a license's text is not a name
  CHECK(metadata_license("Metadata-Version: 2.1\nName: a\nVersion: 1\nLicense: Copyright (c) 2020\n"
                         "        Permission is hereby granted\n")
            .empty());
  // two classifiers: which applies is not said
  CHECK(metadata_license("Metadata-Version: 2.1\nName: a\nVersion: 1\n"
                         "Classifier: License :: OSI Approved :: MIT License\n"
                         "Classifier: License :: OSI Approved :: Apache Software License\n")
            .empty());
  CHECK(metadata_license("Metadata-Version: 2.1\nName: a\nVersion: 1\n").empty());
}
