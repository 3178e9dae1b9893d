#include "support/python/pep440.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

PyVersion v(const char* text) {
  auto parsed = PyVersion::parse(text);
  INFO(text);
  REQUIRE(parsed);
  return *parsed;
}

SpecifierSet specs(const char* text) {
  auto parsed = SpecifierSet::parse(text);
  INFO(text);
  REQUIRE(parsed);
  return *parsed;
}

// Runs a python3 script with `pk` bound to the packaging module and the file `input` as argv[1].
std::string run_python(const test::TempDirFixture& tmp, const std::string& module, const std::string& body,
                       const std::string& input) {
  auto script = tmp.write("peer.py", "import sys, importlib\n"
                                     "version = importlib.import_module('" +
                                         module + ".version')\n" + "specifiers = importlib.import_module('" +
                                         module + ".specifiers')\n" + body);
  auto in = tmp.write("input.txt", input);
  return test::run_python(script, {in.string()});
}

// Versions exercising every part of the grammar; all valid.
const std::vector<std::string> k_versions = {
    "1.0.dev456",    "1.0a1",         "1.0a2.dev456", "1.0a12.dev456",
    "1.0a12",        "1.0b1.dev456",  "1.0b2",        "1.0b2.post345.dev456",
    "1.0b2.post345", "1.0rc1.dev456", "1.0rc1",       "1.0",
    "1.0+abc.5",     "1.0+abc.7",     "1.0+5",        "1.0.post456.dev34",
    "1.0.post456",   "1.0.15",        "1.1.dev1",     "1.0.0",
    "1.0.0.0",       "1!0.5",         "1!1.0",        "0.9",
    "2.0",           "2.0.1",         "2.1",          "2.2",
    "2.2.1",         "2.3",           "3.0rc1",       "3.0",
    "3.0.post1",     "3.0+local",     "1.0+ubuntu-1", "1.0+ubuntu.1.0",
    "1.0+1.ubuntu",  "1.0+01",        "1.0+abc",      "1.0+ABC.1",
    "2022.10.31",    "1.0-1",         "1.0RC1",       "v1.0",
    "1.0alpha2",     "1.0-beta.3",    "1.0c1",        "1.0pre4",
    "1.0.preview5",  "1.0-r4",        "1.0rev2",      "1.0.dev",
    "1.0a",          "1.0.post",      "1.2.3.4.5",    "0.0",
    "00.01",         "1.0a--post1",   "1.0.post.",    " 1.0 \n",
};

} // namespace

TEST_CASE("PEP 440 versions parse into their parts and print normalised", "[pep440]") {
  auto a = v("1!2.0RC1.post3.dev4+Ubuntu-01");
  CHECK(a.epoch == 1);
  CHECK(a.release == std::vector<std::uint64_t>{2, 0});
  REQUIRE(a.pre);
  CHECK(a.pre->phase == PyVersion::Phase::rc);
  CHECK(a.pre->number == 1);
  CHECK(a.post == 3U);
  CHECK(a.dev == 4U);
  CHECK(a.local == std::vector<std::string>{"ubuntu", "1"});
  CHECK(a.str() == "1!2.0rc1.post3.dev4+ubuntu.1");
  CHECK(a.public_str() == "1!2.0rc1.post3.dev4");
  CHECK(a.base_version().str() == "1!2.0");
  CHECK(a.is_prerelease());
  CHECK(a.is_postrelease());
  CHECK(a.is_devrelease());

  const std::pair<const char*, const char*> normalised[] = {
      {"1.0RC1", "1.0rc1"},
      {"v1.0", "1.0"},
      {"1.0alpha2", "1.0a2"},
      {"1.0-beta.3", "1.0b3"},
      {"1.0c1", "1.0rc1"},
      {"1.0pre4", "1.0rc4"},
      {"1.0.preview5", "1.0rc5"},
      {"1.0-1", "1.0.post1"},
      {"1.0-r4", "1.0.post4"},
      {"1.0rev2", "1.0.post2"},
      {"1.0.dev", "1.0.dev0"},
      {"1.0a", "1.0a0"},
      {"1.0.post", "1.0.post0"},
      {"00.01", "0.1"},
      {" 1.0 \n", "1.0"},
      {"1.0+01", "1.0+1"},
      {"1.0a--post1", "1.0a0.post1"},
      {"1.0.post.", "1.0.post0"},
      {"1.0_DEV_3", "1.0.dev3"},
      {"18446744073709551615", "18446744073709551615"},
  };
  for (const auto& [in, out] : normalised) {
    CHECK(v(in).str() == out);
  }
}

