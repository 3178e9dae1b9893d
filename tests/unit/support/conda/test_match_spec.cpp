#include "support/conda/match_spec.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace lockstep::conda;

namespace {

MatchSpec ms(const std::string& text, SpecMode mode = SpecMode::strict) {
  auto parsed = MatchSpec::parse(text, mode);
  INFO(text << ": " << (parsed ? "" : parsed.error().message));
  REQUIRE(parsed);
  return *parsed;
}

// The canonical text of a spec, checked to parse back to itself.
std::string canonical(const std::string& text, SpecMode mode = SpecMode::strict) {
  const std::string out = ms(text, mode).str();
  INFO(text << " -> " << out);
  CHECK(ms(out, mode).str() == out);
  return out;
}

ParseError bad(const std::string& text, SpecMode mode = SpecMode::strict) {
  auto parsed = MatchSpec::parse(text, mode);
  INFO(text);
  REQUIRE_FALSE(parsed);
  return parsed.error();
}

// A record owning its version, viewed as RecordFields.
struct Record {
  Version version;
  RecordFields fields;

  Record(const std::string& name, const std::string& version_text, const std::string& build,
         std::uint64_t build_number = 0)
      : m_name(name), m_build(build) {
    version = *Version::parse(version_text);
    fields.name = m_name;
    fields.version = &version;
    fields.build = m_build;
    fields.build_number = build_number;
  }
  Record(const Record&) = delete;
  Record& operator=(const Record&) = delete;

private:
  std::string m_name;
  std::string m_build;
};

} // namespace

TEST_CASE("the '=' and space rules of conda.md §4.2", "[conda][match_spec]") {
  Record r("pkg", "1.8.2", "py27_0");
  Record exact("pkg", "1.8", "py27_0");
  // pkg 1.8: exact; pkg=1.8, pkg =1.8, pkg 1.8.*, pkg=1.8.*: prefix; pkg==1.8: exact.
  CHECK(canonical("pkg 1.8") == "pkg==1.8");
  CHECK_FALSE(ms("pkg 1.8").matches(r.fields));
  for (const std::string text : {"pkg=1.8", "pkg =1.8", "pkg 1.8.*", "pkg=1.8.*", "pkg = 1.8"}) {
    INFO(text);
    CHECK(canonical(text) == "pkg=1.8");
    CHECK(ms(text).matches(r.fields));
  }
  CHECK(canonical("pkg==1.8") == "pkg==1.8");
  // name=version=build and "version build" are exact on the version.
  for (const std::string text : {"pkg 1.8 py27_0", "pkg=1.8=py27_0", "pkg==1.8=py27_0"}) {
    INFO(text);
    CHECK(canonical(text) == "pkg==1.8=py27_0");
    CHECK_FALSE(ms(text).matches(r.fields));
    CHECK(ms(text).matches(exact.fields));
  }
  // "=1.8 build" keeps the prefix (rattler; conda.md's table).
  CHECK(canonical("pkg =1.8 py27_0") == "pkg=1.8[build=py27_0]");
  CHECK(ms("pkg =1.8 py27_0").matches(r.fields));
  CHECK(canonical("pkg >=1.0,<2 py34_0") == "pkg[version='>=1.0,<2',build=py34_0]");
  CHECK(canonical("pkg >=1.0 , < 2.0 py34_0") == "pkg[version='>=1.0,<2.0',build=py34_0]");
  CHECK(canonical("pkg * openblas") == "pkg[build=openblas]");
  // numpy=1.21=py39* is exact on the version: 1.21.5 does not match.
  Record numpy("numpy", "1.21.5", "py39h_0");
  CHECK_FALSE(ms("numpy=1.21=py39*").matches(numpy.fields));
  CHECK(ms("numpy=1.21.*=py39*").matches(numpy.fields));
  CHECK(ms("numpy[version='1.21.*',build='py39*']").matches(numpy.fields));
  // blas=*=openblas: any version, build exactly openblas.
  Record blas("blas", "1.0", "openblas");
  Record blas_mkl("blas", "1.0", "mkl");
  CHECK(canonical("blas=*=openblas") == "blas[build=openblas]");
  CHECK(ms("blas=*=openblas").matches(blas.fields));
  CHECK_FALSE(ms("blas=*=openblas").matches(blas_mkl.fields));
}

