#pragma once
// `platforms: [linux/amd64, linux/arm64]`: one lock for several platforms. Each platform is solved
// on its own, as the spec would be with `platform:` alone (Debian's binary-ARCH indexes, the
// platform's wheel tags and conda subdir, the base image's manifest for it), then the results are
// merged: an artifact every platform uses (an `Architecture: all` deb, a pure-Python wheel, a git
// source) is written once, the others name their platforms. docs/lockfile.md, "Several platforms".
#include "builder/lock/lock_options.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/store/blob_store.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::builder {

/// How one platform is locked (make_lock, for a spec of that platform alone).
using LockOnePlatform =
    std::function<Result<envspec::Lock>(const envspec::Spec&, const BlobStore&, const LockOptions&)>;

/// Locks every platform of `spec` (spec.platforms, two or more) with `lock_one` and merges the
/// results. A platform whose solve fails is named in the error, with those that resolved; the
/// packages the spec requests by name must resolve to the same version on every platform (a
/// Debian binNMU suffix, `+bN`, aside), else the error names both platforms and versions.
Result<envspec::Lock> lock_platforms(const envspec::Spec& spec, const BlobStore& store,
                                     const LockOptions& options, const LockOnePlatform& lock_one);

/// A previous lock as it was for `platform` alone (its share of a multi-platform lock, its inputs
/// those of a spec of that platform), so re-locking keeps that platform's versions; nullopt when
/// it has no such platform.
std::optional<envspec::Lock> previous_for_platform(const std::optional<envspec::Lock>& previous,
                                                   const std::string& platform);

/// Merges per-platform locks (one per platform, in `platforms` order) into one lock for them all.
/// Repositories must agree (the same Release files); conda channels merge their subdirs.
Result<envspec::Lock> merge_platform_locks(const std::vector<std::string>& platforms,
                                           std::vector<envspec::Lock> locks);

} // namespace lockstep::builder
