// The `sources:` rule of recipe files (envspec/yaml/recipe_reader.hpp).
#include "envspec/yaml/recipe_reader.hpp"

#include <fmt/format.h>

#include <vector>

namespace lockstep::envspec {

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
