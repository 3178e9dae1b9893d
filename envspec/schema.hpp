#pragma once
// The schema of spec version 1: walks the merged node tree, validates every key and fills a Spec.
// The keys each map knows come from the spec's shape (envspec/spec_shape.hpp); what each value means,
// and the located message when it is wrong, is written here.
#include "envspec/canonical.hpp"
#include "envspec/diagnostics.hpp"
#include "envspec/node.hpp"
#include "envspec/spec.hpp"

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
