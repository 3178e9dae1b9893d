#pragma once
// The schema of spec version 1: walks the merged node tree, validates every key and fills a Spec.
// The keys each map knows come from the spec's shape (envspec/load/spec_shape.hpp); what each value means,
// and the located message when it is wrong, is written here.
#include "envspec/load/canonical.hpp"
#include "envspec/load/options.hpp"
#include "envspec/spec/spec.hpp"
#include "envspec/yaml/diagnostics.hpp"
#include "envspec/yaml/node.hpp"

#include <filesystem>
#include <string_view>

namespace lockstep::envspec {

/// Validates the merged tree `root` of the spec `spec_file` into `spec` (everything but file, dir,
/// files, canonical and digest). Every problem is reported to `diags`; the walk never
/// stops at the first one.
void validate_spec(const Node& root, const std::filesystem::path& spec_file, const LoadOptions& options,
                   Spec& spec, Diagnostics& diags);

/// True for a key of the top-level map in this schema version (or one planned for a later one).
bool is_top_level_key(std::string_view key);

} // namespace lockstep::envspec