TEST_CASE("conda's test_match_1 against numpy-1.7.1-py27_0", "[conda][match_spec]") {
  Record numpy("numpy", "1.7.1", "py27_0", 0);
  const std::vector<std::pair<std::string, bool>> cases = {
      {"numpy 1.7*", true},
      {"numpy 1.7.1", true},
      {"numpy 1.7", false},
      {"numpy 1.5*", false},
      {"numpy >=1.5", true},
      {"numpy >=1.5,<2", true},
      {"numpy >=1.8,<1.9", false},
      {"numpy >1.5,<2,!=1.7.1", false},
      {"numpy >1.8,<2|==1.7", false},
      {"numpy >1.8,<2|>=1.7.1", true},
      {"numpy >=1.8|1.7*", true},
      {"numpy ==1.7", false},
      {"numpy >=1.5,>1.6", true},
      {"numpy ==1.7.1", true},
      {"numpy ==1.7.1.0", true},
      {"numpy==1.7.1.0.0", true},
      {"numpy >=1,*.7.*", true},
      {"numpy *.7.*,>=1", true},
      {"numpy >=1,*.8.*", false},
      {"numpy >=2,*.7.*", false},
      {"numpy 1.6*|1.7*", true},
      {"numpy 1.6*|1.8*", false},
      {"numpy 1.6.2|1.7*", true},
      {"numpy 1.6.2|1.7.1", true},
      {"numpy 1.6.2|1.7.0", false},
      {"numpy 1.7.1 py27_0", true},
      {"numpy 1.7.1 py26_0", false},
      {"numpy >1.7.1a", true},
      {"python", false},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    CHECK(ms(text).matches(numpy.fields) == expected);
  }
  Record a("numpy", "1.0.1a", "0");
  Record vc("numpy", "1.0.1a.vc11", "0");
  Record vc2("numpy", "1.0.1.vc11", "0");
  Record z("numpy", "1.0.1z", "py27_1");
  CHECK_FALSE(ms("numpy >=1.0.1").matches(a.fields));
  CHECK_FALSE(ms("numpy >=1.0.1.vc11").matches(vc.fields));
  CHECK(ms("numpy >=1.0.1*.vc11", SpecMode::lenient).matches(vc.fields));
  CHECK(ms("numpy <1.0.1").matches(vc2.fields));
  CHECK(ms("numpy <1.0.1").matches(vc.fields));
  CHECK_FALSE(ms("numpy >=1.0.1.vc11").matches(a.fields));
  CHECK(ms("numpy >=1.0.1a").matches(z.fields));
  CHECK(ms("numpy >=1.0.1a py27*").matches(z.fields));
  Record blas("blas", "1.0", "openblas_0");
  CHECK(ms("blas * openblas_0").matches(blas.fields));
  Record openssl("openssl", "1.0.1_", "4");
  CHECK(ms("openssl>=1.0.1_").matches(openssl.fields));
  CHECK_FALSE(ms("openssl>=1.0.1").matches(openssl.fields));
}

