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

/// `s` on one line: C0 control characters and DEL as "\xNN", C1 controls (UTF-8 U+0080..U+009F) as
/// "\u00NN"; every other byte unchanged. The one rule for a value in a comment line of a generated
/// file (batch script, Dockerfile, definition file) or on a terminal: nothing in it ends the line.
inline std::string escape_controls(std::string_view s) {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0U;
    if (c < 0x20 || c == 0x7f) {
      out += {'\\', 'x', k_hex[c >> 4], k_hex[c & 0xf]};
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {
      out += {'\\', 'u', '0', '0', k_hex[next >> 4], k_hex[next & 0xf]};
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

} // namespace lockstep
