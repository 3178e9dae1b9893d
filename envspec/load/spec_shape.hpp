#pragma once
// The shape of lockstep.yaml (schema version 1), written once: every key with its type, whether it
// is required, its allowed values or pattern and a line of documentation, map by map. Everything
// else that knows the spec's keys reads them from here:
// - the schema walker (envspec/load/schema.cpp): the known keys of each map ("did you mean ..."), and the
//   keys of a later schema version;
// - the canonical form (envspec/load/canonical.cpp): which top-level keys enter the digest, in this order;
// - `extends` merging (envspec/load/merge.cpp): the lists that replace instead of append;
// - `lockstep schema`: the JSON Schema editors check specs with (docs/lockstep.schema.json);
// - the tests: every key is handled by the walker and mentioned in docs/spec.md.
// The typed data stays the structs of envspec/spec/spec.hpp; what a value means is the walker's job.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <string_view>
#include <vector>

namespace lockstep::envspec::shape {

/// What a value is.
enum class Kind {
  scalar, ///< a YAML scalar (lockstep keeps its text); `types` lists the typed readings the spec means
  list,   ///< a sequence of `items`
  map,    ///< a map with the fixed `keys`
  dict,   ///< a map from any key matching `key_pattern` to `values`
  one_of, ///< exactly one of `forms`
};

/// The typed readings of a scalar that the spec means, as an editor reads YAML (the YAML 1.2 core
/// schema: `0755` an integer, `12.1` a number, `true` a boolean, `yes` a string). lockstep itself
/// reads every scalar as its text, so `cuda: 12.1` and `cuda: "12.1"` mean the same to it.
struct Types {
  bool string = true;
  bool integer = false;
  bool number = false; ///< any number, integers included
  bool boolean = false;
};

inline constexpr Types k_string{};
inline constexpr Types k_boolean{.string = false, .boolean = true};
inline constexpr Types k_integer{.string = false, .integer = true};
/// A word that may be written as a number: `owner: 1000`, `mode: 0755`, `rev: 1234567`.
inline constexpr Types k_word{.integer = true};
/// A version that may be written unquoted: `cuda: 12.1`.
inline constexpr Types k_version{.number = true};
/// Any scalar: environment and label values, argv items, shell commands.
inline constexpr Types k_any{.number = true, .boolean = true};

struct Shape;

/// Whether a key must be given.
enum class Presence {
  optional,
  required,
  later, ///< a key planned for a later schema version: rejected as "not supported ... yet"
};

/// How `extends` merges two values of the key (docs/spec.md, "extends").
enum class Merge {
  deep,    ///< maps key by key, lists appended, anything else replaced
  replace, ///< replaced as a whole (argv lists: appending one to another is never meant)
};

/// One key of a map.
struct Key {
  std::string_view name{};
  const Shape* shape = nullptr;
  std::string_view doc{};
  Presence presence = Presence::optional;
  Merge merge = Merge::deep;
  bool in_digest = true; ///< part of the canonical form (docs/spec.md, "The spec digest")
};

/// The shape of one value.
struct Shape {
  Kind kind = Kind::scalar;
  /// The name of a shape shared by several keys: it becomes a `$defs` entry of the JSON Schema.
  std::string_view name{};
  std::string_view doc{};

  Types types{};                          ///< scalar
  std::string_view pattern{};             ///< scalar: an ECMA-262 regular expression a string must match
  std::vector<std::string_view> values{}; ///< scalar: the only values allowed, as written in YAML
  bool non_empty = false;                 ///< scalar: not ""; list: at least one item
  std::size_t max_length = 0;             ///< scalar: at most this many characters (0: no limit)

  const Shape* items = nullptr; ///< list

  std::vector<Key> keys{}; ///< map, in canonical order

  std::string_view key_pattern{}; ///< dict: what its keys match ("" for any non-empty key)
  const Shape* value = nullptr;   ///< dict: every value

  std::vector<const Shape*> forms{}; ///< one_of
};

/// The named shapes of the spec, for the code that reads one map of it.
struct Shapes {
  Shape spec;         ///< the top-level map
  Shape base;         ///< `base`: scratch, {oci: PATH, tag: TAG}, {image: REF} or {debian: SUITE, ...}
  Shape repo_apt;     ///< an apt repository in `repos` (with a suite, several suites, or flat)
  Shape repo_pypi;    ///< a Python package index in `repos`
  Shape repo_wheels;  ///< a wheelhouse in `repos`
  Shape repo_conda;   ///< a conda channel in `repos`
  Shape conda;        ///< `conda`
  Shape packages;     ///< `packages`
  Shape requirements; ///< a `packages.pip` item that imports a requirements file
  Shape pyproject;    ///< a `packages.pip` item that imports a pyproject.toml
  Shape conda_env;    ///< a `packages.pip` item that imports a conda environment.yml
  Shape extras_list;
  Shape extra_name;
  Shape stack;         ///< `stack`
  Shape stack_recipes; ///< `stack.recipes`
  Shape copy_item;     ///< a `copy` item: host files or a git source
  Shape run_step;      ///< a `run` item written as a map
  Shape outputs;       ///< `outputs`
};

/// The spec's shapes (built once, on first use).
const Shapes& shapes();

/// The top-level map of lockstep.yaml.
inline const Shape& spec() {
  return shapes().spec;
}

/// The key `name` of a map, or of any map form of a one_of; nullptr when there is none.
const Key* find_key(const Shape& shape, std::string_view name);

/// The keys a map knows (of a one_of: of all its map forms, first seen first), without the keys of a
/// later schema version.
std::vector<std::string_view> key_names(const Shape& shape);

/// The keys of `shape` planned for a later schema version.
std::vector<std::string_view> later_key_names(const Shape& shape);

/// The JSON Schema (draft 2020-12) of lockstep.yaml, generated from the shapes: what
/// `lockstep schema` prints and docs/lockstep.schema.json holds. Its keys keep a fixed order, so the
/// same lockstep always prints the same bytes.
nlohmann::ordered_json json_schema();

} // namespace lockstep::envspec::shape
