#pragma once
// Writing images from blobs in the store: an OCI image layout directory, an OCI archive (a tar of
// a layout) and a docker-archive (`docker load` input). Outputs are published atomically: a layout
// is staged beside its target and swapped in; an archive is a temporary file renamed into place.
// Archives are deterministic: sorted members, uid/gid 0, mtime = the image epoch, fixed modes.
#include "support/base/result.hpp"
#include "support/oci/oci.hpp"
#include "support/store/blob_store.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lockstep::oci {

/// An image whose manifest, config and layers are all in the store.
struct StoredImage {
  Descriptor manifest;           ///< the manifest blob
  std::vector<Descriptor> blobs; ///< config, then layers (each in the store)
  std::string ref_name;          ///< tag for index.json's org.opencontainers.image.ref.name; may be empty
  std::string repo_tag;          ///< "name:tag" for docker-archive RepoTags
  std::int64_t epoch = 0;        ///< member mtimes in archives
  /// A multi-platform image: `manifest` is their index, `blobs` holds every platform's manifest,
  /// config and layers, and these are the platforms' images (a docker-archive's manifest.json
  /// lists each).
  std::vector<StoredImage> platform_images;
};

/// Writes (or replaces) the OCI layout directory `dir`. An existing `dir` that is not an OCI
/// layout (and not empty) is refused, so a typo never deletes unrelated files.
Result<void> write_oci_layout(const BlobStore& store, const StoredImage& image,
                              const std::filesystem::path& dir);
/// Writes (or replaces) an OCI archive file.
Result<void> write_oci_archive(const BlobStore& store, const StoredImage& image,
                               const std::filesystem::path& file);
/// Writes (or replaces) a docker-archive file: an OCI layout plus manifest.json, loadable by
/// `docker load` (graph-driver and containerd stores) and readable by skopeo.
Result<void> write_docker_archive(const BlobStore& store, const StoredImage& image,
                                  const std::filesystem::path& file);

/// "hello:latest" -> "docker.io/library/hello:latest" (Docker's normalisation of a familiar name).
std::string normalize_docker_reference(const std::string& repo_tag);

} // namespace lockstep::oci
