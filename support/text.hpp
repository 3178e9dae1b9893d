#pragma once
// Small byte-string helpers shared by the text parsers (PEP 440/508, wheel metadata, deb822): ASCII
// case folding and trimming, independent of the process's locale.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace lockstep {

/// `s` with ASCII 'A'-'Z' lowered; every other byte unchanged.
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

/// Whether `c` is an ASCII letter or digit.
inline bool is_ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/// Whether `a` and `b` are equal ignoring case (deb822 field names, HTTP header names).
inline bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

/// `s` without the leading and trailing bytes that are in `chars`.
inline std::string_view trim_chars(std::string_view s, std::string_view chars) {
  const std::size_t first = s.find_first_not_of(chars);
  if (first == std::string_view::npos) {
    return {};
  }
  return s.substr(first, s.find_last_not_of(chars) - first + 1);
}

} // namespace lockstep
