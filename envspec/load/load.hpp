#pragma once
// Reading a spec: its file and every file it extends, merged, validated and canonicalised into the
// data model of spec/spec.hpp. The passes are in load.cpp.
#include "envspec/load/options.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"

#include <filesystem>
#include <string>

namespace lockstep::envspec {

/// Reads, merges, validates and resolves a spec. On failure the Error is invalid_input and its
/// message is the rendered list of every diagnostic found (Error::rendered is true).
Result<Spec> load_spec(const std::filesystem::path& file, const LoadOptions& options = {});

/// Parses and validates a spec from text (for tests); `file` names it in messages and is where
/// relative paths resolve from. `extends` is read from disk relative to `file`.
Result<Spec> load_spec_from_string(const std::string& text, const std::filesystem::path& file,
                                   const LoadOptions& options = {});

} // namespace lockstep::envspec
