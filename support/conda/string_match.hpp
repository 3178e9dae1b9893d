#pragma once
// How MatchSpec fields made of text match a record's value (conda's GlobStrMatch): "^...$" is a
// regular expression (ECMAScript, std::regex), a text with '*' a glob ('*' any run of characters,
// everything else literal), any other text itself. Used for names (case-insensitive), builds,
// channels and licenses, and by version specs for a glob in the middle ("1.*.3").
#include "support/conda/parse_error.hpp"

#include <memory>
#include <regex>
#include <string>
#include <string_view>

namespace lockstep::conda {

/// Whether letter case matters when matching.
enum class LetterCase { sensitive, insensitive };

/// Whether `text` matches `glob`, where '*' matches any run of characters (none included) and every
/// other byte itself (ASCII letters in either case with LetterCase::insensitive). Linear in practice,
/// O(|glob|·|text|) at worst.
bool glob_matches(std::string_view glob, std::string_view text,
                  LetterCase letter_case = LetterCase::sensitive);

/// An exact text, a glob or a regular expression, and how to test a value against it.
class StringMatcher {
public:
  /// How the text matches.
  enum class Kind { exact, glob, regex };
  /// The longest regular expression accepted: std::regex recurses as it compiles and matches.
  static constexpr std::size_t k_max_regex_length = 256;

  StringMatcher() = default;

  /// `text` as a matcher (see the file comment). A regular expression that std::regex rejects or that
  /// is longer than k_max_regex_length is an error at offset 0 of `text`.
  static ParseResult<StringMatcher> parse(std::string_view text,
                                          LetterCase letter_case = LetterCase::sensitive);

  /// Whether `value` matches. A regular expression that exhausts std::regex's limits matches nothing.
  [[nodiscard]] bool matches(std::string_view value) const;
  /// The text as given (lowered for LetterCase::insensitive).
  [[nodiscard]] const std::string& str() const { return m_text; }
  [[nodiscard]] Kind kind() const { return m_kind; }
  /// True for "*", which matches every value.
  [[nodiscard]] bool matches_all() const { return m_text == "*"; }
  friend bool operator==(const StringMatcher& a, const StringMatcher& b) {
    return a.m_text == b.m_text && a.m_case == b.m_case;
  }

private:
  std::string m_text = "*";
  Kind m_kind = Kind::glob;
  LetterCase m_case = LetterCase::sensitive;
  std::shared_ptr<const std::regex> m_regex; // shared: copies of a spec share one compiled expression
};

} // namespace lockstep::conda
