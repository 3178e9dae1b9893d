#pragma once
// Pushing an image to a registry (docs/registry.md, "Push"): every blob the registry lacks is
// uploaded (HEAD first; a cross-repository mount when lockstep knows another repository of the same
// registry holds it; a monolithic PUT for small blobs, PATCH chunks of at least OCI-Chunk-Min-Length
// for large ones, resumed from the registry's Range after a dropped connection), several at once;
// only then the manifest, with its exact bytes and content type, under every tag asked for. The
// digest in the registry is the digest lockstep printed locally.
#include "support/base/result.hpp"
#include "support/oci/image_source.hpp"
#include "support/registry/client.hpp"
#include "support/store/blob_store.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace lockstep::registry {

/// What a push did.
struct PushStats {
  std::size_t blobs = 0;    ///< config and layers
  std::size_t uploaded = 0; ///< sent now
  std::size_t mounted = 0;  ///< mounted from another repository
  std::size_t present = 0;  ///< already in the repository
  std::uint64_t bytes = 0;  ///< uploaded bytes
  /// The OCI-Subject header the registry answered the manifest PUT with: a registry with the
  /// referrers API (OCI distribution 1.1) names the subject it indexed. "" otherwise.
  std::string oci_subject;
};

/// One manifest (or any blob-referencing document) and the blobs it needs.
struct PushContent {
  std::string manifest_bytes; ///< pushed byte for byte
  std::string media_type;     ///< its Content-Type
  std::vector<oci::Descriptor> blobs;
};

/// Where a push to `target` puts the manifest: its tag, or its digest when it names only a digest.
std::string push_reference(const oci::RegistryRef& target);

/// Pushes `content`, whose blobs `source` can read, to `target` and each of `tags` (target's own tag
/// or digest included). Returns the manifest digest the registry holds.
Result<std::pair<Digest, PushStats>> push(oci::ImageSource& source, const PushContent& content,
                                          const oci::RegistryRef& target,
                                          const std::vector<std::string>& tags, const BlobStore& store,
                                          const ClientOptions& options);

/// Pushes `content` to `target`'s repository under its own digest, with no tag: an image that an
/// index names, pushed before the index. Returns the reference it now has (REPO@DIGEST).
Result<std::pair<oci::RegistryRef, PushStats>>
push_by_digest(oci::ImageSource& source, const PushContent& content, const oci::RegistryRef& target,
               const BlobStore& store, const ClientOptions& options);

/// A source of blobs for push(): the files in `files` by digest, else the blobs of `store`.
std::unique_ptr<oci::ImageSource> local_blobs(std::map<Digest, std::filesystem::path> files,
                                              const BlobStore& store);

/// Remembers that `repository` of `host` holds `digest` (records/registry-blobs in the store), so a
/// later push to another repository of that registry can mount it instead of uploading.
void remember_blob(const BlobStore& store, const std::string& host, const std::string& repository,
                   const Digest& digest);

} // namespace lockstep::registry
