#pragma once
// Planning a layer: the exact list of tar members, in order, with every attribute decided, plus a
// fingerprint of the inputs for the layer cache. Nothing is read except directory entries and
// inode metadata, so planning an unchanged tree is cheap (see layer_builder.hpp).
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/tar_writer.hpp"

#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace lockstep::builder {

/// One member of a planned layer.
struct PlannedEntry {
  TarEntry tar;
  std::string source; ///< host path: read for regular files, readlink for symlinks, xattrs
  /// Fields left for write time because reading them costs a syscall per file and a change to
  /// them also changes the inode's ctime, which the fingerprint covers.
  bool read_link_target = false;
  bool read_capability = false;

  /// Makes this file a hard link to `target`, an earlier member of the same inode: no content.
  void make_hardlink(const std::string& target) {
    tar.type = TarEntry::Type::hardlink;
    tar.link_target = target;
    tar.size = 0;
    source.clear();
    read_capability = false;
  }
};

/// Sets the type of `entry` from the lstat `st` of host path `host` (type, size, device numbers,
/// and `source` for files and symlinks). False for a socket, which has no place in a layer.
bool describe_source(PlannedEntry& entry, const struct stat& st, const std::string& host);

/// A fingerprint's input: every field in a fixed binary form (integers as 8 bytes, strings as an
/// 8-byte length then the bytes), so no two different member lists hash alike. Buffered, so
/// SHA-256 sees large blocks.
class FingerprintHasher {
public:
  template <typename... Fields> void add(const Fields&... fields) {
    (append(fields), ...);
    if (m_buf.size() >= (1U << 16)) {
      m_hash.update(m_buf.data(), m_buf.size());
      m_buf.clear();
    }
  }
  Digest finish() {
    m_hash.update(m_buf.data(), m_buf.size());
    return m_hash.finish();
  }

private:
  void append_u64(std::uint64_t v) {
    char b[8];
    std::memcpy(b, &v, sizeof(b)); // host byte order: fingerprints never leave this machine's cache
    m_buf.insert(m_buf.end(), b, b + sizeof(b));
  }
  void append(std::string_view f) {
    append_u64(f.size());
    m_buf.insert(m_buf.end(), f.begin(), f.end());
  }
  void append(const std::string& f) { append(std::string_view(f)); }
  void append(const char* f) { append(std::string_view(f)); }
  template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>> void append(Int v) {
    append_u64(static_cast<std::uint64_t>(v));
  }

  std::vector<char> m_buf;
  Sha256 m_hash;
};

/// Fills the deferred fields of `entry` (symlink target, file capability).
Result<void> complete_entry(PlannedEntry& entry);

/// A planned layer.
struct LayerPlan {
  std::vector<PlannedEntry> entries; ///< in tar order: depth-first, names sorted bytewise per directory
  std::uint64_t content_bytes = 0;   ///< total size of regular files
  /// sha256 over the writer version, settings and, per member, its attributes and the source's
  /// identity (device, inode, size, mtime and ctime in ns). Equal fingerprints mean equal layers.
  Digest fingerprint;
  /// False when some source changed too recently (within 2 s of planning) for its timestamps to
  /// prove it unchanged later ("racy" in git's sense); such a plan is not recorded in the cache.
  bool cacheable = true;
  std::string created_by; ///< history text, e.g. "copy ./app -> /opt/app"
};

/// Plans the layer for the spec's `copy` items. Later items override earlier ones at the same path.
/// `epoch` clamps mtimes; `settings` (codec and level) enters the fingerprint.
Result<LayerPlan> plan_copy_layer(const std::vector<envspec::CopyItem>& items, std::int64_t epoch,
                                  const std::string& settings);

/// The version of the layer writer; part of every fingerprint. Bump it whenever the bytes written
/// for the same inputs could change.
inline constexpr const char* k_layer_format_version = "lockstep-layer-1";

} // namespace lockstep::builder
