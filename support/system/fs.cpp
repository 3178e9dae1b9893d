#include "support/system/fs.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdio.h> // renameat2
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace lockstep {

namespace fs = std::filesystem;

void UniqueFd::reset(int fd) {
  if (m_fd >= 0) {
    ::close(m_fd);
  }
  m_fd = fd;
}

Result<UniqueFd> open_file(const fs::path& path, int flags, mode_t mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) {
    return errno_error("can't open " + path.string(), errno); // EINTR: interrupted (exit 130)
  }
  return UniqueFd(fd);
}

namespace {

// "a FIFO", "a directory", ... for the file type bits of `mode`, for messages.
std::string_view file_type_name(mode_t mode) {
  switch (mode & S_IFMT) {
  case S_IFREG:
    return "a regular file";
  case S_IFDIR:
    return "a directory";
  case S_IFIFO:
    return "a FIFO";
  case S_IFCHR:
    return "a character device";
  case S_IFBLK:
    return "a block device";
  case S_IFSOCK:
    return "a socket";
  case S_IFLNK:
    return "a symbolic link";
  default:
    return "an unknown kind of file";
  }
}

} // namespace

Result<UniqueFd> open_input_file(const fs::path& path) {
  // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer (and a device never
  // becomes our controlling terminal: O_NOCTTY); what is not a regular file is then refused.
  LS_TRY_ASSIGN(UniqueFd fd, open_file(path, O_RDONLY | O_NONBLOCK | O_NOCTTY));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_error("can't stat " + path.string(), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_input("can't read {}: it is {}, not a regular file", path.string(),
                         file_type_name(st.st_mode));
  }
  // Reads of a regular file never wait for a writer; the flag only matters for what was refused.
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return errno_error("can't set flags of " + path.string(), errno);
  }
  return fd;
}

Result<UniqueFd> lock_file_exclusive(const fs::path& path, mode_t mode, const std::string& waiting) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    return errno_error("can't open lock file " + path.string(), errno);
  }
  UniqueFd lock(fd);
  bool announced = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) {
      continue;
    }
    if (errno != EWOULDBLOCK) {
      return errno_error("can't lock " + path.string(), errno);
    }
    if (!announced) {
      log::info("{}", waiting);
      announced = true;
    }
    LS_TRY(check_interrupted());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return lock;
}

int sys_openat2(int dirfd, const char* path, std::uint64_t flags, std::uint64_t resolve) {
  struct open_how how {};
  how.flags = flags;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

Result<std::string> read_file(const fs::path& path, std::uint64_t max_size) {
  LS_TRY_ASSIGN(UniqueFd fd, open_input_file(path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_error("can't stat " + path.string(), errno);
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_size) {
    return invalid_input("can't read {}: {} bytes is more than the limit of {} bytes", path.string(),
                         st.st_size, max_size);
  }
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  LS_TRY_ASSIGN(std::size_t got, read_full(fd.get(), out.data(), out.size(), path.string()));
  out.resize(got);
  return out;
}

Result<std::size_t> read_some(int fd, void* buf, std::size_t size, const std::string& what) {
  for (;;) {
    ssize_t n = ::read(fd, buf, size);
    if (n >= 0) {
      return static_cast<std::size_t>(n);
    }
    if (errno != EINTR || interrupted()) { // a read ended by SIGINT/SIGTERM: exit 130
      return errno_error("can't read " + what, errno);
    }
  }
}

Result<std::size_t> read_full(int fd, void* buf, std::size_t size, const std::string& what) {
  char* p = static_cast<char*>(buf);
  std::size_t got = 0;
  while (got < size) {
    LS_TRY_ASSIGN(std::size_t n, read_some(fd, p + got, size - got, what));
    if (n == 0) {
      break;
    }
    got += n;
  }
  return got;
}

Result<void> write_all(int fd, const void* data, std::size_t size, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno_error("can't write " + what, errno);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return {};
}

Result<void> fsync_dir(const fs::path& dir) {
  LS_TRY_ASSIGN(UniqueFd fd, open_file(dir.empty() ? fs::path(".") : dir, O_RDONLY | O_DIRECTORY));
  if (::fsync(fd.get()) != 0 && errno != EINVAL) {
    return errno_error("can't sync directory " + dir.string(), errno);
  }
  return {};
}

Result<void> make_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return io_error("can't create directory {}: {}", dir.string(), ec.message());
  }
  return {};
}

namespace {

std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char k_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s(10, 'x');
  for (char& c : s) {
    c = k_chars[rng() % (sizeof(k_chars) - 1)];
  }
  return s;
}

// A name for a temporary file beside `final_path` (or in `dir` when given): ".lockstep-tmp-NAME-RANDOM".
// Callers create it with O_EXCL (or link(2), which fails on an existing name) and retry on EEXIST.
fs::path temp_path_for(const fs::path& final_path, const fs::path& dir = {}) {
  return (dir.empty() ? final_path.parent_path() : dir) /
         (".lockstep-tmp-" + final_path.filename().string() + "-" + random_suffix());
}

} // namespace

