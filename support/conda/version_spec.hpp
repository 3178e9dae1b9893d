#pragma once
// conda version specs (docs: ../shared/reference/conda.md §3.3): "1.2", "==1.2", "=1.2", "1.2.*",
// ">=1.2,<2|1.0.*", "(>=1,<2)|>3", "~=1.2.3", "!=1.2.*", "1.*.3", "^1\.2\..*$", "*"; '|' binds
// weaker than ','. Strict mode reads what people write; lenient mode also takes the legacy forms found
// in repodata ("2023.*.*", "<2.0.*", ">=*"). The canonical text (str) reads back the same in either.
#include "support/conda/parse_error.hpp"
#include "support/conda/string_match.hpp"
#include "support/conda/version.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::conda {

/// How forgiving a parser is.
enum class SpecMode {
  strict,  ///< user input: no '.*' after '<', '<=', '>' or '==', no "*.*", no "2023.*.*", no "<*"
  lenient, ///< repodata: those legacy forms are read as conda and rattler read them
};

/// The operator of one clause of a version spec.
enum class VersionOp {
  any,             ///< "*"
  equal,           ///< "==1.2", or "1.2" alone: equal after normalisation (1.2.0 matches)
  not_equal,       ///< "!=1.2"
  less,            ///< "<1.2"
  less_equal,      ///< "<=1.2"
  greater,         ///< ">1.2"
  greater_equal,   ///< ">=1.2"
  starts_with,     ///< "=1.2", "1.2.*", "1.2*": Version::starts_with (1.2.7 and 1.2rc1, not 1.20)
  not_starts_with, ///< "!=1.2.*"
  compatible,      ///< "~=1.2.3": >=1.2.3 and starts with 1.2
  pattern,         ///< "1.*.3" (a glob) or "^1\.2.*$" (a regular expression) over the version's text
};

/// A parsed version spec: a tree of '|' and ',' over clauses.
class VersionSpec {
public:
  /// The longest spec text accepted, in bytes.
  static constexpr std::size_t k_max_length = 4096;
  /// How deep parentheses may nest.
  static constexpr std::size_t k_max_depth = 32;

  /// "*": every version.
  VersionSpec() = default;

  /// Parses `text`. Errors carry the offset in `text` of the offending byte.
  static ParseResult<VersionSpec> parse(std::string_view text, SpecMode mode = SpecMode::strict);

  /// Whether `version` satisfies the spec.
  [[nodiscard]] bool matches(const Version& version) const;
  /// The canonical text: clauses as "==1.2", "=1.2" (prefix), "!=1.2.*", "~=1.2.3", ">=1.2", "*",
  /// patterns as written; ',' inside '|' without parentheses, '|' inside ',' in parentheses.
  [[nodiscard]] std::string str() const;

  /// Whether the spec is "*" (or a lenient equivalent such as ">=*").
  [[nodiscard]] bool is_any() const { return single_op() == VersionOp::any; }
  /// The operator when the spec is one clause; nullopt for a compound spec.
  [[nodiscard]] std::optional<VersionOp> single_op() const;
  /// The version of a one-clause spec with a version operand (not any, not a pattern); else nullptr.
  [[nodiscard]] const Version* single_version() const;
  /// Whether some clause is a pattern (glob or regular expression) matched against the text.
  [[nodiscard]] bool has_pattern() const;

  friend bool operator==(const VersionSpec& a, const VersionSpec& b) { return a.str() == b.str(); }

private:
  friend class SpecParser;

  struct Clause {
    VersionOp op = VersionOp::any;
    Version version;          // the operand
    Version prefix;           // for ~=: the prefix a match must start with ("1.2" of "~=1.2.3")
    StringMatcher pattern;    // for VersionOp::pattern
    std::string pattern_text; // for VersionOp::pattern: as written
  };
  struct Node {
    enum class Kind : std::uint8_t { clause, all, any };
    Kind kind = Kind::clause;
    std::uint32_t first = 0; // clause: index into m_clauses; group: index into m_children
    std::uint32_t count = 0; // group: how many children
  };

  [[nodiscard]] bool matches_node(std::uint32_t node, const Version& version) const;
  void render(std::uint32_t node, Node::Kind parent, std::string& out) const;
  [[nodiscard]] static bool matches_clause(const Clause& clause, const Version& version);
  [[nodiscard]] static std::string clause_str(const Clause& clause);

  std::vector<Clause> m_clauses;         // empty: "*"
  std::vector<Node> m_nodes;             // the root last
  std::vector<std::uint32_t> m_children; // the children of group nodes, each group's contiguous
};

} // namespace lockstep::conda
