#pragma once
// Reading an apt repository at lock time: the signed Release (InRelease, or Release + Release.gpg)
// is verified against the spec's keyring, then each Packages index is fetched (by hash when the
// repository supports it), checked against the sha256 and size the Release lists, and parsed.
// Nothing unverified is ever parsed beyond the signature check. See docs/lockfile.md.
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/debian/apt_packages.hpp"
#include "support/store/blob_store.hpp"

#include <string>
#include <vector>

namespace lockstep::builder {

/// One repository's verified package list.
struct AptRepoIndex {
  envspec::LockedRepo locked;       ///< what the lock records about it (each suite's Release date and digest)
  std::string pool_url;             ///< the URL a package's Filename is relative to (one pool for all suites)
  std::vector<AptPackage> packages; ///< every suite's, in the spec's suite order
};

/// Loads apt repository `repo` (number `index` in the spec, which is its priority) for Debian
/// architecture `arch` (packages of architecture `all` included): each of its suites, every one's
/// Release verified, their packages all tagged `index`. Indexes are cached in `store` by their
/// sha256, so only the Release files are downloaded when nothing changed.
Result<AptRepoIndex> load_apt_repo(const envspec::Repo& repo, int index, const std::string& arch,
                                   const BlobStore& store);

/// Decompresses an index (`.xz`, `.gz`, `.bz2`, `.lz4`, `.zst` or plain, told by `name`), refusing
/// more than `max_size` bytes of output. `size_hint` (the Release's size of the uncompressed index,
/// or 0) sizes the output up front.
Result<std::string> decompress_index(const std::string& data, const std::string& name, std::uint64_t max_size,
                                     std::uint64_t size_hint = 0);

} // namespace lockstep::builder
