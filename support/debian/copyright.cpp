// DEP-5 copyright files as SPDX license expressions: see copyright.hpp.
#include "support/debian/copyright.hpp"

#include "support/base/text.hpp"
#include "support/debian/deb822.hpp"
#include "support/supplychain/spdx_license.hpp"

#include <array>
#include <optional>
#include <utility>
#include <vector>

namespace lockstep {

namespace {

// DEP-5's versioned families (copyright-format/1.0, "License specification") and their SPDX
// stems; VERSION is written "2", "2.1" or "2.0", '+' meaning "or any later version".
struct Family {
  std::string_view dep5;   // lower case
  std::string_view spdx;   // the stem before "-X.Y"
  bool only_or_later;      // GNU licenses: -only / -or-later
  std::string_view suffix; // appended after the version (GFDL-NIV: "-no-invariants")
};
constexpr std::array<Family, 9> k_families = {{
    {"gpl", "GPL", true, ""},
    {"lgpl", "LGPL", true, ""},
    {"agpl", "AGPL", true, ""},
    {"gfdl", "GFDL", true, ""},
    {"gfdl-niv", "GFDL", true, "-no-invariants"},
    {"apache", "Apache", false, ""},
    {"artistic", "Artistic", false, ""},
    {"mpl", "MPL", false, ""},
    {"psf", "PSF", false, ""},
}};

// "2" -> "2.0"; "2.1" and "1.3" kept.
std::string dotted(std::string_view version) {
  return version.find('.') == std::string_view::npos ? std::string(version) + ".0" : std::string(version);
}

// One short name without 'or'/'and' ("GPL-2+", "BSD-3-clause", "Expat", "GPL") as SPDX.
std::string one_name(std::string_view name) {
  std::string lower = ascii_lower(name);
  bool later = false;
  if (lower.ends_with('+')) {
    later = true;
    lower.pop_back();
  }
  if (lower == "public-domain") {
    return "LicenseRef-public-domain";
  }
  if (lower == "perl") {
    return "Artistic-1.0-Perl OR GPL-1.0-or-later";
  }
  if (lower == "expat") {
    return "MIT";
  }
  if (lower == "artistic") { // DEP-5: the Artistic license as Perl has it, version 1.0
    return "Artistic-1.0";
  }
  if (lower == "cc0") {
    return "CC0-1.0";
  }
  if (lower == "gpl" || lower == "lgpl") { // unversioned: any version
    return lower == "gpl" ? "GPL-1.0-or-later" : "LGPL-2.0-or-later";
  }
  for (const Family& f : k_families) {
    if (lower.size() > f.dep5.size() + 1 && lower.starts_with(f.dep5) && lower[f.dep5.size()] == '-') {
      const std::string version = lower.substr(f.dep5.size() + 1);
      if (version.empty() || !(version[0] >= '0' && version[0] <= '9')) {
        continue;
      }
      std::string id = std::string(f.spdx) + "-" + dotted(version) + std::string(f.suffix);
      if (f.only_or_later) {
        id += later ? "-or-later" : "-only";
        later = false;
      }
      if (auto known = spdx_license_id(id)) {
        return std::string(*known) + (later ? "+" : "");
      }
    }
  }
  if (auto known = spdx_license_id(lower)) {
    return std::string(*known) + (later ? "+" : "");
  }
  if (auto named = license_of_name(name)) {
    return *named;
  }
  return license_ref(name);
}

} // namespace

namespace {

// Names joined by `or` and `and` without commas ("GPL-2+ or Artistic"); "" for an empty or broken one.
std::string simple_names(std::string_view text) {
  std::vector<std::string> words;
  for (std::size_t i = 0; i < text.size();) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) {
      ++i;
    }
    std::size_t end = i;
    while (end < text.size() && text[end] != ' ' && text[end] != '\t') {
      ++end;
    }
    if (end > i) {
      words.emplace_back(text.substr(i, end - i));
    }
    i = end;
  }
  std::string out;
  std::string current;
  // One name; "X with Y exception" has no SPDX 2.3 spelling unless Y is a listed exception.
  auto flush = [&](std::string_view op) -> bool {
    if (current.empty()) {
      return false;
    }
    std::string t = current.find(" with ") == std::string::npos ? one_name(current) : license_ref(current);
    if (t.find(" OR ") != std::string::npos && op == "AND") {
      t = "(" + t + ")";
    }
    out += t;
    if (!op.empty()) {
      out += " " + std::string(op) + " ";
    }
    current.clear();
    return true;
  };
  for (const std::string& w : words) {
    const std::string lower = ascii_lower(w);
    if (lower == "or" || lower == "and") {
      if (!flush(lower == "or" ? "OR" : "AND")) {
        return "";
      }
      continue;
    }
    current += current.empty() ? w : " " + w;
  }
  return flush("") ? out : "";
}

bool compound(const std::string& e) {
  return e.find(' ') != std::string::npos;
}

} // namespace

std::string dep5_license_name(std::string_view name) {
  // A comma binds looser than `and`/`or`: "GPL-2+ or Artistic, and BSD-3-clause" is
  // (GPL-2+ or Artistic) and BSD-3-clause.
  const std::string_view text = trim(name);
  std::string out;
  std::size_t start = 0;
  std::string op;
  while (true) {
    const std::size_t comma = text.find(',', start);
    std::string_view part =
        trim(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    std::string next_op;
    if (!op.empty()) {
      // after a comma: "and ..." or "or ..."
      const std::string lower = ascii_lower(part.substr(0, 4));
      if (lower.starts_with("and ")) {
        part = trim(part.substr(4));
      } else if (lower.starts_with("or ")) {
        part = trim(part.substr(3));
      } else {
        return license_ref(name);
      }
    }
    std::string e = simple_names(part);
    if (e.empty()) {
      return text.empty() ? "" : license_ref(name);
    }
    if (op.empty()) {
      out = e;
    } else {
      out = (compound(out) ? "(" + out + ")" : out) + " " + op + " " + (compound(e) ? "(" + e + ")" : e);
    }
    if (comma == std::string_view::npos) {
      break;
    }
    start = comma + 1;
    const std::string after = ascii_lower(trim(text.substr(start)).substr(0, 4));
    op = after.starts_with("or ") ? "OR" : "AND";
  }
  return out;
}

std::string dep5_license(std::string_view copyright) {
  auto paragraphs = parse_deb822(copyright, "copyright");
  if (!paragraphs || paragraphs->empty()) {
    return "";
  }
  const std::string* format = paragraphs->front().find("Format");
  if (format == nullptr || format->find("copyright-format/1.0") == std::string::npos) {
    return "";
  }
  std::vector<std::string> terms;
  for (const Deb822Paragraph& p : *paragraphs) {
    const std::string* license = p.find("License");
    if (p.find("Files") == nullptr || license == nullptr) {
      continue;
    }
    const std::string first = license->substr(0, license->find('\n'));
    if (!trim(first).empty()) {
      terms.push_back(dep5_license_name(first));
    }
  }
  if (terms.empty()) {
    if (const std::string* license = paragraphs->front().find("License")) {
      const std::string first = license->substr(0, license->find('\n'));
      if (!trim(first).empty()) {
        terms.push_back(dep5_license_name(first));
      }
    }
  }
  return spdx_and(std::move(terms));
}

} // namespace lockstep
