// SPDX license identifiers and expressions: see spdx_license.hpp.
#include "support/supplychain/spdx_license.hpp"

#include "support/base/text.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>
#include <utility>

namespace lockstep {

namespace {

// The SPDX license list's identifiers: k_license_ids and k_exception_ids.
#include "support/supplychain/spdx_license_ids.inc"

// Deprecated identifiers and common spellings (lower case) -> the expression they mean. The names
// of the "License ::" trove classifiers PyPI uses are among them.
constexpr std::array<std::pair<std::string_view, std::string_view>, 48> k_names = {{
    {"3-clause bsd license", "BSD-3-Clause"},
    {"agpl-3.0", "AGPL-3.0-only"},
    {"agpl-3.0+", "AGPL-3.0-or-later"},
    {"apache 2", "Apache-2.0"},
    {"apache 2.0", "Apache-2.0"},
    {"apache license 2.0", "Apache-2.0"},
    {"apache license, version 2.0", "Apache-2.0"},
    {"apache software license 2.0", "Apache-2.0"},
    {"apache-2", "Apache-2.0"},
    {"boost software license 1.0 (bsl-1.0)", "BSL-1.0"},
    {"bsd 2-clause", "BSD-2-Clause"},
    {"bsd 3-clause", "BSD-3-Clause"},
    {"bsd-3", "BSD-3-Clause"},
    {"expat", "MIT"},
    {"gnu affero general public license v3", "AGPL-3.0-only"},
    {"gnu general public license v2 (gplv2)", "GPL-2.0-only"},
    {"gnu general public license v2 or later (gplv2+)", "GPL-2.0-or-later"},
    {"gnu general public license v3 (gplv3)", "GPL-3.0-only"},
    {"gnu general public license v3 or later (gplv3+)", "GPL-3.0-or-later"},
    {"gnu lesser general public license v2 (lgplv2)", "LGPL-2.0-only"},
    {"gnu lesser general public license v2 or later (lgplv2+)", "LGPL-2.0-or-later"},
    {"gnu lesser general public license v3 (lgplv3)", "LGPL-3.0-only"},
    {"gnu lesser general public license v3 or later (lgplv3+)", "LGPL-3.0-or-later"},
    {"gpl-1.0", "GPL-1.0-only"},
    {"gpl-1.0+", "GPL-1.0-or-later"},
    {"gpl-2.0", "GPL-2.0-only"},
    {"gpl-2.0+", "GPL-2.0-or-later"},
    {"gpl-3.0", "GPL-3.0-only"},
    {"gpl-3.0+", "GPL-3.0-or-later"},
    {"gplv2", "GPL-2.0-only"},
    {"gplv2+", "GPL-2.0-or-later"},
    {"gplv3", "GPL-3.0-only"},
    {"gplv3+", "GPL-3.0-or-later"},
    {"isc license (iscl)", "ISC"},
    {"lgpl-2.0", "LGPL-2.0-only"},
    {"lgpl-2.0+", "LGPL-2.0-or-later"},
    {"lgpl-2.1", "LGPL-2.1-only"},
    {"lgpl-2.1+", "LGPL-2.1-or-later"},
    {"lgpl-3.0", "LGPL-3.0-only"},
    {"lgpl-3.0+", "LGPL-3.0-or-later"},
    {"mit license", "MIT"},
    {"mozilla public license 2.0 (mpl 2.0)", "MPL-2.0"},
    {"mpl 2.0", "MPL-2.0"},
    {"new bsd license", "BSD-3-Clause"},
    {"psf", "PSF-2.0"},
    {"psf license", "PSF-2.0"},
    {"python software foundation license", "PSF-2.0"},
    {"the unlicense (unlicense)", "Unlicense"},
}};

// Lower-cased identifier -> its canonical spelling.
using IdIndex = std::unordered_map<std::string, std::string_view>;

template <std::size_t N> IdIndex index_of(const std::array<std::string_view, N>& ids) {
  IdIndex out;
  for (std::string_view id : ids) {
    out.emplace(ascii_lower(id), id);
  }
  return out;
}

std::optional<std::string_view> find_ci(const IdIndex& index, std::string_view name) {
  auto it = index.find(ascii_lower(name));
  return it == index.end() ? std::nullopt : std::optional<std::string_view>(it->second);
}

bool id_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '+';
}

// One identifier of an expression: known -> canonical, "LicenseRef-..." kept, else a reference.
std::string term(std::string_view id) {
  if (id.starts_with("LicenseRef-") && id.size() > 11 && id.find('+') == std::string_view::npos) {
    return std::string(id);
  }
  if (auto known = spdx_license_id(id)) {
    return std::string(*known);
  }
  if (id.ends_with('+')) { // "GPL-2.0+": a deprecated form, or "X+" = X or any later version
    if (auto named = license_of_name(id)) {
      return *named;
    }
    if (auto known = spdx_license_id(id.substr(0, id.size() - 1))) {
      return std::string(*known) + "+";
    }
  }
  if (auto named = license_of_name(id)) {
    return *named;
  }
  return license_ref(id);
}

} // namespace

