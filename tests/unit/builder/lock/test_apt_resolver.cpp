// The apt resolver: candidates, alternatives, Multi-Arch, the base set, conflicts and the errors that
// explain them on small synthetic repositories; then real Debian bookworm, judged by real apt-get.
#include "builder/lock/apt_resolver.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

using namespace lockstep;
using namespace lockstep::builder;
namespace fs = std::filesystem;
using test::run_command;
using test::TempDirFixture;

namespace {

// One Packages paragraph; `extra` adds fields (each ending in '\n').
std::string pkg(const std::string& name, const std::string& version, const std::string& extra = "",
                const std::string& arch = "amd64") {
  return fmt::format("Package: {}\nVersion: {}\nArchitecture: {}\n{}Filename: pool/{}_{}_{}.deb\nSize: 100\n"
                     "SHA256: {}\n\n",
                     name, version, arch, extra, name, version, arch, std::string(64, 'a'));
}

// A universe from the texts of repositories 0, 1, ..., with their apt pin priorities (apt's
// default, 500, for each one not given).
AptUniverse universe(const std::vector<std::string>& repos, std::vector<int> priorities = {}) {
  std::vector<AptPackage> all;
  for (std::size_t i = 0; i < repos.size(); ++i) {
    auto r = parse_packages_index(repos[i], fmt::format("repo{}", i), static_cast<int>(i));
    REQUIRE_OK(r);
    std::move(r->begin(), r->end(), std::back_inserter(all));
  }
  return AptUniverse(std::move(all), {}, std::move(priorities));
}

AptRequest request(const std::string& name, int index, std::optional<std::string> pin = std::nullopt,
                   std::optional<std::string> arch = std::nullopt) {
  AptRequest r{name, std::move(arch), std::nullopt, fmt::format("packages.apt[{}]", index)};
  if (pin) {
    auto v = DebianVersion::parse(*pin);
    REQUIRE_OK(v);
    r.pin = *v;
  }
  return r;
}

ResolveOptions asking(std::vector<AptRequest> requests) {
  ResolveOptions o;
  o.requests = std::move(requests);
  return o;
}

// "name version" (":arch" for foreign packages) of each resolved package, in result order.
std::vector<std::string> chosen(const std::vector<ResolvedPackage>& r) {
  std::vector<std::string> out;
  for (const ResolvedPackage& p : r) {
    std::string arch = p.package->architecture == "amd64" || p.package->architecture == "all"
                           ? std::string()
                           : ":" + p.package->architecture;
    out.push_back(p.package->name + arch + " " + p.package->version.str());
  }
  return out;
}

std::vector<std::string> chosen(const AptUniverse& u, const ResolveOptions& o) {
  auto r = resolve(u, o);
  REQUIRE_OK(r);
  return chosen(*r);
}

std::string error_of(const AptUniverse& u, const ResolveOptions& o) {
  auto r = resolve(u, o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  return r.error().message;
}

using Strings = std::vector<std::string>;

} // namespace

TEST_CASE("The closure takes the highest version and says why each package is there", "[apt][resolver]") {
  auto u = universe({pkg("ls-lib", "1.0-1") + pkg("ls-app", "1.0-1", "Depends: ls-lib (>= 1.0), ls-data\n") +
                     pkg("ls-lib", "2.0-1", "Pre-Depends: ls-init\n") + pkg("ls-data", "1", "", "all") +
                     pkg("ls-init", "1") + pkg("ls-unrelated", "1")});
  auto r = resolve(u, asking({request("ls-app", 0)}));
  REQUIRE_OK(r);
  CHECK(chosen(*r) == Strings{"ls-app 1.0-1", "ls-data 1", "ls-init 1", "ls-lib 2.0-1"});
  CHECK((*r)[0].reasons == Strings{"requested by packages.apt[0]"});
  CHECK((*r)[1].reasons == Strings{"ls-app (Depends: ls-data)"});
  CHECK((*r)[2].reasons == Strings{"ls-lib (Pre-Depends: ls-init)"});
  CHECK((*r)[3].reasons == Strings{"ls-app (Depends: ls-lib (>= 1.0))"});
  CHECK((*r)[3].package->filename == "pool/ls-lib_2.0-1_amd64.deb");
}

TEST_CASE("A package shared by several dependers lists every reason, sorted", "[apt][resolver]") {
  auto u = universe({pkg("ls-a", "1", "Depends: ls-lib\n") + pkg("ls-b", "1", "Depends: ls-lib (>= 1)\n") +
                     pkg("ls-lib", "1")});
  auto r = resolve(u, asking({request("ls-b", 0), request("ls-a", 1), request("ls-lib", 2)}));
  REQUIRE_OK(r);
  REQUIRE(chosen(*r) == Strings{"ls-a 1", "ls-b 1", "ls-lib 1"});
  CHECK((*r)[2].reasons ==
        Strings{"requested by packages.apt[2]", "ls-a (Depends: ls-lib)", "ls-b (Depends: ls-lib (>= 1))"});
}

TEST_CASE("Repositories of equal priority offer their highest version, as apt's default pins do",
          "[apt][resolver]") {
  auto u = universe(
      {pkg("ls-lib", "1.0-1") + pkg("ls-tool", "2"),
       pkg("ls-lib", "3.0-1") + pkg("ls-new", "1", "Depends: ls-lib (>= 3)\n") + pkg("ls-tool", "2")});
  CHECK(chosen(u, asking({request("ls-lib", 0)})) == Strings{"ls-lib 3.0-1"});
  CHECK(chosen(u, asking({request("ls-new", 0)})) == Strings{"ls-lib 3.0-1", "ls-new 1"});
  // The same version in both: the first repository's.
  auto r = resolve(u, asking({request("ls-tool", 0)}));
  REQUIRE_OK(r);
  CHECK(r->front().package->repo == 0);
  // An older version of a higher-priority repository still wins (an overlay: priority 1001).
  u = universe({pkg("ls-lib", "1.0-1"), pkg("ls-lib", "3.0-1")}, {1001, 500});
  CHECK(chosen(u, asking({request("ls-lib", 0)})) == Strings{"ls-lib 1.0-1"});
  u = universe({pkg("ls-lib", "1.0-1"), pkg("ls-lib", "3.0-1")}, {100});
  CHECK(chosen(u, asking({request("ls-lib", 0)})) == Strings{"ls-lib 3.0-1"});
}

TEST_CASE("A higher-priority repository hides every version of a name in later ones", "[apt][resolver]") {
  auto u = universe(
      {pkg("ls-lib", "1.0-1"), pkg("ls-lib", "3.0-1") + pkg("ls-new", "1", "Depends: ls-lib (>= 3)\n")},
      {900, 800});
  CHECK(chosen(u, asking({request("ls-lib", 0)})) == Strings{"ls-lib 1.0-1"});
  // A pin takes the version from any repository.
  CHECK(chosen(u, asking({request("ls-lib", 0, "3.0-1")})) == Strings{"ls-lib 3.0-1"});
  CHECK(chosen(u, asking({request("ls-lib", 0, "3.0-1"), request("ls-new", 1)})) ==
        Strings{"ls-lib 3.0-1", "ls-new 1"});
  CHECK(error_of(u, asking({request("ls-new", 0)})) ==
        "ls-new 1 depends on ls-lib (>= 3), but the repositories have ls-lib 1.0-1 (a lower-priority "
        "repository "
        "has ls-lib 3.0-1; pin ls-lib=3.0-1 to use it)\n"
        "  chain: packages.apt[0] -> ls-new");
}

TEST_CASE("A pin selects exactly that version, or says which versions exist", "[apt][resolver]") {
  auto u =
      universe({pkg("ls-lib", "1.0-1") + pkg("ls-lib", "2.0-1") + pkg("ls-app", "1", "Depends: ls-lib\n")});
  CHECK(chosen(u, asking({request("ls-lib", 0, "1.0-1"), request("ls-app", 1)})) ==
        Strings{"ls-app 1", "ls-lib 1.0-1"});
  CHECK(chosen(u, asking({request("ls-app", 0), request("ls-lib", 1, "1.0-1")})) ==
        Strings{"ls-app 1", "ls-lib 1.0-1"});
  CHECK(error_of(u, asking({request("ls-lib", 2, "9.0-1")})) ==
        "packages.apt[2] asks for ls-lib=9.0-1, but the repositories have ls-lib 1.0-1, 2.0-1");
}

TEST_CASE("A version glob matches '*' against any run of characters and nothing else",
          "[apt][resolver][glob]") {
  struct Case {
    const char* glob;
    const char* version;
    bool matches;
  };
  for (const Case& c : {Case{"2.18.*+cuda12.1", "2.18.3-1+cuda12.1", true},
                        Case{"2.18.*+cuda12.1", "2.18.3-1+cuda12.2", false},
                        Case{"2.18.*+cuda12.1", "2.19.3-1+cuda12.1", false},
                        Case{"2.18.*", "2.18.3-1+cuda12.2", true},
                        Case{"2.18.*", "2.180.1-1", false},
                        Case{"2.18*", "2.180.1-1", true},
                        Case{"8.9.*", "8.9.2.26-1+cuda12.1", true},
                        Case{"*", "1", true},
                        Case{"*-1", "1.0-1", true},
                        Case{"*-1", "1.0-10", false},
                        Case{"1.*.*-1", "1.2.3-1", true},
                        Case{"1.*.*-1", "1.2-1", false},
                        Case{"**", "", true},
                        Case{"1.0", "1.0", true},
                        Case{"1.0", "1.0-1", false},
                        Case{"a*b*c", "aXbYbZc", true},
                        Case{"a*b*c", "aXbYcZ", false},
                        Case{"2.18.?-1", "2.18.3-1", false}, // only '*' is special
                        Case{"1:2.*", "1:2.5-1", true},
                        Case{"2.*", "1:2.5-1", false}}) {
    INFO(c.glob << " ~ " << c.version);
    CHECK(version_glob_matches(c.glob, c.version) == c.matches);
  }
}

TEST_CASE("make_apt_request tells a pin from a glob and refuses bad versions", "[apt][resolver][glob]") {
  auto pin = make_apt_request("libnccl2", "", "2.18.3-1+cuda12.1", "packages.apt[1]");
  REQUIRE_OK(pin);
  REQUIRE(pin->pin);
  CHECK(pin->pin->str() == "2.18.3-1+cuda12.1");
  CHECK_FALSE(pin->version_glob);
  CHECK_FALSE(pin->arch);
  CHECK(pin->origin == "packages.apt[1]");

  auto glob = make_apt_request("libnccl2", "amd64", "2.18.*+cuda12.1", "packages.apt[2]");
  REQUIRE_OK(glob);
  CHECK_FALSE(glob->pin);
  CHECK(glob->version_glob == std::optional<std::string>("2.18.*+cuda12.1"));
  CHECK(glob->arch == std::optional<std::string>("amd64"));

  auto plain = make_apt_request("libnccl2", "", "", "packages.apt[0]");
  REQUIRE_OK(plain);
  CHECK_FALSE(plain->pin);
  CHECK_FALSE(plain->version_glob);

  auto bad_glob = make_apt_request("libnccl2", "", "2.18.*/x", "packages.apt[3]");
  REQUIRE_FALSE(bad_glob);
  CHECK(bad_glob.error().code == ExitCode::invalid_input);
  CHECK(bad_glob.error().message ==
        "packages.apt[3] asks for libnccl2=2.18.*/x: a version glob is at most 256 characters of a Debian "
        "version (letters, digits and . + ~ - :) and '*'");
  CHECK_FALSE(make_apt_request("libnccl2", "", std::string(300, '*'), "packages.apt[3]"));
  auto bad_pin = make_apt_request("libnccl2", "", "x1.0", "packages.apt[4]");
  REQUIRE_FALSE(bad_pin);
  CHECK(bad_pin.error().code == ExitCode::invalid_input);
  CHECK(bad_pin.error().message.rfind("packages.apt[4] asks for libnccl2=x1.0: ", 0) == 0);
}

namespace {

// libnccl2 and libnccl-dev builds as NVIDIA's repository numbers them (libnccl-dev needs the same
// libnccl2), and libcudnn8.
std::string nvidia_like(const std::vector<std::string>& nccl, const std::vector<std::string>& cudnn = {}) {
  std::string text;
  for (const std::string& v : nccl) {
    text += pkg("libnccl2", v) + pkg("libnccl-dev", v, "Depends: libnccl2 (= " + v + ")\n");
  }
  for (const std::string& v : cudnn) {
    text += pkg("libcudnn8", v);
  }
  return text;
}

AptRequest glob_request(const std::string& name, int index, const std::string& glob) {
  auto r = make_apt_request(name, "", glob, fmt::format("packages.apt[{}]", index));
  REQUIRE_OK(r);
  return *r;
}

} // namespace

TEST_CASE("A version glob takes the highest matching version and the lock gets the exact one",
          "[apt][resolver][glob]") {
  auto u = universe({nvidia_like({"2.16.2-1+cuda11.8", "2.18.1-1+cuda12.1", "2.18.3-1+cuda12.1",
                                  "2.18.3-1+cuda12.2", "2.19.3-1+cuda12.2", "2.20.5-1+cuda12.4"},
                                 {"8.7.0.84-1+cuda11.8", "8.9.2.26-1+cuda12.1", "8.9.7.29-1+cuda12.2"})});
  CHECK(chosen(u, asking({glob_request("libnccl2", 0, "2.18.*+cuda12.1")})) ==
        Strings{"libnccl2 2.18.3-1+cuda12.1"});
  CHECK(chosen(u, asking({glob_request("libnccl2", 0, "2.18.*")})) == Strings{"libnccl2 2.18.3-1+cuda12.2"});
  CHECK(chosen(u, asking({glob_request("libcudnn8", 0, "8.9.*")})) ==
        Strings{"libcudnn8 8.9.7.29-1+cuda12.2"});
  CHECK(chosen(u, asking({glob_request("libcudnn8", 0, "*+cuda12.1")})) ==
        Strings{"libcudnn8 8.9.2.26-1+cuda12.1"});
  // The dependency on the exact libnccl2 follows the chosen libnccl-dev, even though a newer
  // libnccl2 exists; asking for libnccl2 with the same glob agrees with it.
  auto r = resolve(u, asking({glob_request("libnccl-dev", 0, "2.18.*+cuda12.1"),
                              glob_request("libnccl2", 1, "2.18.*+cuda12.1")}));
  REQUIRE_OK(r);
  CHECK(chosen(*r) == Strings{"libnccl-dev 2.18.3-1+cuda12.1", "libnccl2 2.18.3-1+cuda12.1"});
  CHECK((*r)[1].reasons ==
        Strings{"requested by packages.apt[1]", "libnccl-dev (Depends: libnccl2 (= 2.18.3-1+cuda12.1))"});
  // A glob and a plain request that disagree: the error names the glob.
  CHECK(error_of(u, asking({glob_request("libnccl2", 0, "2.18.*+cuda12.1"),
                            request("libnccl-dev", 1, "2.20.5-1+cuda12.4")})) ==
        "libnccl-dev 2.20.5-1+cuda12.4 depends on libnccl2 (= 2.20.5-1+cuda12.4), but the repositories have "
        "libnccl2 2.16.2-1+cuda11.8, 2.18.1-1+cuda12.1, 2.18.3-1+cuda12.1, 2.18.3-1+cuda12.2, "
        "2.19.3-1+cuda12.2, 2.20.5-1+cuda12.4 and libnccl2 must also satisfy libnccl2 (= 2.18.3-1+cuda12.1), "
        "for packages.apt[0] (libnccl2=2.18.*+cuda12.1)\n"
        "  chain: packages.apt[1] -> libnccl-dev");
}

TEST_CASE("A version glob prefers the higher-priority repository, then any repository with a match",
          "[apt][resolver][glob]") {
  auto u =
      universe({nvidia_like({"2.18.1-1+cuda12.1"}), nvidia_like({"2.18.3-1+cuda12.1", "2.19.3-1+cuda12.2"})},
               {900, 800});
  // Repository 0 has a match: its version wins over repository 1's higher one, as for a plain name.
  CHECK(chosen(u, asking({glob_request("libnccl2", 0, "2.18.*")})) == Strings{"libnccl2 2.18.1-1+cuda12.1"});
  CHECK(chosen(u, asking({request("libnccl2", 0)})) == Strings{"libnccl2 2.18.1-1+cuda12.1"});
  // Only repository 1 has a match: it is taken from there, as a pin would be.
  CHECK(chosen(u, asking({glob_request("libnccl2", 0, "2.19.*")})) == Strings{"libnccl2 2.19.3-1+cuda12.2"});
  // Its dependency on the same libnccl2 does not reach past repository 0 by itself (as with apt's
  // pin priorities): asking for both with the glob does.
  CHECK(error_of(u, asking({glob_request("libnccl-dev", 0, "2.19.*")})) ==
        "libnccl-dev 2.19.3-1+cuda12.2 depends on libnccl2 (= 2.19.3-1+cuda12.2), but the repositories have "
        "libnccl2 2.18.1-1+cuda12.1 (a lower-priority repository has libnccl2 2.19.3-1+cuda12.2; pin "
        "libnccl2=2.19.3-1+cuda12.2 to use it)\n"
        "  chain: packages.apt[0] -> libnccl-dev");
  auto r =
      resolve(u, asking({glob_request("libnccl-dev", 0, "2.19.*"), glob_request("libnccl2", 1, "2.19.*")}));
  REQUIRE_OK(r);
  CHECK(chosen(*r) == Strings{"libnccl-dev 2.19.3-1+cuda12.2", "libnccl2 2.19.3-1+cuda12.2"});
  CHECK((*r)[0].package->repo == 1);
  CHECK((*r)[1].package->repo == 1);
}

TEST_CASE("A version glob keeps the previous lock's version while it still matches",
          "[apt][resolver][glob]") {
  auto u = universe({nvidia_like({"2.18.1-1+cuda12.1", "2.18.3-1+cuda12.1", "2.19.3-1+cuda12.2"})});
  ResolveOptions o = asking({glob_request("libnccl2", 0, "2.18.*")});
  o.preferred.emplace("libnccl2", *DebianVersion::parse("2.18.1-1+cuda12.1"));
  CHECK(chosen(u, o) == Strings{"libnccl2 2.18.1-1+cuda12.1"});
  // A locked version the glob no longer matches is not kept.
  o.requests = {glob_request("libnccl2", 0, "2.19.*")};
  CHECK(chosen(u, o) == Strings{"libnccl2 2.19.3-1+cuda12.2"});
}

TEST_CASE("A version glob nothing matches lists the versions there are, newest first",
          "[apt][resolver][glob]") {
  std::vector<std::string> versions;
  for (int minor = 10; minor <= 20; ++minor) {
    versions.push_back(fmt::format("2.{}.1-1+cuda12.1", minor));
  }
  auto u = universe({nvidia_like(versions), pkg("ls-prov", "1", "Provides: ls-virtual\n")});
  CHECK(error_of(u, asking({glob_request("libnccl2", 3, "2.21.*")})) ==
        "packages.apt[3] asks for libnccl2=2.21.*, but no version of libnccl2 matches '2.21.*'; the "
        "repositories "
        "have libnccl2 2.20.1-1+cuda12.1, 2.19.1-1+cuda12.1, 2.18.1-1+cuda12.1, 2.17.1-1+cuda12.1, "
        "2.16.1-1+cuda12.1, 2.15.1-1+cuda12.1, 2.14.1-1+cuda12.1, 2.13.1-1+cuda12.1 and 3 older");
  auto two = universe({nvidia_like({"2.18.1-1+cuda12.1", "2.19.3-1+cuda12.2"})});
  CHECK(error_of(two, asking({glob_request("libnccl2", 0, "*+cuda11.8")})) ==
        "packages.apt[0] asks for libnccl2=*+cuda11.8, but no version of libnccl2 matches '*+cuda11.8'; the "
        "repositories have libnccl2 2.19.3-1+cuda12.2, 2.18.1-1+cuda12.1");
  CHECK(
      error_of(u, asking({glob_request("libncl2", 0, "2.18.*")})) ==
      "packages.apt[0] asks for libncl2=2.18.*, which none of the repositories has (did you mean libnccl2?)");
  CHECK(error_of(u, asking({glob_request("ls-virtual", 0, "1*")})) ==
        "packages.apt[0] asks for ls-virtual=1*, but ls-virtual is a virtual package (provided by ls-prov); "
        "pin "
        "that instead");
}

TEST_CASE("A version chosen too early is replaced when a later dependency rules it out", "[apt][resolver]") {
  // ls-x takes the newest ls-lib; ls-y then needs an older one, so the resolver learns the constraint
  // and starts again.
  auto u = universe({pkg("ls-lib", "1.0-1", "Depends: ls-old-helper\n") + pkg("ls-lib", "2.0-1") +
                     pkg("ls-old-helper", "1") + pkg("ls-x", "1", "Depends: ls-lib\n") +
                     pkg("ls-y", "1", "Depends: ls-lib (<< 2.0)\n")});
  auto r = resolve(u, asking({request("ls-x", 0), request("ls-y", 1)}));
  REQUIRE_OK(r);
  CHECK(chosen(*r) == Strings{"ls-lib 1.0-1", "ls-old-helper 1", "ls-x 1", "ls-y 1"});
  CHECK((*r)[0].reasons == Strings{"ls-x (Depends: ls-lib)", "ls-y (Depends: ls-lib (<< 2.0))"});
  // Two constraints no version meets together.
  auto v = universe({pkg("ls-lib", "1.0-1") + pkg("ls-lib", "2.0-1") + pkg("ls-lib", "3.0-1") +
                     pkg("ls-a", "1", "Depends: ls-lib (<< 2.0)\n") +
                     pkg("ls-b", "1", "Depends: ls-lib (>= 3.0)\n")});
  CHECK(error_of(v, asking({request("ls-a", 0), request("ls-b", 1)})) ==
        "ls-a 1 depends on ls-lib (<< 2.0), but the repositories have ls-lib 1.0-1, 2.0-1, 3.0-1 and ls-lib "
        "must also satisfy ls-lib (>= 3.0), for ls-b 1 (Depends: ls-lib (>= 3.0))\n"
        "  chain: packages.apt[0] -> ls-a");
  CHECK(error_of(v, asking({request("ls-lib", 0, "1.0-1"), request("ls-b", 1)})) ==
        "ls-b 1 depends on ls-lib (>= 3.0), but the repositories have ls-lib 1.0-1, 2.0-1, 3.0-1 and ls-lib "
        "must "
        "also satisfy ls-lib (= 1.0-1), for packages.apt[0] (ls-lib=1.0-1)\n"
        "  chain: packages.apt[1] -> ls-b");
}

TEST_CASE("An alternative already satisfied is used; otherwise the first one that works", "[apt][resolver]") {
  auto u = universe({pkg("ls-a", "1") + pkg("ls-b", "1") + pkg("ls-broken", "1", "Depends: ls-nowhere\n") +
                     pkg("ls-conflicting", "1", "Conflicts: ls-app2\n") +
                     pkg("ls-app", "1", "Depends: ls-a | ls-b\n") +
                     pkg("ls-app1", "1", "Depends: ls-missing | ls-b\n") +
                     pkg("ls-app2", "1", "Depends: ls-conflicting | ls-broken | ls-b\n")});
  CHECK(chosen(u, asking({request("ls-app", 0)})) == Strings{"ls-a 1", "ls-app 1"});
  auto r = resolve(u, asking({request("ls-app", 0), request("ls-b", 1)}));
  REQUIRE_OK(r);
  CHECK(chosen(*r) == Strings{"ls-app 1", "ls-b 1"});
  CHECK((*r)[1].reasons == Strings{"requested by packages.apt[1]", "ls-app (Depends: ls-a | ls-b)"});
  CHECK(chosen(u, asking({request("ls-app1", 0)})) == Strings{"ls-app1 1", "ls-b 1"});
  // ls-conflicting would conflict with ls-app2, ls-broken can't be installed: apt skips both.
  CHECK(chosen(u, asking({request("ls-app2", 0)})) == Strings{"ls-app2 1", "ls-b 1"});
}

TEST_CASE("Virtual packages: one provider is taken, several are chosen between deterministically",
          "[apt][resolver]") {
  auto u = universe({pkg("ls-mta-z", "1", "Provides: ls-mta\n") + pkg("ls-mta-a", "1", "Provides: ls-mta\n") +
                     pkg("ls-mta-prio", "1", "Priority: important\nProvides: ls-mta\n") +
                     pkg("ls-editor", "1", "Provides: ls-editor-virtual\n") +
                     pkg("ls-real", "1", "Provides: ls-real-or-virtual\n") + pkg("ls-real-or-virtual", "1") +
                     pkg("ls-shell", "1", "Provides: ls-sh (= 2.0)\n") +
                     pkg("ls-shell-unversioned", "1", "Provides: ls-sh\n") +
                     pkg("ls-needs-editor", "1", "Depends: ls-editor-virtual\n") +
                     pkg("ls-needs-mta", "1", "Depends: ls-mta\n") +
                     pkg("ls-needs-real", "1", "Depends: ls-real-or-virtual\n") +
                     pkg("ls-needs-sh", "1", "Depends: ls-sh (>= 2)\n") +
                     pkg("ls-needs-sh3", "1", "Depends: ls-sh (>= 3)\n")});
  CHECK(chosen(u, asking({request("ls-needs-editor", 0)})) == Strings{"ls-editor 1", "ls-needs-editor 1"});
  // A higher Priority wins (like apt), then the lowest name.
  CHECK(chosen(u, asking({request("ls-needs-mta", 0)})) == Strings{"ls-mta-prio 1", "ls-needs-mta 1"});
  // A real package of the name comes before its providers.
  CHECK(chosen(u, asking({request("ls-needs-real", 0)})) ==
        Strings{"ls-needs-real 1", "ls-real-or-virtual 1"});
  // A versioned dependency on a virtual name needs a versioned Provides (policy 7.5).
  CHECK(chosen(u, asking({request("ls-needs-sh", 0)})) == Strings{"ls-needs-sh 1", "ls-shell 1"});
  CHECK(error_of(u, asking({request("ls-needs-sh3", 0)})) ==
        "ls-needs-sh3 1 depends on ls-sh (>= 3), but ls-sh is provided by ls-shell 1 (= 2.0), "
        "ls-shell-unversioned 1 (no version) (a versioned dependency needs a matching versioned Provides)\n"
        "  chain: packages.apt[0] -> ls-needs-sh3");
  // Requests: a single provider is fine, several must be chosen by the spec.
  CHECK(chosen(u, asking({request("ls-editor-virtual", 0)})) == Strings{"ls-editor 1"});
  CHECK(error_of(u, asking({request("ls-mta", 0)})) == "packages.apt[0] asks for ls-mta, a virtual package "
                                                       "provided by ls-mta-a, ls-mta-prio, ls-mta-z; ask for "
                                                       "one of them");
}

TEST_CASE("Multi-Arch: :any needs Multi-Arch: allowed, foreign packages come only when asked for",
          "[apt][resolver]") {
  auto u = universe(
      {pkg("ls-python", "3", "Multi-Arch: allowed\n") + pkg("ls-perl", "5", "Multi-Arch: no\n") +
       pkg("ls-script", "1", "Depends: ls-python:any\n", "all") +
       pkg("ls-bad-any", "1", "Depends: ls-perl:any\n") + pkg("ls-libc", "2", "Multi-Arch: same\n") +
       pkg("ls-tools", "1", "Multi-Arch: foreign\n") + pkg("ls-app", "1", "Depends: ls-libc, ls-tools\n") +
       pkg("ls-libc", "2", "Multi-Arch: same\n", "arm64") +
       pkg("ls-tools", "1", "Multi-Arch: foreign\n", "arm64") +
       pkg("ls-app", "1", "Depends: ls-libc, ls-tools\n", "arm64") + pkg("ls-armonly", "1", "", "arm64")});
  CHECK(chosen(u, asking({request("ls-script", 0)})) == Strings{"ls-python 3", "ls-script 1"});
  CHECK(
      error_of(u, asking({request("ls-bad-any", 0)})) ==
      "ls-bad-any 1 depends on ls-perl:any, but the repositories have ls-perl 5 (not Multi-Arch: allowed, so "
      "ls-perl:any can't use it)\n"
      "  chain: packages.apt[0] -> ls-bad-any");
  // Without a request naming arm64, nothing of arm64 is installed.
  CHECK(chosen(u, asking({request("ls-app", 0)})) == Strings{"ls-app 1", "ls-libc 2", "ls-tools 1"});
  ResolveOptions o = asking({request("ls-app", 0, std::nullopt, "arm64")});
  o.foreign_arches = {"arm64"};
  auto r = resolve(u, o);
  REQUIRE_OK(r);
  // ls-libc (Multi-Arch: same) follows the foreign package; ls-tools (Multi-Arch: foreign) is native.
  CHECK(chosen(*r) == Strings{"ls-app:arm64 1", "ls-libc:arm64 2", "ls-tools 1"});
  CHECK((*r)[1].reasons == Strings{"ls-app:arm64 (Depends: ls-libc)"});
  // Multi-Arch: same packages may be installed for both architectures, others may not.
  o.requests.push_back(request("ls-libc", 1));
  CHECK(chosen(u, o) == Strings{"ls-app:arm64 1", "ls-libc 2", "ls-libc:arm64 2", "ls-tools 1"});
  o.requests.back() = request("ls-app", 1);
  CHECK(error_of(u, o) ==
        "ls-app and ls-app:arm64 can't be installed together (ls-app is not Multi-Arch: same):\n"
        "  ls-app 1: requested by packages.apt[1]\n"
        "  ls-app:arm64 1: requested by packages.apt[0]");
  CHECK(error_of(u, asking({request("ls-app", 0, std::nullopt, "arm64")})) ==
        "packages.apt[0] asks for ls-app:arm64, but arm64 is neither the native architecture (amd64) nor a "
        "foreign architecture of the image");
  CHECK(error_of(u, asking({request("ls-armonly", 0)})) ==
        "packages.apt[0] asks for ls-armonly, but the repositories have ls-armonly only for arm64");
}

TEST_CASE("The base set adds Essential and Priority: required packages", "[apt][resolver]") {
  auto u =
      universe({pkg("ls-base-files", "1", "Essential: yes\nPriority: required\n") +
                pkg("ls-shell", "1", "Essential: yes\nPriority: required\nDepends: ls-libc\n") +
                pkg("ls-libc", "2", "Priority: optional\n") + pkg("ls-init", "1", "Priority: required\n") +
                pkg("ls-foreign-essential", "1", "Essential: yes\n", "arm64") + pkg("ls-old-essential", "2") +
                pkg("ls-old-essential", "1", "Essential: yes\n") + pkg("ls-app", "1")});
  ResolveOptions o = asking({request("ls-app", 0)});
  o.with_essential = true;
  auto r = resolve(u, o);
  REQUIRE_OK(r);
  CHECK(chosen(*r) == Strings{"ls-app 1", "ls-base-files 1", "ls-libc 2", "ls-shell 1"});
  CHECK((*r)[1].reasons == Strings{"requested by base (Essential)"});
  o.with_required = true;
  r = resolve(u, o);
  REQUIRE_OK(r);
  CHECK(chosen(*r) == Strings{"ls-app 1", "ls-base-files 1", "ls-init 1", "ls-libc 2", "ls-shell 1"});
  CHECK((*r)[2].reasons == Strings{"requested by base (required)"});
}

TEST_CASE("Recommends are ignored unless asked for, and dropped when unsatisfiable", "[apt][resolver]") {
  auto u = universe({pkg("ls-app", "1", "Recommends: ls-docs, ls-missing\n") + pkg("ls-docs", "1")});
  CHECK(chosen(u, asking({request("ls-app", 0)})) == Strings{"ls-app 1"});
  ResolveOptions o = asking({request("ls-app", 0)});
  o.with_recommends = true;
  auto r = resolve(u, o);
  REQUIRE_OK(r);
  CHECK(chosen(*r) == Strings{"ls-app 1", "ls-docs 1"});
  CHECK((*r)[1].reasons == Strings{"ls-app (Recommends: ls-docs)"});
}

TEST_CASE("Conflicts and Breaks in the selection name both packages and their chains",
          "[apt][resolver][errors]") {
  auto u = universe(
      {pkg("ls-lib", "1.0-1") + pkg("ls-lib", "2.0-1") + pkg("ls-app", "1", "Depends: ls-lib (>= 1.0)\n") +
       pkg("ls-conflict", "1", "Conflicts: ls-lib\n") + pkg("ls-breaker", "1", "Breaks: ls-lib (<< 3.0)\n") +
       pkg("ls-old-breaker", "1", "Breaks: ls-lib (<< 2.0)\n") +
       pkg("ls-exim", "1", "Provides: ls-mta\nConflicts: ls-mta\n") +
       pkg("ls-postfix", "1", "Provides: ls-mta\nConflicts: ls-mta\n")});
  CHECK(error_of(u, asking({request("ls-app", 0), request("ls-conflict", 1)})) ==
        "ls-conflict conflicts with ls-lib (any version):\n"
        "  ls-conflict 1: requested by packages.apt[1]\n"
        "  ls-lib 2.0-1: requested by packages.apt[0] -> ls-app (Depends: ls-lib (>= 1.0))");
  CHECK(error_of(u, asking({request("ls-app", 0), request("ls-breaker", 1)})) ==
        "ls-breaker breaks ls-lib (<< 3.0):\n"
        "  ls-breaker 1: requested by packages.apt[1]\n"
        "  ls-lib 2.0-1: requested by packages.apt[0] -> ls-app (Depends: ls-lib (>= 1.0))");
  // Version constraints count: 2.0-1 is not << 2.0.
  CHECK(chosen(u, asking({request("ls-app", 0), request("ls-old-breaker", 1)})) ==
        Strings{"ls-app 1", "ls-lib 2.0-1", "ls-old-breaker 1"});
  // A package conflicting with what it provides itself is fine; through another's Provides it is not.
  CHECK(chosen(u, asking({request("ls-exim", 0)})) == Strings{"ls-exim 1"});
  CHECK(error_of(u, asking({request("ls-exim", 0), request("ls-postfix", 1)})) ==
        "ls-exim conflicts with ls-mta (any version), which ls-postfix provides:\n"
        "  ls-exim 1: requested by packages.apt[0]\n"
        "  ls-postfix 1: requested by packages.apt[1]");
}

TEST_CASE("Unsatisfiable and unknown packages are explained with the chain and what exists",
          "[apt][resolver][errors]") {
  auto u = universe(
      {pkg("ls-lib", "1.0-1") + pkg("ls-lib", "2.0-1") + pkg("ls-app", "1.0-1") +
       pkg("ls-needs-new", "1.0-1", "Depends: ls-lib (>= 3.0)\n") + pkg("ls-top", "1", "Depends: ls-mid\n") +
       pkg("ls-mid", "1", "Pre-Depends: ls-gone | ls-lib (>> 5)\n") + pkg("ls-app-extra", "1")});
  CHECK(error_of(u, asking({request("ls-app", 0), request("ls-lib", 1), request("ls-app", 2),
                            request("ls-needs-new", 3)})) ==
        "ls-needs-new 1.0-1 depends on ls-lib (>= 3.0), but the repositories have ls-lib 1.0-1, 2.0-1\n"
        "  chain: packages.apt[3] -> ls-needs-new");
  CHECK(error_of(u, asking({request("ls-top", 0)})) == "ls-mid 1 pre-depends on ls-gone | ls-lib (>> 5), but "
                                                       "the repositories have no ls-gone; the repositories "
                                                       "have ls-lib 1.0-1, 2.0-1\n"
                                                       "  chain: packages.apt[0] -> ls-top -> ls-mid");
  CHECK(error_of(u, asking({request("ls-ap", 0)})) ==
        "packages.apt[0] asks for ls-ap, which none of the repositories has (did you mean ls-app?)");
  CHECK(error_of(u, asking({request("zzzzzzzz", 1)})) ==
        "packages.apt[1] asks for zzzzzzzz, which none of the repositories has");
}

TEST_CASE("The result does not depend on the order of the index", "[apt][resolver]") {
  std::vector<std::string> paragraphs = {pkg("ls-a", "1", "Depends: ls-mta, ls-lib | ls-lib-alt\n"),
                                         pkg("ls-lib", "1"),
                                         pkg("ls-lib", "2"),
                                         pkg("ls-lib-alt", "1"),
                                         pkg("ls-mta-b", "1", "Provides: ls-mta\n"),
                                         pkg("ls-mta-a", "1", "Provides: ls-mta\n")};
  std::vector<std::vector<std::string>> results;
  std::sort(paragraphs.begin(), paragraphs.end());
  do {
    std::string text;
    for (const auto& p : paragraphs) {
      text += p;
    }
    AptUniverse u = universe({text});
    auto r = resolve(u, asking({request("ls-a", 0)}));
    REQUIRE_OK(r);
    std::vector<std::string> flat;
    for (const ResolvedPackage& p : *r) {
      flat.push_back(p.package->name + " " + p.package->version.str() + " " +
                     fmt::format("{}", fmt::join(p.reasons, "; ")));
    }
    results.push_back(flat);
  } while (std::next_permutation(paragraphs.begin(), paragraphs.end()));
  REQUIRE(results.size() == 720);
  CHECK(results.front() == Strings{"ls-a 1 requested by packages.apt[0]",
                                   "ls-lib 2 ls-a (Depends: ls-lib | ls-lib-alt)",
                                   "ls-mta-a 1 ls-a (Depends: ls-mta)"});
  CHECK(std::all_of(results.begin(), results.end(), [&](const auto& x) { return x == results.front(); }));
}

// ---- over a base image's dpkg status ---------------------------------------------------------------

namespace {

// One dpkg status paragraph; `want` is install or hold.
std::string installed(const std::string& name, const std::string& version, const std::string& extra = "",
                      const std::string& want = "install", const std::string& arch = "amd64") {
  return fmt::format("Package: {}\nStatus: {} ok installed\nArchitecture: {}\nVersion: {}\n{}\n", name, want,
                     arch, version, extra);
}

AptUniverse over_base(const std::vector<std::string>& repos, const std::string& status) {
  std::vector<AptPackage> all;
  for (std::size_t i = 0; i < repos.size(); ++i) {
    auto r = parse_packages_index(repos[i], fmt::format("repo{}", i), static_cast<int>(i));
    REQUIRE_OK(r);
    std::move(r->begin(), r->end(), std::back_inserter(all));
  }
  auto base = parse_dpkg_status(status, "base image: /var/lib/dpkg/status");
  REQUIRE_OK(base);
  return AptUniverse(std::move(all), std::move(*base));
}

// What the lock gets: the packages that are not the base's own, with their first reason.
std::vector<std::string> changes(const AptUniverse& u, const ResolveOptions& o) {
  auto r = resolve(u, o);
  REQUIRE_OK(r);
  std::vector<std::string> out;
  for (const ResolvedPackage& p : *r) {
    if (!p.in_base) {
      out.push_back(p.package->name + " " + p.package->version.str() + ": " + p.reasons.front());
    }
  }
  return out;
}

} // namespace

TEST_CASE("Over a base, installed packages satisfy dependencies and only what is missing is added",
          "[apt][resolver][base]") {
  auto u = over_base({pkg("ls-lib", "1.0-1") + pkg("ls-lib", "1.1-1") +
                      pkg("ls-app", "2", "Depends: ls-lib (>= 1.0), ls-new\n") + pkg("ls-new", "1") +
                      pkg("ls-other", "1")},
                     installed("ls-lib", "1.0-1") + installed("ls-other", "1"));
  CHECK(changes(u, asking({request("ls-app", 0)})) ==
        Strings{"ls-app 2: requested by packages.apt[0]", "ls-new 1: ls-app (Depends: ls-new)"});
  // Asking for what is installed at the candidate changes nothing.
  CHECK(changes(u, asking({request("ls-other", 0)})).empty());
  auto r = resolve(u, asking({request("ls-app", 0)}));
  REQUIRE_OK(r);
  CHECK(chosen(*r) == Strings{"ls-app 2", "ls-lib 1.0-1", "ls-new 1", "ls-other 1"});
  CHECK((*r)[1].in_base);
  CHECK((*r)[1].reasons == Strings{"ls-app (Depends: ls-lib (>= 1.0))"});
}

TEST_CASE("Over a base, a request or a dependency upgrades an installed package and says so",
          "[apt][resolver][base]") {
  auto u = over_base({pkg("ls-lib", "1.0-1") + pkg("ls-lib", "1.1-1") +
                      pkg("ls-app", "2", "Depends: ls-lib (>= 1.1)\n") + pkg("ls-newer", "3")},
                     installed("ls-lib", "1.0-1") + installed("ls-newer", "4"));
  CHECK(changes(u, asking({request("ls-lib", 0)})) ==
        Strings{"ls-lib 1.1-1: upgrades base's ls-lib 1.0-1 -> 1.1-1, requested by packages.apt[0]"});
  CHECK(changes(u, asking({request("ls-app", 0)})) ==
        Strings{"ls-app 2: requested by packages.apt[0]",
                "ls-lib 1.1-1: upgrades base's ls-lib 1.0-1 -> 1.1-1, needed by ls-app (Depends: ls-lib (>= "
                "1.1))"});
  // No downgrade: the installed 4 is above the repository's 3; a pin may go down.
  CHECK(changes(u, asking({request("ls-newer", 0)})).empty());
  CHECK(changes(u, asking({request("ls-newer", 0, "3")})) ==
        Strings{"ls-newer 3: downgrades base's ls-newer 4 -> 3, requested by packages.apt[0]"});
}

TEST_CASE("Over a base, an upgrade that breaks an installed package upgrades that one too",
          "[apt][resolver][base]") {
  auto u = over_base({pkg("ls-lib", "1.1-1") + pkg("ls-lib-dev", "1.1-1", "Depends: ls-lib (= 1.1-1)\n") +
                      pkg("ls-app", "2", "Depends: ls-lib (>= 1.1)\n")},
                     installed("ls-lib", "1.0-1") +
                         installed("ls-lib-dev", "1.0-1", "Depends: ls-lib (= 1.0-1)\n"));
  CHECK(
      changes(u, asking({request("ls-app", 0)})) ==
      Strings{"ls-app 2: requested by packages.apt[0]",
              "ls-lib 1.1-1: upgrades base's ls-lib 1.0-1 -> 1.1-1, needed by ls-app (Depends: ls-lib (>= "
              "1.1))",
              "ls-lib-dev 1.1-1: upgrades base's ls-lib-dev 1.0-1 -> 1.1-1, needed by the base's ls-lib-dev "
              "1.0-1 (Depends: ls-lib (= 1.0-1)), which the new packages no longer satisfy"});
}

TEST_CASE("Over a base, a held package is never changed; what needs it to is refused with the chain",
          "[apt][resolver][base][errors]") {
  auto u = over_base({pkg("libnccl2", "2.21.5-1") + pkg("libnccl2", "2.22.3-1") +
                      pkg("ls-trainer", "1", "Depends: ls-comm\n") +
                      pkg("ls-comm", "1", "Depends: libnccl2 (>= 2.22)\n") +
                      pkg("ls-fits", "1", "Depends: libnccl2 (>= 2.21)\n") + pkg("ls-cublas", "12.4.6-1") +
                      pkg("ls-cuda-libs", "12.4.6-1", "Depends: ls-cublas (= 12.4.6-1)\n")},
                     installed("libnccl2", "2.21.5-1", "", "hold") + installed("ls-cublas", "12.4.5-1") +
                         installed("ls-cuda-libs", "12.4.5-1", "Depends: ls-cublas (= 12.4.5-1)\n", "hold"));
  CHECK(changes(u, asking({request("ls-fits", 0)})) == Strings{"ls-fits 1: requested by packages.apt[0]"});
  CHECK(error_of(u, asking({request("ls-trainer", 0)})) ==
        "ls-comm 1 depends on libnccl2 (>= 2.22), but the repositories have libnccl2 2.21.5-1, 2.22.3-1 (the "
        "base image holds libnccl2 at 2.21.5-1 (apt-mark hold), and lockstep never changes a held "
        "package)\n"
        "  chain: packages.apt[0] -> ls-trainer -> ls-comm");
  CHECK(
      error_of(u, asking({request("libnccl2", 0)})) ==
      "packages.apt[0] asks for libnccl2, which the base image holds at 2.21.5-1 (apt-mark hold); apt would "
      "move it to 2.22.3-1, and lockstep never changes a held package: ask for libnccl2=2.21.5-1 or drop "
      "the request");
  CHECK(changes(u, asking({request("libnccl2", 0, "2.21.5-1")})).empty());
  // Upgrading ls-cublas would break the held ls-cuda-libs.
  CHECK(error_of(u, asking({request("ls-cublas", 0)})) ==
        "the base image holds ls-cuda-libs at 12.4.5-1 (apt-mark hold), and the base's ls-cuda-libs 12.4.5-1 "
        "(Depends: ls-cublas (= 12.4.5-1)) would no longer be satisfied by\n"
        "  ls-cublas 12.4.6-1: requested by packages.apt[0]\n"
        "lockstep never changes a held package: change the request, or build on a base whose ls-cuda-libs "
        "fits");
}

TEST_CASE("Over a base, Breaks against an installed package upgrade it, or name both sides",
          "[apt][resolver][base][errors]") {
  auto u = over_base({pkg("ls-old", "2") + pkg("ls-new", "1", "Breaks: ls-old (<< 2)\n") +
                      pkg("ls-rival", "1", "Conflicts: ls-stuck\n")},
                     installed("ls-old", "1") + installed("ls-stuck", "1"));
  CHECK(changes(u, asking({request("ls-new", 0)})) ==
        Strings{"ls-new 1: requested by packages.apt[0]",
                "ls-old 2: upgrades base's ls-old 1 -> 2, needed by ls-new 1 (breaks ls-old (<< 2))"});
  CHECK(error_of(u, asking({request("ls-rival", 0)})) == "ls-rival conflicts with ls-stuck (any version):\n"
                                                         "  ls-rival 1: requested by packages.apt[0]\n"
                                                         "  ls-stuck 1: installed in the base image");
}

// ---- real Debian bookworm, judged by apt-get --------------------------------------------------------

namespace {

const char* const k_lists = "/var/lib/apt/lists/";
const std::string k_main = "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4";
const std::string k_updates = "deb.debian.org_debian_dists_bookworm-updates_main_binary-amd64_Packages.lz4";
const std::string k_security =
    "deb.debian.org_debian-security_dists_bookworm-security_main_binary-amd64_Packages.lz4";

bool have_list(const std::string& name) {
  return fs::exists(fs::path(k_lists) / name);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// "name version" of every package apt-get would install from nothing (an empty dpkg status), using
// the sources in `sources_list` only.
std::set<std::string> apt_get_install(const TempDirFixture& tmp, const std::string& sources_list,
                                      const std::vector<std::string>& names,
                                      const std::string& preferences = "", const std::string& status = "",
                                      std::string* output = nullptr) {
  tmp.write("status", status);
  tmp.write("preferences", preferences);
  tmp.write("sources.list", sources_list);
  fs::create_directories(tmp.dir() / "empty");
  const std::string d = tmp.dir().string();
  std::string cmd =
      "apt-get install -s -q --no-install-recommends -o Debug::NoLocking=1 -o Dir::State::status=" + d +
      "/status -o Dir::Etc::SourceList=" + d + "/sources.list -o Dir::Etc::SourceParts=" + d +
      "/empty -o Dir::Etc::Preferences=" + d + "/preferences -o Dir::Etc::PreferencesParts=" + d +
      "/empty -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Architecture=amd64 "
      "-o APT::Architectures=amd64 -o Dir::State::Lists=" +
      std::string(k_lists);
  for (const std::string& n : names) {
    cmd += " " + n;
  }
  const std::string text =
      run_command(cmd + " 2>&1", output != nullptr ? test::ExitCheck::ignore : test::ExitCheck::must_succeed);
  if (output != nullptr) {
    *output = text;
  }
  std::istringstream out(text);
  std::set<std::string> installed;
  std::string line;
  // "Inst libc6 (2.36-9+deb12u10 Debian:12.11/stable [amd64])", or for an upgrade
  // "Inst libgomp1 [0.1-1] (12.2.0-14 Debian:12.11/stable [amd64])"
  while (std::getline(out, line)) {
    if (line.rfind("Inst ", 0) != 0) {
      continue;
    }
    std::istringstream words(line.substr(5));
    std::string name, version;
    words >> name >> version;
    if (version.starts_with("[")) {
      words >> version;
    }
    installed.insert(name + " " + version.substr(1));
  }
  return installed;
}

std::set<std::string> as_set(const std::vector<ResolvedPackage>& r) {
  std::set<std::string> out;
  for (const ResolvedPackage& p : r) {
    out.insert(p.package->name + " " + p.package->version.str());
  }
  return out;
}

// Differences from apt that are choices between valid alternatives, not errors. Each entry is a
// package name that may appear on one side only. Currently empty: on bookworm lockstep and apt agree.
const std::set<std::string> k_allowed_differences = {};

void compare_with_apt(const std::set<std::string>& ours, const std::set<std::string>& apt) {
  std::vector<std::string> only_ours, only_apt;
  std::set_difference(ours.begin(), ours.end(), apt.begin(), apt.end(), std::back_inserter(only_ours));
  std::set_difference(apt.begin(), apt.end(), ours.begin(), ours.end(), std::back_inserter(only_apt));
  auto unexplained = [](const std::vector<std::string>& v) {
    std::vector<std::string> out;
    for (const std::string& s : v) {
      if (k_allowed_differences.count(s.substr(0, s.find(' '))) == 0) {
        out.push_back(s);
      }
    }
    return out;
  };
  INFO("only lockstep: " << fmt::format("{}", fmt::join(only_ours, ", ")));
  INFO("only apt: " << fmt::format("{}", fmt::join(only_apt, ", ")));
  CHECK(unexplained(only_ours).empty());
  CHECK(unexplained(only_apt).empty());
}

std::vector<AptPackage> read_index(const std::string& list, int repo) {
  const std::string text = run_command("lz4 -dc " + std::string(k_lists) + list);
  auto r = parse_packages_index(text, list, repo);
  REQUIRE_OK(r);
  return std::move(*r);
}

std::vector<std::string> essential_names(const std::vector<ResolvedPackage>& r) {
  std::vector<std::string> out;
  for (const ResolvedPackage& p : r) {
    if (p.package->essential) {
      out.push_back(p.package->name);
    }
  }
  return out;
}

} // namespace

TEST_CASE("Resolving on real bookworm gives what apt-get would install", "[apt][resolver][real]") {
  if (!have_list(k_main) || !test::have_tool("lz4") || !test::have_tool("apt-get")) {
    WARN("skipped: needs " << k_lists << k_main << ", lz4 and apt-get");
    return;
  }
  TempDirFixture tmp;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<AptPackage> packages = read_index(k_main, 0);
  const double parse_s = seconds_since(t0);
  REQUIRE(packages.size() > 50000);
  AptUniverse u(std::move(packages));
  const std::string sources = "deb http://deb.debian.org/debian bookworm main\n";

  ResolveOptions mpi = asking({request("openmpi-bin", 0), request("python3-mpi4py", 1)});
  mpi.with_essential = true;
  t0 = std::chrono::steady_clock::now();
  auto r = resolve(u, mpi);
  const double resolve_s = seconds_since(t0);
  REQUIRE_OK(r);
  WARN(fmt::format(
      "bookworm main: {} packages parsed in {:.2f} s; openmpi-bin + python3-mpi4py + Essential -> "
      "{} packages resolved in {:.1f} ms",
      u.packages().size(), parse_s, r->size(), resolve_s * 1000));
  std::vector<std::string> names = essential_names(*r);
  names.insert(names.end(), {"openmpi-bin", "python3-mpi4py"});
  compare_with_apt(as_set(*r), apt_get_install(tmp, sources, names));

  // mmdebstrap --variant=apt: Essential + apt.
  ResolveOptions apt_variant = asking({request("apt", 0)});
  apt_variant.with_essential = true;
  t0 = std::chrono::steady_clock::now();
  r = resolve(u, apt_variant);
  const double apt_s = seconds_since(t0);
  REQUIRE_OK(r);
  WARN(fmt::format("bookworm main: Essential + apt -> {} packages resolved in {:.1f} ms", r->size(),
                   apt_s * 1000));
  names = essential_names(*r);
  names.emplace_back("apt");
  compare_with_apt(as_set(*r), apt_get_install(tmp, sources, names));
}

namespace {

constexpr const char* k_standard_sources =
    "deb http://deb.debian.org/debian bookworm main\n"
    "deb http://deb.debian.org/debian bookworm-updates main\n"
    "deb http://deb.debian.org/debian-security bookworm-security main\n";

// Essential + openmpi-bin, python3-mpi4py and apt over bookworm's three lists, each read as the
// repository `repo` of its pair, at `priorities` by repository: the resolution, compared with what
// apt-get installs from Debian's standard sources under `preferences`. Skipped, with a warning,
// when the lists or tools are missing.
void check_standard_sources(const std::vector<std::pair<std::string, int>>& lists,
                            std::vector<int> priorities, const std::string& preferences) {
  if (!have_list(k_main) || !have_list(k_updates) || !have_list(k_security) || !test::have_tool("lz4") ||
      !test::have_tool("apt-get")) {
    WARN("skipped: needs the bookworm, bookworm-updates and bookworm-security lists, lz4 and apt-get");
    return;
  }
  TempDirFixture tmp;
  std::vector<AptPackage> all;
  for (const auto& [list, repo] : lists) {
    std::vector<AptPackage> more = read_index(list, repo);
    std::move(more.begin(), more.end(), std::back_inserter(all));
  }
  AptUniverse u(std::move(all), {}, std::move(priorities));
  ResolveOptions o = asking({request("openmpi-bin", 0), request("python3-mpi4py", 1), request("apt", 2)});
  o.with_essential = true;
  auto r = resolve(u, o);
  REQUIRE_OK(r);
  std::vector<std::string> names = essential_names(*r);
  names.insert(names.end(), {"openmpi-bin", "python3-mpi4py", "apt"});
  compare_with_apt(as_set(*r), apt_get_install(tmp, k_standard_sources, names, preferences));
}

} // namespace

TEST_CASE("Repository priority on real bookworm matches apt pinning with decreasing priorities",
          "[apt][resolver][real]") {
  // Pin priorities 900, 800, 700 for security, updates, release: a name present in
  // bookworm-security comes from there even where the (later) point release has a newer version.
  check_standard_sources({{k_security, 0}, {k_updates, 1}, {k_main, 2}}, {900, 800, 700},
                         "Package: *\nPin: release n=bookworm-security\nPin-Priority: 900\n\n"
                         "Package: *\nPin: release n=bookworm-updates\nPin-Priority: 800\n\n"
                         "Package: *\nPin: release n=bookworm\nPin-Priority: 700\n");
}

TEST_CASE("Debian's standard sources at apt's default priority give what apt-get installs",
          "[apt][resolver][real]") {
  // As a user writes them: bookworm and bookworm-updates in one entry, bookworm-security in
  // another, no priorities: every source at 500, the highest version wins (security's fixes).
  check_standard_sources({{k_main, 0}, {k_updates, 0}, {k_security, 1}}, {}, "");
}

namespace {

std::set<std::string> changed(const std::vector<ResolvedPackage>& r) {
  std::set<std::string> out;
  for (const ResolvedPackage& p : r) {
    if (!p.in_base) {
      out.insert(p.package->name + " " + p.package->version.str());
    }
  }
  return out;
}

} // namespace

TEST_CASE("Over this machine's dpkg status, lockstep installs and upgrades what apt-get would",
          "[apt][resolver][real][base]") {
  if (!have_list(k_main) || !test::have_tool("lz4") || !test::have_tool("apt-get") ||
      !fs::exists("/var/lib/dpkg/status")) {
    WARN("skipped: needs " << k_lists << k_main << ", lz4, apt-get and a dpkg status");
    return;
  }
  TempDirFixture tmp;
  const std::vector<AptPackage> main_index = read_index(k_main, 0);
  const std::string sources = "deb http://deb.debian.org/debian bookworm main\n";
  const std::vector<std::string> names = {"libhdf5-openmpi-dev", "python3-scipy", "gfortran", "emacs-nox"};
  std::vector<AptRequest> requests;
  for (std::size_t i = 0; i < names.size(); ++i) {
    requests.push_back(request(names[i], static_cast<int>(i)));
  }
  auto over = [&](const std::string& status) {
    auto base = parse_dpkg_status(status, "dpkg status");
    REQUIRE_OK(base);
    return AptUniverse(std::vector<AptPackage>(main_index), std::move(*base));
  };

  // As installed here.
  const std::string status = run_command("cat /var/lib/dpkg/status");
  AptUniverse u = over(status);
  auto r = resolve(u, asking(requests));
  REQUIRE_OK(r);
  compare_with_apt(changed(*r), apt_get_install(tmp, sources, names, "", status));

  // A small base made from bookworm itself (Essential, apt and two libraries that nothing in it
  // depends on) with those libraries set back to 0.1-1: apt upgrades them for the new packages,
  // and so must lockstep.
  ResolveOptions base_set = asking({request("apt", 0), request("libgomp1", 1), request("libquadmath0", 2)});
  base_set.with_essential = true;
  AptUniverse plain{std::vector<AptPackage>(main_index)};
  auto base = resolve(plain, base_set);
  REQUIRE_OK(base);
  const std::set<std::string> lowered = {"libgomp1", "libquadmath0"};
  std::string small;
  for (const ResolvedPackage& p : *base) {
    std::string control = p.package->control;
    const std::string name = p.package->name;
    control.insert(control.find('\n') + 1, "Status: install ok installed\n");
    if (lowered.count(name) != 0) {
      const std::size_t v = control.find("\nVersion: ") + 10;
      control.replace(v, control.find('\n', v) - v, "0.1-1");
    }
    small += control + "\n";
  }
  const std::string older = small;
  AptUniverse u_older = over(older);
  r = resolve(u_older, asking(requests));
  REQUIRE_OK(r);
  compare_with_apt(changed(*r), apt_get_install(tmp, sources, names, "", older));
  for (const std::string& name : lowered) {
    const bool upgraded = std::any_of(r->begin(), r->end(), [&](const ResolvedPackage& p) {
      return p.package->name == name && p.replaces != nullptr && p.replaces->version.str() == "0.1-1" &&
             p.reasons.front().starts_with("upgrades base's " + name + " 0.1-1 -> ");
    });
    CHECK(upgraded);
  }

  // Held at the old version: apt can't install, lockstep refuses naming the hold.
  std::string held = older;
  const std::size_t at = held.find("Package: libgomp1\nStatus: install ");
  REQUIRE(at != std::string::npos);
  held.replace(at + 26, 7, "hold");
  AptUniverse u_held = over(held);
  r = resolve(u_held, asking(requests));
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("the base image holds libgomp1 at 0.1-1"));
  std::string apt_output;
  apt_get_install(tmp, sources, names, "", held, &apt_output);
  CHECK_THAT(apt_output,
             Catch::Contains("held broken packages") || Catch::Contains("held packages will be changed"));
}