TEST_CASE("canonical strings from conda's test_canonical_string_forms", "[conda][match_spec]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"numpy", "numpy"},
      {"numpy=1.7", "numpy=1.7"},
      {"numpy 1.7*", "numpy=1.7"},
      {"numpy 1.7.*", "numpy=1.7"},
      {"numpy[version='1.7*']", "numpy=1.7"},
      {"numpy[version='1.7.*']", "numpy=1.7"},
      {"numpy[version=1.7.*]", "numpy=1.7"},
      {"numpy==1.7", "numpy==1.7"},
      {"numpy[version='1.7']", "numpy==1.7"},
      {"numpy[version=1.7]", "numpy==1.7"},
      {"numpy 1.7", "numpy==1.7"},
      {"numpy[version='1.7|1.8']", "numpy[version='==1.7|==1.8']"},
      {"numpy[version=\"1.7,1.8\"]", "numpy[version='==1.7,==1.8']"},
      {"numpy >1.7", "numpy[version='>1.7']"},
      {"numpy>=1.7", "numpy[version='>=1.7']"},
      {"numpy=1.7=py3*_2", "numpy==1.7[build=py3*_2]"},
      {"numpy=1.7.*=py3*_2", "numpy=1.7[build=py3*_2]"},
      {"https://repo.anaconda.com/pkgs/free::numpy", "pkgs/free::numpy"},
      {"numpy[channel=https://repo.anaconda.com/pkgs/free]", "pkgs/free::numpy"},
      {"defaults::numpy", "defaults::numpy"},
      {"numpy[channel=defaults]", "defaults::numpy"},
      {"conda-forge::numpy", "conda-forge::numpy"},
      {"numpy[channel=conda-forge]", "conda-forge::numpy"},
      {"numpy[channel=defaults,subdir=osx-64]", "defaults/osx-64::numpy"},
      {"numpy[channel=https://repo.anaconda.com/pkgs/free/osx-64, subdir=linux-64]",
       "pkgs/free/linux-64::numpy"},
      {"https://repo.anaconda.com/pkgs/free/win-32::numpy", "pkgs/free/win-32::numpy"},
      {"numpy[channel=https://repo.anaconda.com/pkgs/free/osx-64]", "pkgs/free/osx-64::numpy"},
      {"defaults/win-32::numpy", "defaults/win-32::numpy"},
      {"conda-forge/linux-64::numpy", "conda-forge/linux-64::numpy"},
      {"numpy[channel=conda-forge,subdir=noarch]", "conda-forge/noarch::numpy"},
      {"numpy[subdir=win-32]", "numpy[subdir=win-32]"},
      {"*/win-32::numpy", "numpy[subdir=win-32]"},
      {"*/win-32::numpy[subdir=\"osx-64\"]", "numpy[subdir=osx-64]"},
      {"numpy=1.10=py38_0", "numpy==1.10=py38_0"},
      {"numpy==1.10=py38_0", "numpy==1.10=py38_0"},
      {"numpy[version=1.10 build=py38_0]", "numpy==1.10=py38_0"},
      {"numpy!=1.10", "numpy!=1.10"},
      {"numpy !=1.10", "numpy!=1.10"},
      {"numpy!=1.10 py38_0", "numpy[version='!=1.10',build=py38_0]"},
      {"numpy !=1.10 py38_0", "numpy[version='!=1.10',build=py38_0]"},
      {"numpy!=1.10=py38_0", "numpy[version='!=1.10',build=py38_0]"},
      {"numpy !=1.10=py38_0", "numpy[version='!=1.10',build=py38_0]"},
      {"numpy >1.7,!=1.10 py38_0", "numpy[version='>1.7,!=1.10',build=py38_0]"},
      {"numpy!=1.10.*", "numpy!=1.10.*"},
      {"numpy!=1.10,!=1.11", "numpy[version='!=1.10,!=1.11']"},
      {"numpy=1.10.*,!=1.10.2", "numpy[version='=1.10,!=1.10.2']"},
      {"numpy ~=1.10.1", "numpy~=1.10.1"},
      {"numpy~=1.10.1", "numpy~=1.10.1"},
      {"numpy ~=1.10.1 py38_0", "numpy[version='~=1.10.1',build=py38_0]"},
      {"openssl=1.1.1_", "openssl=1.1.1_"},
      {"openssl>=1.1.1_,!=1.1.1c", "openssl[version='>=1.1.1_,!=1.1.1c']"},
      {"name[version=*,build=*py27*]", "name[build=*py27*]"},
      {"name[version=*]", "name"},
      {"conda-forge::name[version=*]", "conda-forge::name"},
      {"name[version=1.2.*,build=*py27*]", "name=1.2[build=*py27*]"},
      {"name[version=1.*]", "name=1"},
      {"name[version=*,build_number=3]", "name[build_number=3]"},
      {"mkl@", "*[track_features=mkl]"},
      {"python=2.6*", "python=2.6"},
      {"ipython==0.13.0", "ipython==0.13.0"},
      {"foo=1.3.0=3", "foo==1.3.0=3"},
      {"zope.int>=1.3,<3.0", "zope.int[version='>=1.3,<3.0']"},
      {"numpy[version=\"=2\"]", "numpy=2"},
      {"awscli==2.15.37=wghq", "awscli==2.15.37=wghq"},
      {"conda-forge/linux-64::foo>=1.0", "conda-forge/linux-64::foo[version='>=1.0']"},
      {"*/linux-64::foo>=1.0", "foo[subdir=linux-64,version='>=1.0']"},
      {"conda-forge::foo[version=1.0.*]", "conda-forge::foo=1.0"},
      {"pkgs/main::*", "pkgs/main::*"},
      {"FOO-Bar >=1.0", "foo-bar[version='>=1.0']"},
      {"foo # comment", "foo"},
      {"foo ## comment", "foo"},
      {"python[build_number='>=3']", "python[build_number='>=3']"},
      {"blas[track_features=\"mkl avx\"]", "blas[track_features='avx mkl']"},
      {"*[md5=0123456789ABCDEF0123456789abcdef]", "*[md5=0123456789abcdef0123456789abcdef]"},
      {"tensorflow[name=* version=* md5=253b922ecdb5a30884875948b8904983]",
       "tensorflow[md5=253b922ecdb5a30884875948b8904983]"},
      {"tensorflow[name=pytorch]", "tensorflow"},
      {"defaults::numpy=1.8=py27_0 [channel=anaconda,version=1.9, build=3]", "anaconda::numpy==1.9=3"},
      {"defaults::numpy=1.8=py27_0 [channel='anaconda',version=\">=1.8,<2|1.9\", build='3']",
       "anaconda::numpy[version='>=1.8,<2|==1.9',build=3]"},
      {"* 2.7.4", "*==2.7.4"},
      {"* >=1.3 2", "*[version='>=1.3',build=2]"},
      {"*>1.8,<2|==1.7", "*[version='>1.8,<2|==1.7']"},
      {"* 1 *", "*==1[build=*]"},
      {"* * openblas_0", "*[build=openblas_0]"},
      {"python (>=3.8,<3.10)|(>=3.11,<3.13)", "python[version='>=3.8,<3.10|>=3.11,<3.13']"},
      {"foo (>=1,<2)|>3", "foo[version='>=1,<2|>3']"},
      {"* >=3,(<4|<5)", "*[version='>=3,(<4|<5)']"},
      {"https://conda.anaconda.org/conda-canary/linux-64/conda-4.3.21.post699+1dab973-py36h4a561cd_0.tar.bz2",
       "conda-canary/linux-64::conda==4.3.21.post699+1dab973=py36h4a561cd_0[url=https://conda.anaconda.org/"
       "conda-canary/linux-64/conda-4.3.21.post699+1dab973-py36h4a561cd_0.tar.bz2]"},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    CHECK(canonical(text) == expected);
  }
}

