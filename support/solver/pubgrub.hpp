#pragma once
// PubGrub version solving (Natalie Weizenbaum's algorithm, as in Dart's pub, uv and poetry): unit
// propagation over incompatibilities, conflict-driven clause learning with backjumping, and an
// explanation of an unsatisfiable request as a derivation a person can follow ("Because a 2.0
// needs b<1 and no version of b fits <1, a 2.0 can't be used. And because ...").
//
// The solver knows nothing of any packaging system. A Provider numbers the packages, lists each
// one's candidate versions (a finite, ordered universe), says which version to try and what a
// version depends on. Version sets are subsets of that universe (bit sets), so every set operation
// PubGrub needs is exact, whatever the version scheme's specifier language. One extra element in
// each set, "absent", stands for "the package is not selected", which makes a negative term an
// ordinary set too. See docs/python-resolver.md.
#include "support/base/result.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::pubgrub {

/// A package as the provider numbers it (dense, from 0).
using PackageId = std::uint32_t;

/// A subset of one package's candidate versions (indices 0..n-1, ascending), plus "absent".
class VersionSet {
public:
  VersionSet() = default;
  /// No versions, not absent.
  static VersionSet none(std::size_t n);
  /// Every version, not absent ("the package is selected").
  static VersionSet any(std::size_t n);
  /// Every version and absent: no constraint at all.
  static VersionSet everything(std::size_t n);
  /// Exactly version `v`.
  static VersionSet only(std::size_t n, std::size_t v);

  [[nodiscard]] std::size_t universe() const { return m_n; }
  [[nodiscard]] bool has(std::size_t v) const { return bit(v + 1); }
  [[nodiscard]] bool has_absent() const { return bit(0); }
  void add(std::size_t v) { set_bit(v + 1); }
  void add_absent() { set_bit(0); }
  /// The same versions, absent removed.
  [[nodiscard]] VersionSet versions() const;
  [[nodiscard]] VersionSet complement() const;
  [[nodiscard]] VersionSet operator&(const VersionSet& o) const;
  [[nodiscard]] VersionSet operator|(const VersionSet& o) const;
  [[nodiscard]] bool subset_of(const VersionSet& o) const;
  [[nodiscard]] bool disjoint(const VersionSet& o) const;
  [[nodiscard]] bool empty() const;
  /// True when every version and absent are in the set.
  [[nodiscard]] bool full() const;
  /// The number of versions (absent not counted).
  [[nodiscard]] std::size_t count() const;
  /// The highest version index in the set, if any.
  [[nodiscard]] std::optional<std::size_t> highest() const;
  friend bool operator==(const VersionSet&, const VersionSet&) = default;

private:
  [[nodiscard]] bool bit(std::size_t i) const { return ((m_bits[i / 64] >> (i % 64)) & 1U) != 0; }
  void set_bit(std::size_t i) { m_bits[i / 64] |= std::uint64_t{1} << (i % 64); }
  void trim();

  std::size_t m_n = 0;               // versions in the universe
  std::vector<std::uint64_t> m_bits; // bit 0: absent; bit v+1: version v
};

/// One dependency of a package version: `package` must be selected at one of `versions`. With
/// absent in `versions` it is a constraint instead: `package` need not be selected, but if it is,
/// it is one of `versions` (conda's `constrains`).
struct Dependency {
  PackageId package = 0;
  VersionSet versions;
  /// The whole sentence for explanations: "transformers 4.44.0 needs tokenizers<0.20,>=0.19".
  std::string text;
};

/// The order in which undecided packages are decided: lowest first. The name (the tie-break) must
/// stay valid until the provider is next asked anything else.
using Priority = std::pair<std::uint64_t, std::string_view>;

/// What a package version needs, or why it can't be used at all.
struct Dependencies {
  std::vector<Dependency> needs;
  /// Set when the version can't be used ("demo 2.0 requires Python >=3.12"): a sentence.
  std::optional<std::string> unusable;
};

/// The package world the solver explores. Every method may be called many times; answers must not
/// change within one solve.
class Provider {
public:
  virtual ~Provider() = default;
  /// The number of candidate versions of `p` (index 0 the oldest). Asked before any set of `p` is
  /// used; a package a dependency names must be known by then.
  virtual Result<std::size_t> version_count(PackageId p) = 0;
  /// The version of `p` to try among `allowed` (not empty), or nullopt when none may be chosen.
  virtual Result<std::optional<std::size_t>> choose(PackageId p, const VersionSet& allowed) = 0;
  /// What version `v` of `p` needs.
  virtual Result<Dependencies> dependencies(PackageId p, std::size_t v) = 0;
  /// Which of the undecided packages to decide next: the lowest key wins (ties: the lowest id).
  virtual Priority priority(PackageId p, const VersionSet& allowed) = 0;
  /// "tokenizers" or "tokenizers>=0.19,<0.20" or "tokenizers 0.19.1": `p` restricted to `versions`
  /// (absent ignored), for explanations.
  virtual std::string describe(PackageId p, const VersionSet& versions) = 0;
  /// The sentence for a set of versions of `p` none of which can be chosen ("no version of b fits <1").
  virtual std::string no_versions(PackageId p, const VersionSet& versions) = 0;
};

/// A solution: the chosen version of each selected package, in the order they were decided.
struct Selection {
  PackageId package = 0;
  std::size_t version = 0;
};

/// Statistics of one solve, for logs and benchmarks.
struct SolveStats {
  std::size_t decisions = 0;
  std::size_t conflicts = 0;
  std::size_t incompatibilities = 0;
};

/// The outcome: a selection, or the explanation of why none exists (a derivation ending "version
/// solving failed", one sentence per line) with the root dependencies it rests on.
struct Outcome {
  std::vector<Selection> selection;
  bool solved = false;
  std::string explanation;
  /// The texts of the root's dependencies the explanation uses (Dependency::text), in order.
  std::vector<std::string> root_causes;
  SolveStats stats;
};

/// Bounds on one solve: a hostile or tangled package world (a pigeonhole family) makes the search
/// exponential, so it stops with an error instead, as pip bounds its resolution rounds.
struct Limits {
  /// Decisions and conflicts together.
  std::size_t max_steps = 25'000;
  std::chrono::milliseconds max_time = std::chrono::minutes(5);
  /// The explanation of an unsatisfiable request, in bytes; a longer derivation keeps its start
  /// and its conclusion and says how many sentences it leaves out.
  std::size_t max_explanation = 64 << 10;
  /// Appended to the error when a bound is reached: how to raise it ("raise it with ...").
  std::string how_to_raise;
};

/// Solves from `root` at version `root_version` (a package whose dependencies are the request).
/// Errors are the provider's (network, malformed metadata); a bound of `limits` reached is
/// invalid_input naming it; SIGINT/SIGTERM is `interrupted`, within milliseconds. An
/// unsatisfiable request is an Outcome with solved == false.
Result<Outcome> solve(Provider& provider, PackageId root, std::size_t root_version,
                      const Limits& limits = {});

} // namespace lockstep::pubgrub
