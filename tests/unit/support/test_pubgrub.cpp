// PubGrub over a toy package world: versions are integers (100 = "1.0.0"), dependencies ranges
// [lo, hi). The cases are pub's doc/solver.md examples.
#include "support/solver/pubgrub.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <deque>
#include <map>
#include <tuple>

using namespace lockstep;
using namespace lockstep::pubgrub;

namespace {

struct ToyDep {
  std::string name;
  int lo;
  int hi;
  bool constraint = false; // "if name is selected, it is in [lo, hi)" (conda's constrains)
};

std::string version_text(int v) {
  return fmt::format("{}.{}.{}", v / 100, v / 10 % 10, v % 10);
}

class Toy : public Provider {
public:
  /// name -> version -> dependencies; "root" is the request, at version 0.
  Toy(std::map<std::string, std::map<int, std::vector<ToyDep>>> world) : m_world(std::move(world)) {
    id("root");
  }

  PackageId id(const std::string& name) {
    auto it = std::find(m_names.begin(), m_names.end(), name);
    if (it != m_names.end()) {
      return static_cast<PackageId>(it - m_names.begin());
    }
    m_names.push_back(name);
    for (const auto& [v, deps] : m_world[name]) {
      m_versions[name].push_back(v);
    }
    return static_cast<PackageId>(m_names.size() - 1);
  }

  Result<std::size_t> version_count(PackageId p) override { return m_versions[m_names[p]].size(); }

  Result<std::optional<std::size_t>> choose(PackageId, const VersionSet& allowed) override {
    return allowed.highest();
  }

  Result<Dependencies> dependencies(PackageId p, std::size_t v) override {
    const std::string name = m_names[p]; // id() below may grow m_names
    const int version = m_versions[name][v];
    Dependencies out;
    for (const ToyDep& d : m_world[name][version]) {
      const PackageId q = id(d.name);
      const std::vector<int>& qv = m_versions[d.name];
      VersionSet s = VersionSet::none(qv.size());
      for (std::size_t i = 0; i < qv.size(); ++i) {
        if (qv[i] >= d.lo && qv[i] < d.hi) {
          s.add(i);
        }
      }
      if (d.constraint) {
        s.add_absent();
      }
      out.needs.push_back(Dependency{q, s,
                                     fmt::format("{} needs {} >={},<{}", describe(p, VersionSet::only(1, 0)),
                                                 d.name, version_text(d.lo), version_text(d.hi))});
      if (name != "root") {
        out.needs.back().text = fmt::format("{} {} needs {} >={},<{}", name, version_text(version), d.name,
                                            version_text(d.lo), version_text(d.hi));
      }
    }
    return out;
  }

  Priority priority(PackageId p, const VersionSet& allowed) override {
    return {allowed.count(), std::string_view(m_names[p])};
  }

  std::string describe(PackageId p, const VersionSet& versions) override {
    const std::string& name = m_names[p];
    if (name == "root") {
      return "the request";
    }
    std::vector<std::string> vs;
    for (std::size_t i = 0; i < m_versions[name].size(); ++i) {
      if (versions.has(i)) {
        vs.push_back(version_text(m_versions[name][i]));
      }
    }
    if (vs.size() == m_versions[name].size()) {
      return name;
    }
    return fmt::format("{} {}", name, fmt::join(vs, "|"));
  }

  std::string no_versions(PackageId p, const VersionSet& versions) override {
    return fmt::format("no version of {} is available", describe(p, versions));
  }

