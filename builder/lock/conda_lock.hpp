#pragma once
// The conda part of `lockstep lock` (docs/conda.md): the spec's conda channels read
// (conda_channel.hpp), `packages.conda` solved with conda's semantics (support/conda/solve.hpp)
// against the virtual packages the image offers, and every chosen package pinned in the lock by URL,
// sha256, md5, size and its whole index record, with the reason it is there.
#include "builder/lock/base_contents.hpp"
#include "builder/lock/lock_options.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/conda/index.hpp"
#include "support/store/blob_store.hpp"

#include <vector>

namespace lockstep::builder {

/// The virtual packages the image offers a conda solve (docs/conda.md, "Virtual packages"): __unix
/// and __linux (4.18, the oldest kernel lockstep's launch supports, unless overridden), __glibc from
/// the image's libc6 (the lock's, else the base image's), __archspec from the platform (its generic
/// microarchitecture, e.g. x86_64), __cuda from the lock's stack; then the spec's
/// `conda.virtual_packages` (a version replaces, "" leaves one out).
std::vector<conda::VirtualPackage>
conda_virtual_packages(const envspec::Spec& spec, const envspec::Lock& lock, const BaseMetadata* base);

/// Locks `spec.packages.conda` into `lock` (whose repos and earlier artifacts are set): conda
/// channels get their subdirs, one artifact per package is appended. The previous lock's records
/// are kept while they fit, unless `options` updates them. An unsatisfiable request is invalid_input
/// with the solver's explanation, the specs it rests on named with their locations.
Result<void> lock_conda(const envspec::Spec& spec, const BlobStore& store, const LockOptions& options,
                        const BaseMetadata* base, envspec::Lock& lock);

} // namespace lockstep::builder
