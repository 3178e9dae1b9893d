#include "support/registry/challenge.hpp"

#include "support/base/text.hpp"

#include <algorithm>

namespace lockstep::registry {

namespace {

bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// A cursor over the header value.
struct Scanner {
  std::string_view s;
  std::size_t i = 0;
  void skip_space() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) {
      ++i;
    }
  }
  bool at(char c) {
    skip_space();
    return i < s.size() && s[i] == c;
  }
  std::string_view token() {
    skip_space();
    std::size_t start = i;
    while (i < s.size() && token_char(s[i])) {
      ++i;
    }
    return s.substr(start, i - start);
  }
};

Error malformed(std::string_view header, std::string_view why) {
  constexpr std::size_t k_shown = 200;
  return invalid_input("the registry sent a malformed WWW-Authenticate header ({}): {}", why,
                       header.substr(0, k_shown));
}

} // namespace

std::string Challenge::param(const std::string& name) const {
  auto it = params.find(name);
  return it == params.end() ? std::string() : it->second;
}

Result<std::vector<Challenge>> parse_challenges(std::string_view header) {
  std::vector<Challenge> out;
  Scanner sc{header};
  while (true) {
    while (sc.at(',')) {
      ++sc.i;
    }
    sc.skip_space();
    if (sc.i >= header.size()) {
      break;
    }
    std::string_view scheme = sc.token();
    if (scheme.empty()) {
      return malformed(header, "expected an authentication scheme");
    }
    Challenge c;
    c.scheme = ascii_lower(scheme);
    // Parameters: name=value pairs separated by commas, until the next scheme (a token not
    // followed by '=').
    while (true) {
      std::size_t mark = sc.i;
      while (sc.at(',')) {
        ++sc.i;
      }
      std::string_view name = sc.token();
      if (name.empty() || !sc.at('=')) {
        sc.i = mark; // the start of the next challenge (or the end)
        break;
      }
      ++sc.i; // '='
      std::string value;
      if (sc.at('"')) {
        ++sc.i;
        bool closed = false;
        while (sc.i < header.size()) {
          char ch = header[sc.i++];
          if (ch == '\\' && sc.i < header.size()) {
            value += header[sc.i++];
          } else if (ch == '"') {
            closed = true;
            break;
          } else {
            value += ch;
          }
        }
        if (!closed) {
          return malformed(header, "a quoted value is not closed");
        }
      } else {
        // Unquoted: up to the next comma or space (looser than RFC 7235's token, as registries write
        // URLs unquoted).
        sc.skip_space();
        std::size_t start = sc.i;
        while (sc.i < header.size() && header[sc.i] != ',' && header[sc.i] != ' ' && header[sc.i] != '\t') {
          ++sc.i;
        }
        value = std::string(header.substr(start, sc.i - start));
      }
      c.params[ascii_lower(name)] = std::move(value);
    }
    out.push_back(std::move(c));
  }
  return out;
}

} // namespace lockstep::registry
