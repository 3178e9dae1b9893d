#pragma once
// Python package versions and version specifiers (PEP 440, as the "Version specifiers" page of the
// Python packaging specifications states it): parsing with normalisation ("1.0RC1" -> "1.0rc1"),
// ordering, and `SpecifierSet::contains` with the pre-release policy. The behaviour follows the
// reference implementation, `packaging.version` and `packaging.specifiers`; the unit tests compare
// against it where it is installed.
#include "support/base/result.hpp"

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

/// One parsed, normalised PEP 440 version: `[N!]N(.N)*[{a|b|rc}N][.postN][.devN][+local]`.
struct PyVersion {
  /// The pre-release phase, in release order.
  enum class Phase { alpha, beta, rc };
  /// A pre-release segment ("a1", "rc2").
  struct Pre {
    Phase phase = Phase::alpha;
    std::uint64_t number = 0;
    friend bool operator==(const Pre&, const Pre&) = default;
  };

  std::uint64_t epoch = 0;
  std::vector<std::uint64_t> release; ///< at least one component
  std::optional<Pre> pre;
  std::optional<std::uint64_t> post;
  std::optional<std::uint64_t> dev;
  /// Local label segments, lowercased; numeric ones without leading zeros ("ubuntu", "1").
  std::vector<std::string> local;

  /// Parses `text` (surrounding whitespace, a leading "v", any letter case and the alternative
  /// spellings of PEP 440's "Normalization" section are accepted). An invalid version is
  /// invalid_input naming it; so is one longer than 256 characters or with a number over 2^64.
  static Result<PyVersion> parse(std::string_view text);

  /// The normalised form ("1!2.0rc1.post3.dev4+abc.5").
  [[nodiscard]] std::string str() const;
  /// The normalised form without the local label.
  [[nodiscard]] std::string public_str() const;
  /// This version without its local label.
  [[nodiscard]] PyVersion public_version() const;
  /// Epoch and release only ("1!2.0rc1" -> "1!2.0").
  [[nodiscard]] PyVersion base_version() const;

  /// A pre-release or a development release.
  [[nodiscard]] bool is_prerelease() const { return pre.has_value() || dev.has_value(); }
  [[nodiscard]] bool is_postrelease() const { return post.has_value(); }
  [[nodiscard]] bool is_devrelease() const { return dev.has_value(); }

  /// PEP 440's order: epoch, release (trailing zeros ignored: 1.0 == 1.0.0), then
  /// dev < a < b < rc < final < post, then the local label (none < any; numeric segments above
  /// alphanumeric ones).
  friend std::strong_ordering operator<=>(const PyVersion& a, const PyVersion& b);
  friend bool operator==(const PyVersion& a, const PyVersion& b) { return std::is_eq(a <=> b); }
};

/// Whether a specifier accepts pre-releases and development releases.
enum class Prereleases {
  if_mentioned, ///< PEP 440's default: only when a specifier (==, >=, <=, ~=, ===) names one
  allow,        ///< always (how environment markers compare versions)
  deny,         ///< never
};

/// One version specifier clause ("~=2.2", "==1.2.*", "!=1.1", "===foo").
struct VersionSpecifier {
  /// The comparison operator.
  enum class Op { compatible, equal, not_equal, less_equal, greater_equal, less, greater, arbitrary };

  Op op = Op::equal;
  std::string text;      ///< the version part as written, trimmed ("1.2.*", "foobar" for ===)
  PyVersion version;     ///< the parsed version (the prefix for a wildcard); unset for ===
  bool wildcard = false; ///< "==1.2.*" / "!=1.2.*"

  /// Parses one clause. Each operator's version must have the form PEP 440 allows for it (".*"
  /// only after == and != and a plain release; no local label on ~=, <, <=, >, >=; at least two
  /// release components on ~=). Errors are invalid_input naming the clause.
  static Result<VersionSpecifier> parse(std::string_view text);

  /// The operator followed by `text` ("~=2.2").
  [[nodiscard]] std::string str() const;
  /// True when the clause names a pre-release with ==, >=, <=, ~= or ===, which lets
  /// Prereleases::if_mentioned accept pre-releases.
  [[nodiscard]] bool mentions_prerelease() const;
  /// Whether `candidate` satisfies this clause under `policy`.
  [[nodiscard]] bool contains(const PyVersion& candidate,
                              Prereleases policy = Prereleases::if_mentioned) const;
};

/// "~=2.2, !=2.3": clauses that must all hold. An empty set accepts every final release.
class SpecifierSet {
public:
  SpecifierSet() = default;

  /// Parses a comma-separated list of clauses (whitespace around them ignored, empty ones skipped).
  static Result<SpecifierSet> parse(std::string_view text);

  [[nodiscard]] const std::vector<VersionSpecifier>& clauses() const { return m_clauses; }
  [[nodiscard]] bool empty() const { return m_clauses.empty(); }
  /// The clauses sorted by text and joined with "," (packaging's canonical form: ">=1.0,<2").
  [[nodiscard]] std::string str() const;
  /// True when any clause mentions a pre-release (see VersionSpecifier::mentions_prerelease).
  [[nodiscard]] bool mentions_prerelease() const;
  /// Whether `candidate` satisfies every clause. With Prereleases::if_mentioned a pre-release is
  /// refused unless some clause mentions a pre-release.
  [[nodiscard]] bool contains(const PyVersion& candidate,
                              Prereleases policy = Prereleases::if_mentioned) const;
  /// The candidates `contains` accepts, in the given order. As in packaging (and so pip), an empty
  /// set under Prereleases::if_mentioned falls back to the pre-releases when there is no final
  /// release among the candidates; a non-empty set never does.
  [[nodiscard]] std::vector<PyVersion> filter(const std::vector<PyVersion>& candidates,
                                              Prereleases policy = Prereleases::if_mentioned) const;

private:
  std::vector<VersionSpecifier> m_clauses;
};

} // namespace lockstep