  std::map<std::string, std::string> solution(const Outcome& o) {
    std::map<std::string, std::string> out;
    for (const Selection& s : o.selection) {
      out[m_names[s.package]] = version_text(m_versions[m_names[s.package]][s.version]);
    }
    return out;
  }

private:
  std::map<std::string, std::map<int, std::vector<ToyDep>>> m_world;
  std::vector<std::string> m_names;
  std::map<std::string, std::vector<int>> m_versions;
};

// The pigeonhole family of issue 34: N packages pg1..pgN, each with N-1 versions (holes); the
// request needs all of them, and pgI at hole h needs every other pgJ at a hole other than h. There
// is no solution, and a solver learns its way there only in time exponential in N.
class Pigeonhole : public Provider {
public:
  explicit Pigeonhole(std::size_t n) : m_n(n) {}
  Result<std::size_t> version_count(PackageId p) override { return p == 0 ? 1 : m_n - 1; }
  Result<std::optional<std::size_t>> choose(PackageId, const VersionSet& allowed) override {
    return allowed.highest();
  }
  Result<Dependencies> dependencies(PackageId p, std::size_t v) override {
    Dependencies out;
    for (PackageId q = 1; q <= m_n; ++q) {
      if (p == 0) {
        out.needs.push_back(
            Dependency{q, VersionSet::any(m_n - 1), fmt::format("the request needs pg{}", q)});
      } else if (q != p) {
        VersionSet other = VersionSet::any(m_n - 1) & VersionSet::only(m_n - 1, v).complement();
        out.needs.push_back(Dependency{q, other, fmt::format("pg{}=={} needs pg{}!={}", p, v, q, v)});
      }
    }
    return out;
  }
  Priority priority(PackageId p, const VersionSet& allowed) override { return {allowed.count(), name(p)}; }
  std::string describe(PackageId p, const VersionSet& versions) override {
    return p == 0 ? "the request" : fmt::format("pg{} ({} holes)", p, versions.count());
  }
  std::string no_versions(PackageId p, const VersionSet& versions) override {
    return fmt::format("no hole is left for {}", describe(p, versions));
  }

private:
  std::string_view name(PackageId p) {
    while (m_names.size() <= p) {
      m_names.push_back(fmt::format("pg{:03}", m_names.size()));
    }
    return m_names[p];
  }
  std::size_t m_n;
  std::deque<std::string> m_names;
};

} // namespace

TEST_CASE("version sets are exact subsets with an absent element", "[pubgrub]") {
  VersionSet a = VersionSet::none(70);
  a.add(0);
  a.add(69);
  CHECK(a.count() == 2);
  CHECK(a.highest() == 69);
  CHECK_FALSE(a.has_absent());
  VersionSet c = a.complement();
  CHECK(c.has_absent());
  CHECK(c.count() == 68);
  CHECK((a | c).full());
  CHECK((a & c).empty());
  CHECK(a.subset_of(VersionSet::any(70)));
  CHECK_FALSE(VersionSet::everything(70).subset_of(VersionSet::any(70)));
  CHECK(VersionSet::none(5).highest() == std::nullopt);
}

TEST_CASE("pubgrub takes the newest versions that fit, without conflicts", "[pubgrub]") {
  Toy toy({{"root", {{0, {{"foo", 100, 200}, {"bar", 100, 200}}}}},
           {"foo", {{100, {}}, {110, {{"bar", 120, 200}}}}},
           {"bar", {{100, {}}, {110, {}}, {120, {}}}}});
  Outcome o = unwrap(solve(toy, 0, 0));
  REQUIRE(o.solved);
  CHECK(toy.solution(o) == std::map<std::string, std::string>{{"foo", "1.1.0"}, {"bar", "1.2.0"}});
}

TEST_CASE("pubgrub backjumps past a partial satisfier", "[pubgrub]") {
  Toy toy({{"root", {{0, {{"foo", 100, 200}, {"target", 200, 300}}}}},
           {"foo", {{100, {}}, {110, {{"left", 100, 200}, {"right", 100, 200}}}}},
           {"left", {{100, {{"shared", 100, 999}}}}},
           {"right", {{100, {{"shared", 0, 200}}}}},
           {"shared", {{100, {{"target", 100, 200}}}, {200, {}}}},
           {"target", {{100, {}}, {200, {}}}}});
  Outcome o = unwrap(solve(toy, 0, 0));
  REQUIRE(o.solved);
  CHECK(toy.solution(o) == std::map<std::string, std::string>{{"foo", "1.0.0"}, {"target", "2.0.0"}});
  CHECK(o.stats.conflicts >= 1);
}

TEST_CASE("pubgrub explains an unsatisfiable request as a derivation", "[pubgrub]") {
  Toy toy({{"root", {{0, {{"foo", 100, 101}, {"bar", 100, 101}}}}},
           {"foo", {{100, {{"shared", 200, 300}}}}},
           {"bar", {{100, {{"shared", 290, 400}}}}},
           {"shared", {{250, {}}, {350, {}}}}});
  Outcome o = unwrap(solve(toy, 0, 0));
  REQUIRE_FALSE(o.solved);
  CHECK(o.explanation ==
        "Because bar 1.0.0 needs shared >=2.9.0,<4.0.0 and foo 1.0.0 needs shared >=2.0.0,<3.0.0, foo is "
        "incompatible with bar.\n"
        "And because the request needs foo >=1.0.0,<1.0.1 and the request needs bar >=1.0.0,<1.0.1, version "
        "solving failed.");
  CHECK(o.root_causes.size() == 2);
}

