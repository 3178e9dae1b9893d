#pragma once
// Planning a layer: the exact list of tar members, in order, with every attribute decided, plus a
// fingerprint of the inputs for the layer cache. Nothing is read except directory entries and
// inode metadata, so planning an unchanged tree is cheap (see layer_builder.hpp).
#include "envspec/spec.hpp"
#include "support/digest.hpp"
#include "support/result.hpp"
#include "support/tar_writer.hpp"

#include <cstdint>
#include <string>
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
