#pragma once
// squashfs images: writing them from OCI layers (libsquashfs from squashfs-tools-ng for the data
// blocks, tables and superblock; the tree, inode and directory serialisation here) and extracting
// them safely. docs/sif.md explains the choices; the determinism rules are those of
// docs/ARCHITECTURE.md: the bytes depend on the input and the options, never on the thread count,
// the clock, the umask or the locale.
#include "support/base/result.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep {

namespace log {
class Progress;
}

/// The block compressor of a squashfs image.
enum class SquashfsCompressor { gzip, xz, zstd, lz4 };

/// "gzip", "xz", "zstd" or "lz4".
std::string_view squashfs_compressor_name(SquashfsCompressor compressor);
/// The compressor named `name`, or nullopt.
std::optional<SquashfsCompressor> parse_squashfs_compressor(std::string_view name);

/// Fixed settings of the writer. gzip is libdeflate at this level (zlib streams, as squashfs
/// requires), chosen to match `mksquashfs -comp gzip` (zlib level 9) in size at several times
/// its speed; zstd and xz use libsquashfs's codecs at these levels; lz4 its default.
inline constexpr std::uint32_t k_squashfs_block_size = 128U * 1024U;
inline constexpr int k_squashfs_gzip_level = 6;
inline constexpr int k_squashfs_zstd_level = 15;
inline constexpr int k_squashfs_xz_level = 6;

/// What an image's bytes depend on besides its content.
struct SquashfsOptions {
  SquashfsCompressor compressor = SquashfsCompressor::gzip;
  /// The superblock time; every inode time is clamped to [0, epoch].
  std::int64_t epoch = 0;
  /// Compression threads; 0 means default_thread_count(). Never changes the bytes.
  unsigned threads = 0;
  /// Drawn on a terminal while layers are read (total: the layers' byte count), or nullptr.
  log::Progress* progress = nullptr;
};

/// "squashfs v4 gzip level 8 block 131072 (libsquashfs 1.2.0, libdeflate 1.14)": every setting and
/// library version the bytes depend on (part of cache keys).
std::string squashfs_settings(const SquashfsOptions& options);

/// A file, directory or symbolic link given directly rather than read from a layer.
struct SquashfsEntry {
  enum class Type { file, directory, symlink };
  std::string path; ///< absolute or relative to the root, e.g. "/.singularity.d/runscript"
  Type type = Type::file;
  std::uint32_t mode = 0644; ///< permission bits
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::string data; ///< file contents, or the symlink target
};

/// Builds one squashfs image from OCI layers plus extra entries, written at byte `offset` of an
/// open file (the SIF partition). Layers are applied in memory with OCI semantics (whiteouts,
/// opaque directories, hard links, parents resolved through symlinks inside the root); file data
/// is streamed from the layers straight into the parallel block compressor. If a file whose data
/// was already written is later deleted or replaced by an upper layer, finish() writes the data
/// again with only the surviving files, so such images never carry dead blocks.
class SquashfsWriter {
public:
  /// Starts an image in `fd` (open read-write) at `offset`; `what` names the output in errors.
  static Result<SquashfsWriter> create(int fd, std::int64_t offset, const SquashfsOptions& options,
                                       std::string what);
  ~SquashfsWriter();
  SquashfsWriter(SquashfsWriter&&) noexcept;
  SquashfsWriter& operator=(SquashfsWriter&&) = delete;
  SquashfsWriter(const SquashfsWriter&) = delete;
  SquashfsWriter& operator=(const SquashfsWriter&) = delete;

  /// Applies one layer (a tar file: plain, gzip, zstd or xz) over the tree. `what` names it in
  /// errors ("layer 2 (sha256:...)"). A hostile member (absolute or ".." name, a hard link to a
  /// directory or to nothing, a non-directory parent) is an invalid_input error.
  Result<void> add_layer(const std::filesystem::path& tar, const std::string& what);
  /// Adds an entry, replacing what is at its path (directories keep their children). Missing
  /// parent directories are created (0755, 0:0).
  Result<void> add(const SquashfsEntry& entry);
  /// True when something exists at `path` (a final symlink is not followed).
  [[nodiscard]] bool exists(std::string_view path) const;
  /// Writes the inode, directory, fragment, ID and xattr tables and the superblock. Returns the
  /// image size, padded to a multiple of 4096 bytes.
  Result<std::int64_t> finish();

  class Impl;

private:
  explicit SquashfsWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

/// Extracts the squashfs image stored at byte `offset` of `file` into the empty directory open as
/// `dest_fd`, safely: names validated, nothing created outside dest (every object made with *at()
/// calls relative to directories this function created), symlinks created never followed, device
/// nodes and sockets skipped, setuid/setgid dropped and ownership left to the caller unless
/// `keep_ownership`. Used by `lockstep exec` when a SIF can't be mounted.
Result<void> extract_squashfs(const std::filesystem::path& file, std::int64_t offset, int dest_fd,
                              bool keep_ownership);

} // namespace lockstep
