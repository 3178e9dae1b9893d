// Solving conda requests (support/conda/solve): the expectations of conda's own tests
// (tests/core/test_solve.py) and mamba's (libmamba/tests/src/solver/libsolv/test_solver.cpp) ported
// as facts onto small hand-made indexes, conda.md §5's rules one by one, the explanation of an
// unsatisfiable request, the bound on a hostile index, and random small worlds checked against an
// exhaustive search.
#include "support/conda/solve.hpp"
#include "tests/unit/support/conda/conda_world.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <random>

using namespace lockstep;
using namespace lockstep::conda;
using namespace lockstep::conda::test;

namespace {

std::vector<MatchSpec> specs(const std::vector<std::string>& texts) {
  std::vector<MatchSpec> out;
  for (const std::string& t : texts) {
    auto s = MatchSpec::parse(t);
    INFO(t);
    REQUIRE(s);
    out.push_back(*s);
  }
  return out;
}

/// Solves and requires no error (an unsatisfiable request is not an error).
Solution solved(const PackageIndex& index, const std::vector<std::string>& request,
                const SolveOptions& options = {}) {
  auto r = solve(index, specs(request), options);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  return std::move(*r);
}

/// The solution as "name version build" per name.
std::map<std::string, std::string> picked(const Solution& s) {
  std::map<std::string, std::string> out;
  for (const SolvedRecord& r : s.records) {
    out[std::string(r.record->record->name)] =
        fmt::format("{} {}", r.record->record->version, r.record->record->build);
  }
  return out;
}

/// The names of the solution in its order.
std::vector<std::string> order_of(const Solution& s) {
  std::vector<std::string> out;
  for (const SolvedRecord& r : s.records) {
    out.emplace_back(r.record->record->name);
  }
  return out;
}

// conda's channel-1 fixture, cut down to numpy and python (tests/core/test_solve.py test_solve_1).
World numpy_world() {
  World w;
  w.add("channel-1", {
                         {"python 2.6.8 6", {"openssl 1.0.1c", "zlib 1.2.7"}},
                         {"python 2.7.5 0", {"openssl 1.0.1c", "zlib 1.2.7"}},
                         {"python 3.3.2 0", {"openssl 1.0.1c", "zlib 1.2.7"}},
                         {"openssl 1.0.1c 0", {}},
                         {"zlib 1.2.7 0", {}},
                         {"numpy 1.6.2 py27_4", {"python 2.7*"}, {}, 4},
                         {"numpy 1.7.1 py26_0", {"python 2.6*"}},
                         {"numpy 1.7.1 py27_0", {"python 2.7*"}},
                         {"numpy 1.7.1 py33_0", {"python 3.3*"}},
                     });
  return w;
}

} // namespace

TEST_CASE("a request takes the newest version and the variant whose dependencies are newest",
          "[conda][solve]") {
  World w = numpy_world();
  const PackageIndex index = w.index();
  Solution s = solved(index, {"numpy"});
  REQUIRE(s.solved);
  // conda: numpy-1.7.1-py33_0 with python-3.3.2-0, dependencies first.
  CHECK(picked(s) ==
        std::map<std::string, std::string>{
            {"numpy", "1.7.1 py33_0"}, {"openssl", "1.0.1c 0"}, {"python", "3.3.2 0"}, {"zlib", "1.2.7 0"}});
  CHECK(order_of(s) == std::vector<std::string>{"openssl", "zlib", "python", "numpy"});
  // conda: adding python=2 moves to numpy-1.7.1-py27_0 and python-2.7.5-0.
  s = solved(index, {"numpy", "python=2"});
  CHECK(picked(s).at("numpy") == "1.7.1 py27_0");
  CHECK(picked(s).at("python") == "2.7.5 0");
  // conda's test_only_deps_2: numpy=1.5 is not there, numpy=1.6 with python=2.7 is.
  s = solved(index, {"numpy=1.6", "python=2.7"});
  CHECK(picked(s).at("numpy") == "1.6.2 py27_4");
}

