#pragma once
// `lockstep vendor` (docs/vendor.md): every file a lock names — each deb, wheel and conda package, the base
// image's manifest, config and layers, and the lock itself — saved where a later build can fetch
// them without upstream: a directory (DIR/blobs/sha256/<hex>, indexed by DIR/lockstep-vendor.json)
// or a registry repository (each file a blob, all under one artifact manifest). A build given the
// place as a mirror (support/net/mirror.hpp) reads them from there.
#include "envspec/lock/lockfile.hpp"
#include "support/base/result.hpp"
#include "support/oci/registry_ref.hpp"
#include "support/registry/client.hpp"
#include "support/store/blob_store.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace lockstep::builder {

/// One file a lock needs.
struct VendoredFile {
  Digest sha256;
  std::uint64_t size = 0;
  std::string kind; ///< "deb", "wheel", "conda", "git", "recipes", "image" (base image blobs), "lock"
  std::string name; ///< "attr 1:2.5.1-4 amd64", "debian:bookworm layer 1", "lockstep.lock"
  std::string url;  ///< where it came from ("" for the lock)
};

/// What vendoring did.
struct VendorResult {
  std::vector<VendoredFile> files;
  std::size_t written = 0; ///< files newly placed (the others were there)
  std::uint64_t bytes = 0; ///< their bytes
  std::string where;       ///< "dir:/srv/vendor", "docker://reg/team/vendor:lock-..."
};

/// Puts every file `lock` (whose text is `lock_text`) needs into `store`, fetching what it lacks from
/// the mirrors and upstream as a build would: relative URLs against `spec_dir`, local files only
/// inside `local_roots`. The other functions take the same arguments.
Result<std::vector<VendoredFile>> gather_lock_files(const envspec::Lock& lock, const std::string& lock_text,
                                                    const BlobStore& store,
                                                    const std::filesystem::path& spec_dir,
                                                    const std::vector<std::filesystem::path>& local_roots,
                                                    const registry::ClientOptions& options);

/// Vendors into a directory: DIR/blobs/sha256/<hex> (hard links to the store where possible) and
/// DIR/lockstep-vendor.json, merged with what the directory already indexes.
Result<VendorResult> vendor_to_dir(const envspec::Lock& lock, const std::string& lock_text,
                                   const BlobStore& store, const std::filesystem::path& spec_dir,
                                   const std::vector<std::filesystem::path>& local_roots,
                                   const std::filesystem::path& dir, const registry::ClientOptions& options);

/// Vendors into a registry repository: every file a blob, listed by an artifact manifest
/// (artifactType application/vnd.lockstep.vendor.v1+json) tagged `target`'s tag, or
/// "lock-<first 16 hex of the lock's digest>".
Result<VendorResult> vendor_to_registry(const envspec::Lock& lock, const std::string& lock_text,
                                        const BlobStore& store, const std::filesystem::path& spec_dir,
                                        const std::vector<std::filesystem::path>& local_roots,
                                        const oci::RegistryRef& target,
                                        const registry::ClientOptions& options);

} // namespace lockstep::builder
