#include "support/python/pep508.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace lockstep;

namespace {

Requirement req(const std::string& text) {
  auto parsed = Requirement::parse(text);
  INFO(text);
  REQUIRE(parsed);
  return *parsed;
}

bool eval(const std::string& marker, const MarkerEnv& env) {
  auto m = Marker::parse(marker);
  INFO(marker);
  REQUIRE(m);
  auto r = m->evaluate(env);
  REQUIRE(r);
  return *r;
}

} // namespace

TEST_CASE("Project names normalise per PEP 503", "[pep508]") {
  CHECK(normalize_project_name("Foo.Bar__baz") == "foo-bar-baz");
  CHECK(normalize_project_name("typing_extensions") == "typing-extensions");
  CHECK(normalize_project_name("zope.interface") == "zope-interface");
  CHECK(normalize_project_name("A-_.-B") == "a-b");
  CHECK(valid_project_name("nvidia-cuda-runtime-cu12"));
  CHECK(valid_project_name("a"));
  CHECK_FALSE(valid_project_name("-a"));
  CHECK_FALSE(valid_project_name("a_"));
  CHECK_FALSE(valid_project_name("a b"));
  CHECK_FALSE(valid_project_name(""));
}

TEST_CASE("Requirements parse into name, extras, specifier, URL and marker", "[pep508]") {
  auto a = req("Requests[Socks, security]>=2.31, <3 ; python_version >= '3.8'");
  CHECK(a.name == "Requests");
  CHECK(a.project == "requests");
  CHECK(a.extras == std::vector<std::string>{"security", "socks"});
  CHECK(a.specifier.str() == "<3,>=2.31");
  REQUIRE(a.marker);
  CHECK(a.marker->str() == "python_version >= \"3.8\"");
  CHECK(a.str() == "Requests[security,socks]<3,>=2.31; python_version >= \"3.8\"");

  auto b = req("numpy (>=1.24,!=1.25.0)");
  CHECK(b.specifier.str() == "!=1.25.0,>=1.24");
  CHECK_FALSE(b.marker);

  auto c = req("pip @ https://example.com/pip-23.0-py3-none-any.whl#sha256=abc ; sys_platform == 'linux'");
  CHECK(c.url == "https://example.com/pip-23.0-py3-none-any.whl#sha256=abc");
  CHECK(c.specifier.empty());
  CHECK(c.str() ==
        "pip@ https://example.com/pip-23.0-py3-none-any.whl#sha256=abc ; sys_platform == \"linux\"");

  auto d = req("zope.interface");
  CHECK(d.project == "zope-interface");
  CHECK(d.str() == "zope.interface");
  CHECK(req("name;os_name=='posix'").marker->str() == "os_name == \"posix\"");
  CHECK(req("name[]").extras.empty());
}

