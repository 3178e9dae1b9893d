#pragma once
// deb822 control data (Debian policy §5.1): the format of Packages and Release files, the dpkg
// status database and a package's control file; and the relationship fields in it (Depends,
// Pre-Depends, Provides, Conflicts, Breaks: policy §7.1).
#include "support/base/result.hpp"
#include "support/debian/debian_version.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

/// One field: "Name: value". The value is the first line's text (trimmed), then '\n' and each
/// continuation line without its first whitespace character (so "SHA256:" followed by indented
/// lines gives "\nHASH SIZE NAME\n...").
struct Deb822Field {
  std::string name;
  std::string value;
  int line = 0; ///< 1-based line of the field name
};

/// One paragraph (stanza) of fields.
struct Deb822Paragraph {
  std::vector<Deb822Field> fields;
  int line = 0; ///< 1-based line of its first field
  /// The value of field `name` (field names are case-insensitive), or nullptr.
  [[nodiscard]] const std::string* find(std::string_view name) const;
};

/// Whether `s` is a Debian package name (policy §5.6.1): lowercase letters, digits and + - ., at
/// least two characters, starting with a letter or digit. The one rule for every reader.
bool valid_package_name(std::string_view s);

/// `s` without the spaces and tabs around it, nor a CR before its end (a CRLF line): how deb822
/// values and the lines of dpkg control files (conffiles, triggers) are trimmed.
std::string_view deb822_trim(std::string_view s);

/// Parses deb822 text into paragraphs separated by blank lines. Lines starting with '#' are
/// comments. A line that is neither a field, a continuation nor blank, a continuation before any
/// field, or a field repeated in one paragraph is invalid_input naming `what` and the line.
Result<std::vector<Deb822Paragraph>> parse_deb822(std::string_view text, std::string_view what);

/// One package in a relationship field: `name[:arch] [(op version)] [[arches]] [<profiles>]`.
struct DebRelation {
  std::string name;
  std::string arch_qualifier; ///< "any", "native" or an architecture after ':'; empty if none
  std::optional<VersionRelation> relation;
  std::optional<DebianVersion> version; ///< set together with `relation`
  std::string restrictions;             ///< the raw `[...]` and `<...>` text, if any (source fields)

  [[nodiscard]] std::string str() const; ///< "libc6 (>= 2.34)"
};

/// A relationship field: groups separated by ',', each a list of alternatives separated by '|'.
using DebRelationField = std::vector<std::vector<DebRelation>>;

/// Parses a relationship field's value; errors name the offending part.
Result<DebRelationField> parse_relation_field(std::string_view value);

} // namespace lockstep
