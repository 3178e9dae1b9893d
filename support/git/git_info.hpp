#pragma once
// Provenance of a file kept in a git work tree, read with libgit2 (no git binary needed).
#include <filesystem>
#include <optional>
#include <string>

namespace lockstep {

struct GitInfo {
  std::string commit; ///< HEAD commit id (40 hex); empty on an unborn branch
  bool dirty =
      false; ///< tracked files differ from HEAD (untracked files do not count, like `git describe --dirty`)
  std::string remote; ///< URL of the "origin" remote with any user:password@ removed; empty if none
};

/// Looks for the git work tree holding `path` (searching upwards, stopping at
/// $GIT_CEILING_DIRECTORIES). nullopt when there is none or it can't be read.
std::optional<GitInfo> git_info_for(const std::filesystem::path& path);

} // namespace lockstep
