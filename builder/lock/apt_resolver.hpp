#pragma once
// Choosing the apt packages an image gets: the closure of the requested packages under Depends and
// Pre-Depends, chosen from the repositories' Packages indexes the way apt does for a fresh install
// (`apt-get install --no-install-recommends` with an empty dpkg status), deterministically, with
// Conflicts and Breaks checked and errors that show the chain of packages behind a failure.
// The rules (candidates, alternatives, Multi-Arch, what is not supported) are in docs/apt-resolver.md.
#include "support/base/result.hpp"
#include "support/debian/apt_packages.hpp"
#include "support/debian/debian_version.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lockstep::builder {

/// One package the spec asks for.
struct AptRequest {
  std::string name;                 ///< a package name, or a virtual name with a single provider
  std::optional<std::string> arch;  ///< "name:arch": the native or a foreign architecture
  std::optional<DebianVersion> pin; ///< "name=version": exactly this version, from any repository
  std::string origin;               ///< where it was asked for, e.g. "packages.apt[2]"
  /// "name=2.18.*+cuda12.1": the highest version matching the glob ('*' is any run of characters),
  /// taken from the highest-priority repository that has a match; resolve() turns it into a pin.
  /// Set instead of `pin`, never with it.
  std::optional<std::string> version_glob = std::nullopt;
};

/// The request for NAME[:ARCH][=VERSION] as the spec writes it (`packages.apt`): an empty `arch` or
/// `version` means none; a version with '*' is a glob (`version_glob`), any other one a pin. An
/// invalid version or glob is invalid_input naming `origin`.
Result<AptRequest> make_apt_request(std::string name, std::string_view arch, std::string_view version,
                                    std::string origin);

/// Whether `version` (as dpkg prints it, e.g. "2.18.3-1+cuda12.1") matches `glob`: '*' matches any
/// run of characters, even an empty one; every other character matches itself (case matters).
bool version_glob_matches(std::string_view glob, std::string_view version);

/// What to resolve.
struct ResolveOptions {
  std::string native_arch = "amd64";
  /// Architectures whose packages may be installed when a request names them ("libfoo:arm64").
  std::vector<std::string> foreign_arches;
  bool with_essential = false;  ///< add every Essential: yes package (origin "base (Essential)")
  bool with_required = false;   ///< add every Priority: required package (origin "base (required)")
  bool with_recommends = false; ///< follow Recommends too (by default they are ignored)
  std::vector<AptRequest> requests;
  /// Versions to keep where they are still candidates and fit (the previous lock's, so re-locking
  /// moves nothing unasked): among the options for a dependency or request, a package whose name
  /// maps to its version here comes first.
  std::map<std::string, DebianVersion> preferred;
};

/// One package of the result and why it is there.
struct ResolvedPackage {
  const AptPackage* package = nullptr; ///< points into the AptUniverse resolved against
  /// "requested by ORIGIN" for each request, then "DEPENDER (Depends: GROUP)" for each selected
  /// package whose dependency it satisfies, sorted. A package that replaces the base's version
  /// starts with "upgrades base's NAME OLD -> NEW, needed by ..." (or "downgrades", for a pin).
  std::vector<std::string> reasons;
  /// The base image's own package, unchanged (nothing to fetch or install).
  bool in_base = false;
  /// The base's installed version this package replaces, or null.
  const AptPackage* replaces = nullptr;
};

/// The `repo` of a package the base image has installed (its dpkg status), in an AptUniverse.
inline constexpr int k_installed_repo = -1;

/// apt's default pin priority of a source (apt_preferences(5)): every repository without a
/// `priority:` has it, so among them the highest version wins, as apt chooses among its sources.
inline constexpr int k_default_priority = 500;

/// Every package of every repository, indexed by name and by provided name.
class AptUniverse {
public:
  /// One Provides entry: package `package` provides `packages()[package].provides[provides]`.
  struct Provider {
    std::uint32_t package = 0;
    std::uint32_t provides = 0;
  };

  /// Takes the packages of all repositories (each with its `repo` set), what a base image has
  /// installed (its dpkg status; entries that are not installed are ignored) and each repository's
  /// apt pin priority (`priorities[repo]`; k_default_priority for a repository it doesn't list).
  /// They are sorted by name, priority (the installed ones first, with repo k_installed_repo;
  /// then the highest priority), version (highest first), repository, architecture and digest, so
  /// the input order never matters and a name's first version is apt's candidate; identical
  /// duplicates (same repository, name, version, architecture and SHA256) are dropped.
  explicit AptUniverse(std::vector<AptPackage> packages, std::vector<InstalledPackage> installed = {},
                       std::vector<int> priorities = {});
  AptUniverse(const AptUniverse&) = delete;
  AptUniverse& operator=(const AptUniverse&) = delete;
  AptUniverse(AptUniverse&&) = default;
  AptUniverse& operator=(AptUniverse&&) = default;
  ~AptUniverse() = default;

  /// All packages, in the order described above.
  [[nodiscard]] const std::vector<AptPackage>& packages() const { return m_packages; }
  /// Indexes into packages() of every version of `name` (all repositories and architectures).
  [[nodiscard]] std::span<const std::uint32_t> versions(std::string_view name) const;
  /// Every package that provides `name`, in packages() order.
  [[nodiscard]] std::span<const Provider> providers(std::string_view name) const;
  /// Indexes into packages() of the base's installed packages.
  [[nodiscard]] const std::vector<std::uint32_t>& installed() const { return m_installed; }
  /// Whether packages()[index] is installed in the base and on hold (`apt-mark hold`).
  [[nodiscard]] bool held(std::uint32_t index) const { return m_held.count(index) != 0; }
  /// The pin priority of repository `repo` (k_default_priority unless given).
  [[nodiscard]] int priority(int repo) const {
    return repo >= 0 && static_cast<std::size_t>(repo) < m_priorities.size()
               ? m_priorities[static_cast<std::size_t>(repo)]
               : k_default_priority;
  }

private:
  std::vector<int> m_priorities;
  std::vector<AptPackage> m_packages;
  std::vector<std::uint32_t> m_order; // 0..n-1; versions() returns slices of it
  // Keys point into m_packages, whose elements never move once built.
  std::unordered_map<std::string_view, std::span<const std::uint32_t>> m_by_name;
  std::unordered_map<std::string_view, std::vector<Provider>> m_providers;
  std::vector<std::uint32_t> m_installed;
  std::set<std::uint32_t> m_held;
};

/// Resolves the requests (and the base set the options ask for) against `universe`, as
/// `apt-get install --no-install-recommends` does over the base's dpkg status when the universe has
/// one: installed packages count as installed; a request for an installed package moves it to the
/// candidate (the highest of its installed and best-repository versions; a lower version only when
/// pinned); a dependency the installed version doesn't satisfy upgrades it, and so does a base
/// package whose dependency an upgrade breaks, or that a new package Breaks; a held package is
/// never changed (what would need it to is refused, naming the hold and the chain). The result is
/// sorted by name, then architecture, and lists the base's unchanged packages too (in_base). An unknown or
/// unsatisfiable request, a dependency no repository can satisfy, or two selected packages that conflict is
/// invalid_input with the chain of packages that led there.
Result<std::vector<ResolvedPackage>> resolve(const AptUniverse& universe, const ResolveOptions& options);

} // namespace lockstep::builder
