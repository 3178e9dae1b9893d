#pragma once
// A YAML document as a small tree of located nodes. Every node and every map key remembers the file,
// line and column it came from, so that diagnostics point into the right file even after `extends`
// merged several files into one tree.
#include "envspec/yaml/diagnostics.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

enum class NodeKind { null, scalar, sequence, map };

struct MapEntry;

/// One YAML node. Scalars keep their source text ("0755" stays "0755"); `quoted` tells a quoted or
/// block scalar ("1") from a plain one (1).
struct Node {
  NodeKind kind = NodeKind::null;
  std::string scalar;
  bool quoted = false;
  SourceLocation location;
  std::vector<Node> items;       ///< NodeKind::sequence
  std::vector<MapEntry> entries; ///< NodeKind::map, in source order, keys unique

  [[nodiscard]] bool is_map() const { return kind == NodeKind::map; }
  [[nodiscard]] bool is_sequence() const { return kind == NodeKind::sequence; }
  [[nodiscard]] bool is_scalar() const { return kind == NodeKind::scalar; }
  [[nodiscard]] bool is_null() const { return kind == NodeKind::null; }
  /// The entry with `key` in a map, or nullptr.
  [[nodiscard]] const MapEntry* find(std::string_view key) const;
  /// Removes the entry with `key` from a map; returns whether there was one.
  bool erase(std::string_view key);
};

/// One `key: value` pair of a map. A null value is located at its key.
struct MapEntry {
  std::string key;
  SourceLocation key_location;
  Node value;
};

/// "a map", "a list", "a string", "a number", "a boolean", "nothing": for "expected X, found Y".
std::string describe(const Node& node);

/// Parses one YAML document from `text` (the contents of `file`). Syntax errors, duplicate keys,
/// non-string keys and a second document are reported to `diags`. Returns nullopt when the text
/// could not be parsed at all; an empty document is a null node.
std::optional<Node> parse_yaml(std::string_view text, const std::filesystem::path& file, Diagnostics& diags);

/// "a.b" or "b" when `parent` is empty: how key paths are spelled in diagnostics.
std::string child_path(const std::string& parent, std::string_view key);
/// "a[3]".
std::string item_path(const std::string& parent, std::size_t index);

} // namespace lockstep::envspec
