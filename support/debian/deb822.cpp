#include "support/debian/deb822.hpp"

#include "support/base/text.hpp"

#include <algorithm>
#include <cctype>

namespace lockstep {

bool valid_package_name(std::string_view s) {
  if (s.size() < 2 || !((s.front() >= 'a' && s.front() <= 'z') || (s.front() >= '0' && s.front() <= '9'))) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
  });
}

std::string_view deb822_trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

namespace {

Result<DebRelation> parse_relation(std::string_view text) {
  DebRelation r;
  std::string_view s = deb822_trim(text);
  if (s.empty()) {
    return invalid_input("empty package in relationship '{}'", text);
  }
  // Restrictions ([arch list] and <build profiles>) come last.
  if (auto open = s.find_first_of("[<"); open != std::string_view::npos && s.find('(') > open) {
    r.restrictions = std::string(deb822_trim(s.substr(open)));
    s = deb822_trim(s.substr(0, open));
  } else if (auto close = s.find(')'); close != std::string_view::npos) {
    std::string_view after = deb822_trim(s.substr(close + 1));
    if (!after.empty()) {
      r.restrictions = std::string(after);
      s = deb822_trim(s.substr(0, close + 1));
    }
  }
  std::string_view name = s;
  if (auto paren = s.find('('); paren != std::string_view::npos) {
    if (s.back() != ')') {
      return invalid_input("'{}': a version constraint must be closed with ')'", deb822_trim(text));
    }
    std::string_view inside = deb822_trim(s.substr(paren + 1, s.size() - paren - 2));
    name = deb822_trim(s.substr(0, paren));
    std::size_t op_len = 0;
    while (op_len < inside.size() &&
           (inside[op_len] == '<' || inside[op_len] == '>' || inside[op_len] == '=')) {
      ++op_len;
    }
    auto relation = parse_version_relation(inside.substr(0, op_len));
    if (!relation) {
      return invalid_input("'{}': {}", deb822_trim(text), relation.error().message);
    }
    auto version = DebianVersion::parse(deb822_trim(inside.substr(op_len)));
    if (!version) {
      return invalid_input("'{}': {}", deb822_trim(text), version.error().message);
    }
    r.relation = *relation;
    r.version = std::move(*version);
  }
  if (auto colon = name.find(':'); colon != std::string_view::npos) {
    r.arch_qualifier = std::string(name.substr(colon + 1));
    name = name.substr(0, colon);
    if (r.arch_qualifier.empty()) {
      return invalid_input("'{}': empty architecture after ':'", deb822_trim(text));
    }
  }
  if (!valid_package_name(name)) {
    return invalid_input("'{}': '{}' is not a valid package name", deb822_trim(text), name);
  }
  r.name = std::string(name);
  return r;
}

} // namespace

const std::string* Deb822Paragraph::find(std::string_view name) const {
  for (const auto& f : fields) {
    if (iequals(f.name, name)) {
      return &f.value;
    }
  }
  return nullptr;
}

Result<std::vector<Deb822Paragraph>> parse_deb822(std::string_view text, std::string_view what) {
  std::vector<Deb822Paragraph> out;
  Deb822Paragraph current;
  int line_no = 0;
  auto flush = [&] {
    if (!current.fields.empty()) {
      out.push_back(std::move(current));
    }
    current = Deb822Paragraph{};
  };
  for (std::string_view line : text_lines(text)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (deb822_trim(line).empty()) {
      flush();
      continue;
    }
    if (line.front() == '#') {
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') {
      if (current.fields.empty()) {
        return invalid_input("{}:{}: a continuation line before any field", what, line_no);
      }
      std::string& value = current.fields.back().value;
      std::string_view rest = line.substr(1);
      while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) {
        rest.remove_suffix(1);
      }
      value += '\n';
      value += rest;
      continue;
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return invalid_input("{}:{}: expected 'Field: value', found '{}'", what, line_no, line);
    }
    std::string_view name = line.substr(0, colon);
    if (std::any_of(name.begin(), name.end(), [](char c) { return c <= ' ' || c > '~'; })) {
      return invalid_input("{}:{}: invalid field name '{}'", what, line_no, name);
    }
    if (current.find(name) != nullptr) {
      return invalid_input("{}:{}: field '{}' appears twice in one paragraph", what, line_no, name);
    }
    if (current.fields.empty()) {
      current.line = line_no;
    }
    current.fields.push_back(
        Deb822Field{std::string(name), std::string(deb822_trim(line.substr(colon + 1))), line_no});
  }
  flush();
  return out;
}

std::string DebRelation::str() const {
  std::string s = name;
  if (!arch_qualifier.empty()) {
    s += ':' + arch_qualifier;
  }
  if (relation && version) {
    s += " (";
    s += version_relation_name(*relation);
    s += ' ' + version->str() + ')';
  }
  if (!restrictions.empty()) {
    s += ' ' + restrictions;
  }
  return s;
}

Result<DebRelationField> parse_relation_field(std::string_view value) {
  DebRelationField field;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t comma = value.find(',', start);
    std::string_view group =
        value.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? value.size() + 1 : comma + 1;
    if (deb822_trim(group).empty()) {
      if (comma == std::string_view::npos && !field.empty()) {
        break; // a trailing comma
      }
      if (comma == std::string_view::npos && deb822_trim(value).empty()) {
        break; // an empty field
      }
      return invalid_input("empty entry between commas in '{}'", deb822_trim(value));
    }
    std::vector<DebRelation> alternatives;
    std::size_t a = 0;
    while (a <= group.size()) {
      std::size_t bar = group.find('|', a);
      std::string_view alt =
          group.substr(a, bar == std::string_view::npos ? std::string_view::npos : bar - a);
      a = bar == std::string_view::npos ? group.size() + 1 : bar + 1;
      LS_TRY_ASSIGN(DebRelation r, parse_relation(alt));
      alternatives.push_back(std::move(r));
    }
    field.push_back(std::move(alternatives));
  }
  return field;
}

} // namespace lockstep
