#pragma once
// Reading recipe files (recipes/**/*.yaml: the GPU passthrough list, the CUDA driver table):
// typed access to a parsed YAML map with every problem reported, located, into one Diagnostics,
// so a broken recipe lists all its errors at once. Every fact names its `source:`.
#include "envspec/diagnostics.hpp"
#include "envspec/node.hpp"

#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

/// Reads a recipe's map entries with location-aware errors.
class RecipeReader {
public:
  explicit RecipeReader(Diagnostics& diags) : m_diags(diags) {}

  /// Reports every key of `map` that is not in `allowed`.
  void check_keys(const Node& map, const std::string& path, std::initializer_list<std::string_view> allowed);

  /// The string under `key`; nullopt when absent (reported if `required`) or not a string (reported).
  std::optional<std::string> scalar(const Node& map, const std::string& path, std::string_view key,
                                    bool required = true);

  /// An unquoted true/false under `key`; nullopt when absent or malformed (reported).
  std::optional<bool> boolean(const Node& map, const std::string& path, std::string_view key);

  /// The items of the list under `key` (nullptr when absent, or not a list: reported).
  const std::vector<Node>* list(const Node& map, const std::string& path, std::string_view key);

  /// The strings of the list under `key`: nullopt when absent or not a list (reported); an item
  /// that is not a string is reported and left out.
  std::optional<std::vector<std::string>> string_list(const Node& map, const std::string& path,
                                                      std::string_view key);

  /// The entries of the map under `key` (nullptr when absent, or not a map: reported).
  const std::vector<MapEntry>* entries(const Node& map, const std::string& path, std::string_view key);

  /// The string a map entry holds (`entry` is one of entries()); nullopt when it is not a string
  /// (reported at the value, as `path`.KEY).
  std::optional<std::string> entry_string(const MapEntry& entry, const std::string& path);

  /// Reports `message` at the value of `key` in `map` (or at `map` when the key is absent) unless `ok`.
  void expect(bool ok, const Node& map, const std::string& path, std::string_view key,
              const std::string& message);

  /// The keys of the root's `sources:` map; reports a missing one, one that is not a map, and (unless
  /// `allow_empty`) an empty one.
  std::set<std::string, std::less<>> source_names(const Node& root, bool allow_empty);

  /// `source:` of `item` names one or more keys of `sources:` (`known`).
  void check_source(const Node& item, const std::string& path,
                    const std::set<std::string, std::less<>>& known);

protected:
  Diagnostics& m_diags;
};

} // namespace lockstep::envspec
