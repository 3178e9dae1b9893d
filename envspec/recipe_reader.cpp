// Typed, located access to recipe files (envspec/recipe_reader.hpp).
#include "envspec/recipe_reader.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lockstep::envspec {

void RecipeReader::check_keys(const Node& map, const std::string& path,
                              std::initializer_list<std::string_view> allowed) {
  for (const MapEntry& e : map.entries) {
    if (std::find(allowed.begin(), allowed.end(), e.key) == allowed.end()) {
      std::string list;
      for (std::string_view a : allowed) {
        list += (list.empty() ? "" : ", ") + std::string(a);
      }
      m_diags.error(e.key_location, child_path(path, e.key),
                    fmt::format("unknown key; expected one of: {}", list));
    }
  }
}

std::optional<std::string> RecipeReader::scalar(const Node& map, const std::string& path,
                                                std::string_view key, bool required) {
  const MapEntry* e = map.find(key);
  if (e == nullptr) {
    if (required) {
      m_diags.error(map.location, path.empty() ? std::string(key) : path,
                    fmt::format("missing key '{}'", key));
    }
    return std::nullopt;
  }
  if (!e->value.is_scalar()) {
    m_diags.error(e->value.location, child_path(path, key),
                  fmt::format("expected a string, found {}", describe(e->value)));
    return std::nullopt;
  }
  return e->value.scalar;
}

std::optional<bool> RecipeReader::boolean(const Node& map, const std::string& path, std::string_view key) {
  const MapEntry* e = map.find(key);
  if (e == nullptr) {
    return std::nullopt;
  }
  if (e->value.is_scalar() && !e->value.quoted && (e->value.scalar == "true" || e->value.scalar == "false")) {
    return e->value.scalar == "true";
  }
  m_diags.error(e->value.location, child_path(path, key),
                fmt::format("expected true or false, found {}", describe(e->value)));
  return std::nullopt;
}

const std::vector<Node>* RecipeReader::list(const Node& map, const std::string& path, std::string_view key) {
  const MapEntry* e = map.find(key);
  if (e == nullptr) {
    return nullptr;
  }
  if (!e->value.is_sequence()) {
    m_diags.error(e->value.location, child_path(path, key),
                  fmt::format("expected a list, found {}", describe(e->value)));
    return nullptr;
  }
  return &e->value.items;
}

std::optional<std::vector<std::string>> RecipeReader::string_list(const Node& map, const std::string& path,
                                                                  std::string_view key) {
  const std::vector<Node>* items = list(map, path, key);
  if (items == nullptr) {
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < items->size(); ++i) {
    const Node& item = (*items)[i];
    if (item.is_scalar()) {
      out.push_back(item.scalar);
    } else {
      m_diags.error(item.location, item_path(child_path(path, key), i),
                    fmt::format("expected a string, found {}", describe(item)));
    }
  }
  return out;
}

const std::vector<MapEntry>* RecipeReader::entries(const Node& map, const std::string& path,
                                                   std::string_view key) {
  const MapEntry* e = map.find(key);
  if (e == nullptr) {
    return nullptr;
  }
  if (!e->value.is_map()) {
    m_diags.error(e->value.location, child_path(path, key),
                  fmt::format("expected a map, found {}", describe(e->value)));
    return nullptr;
  }
  return &e->value.entries;
}

std::optional<std::string> RecipeReader::entry_string(const MapEntry& entry, const std::string& path) {
  if (!entry.value.is_scalar()) {
    m_diags.error(entry.value.location, child_path(path, entry.key),
                  fmt::format("expected a string, found {}", describe(entry.value)));
    return std::nullopt;
  }
  return entry.value.scalar;
}

void RecipeReader::expect(bool ok, const Node& map, const std::string& path, std::string_view key,
                          const std::string& message) {
  if (!ok) {
    const MapEntry* e = map.find(key);
    m_diags.error(e != nullptr ? e->value.location : map.location, child_path(path, key), message);
  }
}

std::set<std::string, std::less<>> RecipeReader::source_names(const Node& root, bool allow_empty) {
  std::set<std::string, std::less<>> names;
  const MapEntry* s = root.find("sources");
  if (s != nullptr && s->value.is_map() && (allow_empty || !s->value.entries.empty())) {
    for (const MapEntry& e : s->value.entries) {
      names.insert(e.key);
    }
  } else {
    m_diags.error(s != nullptr ? s->value.location : root.location, "sources",
                  "expected a map from source names to descriptions");
  }
  return names;
}

void RecipeReader::check_source(const Node& item, const std::string& path,
                                const std::set<std::string, std::less<>>& known) {
  const MapEntry* e = item.find("source");
  if (e == nullptr) {
    m_diags.error(item.location, path, "missing key 'source' (where this fact comes from)");
    return;
  }
  std::vector<const Node*> names;
  if (e->value.is_scalar()) {
    names.push_back(&e->value);
  } else if (e->value.is_sequence() && !e->value.items.empty()) {
    for (const Node& n : e->value.items) {
      names.push_back(&n);
    }
  } else {
    m_diags.error(e->value.location, child_path(path, "source"),
                  "expected a source name or a non-empty list of them");
    return;
  }
  for (const Node* n : names) {
    if (!n->is_scalar() || !known.contains(n->scalar)) {
      m_diags.error(n->location, child_path(path, "source"),
                    fmt::format("unknown source '{}'; sources are the keys of 'sources:'", n->scalar));
    }
  }
}

} // namespace lockstep::envspec