Result<void> rename_into_place(const fs::path& temp, const fs::path& final_path) {
  struct stat before {};
  const bool known = ::lstat(temp.c_str(), &before) == 0;
  if (::rename(temp.c_str(), final_path.c_str()) != 0) {
    return errno_error("can't rename " + temp.string() + " to " + final_path.string(), errno);
  }
  // rename(2): "If oldpath and newpath are existing hard links referring to the same file, then
  // rename() does nothing, and returns a success status." The temporary name is then still there.
  struct stat after {};
  if (known && ::lstat(temp.c_str(), &after) == 0 && after.st_dev == before.st_dev &&
      after.st_ino == before.st_ino && ::unlink(temp.c_str()) != 0 && errno != ENOENT) {
    return errno_error("can't remove " + temp.string(), errno);
  }
  return fsync_dir(final_path.parent_path());
}

Result<bool> replace_with_link(const fs::path& from, const fs::path& to, const fs::path& temp_dir) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path temp = temp_path_for(to, temp_dir);
    if (::link(from.c_str(), temp.c_str()) != 0) {
      if (errno == EEXIST) {
        continue;
      }
      if (errno == EXDEV || errno == EPERM || errno == EMLINK || errno == ENOTSUP) {
        return false;
      }
      return errno_error("can't link " + from.string() + " to " + temp.string(), errno);
    }
    if (auto r = rename_into_place(temp, to); !r) {
      ::unlink(temp.c_str());
      return r.error();
    }
    return true;
  }
  return io_error("can't create a temporary name for {}", to.string());
}

Result<AtomicFile> AtomicFile::create(const fs::path& final_path, mode_t mode) {
  fs::path dir = final_path.parent_path();
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path temp = temp_path_for(final_path);
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
      if (errno == EEXIST) {
        continue;
      }
      return errno_error("can't create " + temp.string(), errno);
    }
    // The mode must not depend on the umask.
    if (::fchmod(fd, mode) != 0) {
      int err = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      return errno_error("can't chmod " + temp.string(), err);
    }
    AtomicFile f;
    f.m_fd = UniqueFd(fd);
    f.m_temp = std::move(temp);
    f.m_final = final_path;
    return f;
  }
  return io_error("can't create a temporary file in {}", dir.string());
}

Result<std::optional<AtomicFile>> AtomicFile::resume(const fs::path& temp_path, const fs::path& final_path,
                                                     mode_t mode) {
  int fd = ::open(temp_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return errno_error("can't open " + temp_path.string(), errno);
  }
  UniqueFd owned(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return std::optional<AtomicFile>(); // another process is writing it
    }
    return errno_error("can't lock " + temp_path.string(), errno);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return errno_error("can't stat " + temp_path.string(), errno);
  }
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    return io_error("{} is not a regular file of this user's; remove it", temp_path.string());
  }
  if (::fchmod(fd, 0600) != 0 || ::lseek(fd, 0, SEEK_END) < 0) {
    return errno_error("can't reopen " + temp_path.string(), errno);
  }
  AtomicFile f;
  f.m_fd = std::move(owned);
  f.m_temp = temp_path;
  f.m_final = final_path;
  f.m_written = static_cast<std::uint64_t>(st.st_size);
  f.m_synced = f.m_written;
  f.m_commit_mode = mode;
  return std::optional<AtomicFile>(std::move(f));
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : m_fd(std::move(o.m_fd)), m_temp(std::move(o.m_temp)), m_final(std::move(o.m_final)),
      m_written(o.m_written), m_synced(o.m_synced), m_committed(o.m_committed),
      m_commit_mode(o.m_commit_mode) {
  o.m_committed = true; // the moved-from object owns nothing
}

AtomicFile::~AtomicFile() {
  if (!m_committed && !m_temp.empty()) {
    ::unlink(m_temp.c_str());
  }
}

void AtomicFile::discard() {
  if (!m_committed && !m_temp.empty()) {
    m_fd.reset();
    ::unlink(m_temp.c_str());
    m_committed = true;
  }
}

Result<void> AtomicFile::truncate() {
  if (::ftruncate(m_fd.get(), 0) != 0 || ::lseek(m_fd.get(), 0, SEEK_SET) != 0) {
    return errno_error("can't truncate " + m_temp.string(), errno);
  }
  m_written = 0;
  m_synced = 0;
  return {};
}

Result<void> AtomicFile::write(const void* data, std::size_t size) {
  LS_TRY(write_all(m_fd.get(), data, size, m_temp.string()));
  m_written += size;
  if (m_written - m_synced >= (8U << 20)) {
    start_writeback();
  }
  return {};
}

void AtomicFile::start_writeback() {
  if (m_written > m_synced) {
    ::sync_file_range(m_fd.get(), static_cast<off_t>(m_synced), static_cast<off_t>(m_written - m_synced),
                      SYNC_FILE_RANGE_WRITE);
    m_synced = m_written;
  }
}

Result<void> AtomicFile::commit() {
  return commit_as(m_final);
}

