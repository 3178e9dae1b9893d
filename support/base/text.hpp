#pragma once
// Small byte-string helpers shared by the text parsers (PEP 440/508, wheel metadata, deb822): ASCII
// case folding and trimming, independent of the process's locale.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

/// `c` lowered when it is ASCII 'A'-'Z'; every other byte unchanged (whatever the locale).
inline char ascii_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

/// `s` with ASCII 'A'-'Z' lowered; every other byte unchanged.
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = ascii_lower(c);
  }
  return out;
}

/// `s` with ASCII 'a'-'z' raised; every other byte unchanged.
inline std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') {
      c = static_cast<char>(c - 'a' + 'A');
    }
  }
  return out;
}

/// Whether `c` is an ASCII hex digit, either case.
inline bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/// The value of an ASCII hex digit, either case; -1 for any other byte.
inline int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

/// Whether `s` is one or more hex digits, either case (a git object name as written).
inline bool is_hex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_hex_digit);
}

/// Whether every byte of `s` is 0-9 or a-f (a digest's hex, as OCI and Debian write it); true for "".
inline bool is_lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/// Whether `s` is one or more ASCII digits.
inline bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
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

/// ASCII whitespace, as Python's str.strip() and C's isspace() in the "C" locale know it.
inline constexpr std::string_view k_ascii_space = " \t\n\r\f\v";

/// Whether `c` is one of k_ascii_space's characters.
inline bool is_ascii_space(char c) {
  return k_ascii_space.find(c) != std::string_view::npos;
}

/// `s` without leading and trailing ASCII whitespace: the one trim of every parser.
inline std::string_view trim(std::string_view s) {
  return trim_chars(s, k_ascii_space);
}

/// `s` on one line: C0 control characters and DEL as "\xNN", C1 controls (UTF-8 U+0080..U+009F) as
/// "\u00NN"; every other byte unchanged. The one rule for a value in a comment line of a generated
/// file (batch script, Dockerfile, definition file) or on a terminal: nothing in it ends the line.
/// The bytes in `keep` (control characters a layout needs, such as "\n\t") are left as they are.
inline std::string escape_controls(std::string_view s, std::string_view keep = {}) {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0U;
    if ((c < 0x20 || c == 0x7f) && keep.find(static_cast<char>(c)) == std::string_view::npos) {
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

/// Whether `s` holds a C0 control character, DEL or a C1 control (UTF-8 U+0080..U+009F).
inline bool has_controls(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      return true;
    }
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      return true;
    }
  }
  return false;
}

/// `s` cut to `limit` bytes, every byte outside printable ASCII replaced by '?': the one rule for
/// text other programs print that lockstep shows on a terminal or puts into a JSON line.
inline std::string printable_ascii(std::string_view s, std::size_t limit) {
  std::string out(s.substr(0, limit));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) {
      c = '?';
    }
  }
  return out;
}

/// The '\n'-separated lines of a text, as a range: `for (std::string_view line : text_lines(t))`.
/// Each line is without its '\n'; a last line without one is included, and a text that ends in
/// '\n' has no empty line after it. The lines are views into the text (line.data() - t.data() is
/// a line's offset).
class TextLines {
public:
  explicit TextLines(std::string_view text) : m_text(text) {}

  // `iterator`: the name the standard gives a range's iterator type.
  class iterator { // NOLINT(readability-identifier-naming)
  public:
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;

    iterator() = default;
    iterator(std::string_view text, std::size_t pos) : m_text(text), m_pos(pos) { find_end(); }
    std::string_view operator*() const { return m_text.substr(m_pos, m_end - m_pos); }
    iterator& operator++() {
      m_pos = m_end + 1;
      find_end();
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const iterator& other) const { return m_pos == other.m_pos; }

  private:
    void find_end() {
      if (m_pos >= m_text.size()) {
        m_pos = m_end = m_text.size();
        return;
      }
      m_end = std::min(m_text.find('\n', m_pos), m_text.size());
    }
    std::string_view m_text;
    std::size_t m_pos = 0;
    std::size_t m_end = 0;
  };

  [[nodiscard]] iterator begin() const { return {m_text, 0}; }
  [[nodiscard]] iterator end() const { return {m_text, m_text.size()}; }

private:
  std::string_view m_text;
};

inline TextLines text_lines(std::string_view text) {
  return TextLines(text);
}

/// Calls `fn(line)` for each line of `text` (as text_lines() yields them) until `fn` returns false.
template <typename Fn> void for_each_line(std::string_view text, Fn&& fn) {
  for (std::string_view line : text_lines(text)) {
    if (!fn(line)) {
      return;
    }
  }
}

/// A diagnostic (an error, a warning, a log line) as it may reach a terminal: control characters
/// escaped as escape_controls() does, except newline and tab, which lay it out, so an escape
/// sequence in an image reference or a registry's answer can't retitle or clear the terminal; a
/// line longer than `max_line` bytes is cut, saying how much is left out. The one rule for what
/// lockstep writes to stderr (log::write_line and the CLI's error).
inline std::string diagnostic_text(std::string_view s, std::size_t max_line = 4096) {
  std::string out;
  out.reserve(std::min(s.size(), std::size_t{1} << 20));
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find('\n', pos);
    const bool last = end == std::string_view::npos;
    end = last ? s.size() : end;
    std::string_view line = s.substr(pos, end - pos);
    if (line.size() > max_line) {
      std::size_t cut = max_line;
      while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xc0) == 0x80) {
        --cut; // not inside a UTF-8 sequence
      }
      out += escape_controls(line.substr(0, cut), "\t");
      out += "[... " + std::to_string(line.size() - cut) + " more bytes of this line left out]";
    } else {
      out += escape_controls(line, "\t");
    }
    if (last) {
      break;
    }
    out += '\n';
    pos = end + 1;
  }
  return out;
}

/// The '\n'-separated lines of `text` (a last line without one included; no empty last line).
inline std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  for_each_line(text, [&](std::string_view line) {
    out.push_back(line);
    return true;
  });
  return out;
}

/// The components of a path: no empty ones ("/a//b/" -> {"a", "b"}); "." and ".." are kept.
inline std::vector<std::string> path_components(std::string_view path) {
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    j = j == std::string_view::npos ? path.size() : j;
    if (j > i) {
      parts.emplace_back(path.substr(i, j - i));
    }
    i = j + 1;
  }
  return parts;
}

/// `s` with every "%XX" (two hex digits) replaced by that byte: a file name taken from a URL.
inline std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && is_hex_digit(s[i + 1]) && is_hex_digit(s[i + 2])) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

/// The byte offset of the first invalid UTF-8 sequence in `text` (an overlong form, a surrogate, a
/// code point past U+10FFFF, a truncated sequence), or nullopt when it is all well-formed.
inline std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = 0;
    std::uint32_t min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0U) == 0xC0) {
      len = 2;
      min = 0x80;
    } else if ((c & 0xF0U) == 0xE0) {
      len = 3;
      min = 0x800;
    } else if ((c & 0xF8U) == 0xF0) {
      len = 4;
      min = 0x10000;
    } else {
      return i;
    }
    if (i + len > text.size()) {
      return i;
    }
    std::uint32_t cp = c & (0x7FU >> len);
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0U) != 0x80) {
        return i;
      }
      cp = (cp << 6U) | (cc & 0x3FU);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return i;
    }
    i += len;
  }
  return std::nullopt;
}

} // namespace lockstep
