#pragma once
// The one way lockstep parses JSON it did not write itself: locks, image manifests, indexes and
// configs, run records, snapshots, cache records, package index pages and registry responses.
// Nesting is bounded before nlohmann::json builds anything: its parser keeps its own stack, but
// copying, comparing, dumping and destroying a value recurse once per level, so 100,000 nested
// brackets would overflow the stack long after parsing succeeded.
#include "support/base/result.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep {

/// The deepest nesting of arrays and objects a JSON input may have. Every format lockstep reads
/// needs fewer than 16 levels; 128 leaves room for labels and annotations that carry their own.
inline constexpr int k_max_json_depth = 128;

/// Where a JSON text first nests deeper than `max_depth` (counting brackets outside strings).
struct JsonDepthExcess {
  std::size_t offset = 0; ///< byte offset of the bracket that went one level too deep
  int line = 0;           ///< 1-based
  int column = 0;         ///< 1-based, in bytes
};

/// Scans `text` once without building anything; nullopt when nothing nests deeper than `max_depth`.
/// Malformed text is not diagnosed here (the parser does that); only the bracket depth is counted.
std::optional<JsonDepthExcess> find_json_depth_excess(std::string_view text,
                                                      int max_depth = k_max_json_depth);

/// obj[key] when `obj` is an object and that member is a string; else "" (never throws on hostile
/// input).
std::string json_string(const nlohmann::json& obj, const char* key);

/// Parses JSON from an untrusted source. Invalid JSON and nesting deeper than `max_depth` are
/// invalid input (exit 2); the message names `where` (a file, a blob, a URL).
Result<nlohmann::json> parse_json(std::string_view bytes, const std::string& where,
                                  int max_depth = k_max_json_depth);

} // namespace lockstep