TEST_CASE("each solved record says why it is there", "[conda][solve]") {
  World w = numpy_world();
  const PackageIndex index = w.index();
  const Solution s = solved(index, {"numpy >=1.7"});
  REQUIRE(s.solved);
  std::map<std::string, std::string> reasons;
  for (const SolvedRecord& r : s.records) {
    reasons[std::string(r.record->record->name)] = r.reason;
    CHECK(r.channel == "channel-1");
  }
  CHECK(reasons.at("numpy") == "requested as numpy >=1.7");
  CHECK(reasons.at("python") == "needed by numpy 1.7.1 py33_0: python 3.3*");
  CHECK(reasons.at("zlib") == "needed by python 3.3.2 0: zlib 1.2.7");
  CHECK(s.records.back().requested == std::optional<std::size_t>(0));
  CHECK(s.records.front().requested == std::nullopt);
}

TEST_CASE("strict channel priority hides the records of a name that a higher channel has", "[conda][solve]") {
  // mamba: "Solve a fresh environment with multiple repositories".
  World w;
  w.add("repo1", {{"numpy 1.0.0 repo1", {}}, {"only1 1.0 0", {}}});
  w.add("repo2", {{"numpy 2.0.0 repo2", {}}, {"only2 1.0 0", {}}});
  const PackageIndex index = w.index();
  SolveOptions strict;
  Solution s = solved(index, {"numpy>=2.0"}, strict);
  CHECK_FALSE(s.solved);
  CHECK_THAT(s.explanation, Catch::Contains("no record of numpy matches; there are 1.0.0"));
  SolveOptions flexible;
  flexible.channel_priority = ChannelPriority::flexible;
  s = solved(index, {"numpy>=2.0"}, flexible);
  REQUIRE(s.solved);
  CHECK(picked(s).at("numpy") == "2.0.0 repo2");
  CHECK(s.records[0].channel == "repo2");
  // Flexible compares the channel before the version: the higher channel's 1.0.0 comes first.
  s = solved(index, {"numpy"}, flexible);
  CHECK(picked(s).at("numpy") == "1.0.0 repo1");
  // A name only a lower channel has is taken from it in either mode.
  s = solved(index, {"only2"}, strict);
  CHECK(picked(s).at("only2") == "1.0 0");
}

TEST_CASE("a channel-specific spec takes the name from that channel only", "[conda][solve]") {
  // mamba: "Respect channel-specific MatchSpec".
  World w;
  w.add("https://conda.anaconda.org/conda-forge", {{"foo 1.0.0 conda", {}}});
  w.add("https://conda.anaconda.org/mamba-forge", {{"foo 1.0.0 mamba", {}}});
  const PackageIndex index = w.index();
  CHECK(picked(solved(index, {"conda-forge::foo"})).at("foo") == "1.0.0 conda");
  CHECK(picked(solved(index, {"mamba-forge::foo"})).at("foo") == "1.0.0 mamba");
  CHECK(picked(solved(index, {"https://conda.anaconda.org/mamba-forge::foo"})).at("foo") == "1.0.0 mamba");
  const Solution none = solved(index, {"pixi-forge::foo"});
  CHECK_FALSE(none.solved);
  CHECK_THAT(none.explanation, Catch::Contains("the request asks for pixi-forge::foo (nothing provides foo "
                                               "in the channels the request names)"));
}

TEST_CASE("candidates order by track_features, version, build number, then timestamp", "[conda][solve]") {
  // mamba: "Install highest priority package".
  const auto best = [](const std::vector<R>& records) {
    World w;
    w.add("repo", records);
    const PackageIndex index = w.index();
    const Solution s = solved(index, {"foo"});
    REQUIRE(s.solved);
    const Record& r = *s.records.at(0).record->record;
    return fmt::format("{} bn{} t{}", r.version, r.build_number, r.timestamp_ms);
  };
  // Track features first: the featured 2.0 loses to 1.0.
  CHECK(best({{"foo 1.0.0 a", {}, {}, 0, {}, 0}, {"foo 2.0.0 b", {}, {}, 1, {"feat"}, 1}}) == "1.0.0 bn0 t0");
  // Then the version, over the build number.
  CHECK(best({{"foo 2.0.0 a", {}, {}, 0, {}, 0}, {"foo 1.0.0 b", {}, {}, 1, {}, 1}}) == "2.0.0 bn0 t0");
  // Then the build number, over the timestamp.
  CHECK(best({{"foo 2.0.0 a", {}, {}, 1, {}, 0}, {"foo 2.0.0 b", {}, {}, 0, {}, 1}}) == "2.0.0 bn1 t0");
  // The timestamp last.
  CHECK(best({{"foo 2.0.0 a", {}, {}, 0, {}, 0}, {"foo 2.0.0 b", {}, {}, 0, {}, 1}}) == "2.0.0 bn0 t1");
  // Fewer features before more.
  CHECK(best({{"foo 1.0.0 a", {}, {}, 0, {"x", "y"}, 0}, {"foo 0.5 b", {}, {}, 0, {"x"}, 0}}) ==
        "0.5 bn0 t0");
}

