#pragma once
// Internals shared by the image readers: image_internal.cpp (selection inside an OCI layout, the
// manifest and config checks, messages), image_dir.cpp (OCI layout directories), image_archive.cpp
// (OCI archives and docker-archives) and image_open.cpp (ImageSource::open, which picks one of
// them). Not part of the public support API.
#include "support/oci/image_source.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::oci::detail {

/// Upper bound for JSON blobs (index.json, manifests, configs, manifest.json).
inline constexpr std::uint64_t k_max_json_size = 8ULL << 20;

/// How index.json entries are matched against a requested tag.
enum class TagMatch {
  ref_name, ///< `org.opencontainers.image.ref.name` equals the tag (OCI layouts)
  docker,   ///< also `io.containerd.image.name` equal to NAME:TAG after Docker normalisation
};

/// Names an image in messages.
struct SourceNames {
  std::string location; ///< transport and path, e.g. "oci:/tmp/x"; blob-level messages
  std::string ref;      ///< the full reference, e.g. "oci:/tmp/x:latest"; selection messages
  std::string tag_hint; ///< how to name one image, e.g. "oci:/tmp/x:TAG"
  std::string ref_tag;  ///< the tag given in the reference (ImageRef::tag)
};

/// Picks one image from `index` (an OCI layout's index.json) as SelectOptions says, descends
/// nested indexes by platform, reads and verifies manifest and config through `source`.
Result<OpenedImage> resolve_in_layout(ImageSource& source, const Index& index, const SelectOptions& options,
                                      const SourceNames& names, TagMatch match);

/// Reads and checks the config of `image` (manifest already set): media type, digest, diff_ids
/// count, platform. Also applies the digest pin in `options`.
Result<void> finish_image(ImageSource& source, OpenedImage& image, const SelectOptions& options,
                          const SourceNames& names);

/// "blob D in LOCATION has digest G, expected D; the KIND is corrupt" (KIND: layout, archive).
Error blob_digest_mismatch(const Digest& expected, const Digest& got, const std::string& location,
                           std::string_view kind);
/// Refuses digests lockstep cannot verify (anything but sha256) and blobs above `max_size`.
Result<void> check_readable_blob(const Descriptor& desc, std::uint64_t max_size, const std::string& location);

/// Checks an `oci-layout` file: a JSON object with imageLayoutVersion "1.0.0".
Result<void> check_layout_marker(std::string_view bytes, const std::string& where);

/// "a, b, c" (the first 20, then "and N more"), or "none" for an empty list.
std::string join_list(const std::vector<std::string>& items);

/// Opens an OCI layout directory (image_dir.cpp).
Result<std::unique_ptr<ImageSource>> open_oci_dir(const ImageRef& ref);
/// Opens an OCI archive or a docker-archive (image_archive.cpp).
Result<std::unique_ptr<ImageSource>> open_archive(const ImageRef& ref);

} // namespace lockstep::oci::detail
