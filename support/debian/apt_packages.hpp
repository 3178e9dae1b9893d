#pragma once
// An apt repository's Packages index (the deb822 list of binary packages under
// dists/SUITE/COMPONENT/binary-ARCH/) parsed into validated package records: what the resolver
// chooses from (builder/lock/apt_resolver.hpp) and what the lock keeps about each package.
// Format: https://wiki.debian.org/DebianRepository/Format#A.22Packages.22_Indices
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/debian/deb822.hpp"
#include "support/debian/debian_version.hpp"

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
  int repo = 0;      ///< the repository it came from (its index in the spec)
  std::string suite; ///< the suite of that repository whose index listed it ("" for a flat one)
};

/// One package of a dpkg status file (/var/lib/dpkg/status): the package's fields as an index has
/// them (without Filename, Size and SHA256), and its Status.
struct InstalledPackage {
  /// For a package that is not installed (not-installed, config-files) only the name, and the
  /// version and architecture when the paragraph has them. `control` is the paragraph verbatim.
  AptPackage package;
  std::string want;  ///< the selection: unknown, install, hold, deinstall or purge
  std::string flag;  ///< "ok" or "reinstreq"
  std::string state; ///< not-installed, config-files, half-installed, unpacked, half-configured,
                     ///< triggers-awaited, triggers-pending or installed
  /// Installed: its files are in place (dpkg's states from unpacked on count, as apt counts them).
  [[nodiscard]] bool installed() const { return state != "not-installed" && state != "config-files"; }
  /// On hold: apt never upgrades, downgrades or removes it on its own (`apt-mark hold`).
  [[nodiscard]] bool held() const { return want == "hold"; }
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

/// Whether `suite` is a security suite: *-security (Debian since bullseye, Ubuntu) or */updates
/// (Debian's security archive before bullseye).
bool is_security_suite(std::string_view suite);

/// Whether a deb from `suite` of the repository at `url` is a security update: a security suite, or
/// a security archive (debian-security, security.debian.org, security.ubuntu.com).
bool is_security_source(std::string_view suite, std::string_view url);

/// Parses a Packages index; `what` names it in errors ("bookworm main/binary-amd64/Packages") and
/// `repo` is stored in every package. Every paragraph must have a valid Package, Version,
/// Architecture, Filename (relative, without '..'), Size and SHA256 (64 hex digits); relationship
/// fields must parse. A violation is invalid_input naming the index, the line and the package.
/// Text over k_max_apt_index_size bytes or with more than k_max_apt_index_paragraphs paragraphs is
/// refused. Packages keep the index's order.
Result<std::vector<AptPackage>> parse_packages_index(std::string_view text, std::string_view what, int repo);

/// Parses a dpkg status file; `what` names it in errors ("base image: /var/lib/dpkg/status"). Every
/// paragraph needs Package and a Status of three words as dpkg writes it; an installed package also
/// needs a valid Version and Architecture, and its relationship fields must parse. The limits are
/// those of parse_packages_index. Packages keep the file's order.
Result<std::vector<InstalledPackage>> parse_dpkg_status(std::string_view text, std::string_view what);

} // namespace lockstep