TEST_CASE("Malformed requirements are refused with the column", "[pep508][errors]") {
  auto message = [](const std::string& text) {
    auto r = Requirement::parse(text);
    INFO(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  CHECK(message("-foo") ==
        "invalid requirement '-foo': expected a project name (letters and digits, with '.', "
        "'_' or '-' inside) at column 1");
  CHECK(message("foo[bar") == "invalid requirement 'foo[bar': expected ']' at column 8");
  CHECK(message("foo[bar,]") ==
        "invalid requirement 'foo[bar,]': expected an extra name after ',' at column 9");
  CHECK(message("foo 1.0") == "invalid requirement 'foo 1.0': '1.0' is not a version specifier (expected an "
                              "operator: ~= == != <= >= < > ===)");
  CHECK(message("foo (>=1.0") ==
        "invalid requirement 'foo (>=1.0': expected ')' closing the version specifier at "
        "column 5");
  // Without whitespace before ';' the marker is part of the URL (PEP 508's grammar).
  CHECK(req("foo @ https://x/y.whl;os_name=='posix'").url == "https://x/y.whl;os_name=='posix'");
  CHECK(message("foo @ https://x/y.whl junk") ==
        "invalid requirement 'foo @ https://x/y.whl junk': expected the "
        "end of the requirement, or whitespace and ';' before a marker at "
        "column 23");
  CHECK(message("foo; python_version >= ") ==
        "invalid requirement 'foo; python_version >=': invalid marker "
        "'python_version >=': expected a marker variable (python_version, "
        "sys_platform, platform_machine, extra, ...) or a quoted string at "
        "column 18");
  CHECK(message("foo; os_name == 'posix") == "invalid requirement 'foo; os_name == 'posix': invalid marker "
                                             "'os_name == 'posix': expected a closing ' at column 12");
  CHECK(message("foo; 'a' == 'b'") ==
        "invalid requirement 'foo; 'a' == 'b'': invalid marker ''a' == 'b'': "
        "expected a marker variable (one side of a comparison must be a variable) "
        "at column 8");
  CHECK(message("foo; os_name = 'posix'") ==
        "invalid requirement 'foo; os_name = 'posix'': invalid marker "
        "'os_name = 'posix'': expected a comparison operator (== != < <= > >= "
        "~= === in, not in) at column 9");
  CHECK(message("foo; (os_name == 'posix'") ==
        "invalid requirement 'foo; (os_name == 'posix'': invalid marker "
        "'(os_name == 'posix'': expected ')' at column 20");
  CHECK(message("foo; " + std::string(40, '(') + "os_name == 'a'" + std::string(40, ')'))
            .find("parentheses nested deeper than 32") != std::string::npos);
}

TEST_CASE("Markers evaluate against a Linux CPython environment", "[pep508]") {
  MarkerEnv env = linux_cpython("3.11.2", "x86_64");
  CHECK(env.python_version == "3.11");
  CHECK(env.implementation_version == "3.11.2");
  CHECK(eval("python_version >= '3.8'", env));
  CHECK_FALSE(
      eval("python_version < '3.10'", env)); // as versions: 3.11 > 3.10, although "3.11" < "3.8" as text
  CHECK(eval("python_full_version >= '3.11.1'", env));
  CHECK(eval("sys_platform == 'linux' and platform_machine == 'x86_64'", env));
  CHECK(eval("os.name == 'posix'", env));
  CHECK(eval("platform_python_implementation == 'CPython' and implementation_name == 'cpython'", env));
  CHECK(eval("'linux' in sys_platform", env));
  CHECK(eval("'win' not in sys_platform", env));
  CHECK(eval("platform_machine in 'x86_64 aarch64'", env));
  CHECK_FALSE(eval("sys_platform == 'win32' or sys_platform == 'darwin'", env));
  CHECK(eval("sys_platform == 'win32' and python_version < '3' or os_name == 'posix'", env));
  CHECK_FALSE(eval("sys_platform == 'win32' and (python_version < '3' or os_name == 'posix')", env));
  CHECK_FALSE(eval("extra == 'test'", env));
  env.extra = "Test_Extra";
  CHECK(eval("extra == 'test-extra'", env)); // PEP 685: extras compare normalised
  // A pre-release interpreter satisfies a version marker (markers allow pre-releases).
  CHECK(eval("python_full_version > '3.11'", linux_cpython("3.12.0rc1", "x86_64")));
  // Not versions on the left: Python's string comparison.
  MarkerEnv host = env;
  host.platform_release = "5.15.0-91-generic";
  CHECK(eval("platform_release >= '5.1'", host));
  CHECK(eval("platform_machine > 'aarch64'", env));

  auto unknown = Marker::parse("platform_release >= '5.0'");
  REQUIRE(unknown);
  auto r = unknown->evaluate(env);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "can't evaluate the marker 'platform_release >= \"5.0\"': the marker variable "
                             "platform_release is not known "
                             "for the target (it describes the host that runs the image); remove it from the "
                             "requirement or pin without "
                             "it");
  auto undefined = Marker::parse("platform_machine ~= 'x86'");
  REQUIRE(undefined);
  CHECK(undefined->evaluate(env).error().message ==
        "can't evaluate the marker 'platform_machine ~= \"x86\"': marker comparison 'x86_64' ~= 'x86' is "
        "undefined: "
        "both sides must be valid versions");
}

TEST_CASE("A requirement applies with its extras", "[pep508]") {
  MarkerEnv env = linux_cpython("3.11.2", "aarch64");
  CHECK(*req("pytest; extra == 'test'").applies(env, {"test"}));
  CHECK_FALSE(*req("pytest; extra == 'test'").applies(env));
  CHECK(*req("numpy").applies(env));
  CHECK_FALSE(*req("pywin32; sys_platform == 'win32'").applies(env, {"test"}));
  CHECK(*req("cffi; platform_machine == 'aarch64' and extra == 'arm'").applies(env, {"x", "arm"}));
}

TEST_CASE("Marker evaluation and requirement text agree with python packaging", "[pep508][peer]") {
  std::string module = test::python_packaging({"markers", "requirements"});
  if (module.empty()) {
    WARN("python3 packaging (or pip's vendored copy) is not importable: the peer comparison is skipped");
    return;
  }
  const std::vector<std::string> markers = {
      "python_version >= '3.8'",
      "python_version < '3.10'",
      "python_version > '3.11'",
      "python_version <= '3.11'",
      "python_version == '3.11.*'",
      "python_version ~= '3.9'",
      "python_version != '3.11'",
      "python_full_version == '3.11.2'",
      "python_full_version < '3.11.3' and python_full_version >= '3.11'",
      "python_version in '3.10 3.11'",
      "python_version not in '3.10 3.11'",
      "sys_platform == 'linux' and (platform_machine == 'aarch64' or platform_machine == 'x86_64')",
      "sys_platform == 'win32' and python_version < '3' or os_name == 'posix'",
      "os.name == 'posix' and sys.platform != 'darwin'",
      "platform.machine == 'x86_64'",
      "platform_python_implementation == 'PyPy'",
      "python_implementation == 'CPython'",
      "implementation_name == 'cpython' and implementation_version >= '3.11'",
      "platform_system == 'Linux'",
      "platform_system != 'Windows' and platform_system != 'Darwin'",
      "'linux' in sys_platform",
      "platform_machine >= 'b'",
      "platform_release >= '6.0'",
      "extra == 'test'",
      "extra == 'cuda' or extra == 'all'",
      "(python_version >= '3.8') and ((extra == 'cuda'))",
      "'3.11' == python_version",
      "python_version>\"3.6\"",
      "platform_machine=='x86_64'and python_version>='3'",
  };
  struct Env {
    std::string python;
    std::string machine;
    std::string extra;
  };
  const std::vector<Env> envs = {{"3.11.2", "x86_64", ""},
                                 {"3.9.18", "aarch64", "cuda"},
                                 {"3.12.1", "x86_64", "test"},
                                 {"3.10.0", "ppc64le", "all"}};
  test::TempDirFixture tmp;
  std::string input;
  for (const auto& m : markers) {
    input += "M" + m + "\n";
  }
  for (const auto& e : envs) {
    input += "E" + e.python + " " + e.machine + " " + e.extra + "\n";
  }
  auto script =
      tmp.write("peer.py", "import sys, importlib\n"
                           "markers = importlib.import_module('" +
                               module +
                               ".markers')\n"
                               "lines = [l.rstrip('\\n') for l in open(sys.argv[1])]\n"
                               "ms = [l[1:] for l in lines if l[0] == 'M']\n"
                               "es = [l[1:].split(' ') for l in lines if l[0] == 'E']\n"
                               "for m in ms:\n"
                               "    mk = markers.Marker(m)\n"
                               "    out = [str(mk)]\n"
                               "    for full, machine, extra in es:\n"
                               "        env = dict(python_version='.'.join(full.split('.')[:2]),\n"
                               "            python_full_version=full, os_name='posix',\n"
                               "            sys_platform='linux', platform_machine=machine,\n"
                               "            platform_system='Linux', platform_release='6.1.0',\n"
                               "            platform_version='#1 SMP', implementation_name='cpython',\n"
                               "            implementation_version=full,\n"
                               "            platform_python_implementation='CPython', extra=extra)\n"
                               "        out.append(str(int(mk.evaluate(env))))\n"
                               "    print('|'.join(out))\n");
  auto in = tmp.write("input.txt", input);
  auto lines = test::lines_of(test::run_python(script, {in.string()}));
  REQUIRE(lines.size() == markers.size());
  for (std::size_t i = 0; i < markers.size(); ++i) {
    auto m = Marker::parse(markers[i]);
    INFO(markers[i]);
    REQUIRE(m);
    std::string ours = m->str();
    for (const auto& e : envs) {
      MarkerEnv env = linux_cpython(e.python, e.machine);
      env.platform_release = "6.1.0";
      env.platform_version = "#1 SMP";
      env.extra = e.extra;
      auto r = m->evaluate(env);
      REQUIRE(r);
      ours += "|" + std::to_string(int(*r));
    }
    CHECK(ours == lines[i]);
  }

  const std::vector<std::string> requirements = {
      "requests[security,socks]>=2.31,<3; python_version >= '3.8'",
      "numpy (>=1.24,!=1.25.0)",
      "pip @ https://example.com/pip.whl ; sys_platform == 'linux'",
      "torch==2.1.0+cu121",
      "zope.interface",
      "foo[bar]",
      "Foo_Bar>=1.0.post1",
      "x ; extra == 'a' or (extra == 'b' and os_name == 'posix')",
  };
  std::string req_input;
  for (const auto& r : requirements) {
    req_input += r + "\n";
  }
  auto req_script =
      tmp.write("peer_req.py", "import sys, importlib\n"
                               "requirements = importlib.import_module('" +
                                   module +
                                   ".requirements')\n"
                                   "for l in open(sys.argv[1]):\n"
                                   "    print(str(requirements.Requirement(l.rstrip('\\n'))))\n");
  auto req_in = tmp.write("requirements.txt", req_input);
  auto req_lines = test::lines_of(test::run_python(req_script, {req_in.string()}));
  REQUIRE(req_lines.size() == requirements.size());
  for (std::size_t i = 0; i < requirements.size(); ++i) {
    CHECK(req(requirements[i]).str() == req_lines[i]);
  }
}

TEST_CASE("requirements.txt: pins, hashes, markers, comments and continuations", "[pep508][requirements]") {
  std::string h1(64, 'a');
  std::string h2(64, 'b');
  std::string text = "# generated by pip-compile\n"
                     "--index-url https://pypi.org/simple\n"
                     "--extra-index-url=https://download.pytorch.org/whl/cu121\n"
                     "-f ./wheels\n"
                     "--require-hashes\n"
                     "\n"
                     "numpy==1.26.4 \\\n"
                     "    --hash=sha256:" +
                     h1 + " \\\n    --hash=sha256:" + h2 +
                     "\n"
                     "    # via torch\n"
                     "typing-extensions==4.9.0 ; python_version < \"3.12\" --hash sha256:" +
                     std::string(64, 'C') +
                     "  # comment\n"
                     "pip @ https://example.com/pip-23.0-py3-none-any.whl#sha256=" +
                     h1 +
                     "\n"
                     "torch==2.1.0+cu121\n";
  auto file = parse_requirements_txt(text, "requirements.txt");
  REQUIRE(file);
  CHECK(file->index_urls == std::vector<std::string>{"https://pypi.org/simple"});
  CHECK(file->extra_index_urls == std::vector<std::string>{"https://download.pytorch.org/whl/cu121"});
  CHECK(file->find_links == std::vector<std::string>{"./wheels"});
  CHECK(file->require_hashes);
  CHECK_FALSE(file->pre);
  REQUIRE(file->requirements.size() == 4);
  const auto& numpy = file->requirements[0];
  CHECK(numpy.line == 7);
  CHECK(numpy.requirement.str() == "numpy==1.26.4");
  REQUIRE(numpy.hashes.size() == 2);
  CHECK(numpy.hashes[0].hex() == h1);
  CHECK(numpy.hashes[1].hex() == h2);
  const auto& te = file->requirements[1];
  CHECK(te.line == 11);
  CHECK(te.requirement.str() == "typing-extensions==4.9.0; python_version < \"3.12\"");
  REQUIRE(te.hashes.size() == 1);
  CHECK(te.hashes[0].hex() == std::string(64, 'c'));
  CHECK(file->requirements[2].requirement.url ==
        "https://example.com/pip-23.0-py3-none-any.whl#sha256=" + h1);
  CHECK(file->requirements[3].hashes.empty());
  CHECK(file->requirements[3].line == 13);
}

TEST_CASE("requirements.txt: unsupported lines are all reported with their line numbers",
          "[pep508][requirements][errors]") {
  std::string text = "-r base.txt\n"
                     "-e ./src\n"
                     "./local/project\n"
                     "foo==1.0 --hash=md5:abc\n"
                     "bar==1.0 --hash=sha256:123\n"
                     "--frobnicate\n"
                     "baz==1.0 --global-option=x\n"
                     "qux>=\n"
                     "--hash=sha256:" +
                     std::string(64, 'a') + "\n";
  auto r = parse_requirements_txt(text, "req.txt");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message ==
        "req.txt:1: -r base.txt: included files are not supported; list their requirements in this file\n"
        "req.txt:2: editable requirement ./src: not supported in a lock; build a wheel and pin it\n"
        "req.txt:3: './local/project' has no project name; write it as NAME @ URL\n"
        "req.txt:4: --hash=md5:abc: only sha256 hashes are supported (sha256:<64 hex digits>)\n"
        "req.txt:5: --hash=sha256:123: expected 64 hex digits after 'sha256:'\n"
        "req.txt:6: unknown or unsupported option '--frobnicate'\n"
        "req.txt:7: option --global-option is not supported after a requirement\n"
        "req.txt:8: invalid requirement 'qux>=': version specifier '>=': no version after the operator\n"
        "req.txt:9: --hash must follow a requirement on the same line");
}
