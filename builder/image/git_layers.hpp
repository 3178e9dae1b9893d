#pragma once
// git sources (`copy: [{git: URL, rev: REV, to: PATH}]`) in the image: one layer per source, the
// tree of the locked commit, checked against the sha256 the lock recorded for its export.
// See docs/git-sources.md.
#include "builder/image/image_state.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"

#include <cstdint>
#include <filesystem>
#include <string>

namespace lockstep::builder {

/// Appends one layer per git `copy` item of `spec`, each from the commit `lock` pins for it. A
/// source whose content no longer matches the lock's sha256 is invalid_input.
Result<void> build_git_layers(const envspec::Spec& spec, const envspec::Lock& lock, ImageState& image);

} // namespace lockstep::builder
