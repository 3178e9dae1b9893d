// The one typed reader of lockstep's YAML (envspec/yaml/yaml_reader.hpp).
#include "envspec/yaml/yaml_reader.hpp"

#include "envspec/yaml/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lockstep::envspec {

void YamlReader::error(const SourceLocation& location, const std::string& path, std::string message) {
  m_diags.error(location, path, std::move(message));
}

const std::string* YamlReader::string(const Node& v, const std::string& path) {
  if (!v.is_scalar()) {
    error(v.location, path, fmt::format("expected a string, found {}", describe(v)));
    return nullptr;
  }
  return &v.scalar;
}

const std::string* YamlReader::nonempty_string(const Node& v, const std::string& path,
                                               std::string_view what) {
  const std::string* s = string(v, path);
  if (s != nullptr && s->empty()) {
    error(v.location, path, fmt::format("expected {}, found an empty string", what));
    return nullptr;
  }
  return s;
}

std::optional<bool> YamlReader::boolean(const Node& v, const std::string& path) {
  if (v.is_scalar() && !v.quoted && (v.scalar == "true" || v.scalar == "false")) {
    return v.scalar == "true";
  }
  if (m_dialect == Dialect::recipe) {
    error(v.location, path, fmt::format("expected true or false, found {}", describe(v)));
  } else if (const std::string* s = string(v, path)) {
    error(v.location, path, fmt::format("expected true or false, found '{}'", *s));
  }
  return std::nullopt;
}

bool YamlReader::expect_map(const Node& v, const std::string& path, std::string_view expected) {
  if (!v.is_map()) {
    error(v.location, path, fmt::format("expected {}, found {}", expected, describe(v)));
    return false;
  }
  return true;
}

bool YamlReader::expect_list(const Node& v, const std::string& path, std::string_view expected) {
  if (!v.is_sequence()) {
    error(v.location, path, fmt::format("expected {}, found {}", expected, describe(v)));
    return false;
  }
  return true;
}

void YamlReader::unknown_key(const MapEntry& entry, const std::string& path,
                             const std::vector<std::string_view>& known,
                             const std::vector<std::string_view>& later) {
  const std::string key_path = child_path(path, entry.key);
  if (m_dialect == Dialect::recipe) {
    error(entry.key_location, key_path,
          fmt::format("unknown key; expected one of: {}", fmt::join(known, ", ")));
    return;
  }
  if (std::find(later.begin(), later.end(), entry.key) != later.end()) {
    error(entry.key_location, key_path, "not supported by this lockstep version yet");
    return;
  }
  if (entry.key == "<<") {
    error(entry.key_location, key_path, "YAML merge keys are not supported; use 'extends' to share settings");
    return;
  }
  if (auto suggestion = closest_match(entry.key, known)) {
    error(entry.key_location, key_path, fmt::format("unknown key; did you mean '{}'?", *suggestion));
    return;
  }
  std::vector<std::string_view> sorted = known;
  std::sort(sorted.begin(), sorted.end());
  error(entry.key_location, key_path,
        fmt::format("unknown key; expected one of: {}", fmt::join(sorted, ", ")));
}

void YamlReader::check_keys(const Node& map, const std::string& path,
                            std::initializer_list<std::string_view> allowed) {
  const std::vector<std::string_view> known(allowed);
  for (const MapEntry& e : map.entries) {
    if (std::find(known.begin(), known.end(), e.key) == known.end()) {
      unknown_key(e, path, known);
    }
  }
}

std::optional<std::string> YamlReader::scalar(const Node& map, const std::string& path, std::string_view key,
                                              bool required) {
  const MapEntry* e = map.find(key);
  if (e == nullptr) {
    if (required) {
      error(map.location, path.empty() ? std::string(key) : path, fmt::format("missing key '{}'", key));
    }
    return std::nullopt;
  }
  const std::string* s = string(e->value, child_path(path, key));
  return s != nullptr ? std::optional<std::string>(*s) : std::nullopt;
}

std::optional<bool> YamlReader::boolean(const Node& map, const std::string& path, std::string_view key) {
  const MapEntry* e = map.find(key);
  return e != nullptr ? boolean(e->value, child_path(path, key)) : std::nullopt;
}

const std::vector<Node>* YamlReader::list(const Node& map, const std::string& path, std::string_view key) {
  const MapEntry* e = map.find(key);
  if (e == nullptr || !expect_list(e->value, child_path(path, key))) {
    return nullptr;
  }
  return &e->value.items;
}

std::optional<std::vector<std::string>> YamlReader::string_list(const Node& map, const std::string& path,
                                                                std::string_view key) {
  const std::vector<Node>* items = list(map, path, key);
  if (items == nullptr) {
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < items->size(); ++i) {
    if (const std::string* s = string((*items)[i], item_path(child_path(path, key), i))) {
      out.push_back(*s);
    }
  }
  return out;
}

const std::vector<MapEntry>* YamlReader::entries(const Node& map, const std::string& path,
                                                 std::string_view key) {
  const MapEntry* e = map.find(key);
  if (e == nullptr || !expect_map(e->value, child_path(path, key))) {
    return nullptr;
  }
  return &e->value.entries;
}

std::optional<std::string> YamlReader::entry_string(const MapEntry& entry, const std::string& path) {
  const std::string* s = string(entry.value, child_path(path, entry.key));
  return s != nullptr ? std::optional<std::string>(*s) : std::nullopt;
}

void YamlReader::expect(bool ok, const Node& map, const std::string& path, std::string_view key,
                        const std::string& message) {
  if (!ok) {
    const MapEntry* e = map.find(key);
    error(e != nullptr ? e->value.location : map.location, child_path(path, key), message);
  }
}

} // namespace lockstep::envspec
