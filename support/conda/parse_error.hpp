#pragma once
// Parse failures of conda's small languages (versions, version specs, MatchSpecs): a message and the
// byte offset of the problem in the parsed text, so a caller can print the text with a caret under
// the offending byte (render_caret) or fold it into lockstep's Error (ParseError::to_error).
#include "support/base/result.hpp"

#include <cassert>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace lockstep::conda {

/// Why a text is not a valid version, version spec or MatchSpec, and where.
struct ParseError {
  std::size_t offset = 0; ///< byte offset into the text given to the parser (may equal its length)
  std::string message;    ///< what is wrong there ("unknown operator '<<'"), without the location

  /// This failure as an invalid_input Error: "WHAT 'TEXT': MESSAGE (at byte N)".
  [[nodiscard]] Error to_error(std::string_view what, std::string_view text) const;
  friend bool operator==(const ParseError&, const ParseError&) = default;
};

/// `text` on one line and a caret under the character at `error.offset` followed by the message,
/// both lines starting with `indent`:
///   "  python>=3.11,<<3\n                ^ unknown operator '<<'"
/// The caret counts characters, not bytes (UTF-8 continuation bytes take no column), keeps tabs as
/// tabs, and control characters in `text` are shown as '?'.
std::string render_caret(std::string_view text, const ParseError& error, std::string_view indent = "  ");

/// Either a parsed value or the ParseError saying where the text went wrong (Result<T> with a
/// location).
template <typename T> class [[nodiscard]] ParseResult {
public:
  ParseResult(T value)
      : m_v(std::in_place_index<0>, std::move(value)) {} // NOLINT(google-explicit-constructor)
  ParseResult(ParseError error)                          // NOLINT(google-explicit-constructor)
      : m_v(std::in_place_index<1>, std::move(error)) {}

  [[nodiscard]] bool ok() const { return m_v.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(m_v);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(m_v);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(m_v));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  [[nodiscard]] const ParseError& error() const& {
    assert(!ok());
    return std::get<1>(m_v);
  }
  [[nodiscard]] ParseError&& error() && {
    assert(!ok());
    return std::get<1>(std::move(m_v));
  }

private:
  std::variant<T, ParseError> m_v;
};

} // namespace lockstep::conda
