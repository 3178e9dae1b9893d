#pragma once
// The captured system's files for `lockstep doctor`: a root directory (`/`, or `--host-root DIR`)
// whose absolute paths are resolved inside it, so a symlink in a mounted node image can't lead out
// of it. Not part of the audit room's public API.
#include "support/base/result.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner::doctor_detail {

// Reads the captured system's files: absolute paths resolved with `root` as "/" by openat2
// (RESOLVE_IN_ROOT), so a symlink in a mounted image can't lead out of it. Without openat2 (Linux
// before 5.6) paths are joined to the root and symlinks are followed as the kernel finds them.
class RootFs {
public:
  static Result<RootFs> open(const std::filesystem::path& root);

  // Whether the root is this machine's "/".
  [[nodiscard]] bool live() const { return m_live; }

  // `path` for messages: as on the captured system, prefixed with the root when there is one.
  [[nodiscard]] std::string shown(std::string_view path) const;

  // Opens `path` (absolute on the captured system) with `flags`; the error names it.
  [[nodiscard]] Result<UniqueFd> open_at(std::string_view path, int flags) const;

  // The first `limit` bytes of the regular file `path`; with `whole`, a longer file is an error.
  [[nodiscard]] Result<std::string> read(std::string_view path, std::size_t limit, bool whole = true) const;

  // A small file's first line, "" when it can't be read.
  [[nodiscard]] std::string first_line_of(std::string_view path) const;

  // The names in directory `path`, sorted bytewise; nullopt when it isn't a readable directory.
  // More than `limit` entries: the first `limit` read, and `truncated` set.
  [[nodiscard]] std::optional<std::vector<std::string>> list(std::string_view path, bool& truncated) const;

  [[nodiscard]] bool is_dir(std::string_view path) const {
    return open_at(path, O_RDONLY | O_DIRECTORY).ok();
  }

  [[nodiscard]] bool exists(std::string_view path) const { return open_at(path, O_PATH).ok(); }

  // The path gpu_inventory() reads under (it joins paths to its root itself).
  [[nodiscard]] const std::filesystem::path& root() const { return m_root; }

private:
  RootFs(UniqueFd fd, std::filesystem::path root, bool live)
      : m_fd(std::move(fd)), m_root(std::move(root)), m_live(live) {}
  UniqueFd m_fd;
  std::filesystem::path m_root;
  bool m_live = false;
};

/// `a` + "/" + `b` for paths on the captured system.
std::string join(std::string_view a, std::string_view b);

} // namespace lockstep::runner::doctor_detail