TEST_CASE("a featured record is still chosen when the request asks for it", "[conda][solve]") {
  World w;
  w.add("repo", {{"foo 1.0.0 plain", {}}, {"foo 2.0.0 feat", {}, {}, 0, {"feat"}}});
  const PackageIndex index = w.index();
  CHECK(picked(solved(index, {"foo >=2"})).at("foo") == "2.0.0 feat");
  CHECK(picked(solved(index, {"foo[track_features=feat]"})).at("foo") == "2.0.0 feat");
}

TEST_CASE("pins constrain a name when it is present and never install it", "[conda][solve]") {
  // mamba: "Respect pins".
  World w;
  w.add("repo", {{"foo 1.0 0", {}},
                 {"foo 2.0 0", {}},
                 {"bar 1.0 0", {"foo=1.0"}},
                 {"bar 2.0 0", {"foo=2.0"}},
                 {"baz 1.0 0", {}}});
  const PackageIndex index = w.index();
  SolveOptions pinned;
  pinned.pins = specs({"foo=1.0", "ghost=1.0"}); // a pin on a name nothing provides is no error
  CHECK(picked(solved(index, {"foo"}, pinned)).at("foo") == "1.0 0");
  const Solution through = solved(index, {"bar"}, pinned);
  CHECK(picked(through) == std::map<std::string, std::string>{{"bar", "1.0 0"}, {"foo", "1.0 0"}});
  CHECK(picked(solved(index, {"baz"}, pinned)).count("foo") == 0);
  const Solution clash = solved(index, {"foo=2"}, pinned);
  CHECK_FALSE(clash.solved);
  CHECK_THAT(clash.explanation, Catch::Contains("the pin foo 1.0.* holds"));
  CHECK(clash.root_causes == std::vector<std::size_t>{0});
}

TEST_CASE("constrains bind only when the named package is in the solution", "[conda][solve]") {
  World w;
  w.add("repo", {{"a 1.0 0", {}, {"c <2"}},
                 {"b 1.0 0", {"c"}},
                 {"c 1.0 0", {}},
                 {"c 2.0 0", {}},
                 {"d 1.0 0", {}, {"nothing-has-this >1"}}});
  const PackageIndex index = w.index();
  // Alone, a's constraint pulls nothing in.
  CHECK(picked(solved(index, {"a"})) == std::map<std::string, std::string>{{"a", "1.0 0"}});
  // With c present (through b), it holds c below 2.
  CHECK(picked(solved(index, {"a", "b"})).at("c") == "1.0 0");
  CHECK(picked(solved(index, {"b"})).at("c") == "2.0 0");
  const Solution clash = solved(index, {"a", "c >=2"});
  CHECK_FALSE(clash.solved);
  CHECK_THAT(clash.explanation, Catch::Contains("a 1.0 0 constrains c <2"));
  CHECK(picked(solved(index, {"d"})).size() == 1);
}

