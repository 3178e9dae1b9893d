#pragma once
// OCI image-spec data types (descriptor, manifest, index, platform) with strict parsing and
// deterministic serialisation (compact JSON, keys sorted). Image configs stay nlohmann::json so
// that fields lockstep does not know are carried forward untouched.
#include "support/base/json.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::oci {

using json = nlohmann::json;

inline constexpr std::string_view k_media_index = "application/vnd.oci.image.index.v1+json";
inline constexpr std::string_view k_media_manifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr std::string_view k_media_config = "application/vnd.oci.image.config.v1+json";
inline constexpr std::string_view k_media_layer_tar = "application/vnd.oci.image.layer.v1.tar";
inline constexpr std::string_view k_media_layer_gzip = "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr std::string_view k_media_layer_zstd = "application/vnd.oci.image.layer.v1.tar+zstd";
inline constexpr std::string_view k_docker_manifest = "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr std::string_view k_docker_manifest_list =
    "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr std::string_view k_docker_config = "application/vnd.docker.container.image.v1+json";
inline constexpr std::string_view k_docker_layer_gzip = "application/vnd.docker.image.rootfs.diff.tar.gzip";
inline constexpr std::string_view k_docker_layer_tar = "application/vnd.docker.image.rootfs.diff.tar";

/// The most layers an image may have (a manifest's `layers`, a config's `rootfs.diff_ids`). Docker
/// builds stop at 127 and overlayfs mounts at about 500; a manifest listing a layer 20,000 times is
/// hostile work, refused when read.
inline constexpr std::size_t k_max_layers = 1000;

inline constexpr std::string_view k_annotation_ref_name = "org.opencontainers.image.ref.name";
inline constexpr std::string_view k_annotation_created = "org.opencontainers.image.created";
inline constexpr std::string_view k_annotation_base_digest = "org.opencontainers.image.base.digest";
inline constexpr std::string_view k_annotation_base_name = "org.opencontainers.image.base.name";
inline constexpr std::string_view k_annotation_revision = "org.opencontainers.image.revision";
inline constexpr std::string_view k_annotation_source = "org.opencontainers.image.source";
inline constexpr std::string_view k_annotation_title = "org.opencontainers.image.title";
inline constexpr std::string_view k_annotation_version = "org.opencontainers.image.version";
/// The annotation (OCI manifest) or label (SIF) naming the digest of the lock an image was built from.
inline constexpr std::string_view k_annotation_lock_digest = "dev.lockstep.lock.digest";
/// How many of an image's first layers are its base image's (lockstep writes it over an image base),
/// so readers can tell what the base brought from what the build added.
inline constexpr std::string_view k_annotation_base_layers = "dev.lockstep.base.layers";

/// Layer compression of a blob, from its media type.
enum class Compression { none, gzip, zstd };
/// The compression a layer media type implies, or an error for a type that is not a layer.
Result<Compression> layer_compression(std::string_view media_type);
/// True for manifest media types (OCI and Docker schema 2).
bool is_manifest_type(std::string_view media_type);
/// True for index media types (OCI index and Docker manifest list).
bool is_index_type(std::string_view media_type);

/// os/architecture[/variant], as in `platform: linux/amd64`.
struct Platform {
  std::string os;
  std::string architecture;
  std::string variant;

  /// Parses "os/arch[/variant]"; only known os and architecture names are accepted.
  static Result<Platform> parse(std::string_view text);
  /// This machine's platform: linux and the OCI name of uname's machine (x86_64 -> amd64,
  /// aarch64 -> arm64, ...); linux/amd64 when the machine is not one OCI names.
  static Platform host();
  [[nodiscard]] std::string str() const;
  friend bool operator==(const Platform&, const Platform&) = default;
};

/// A content descriptor (image-spec descriptor.md).
struct Descriptor {
  std::string media_type;
  Digest digest;
  std::int64_t size = 0;
  std::map<std::string, std::string> annotations;
  std::optional<Platform> platform;
  std::vector<std::string> urls;
  std::string artifact_type; ///< `artifactType` (OCI 1.1): in an index, the referrer's type; "" for none

  [[nodiscard]] json to_json() const;
  /// Strict: digest validated, size >= 0, types checked. `where` names the location in errors.
  static Result<Descriptor> from_json(const json& j, const std::string& where);
};

/// An image manifest (OCI, or Docker schema 2 which has the same shape).
struct Manifest {
  std::string media_type;    ///< may be empty: the field is optional in OCI
  std::string artifact_type; ///< `artifactType` (OCI 1.1): what an artifact manifest holds; "" for an image
  Descriptor config;
  std::vector<Descriptor> layers;
  std::optional<Descriptor> subject; ///< `subject` (OCI 1.1): the manifest this one refers to
  std::map<std::string, std::string> annotations;

  [[nodiscard]] std::string serialize() const;
  static Result<Manifest> parse(std::string_view bytes, const std::string& where);
};

/// An image index (OCI) or Docker manifest list.
struct Index {
  std::string media_type;
  std::vector<Descriptor> manifests;
  std::map<std::string, std::string> annotations;

  [[nodiscard]] std::string serialize() const;
  static Result<Index> parse(std::string_view bytes, const std::string& where);
};

/// The `diff_ids` of an image config, validated.
Result<std::vector<Digest>> config_diff_ids(const json& config, const std::string& where);

/// The labels of an image's runtime configuration (an image config's `config` member, or the whole of
/// a SIF's oci-config.json). Absent, null or a `runtime` that is not an object: none. A Labels that is
/// not an object of strings is refused, as the OCI image spec requires.
Result<std::map<std::string, std::string>> config_labels(const json& runtime, const std::string& where);

/// Parses JSON from an untrusted source, its nesting bounded (support/base/json.hpp).
using lockstep::parse_json;

/// "1970-01-01T00:00:00Z" for a Unix time (RFC 3339, UTC, no fraction).
std::string rfc3339(std::int64_t unix_seconds);

/// The length of the registry host that starts `ref` ("localhost:5000/x/y" -> 14), or 0 when the
/// first component is not a host (Docker's rule: it contains '.' or ':', or is "localhost").
std::size_t registry_host_length(std::string_view ref);

/// True if `host` is HOST[:PORT] as a registry host may be written (letters, digits, '.', '-'; a port of
/// at most 5 digits).
bool valid_registry_host(std::string_view host);
/// Docker's rule for the first component of an image name: it names a registry host when it contains
/// '.' or ':', or is "localhost".
bool looks_like_host(std::string_view first_component);
/// True if `s` is a valid repository name per the distribution spec.
bool valid_repository_name(std::string_view s);
/// True if `s` is a valid tag: [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}.
bool valid_tag(std::string_view s);

/// Docker's normalised form of NAME[:TAG]: "foo" -> "docker.io/library/foo:latest".
std::string normalize_docker_ref(std::string_view ref);
/// True if `ref` is NAME[:TAG] with an optional registry host (no digest).
bool valid_docker_ref(std::string_view ref);

} // namespace lockstep::oci