TEST_CASE("specs seen in the wild parse (conda's test_parse_ecosystem_corpus)", "[conda][match_spec]") {
  const std::vector<std::string> strict = {
      "foo=1.0=py27_0",
      "foo==1.0=py27_0",
      "python 3.8.* *_cpython",
      "pytorch=*=cuda*",
      "x264 >=1!164.3095,<1!165",
      "conda-forge::foo[version=1.0.*]",
      "conda-forge::foo[version=1.0.*, build_number=\">6\"]",
      "python=3.9",
      "python=*",
      "conda-forge/linux-32::python[version=3.9, subdir=linux-64]",
      "conda-forge/linux-32::python ==3.9[subdir=linux-64, build_number=\"0\"]",
      "python ==3.9[channel=conda-forge]",
      "python ==3.9[channel=conda-forge/linux-64]",
      "rust ~=1.2.3",
      "bird_tool_utils_python =0.*,>=0.4.1",
      "* >=1.0",
      "tensorflow 2.6.*",
      "tensorflow 2.6.0.*",
      "mamba[build=*py310_1]",
      "mamba[build=*py310*]",
      "mamba * [build=*py310*]",
      "foo >=1.0 py37_0",
      "foo >=1.0 py37*",
      "foo 1.0.* py38*",
      "foo * py37_1",
      "activate_deactivate_package=*=*0",
      "numpy=*=*py38*",
      "conda-forge::libblas=*=*openblas",
      "ca-certificates=*=*_0",
      "pandas ==1.2.5 py37h295c915_0",
      "ca-certificates =2022.9.24",
      "ca-certificates<=2022.9.24,>2020",
      "ca-certificates !=2022.9.24,>2020",
      "ca-certificates[build='*_0']",
      "ca-certificates[version='>=2022.9.24']",
      "pytorch::pytorch=1.12",
      "xtensor      >=       0.12.3",
      "python > 3.11",
      "scipy   >=    1.5.0,  < 2.0.0",
      "_libgcc_mutex    0.1       conda_forge     ",
      "importlib-metadata  # drop this when dropping Python 3.8",
  };
  for (const auto& text : strict) {
    INFO(text);
    (void)canonical(text);
  }
  for (const std::string text : {"blas *.* mkl", "python ==2.7.*.*|>=3.6", "numpy>=2.*.*", "mkl 2023.*.*"}) {
    INFO(text);
    (void)canonical(text, SpecMode::lenient);
    CHECK_FALSE(MatchSpec::parse(text, SpecMode::strict));
  }
  CHECK(canonical("_libgcc_mutex    0.1       conda_forge     ") == "_libgcc_mutex==0.1=conda_forge");
  CHECK(canonical("scipy   >=    1.5.0,  < 2.0.0") == "scipy[version='>=1.5.0,<2.0.0']");
  CHECK(canonical("python 3.8.* *_cpython") == "python=3.8[build=*_cpython]");
}