TEST_CASE("mutex packages are chosen by build string", "[conda][solve]") {
  // conda-forge's _openmp_mutex (the gnu build has the higher build_number) and the BLAS
  // variants of libblas, selected with the metapackage blas (conda.md §5.6).
  World w;
  w.add("conda-forge",
        {{"_openmp_mutex 4.5 2_gnu", {"libgomp >=7.5.0"}, {"openmp_impl 9999"}, 16},
         {"_openmp_mutex 4.5 2_kmp_llvm", {"llvm-openmp >=9.0.1"}, {}, 2},
         {"libgomp 13.2.0 h77fa898_7", {}},
         {"llvm-openmp 18.1.5 ha31de31_0", {}},
         {"libblas 3.9.0 22_linux64_openblas", {"libopenblas >=0.3.27,<1.0a0"}, {"blas * openblas"}, 22},
         {"libblas 3.9.0 22_linux64_mkl", {"mkl >=2024.1.0,<2025.0a0"}, {"blas * mkl"}, 22, {}, 0},
         {"libopenblas 0.3.27 pthreads_h413a1c8_0", {}, {}, 0, {}, 2},
         {"mkl 2024.1.0 ha957f24_693", {"_openmp_mutex * *_llvm"}},
         {"blas 2.122 openblas", {"libblas 3.9.0 22_linux64_openblas"}, {}, 22},
         {"blas 2.122 mkl", {"libblas 3.9.0 22_linux64_mkl"}, {}, 22},
         {"numpy 2.0.0 py312h_0", {"libblas >=3.9.0,<4.0a0"}}});
  const PackageIndex index = w.index();
  CHECK(picked(solved(index, {"_openmp_mutex"})).at("_openmp_mutex") == "4.5 2_gnu");
  const Solution llvm = solved(index, {"_openmp_mutex=*=*_llvm"});
  CHECK(picked(llvm) == std::map<std::string, std::string>{{"_openmp_mutex", "4.5 2_kmp_llvm"},
                                                           {"llvm-openmp", "18.1.5 ha31de31_0"}});
  // The build of the blas metapackage picks the libblas variant through blas's dependency (and
  // libblas's constraint on blas holds the pair together).
  const Solution mkl = solved(index, {"numpy", "blas=*=mkl"});
  REQUIRE(mkl.solved);
  CHECK(picked(mkl).at("libblas") == "3.9.0 22_linux64_mkl");
  CHECK(picked(mkl).at("_openmp_mutex") == "4.5 2_kmp_llvm"); // mkl needs the llvm OpenMP
  CHECK(picked(mkl).count("libopenblas") == 0);
  const Solution openblas = solved(index, {"numpy", "libblas=*=*openblas"});
  CHECK(picked(openblas).at("libopenblas") == "0.3.27 pthreads_h413a1c8_0");
  const Solution both = solved(index, {"libblas=*=*openblas", "blas=*=mkl"});
  CHECK_FALSE(both.solved);
}

TEST_CASE("python_abi pairs extensions with the python they were built for", "[conda][solve]") {
  World w;
  w.add("conda-forge",
        {{"python 3.12.4 h_0_cpython", {}, {"python_abi 3.12.* *_cp312"}},
         {"python 3.12.4 h_0_cp312t", {}, {"python_abi 3.12.* *_cp312t"}, 0, {"free-threading"}},
         {"python 3.11.9 h_0_cpython", {}, {"python_abi 3.11.* *_cp311"}},
         {"python_abi 3.12 4_cp312", {}, {"python 3.12.* *_cpython"}, 4},
         {"python_abi 3.12 4_cp312t", {}, {"python 3.12.* *_cp312t"}, 4},
         {"python_abi 3.11 4_cp311", {}, {"python 3.11.* *_cpython"}, 4},
         {"numpy 2.0.0 py312h_0", {"python >=3.12,<3.13.0a0", "python_abi 3.12.* *_cp312"}},
         {"numpy 2.0.0 py312th_0", {"python >=3.12,<3.13.0a0", "python_abi 3.12.* *_cp312t"}},
         {"numpy 2.0.0 py311h_0", {"python >=3.11,<3.12.0a0", "python_abi 3.11.* *_cp311"}}});
  const PackageIndex index = w.index();
  const Solution plain = solved(index, {"numpy"});
  CHECK(picked(plain) == std::map<std::string, std::string>{{"numpy", "2.0.0 py312h_0"},
                                                            {"python", "3.12.4 h_0_cpython"},
                                                            {"python_abi", "3.12 4_cp312"}});
  const Solution ft = solved(index, {"numpy", "python_abi=*=*_cp312t"});
  CHECK(picked(ft).at("python") == "3.12.4 h_0_cp312t");
  CHECK(picked(ft).at("numpy") == "2.0.0 py312th_0");
  const Solution py311 = solved(index, {"numpy", "python=3.11"});
  CHECK(picked(py311).at("numpy") == "2.0.0 py311h_0");
  CHECK(picked(py311).at("python_abi") == "3.11 4_cp311");
  CHECK_FALSE(solved(index, {"python 3.12.*", "python_abi 3.11.*"}).solved);
}

TEST_CASE("python gets no automatic pip", "[conda][solve]") {
  World w;
  w.add("conda-forge",
        {{"python 3.12.4 h_0", {}}, {"pip 24.0 pyhd8ed1ab_0", {"python >=3.7"}, {}, 0, {}, 0, "noarch"}});
  const PackageIndex index = w.index();
  CHECK(picked(solved(index, {"python"})) == std::map<std::string, std::string>{{"python", "3.12.4 h_0"}});
}

