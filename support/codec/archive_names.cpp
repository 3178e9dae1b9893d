#include "support/codec/archive_names.hpp"

#include <fmt/format.h>

namespace lockstep {

// libarchive converts names from the current locale's charset to UTF-8 for PAX records. Every call
// runs under C.UTF-8 on this thread, so the output never depends on LANG/LC_ALL: valid UTF-8 names
// are written as UTF-8, and anything else falls back to a raw name marked hdrcharset=BINARY.
Utf8Locale::Utf8Locale() {
  static locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  if (utf8 != static_cast<locale_t>(nullptr)) {
    m_previous = uselocale(utf8);
  }
}

Utf8Locale::~Utf8Locale() {
  if (m_previous != static_cast<locale_t>(nullptr)) {
    uselocale(m_previous);
  }
}

namespace layer {

bool normalise_name(std::string_view raw, std::string& out, std::string& why) {
  out.clear();
  if (raw.empty()) {
    why = "has an empty name";
    return false;
  }
  int depth = 0;
  std::size_t i = 0;
  while (i <= raw.size()) {
    std::size_t j = raw.find('/', i);
    j = j == std::string_view::npos ? raw.size() : j;
    std::string_view comp = raw.substr(i, j - i);
    if (comp == "..") {
      why = depth == 0 ? "escapes the root with '..'" : "has a '..' component";
      return false;
    }
    if (!comp.empty() && comp != ".") {
      if (comp.size() > k_max_name) {
        why = fmt::format("has a name component longer than {} bytes", k_max_name);
        return false;
      }
      if (!out.empty()) {
        out += '/';
      }
      out += comp;
      ++depth;
    }
    i = j + 1;
  }
  // "/" (umoci writes its root entry so) names the root; any other absolute name is refused.
  if (raw.front() == '/' && !out.empty()) {
    why = "has an absolute name; layer members are relative to the root";
    return false;
  }
  if (out.size() > k_max_path) {
    why = fmt::format("has a name longer than {} bytes", k_max_path);
    return false;
  }
  return true;
}

} // namespace layer

Result<std::string> normalize_member_name(std::string_view name) {
  if (name.empty()) {
    return invalid_input("archive member with an empty name");
  }
  if (name.front() == '/') {
    return invalid_input("archive member '{}' has an absolute name", name);
  }
  std::string out;
  std::string why;
  if (!layer::normalise_name(name, out, why)) {
    if (why.starts_with("escapes the root")) {
      why = "has a '..' component";
    }
    return invalid_input("archive member '{}' {}", name, why);
  }
  return out;
}

} // namespace lockstep
