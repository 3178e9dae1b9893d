#pragma once
// `lockstep lock` for `packages.pip`: the requirements (ranges, pins, requirements files, the
// stack's pins) are resolved with their dependencies by PubGrub (wheel_resolve.hpp) over the spec's
// indexes and wheelhouses (first repository that has a project), for the image's Python, and each
// chosen wheel becomes a `kind: "wheel"` artifact with URL, size, sha256 and the chain of
// requirements that brought it in. The target interpreter and platform come from the image's Debian
// packages in the lock (python3.X, libc6). See docs/python-resolver.md and docs/wheels.md.
#include "builder/lock/base_contents.hpp"
#include "builder/lock/lock_options.hpp"
#include "builder/lock/python_target.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/oci/oci.hpp"
#include "support/store/blob_store.hpp"

#include <string>

namespace lockstep::builder {

/// Locks `spec.packages.pip` into `lock` (whose debs, for the target Python, are already there),
/// appending one `wheel` artifact per project of the resolution. Invalid requirements are reported
/// together as spec diagnostics; an unsatisfiable request is invalid_input with the derivation,
/// located at the request it rests on; an index without sha256 is invalid_input; network failures
/// are external. With `options.previous`, its wheels are the only candidates of their projects
/// first (nothing is read but new projects' pages), then preferred when that fails; `options.update`
/// names projects to move. Over a base image (`base`), the distributions in the target Python's
/// site directories are candidates too, preferred; a wheel that shadows one says so in its reason.
Result<void> lock_wheels(const envspec::Spec& spec, envspec::Lock& lock, const BlobStore& store,
                         const LockOptions& options, const BaseMetadata* base = nullptr);

} // namespace lockstep::builder