TEST_CASE("a noarch record comes from the channel's noarch subdir", "[conda][solve]") {
  World w;
  w.add("conda-forge", {{"python 3.12.4 h_0", {}},
                        {"six 1.16.0 pyh6c4a22f_0", {"python"}, {}, 0, {}, 0, "noarch"},
                        {"six 1.15.0 py312h_0", {"python >=3.12,<3.13.0a0"}}});
  const PackageIndex index = w.index();
  const Solution s = solved(index, {"six"});
  REQUIRE(s.solved);
  const Record& six = *s.records.back().record->record;
  CHECK(six.name == "six");
  CHECK(six.version == "1.16.0");
  CHECK(six.subdir == "noarch");
  CHECK(six.noarch == NoArch::python);
}

TEST_CASE("a GPU build that depends on __cuda is chosen only when the target has __cuda", "[conda][solve]") {
  World w;
  w.add("conda-forge", {{"pytorch 2.3.1 cuda120_py312h_300", {"__cuda", "cuda-version >=12.0,<13"}, {}, 300},
                        {"pytorch 2.3.1 cpu_py312h_0", {}, {}, 0},
                        {"cuda-version 12.4 h3060b56_3", {}, {"__cuda >=12"}, 3},
                        {"cuda-version 11.8 h70ddcb2_3", {}, {"__cuda >=11"}, 3}});
  const PackageIndex gpu =
      w.index({"__glibc 2.36", "__linux 6.1", "__unix", "__archspec 1 x86_64_v3", "__cuda 12.4"});
  const Solution s = solved(gpu, {"pytorch"});
  CHECK(picked(s).at("pytorch") == "2.3.1 cuda120_py312h_300");
  CHECK(picked(s).at("cuda-version") == "12.4 h3060b56_3");
  CHECK(picked(s).count("__cuda") == 0); // virtual packages are not installed
  const PackageIndex cpu = w.index({"__glibc 2.36", "__unix"});
  CHECK(picked(solved(cpu, {"pytorch"})).at("pytorch") == "2.3.1 cpu_py312h_0");
  const Solution asked = solved(cpu, {"pytorch=*=cuda*"});
  CHECK_FALSE(asked.solved);
  CHECK_THAT(asked.explanation,
             Catch::Contains("nothing provides __cuda: the target has no such virtual package"));
}

TEST_CASE("a constraint on a virtual package binds because the virtual package is required",
          "[conda][solve]") {
  // mamba: "Run constraints on virtual packages are enforced"; conda: test_cuda_constrain_*.
  World w;
  w.add("repo", {{"cuda-version 13.3 hcbadf70_3", {}, {"__cuda >=13"}, 3},
                 {"cuda-constrain 10.0 0", {}, {"__cuda >=10.0"}},
                 {"cuda-constrain 11.0 0", {}, {"__cuda >=11.0"}}});
  const std::vector<std::string> base = {"__unix 0 0", "__linux 6.0", "__glibc 2.39",
                                         "__archspec 1 x86_64_v3"};
  auto with_cuda = [&](const std::string& cuda) {
    std::vector<std::string> v = base;
    if (!cuda.empty()) {
      v.push_back("__cuda " + cuda);
    }
    return w.index(v);
  };
  const PackageIndex cuda12 = with_cuda("12.0");
  const Solution s = solved(cuda12, {"cuda-version=13.3"});
  CHECK_FALSE(s.solved);
  CHECK_THAT(s.explanation, Catch::Contains("cuda-version 13.3 hcbadf70_3 constrains __cuda >=13") &&
                                Catch::Contains("the target provides __cuda 12.0 0"));
  CHECK(s.root_causes == std::vector<std::size_t>{0});
  CHECK(solved(with_cuda("13.0"), {"cuda-version=13.3"}).solved);
  // conda: without __cuda, the newest; with __cuda 10.0 the constraint holds it back; 8.0 fails.
  CHECK(picked(solved(with_cuda(""), {"cuda-constrain"})).at("cuda-constrain") == "11.0 0");
  CHECK(picked(solved(with_cuda("10.0"), {"cuda-constrain"})).at("cuda-constrain") == "10.0 0");
  CHECK_FALSE(solved(with_cuda("8.0"), {"cuda-constrain"}).solved);
}