TEST_CASE("pubgrub names both requests behind a conflict between two dependencies", "[pubgrub]") {
  Toy toy({{"root", {{0, {{"foo", 100, 200}, {"x", 100, 200}}}}},
           {"foo", {{100, {{"y", 200, 300}}}}},
           {"x", {{100, {{"y", 100, 200}}}}},
           {"y", {{100, {}}, {200, {}}}}});
  Outcome o = unwrap(solve(toy, 0, 0));
  REQUIRE_FALSE(o.solved);
  CHECK(o.explanation ==
        "Because foo 1.0.0 needs y >=2.0.0,<3.0.0 and x 1.0.0 needs y >=1.0.0,<2.0.0, foo is "
        "incompatible with x.\n"
        "And because the request needs foo >=1.0.0,<2.0.0 and the request needs x >=1.0.0,<2.0.0, "
        "version solving failed.");
}

TEST_CASE("pubgrub bounds its explanation of a long derivation", "[pubgrub]") {
  Pigeonhole world(8);
  Limits limits;
  limits.max_explanation = 2048;
  Outcome o = unwrap(solve(world, 0, 0, limits));
  REQUIRE_FALSE(o.solved);
  CHECK(o.explanation.size() < 4 * limits.max_explanation);
  CHECK(o.explanation.find("left out") != std::string::npos);
  CHECK(o.explanation.ends_with("version solving failed."));
  // The default bound holds the whole of a short one.
  Pigeonhole small(4);
  Outcome whole = unwrap(solve(small, 0, 0));
  CHECK(whole.explanation.find("left out") == std::string::npos);
  CHECK(whole.explanation.ends_with("version solving failed."));
}

TEST_CASE("pubgrub gives up at its bound on steps or time, naming it", "[pubgrub]") {
  Pigeonhole world(10); // about 4,000 steps to the answer
  Limits limits;
  limits.max_steps = 500;
  limits.how_to_raise = "raise it with --resolver-steps N";
  auto r = solve(world, 0, 0, limits);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK_THAT(r.error().message, Catch::Contains("gave up after 500 steps") &&
                                    Catch::Contains("bound on steps") &&
                                    Catch::Contains("raise it with --resolver-steps N"));
  limits.max_steps = 1'000'000;
  limits.max_time = std::chrono::milliseconds(0);
  r = solve(world, 0, 0, limits);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK_THAT(r.error().message, Catch::Contains("bound on time"));
}

TEST_CASE("pubgrub treats a dependency that allows absent as a constraint", "[pubgrub]") {
  // a constrains b to <2 without needing it; c needs b.
  Toy alone({{"root", {{0, {{"a", 100, 200}}}}},
             {"a", {{100, {{"b", 0, 200, true}}}}},
             {"b", {{100, {}}, {200, {}}}}});
  auto r = solve(alone, 0, 0);
  REQUIRE(r);
  REQUIRE(r->solved);
  CHECK(alone.solution(*r) == std::map<std::string, std::string>{{"a", "1.0.0"}});
  Toy with_c({{"root", {{0, {{"a", 100, 200}, {"c", 100, 200}}}}},
              {"a", {{100, {{"b", 0, 200, true}}}}},
              {"b", {{100, {}}, {200, {}}}},
              {"c", {{100, {{"b", 100, 300}}}}}});
  r = solve(with_c, 0, 0);
  REQUIRE(r);
  REQUIRE(r->solved);
  CHECK(with_c.solution(*r) ==
        std::map<std::string, std::string>{{"a", "1.0.0"}, {"b", "1.0.0"}, {"c", "1.0.0"}});
  Toy clash({{"root", {{0, {{"a", 100, 200}, {"b", 200, 300}}}}},
             {"a", {{100, {{"b", 0, 200, true}}}}},
             {"b", {{100, {}}, {200, {}}}}});
  r = solve(clash, 0, 0);
  REQUIRE(r);
  CHECK_FALSE(r->solved);
}
