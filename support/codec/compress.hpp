#pragma once
// Parallel, deterministic layer compression.
//
// The output bytes depend only on the input bytes and the fixed settings below, never on the
// number of threads (see docs/ARCHITECTURE.md, "Determinism"):
//  - gzip: the input is cut into fixed 1 MiB chunks; each chunk becomes one gzip member
//    (RFC 1952 allows members back to back; Go's, Docker's, zlib's and Python's readers read them)
//    compressed by libdeflate at a fixed level, header MTIME 0, no name, OS byte 3.
//  - zstd: one frame from libzstd with nbWorkers >= 1 (its multi-threaded mode, whose output is
//    the same for any worker count), level 1, no frame checksum (the blob's sha256 digest and the
//    diff_id already cover every byte). Level 1 is what keeps a cold zstd build within 0.3 x of
//    umoci's gzip time on two cores (bench/layer-build.sh); it still decompresses ~4 x faster than gzip.
#include "support/base/result.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace lockstep {

enum class Codec { gzip, zstd };

/// Fixed settings; changing any of them changes layer digests (bump k_layer_format_version).
inline constexpr std::size_t k_gzip_chunk_size = 1U << 20;
inline constexpr int k_gzip_level = 2;
inline constexpr int k_zstd_level = 1;

/// Receives bytes in order. Implementations throw Failure on error.
class ByteSink {
public:
  ByteSink() = default;
  virtual ~ByteSink() = default;
  ByteSink(const ByteSink&) = delete;
  ByteSink& operator=(const ByteSink&) = delete;
  virtual void write(const void* data, std::size_t size) = 0;
};

/// Compresses a stream on `threads` threads and writes the result, in order, to a sink (on a
/// writer thread). `tap`, if given, also sees every uncompressed byte, in order, on its own thread
/// (the layer builder hashes the tar stream there). write() and finish() are called from one
/// thread; they throw Failure (or rethrow a sink's exception) on error or interruption.
class ParallelCompressor final : public ByteSink {
public:
  ParallelCompressor(Codec codec, ByteSink& out, unsigned threads,
                     std::function<void(const void*, std::size_t)> tap = nullptr);
  ~ParallelCompressor() override;
  ParallelCompressor(const ParallelCompressor&) = delete;
  ParallelCompressor& operator=(const ParallelCompressor&) = delete;

  void write(const void* data, std::size_t size) override;
  /// Flushes everything; the sink has received the complete compressed stream afterwards.
  void finish();

  class Impl;

private:
  std::unique_ptr<Impl> m_impl;
};

/// The number of compression and hashing threads to use: what set_default_thread_count chose, else
/// all cores.
unsigned default_thread_count();
/// Sets what default_thread_count returns (the caller's setting; 0: all cores).
void set_default_thread_count(unsigned threads);

/// "libdeflate 1.14, zstd 1.5.4, libarchive 3.6.2": the libraries whose output bytes lockstep pins.
std::string codec_library_versions();

} // namespace lockstep