TEST_CASE("cudatoolkit follows the __cuda the target has", "[conda][solve]") {
  // conda: test_cuda_1, test_cuda_2, test_cuda_fail_1, test_cuda_fail_2.
  World w;
  w.add("channel-1", {{"cudatoolkit 9.0 0", {"__cuda >=9.0"}}, {"cudatoolkit 10.0 0", {"__cuda >=10.0"}}});
  CHECK(picked(solved(w.index({"__cuda 9.2"}), {"cudatoolkit"})).at("cudatoolkit") == "9.0 0");
  CHECK(picked(solved(w.index({"__cuda 10.0"}), {"cudatoolkit"})).at("cudatoolkit") == "10.0 0");
  CHECK_FALSE(solved(w.index({"__cuda 8.0"}), {"cudatoolkit"}).solved);
  const Solution none = solved(w.index(), {"cudatoolkit"});
  CHECK_FALSE(none.solved);
  CHECK_THAT(none.explanation,
             Catch::Contains("cudatoolkit 10.0 0 needs __cuda >=10.0 (nothing provides __cuda"));
}

TEST_CASE("an unsatisfiable request is explained as a derivation over conda specs", "[conda][solve]") {
  // mamba: "Fail to install conflicting dependencies", "Fail to install missing package".
  World w;
  w.add("conda-forge", {{"numpy 1.26.4 py312h_0", {"python >=3.12,<3.13.0a0"}},
                        {"numpy 1.26.4 py311h_0", {"python >=3.11,<3.12.0a0"}},
                        {"python 3.12.4 h_0", {}},
                        {"python 3.11.9 h_0", {}},
                        {"python 2.7.18 h_0", {}},
                        {"foo 1.0 0", {"bar >=1"}}});
  const PackageIndex index = w.index();
  const Solution s = solved(index, {"numpy", "python=2.7"});
  REQUIRE_FALSE(s.solved);
  INFO(s.explanation);
  CHECK_THAT(s.explanation, Catch::Contains("numpy 1.26.4 py312h_0 needs python >=3.12,<3.13.0a0") &&
                                Catch::Contains("numpy 1.26.4 py311h_0 needs python >=3.11,<3.12.0a0") &&
                                Catch::Contains("the request asks for python 2.7.*") &&
                                Catch::Contains("the request asks for numpy") &&
                                Catch::EndsWith("version solving failed."));
  CHECK(s.root_causes == std::vector<std::size_t>{0, 1});
  const Solution missing = solved(index, {"does-not-exist"});
  CHECK(missing.explanation == "Because the request asks for does-not-exist (nothing provides "
                               "does-not-exist), version solving failed.");
  const Solution dep = solved(index, {"foo"});
  CHECK_THAT(dep.explanation, Catch::Contains("foo 1.0 0 needs bar >=1 (nothing provides bar)"));
  const Solution version = solved(index, {"python >=4"});
  CHECK_THAT(
      version.explanation,
      Catch::Contains("the request asks for python >=4 (no record of python matches; there are 3.12.4, "
                      "3.11.9, 2.7.18)"));
}

TEST_CASE("a record whose dependency doesn't parse can't be used, and says why", "[conda][solve]") {
  World w;
  w.add("repo", {{"foo 2.0 0", {"bar >=<1"}}, {"foo 1.0 0", {}}, {"baz 1.0 0", {"*"}}});
  const PackageIndex index = w.index();
  CHECK(picked(solved(index, {"foo"})).at("foo") == "1.0 0");
  const Solution s = solved(index, {"foo >=2"});
  CHECK_FALSE(s.solved);
  CHECK_THAT(s.explanation,
             Catch::Contains("foo 2.0 0 can't be used: its dependency 'bar >=<1' doesn't parse"));
  CHECK_THAT(solved(index, {"baz"}).explanation, Catch::Contains("it names no single package"));
}

TEST_CASE("a request must name one package", "[conda][solve]") {
  World w;
  w.add("repo", {{"foo 1.0 0", {}}});
  const PackageIndex index = w.index();
  auto r = solve(index, specs({"*[md5=0bab699354cbd66959550eb9b9866620]"}));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK_THAT(r.error().message, Catch::Contains("names no single package"));
}

TEST_CASE("the previous lock's records are kept while they still fit", "[conda][solve]") {
  World w;
  w.add("conda-forge",
        {{"foo 1.0 0", {}}, {"foo 2.0 0", {}}, {"bar 1.0 0", {"foo <3"}}, {"bar 1.1 0", {"foo <2"}}});
  const PackageIndex index = w.index();
  SolveOptions relock;
  relock.locked = {{"https://conda.anaconda.org/conda-forge/", "linux-64", "foo-1.0-0.conda"}};
  CHECK(picked(solved(index, {"foo"}, relock)).at("foo") == "1.0 0");
  CHECK(picked(solved(index, {"foo >=2"}, relock)).at("foo") == "2.0 0");
  CHECK(picked(solved(index, {"foo"})).at("foo") == "2.0 0");
}

