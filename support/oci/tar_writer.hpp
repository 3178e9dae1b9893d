#pragma once
// A deterministic tar writer on libarchive (PAX-restricted format: plain USTAR headers, with a PAX
// extended header only where USTAR cannot say it: long names, big ids or sizes, xattrs).
//
// The caller decides every field; nothing is taken from the clock, the umask, the user database or
// the locale: no uname/gname, no atime/ctime, mtime in whole seconds, xattrs as SCHILY.xattr
// records in the order given. The archive is unblocked and ends with two 512-byte zero blocks.
#include "support/base/result.hpp"
#include "support/codec/archive_names.hpp"
#include "support/codec/compress.hpp"

#include <clocale>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct archive;
struct archive_entry;

namespace lockstep {

/// One tar member, fully described.
struct TarEntry {
  enum class Type { file, dir, symlink, hardlink, char_device, block_device, fifo };
  std::string path; ///< relative ("usr/bin/env"), no leading "/" or "./", no trailing "/"
  Type type = Type::file;
  std::uint32_t mode = 0644; ///< permission bits incl. setuid/setgid/sticky (07777)
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::int64_t mtime = 0;  ///< seconds
  std::int64_t size = 0;   ///< regular files only
  std::string link_target; ///< symlink target, or hard link target path (relative, like `path`)
  std::uint32_t dev_major = 0;
  std::uint32_t dev_minor = 0;
  std::vector<std::pair<std::string, std::string>> xattrs; ///< sorted by name
};

/// Writes tar members to a ByteSink.
class TarWriter {
public:
  explicit TarWriter(ByteSink& out);
  ~TarWriter();
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  /// Writes a member header; a regular file's `size` bytes must follow through write_data().
  void add(const TarEntry& entry);
  void write_data(const void* data, std::size_t size);
  /// Writes the end-of-archive blocks.
  void finish();

  struct CallbackState;

private:
  void check(int r, const char* what);
  std::unique_ptr<CallbackState> m_state;
  struct archive* m_archive = nullptr;
  struct archive_entry* m_entry = nullptr;
  bool m_finished = false;
};

} // namespace lockstep