std::optional<std::string_view> spdx_license_id(std::string_view name) {
  static const IdIndex index = index_of(k_license_ids);
  return find_ci(index, name);
}

std::optional<std::string_view> spdx_exception_id(std::string_view name) {
  static const IdIndex index = index_of(k_exception_ids);
  return find_ci(index, name);
}

std::optional<std::string> license_of_name(std::string_view name) {
  const std::string_view trimmed = trim(name);
  if (auto id = spdx_license_id(trimmed)) {
    return std::string(*id);
  }
  const std::string lower = ascii_lower(trimmed);
  for (const auto& [n, expression] : k_names) {
    if (n == lower) {
      return std::string(expression);
    }
  }
  return std::nullopt;
}

std::string license_ref(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.';
    if (ok) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
    if (out.size() >= 64) {
      break;
    }
  }
  while (!out.empty() && out.back() == '-') {
    out.pop_back();
  }
  return "LicenseRef-" + (out.empty() ? std::string("unknown") : out);
}

namespace {

// The parts of `e` joined by AND outside parentheses, or `e` itself when an OR is there too.
std::vector<std::string> top_level_and(const std::string& e, bool* has_or = nullptr) {
  std::vector<std::string> parts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < e.size(); ++i) {
    if (e[i] == '(') {
      ++depth;
    } else if (e[i] == ')') {
      --depth;
    } else if (depth == 0 && e.compare(i, 4, " OR ") == 0) {
      if (has_or != nullptr) {
        *has_or = true;
      }
      return {e};
    } else if (depth == 0 && e.compare(i, 5, " AND ") == 0) {
      parts.push_back(e.substr(start, i - start));
      start = i + 5;
    }
  }
  parts.push_back(e.substr(start));
  return parts;
}

} // namespace

std::string spdx_and(const std::vector<std::string>& given) {
  // A term that is itself an AND ("A AND (B OR C)") is split, so each part appears once.
  std::vector<std::string> terms;
  for (const std::string& t : given) {
    for (std::string& part : top_level_and(t)) {
      if (!part.empty()) {
        terms.push_back(std::move(part));
      }
    }
  }
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  std::string out;
  for (const std::string& t : terms) {
    if (!out.empty()) {
      out += " AND ";
    }
    bool has_or = false;
    top_level_and(t, &has_or);
    out += has_or ? "(" + t + ")" : t;
  }
  return out;
}

std::optional<std::string> normalize_license_expression(std::string_view text) {
  // Tokens: identifiers, operators and parentheses; checked as a sequence of operands joined by
  // operators, WITH followed by an exception.
  std::vector<std::string> out;
  int depth = 0;
  bool want_operand = true;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t') {
      ++i;
      continue;
    }
    if (c == '(') {
      if (!want_operand) {
        return std::nullopt;
      }
      ++depth;
      out.emplace_back("(");
      ++i;
      continue;
    }
    if (c == ')') {
      if (want_operand || depth == 0) {
        return std::nullopt;
      }
      --depth;
      out.emplace_back(")");
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && (id_char(text[end]) || text[end] == ':')) {
      ++end;
    }
    if (end == i) {
      return std::nullopt;
    }
    const std::string_view word = text.substr(i, end - i);
    i = end;
    const std::string upper = ascii_upper(word);
    if (upper == "AND" || upper == "OR") {
      if (want_operand) {
        return std::nullopt;
      }
      out.push_back(upper);
      want_operand = true;
      continue;
    }
    if (upper == "WITH") {
      if (want_operand || out.empty() || out.back() == ")") {
        return std::nullopt;
      }
      std::size_t s = i;
      while (s < text.size() && text[s] == ' ') {
        ++s;
      }
      std::size_t e = s;
      while (e < text.size() && id_char(text[e])) {
        ++e;
      }
      auto exception = spdx_exception_id(text.substr(s, e - s));
      if (!exception) {
        return std::nullopt; // an exception the list does not name has no SPDX 2.3 spelling
      }
      out.back() += " WITH " + std::string(*exception);
      i = e;
      continue;
    }
    if (!want_operand || word.find(':') != std::string_view::npos) {
      return std::nullopt;
    }
    out.push_back(term(word));
    want_operand = false;
  }
  if (want_operand || depth != 0 || out.empty()) {
    return std::nullopt;
  }
  std::string joined;
  for (const std::string& t : out) {
    if (!joined.empty() && t != ")" && joined.back() != '(') {
      joined += ' ';
    }
    joined += t;
  }
  return joined;
}

} // namespace lockstep
