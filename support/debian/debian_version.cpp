#include "support/debian/debian_version.hpp"

#include <charconv>

namespace lockstep {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// The weight of a non-digit character in verrevcmp: '~' before the end of the string, the end
// before letters, letters before everything else.
int order(char c) {
  if (is_digit(c)) {
    return 0;
  }
  if (is_alpha(c)) {
    return static_cast<unsigned char>(c);
  }
  if (c == '~') {
    return -1;
  }
  if (c != '\0') {
    return static_cast<unsigned char>(c) + 256;
  }
  return 0;
}

bool allowed_in_version(char c) {
  return is_digit(c) || is_alpha(c) || c == '.' || c == '+' || c == '~' || c == '-' || c == ':';
}

// dpkg's comparison of two version fragments (upstream or revision parts): <0, 0 or >0.
int compare_version_fragment(std::string_view a, std::string_view b) {
  std::size_t i = 0;
  std::size_t j = 0;
  auto at = [](std::string_view s, std::size_t k) { return k < s.size() ? s[k] : '\0'; };
  while (i < a.size() || j < b.size()) {
    int first_diff = 0;
    while ((i < a.size() && !is_digit(a[i])) || (j < b.size() && !is_digit(b[j]))) {
      int ac = order(at(a, i));
      int bc = order(at(b, j));
      if (ac != bc) {
        return ac - bc;
      }
      ++i;
      ++j;
    }
    while (at(a, i) == '0') {
      ++i;
    }
    while (at(b, j) == '0') {
      ++j;
    }
    while (is_digit(at(a, i)) && is_digit(at(b, j))) {
      if (first_diff == 0) {
        first_diff = at(a, i) - at(b, j);
      }
      ++i;
      ++j;
    }
    if (is_digit(at(a, i))) {
      return 1;
    }
    if (is_digit(at(b, j))) {
      return -1;
    }
    if (first_diff != 0) {
      return first_diff;
    }
  }
  return 0;
}

} // namespace

Result<DebianVersion> DebianVersion::parse(std::string_view text) {
  if (text.empty()) {
    return invalid_input("empty version");
  }
  for (char c : text) {
    if (!allowed_in_version(c)) {
      return invalid_input(
          "version '{}' has an invalid character '{}' (allowed: letters, digits and . + ~ - :)", text, c);
    }
  }
  DebianVersion v;
  std::string_view rest = text;
  if (auto colon = rest.find(':'); colon != std::string_view::npos) {
    std::string_view epoch = rest.substr(0, colon);
    auto [ptr, ec] = std::from_chars(epoch.data(), epoch.data() + epoch.size(), v.epoch);
    if (epoch.empty() || ec != std::errc() || ptr != epoch.data() + epoch.size()) {
      return invalid_input("version '{}' has an invalid epoch '{}' (expected a number before ':')", text,
                           epoch);
    }
    rest = rest.substr(colon + 1);
  }
  if (auto dash = rest.rfind('-'); dash != std::string_view::npos) {
    v.revision = std::string(rest.substr(dash + 1));
    rest = rest.substr(0, dash);
    if (v.revision.empty()) {
      return invalid_input("version '{}' has an empty revision after '-'", text);
    }
  }
  if (rest.empty()) {
    return invalid_input("version '{}' has an empty upstream part", text);
  }
  if (!is_digit(rest.front())) {
    return invalid_input("version '{}': the upstream part '{}' must start with a digit", text, rest);
  }
  v.upstream = std::string(rest);
  return v;
}

std::string DebianVersion::str() const {
  std::string s = epoch != 0 ? std::to_string(epoch) + ":" : std::string();
  s += upstream;
  if (!revision.empty()) {
    s += '-';
    s += revision;
  }
  return s;
}

std::strong_ordering operator<=>(const DebianVersion& a, const DebianVersion& b) {
  if (a.epoch != b.epoch) {
    return a.epoch <=> b.epoch;
  }
  int c = compare_version_fragment(a.upstream, b.upstream);
  if (c == 0) {
    c = compare_version_fragment(a.revision, b.revision);
  }
  return c <=> 0;
}

Result<VersionRelation> parse_version_relation(std::string_view text) {
  if (text == "<<") {
    return VersionRelation::earlier;
  }
  if (text == "<=" || text == "<") {
    return VersionRelation::earlier_equal;
  }
  if (text == "=") {
    return VersionRelation::equal;
  }
  if (text == ">=" || text == ">") {
    return VersionRelation::later_equal;
  }
  if (text == ">>") {
    return VersionRelation::later;
  }
  return invalid_input("unknown version relation '{}' (expected <<, <=, =, >= or >>)", text);
}

std::string_view version_relation_name(VersionRelation relation) {
  switch (relation) {
  case VersionRelation::earlier:
    return "<<";
  case VersionRelation::earlier_equal:
    return "<=";
  case VersionRelation::equal:
    return "=";
  case VersionRelation::later_equal:
    return ">=";
  case VersionRelation::later:
    return ">>";
  }
  return "=";
}

bool satisfies(const DebianVersion& version, VersionRelation relation, const DebianVersion& bound) {
  auto c = version <=> bound;
  switch (relation) {
  case VersionRelation::earlier:
    return std::is_lt(c);
  case VersionRelation::earlier_equal:
    return std::is_lteq(c);
  case VersionRelation::equal:
    return std::is_eq(c);
  case VersionRelation::later_equal:
    return std::is_gteq(c);
  case VersionRelation::later:
    return std::is_gt(c);
  }
  return false;
}

} // namespace lockstep
