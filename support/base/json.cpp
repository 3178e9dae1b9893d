#include "support/base/json.hpp"

#include <algorithm>
#include <cstring>

namespace lockstep {

namespace {

// The index of the quote that ends the string opening at `open` (or text.size() when none does):
// the next quote not escaped, that is not preceded by an odd number of backslashes. memchr keeps
// the scan of string contents, most of a document's bytes, at memory speed.
std::size_t string_end(std::string_view text, std::size_t open) {
  std::size_t from = open + 1;
  while (from < text.size()) {
    const void* hit = std::memchr(text.data() + from, '"', text.size() - from);
    if (hit == nullptr) {
      break;
    }
    const auto quote = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
    std::size_t backslashes = 0;
    while (quote - backslashes - 1 > open && text[quote - backslashes - 1] == '\\') {
      ++backslashes;
    }
    if (backslashes % 2 == 0) {
      return quote;
    }
    from = quote + 1;
  }
  return text.size();
}

} // namespace

std::optional<JsonDepthExcess> find_json_depth_excess(std::string_view text, int max_depth) {
  const std::size_t size = text.size();
  int depth = 0;
  for (std::size_t i = 0; i < size; ++i) {
    switch (text[i]) {
    case '"':
      i = string_end(text, i);
      break;
    case '[':
    case '{':
      if (++depth > max_depth) {
        const std::string_view before = text.substr(0, i);
        const std::size_t last_newline = before.rfind('\n');
        JsonDepthExcess excess;
        excess.offset = i;
        excess.line = 1 + static_cast<int>(std::count(before.begin(), before.end(), '\n'));
        excess.column = static_cast<int>(last_newline == std::string_view::npos ? i + 1 : i - last_newline);
        return excess;
      }
      break;
    case ']':
    case '}':
      depth = depth > 0 ? depth - 1 : 0;
      break;
    default:
      break;
    }
  }
  return std::nullopt;
}

Result<nlohmann::json> parse_json(std::string_view bytes, const std::string& where, int max_depth) {
  if (auto excess = find_json_depth_excess(bytes, max_depth)) {
    return invalid_input("{}: JSON nested more than {} levels deep (line {}, column {}); refusing it", where,
                         max_depth, excess->line, excess->column);
  }
  nlohmann::json j = nlohmann::json::parse(bytes, nullptr, false);
  if (j.is_discarded()) {
    return invalid_input("{}: not valid JSON", where);
  }
  return j;
}

std::string json_string(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) {
    return {};
  }
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

} // namespace lockstep
