#pragma once
// `lockstep lock`: resolving a spec's packages and sources against their repositories into a Lock.
// See docs/lockfile.md for the rules (candidate choice, groups, --update).
#include "builder/lock/lock_options.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/registry/client.hpp"
#include "support/solver/pubgrub.hpp"
#include "support/store/blob_store.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace lockstep::builder {

/// Resolves `spec` into a lock. Network and tool failures are external errors; an impossible
/// request (unknown package, unsatisfiable dependency, conflict) is invalid_input with the chain.
Result<envspec::Lock> make_lock(const envspec::Spec& spec, const BlobStore& store,
                                const LockOptions& options);

/// A copy of `lock` whose relative URLs (local files under the spec's directory, recorded relative
/// to it) are made absolute `file://` URLs against `spec_dir`, for fetching.
envspec::Lock resolve_lock_urls(const envspec::Lock& lock, const std::filesystem::path& spec_dir);

/// A git source's URL or path as its spec resolves it (the string its git cache is keyed by): a
/// relative path (no scheme, no leading '/') becomes an absolute path under `spec_dir`; anything
/// else is returned as it is. resolve_lock_urls() writes the same place as a file:// URL.
std::string resolve_spec_path(const std::string& url, const std::filesystem::path& spec_dir);

/// Where a snapshot archive keeps deb `a`'s pool file (envspec::snapshot_file_url): the snapshot
/// service of its repository from `bases` (lock repository URL -> the spec's snapshot_url), else a
/// known one (envspec::known_snapshot_base), at its repository's Release date (several suites: the
/// last one's, their dates being close). "" when there is none, or it is `a`'s own URL.
std::string deb_snapshot_url(const envspec::Lock& lock, const envspec::LockedArtifact& a,
                             const std::map<std::string, std::string>& bases);

/// Refuses, before anything is read, every local file `lock` names (a relative URL, an absolute path
/// or a file: URL of a deb or wheel) that does not lead, through symlinks, inside the spec's directory
/// or a local repository the spec names (envspec::local_roots). invalid_input listing each such
/// artifact and saying what to do. Git artifacts are fetched from the spec's own URL, confined when
/// the spec was loaded.
Result<void> check_lock_local_files(const envspec::Lock& lock, const envspec::Spec& spec);

/// The layer group a Debian package belongs to when it is requested by name: "mpi", "cuda",
/// "python" or "app" (base packages are those of the Debian base's closure).
std::string apt_group_of(const std::string& name);

/// For `lock --check`: when the spec's image base now names another manifest than `lock` records
/// (a tag that moved, a local layout rebuilt), the line saying so; nullopt when it names the same
/// one. Reading the reference may fail (an unreachable registry): that is the error.
Result<std::optional<std::string>> base_change(const envspec::Spec& spec, const envspec::Lock& lock,
                                               const BlobStore& store, const registry::ClientOptions& client);

/// Lines describing how `after` differs from `before` ("~ libc6 2.36-9 -> 2.36-10", "+ htop 3.2.2-2").
std::vector<std::string> describe_lock_changes(const envspec::Lock& before, const envspec::Lock& after);

} // namespace lockstep::builder
