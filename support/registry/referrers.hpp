#pragma once
// Artifacts attached to an image in a registry (OCI image spec 1.1 "artifacts", distribution spec
// 1.1 "referrers"): an SBOM, a signature or a provenance statement pushed as a manifest whose
// `subject` is the image's manifest, with `artifactType` saying what it holds, an empty config
// (application/vnd.oci.empty.v1+json, "{}") and the content as its one layer.
//
// Finding them: a registry with the referrers API (GET /v2/NAME/referrers/DIGEST) indexes them
// itself and says so with an OCI-Subject header when the manifest is pushed. A registry without it
// (Debian's docker-registry 2.8) gets the distribution spec's fallback, the referrers tag schema:
// an image index under the tag "sha256-<hex of the subject>" listing every referrer, which the
// pusher reads, extends and pushes again. Readers try the API, then the tag.
//
// Signatures follow cosign's older convention, which containers/image (skopeo 1.9) reads and writes
// with `use-sigstore-attachments`: an OCI image manifest under the tag "sha256-<hex>.sig" whose
// layers are simple-signing payloads (application/vnd.dev.cosign.simplesigning.v1+json), each with
// its base64 signature in the annotation dev.cosignproject.cosign/signature.
#include "support/base/result.hpp"
#include "support/oci/oci.hpp"
#include "support/oci/registry_ref.hpp"
#include "support/registry/client.hpp"
#include "support/store/blob_store.hpp"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::registry {

inline constexpr std::string_view k_media_empty = "application/vnd.oci.empty.v1+json";

/// One artifact to attach.
struct Attachment {
  std::string artifact_type; ///< "application/spdx+json", "application/vnd.cyclonedx+json", ...
  std::string media_type;    ///< of the content blob (for an SBOM, the same)
  std::string content;
  std::map<std::string, std::string> annotations; ///< on the artifact manifest (and its index entry)
};

/// Where an attachment went.
struct Attached {
  oci::Descriptor manifest; ///< the artifact manifest (with its artifactType)
  bool tag_schema = false;  ///< indexed through the "sha256-<hex>" tag, the registry having no API
};

/// The manifest (or index) `ref` names in its registry, as the registry holds it: its media type,
/// digest (of the bytes; a pinned digest must match) and size. Signatures and referrers attach to
/// this digest. No such manifest is invalid_input.
Result<oci::Descriptor> resolve_manifest(const oci::RegistryRef& ref, const ClientOptions& options);

/// The tag the referrers tag schema lists `subject`'s referrers under: "sha256-<hex>".
std::string referrers_tag(const Digest& subject);

/// The artifact manifest of `attachment` for `subject` (deterministic bytes: same input, same digest).
std::string artifact_manifest(const oci::Descriptor& subject, const oci::Descriptor& content,
                              const Attachment& attachment);

/// Pushes `attachment` to `repo`'s repository (HOST/REPO; its tag is not used) as a referrer of
/// `subject`, and indexes it: by the registry itself when it has the referrers API, else under the
/// referrers tag (an existing index there is kept and extended; the same artifact is listed once).
Result<Attached> attach(const oci::RegistryRef& repo, const oci::Descriptor& subject,
                        const Attachment& attachment, const BlobStore& store, const ClientOptions& options);

/// The referrers of `subject` in `repo`'s repository whose artifactType is `artifact_type` (every
/// one for ""): from the referrers API, else the referrers tag; none when neither has any.
Result<std::vector<oci::Descriptor>> list_referrers(const oci::RegistryRef& repo, const Digest& subject,
                                                    std::string_view artifact_type,
                                                    const ClientOptions& options);

/// A referrer's content: its manifest (checked against the descriptor's digest, its subject
/// against `subject`), then its one layer (at most `max_size` bytes, checked against its digest).
/// A manifest that is not such an artifact is invalid_input; one over another subject is
/// check_failed naming both digests.
Result<std::string> fetch_referrer(const oci::RegistryRef& repo, const oci::Descriptor& referrer,
                                   const Digest& subject, std::uint64_t max_size,
                                   const ClientOptions& options);

inline constexpr std::string_view k_media_simple_signing = "application/vnd.dev.cosign.simplesigning.v1+json";
inline constexpr std::string_view k_annotation_cosign_signature = "dev.cosignproject.cosign/signature";

/// The tag of `image`'s signatures: "sha256-<hex>.sig".
std::string signature_tag(const Digest& image);

/// One signature attached to an image: its payload (digest checked) and base64 signature.
struct AttachedSignature {
  Digest layer;
  std::string payload;
  std::string signature; ///< base64, as stored; "" when the layer has none
};

/// The signatures attached to `image` in `repo`'s repository (none when the tag does not exist).
/// Layers of other media types are skipped; a payload over 1 MiB or not matching its digest is
/// invalid_input.
Result<std::vector<AttachedSignature>> fetch_signatures(const oci::RegistryRef& repo, const Digest& image,
                                                        const ClientOptions& options);

/// Adds a signature of `image` (its simple-signing `payload` and base64 `signature`) to the
/// signatures under its signature tag, keeping those there; the same payload and signature twice
/// is added once. Returns the digest of the signature manifest.
Result<Digest> add_signature(const oci::RegistryRef& repo, const Digest& image, std::string_view payload,
                             std::string_view signature, const BlobStore& store,
                             const ClientOptions& options);

} // namespace lockstep::registry