TEST_CASE("bracket keys match their record fields", "[conda][match_spec]") {
  Record r("numpy", "1.11.0", "py34_7", 7);
  r.fields.license = "LGPLv3+";
  r.fields.license_family = "LGPL";
  r.fields.md5 = "253B922ECDB5A30884875948B8904983";
  r.fields.channel = "https://conda.anaconda.org/conda-forge/linux-64";
  r.fields.subdir = "linux-64";
  r.fields.track_features = "mkl";
  // conda tests/models/test_match_spec.py test_bracket_matches, test_license_match.
  CHECK(ms("numpy<2").matches(r.fields));
  CHECK(ms("numpy[version=<2]").matches(r.fields));
  CHECK_FALSE(ms("numpy>2").matches(r.fields));
  CHECK_FALSE(ms("numpy[version='>2']").matches(r.fields));
  CHECK(ms("numpy[build_number='7']").matches(r.fields));
  CHECK(ms("numpy[build_number='<8']").matches(r.fields));
  CHECK_FALSE(ms("numpy[build_number='>7']").matches(r.fields));
  CHECK(ms("numpy[build_number='>=7']").matches(r.fields));
  CHECK(ms("numpy[build_number='^7$']").matches(r.fields));
  CHECK(ms("numpy[build_number=*]").matches(r.fields));
  CHECK(ms("numpy ~=1.10").matches(r.fields));
  for (const std::string l : {"LGPL", "lgpl", "*GP*", "*gp*", "*GPL*", "*gpl*"}) {
    CHECK(ms("*[license_family='" + l + "']").matches(r.fields));
  }
  CHECK(ms("*[license='*gpl*']").matches(r.fields));
  CHECK(ms("*[license='*v3+']").matches(r.fields));
  CHECK_FALSE(ms("*[license='MIT']").matches(r.fields));
  CHECK(ms("*[md5=253b922ecdb5a30884875948b8904983]").matches(r.fields));
  CHECK_FALSE(ms("*[md5=353b922ecdb5a30884875948b8904983]").matches(r.fields));
  CHECK_FALSE(ms("*[sha256=00]").matches(r.fields));
  CHECK(ms("conda-forge::numpy").matches(r.fields));
  CHECK(ms("conda-forge/linux-64::numpy").matches(r.fields));
  CHECK_FALSE(ms("conda-forge/osx-64::numpy").matches(r.fields));
  CHECK(ms("conda-*::numpy").matches(r.fields));
  CHECK_FALSE(ms("defaults::numpy").matches(r.fields));
  CHECK(ms("numpy[channel=https://conda.anaconda.org/conda-forge]").matches(r.fields));
  CHECK(ms("*[track_features=mkl]").matches(r.fields));
  CHECK_FALSE(ms("*[track_features='mkl debug']").matches(r.fields));
  CHECK_FALSE(ms("*[features=mkl]").matches(r.fields));
  CHECK(ms("NumPy").matches(r.fields)); // names are case-insensitive
  CHECK(ms("num*").matches(r.fields));
  CHECK_FALSE(ms("numpy[build=PY34_7]").matches(r.fields)); // builds are not
  CHECK(ms("numpy[build='^py3[0-9]_7$']").matches(r.fields));
  r.fields.channel = "pkgs/main";
  CHECK(ms("defaults::numpy").matches(r.fields));
  CHECK(ms("pkgs/main::numpy").matches(r.fields));
  r.fields.version = nullptr;
  CHECK_FALSE(ms("numpy>1").matches(r.fields));
  CHECK(ms("numpy").matches(r.fields));
}

