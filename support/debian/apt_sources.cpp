#include "support/debian/apt_sources.hpp"

#include "support/base/text.hpp"
#include "support/debian/deb822.hpp"

#include <fmt/format.h>

#include <sstream>

namespace lockstep {

namespace {

std::vector<std::string> words_of(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  std::string w;
  while (in >> w) {
    out.push_back(w);
  }
  return out;
}

// "deb [signed-by=/k.gpg] URI SUITE COMPONENTS", the one-line form of a source.
std::string one_line(const AptSource& s) {
  std::string line = s.type;
  if (!s.signed_by.empty()) {
    line += " [signed-by=" + s.signed_by + "]";
  }
  line += " " + s.uri + " " + s.suite;
  for (const std::string& c : s.components) {
    line += " " + c;
  }
  return line;
}

} // namespace

Result<std::vector<AptSource>> parse_sources_list(std::string_view text, std::string_view what) {
  std::vector<AptSource> out;
  int number = 0;
  for (std::string_view line : text_lines(text)) {
    ++number;
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    std::string rest(deb822_trim(line));
    if (rest.empty()) {
      continue;
    }
    AptSource s;
    s.at = number;
    const std::size_t sp = rest.find_first_of(" \t");
    s.type = rest.substr(0, sp);
    rest = sp == std::string::npos ? std::string() : std::string(deb822_trim(rest.substr(sp)));
    if (s.type != "deb" && s.type != "deb-src") {
      return invalid_input("{}:{}: '{}' is not a source line (deb or deb-src, then the URI and suite)", what,
                           number, deb822_trim(line));
    }
    if (rest.starts_with("[")) {
      const std::size_t close = rest.find(']');
      if (close == std::string::npos) {
        return invalid_input("{}:{}: the options' '[' is not closed", what, number);
      }
      for (const std::string& option : words_of(rest.substr(1, close - 1))) {
        if (option.starts_with("signed-by=")) {
          s.signed_by = option.substr(10);
        }
      }
      rest = std::string(deb822_trim(rest.substr(close + 1)));
    }
    std::vector<std::string> words = words_of(rest);
    if (words.size() < 2) {
      return invalid_input("{}:{}: '{}' needs a URI and a suite", what, number, deb822_trim(line));
    }
    s.uri = words[0];
    s.suite = words[1];
    s.components.assign(words.begin() + 2, words.end());
    s.line = one_line(s);
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<AptSource>> parse_sources_deb822(std::string_view text, std::string_view what) {
  LS_TRY_ASSIGN(std::vector<Deb822Paragraph> stanzas, parse_deb822(text, what));
  std::vector<AptSource> out;
  for (const Deb822Paragraph& p : stanzas) {
    if (const std::string* enabled = p.find("Enabled"); enabled != nullptr && deb822_trim(*enabled) == "no") {
      continue;
    }
    const std::string* types = p.find("Types");
    const std::string* uris = p.find("URIs");
    const std::string* suites = p.find("Suites");
    if (types == nullptr || uris == nullptr || suites == nullptr) {
      return invalid_input("{}:{}: a source stanza needs Types, URIs and Suites", what, p.line);
    }
    const std::string* components = p.find("Components");
    const std::string* signed_by = p.find("Signed-By");
    for (const std::string& type : words_of(*types)) {
      for (const std::string& uri : words_of(*uris)) {
        for (const std::string& suite : words_of(*suites)) {
          AptSource s;
          s.type = type;
          s.uri = uri;
          s.suite = suite;
          s.at = p.line;
          if (components != nullptr) {
            s.components = words_of(*components);
          }
          // An inline key (a PGP block) is not a path; keep only a path.
          if (signed_by != nullptr && signed_by->find('\n') == std::string::npos) {
            s.signed_by = std::string(deb822_trim(*signed_by));
          }
          s.line = one_line(s);
          out.push_back(std::move(s));
        }
      }
    }
  }
  return out;
}

} // namespace lockstep
