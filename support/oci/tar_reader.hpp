#pragma once
// Reading untrusted tar archives (plain or compressed) member by member with libarchive.
//
// Only tar formats are recognised (ustar, pax, GNU) and only library-backed decompression filters
// (gzip, bzip2, xz/lzma, lzip, zstd, lz4): libarchive never runs an external program for us.
// Member names are normalised ("./a//b" -> "a/b"); an absolute name or a ".." component makes the
// whole archive invalid. Nothing is ever extracted: callers get headers and a byte stream.
#include "support/base/result.hpp"
#include "support/oci/layer_model.hpp"
#include "support/oci/layer_stream.hpp"
#include "support/system/fs.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

struct archive; // libarchive

namespace lockstep {

namespace detail {
struct TarLayerFeed; // a LayerStream and its first error, where libarchive's callback finds them
} // namespace detail

/// One member header.
struct TarMember {
  enum class Type { file, directory, symlink, hardlink, other };
  std::string name; ///< normalised: relative, no "." or empty components; "" for the root itself
  Type type = Type::other;
  std::uint32_t mode = 0;  ///< permission bits (07777)
  std::int64_t size = 0;   ///< data bytes (regular files only)
  std::string link_target; ///< symlink: the target as stored; hardlink: the normalised member name
};

/// A forward-only reader over the members of one tar file.
class TarReader {
public:
  /// Opens `file`; `what` names it in every error (e.g. "oci-archive:/tmp/x.tar").
  static Result<TarReader> open(const std::filesystem::path& file, std::string what);
  /// Reads the tar inside a layer blob through `stream`, which decompresses it and checks the
  /// blob's size, digest and diff_id when the archive ends (next() returns nullopt only then).
  /// A damaged blob is named as such rather than as a bad tar.
  static Result<TarReader> open_layer(oci::LayerStream stream);
  ~TarReader();
  TarReader(TarReader&& o) noexcept;
  TarReader& operator=(TarReader&&) = delete;
  TarReader(const TarReader&) = delete;
  TarReader& operator=(const TarReader&) = delete;

  /// The next member's header, or nullopt at the end of the archive. Unread data of the previous
  /// member is skipped. A hostile name (absolute, "..") is an invalid_input error.
  Result<std::optional<TarMember>> next();
  /// The next member of an OCI layer, classified by the layer model (layer::classify_member), or
  /// nullopt at the end. A refusal names the member as every layer consumer does.
  Result<std::optional<layer::Member>> next_layer_member();
  /// open_layer()'s stream (for progress: its blob_bytes()), else null.
  [[nodiscard]] const oci::LayerStream* layer_stream() const;
  /// Reads up to `size` bytes of the current member's data; 0 at its end.
  Result<std::size_t> read(void* data, std::size_t size);
  /// The current member's next bytes, where libarchive holds them when it can (no copy), else in
  /// `scratch` (the zeros of a sparse member's holes); valid until the next call. Empty at its
  /// end. Mixing it with read() for one member is not allowed.
  Result<std::span<const char>> read_view(char* scratch, std::size_t size);

private:
  TarReader(struct archive* a, std::string what);
  Error archive_failure(const std::string& doing) const;
  Result<void> at_end();
  struct archive* m_archive = nullptr;
  UniqueFd m_fd;
  std::unique_ptr<detail::TarLayerFeed> m_feed; ///< open_layer() only
  std::string m_what;
  std::string m_current; ///< name of the member being read, for messages
  // read_view's place in the current member: the offset reached, and a block held back while
  // the hole before it is handed out as zeros.
  std::int64_t m_view_offset = 0;
  const void* m_held = nullptr;
  std::size_t m_held_size = 0;
  std::int64_t m_held_offset = 0;
};

} // namespace lockstep