Result<void> AtomicFile::commit_as(const fs::path& final_path) {
  if (m_commit_mode && ::fchmod(m_fd.get(), *m_commit_mode) != 0) {
    return errno_error("can't chmod " + m_temp.string(), errno);
  }
  if (::fsync(m_fd.get()) != 0) {
    return errno_error("can't sync " + m_temp.string(), errno);
  }
  m_fd.reset();
  LS_TRY(rename_into_place(m_temp, final_path));
  m_committed = true;
  return {};
}

Result<void> AtomicFile::commit_unsynced() {
  if (m_commit_mode && ::fchmod(m_fd.get(), *m_commit_mode) != 0) {
    return errno_error("can't chmod " + m_temp.string(), errno);
  }
  m_fd.reset();
  if (::rename(m_temp.c_str(), m_final.c_str()) != 0) {
    return errno_error("can't rename " + m_temp.string() + " to " + m_final.string(), errno);
  }
  m_committed = true;
  return {};
}

Result<void> write_file_atomic(const fs::path& path, std::string_view data, mode_t mode, bool durable) {
  LS_TRY_ASSIGN(AtomicFile f, AtomicFile::create(path, mode));
  LS_TRY(f.write(data));
  return durable ? f.commit() : f.commit_unsynced();
}

Result<TempDir> TempDir::create(const fs::path& parent, const std::string& prefix) {
  std::string templ = (parent / (prefix + "XXXXXX")).string();
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return errno_error("can't create a temporary directory in " + parent.string(), errno);
  }
  return TempDir(fs::path(buf.data()));
}

TempDir::~TempDir() {
  if (!m_path.empty()) {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
}

Result<void> replace_directory(const fs::path& staged, const fs::path& target) {
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) == 0) {
    return fsync_dir(target.parent_path());
  }
  if (errno != EEXIST && errno != ENOTEMPTY && errno != EINVAL && errno != ENOSYS) {
    return errno_error("can't rename " + staged.string() + " to " + target.string(), errno);
  }
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    // `staged` now holds the old directory.
    std::error_code ec;
    fs::remove_all(staged, ec);
    return fsync_dir(target.parent_path());
  }
  // No RENAME_EXCHANGE on this filesystem: move the old one aside first.
  fs::path aside =
      target.parent_path() / (".lockstep-old-" + target.filename().string() + "-" + random_suffix());
  if (::rename(target.c_str(), aside.c_str()) != 0) {
    return errno_error("can't move " + target.string() + " aside", errno);
  }
  if (::rename(staged.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::rename(aside.c_str(), target.c_str());
    return errno_error("can't rename " + staged.string() + " to " + target.string(), err);
  }
  std::error_code ec;
  fs::remove_all(aside, ec);
  return fsync_dir(target.parent_path());
}

Result<void> link_or_copy(const fs::path& from, const fs::path& to) {
  if (::link(from.c_str(), to.c_str()) == 0) {
    return {};
  }
  if (errno != EXDEV && errno != EPERM && errno != EMLINK && errno != ENOTSUP) {
    return errno_error("can't link " + from.string() + " to " + to.string(), errno);
  }
  LS_TRY_ASSIGN(UniqueFd in, open_file(from, O_RDONLY));
  LS_TRY_ASSIGN(AtomicFile out, AtomicFile::create(to, 0644));
  // A reflink costs nothing where the filesystem supports it; otherwise copy in the kernel.
  if (::ioctl(out.fd(), FICLONE, in.get()) != 0) {
    struct stat st {};
    if (::fstat(in.get(), &st) != 0) {
      return errno_error("can't stat " + from.string(), errno);
    }
    off_t left = st.st_size;
    while (left > 0) {
      ssize_t n = ::copy_file_range(in.get(), nullptr, out.fd(), nullptr, static_cast<std::size_t>(left), 0);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        return errno_error("can't copy " + from.string() + " to " + to.string(), errno);
      }
      if (n == 0) {
        return io_error("can't copy {}: file shrank while copying", from.string());
      }
      left -= n;
    }
  }
  return out.commit();
}

Result<std::string> normalize_image_path(std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return invalid_input("'{}' is not an absolute path", path);
  }
  std::string out;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) {
      j = path.size();
    }
    std::string_view comp = path.substr(i, j - i);
    if (comp == "..") {
      return invalid_input("'{}' contains a '..' component", path);
    }
    if (!comp.empty() && comp != ".") {
      out += '/';
      out += comp;
    }
    i = j + 1;
  }
  return out.empty() ? std::string("/") : out;
}

Result<std::vector<std::string>> directory_names(int dir_fd, const std::string& where) {
  int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return errno_error("can't open directory " + where, errno);
  }
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    int err = errno;
    ::close(fd);
    return errno_error("can't read directory " + where, err);
  }
  std::unique_ptr<DIR, int (*)(DIR*)> guard(dir, ::closedir);
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    const struct dirent* e = ::readdir(dir);
    if (e == nullptr) {
      if (errno != 0) {
        return errno_error("can't read directory " + where, errno);
      }
      break;
    }
    std::string_view n = e->d_name;
    if (n != "." && n != "..") {
      names.emplace_back(n);
    }
  }
  return names;
}

} // namespace lockstep
