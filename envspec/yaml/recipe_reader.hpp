#pragma once
// Reading recipe files (recipes/**/*.yaml: the stack components, the GPU passthrough list, the CUDA
// driver table): the one typed YAML reader (envspec/yaml/yaml_reader.hpp) in its recipe dialect, plus the
// rule every recipe shares: each fact names its `source:`, a key of the file's `sources:` map.
#include "envspec/yaml/yaml_reader.hpp"

#include <functional>
#include <set>
#include <string>

namespace lockstep::envspec {

/// The typed reader of a recipe file, with its `sources:` checks.
class RecipeReader : public YamlReader {
public:
  explicit RecipeReader(Diagnostics& diags) : YamlReader(diags, Dialect::recipe) {}

  /// The keys of the root's `sources:` map; reports a missing one, one that is not a map, and (unless
  /// `allow_empty`) an empty one.
  std::set<std::string, std::less<>> source_names(const Node& root, bool allow_empty);

  /// `source:` of `item` names one or more keys of `sources:` (`known`).
  void check_source(const Node& item, const std::string& path,
                    const std::set<std::string, std::less<>>& known);
};

} // namespace lockstep::envspec
