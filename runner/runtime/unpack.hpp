#pragma once
// Applying OCI layer tars onto a directory, treating every byte as hostile.
//
// Every member path is resolved inside the root with openat2(RESOLVE_IN_ROOT): a symlink met on
// the way (including an absolute one, or one that climbs with "..") is followed as if the root
// were "/", so nothing outside the root is ever reached; the last component is never followed.
// Members with ".." components or absolute names are refused. Whiteouts (".wh.NAME", opaque
// ".wh..wh..opq") remove what lower layers left; they never remove what the same layer wrote.
// The policy (devices, setuid, ownership, xattrs, limits) and the CVEs each rule answers are in
// docs/unpack.md.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/oci.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// How ownership and special bits are applied.
struct UnpackOptions {
  enum class Ownership {
    keep,  ///< lchown to the tar's uid/gid, setuid/setgid and security.capability kept (needs root)
    caller ///< everything owned by the caller; setuid/setgid dropped; u+rw on files, u+rwx on dirs
  };
  Ownership ownership = Ownership::caller; ///< callers pass keep when geteuid()==0
  /// With keep: added to every uid and gid, for the confined build sandbox whose ids 0.. are host
  /// ids from this offset (runner::k_confined_host_first). Owners at or past `id_count` are refused.
  std::uint32_t id_offset = 0;
  std::uint32_t id_count = 0xFFFFFFFFU;
  /// The most bytes a layer may unpack to: the uncompressed tar stream and, separately, the sum of
  /// its members' declared sizes. Past it the layer is refused (a decompression bomb stays bounded).
  /// An image's layers together are held to it too (unpacked_root): 256 GiB, several times the
  /// largest training images.
  std::uint64_t max_bytes = 256ULL << 30;
};

/// What one layer did.
struct UnpackStats {
  std::uint64_t entries = 0, files = 0, dirs = 0, symlinks = 0, hardlinks = 0, whiteouts = 0, skipped = 0;
  std::uint64_t bytes = 0; ///< file data written
  std::uint64_t fifos = 0; ///< FIFOs created (devices and sockets are counted in `skipped`)
};

/// "keep" / "caller", and "keep+OFFSET" with an id offset: names unpacked roots in the cache.
std::string ownership_name(const UnpackOptions& options);

/// Applies one uncompressed layer tar, read from memory, onto the directory open as `root_fd`
/// (for tests and the fuzzer). Refusals name the member: "layer: member '../x' escapes the root with '..'".
Result<UnpackStats> apply_tar_bytes(int root_fd, std::string_view tar, const UnpackOptions& options);

/// Applies one layer blob (tar, tar+gzip or tar+zstd by the descriptor's media type; Docker media types
/// too) onto `root_fd`, verifying the blob's size and digest and the uncompressed stream's diff_id while
/// streaming; a mismatch is invalid_input. On any error the root is left half-applied: callers unpack
/// into a temporary directory and discard it.
Result<UnpackStats> apply_layer(int root_fd, const std::filesystem::path& blob, const oci::Descriptor& layer,
                                const Digest& diff_id, const UnpackOptions& options);

/// Removes `path` and everything below it without following symlinks, adding u+rwx to directories
/// that lack it (unpacked roots may hold read-only directories). A missing path is not an error.
Result<void> remove_tree(const std::filesystem::path& path);

} // namespace lockstep::runner