TEST_CASE("Invalid PEP 440 versions are refused with the reason", "[pep440][errors]") {
  auto message = [](const std::string& text) {
    auto r = PyVersion::parse(text);
    INFO(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  CHECK(message("") == "empty version");
  CHECK(message("   ") == "empty version");
  CHECK(message("1.0-r4_5") ==
        "'1.0-r4_5' is not a valid version (PEP 440: [N!]N(.N)*[{a|b|rc}N][.postN][.devN][+local])");
  CHECK(message("18446744073709551616") ==
        "version '18446744073709551616': the number 18446744073709551616 is too "
        "large");
  CHECK(message(std::string(300, '1')).find("is longer than 256 characters") != std::string::npos);
  for (const char* bad : {"1.0-", "foo", "1.0+", "1.0+a_", "1..0", ".1", "1.0.", "1.0 beta", "1!", "1.0++1",
                          "1.0+a+b", "v", "1.0.post1.post2", "1.0a1b2", "1,0", "1.0\x01"}) {
    INFO(bad);
    CHECK_FALSE(PyVersion::parse(bad));
  }
}

TEST_CASE("PEP 440 versions order as the spec's examples say", "[pep440]") {
  // The ordering example of PEP 440's "Summary of permitted suffixes and relative ordering".
  std::vector<const char*> ordered = {
      "1.0.dev456",    "1.0a1",         "1.0a2.dev456", "1.0a12.dev456",
      "1.0a12",        "1.0b1.dev456",  "1.0b2",        "1.0b2.post345.dev456",
      "1.0b2.post345", "1.0rc1.dev456", "1.0rc1",       "1.0",
      "1.0+abc.5",     "1.0+abc.7",     "1.0+5",        "1.0.post456.dev34",
      "1.0.post456",   "1.0.15",        "1.1.dev1"};
  for (std::size_t i = 0; i + 1 < ordered.size(); ++i) {
    INFO(ordered[i] << " < " << ordered[i + 1]);
    CHECK(v(ordered[i]) < v(ordered[i + 1]));
  }
  CHECK(v("1.0") == v("1.0.0"));
  CHECK(v("1.0") == v("1.0.0.0"));
  CHECK(v("1!0.5") > v("2.0"));
  CHECK(v("1.0+ubuntu.1") == v("1.0+ubuntu-1"));
  CHECK(v("1.0+1.ubuntu") > v("1.0+ubuntu.1"));
}

TEST_CASE("PEP 440 normalisation and order agree with python packaging", "[pep440][peer]") {
  std::string module = test::python_packaging({"version", "specifiers"});
  if (module.empty()) {
    WARN("python3 packaging (or pip's vendored copy) is not importable: the peer comparison is skipped");
    return;
  }
  test::TempDirFixture tmp;
  std::string input;
  for (const auto& s : k_versions) {
    std::string one_line = s;
    std::replace(one_line.begin(), one_line.end(), '\n', ' ');
    input += one_line + "\n";
  }
  // For each version: its normalised text, then its rank in packaging's sort order.
  std::string out = run_python(tmp, module,
                               "vs = [l.rstrip('\\n') for l in open(sys.argv[1])]\n"
                               "parsed = [version.Version(x) for x in vs]\n"
                               "for p in parsed:\n"
                               "    print(str(p), sum(1 for q in parsed if q < p))\n",
                               input);
  auto lines = test::lines_of(out);
  REQUIRE(lines.size() == k_versions.size());
  std::vector<PyVersion> ours;
  for (const auto& s : k_versions) {
    ours.push_back(v(s.c_str()));
  }
  for (std::size_t i = 0; i < k_versions.size(); ++i) {
    auto rank = std::count_if(ours.begin(), ours.end(), [&](const PyVersion& q) { return q < ours[i]; });
    INFO("version '" << k_versions[i] << "'");
    CHECK(ours[i].str() + " " + std::to_string(rank) == lines[i]);
  }
}

TEST_CASE("Version specifiers parse, print and refuse malformed clauses", "[pep440]") {
  auto set = specs(" ==1.2.* , >= 1.0,!=1.1, ~=2.2, ===foo-bar, <3, ,");
  REQUIRE(set.clauses().size() == 6);
  CHECK(set.clauses()[0].wildcard);
  CHECK(set.clauses()[1].str() == ">=1.0");
  CHECK(set.clauses()[4].op == VersionSpecifier::Op::arbitrary);
  CHECK(set.str() == "!=1.1,<3,==1.2.*,===foo-bar,>=1.0,~=2.2");
  CHECK(specs("").empty());

  auto message = [](const char* text) {
    auto r = SpecifierSet::parse(text);
    INFO(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  CHECK(message("1.0") == "'1.0' is not a version specifier (expected an operator: ~= == != <= >= < > ===)");
  CHECK(message("~=1") == "version specifier '~=1': ~= needs at least two release components (like ~=2.2)");
  CHECK(message(">=1.0.*") == "version specifier '>=1.0.*': a '.*' suffix is only allowed with == and !=");
  CHECK(message("==1.0a1.*") ==
        "version specifier '==1.0a1.*': '.*' must follow a plain release number (like "
        "==1.2.*)");
  CHECK(message("<=1.0+local") ==
        "version specifier '<=1.0+local': a local version label ('+...') is only allowed "
        "with == and !=");
  CHECK(message(">=") == "version specifier '>=': no version after the operator");
  CHECK(message("==1.0, >=x") == "version specifier '>=x': 'x' is not a valid version (PEP 440: "
                                 "[N!]N(.N)*[{a|b|rc}N][.postN][.devN][+local])");
}

TEST_CASE("Specifier matching follows PEP 440's rules", "[pep440]") {
  CHECK(specs("~=2.2").contains(v("2.3")));
  CHECK_FALSE(specs("~=2.2").contains(v("3.0")));
  CHECK(specs("~=1.4.5").contains(v("1.4.9")));
  CHECK_FALSE(specs("~=1.4.5").contains(v("1.5.0")));
  CHECK(specs("==1.1.*").contains(v("1.1.post1")));
  CHECK(specs("==1.0").contains(v("1.0+local")));
  CHECK_FALSE(specs("==1.0+other").contains(v("1.0+local")));
  CHECK(specs("!=1.1.*").contains(v("1.2")));
  // Exclusive ordered comparisons exclude the bound's own pre-, post- and local releases.
  CHECK_FALSE(specs("<3").contains(v("3.0rc1"), Prereleases::allow));
  CHECK_FALSE(specs("<3rc2").contains(v("3.0rc1"))); // "<" never admits pre-releases by itself
  CHECK(specs("<3rc2").contains(v("3.0rc1"), Prereleases::allow));
  CHECK_FALSE(specs(">1.7").contains(v("1.7.post2")));
  CHECK(specs(">1.7.post2").contains(v("1.7.post3")));
  CHECK_FALSE(specs(">1.7").contains(v("1.7+local")));
  CHECK(specs(">1.7").contains(v("1.7.1")));
  CHECK(specs("===1.0").contains(v("1.0")));
  CHECK_FALSE(specs("===1.0").contains(v("1.0.0")));
  // Pre-releases: only when asked for, or when a clause names one.
  CHECK_FALSE(specs(">=1.0").contains(v("2.0b1")));
  CHECK(specs(">=1.0").contains(v("2.0b1"), Prereleases::allow));
  CHECK(specs(">=1.0b1").contains(v("2.0b1")));
  CHECK_FALSE(specs(">=1.0b1").contains(v("2.0b1"), Prereleases::deny));
  CHECK_FALSE(specs("").contains(v("1.0.dev1")));

  std::vector<PyVersion> candidates = {v("1.0"), v("2.0a1"), v("1.5")};
  auto got = specs(">=1.2").filter(candidates);
  REQUIRE(got.size() == 1);
  CHECK(got[0].str() == "1.5");
  auto only_pre = specs("").filter({v("2.0a1"), v("2.0b1")});
  CHECK(only_pre.size() == 2);
  CHECK(specs(">=1.0").filter({v("2.0a1")}).empty());
}

TEST_CASE("Specifier matching agrees with python packaging", "[pep440][peer]") {
  std::string module = test::python_packaging({"version", "specifiers"});
  if (module.empty()) {
    WARN("python3 packaging (or pip's vendored copy) is not importable: the peer comparison is skipped");
    return;
  }
  const std::vector<std::string> set_texts = {
      "==1.0",   "==1.0.*",     "==1.*",   "!=1.0",      "!=1.0.*",     "~=1.0",
      "~=1.0.0", "~=2.2",       "~=1.0b1", ">=1.0",      ">=1.0b1",     "<=1.0",
      "<1.0",    "<1.0rc2",     ">1.0",    ">1.0.post1", "==1.0+abc.5", "!=1.0+5",
      ">=1!0.1", "<2,>=1.0",    "===1.0",  "===1.0a1",   ">=1.0.dev0",  "==2.2.post1",
      "",        "==2022.*",    "~=1!1.0", "<3",         ">2.0",        "==1.0rc1",
      "<=1.0a1", "!=3.0.post1",
  };
  std::vector<std::string> versions = k_versions;
  versions.erase(std::remove(versions.begin(), versions.end(), " 1.0 \n"), versions.end());
  test::TempDirFixture tmp;
  std::string input;
  for (const auto& s : set_texts) {
    input += "S" + s + "\n";
  }
  for (const auto& s : versions) {
    input += "V" + s + "\n";
  }
  // One line per (set, version): contains() by default, then with prereleases=True.
  std::string out = run_python(tmp, module,
                               "lines = [l.rstrip('\\n') for l in open(sys.argv[1])]\n"
                               "sets = [l[1:] for l in lines if l[0] == 'S']\n"
                               "vs = [l[1:] for l in lines if l[0] == 'V']\n"
                               "for s in sets:\n"
                               "    ss = specifiers.SpecifierSet(s)\n"
                               "    for x in vs:\n"
                               "        p = version.Version(x)\n"
                               "        print(int(ss.contains(p)), int(ss.contains(p, prereleases=True)))\n",
                               input);
  auto lines = test::lines_of(out);
  REQUIRE(lines.size() == set_texts.size() * versions.size());
  std::size_t i = 0;
  for (const auto& s : set_texts) {
    SpecifierSet set = specs(s.c_str());
    for (const auto& x : versions) {
      PyVersion candidate = v(x.c_str());
      std::string ours = std::to_string(int(set.contains(candidate))) + " " +
                         std::to_string(int(set.contains(candidate, Prereleases::allow)));
      INFO("'" << s << "' contains '" << x << "'");
      CHECK(ours == lines[i]);
      ++i;
    }
  }
}
