#pragma once
// A SIF's root filesystem, made usable by the sandbox without copying it where possible:
//   loop     the squashfs partition loop-mounted inside the container's mount namespace (root)
//   fuse     squashfuse mounts the partition; this process unmounts it when the container ends
//   extract  the partition extracted once into the cache, STORE/roots/sif-<sha256>/rootfs
// `auto` takes the first that works here, in that order. docs/exec.md ("SIF images").
#include "runner/runtime/sandbox.hpp"
#include "support/base/result.hpp"

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep::runner {

/// How to make a SIF's partition usable (--sif-mount).
enum class SifMountMode { automatic, loop, fuse, extract };

/// "auto", "loop", "fuse", "extract".
std::string_view sif_mount_mode_name(SifMountMode mode);
/// Parses a --sif-mount value; an unknown one is invalid_input naming the accepted values.
Result<SifMountMode> parse_sif_mount_mode(std::string_view text);

/// A SIF's root, ready for the sandbox. A FUSE mount is unmounted (and squashfuse waited for)
/// when this object is destroyed.
class SifRoot {
public:
  enum class Kind { loop, fuse, extracted };

  /// Picks the mount path for `sif` (see the file comment) and prepares it. `store_root` holds the
  /// FUSE mount points (tmp/) and extracted roots (roots/).
  static Result<SifRoot> prepare(const std::filesystem::path& sif, SifMountMode mode,
                                 const std::filesystem::path& store_root);

  SifRoot(SifRoot&&) noexcept;
  SifRoot& operator=(SifRoot&&) = delete;
  SifRoot(const SifRoot&) = delete;
  SifRoot& operator=(const SifRoot&) = delete;
  ~SifRoot();

  [[nodiscard]] Kind kind() const { return m_kind; }
  /// The mount path taken, for --debug and messages ("loop", "fuse", "extract").
  [[nodiscard]] std::string_view kind_name() const;
  /// Sets the root of `config`: its loop_root (loop), or its root directory (fuse, extracted).
  void apply_to(SandboxConfig& config) const;
  /// The image config's `config` member stored in the SIF (object "oci-config.json" that
  /// `lockstep build --sif` writes), or an empty string when the SIF has none.
  [[nodiscard]] const std::string& oci_config() const { return m_oci_config; }

  class FuseMount;

private:
  SifRoot() = default;
  Kind m_kind = Kind::extracted;
  LoopRoot m_loop;
  std::filesystem::path m_dir;
  std::unique_ptr<FuseMount> m_fuse;
  std::string m_oci_config;
};

/// The object oci-config.json of a SIF file (the image config's `config` member that `lockstep
/// build` stores), or "" when the SIF has none. Reads only the header and that object (bounded).
Result<std::string> read_sif_oci_config(const std::filesystem::path& sif);

/// The digest the extract cache is keyed by: sha256 of the whole SIF, remembered in the store's
/// records by (device, inode, size, mtime, ctime) so an unchanged file is not hashed again.
Result<std::string> sif_content_key(const std::filesystem::path& sif,
                                    const std::filesystem::path& store_root);

} // namespace lockstep::runner
