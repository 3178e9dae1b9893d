#pragma once
// What a rootless build records about a file that the filesystem itself can't hold: the owner,
// mode or device node it has in the image. The record travels with the file as the user xattr
// `user.lockstep.stat` (copy-up, rename and hard links keep it), written by the rootless unpack
// (runner/runtime/unpack.hpp, ownership `caller`) and by the build sandbox's supervisor
// (runner/runtime/supervisor.hpp); the layer capture (builder/image/run_step.cpp) reads it.
// docs/rootless.md describes the scheme.
#include "support/base/result.hpp"

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep::runner {

constexpr const char* k_recorded_stat_xattr = "user.lockstep.stat";

/// A file's image attributes, as recorded. Text form: space-separated fields, each optional and
/// at most once, in this order: `owner=UID:GID`, `mode=OOOO` (octal, permission bits), `dev=c:MAJ:MIN`
/// or `dev=b:MAJ:MIN` (the empty regular file stands for that device node).
struct RecordedStat {
  std::optional<std::pair<std::uint32_t, std::uint32_t>> owner;
  /// The image's permission bits, valid while the file's own bits are still caller_mode() of them
  /// (a chmod since then wins).
  std::optional<mode_t> mode;
  struct Device {
    char type = 'c'; ///< 'c' or 'b'
    std::uint32_t major = 0;
    std::uint32_t minor = 0;
  };
  std::optional<Device> device;

  [[nodiscard]] bool empty() const { return !owner && !mode && !device; }
  [[nodiscard]] std::string text() const;
  /// Parses `text`; anything malformed is invalid_input (a step can write the xattr itself).
  static Result<RecordedStat> parse(std::string_view text);
};

/// The mode a file gets when unpacked for an unprivileged caller: setuid and setgid dropped, and
/// u+rw (files) or u+rwx (directories) added, so the caller can always update and remove it.
mode_t caller_mode(mode_t image_mode, bool is_dir);

/// What a caller-owned copy of a file or directory the image gives to `uid`:`gid` with permission
/// bits `mode` must record: the owner unless it is 0:0, the mode unless caller_mode() keeps it.
RecordedStat image_record(std::uint32_t uid, std::uint32_t gid, mode_t mode, bool is_dir);

/// Reads the record of the file open as `fd` (not O_PATH): nullopt without one.
Result<std::optional<RecordedStat>> read_recorded_stat(int fd);
/// The same for a path (never following a last symlink; symlinks can't carry user xattrs).
Result<std::optional<RecordedStat>> read_recorded_stat(const std::string& path);
/// Writes the record on the file open as `fd`, or removes it when `stat` is empty.
Result<void> write_recorded_stat(int fd, const RecordedStat& stat);

} // namespace lockstep::runner