TEST_CASE("a package URL is a fully specified spec", "[conda][match_spec]") {
  const MatchSpec m =
      ms("https://conda.anaconda.org/conda-forge/linux-64/x264-1%21164.3095-h166bdaf_2.tar.bz2");
  CHECK(m.name().str() == "x264");
  CHECK(m.version()->str() == "==1!164.3095");
  CHECK(m.build()->str() == "h166bdaf_2");
  CHECK(m.channel()->str() == "conda-forge");
  CHECK(*m.subdir() == "linux-64");
  CHECK(*m.fn() == "x264-1!164.3095-h166bdaf_2.tar.bz2");
  const MatchSpec no_subdir = ms("https://example.com/ch/foo-1.0-0.conda");
  CHECK_FALSE(no_subdir.channel().has_value());
  CHECK(no_subdir.str() == "foo==1.0=0[url=https://example.com/ch/foo-1.0-0.conda]");
  CHECK(bad("https://example.com/ch/linux-64/foo.conda").offset == 32);
}

TEST_CASE("invalid MatchSpecs are errors at the offending byte", "[conda][match_spec]") {
  struct Case {
    std::string text;
    std::size_t offset;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", 0, "empty package spec"},
      {"  # only a comment", 2, "empty package spec"},
      {"!xyz 1.3", 0, "expected a package name"},
      {"python>=3.11,<<3", 13, "unknown operator '<<'"},
      {"pkg 4.2.2<6.0.0", 9, "invalid character '<' in a version"},
      {"blas [optional", 14, "expected '=' after 'optional'"},
      {"blas [=1]", 6, "expected key=value in '[...]', not '='"},
      {"blas [test=]", 11, "missing value for 'test'"},
      {"blas[invalid=\"1\"]", 5,
       "unknown key 'invalid' (known: channel, subdir, name, version, build, build_number, track_features, "
       "features, "
       "url, md5, sha256, license, license_family, fn, build_string)"},
      {"package[build]", 13, "expected '=' after 'build'"},
      {"package[build=value, build=again]", 21, "'build' is given twice in '[...]'"},
      {"package[build=0][version=2]", 16, "nothing may follow the '[...]' section"},
      {"package[build=0,junk]", 20, "expected '=' after 'junk'"},
      {"package[build='0]", 14, "unterminated ' in '[...]'"},
      {"package[build=0", 7, "'[' without a matching ']'"},
      {"package]", 7, "']' without a matching '['"},
      {"numpy==", 7, "expected a version after '=='"},
      {"numpy=", 6, "expected a version after '='"},
      {"numpy=1.8=", 10, "expected a build string after '='"},
      {"foo 1.0 py27_0 extra", 15, "unexpected 'extra' after the build string"},
      {"foo V0.9-24_1", 8, "a version can't have both '-' and '_'"},
      {"foo 1.0 py27!0", 12, "invalid character '!' in a build string"},
      {"f@o", 1, "invalid character '@' in a package name"},
      {"conda-forge:numpy", 11, "a channel is followed by '::' (\"conda-forge::numpy\")"},
      {"conda-forge:pypi:xtensor==0.12.3", 12, "namespaces are not supported ('pypi')"},
      {"::numpy", 0, "empty channel before '::'"},
      {"^(aaaa$", 0, "invalid character '^' in a package name"},
      {"foo[build='^(aaaa$']", 11, "invalid regular expression: "},
      {"*/lin(ux-65::f/o>=>1y", 14, "invalid character '/' in a package name"},
      {"pkg>=0.10.0,<1.0.0<py312|>=0.13.0,<1.0.0>=py312", 18, "invalid character '<' in a version"},
      {"python[build_number='>=x']", 23, "expected an integer (at most 18 digits) instead of 'x'"},
      {"python[build_number=~3]", 20, "expected an integer (at most 18 digits) instead of '~3'"},
      {"python[build_number==<3]", 20,
       "a build number is an integer, '*', an operator and an integer, or '^regex$', not '=<3'"},
  };
  for (const auto& c : cases) {
    const ParseError e = bad(c.text);
    INFO(c.text << " -> " << e.offset << ": " << e.message);
    CHECK(e.offset == c.offset);
    if (c.message.ends_with(": ")) {
      CHECK(e.message.starts_with(c.message));
    } else {
      CHECK(e.message == c.message);
    }
  }
  // Found by fuzzing: texts that would not read back from the canonical form.
  CHECK(bad("foo 1.0 py'27").message == "invalid character ''' in a build string");
  CHECK(bad("foo[subdir='linux 64']").message == "invalid character ' ' in a subdir");
  CHECK(bad("foo 1.0 a=b", SpecMode::lenient).message == "invalid character '=' in a build string");
  CHECK(bad("\"'\"@").message == "invalid character '\"' in a package name");
  CHECK(ms("foo=1.0*.*", SpecMode::lenient).str() == "foo=1.0*.*");
  CHECK(ms("foo[track_features='']").str() == "foo[track_features='']");
  CHECK(bad("foo[build='^a\"b$']").message == "invalid character '\"' in a build string");
  // What lenient mode lets through.
  CHECK(ms("numpy=", SpecMode::lenient).str() == "numpy");
  CHECK(ms("conda-forge:pypi:xtensor==0.12.3", SpecMode::lenient).str() == "conda-forge::xtensor==0.12.3");
  CHECK(bad(std::string(5000, 'a')).message == "a package spec is at most 4096 characters");
}

