#pragma once
// A lock's Python wheels in the image: one layer ("python packages") after the Debian packages and
// before git sources and the copy layer, holding every `wheel` artifact installed (without pip) into
// Debian's site directory for local packages, /usr/local/lib/python3.X/dist-packages, with scripts
// in /usr/local/bin. Wheels are fetched into the store (size and sha256 checked against the lock)
// and verified against their own RECORD while written. See docs/wheels.md.
#include "builder/image/image_state.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"

namespace lockstep::builder {

/// Fetches and installs every `wheel` artifact of `lock` into one layer appended to `image` (none
/// when the lock has no wheels). The target Python comes from the lock's debs (python_target). A
/// tampered download, a wheel that does not match its RECORD or the lock's name and version, or
/// two wheels installing the same file (both named) is invalid_input; nothing is published then.
Result<void> build_wheel_layer(const envspec::Spec& spec, const envspec::Lock& lock, ImageState& image);

} // namespace lockstep::builder