namespace {

// The pigeonhole family (docs/python-resolver.md, "Bounds on the search") as a conda index: N
// names with N-1 versions each, the request needs all, and pgI h needs every other pgJ != h.
World pigeonhole(int n) {
  World w;
  std::vector<R> records;
  for (int i = 1; i <= n; ++i) {
    for (int h = 1; h < n; ++h) {
      R r{fmt::format("pg{} {} 0", i, h)};
      for (int j = 1; j <= n; ++j) {
        if (j != i) {
          r.depends.push_back(fmt::format("pg{} !={}", j, h));
        }
      }
      records.push_back(r);
    }
  }
  w.add("hostile", records);
  return w;
}

} // namespace

// How long the default bound takes on the family of 12 is measured, not asserted (docs/conda-solver.md:
// about 2 s); here a lower bound keeps the case short under the sanitizers.
TEST_CASE("a pigeonhole index ends at the bound on steps with a clear error", "[conda][solve]") {
  World w = pigeonhole(12);
  const PackageIndex index = w.index();
  std::vector<std::string> request;
  for (int i = 1; i <= 12; ++i) {
    request.push_back(fmt::format("pg{}", i));
  }
  SolveOptions options;
  options.limits.how_to_raise = "raise it with --resolver-steps N";
  options.limits.max_steps = 1'000;
  auto r = solve(index, specs(request), options);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK_THAT(r.error().message, Catch::Contains("gave up after 1000 steps") &&
                                    Catch::Contains("raise it with --resolver-steps N"));
  CHECK(SolveOptions::default_limits().max_steps == 5'000);
  // A small family is answered: no solution, with a derivation.
  World small = pigeonhole(4);
  const PackageIndex four = small.index();
  const Solution s = solved(four, {"pg1", "pg2", "pg3", "pg4"});
  CHECK_FALSE(s.solved);
  CHECK_THAT(s.explanation, Catch::EndsWith("version solving failed."));
}

// ---- random small worlds against an exhaustive search -------------------------------------------

namespace {

struct Universe {
  World world;
  std::vector<std::string> names;
  std::vector<std::vector<R>> records; // by name
  std::vector<std::string> request;
};

std::string random_spec(std::mt19937& rng, const std::string& name) {
  switch (rng() % 6) {
  case 0:
    return name;
  case 1:
    return fmt::format("{} >={}", name, 1 + rng() % 3);
  case 2:
    return fmt::format("{} <{}", name, 2 + rng() % 3);
  case 3:
    return fmt::format("{} {}", name, 1 + rng() % 4);
  case 4:
    return fmt::format("{} !={}", name, 1 + rng() % 4);
  default:
    return fmt::format("{} 1|3", name);
  }
}

Universe random_universe(std::mt19937& rng) {
  Universe u;
  const std::size_t n = 2 + rng() % 5;
  for (std::size_t i = 0; i < n; ++i) {
    u.names.push_back(fmt::format("p{}", i));
  }
  u.records.resize(n);
  std::vector<R> all;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t count = 1 + rng() % 4;
    for (std::size_t k = 0; k < count; ++k) {
      R r{fmt::format("{} {} b{}", u.names[i], 1 + rng() % 4, k)};
      r.build_number = rng() % 2;
      for (std::size_t d = rng() % 3; d > 0; --d) {
        r.depends.push_back(random_spec(rng, u.names[rng() % n]));
      }
      if (rng() % 4 == 0) {
        r.constrains.push_back(random_spec(rng, u.names[rng() % n]));
      }
      u.records[i].push_back(r);
      all.push_back(r);
    }
  }
  u.world.add("c", all);
  for (std::size_t q = 1 + rng() % 2; q > 0; --q) {
    u.request.push_back(random_spec(rng, u.names[rng() % n]));
  }
  return u;
}

// A spec compiled against the universe: the name it is about and which of its records match.
struct Compiled {
  std::size_t name = 0;
  std::vector<bool> matches;
};

Compiled compile(const Universe& u, const std::string& text) {
  const MatchSpec spec = specs({text})[0];
  Compiled c;
  c.name = static_cast<std::size_t>(std::find(u.names.begin(), u.names.end(), spec.name().str()) -
                                    u.names.begin());
  for (const R& r : u.records[c.name]) {
    const std::size_t a = r.nvb.find(' ');
    const Version v = *Version::parse(r.nvb.substr(a + 1, r.nvb.rfind(' ') - a - 1));
    RecordFields f;
    f.name = spec.name().str();
    f.version = &v;
    c.matches.push_back(spec.matches(f));
  }
  return c;
}

// The universe's request and each record's depends and constrains, compiled.
struct Checks {
  std::vector<Compiled> request;
  std::vector<std::vector<std::vector<Compiled>>> depends;    // by name, record
  std::vector<std::vector<std::vector<Compiled>>> constrains; // by name, record
};

Checks checks_of(const Universe& u) {
  Checks c;
  for (const std::string& q : u.request) {
    c.request.push_back(compile(u, q));
  }
  c.depends.resize(u.names.size());
  c.constrains.resize(u.names.size());
  for (std::size_t i = 0; i < u.names.size(); ++i) {
    for (const R& r : u.records[i]) {
      c.depends[i].emplace_back();
      c.constrains[i].emplace_back();
      for (const std::string& d : r.depends) {
        c.depends[i].back().push_back(compile(u, d));
      }
      for (const std::string& d : r.constrains) {
        c.constrains[i].back().push_back(compile(u, d));
      }
    }
  }
  return c;
}

// Whether `chosen` (a record index per name, or -1 for absent) satisfies the request and every
// depends and constrains of what it selects.
bool valid(const Checks& c, const std::vector<int>& chosen) {
  const auto fits = [&](const Compiled& spec) -> int { // 1 satisfied, 0 absent, -1 violated
    const int k = chosen[spec.name];
    return k < 0 ? 0 : (spec.matches[static_cast<std::size_t>(k)] ? 1 : -1);
  };
  for (const Compiled& q : c.request) {
    if (fits(q) != 1) {
      return false;
    }
  }
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    if (chosen[i] < 0) {
      continue;
    }
    const auto k = static_cast<std::size_t>(chosen[i]);
    for (const Compiled& d : c.depends[i][k]) {
      if (fits(d) != 1) {
        return false;
      }
    }
    for (const Compiled& d : c.constrains[i][k]) {
      if (fits(d) == -1) {
        return false;
      }
    }
  }
  return true;
}

