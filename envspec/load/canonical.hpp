#pragma once
// The canonical form of a spec: the JSON its digest is computed over (docs/spec.md, "The spec digest").
#include "envspec/spec/spec.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace lockstep::envspec {

/// How a host path appears in the canonical form: relative to `spec_dir` (lexically) when it was
/// written relative, in whatever file; absolute when it was written absolute.
std::string canonical_path(const std::filesystem::path& resolved, const std::string& written,
                           const std::filesystem::path& spec_dir);

/// The canonical form of a validated spec: defaults applied, env and labels sorted by key, paths as
/// canonical_path(), no `extends`, no output paths. Serialised with dump() (compact, keys sorted).
nlohmann::json canonical_form(const Spec& spec);

} // namespace lockstep::envspec
