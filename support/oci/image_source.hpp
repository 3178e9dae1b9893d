#pragma once
// Reading existing images: an OCI layout directory, an OCI archive (a tar of a layout) or a
// docker-archive (`docker save` output: manifest.json, with or without an OCI layout inside).
// Every byte read is hostile until verified: digests are validated before they become paths,
// blob sizes and digests are checked while streaming, JSON is size-bounded, archive member names
// never resolve outside the archive.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/layer_stream.hpp"
#include "support/oci/oci.hpp"
#include "support/oci/registry_ref.hpp"
#include "support/store/blob_store.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::oci {

/// A skopeo-style image reference.
struct ImageRef {
  /// docker: an image in a registry; oras: a SIF stored in a registry as an OCI artifact (both are
  /// opened through registry::open_image, support/registry).
  enum class Transport { oci_dir, oci_archive, docker_archive, docker, oras };
  Transport transport = Transport::oci_dir;
  std::filesystem::path path;
  /// `oci:DIR:TAG` / `oci-archive:FILE:TAG` (a ref.name), or the NAME[:TAG] of
  /// `docker-archive:FILE:NAME[:TAG]` (a RepoTag); empty if none
  std::string tag;
  RegistryRef remote; ///< Transport::docker and Transport::oras

  /// Parses "oci:DIR[:TAG]", "oci-archive:FILE[:TAG]", "docker-archive:FILE[:NAME[:TAG]]",
  /// "docker://REF" and "oras://REF" (RegistryRef). A bare path or an unknown transport is refused
  /// with the accepted forms.
  static Result<ImageRef> parse(std::string_view text);
  /// The reference as text; parse(str()) gives back the same reference.
  [[nodiscard]] std::string str() const;
  /// True for the registry transports (docker://, oras://).
  [[nodiscard]] bool is_remote() const {
    return transport == Transport::docker || transport == Transport::oras;
  }
};

/// How to pick one image out of a layout or archive that may hold several.
struct SelectOptions {
  std::string tag;              ///< match `org.opencontainers.image.ref.name` (overrides ImageRef::tag)
  std::optional<Digest> digest; ///< require this manifest digest
  /// for an index: the entry for this platform (default Platform::host()); when set, the chosen
  /// image's config must also be for it
  std::optional<Platform> platform;
};

/// One image, resolved down to its manifest and config (both verified against their digests).
struct OpenedImage {
  Digest manifest_digest; ///< sha256 of manifest_bytes
  std::string manifest_bytes;
  Manifest manifest;
  /// The manifest's mediaType, or (the field is optional in OCI) that of the descriptor naming it.
  std::string manifest_media_type;
  std::string config_bytes;
  json config;
  std::vector<Digest> diff_ids; ///< from the config; same count as manifest.layers
  Platform platform;            ///< from the config
  std::string ref_name;         ///< the ref.name/RepoTag it was selected by, if any
  /// True when the manifest was synthesised (legacy docker-archive without index.json); then
  /// manifest_digest is not a registry digest.
  bool synthesized_manifest = false;
  /// The image index it was chosen from by platform (the top one of a multi-platform layout or
  /// archive), or nullopt: what identifies the image whatever node's platform picks from it.
  std::optional<Descriptor> index;
};

/// A readable image location.
class ImageSource {
public:
  virtual ~ImageSource() = default;
  ImageSource() = default;
  ImageSource(const ImageSource&) = delete;
  ImageSource& operator=(const ImageSource&) = delete;

  /// Opens the local location named by `ref` (validates the layout marker / archive structure).
  /// Registry references are internal errors here: they open through registry::open_image.
  static Result<std::unique_ptr<ImageSource>> open(const ImageRef& ref);

  /// Picks one image (see SelectOptions). Errors name what was available when nothing matches.
  virtual Result<OpenedImage> resolve(const SelectOptions& options) = 0;
  /// Reads a blob of at most `max_size` bytes, verifying its digest and size.
  virtual Result<std::string> read_blob(const Descriptor& desc, std::uint64_t max_size) = 0;
  /// Copies a blob into the store, verifying digest and size while streaming; a no-op if the
  /// store already has it. Blobs of a synthesised manifest are known once resolve() returned it.
  virtual Result<void> fetch_blob(const Descriptor& desc, const BlobStore& store) = 0;
  /// The blob's bytes where they lie, for one front-to-back read (no copy); the caller checks
  /// digest and size while reading (LayerStream does). Refuses digests lockstep cannot verify.
  virtual Result<std::unique_ptr<BlobReader>> open_blob(const Descriptor& desc) = 0;
};

} // namespace lockstep::oci
