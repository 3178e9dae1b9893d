#include "support/conda/string_match.hpp"

#include "support/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace lockstep::conda {

namespace {

bool same_byte(char a, char b, LetterCase letter_case) {
  return letter_case == LetterCase::sensitive ? a == b : ascii_lower(a) == ascii_lower(b);
}

} // namespace

bool glob_matches(std::string_view glob, std::string_view text, LetterCase letter_case) {
  // Greedy with one backtrack point, the last '*': each '*' only ever needs to grow.
  std::size_t g = 0;
  std::size_t t = 0;
  std::size_t star = std::string_view::npos;
  std::size_t star_text = 0;
  while (t < text.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star = g++;
      star_text = t;
    } else if (g < glob.size() && same_byte(glob[g], text[t], letter_case)) {
      ++g;
      ++t;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') {
    ++g;
  }
  return g == glob.size();
}

ParseResult<StringMatcher> StringMatcher::parse(std::string_view text, LetterCase letter_case) {
  StringMatcher m;
  m.m_case = letter_case;
  m.m_text = letter_case == LetterCase::insensitive ? ascii_lower(text) : std::string(text);
  if (text.size() >= 2 && text.front() == '^' && text.back() == '$') {
    if (text.size() > k_max_regex_length) {
      return ParseError{0, fmt::format("a regular expression is at most {} characters", k_max_regex_length)};
    }
    // libstdc++ reads a back-reference's or a repeat's number into an int without an overflow check.
    constexpr std::size_t k_max_digits = 9;
    std::size_t run = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      run = std::isdigit(static_cast<unsigned char>(text[i])) != 0 ? run + 1 : 0;
      if (run > k_max_digits) {
        return ParseError{
            i + 1 - run, fmt::format("a number in a regular expression has at most {} digits", k_max_digits)};
      }
    }
    auto flags = std::regex::ECMAScript;
    if (letter_case == LetterCase::insensitive) {
      flags |= std::regex::icase;
    }
    try {
      m.m_regex = std::make_shared<const std::regex>(m.m_text, flags);
    } catch (const std::regex_error& e) {
      return ParseError{0, fmt::format("invalid regular expression: {}", e.what())};
    }
    m.m_kind = Kind::regex;
  } else if (text.find('*') != std::string_view::npos) {
    m.m_kind = Kind::glob;
  } else {
    m.m_kind = Kind::exact;
  }
  return m;
}

bool StringMatcher::matches(std::string_view value) const {
  switch (m_kind) {
  case Kind::exact:
    return value.size() == m_text.size() &&
           std::equal(value.begin(), value.end(), m_text.begin(),
                      [this](char a, char b) { return same_byte(a, b, m_case); });
  case Kind::glob:
    return glob_matches(m_text, value, m_case);
  case Kind::regex:
    try {
      return std::regex_search(value.begin(), value.end(), *m_regex);
    } catch (const std::regex_error&) {
      return false;
    }
  }
  return false;
}

} // namespace lockstep::conda
