#pragma once
// Debian package versions: parsing `[epoch:]upstream[-revision]` and ordering them exactly as dpkg
// does (deb-version(7); dpkg lib/dpkg/version.c). Used to choose package candidates and to check
// versioned dependencies (`>= 1.2`, `<< 2~`).
#include "support/base/result.hpp"

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep {

/// One parsed Debian version.
struct DebianVersion {
  std::uint32_t epoch = 0;
  std::string upstream; ///< starts with a digit; may contain letters, digits and `.+~-:`
  std::string revision; ///< after the last '-'; empty when there is none (native package)

  /// Parses `text` strictly: an invalid epoch, an empty upstream part, an upstream part that does
  /// not start with a digit, or a character outside the allowed set is invalid_input naming it.
  static Result<DebianVersion> parse(std::string_view text);
  /// The version as dpkg prints it ("1:2.3-4"; no "0:" epoch).
  [[nodiscard]] std::string str() const;

  /// dpkg's order: epoch numerically, then upstream, then revision, each with verrevcmp ('~' sorts
  /// before everything, even the end of the string; letters before other characters; digit runs
  /// numerically).
  friend std::strong_ordering operator<=>(const DebianVersion& a, const DebianVersion& b);
  friend bool operator==(const DebianVersion& a, const DebianVersion& b) { return std::is_eq(a <=> b); }
};

/// A version relation in a dependency field.
enum class VersionRelation { earlier, earlier_equal, equal, later_equal, later };

/// Parses "<<", "<=", "=", ">=", ">>" (and the obsolete "<" and ">", which mean <= and >=).
Result<VersionRelation> parse_version_relation(std::string_view text);
/// "<<", "<=", "=", ">=" or ">>".
std::string_view version_relation_name(VersionRelation relation);
/// True when `version` satisfies `relation` `bound` (e.g. 1.2-1 satisfies >= 1.2).
bool satisfies(const DebianVersion& version, VersionRelation relation, const DebianVersion& bound);

} // namespace lockstep
