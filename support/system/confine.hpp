#pragma once
// Confinement of host paths that specs and locks name (`extends`, copy sources, repositories,
// keyrings, lock URLs): a path is judged by where it leads once every symlink is resolved, and it is
// judged before anything opens it. The rules that pick the directories live with their callers
// (envspec/spec/host_paths.hpp for specs, builder/lock/lock.hpp for locks); this is the one check they share.
#include "support/base/result.hpp"

#include <filesystem>
#include <optional>
#include <vector>

namespace lockstep {

/// True when `path` is `root` or lies below it, comparing whole components lexically (no file system
/// access): "/a/bc" is not within "/a/b".
bool is_within(const std::filesystem::path& path, const std::filesystem::path& root);

/// Where a host path leads, judged against the directories it may reach.
struct Confinement {
  /// The path with every symlink resolved (a tail that does not exist is kept as written, normalised).
  std::filesystem::path real;
  /// The root (as given) the path leads inside; nullopt when it leads outside every root.
  std::optional<std::filesystem::path> root;
  /// The path lies inside a root as written, yet leads outside every root: it escapes through a symlink.
  bool through_symlink = false;
  [[nodiscard]] bool inside() const { return root.has_value(); }
};

/// Judges the absolute `path` against `roots`, each resolved through symlinks too (a root that does
/// not exist holds nothing). Only stat(2) and readlink(2) touch the file system: nothing is opened, so
/// a FIFO or a secret is judged without being read, and a missing file outside is "outside", not
/// "missing" (no probing of what exists). A symlink loop or an unsearchable directory on the way is an
/// io error naming the path.
Result<Confinement> confine_path(const std::filesystem::path& path,
                                 const std::vector<std::filesystem::path>& roots);

} // namespace lockstep
