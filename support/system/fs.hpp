#pragma once
// File helpers: fd ownership, whole-file reads, atomic publication (temp file, fsync, rename).
#include "support/base/result.hpp"

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

/// Owns a file descriptor; closes it on destruction.
class UniqueFd {
public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : m_fd(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : m_fd(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset(o.release());
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  [[nodiscard]] int get() const { return m_fd; }
  [[nodiscard]] bool valid() const { return m_fd >= 0; }
  int release() {
    int fd = m_fd;
    m_fd = -1;
    return fd;
  }
  void reset(int fd = -1);

private:
  int m_fd = -1;
};

/// open(2) with O_CLOEXEC; the error names the path.
Result<UniqueFd> open_file(const std::filesystem::path& path, int flags, mode_t mode = 0);

/// Opens (creating it with `mode`) the lock file `path` and takes an exclusive flock(2) on it. While
/// another process holds it, the lock is polled so that an interrupt (support/base/interrupt.hpp) stops
/// the wait, and `waiting` is logged once. Closing the returned descriptor releases the lock.
Result<UniqueFd> lock_file_exclusive(const std::filesystem::path& path, mode_t mode,
                                     const std::string& waiting);

/// Opens an input file for reading (a spec, a lock, a record, an image file) without ever blocking:
/// O_NONBLOCK, then fstat, so a FIFO or a device is refused (invalid input, exit 2, naming `path`)
/// instead of hanging in open(2). The returned descriptor is a regular file in blocking mode.
Result<UniqueFd> open_input_file(const std::filesystem::path& path);

/// openat2(2) (glibc 2.36 has no wrapper): `path` below `dirfd` with open flags and RESOLVE_* flags;
/// the descriptor, or -1 with errno.
int sys_openat2(int dirfd, const char* path, std::uint64_t flags, std::uint64_t resolve);

/// Reads a whole input file (opened with open_input_file). Files larger than `max_size` are refused
/// (hostile inputs stay bounded).
Result<std::string> read_file(const std::filesystem::path& path, std::uint64_t max_size = 64ULL << 20);

/// One read(2), retried on EINTR unless SIGINT/SIGTERM arrived (then an `interrupted` error, exit
/// 130): the bytes read, 0 at end of file. The error names `what`.
Result<std::size_t> read_some(int fd, void* buf, std::size_t size, const std::string& what);
/// Reads until `size` bytes or end of file (retrying short reads and EINTR); returns the count.
Result<std::size_t> read_full(int fd, void* buf, std::size_t size, const std::string& what);

/// Writes all of `data` to `fd`, retrying short writes and EINTR.
Result<void> write_all(int fd, const void* data, std::size_t size, const std::string& what);

/// fsync(2) on a directory so a rename inside it is durable.
Result<void> fsync_dir(const std::filesystem::path& dir);

/// Creates `dir` and its parents (mode 0755 before umask).
Result<void> make_dirs(const std::filesystem::path& dir);

/// Publishes the file at `temp` under `final_path` (same file system) with rename(2), then syncs the
/// directory. When both names already are hard links of one file (a cached output re-exported over
/// itself), rename(2) succeeds without doing anything; the temporary name is then removed, so no
/// publish ever leaves a temporary name behind.
Result<void> rename_into_place(const std::filesystem::path& temp, const std::filesystem::path& final_path);

/// Makes `to` a hard link of `from` in one step: the link is made under a temporary name (in
/// `temp_dir`, default `to`'s directory) and renamed over `to` (rename_into_place). Returns false,
/// leaving nothing behind, where the file system can't link the two (another file system, a link
/// count limit, no hard links); the caller then copies.
Result<bool> replace_with_link(const std::filesystem::path& from, const std::filesystem::path& to,
                               const std::filesystem::path& temp_dir = {});

/// A temporary file beside its final path, published with commit() (fsync + rename + fsync dir).
/// Destroying an uncommitted AtomicFile removes the temporary file, so an interrupted write never
/// leaves a partial file at the final path.
class AtomicFile {
public:
  /// Creates the temporary file in the directory of `final_path` with permission bits `mode`.
  static Result<AtomicFile> create(const std::filesystem::path& final_path, mode_t mode = 0644);
  /// Opens (or creates) the temporary file `temp_path` itself, a name the caller keeps across
  /// processes so that one killed mid-write can be continued, under an exclusive flock(2); nullopt
  /// when another process holds it. Its content is kept and writes append (`size()` tells how much
  /// there is). It is private (0600) until commit gives it `mode`. Not committed, it is removed as
  /// create()'s are; a killed process leaves it for the next one.
  static Result<std::optional<AtomicFile>> resume(const std::filesystem::path& temp_path,
                                                  const std::filesystem::path& final_path, mode_t mode);
  /// The bytes in the file (what resume() found, and what was written since).
  [[nodiscard]] std::uint64_t size() const { return m_written; }
  /// Empties the file: writes start again at its beginning.
  Result<void> truncate();
  ~AtomicFile();
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  [[nodiscard]] int fd() const { return m_fd.get(); }
  [[nodiscard]] const std::filesystem::path& temp_path() const { return m_temp; }
  Result<void> write(const void* data, std::size_t size);
  Result<void> write(std::string_view data) { return write(data.data(), data.size()); }
  /// Hints the kernel to start writing back what was written so far (keeps the final fsync short).
  void start_writeback();
  /// fsync, rename over the final path, fsync the directory.
  Result<void> commit();
  /// rename over the final path without waiting for the disk: for caches, whose readers check what
  /// they read (after a crash the file may be empty or absent, never half of another's bytes).
  Result<void> commit_unsynced();
  /// Removes the temporary file now (also what the destructor does if not committed).
  void discard();
  /// Like commit() but publishes at a different path in the same directory.
  Result<void> commit_as(const std::filesystem::path& final_path);

private:
  AtomicFile() = default;
  UniqueFd m_fd;
  std::filesystem::path m_temp;
  std::filesystem::path m_final;
  std::uint64_t m_written = 0;
  std::uint64_t m_synced = 0;
  bool m_committed = false;
  std::optional<mode_t> m_commit_mode; // resume(): the mode the file gets at commit
};

/// The names in the directory `dir_fd` (without "." and ".."), in the order readdir gives them, read
/// through a new descriptor so `dir_fd`'s own position is untouched; `where` names it in errors.
Result<std::vector<std::string>> directory_names(int dir_fd, const std::string& where);

/// Writes `data` to `path` atomically (and durably unless `durable` is false: see commit_unsynced).
Result<void> write_file_atomic(const std::filesystem::path& path, std::string_view data, mode_t mode = 0644,
                               bool durable = true);

/// A uniquely named directory removed (recursively) on destruction unless released.
class TempDir {
public:
  /// Creates "<parent>/<prefix>XXXXXX".
  static Result<TempDir> create(const std::filesystem::path& parent, const std::string& prefix);
  ~TempDir();
  TempDir(TempDir&& o) noexcept : m_path(std::move(o.m_path)) { o.m_path.clear(); }
  TempDir& operator=(TempDir&&) = delete;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return m_path; }
  /// Keeps the directory: the destructor no longer removes it.
  void release() { m_path.clear(); }

private:
  explicit TempDir(std::filesystem::path p) : m_path(std::move(p)) {}
  std::filesystem::path m_path;
};

/// Makes `staged` appear at `target` in one step. An existing `target` directory is swapped out with
/// renameat2(RENAME_EXCHANGE) where the filesystem supports it (else two renames) and then removed.
Result<void> replace_directory(const std::filesystem::path& staged, const std::filesystem::path& target);

/// Links `from` to `to` (same filesystem), or copies it when linking is impossible. `to` must not exist.
Result<void> link_or_copy(const std::filesystem::path& from, const std::filesystem::path& to);

/// Lexically normalises an absolute path: removes "." and empty components. Fails on "..".
/// Used for paths inside images, which must never climb out of the root.
Result<std::string> normalize_image_path(std::string_view path);

} // namespace lockstep
