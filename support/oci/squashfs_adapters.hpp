#pragma once
// The C adapters lockstep gives libsquashfs (squashfs-tools-ng), shared by the squashfs writer
// (squashfs.cpp) and the extractor (squashfs_extract.cpp): owning pointers for its objects, its
// error codes as text, an sqfs_file_t over a region of an open file (the squashfs partition of a
// SIF), and two sqfs_compressor_t: gzip blocks from libdeflate, and a wrapper that stores a block
// uncompressed when it doesn't shrink. Not part of the public support API.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sqfs/compressor.h>
#include <sqfs/inode.h>
#include <sqfs/io.h>
#include <sqfs/predef.h>
#include <string>

namespace lockstep::squashfs_detail {

/// The size of the buffers file data is copied through.
inline constexpr std::size_t k_io_buffer = 1U << 20;

/// Destroys a libsquashfs object (sqfs_destroy).
struct SqfsDeleter {
  void operator()(void* p) const { sqfs_destroy(p); }
};
template <typename T> using SqfsPtr = std::unique_ptr<T, SqfsDeleter>;

/// Frees what libsquashfs allocated with malloc (inodes, directory entries).
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); } // NOLINT(cppcoreguidelines-no-malloc)
};
using InodePtr = std::unique_ptr<sqfs_inode_generic_t, FreeDeleter>;

/// A libsquashfs error code (SQFS_ERROR_*) as text: "corrupted data".
std::string sqfs_error_text(int code);

/// An sqfs_file_t over the region of the open file `fd` that starts at `base` and is `size` bytes
/// long: writes extend it; reads past its end fail. The file descriptor stays the caller's.
SqfsPtr<sqfs_file_t> make_offset_file(int fd, std::int64_t base, std::uint64_t size);
/// The errno of the last failed read, write or truncate of a file from make_offset_file (0: none).
int offset_file_error(const sqfs_file_t* file);

/// A gzip compressor over libdeflate at `level` (zlib streams, as squashfs requires); nullptr when
/// libdeflate can't allocate one.
sqfs_compressor_t* make_deflate_compressor(int level, std::uint32_t block_size);
/// Wraps `inner` (owned from now on) so that a block that doesn't shrink is stored uncompressed.
sqfs_compressor_t* make_shrink_only(sqfs_compressor_t* inner);

} // namespace lockstep::squashfs_detail