TEST_CASE("a parse error renders with a caret under the offending character", "[conda][match_spec]") {
  const std::string text = "python>=3.11,<<3";
  const ParseError e = bad(text);
  CHECK(render_caret(text, e) == "  python>=3.11,<<3\n"
                                 "               ^ unknown operator '<<'");
  CHECK(render_caret("é>=\t<<1", ParseError{5, "here"}, "") == "é>=\t<<1\n   \t^ here");
  CHECK(render_caret("a\nb", ParseError{3, "end"}, "") == "a?b\n   ^ end");
  CHECK(e.to_error("conda spec", text).message ==
        "conda spec 'python>=3.11,<<3': unknown operator '<<' (at byte 13)");
  CHECK(e.to_error("conda spec", text).code == lockstep::ExitCode::invalid_input);
}

TEST_CASE("globs match any run of characters", "[conda][match_spec]") {
  CHECK(glob_matches("*", ""));
  CHECK(glob_matches("py3*_2", "py36_2"));
  CHECK_FALSE(glob_matches("py3*_2", "py36_3"));
  CHECK(glob_matches("*_cpython", "h1234_cpython"));
  CHECK(glob_matches("*py3*cpu*", "xpy310_cpu_0"));
  CHECK_FALSE(glob_matches("a*b*c", "acb"));
  CHECK(glob_matches("NUM*", "numpy", LetterCase::insensitive));
  CHECK_FALSE(glob_matches("NUM*", "numpy"));
  CHECK(glob_matches(std::string(50, '*') + "b", std::string(2000, 'a') + "b"));
  CHECK_FALSE(glob_matches("*a*a*a*a*a*b", std::string(2000, 'a')));
}

