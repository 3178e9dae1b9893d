#pragma once
// One layer blob read once, front to back: its bytes are counted and hashed while they stream
// (the descriptor's size and digest), decompressed (gzip: libdeflate member by member, zlib's
// streaming inflater for a member too large to hold; zstd: libzstd's streaming decoder; none),
// and the uncompressed bytes optionally hashed (the config's diff_id). Memory stays bounded
// whatever the layer's size: a fixed input window and one member's output, never a mapping of
// the blob or a private copy of it. Every reader of layers (verify, the SIF writer, TarReader's
// callers) goes through here, so a layer is decoded one way everywhere.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/oci.hpp"
#include "support/system/fs.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace lockstep::oci {

/// A blob's raw bytes in order (a file, a member of an archive); 0 at the end.
class BlobReader {
public:
  BlobReader() = default;
  virtual ~BlobReader() = default;
  BlobReader(const BlobReader&) = delete;
  BlobReader& operator=(const BlobReader&) = delete;
  BlobReader(BlobReader&&) = delete;
  BlobReader& operator=(BlobReader&&) = delete;

  virtual Result<std::size_t> read(void* data, std::size_t size) = 0;
  /// The open file the bytes come from, positioned at the blob's start before the first read, or -1
  /// when they don't come from a file of their own (an archive member, memory).
  [[nodiscard]] virtual int file_descriptor() const { return -1; }
};

/// A BlobReader over an open file (read from its current offset to its end).
std::unique_ptr<BlobReader> file_blob_reader(UniqueFd fd, std::string what);
/// A BlobReader over bytes in memory; they must outlive the reader.
std::unique_ptr<BlobReader> memory_blob_reader(std::string_view bytes);
/// Opens a regular file (no symlink at the last component) as a BlobReader.
Result<std::unique_ptr<BlobReader>> open_file_blob(const std::filesystem::path& path, std::string what);

/// What a LayerStream checks once the blob has been read to its end (max_out: while it streams).
struct LayerCheck {
  std::optional<Digest> digest;         ///< of the blob's bytes
  std::optional<std::uint64_t> size;    ///< of the blob's bytes
  std::optional<Digest> diff_id;        ///< of the uncompressed bytes
  std::optional<std::uint64_t> max_out; ///< uncompressed bytes beyond this fail (a decompression bomb)
};

/// The most a compressed layer of `blob_size` bytes may expand to: 100 times its size, and at least
/// 1 GiB. Far beyond what real layers do (3-10x); it stops a decompression bomb early.
constexpr std::uint64_t max_layer_expansion(std::uint64_t blob_size) {
  constexpr std::uint64_t k_factor = 100;
  constexpr std::uint64_t k_floor = 1ULL << 30;
  return blob_size > k_floor / k_factor ? blob_size * k_factor : k_floor;
}

/// How the blob is compressed: as the media type says, or recognised by its first bytes (gzip,
/// zstd, else an uncompressed tar).
enum class LayerCodec { none, gzip, zstd, detect };
LayerCodec layer_codec(Compression c);

class LayerStream {
public:
  /// `what` names the layer in every message ("oci:out: layer 2/3 (sha256:...)").
  ///
  /// `decoders`: threads that inflate gzip members ahead of the reader (a multi-member stream such
  /// as lockstep writes; one big member is inflated on the reader's thread). `auto_decoders` takes
  /// default_thread_count() when that is above 1; 0 decodes everything on the caller's thread.
  /// The bytes produced never depend on it.
  static constexpr unsigned auto_decoders = ~0U;
  static Result<LayerStream> open(std::unique_ptr<BlobReader> blob, LayerCodec codec, std::string what,
                                  LayerCheck check = {}, unsigned decoders = auto_decoders);
  ~LayerStream();
  LayerStream(LayerStream&&) noexcept;
  LayerStream& operator=(LayerStream&&) noexcept;
  LayerStream(const LayerStream&) = delete;
  LayerStream& operator=(const LayerStream&) = delete;

  /// The next piece of uncompressed data, valid until the next call; empty at the end, which is
  /// reached only after every byte of the blob was read and the checks passed.
  Result<std::span<const std::uint8_t>> next();
  /// Reads whatever is left (a tar's trailing blocks and padding count for the digests) and runs
  /// the checks. Idempotent.
  Result<void> finish();

  /// When reading failed above the stream (the tar inside is bad): the blob's own fault if it
  /// has one (reads the rest of the blob for its size and digest), else `e`. Later calls fail alike.
  Error blame(Error e);

  /// Raw blob bytes read so far (for progress).
  [[nodiscard]] std::uint64_t blob_bytes() const;
  /// Gzip members that were decoded ahead on the decoder threads (the rest, in order).
  [[nodiscard]] std::uint64_t members_decoded_ahead() const;
  /// Uncompressed bytes produced so far.
  [[nodiscard]] std::uint64_t bytes_out() const;
  [[nodiscard]] const std::string& what() const;

private:
  struct Impl;
  explicit LayerStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

} // namespace lockstep::oci