bool exists(const Universe& u, const Checks& c, std::vector<int>& chosen, std::size_t i) {
  if (i == u.names.size()) {
    return valid(c, chosen);
  }
  for (int k = -1; k < static_cast<int>(u.records[i].size()); ++k) {
    chosen[i] = k;
    if (exists(u, c, chosen, i + 1)) {
      return true;
    }
  }
  return false;
}

} // namespace

TEST_CASE("on random small indexes the solver finds a valid solution exactly when one exists",
          "[conda][solve]") {
  std::mt19937 rng(20260807);
  std::size_t solvable = 0;
  for (int round = 0; round < 400; ++round) {
    Universe u = random_universe(rng);
    const PackageIndex index = u.world.index();
    const Checks checks = checks_of(u);
    std::vector<int> chosen(u.names.size(), -1);
    const bool brute = exists(u, checks, chosen, 0);
    const Solution s = solved(index, u.request);
    INFO("round " << round << ", request " << fmt::format("{}", fmt::join(u.request, "; ")) << "\n"
                  << s.explanation);
    REQUIRE(s.solved == brute);
    if (!s.solved) {
      continue;
    }
    ++solvable;
    std::vector<int> ours(u.names.size(), -1);
    for (const SolvedRecord& r : s.records) {
      const auto it = std::find(u.names.begin(), u.names.end(), std::string(r.record->record->name));
      const std::size_t i = static_cast<std::size_t>(it - u.names.begin());
      REQUIRE(ours[i] == -1); // one record per name
      for (std::size_t k = 0; k < u.records[i].size(); ++k) {
        const std::string stem = fmt::format("{} {} {}", r.record->record->name, r.record->record->version,
                                             r.record->record->build);
        if (u.records[i][k].nvb == stem) {
          ours[i] = static_cast<int>(k);
        }
      }
    }
    CHECK(valid(checks, ours));
  }
  CHECK(solvable > 100); // the generator makes both kinds
}
