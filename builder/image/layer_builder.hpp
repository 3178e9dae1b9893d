#pragma once
// Turning a planned layer into a compressed blob in the store, or finding it in the layer cache.
//
// Cache: ROOT/records/layers/<fingerprint> holds the descriptor and diff_id of the blob a plan
// produced. A plan whose fingerprint is recorded and whose blob is still in the store is not
// re-tarred or re-compressed. A cold build streams: files -> tar (libarchive) -> sha256 (diff_id)
// -> parallel compression -> sha256 (digest) -> store.
#include "builder/image/layer_plan.hpp"
#include "support/base/log.hpp"
#include "support/base/result.hpp"
#include "support/codec/compress.hpp"
#include "support/oci/oci.hpp"
#include "support/oci/tar_writer.hpp"
#include "support/store/blob_store.hpp"

#include <functional>
#include <optional>
#include <string>

namespace lockstep::builder {

/// A layer blob in the store.
struct BuiltLayer {
  oci::Descriptor descriptor; ///< media type, digest and size of the compressed blob
  Digest diff_id;             ///< sha256 of the uncompressed tar
  bool cached = false;        ///< found in the layer cache (nothing was tarred or compressed)
};

/// The settings string entering fingerprints: codec, level, chunking and library versions.
std::string layer_settings(Codec codec);

/// The layer the cache recorded for `fingerprint`, if it is recorded and its blob is in the store.
std::optional<BuiltLayer> find_cached_layer(const Digest& fingerprint, const BlobStore& store, Codec codec);

/// Writes a layer's members, in order, into `tar` (regular file data through write_data), advancing
/// `progress` by the content bytes written. May throw Failure (unwrap) or return an error.
using LayerContentWriter = std::function<Result<void>(TarWriter& tar, log::Progress& progress)>;

/// Builds a layer whose members come from `write` (package archives, generated files), or reuses
/// the layer the cache recorded for `fingerprint`. The caller's fingerprint must cover every input
/// and k_layer_format_version; `cacheable` false skips recording it. `content_bytes` sizes the
/// progress line (0 when unknown).
Result<BuiltLayer> build_generated_layer(const Digest& fingerprint, bool cacheable, const BlobStore& store,
                                         Codec codec, const std::string& label, std::uint64_t content_bytes,
                                         const LayerContentWriter& write);

/// Builds the layer described by `plan` into `store` (or reuses it). `label` names it in progress output.
Result<BuiltLayer> build_layer(const LayerPlan& plan, const BlobStore& store, Codec codec,
                               const std::string& label);

} // namespace lockstep::builder