TEST_CASE("known subdirs and canonical channels", "[conda][match_spec]") {
  CHECK(is_known_subdir("linux-64"));
  CHECK(is_known_subdir("noarch"));
  CHECK(is_known_subdir("emscripten-wasm32"));
  CHECK_FALSE(is_known_subdir("linux-65"));
  CHECK(canonical_channel("https://conda.anaconda.org/conda-forge/linux-64/") == "conda-forge");
  CHECK(canonical_channel("https://conda.anaconda.org/conda-forge/label/broken") ==
        "conda-forge/label/broken");
  CHECK(canonical_channel("https://repo.anaconda.com/pkgs/main") == "pkgs/main");
  CHECK(canonical_channel("https://example.com/ch/noarch") == "https://example.com/ch");
  CHECK(canonical_channel("conda-forge") == "conda-forge");
}

TEST_CASE("canonical text reparses to itself where the fuzzer found it didn't", "[conda][match_spec]") {
  // A build with a '-' can't follow "==VERSION=" (the one-word form splits only a plain build).
  auto lenient = MatchSpec::parse("pkg 1.0 build-with-dash", SpecMode::lenient);
  REQUIRE(lenient);
  CHECK(lenient->str() == "pkg==1.0[build=build-with-dash]");
  auto again = MatchSpec::parse(lenient->str(), SpecMode::lenient);
  REQUIRE(again);
  CHECK(again->str() == lenient->str());
  // Any ASCII space in a channel is refused, not only ' ' and '\t'.
  auto formfeed = MatchSpec::parse("conda\fforge::numpy", SpecMode::lenient);
  REQUIRE_FALSE(formfeed);
  CHECK(formfeed.error().offset == 5);
  // libstdc++'s regex reads back-reference numbers without an overflow check: long ones are refused.
  auto backref = MatchSpec::parse("numpy[build='^1\\9999999999999.*$']", SpecMode::lenient);
  REQUIRE_FALSE(backref);
  CHECK(backref.error().message.find("at most 9 digits") != std::string::npos);
  // A file name's version is one version: a glob there could not be printed back as the URL's.
  auto glob_url = MatchSpec::parse("https://example.org/ch/foo-1.*-h0_1.tar.bz2", SpecMode::lenient);
  REQUIRE_FALSE(glob_url);
  CHECK(glob_url.error().offset == 29);
}
