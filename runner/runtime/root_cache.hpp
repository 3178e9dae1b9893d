#pragma once
// Unpacked root filesystems, shared through the blob store's directory.
//
// Layout:  STORE_ROOT/roots/<key>/rootfs      the unpacked root (never changed once published)
//          STORE_ROOT/roots/<key>/info.json   chain_id, diff_ids, layers, ownership, lockstep version
//          STORE_ROOT/roots/<key>.lock        flock(2)ed by the process building <key>
//          STORE_ROOT/roots/tmp/<key>-XXXXXX  builds in progress (a crashed one is swept after 24 h)
// <key> is "<ChainID hex>-<ownership>-v<format>": images that differ only in their config share a root.
// A root is built in roots/tmp, synced, and published by renaming its directory, so a reader sees a
// complete root or none; builders of the same key take the lock and re-check before building.
// See docs/unpack.md.
#include "runner/runtime/unpack.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/image_source.hpp"
#include "support/oci/oci.hpp"
#include "support/store/blob_store.hpp"

#include <filesystem>
#include <memory>
#include <vector>

namespace lockstep::runner {

/// A published root filesystem.
struct UnpackedRoot {
  std::filesystem::path rootfs; ///< STORE_ROOT/roots/<key>/rootfs
  Digest chain_id;              ///< the ChainID of its layers
  bool cached = false;          ///< true when it was already there (built by an earlier or concurrent call)
};

/// Whether `dir` (STORE_ROOT/roots/<key>, of an unpacked image or an extracted SIF) holds a
/// published root: info.json a regular file, rootfs a directory.
bool is_published(const std::filesystem::path& dir);

/// The OCI ChainID: ChainID(L0) = DiffID(L0), ChainID(L0..n) = sha256("ChainID(L0..n-1) DiffID(Ln)").
/// No layers give sha256 of the empty string.
Digest chain_id_of(const std::vector<Digest>& diff_ids);

/// A root being unpacked in the background from an image's first layers (start_root), for
/// unpacked_root() to finish with the layers built meanwhile: a build's packages over a base image
/// are written while the base unpacks. Dropping one waits for its thread and removes its directory.
class RootHead {
public:
  RootHead();
  ~RootHead();
  RootHead(RootHead&&) noexcept;
  RootHead& operator=(RootHead&&) noexcept;
  RootHead(const RootHead&) = delete;
  RootHead& operator=(const RootHead&) = delete;

  struct State;

private:
  friend Result<RootHead> start_root(const BlobStore& store, const std::vector<oci::Descriptor>& layers,
                                     const std::vector<Digest>& diff_ids, const UnpackOptions& options);
  friend Result<UnpackedRoot> unpacked_root(const BlobStore& store,
                                            const std::vector<oci::Descriptor>& layers,
                                            const std::vector<Digest>& diff_ids, const UnpackOptions& options,
                                            RootHead* head);
  std::unique_ptr<State> m_state;
};

/// Starts unpacking `layers` (in `store`) on another thread into a private build directory under
/// STORE_ROOT/roots/tmp. `store` must outlive the head.
Result<RootHead> start_root(const BlobStore& store, const std::vector<oci::Descriptor>& layers,
                            const std::vector<Digest>& diff_ids, const UnpackOptions& options);

/// The root filesystem of the given layers (blobs already in `store`), unpacked once into
/// STORE_ROOT/roots/<key>/rootfs and shared: built in a temp dir, published by rename; concurrent callers
/// are safe. A corrupt store blob is removed (and reported) so the next run fetches it again.
/// With `head` (whose layers begin `layers`, unpacked with the same options) the root is finished
/// from it: waited for, its errors returned, the remaining layers applied; a head that doesn't
/// begin `layers` is waited for and dropped.
Result<UnpackedRoot> unpacked_root(const BlobStore& store, const std::vector<oci::Descriptor>& layers,
                                   const std::vector<Digest>& diff_ids, const UnpackOptions& options,
                                   RootHead* head = nullptr);

/// Fetches an opened image's layers into `store` (ImageSource::fetch_blob) and returns unpacked_root() of
/// them. Nothing is fetched when the root is already published.
Result<UnpackedRoot> unpack_image(const BlobStore& store, oci::ImageSource& source,
                                  const oci::OpenedImage& image, const UnpackOptions& options);

} // namespace lockstep::runner
