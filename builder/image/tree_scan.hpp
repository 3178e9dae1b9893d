#pragma once
// Reading a directory tree's entries and inode metadata on several threads. Planning a layer is
// mostly getdents64 and fstatat; on an unchanged tree that is all a rebuild does, so it runs on all
// cores. Symlinks are never followed; the result does not depend on the thread count.
#include "support/base/result.hpp"

#include <sys/stat.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace lockstep::builder {

/// A directory entry and its lstat.
struct ScannedEntry {
  std::string name;
  struct stat st;
};

/// The listings of every directory below (and including) a root.
class TreeScan {
public:
  /// Scans `root` (a directory) with `threads` threads.
  static Result<TreeScan> scan(const std::string& root, unsigned threads);
  /// The entries of directory `path` (as built from the root with "/"), sorted by name; nullptr
  /// for a directory that was not scanned.
  [[nodiscard]] const std::vector<ScannedEntry>* listing(const std::string& path) const;

private:
  std::unordered_map<std::string, std::vector<ScannedEntry>> m_dirs;
};

} // namespace lockstep::builder
