#pragma once
// Images read from a registry (`docker://REF`): the manifest asked for with the four manifest media
// types, checked against the digest asked for (or the registry's Docker-Content-Digest), an index
// narrowed to one platform, and every blob downloaded straight into the content store, verified while
// it streams, several at once; a blob the store already has is never fetched again, whichever image it
// came from. docs/registry.md, "Pull".
#include "support/base/result.hpp"
#include "support/oci/image_source.hpp"
#include "support/registry/client.hpp"
#include "support/store/blob_store.hpp"

#include <memory>

namespace lockstep::registry {

/// Upper bound of a manifest or index body (the distribution project's own limit is 4 MiB).
inline constexpr std::uint64_t k_max_manifest_size = 4ULL << 20;

/// Opens any image reference: docker:// through the registry (blobs land in `store`), every local
/// transport through oci::ImageSource::open.
Result<std::unique_ptr<oci::ImageSource>> open_image(const oci::ImageRef& ref, const BlobStore& store,
                                                     const ClientOptions& options);

/// open_image with the store at `store_root` (opened only for a registry image) and
/// default_client_options().
Result<std::unique_ptr<oci::ImageSource>> open_image(const oci::ImageRef& ref,
                                                     const std::filesystem::path& store_root);

/// What a pull did.
struct PullStats {
  std::size_t blobs = 0;      ///< config and layers of the image
  std::size_t downloaded = 0; ///< of them, fetched now (the rest were in the store)
  std::uint64_t bytes = 0;    ///< downloaded bytes
};

/// Resolves `ref` to one image and fetches its config and layers into `store`.
Result<std::pair<oci::OpenedImage, PullStats>> pull(const oci::RegistryRef& ref, const BlobStore& store,
                                                    const oci::SelectOptions& select,
                                                    const ClientOptions& options);

} // namespace lockstep::registry
