#pragma once
// An apt repository's Packages index (the deb822 list of binary packages under
// dists/SUITE/COMPONENT/binary-ARCH/) parsed into validated package records: what the resolver
// chooses from (builder/lock/apt_resolver.hpp) and what the lock keeps about each package.
// Format: https://wiki.debian.org/DebianRepository/Format#A.22Packages.22_Indices
#include "support/debian/deb822.hpp"
#include "support/debian/debian_version.hpp"
#include "support/digest.hpp"
#include "support/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

/// One binary package of a Packages index.
struct AptPackage {
  std::string name;         ///< Package (policy §5.6.7 syntax)
  DebianVersion version;    ///< Version
  std::string architecture; ///< Architecture: "amd64", "all", ...
  std::string multi_arch;   ///< Multi-Arch: "", "same", "foreign" or "allowed" ("no" is "")
  bool essential = false;   ///< Essential: yes
  std::string priority;     ///< Priority ("required", "important", ...), or empty
  std::string section;      ///< Section, or empty
  std::string source;       ///< the Source field's package name (without a version), or `name`
  DebRelationField depends, pre_depends, recommends, conflicts, breaks, replaces;
  std::vector<DebRelation> provides; ///< each with an optional (= version)
  std::string filename;              ///< pool path relative to the repository root, checked
  std::uint64_t size = 0;            ///< Size of the .deb in bytes
  Digest sha256;                     ///< SHA256 of the .deb (required: MD5 and SHA1 are not trusted)
  /// The paragraph exactly as in the index (its lines up to the blank line, each ending in '\n'),
  /// kept for the lock and the dpkg status file; at most k_max_apt_paragraph bytes.
  std::string control;
  int repo = 0; ///< the repository it came from (its index in the spec, which is its priority)
};

/// The largest Packages index text parse_packages_index() accepts.
inline constexpr std::uint64_t k_max_apt_index_size = std::uint64_t{1} << 30;
/// The most paragraphs parse_packages_index() accepts.
inline constexpr std::size_t k_max_apt_index_paragraphs = 1'000'000;
/// The largest single paragraph parse_packages_index() accepts.
inline constexpr std::size_t k_max_apt_paragraph = std::size_t{1} << 20;

/// True for a valid Debian package name: lowercase letters, digits, '+', '-' and '.', at least two
/// characters, starting with a letter or digit (policy §5.6.7).
bool valid_debian_package_name(std::string_view name);

/// Parses a Packages index; `what` names it in errors ("bookworm main/binary-amd64/Packages") and
/// `repo` is stored in every package. Every paragraph must have a valid Package, Version,
/// Architecture, Filename (relative, without '..'), Size and SHA256 (64 hex digits); relationship
/// fields must parse. A violation is invalid_input naming the index, the line and the package.
/// Text over k_max_apt_index_size bytes or with more than k_max_apt_index_paragraphs paragraphs is
/// refused. Packages keep the index's order.
Result<std::vector<AptPackage>> parse_packages_index(std::string_view text, std::string_view what, int repo);

} // namespace lockstep
