#pragma once
// The one typed reader of lockstep's YAML: the spec's schema walker (envspec/load/schema.cpp), the stack
// recipes (envspec/stack/recipes.cpp), the CUDA driver table and the GPU recipe read their parsed nodes
// through it. Every problem is reported, located, into one Diagnostics and the reading goes on, so a
// broken file lists all its errors at once.
#include "envspec/yaml/diagnostics.hpp"
#include "envspec/yaml/node.hpp"

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

/// The words of a reader's messages. Specs and recipes have said two things differently since
/// before they shared a reader, and their suites check both:
/// - an unknown key: a spec names the closest known key ("did you mean 'labels'?") or the sorted
///   known keys, and tells YAML merge keys (`<<`) and keys of a later schema version apart; a recipe
///   lists its keys in the order the file kind defines them;
/// - a value that is not true or false: a spec quotes the scalar ("found 'yes'"), a recipe names
///   what it is ("found a string").
enum class Dialect { spec, recipe };

/// Typed, located access to parsed YAML nodes; every problem goes to one Diagnostics.
class YamlReader {
public:
  explicit YamlReader(Diagnostics& diags, Dialect dialect = Dialect::recipe)
      : m_diags(diags), m_dialect(dialect) {}

  /// Reports `message` at `location` for the key path `path`.
  void error(const SourceLocation& location, const std::string& path, std::string message);

  // ---- one value ------------------------------------------------------------------------------

  /// The scalar text of `v` (any scalar: "0755" stays "0755"); nullptr after reporting
  /// "expected a string, found ..." at `v`.
  const std::string* string(const Node& v, const std::string& path);
  /// Like string(), and an empty string is reported as "expected `what`, found an empty string".
  const std::string* nonempty_string(const Node& v, const std::string& path, std::string_view what);
  /// An unquoted true or false; nullopt after reporting anything else.
  std::optional<bool> boolean(const Node& v, const std::string& path);
  /// True when `v` is a map; else reports "expected `expected`, found ...".
  bool expect_map(const Node& v, const std::string& path, std::string_view expected = "a map");
  /// True when `v` is a list; else reports "expected `expected`, found ...".
  bool expect_list(const Node& v, const std::string& path, std::string_view expected = "a list");

  // ---- keys -----------------------------------------------------------------------------------

  /// Reports the key of `entry` (in the map at `path`) as unknown: the map knows `known`, and
  /// `later` are keys of a later schema version (Dialect::spec).
  void unknown_key(const MapEntry& entry, const std::string& path, const std::vector<std::string_view>& known,
                   const std::vector<std::string_view>& later = {});
  /// Reports every key of `map` that is not in `allowed`.
  void check_keys(const Node& map, const std::string& path, std::initializer_list<std::string_view> allowed);

  // ---- an entry of a map ----------------------------------------------------------------------

  /// The string under `key`; nullopt when absent (reported "missing key 'KEY'" if `required`) or
  /// not a string (reported).
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

protected:
  Diagnostics& m_diags;

private:
  Dialect m_dialect;
};

} // namespace lockstep::envspec
