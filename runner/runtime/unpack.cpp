#include "runner/runtime/unpack.hpp"

#include "runner/runtime/recorded_stat.hpp"
#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/oci/layer_model.hpp"
#include "support/oci/layer_stream.hpp"
#include "support/system/fs.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t k_chunk = 1U << 20;
constexpr std::uint64_t k_progress_min_size = 4ULL << 20;
constexpr std::string_view k_capability_xattr = "security.capability";

// errno values an archive's content can cause (a name too long, a symlink loop, a path that is not a
// directory), as opposed to the local system failing (disk full, permission denied).
bool caused_by_input(int err) {
  switch (err) {
  case ENOENT:
  case ENOTDIR:
  case ELOOP:
  case ENAMETOOLONG:
  case EXDEV:
  case EISDIR:
  case EEXIST:
  case EINVAL:
  case EMLINK:
  case ENOTEMPTY:
  case EOVERFLOW:
    return true;
  default:
    return false;
  }
}

// openat2(RESOLVE_IN_ROOT): `rel` is resolved as if `root_fd` were "/" — symlinks met on the way,
// absolute ones and ".." included, never lead out of it; magic links and mount crossings are refused.
// The last component is followed too: callers open directories with it, never the member itself.
int open_in_root(int root_fd, const std::string& rel, int flags) {
  struct open_how how {};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  const char* path = rel.empty() ? "." : rel.c_str();
  for (int attempt = 0;; ++attempt) {
    long fd = ::syscall(SYS_openat2, root_fd, path, &how, sizeof how);
    if (fd >= 0) {
      return static_cast<int>(fd);
    }
    // EAGAIN: a concurrent rename raced with ".." resolution; the kernel asks for a retry.
    if ((errno != EINTR && errno != EAGAIN) || attempt > 100) {
      return -1;
    }
  }
}

// fchmodat(AT_SYMLINK_NOFOLLOW) on a directory or FIFO (never called on a symlink). glibc 2.36 does it
// through /proc/self/fd and reports EOPNOTSUPP without /proc; then the plain call is used, which is
// safe because the entry was just checked or created and the root is private while it is built.
int chmod_at(int dir_fd, const char* name, mode_t mode) {
  int rc = ::fchmodat(dir_fd, name, mode, AT_SYMLINK_NOFOLLOW);
  if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOTSUP)) {
    rc = ::fchmodat(dir_fd, name, mode, 0);
  }
  return rc;
}

// Decides whether an entry of a directory being emptied stays: (directory inode, name, lstat).
using KeepFn = std::function<bool(ino_t, const std::string&, const struct stat&)>;

// Removes the entries of the directory open (O_RDONLY) as `dir`, never following a symlink. Entries
// `keep` accepts stay, and kept directories are emptied by the same rule; a kept directory keeps its
// times. Directories lacking u+rwx get it first. The walk is iterative and holds one descriptor: it
// goes down with openat(name) and back up with openat(".."), checking it returned to the same
// directory, so neither the stack nor the descriptor table limits the depth of a hostile tree.
// `where` names `dir` in messages.
Result<void> remove_children(UniqueFd& dir, const KeepFn* keep, const std::string& where) {
  struct Level {
    std::vector<std::string> names; ///< entries still to look at
    std::size_t next = 0;
    struct stat st {};    ///< the directory itself
    bool keeping = false; ///< `keep` applies here (the directory was kept, or is the top)
    struct stat child {}; ///< the subdirectory being emptied, while below
    bool child_kept = false;
  };
  std::vector<Level> stack;
  std::vector<std::string> path; // names from `dir` down to the current directory, for messages
  auto describe = [&](const std::string& name) {
    std::string out = where;
    for (const auto& p : path) {
      out += "/" + p;
    }
    return name.empty() ? out : out + "/" + name;
  };
  auto enter = [&](bool keeping) -> Result<void> {
    Level level;
    level.keeping = keeping;
    if (::fstat(dir.get(), &level.st) != 0) {
      return errno_error("can't stat " + describe(""), errno);
    }
    LS_TRY_ASSIGN(level.names, directory_names(dir.get(), describe("")));
    stack.push_back(std::move(level));
    return {};
  };
  LS_TRY(enter(keep != nullptr));
  while (!stack.empty()) {
    Level& level = stack.back();
    if (level.next == level.names.size()) {
      if (stack.size() == 1) {
        break;
      }
      // Back up to the parent and finish the child there.
      const struct stat expected = stack[stack.size() - 2].st;
      int parent_fd = ::openat(dir.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (parent_fd < 0) {
        return errno_error("can't return to the parent of " + describe(""), errno);
      }
      dir = UniqueFd(parent_fd);
      struct stat back {};
      if (::fstat(dir.get(), &back) != 0 || back.st_ino != expected.st_ino ||
          back.st_dev != expected.st_dev) {
        return io_error("can't remove {}: a directory was moved during the removal", describe(""));
      }
      stack.pop_back();
      std::string name = path.back();
      path.pop_back();
      Level& parent = stack.back();
      if (parent.child_kept) {
        struct timespec times[2] = {parent.child.st_atim, parent.child.st_mtim};
        if (::utimensat(dir.get(), name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
          return errno_error("can't restore the times of " + describe(name), errno);
        }
      } else if (::unlinkat(dir.get(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return errno_error("can't remove " + describe(name), errno);
      }
      continue;
    }
    std::string name = level.names[level.next++];
    struct stat st {};
    if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) {
        continue;
      }
      return errno_error("can't stat " + describe(name), errno);
    }
    bool kept = level.keeping && keep != nullptr && (*keep)(level.st.st_ino, name, st);
    if (!S_ISDIR(st.st_mode)) {
      if (!kept && ::unlinkat(dir.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
        return errno_error("can't remove " + describe(name), errno);
      }
      continue;
    }
    if (!kept) {
      if (::unlinkat(dir.get(), name.c_str(), AT_REMOVEDIR) == 0) {
        continue; // it was empty
      }
      if ((st.st_mode & S_IRWXU) != S_IRWXU &&
          chmod_at(dir.get(), name.c_str(), (st.st_mode & 07777) | S_IRWXU) != 0) {
        return errno_error("can't make " + describe(name) + " writable to remove it", errno);
      }
    }
    int child_fd = ::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child_fd < 0) {
      return errno_error("can't open directory " + describe(name), errno);
    }
    level.child = st;
    level.child_kept = kept;
    dir = UniqueFd(child_fd);
    path.push_back(name);
    LS_TRY(enter(kept));
  }
  return {};
}

// Removes `name` in `dir_fd` (a whole tree for a directory) without following symlinks.
Result<void> remove_at(int dir_fd, const std::string& name, const struct stat& st, const std::string& where) {
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return errno_error("can't remove " + where, errno);
    }
    return {};
  }
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0) {
    return {};
  }
  if ((st.st_mode & S_IRWXU) != S_IRWXU &&
      chmod_at(dir_fd, name.c_str(), (st.st_mode & 07777) | S_IRWXU) != 0) {
    return errno_error("can't make " + where + " writable to remove it", errno);
  }
  int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return errno_error("can't open directory " + where, errno);
  }
  UniqueFd dir(fd);
  LS_TRY(remove_children(dir, nullptr, where));
  dir.reset();
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return errno_error("can't remove " + where, errno);
  }
  return {};
}

struct ArchiveFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<struct archive, ArchiveFree>;

std::string archive_message(struct archive* a) {
  const char* msg = archive_error_string(a);
  return msg != nullptr ? msg : "unknown error";
}

// A non-directory's place: its directory's inode and its name there. Non-directories may have several
// names (hard links), so the place, not the inode, says what a layer wrote.
struct Place {
  ino_t dir = 0;
  std::string name;
  friend bool operator==(const Place&, const Place&) = default;
};
struct PlaceHash {
  std::size_t operator()(const Place& p) const {
    return std::hash<std::string>()(p.name) ^ (std::hash<ino_t>()(p.dir) * 0x9e3779b97f4a7c15ULL);
  }
};

// Times to give a directory once the layer is done (creating entries in it changes its mtime).
struct DirTimes {
  std::string path; ///< to reopen it; the inode is checked
  struct timespec times[2]{};
};

// Applies the members of one tar stream onto a root; one object per layer.
class LayerApplier {
public:
  LayerApplier(int root_fd, std::string what, const UnpackOptions& options, std::uint64_t memory_size)
      : m_root_fd(root_fd), m_what(std::move(what)), m_options(options), m_memory_size(memory_size) {}

  Result<UnpackStats> run(struct archive* a) {
    int fd = ::openat(m_root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      return errno_error(m_what + ": can't open the root directory", errno);
    }
    m_root = UniqueFd(fd);
    struct stat st {};
    if (::fstat(m_root.get(), &st) != 0) {
      return errno_error(m_what + ": can't stat the root directory", errno);
    }
    m_root_ino = st.st_ino;
    m_root_dev = st.st_dev;
    for (;;) {
      LS_TRY(check_interrupted());
      struct archive_entry* entry = nullptr;
      int rc = archive_read_next_header(a, &entry);
      if (rc == ARCHIVE_EOF) {
        break;
      }
      if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
        if (m_stats.entries == 0) {
          return invalid_input("{}: not a valid tar stream: {}", m_what, archive_message(a));
        }
        return invalid_input("{}: can't read the member after '{}': {}", m_what, m_raw, archive_message(a));
      }
      ++m_stats.entries;
      LS_TRY(apply_entry(a, entry));
    }
    LS_TRY(apply_dir_times());
    if (m_dropped_xattrs > 0) {
      log::debug("{}: dropped {} extended attribute(s) (only {} is applied, with ownership keep)", m_what,
                 m_dropped_xattrs, k_capability_xattr);
    }
    return m_stats;
  }

private:
  // "LAYER: member 'NAME': WHY", refused as invalid input.
  template <typename... Args> Error refuse(fmt::format_string<Args...> f, Args&&... args) const {
    return invalid_input("{}: member '{}' {}", m_what, m_raw, fmt::format(f, std::forward<Args>(args)...));
  }
  // A failed system call on `path` (relative to the root).
  Error sys_error(std::string_view doing, std::string_view path, int err) const {
    return Error{caused_by_input(err) ? ExitCode::invalid_input : ExitCode::io,
                 fmt::format("{}: member '{}': can't {} '{}': {}", m_what, m_raw, doing,
                             path.empty() ? "/" : path, std::strerror(err))};
  }

  Result<void> apply_entry(struct archive* a, struct archive_entry* entry) {
    auto classified = layer::classify_member(entry, m_what);
    if (!classified) {
      const char* raw = archive_entry_pathname(entry);
      m_raw = raw != nullptr ? raw : "?";
      return classified.error();
    }
    const layer::Member& m = *classified;
    m_raw = m.raw;
    using Kind = layer::Member::Kind;
    switch (m.kind) {
    case Kind::skipped:
      ++m_stats.skipped;
      log::debug("{}: skipped {} '{}'", m_what, m.skip_reason, m_raw);
      return {};
    case Kind::whiteout:
    case Kind::opaque:
      ++m_stats.whiteouts;
      return apply_whiteout(m);
    case Kind::root:
      return apply_root(entry);
    default:
      break;
    }
    LS_TRY_ASSIGN(int parent_fd, parent_dir(m.parent, entry, true));
    if (parent_fd < 0) {
      return internal_error("{}: member '{}': parent directory missing", m_what, m_raw);
    }
    const std::string& name = m.path;
    const std::string& base = m.base;
    switch (m.kind) {
    case Kind::hardlink:
      return apply_hardlink(parent_fd, name, base, m.link);
    case Kind::file:
      return apply_file(a, entry, parent_fd, name, base);
    case Kind::directory:
      return apply_dir(entry, parent_fd, name, base);
    case Kind::symlink:
      return apply_symlink(entry, parent_fd, name, base, m.link);
    default:
      return apply_fifo(entry, parent_fd, name, base);
    }
  }

  // ---- parents, and what this layer touched ---------------------------------------------------

  // The directory `parent` (relative to the root) open as O_PATH, resolved inside the root. Missing
  // directories are created 0755 when `create`; otherwise a missing parent gives -1. The last result
  // is cached: a path's resolution can only change through an entry whose parent is a proper
  // ancestor of it, and such an entry replaces the cache.
  // A parent found for a whiteout (create false) is not marked as written by this layer: a
  // whiteout hides lower content and writes nothing.
  Result<int> parent_dir(const std::string& parent, struct archive_entry* entry, bool create) {
    if (m_parent_fd.valid() && m_parent_path == parent) {
      if (create && !m_parent_marked) {
        LS_TRY(mark_upper_dir(m_parent_fd.get(), parent));
        m_parent_marked = true;
      }
      return m_parent_fd.get();
    }
    m_parent_fd.reset();
    int fd = open_in_root(m_root_fd, parent, O_PATH | O_DIRECTORY);
    if (fd < 0) {
      int err = errno;
      if (!create && (err == ENOENT || err == ENOTDIR)) {
        return -1;
      }
      if (err != ENOENT) {
        return sys_error("open its parent directory", parent, err);
      }
      LS_TRY_ASSIGN(fd, create_parents(parent, entry));
    }
    UniqueFd dir(fd);
    LS_TRY_ASSIGN(m_parent_ino, touch_dir(dir.get(), parent));
    if (create) {
      LS_TRY(mark_upper_dir(dir.get(), parent));
    }
    m_parent_marked = create;
    m_parent_path = parent;
    m_parent_fd = std::move(dir);
    return m_parent_fd.get();
  }

  // Creates the missing directories of `parent`, each resolved inside the root. A dangling symlink on
  // the way is refused rather than followed to create its target.
  Result<int> create_parents(const std::string& parent, struct archive_entry* entry) {
    int root = open_in_root(m_root_fd, "", O_PATH | O_DIRECTORY);
    if (root < 0) {
      return sys_error("open", "", errno);
    }
    UniqueFd cur(root);
    std::string prefix;
    bool fresh = false; // below a directory created here, which is empty: nothing to resolve
    for (std::size_t i = 0; i < parent.size();) {
      std::size_t j = parent.find('/', i);
      j = j == std::string::npos ? parent.size() : j;
      std::string comp = parent.substr(i, j - i);
      i = j + 1;
      prefix = prefix.empty() ? comp : prefix + "/" + comp;
      int fd = -1;
      errno = ENOENT;
      if (!fresh) {
        fd = open_in_root(m_root_fd, prefix, O_PATH | O_DIRECTORY);
      }
      if (fd < 0 && errno == ENOENT) {
        fresh = true;
        if (::mkdirat(cur.get(), comp.c_str(), 0700) != 0) {
          int err = errno;
          struct stat st {};
          if (err == EEXIST && ::fstatat(cur.get(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
              S_ISLNK(st.st_mode)) {
            return refuse("has a parent '{}' that is a symbolic link to a missing directory", prefix);
          }
          return sys_error("create directory", prefix, err);
        }
        // The owner is the image's root (0:0, shifted by any id offset), the mode must not
        // depend on the umask (chown first: it may clear mode bits).
        if (m_options.ownership == UnpackOptions::Ownership::keep && m_options.id_offset != 0 &&
            ::fchownat(cur.get(), comp.c_str(), m_options.id_offset, m_options.id_offset,
                       AT_SYMLINK_NOFOLLOW) != 0) {
          return sys_error("chown directory", prefix, errno);
        }
        if (chmod_at(cur.get(), comp.c_str(), 0755) != 0) {
          return sys_error("chmod directory", prefix, errno);
        }
        fd = ::openat(cur.get(), comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
          struct stat st {};
          if (::fstat(fd, &st) == 0) {
            // An implied directory gets the time of the member that implied it, not the clock's.
            m_dir_times[st.st_ino] = DirTimes{prefix, {entry_time(entry), entry_time(entry)}};
          }
        }
      }
      if (fd < 0) {
        return sys_error("open its parent directory", prefix, errno);
      }
      cur = UniqueFd(fd);
    }
    return cur.release();
  }

  // Records the times of the directory open as `fd` before this layer changes them, to be put back
  // at the end. Returns its inode.
  Result<ino_t> touch_dir(int fd, const std::string& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      return sys_error("stat directory", path, errno);
    }
    m_dir_times.try_emplace(st.st_ino, DirTimes{path, {st.st_atim, st.st_mtim}});
    return st.st_ino;
  }

  // Records that this layer wrote into the directory open as `fd`, and so into all its ancestors.
  Result<void> mark_upper_dir(int fd, const std::string& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      return sys_error("stat directory", path, errno);
    }
    if (m_upper_dirs.contains(st.st_ino)) {
      return {};
    }
    // Up through "..": it ends at the root or at a directory already recorded (whose ancestors are).
    UniqueFd cur;
    int at = fd;
    for (;;) {
      if (st.st_dev != m_root_dev) {
        return internal_error("{}: member '{}': '{}' resolved outside the root's filesystem", m_what, m_raw,
                              path);
      }
      if (!m_upper_dirs.insert(st.st_ino).second || st.st_ino == m_root_ino) {
        return {};
      }
      int up = ::openat(at, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (up < 0) {
        return sys_error("open the parent of", path, errno);
      }
      struct stat up_st {};
      if (::fstat(up, &up_st) != 0 || (up_st.st_ino == st.st_ino && up_st.st_dev == st.st_dev)) {
        ::close(up);
        return internal_error("{}: member '{}': '{}' is not below the root", m_what, m_raw, path);
      }
      cur = UniqueFd(up);
      at = up;
      st = up_st;
    }
  }

  [[nodiscard]] bool is_upper(ino_t dir, const std::string& name, const struct stat& st) const {
    return S_ISDIR(st.st_mode) ? m_upper_dirs.contains(st.st_ino) : m_upper_places.contains(Place{dir, name});
  }

  // Records that this layer wrote the non-directory `base` in the current parent directory.
  void mark_written(const std::string& base) { m_upper_places.insert(Place{m_parent_ino, base}); }

  // Makes room for a new entry `base` in `parent_fd`: an existing directory stays when the new entry
  // is a directory; anything else there is removed (a directory with its contents), never followed.
  // Returns true when a directory was kept.
  Result<bool> make_room(int parent_fd, const std::string& base, const std::string& name, bool for_dir) {
    struct stat st {};
    if (::fstatat(parent_fd, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) {
        return false;
      }
      return sys_error("stat", name, errno);
    }
    if (for_dir && S_ISDIR(st.st_mode)) {
      return true;
    }
    auto removed = remove_at(parent_fd, base, st, name);
    if (!removed) {
      return Error{removed.error().code,
                   fmt::format("{}: member '{}': {}", m_what, m_raw, removed.error().message)};
    }
    return false;
  }

  // ---- attributes -------------------------------------------------------------------------------

  static struct timespec entry_time(struct archive_entry* entry) {
    struct timespec t {};
    if (archive_entry_mtime_is_set(entry) != 0) {
      t.tv_sec = static_cast<time_t>(archive_entry_mtime(entry));
      long ns = archive_entry_mtime_nsec(entry);
      t.tv_nsec = (ns >= 0 && ns < 1000000000L) ? ns : 0;
    }
    return t;
  }

  [[nodiscard]] mode_t final_mode(struct archive_entry* entry, bool is_dir) const {
    auto mode = static_cast<mode_t>(archive_entry_perm(entry)) & 07777;
    return m_options.ownership == UnpackOptions::Ownership::caller ? caller_mode(mode, is_dir) : mode;
  }

  Result<std::pair<uid_t, gid_t>> owner(struct archive_entry* entry) const {
    la_int64_t uid = archive_entry_uid(entry);
    la_int64_t gid = archive_entry_gid(entry);
    // (uid_t)-1 means "leave unchanged" to chown(2), so it is out of range too.
    constexpr la_int64_t k_max_id = 0xFFFFFFFELL;
    if (uid < 0 || uid > k_max_id || gid < 0 || gid > k_max_id) {
      return refuse("has an owner {}:{} out of range", uid, gid);
    }
    if (uid >= m_options.id_count || gid >= m_options.id_count) {
      return refuse("has an owner {}:{} that the build sandbox can't map (ids below {} only)", uid, gid,
                    m_options.id_count);
    }
    return std::pair{static_cast<uid_t>(uid + m_options.id_offset),
                     static_cast<gid_t>(gid + m_options.id_offset)};
  }

  // Ownership, then modes (chown clears setuid), of `base` in `parent_fd` (or of `fd` when >= 0).
  Result<void> set_owner_and_mode(int fd, int parent_fd, const std::string& base, const std::string& name,
                                  struct archive_entry* entry, bool is_dir, bool chmod) {
    if (m_options.ownership == UnpackOptions::Ownership::keep) {
      LS_TRY_ASSIGN(auto ids, owner(entry));
      int rc = fd >= 0 ? ::fchown(fd, ids.first, ids.second)
                       : ::fchownat(parent_fd, base.c_str(), ids.first, ids.second, AT_SYMLINK_NOFOLLOW);
      if (rc != 0) {
        int err = errno;
        if (err == EPERM) {
          return io_error("{}: member '{}': can't chown '{}' to {}:{}: {} (ownership 'keep' needs root)",
                          m_what, m_raw, name, ids.first, ids.second, std::strerror(err));
        }
        return sys_error("chown", name, err);
      }
    }
    if (fd >= 0 && !is_dir && m_options.ownership == UnpackOptions::Ownership::keep) {
      LS_TRY(apply_capability(fd, name, entry));
    } else {
      count_dropped_xattrs(entry);
    }
    if (chmod) {
      mode_t mode = final_mode(entry, is_dir);
      int rc = fd >= 0 ? ::fchmod(fd, mode) : chmod_at(parent_fd, base.c_str(), mode);
      if (rc != 0) {
        return sys_error("chmod", name, errno);
      }
    }
    if (m_options.ownership == UnpackOptions::Ownership::caller && chmod && (is_dir || fd >= 0)) {
      LS_TRY(record_image_stat(fd, parent_fd, base, name, entry, is_dir));
    }
    return {};
  }

  // Ownership `caller`: what the caller's copy can't hold (another owner, setuid bits, a mode
  // without u+rw) is recorded in the file's user.lockstep.stat xattr (runner/runtime/recorded_stat.hpp),
  // so a rootless build step's layer still records the image's attributes.
  Result<void> record_image_stat(int fd, int parent_fd, const std::string& base, const std::string& name,
                                 struct archive_entry* entry, bool is_dir) {
    la_int64_t uid = archive_entry_uid(entry);
    la_int64_t gid = archive_entry_gid(entry);
    const bool in_range = uid >= 0 && gid >= 0 && uid <= 0xFFFFFFFELL && gid <= 0xFFFFFFFELL;
    RecordedStat r = image_record(in_range ? static_cast<std::uint32_t>(uid) : 0,
                                  in_range ? static_cast<std::uint32_t>(gid) : 0,
                                  static_cast<mode_t>(archive_entry_perm(entry)), is_dir);
    UniqueFd own;
    if (is_dir) {
      own = UniqueFd(
          parent_fd < 0 ? ::openat(m_root.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                        : ::openat(parent_fd, base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!own.valid()) {
        return sys_error("open directory", name, errno);
      }
      fd = own.get();
    } else if (r.empty()) {
      return {}; // a file just created has no record to remove
    }
    auto written = write_recorded_stat(fd, r);
    if (!written) {
      return Error{written.error().code,
                   fmt::format("{}: member '{}': {}", m_what, m_raw, written.error().message)};
    }
    return {};
  }

  void count_dropped_xattrs(struct archive_entry* entry) {
    m_dropped_xattrs += static_cast<std::uint64_t>(archive_entry_xattr_reset(entry));
  }

  // security.capability on a regular file (ownership keep only); other xattrs are dropped.
  Result<void> apply_capability(int fd, const std::string& name, struct archive_entry* entry) {
    archive_entry_xattr_reset(entry);
    const char* key = nullptr;
    const void* value = nullptr;
    std::size_t size = 0;
    while (archive_entry_xattr_next(entry, &key, &value, &size) == ARCHIVE_OK) {
      if (key == nullptr || k_capability_xattr != key) {
        ++m_dropped_xattrs;
        continue;
      }
      if (::fsetxattr(fd, key, value, size, 0) != 0) {
        int err = errno;
        if (err == ENOTSUP) {
          log::debug("{}: the filesystem does not store {} ('{}')", m_what, key, name);
          continue;
        }
        return sys_error("set security.capability on", name, err);
      }
    }
    return {};
  }

  Result<void> set_times(int parent_fd, const std::string& base, const std::string& name,
                         struct archive_entry* entry) {
    struct timespec t = entry_time(entry);
    struct timespec times[2] = {t, t};
    if (::utimensat(parent_fd, base.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
      return sys_error("set the times of", name, errno);
    }
    return {};
  }

  // ---- entry types ------------------------------------------------------------------------------

  Result<void> apply_root(struct archive_entry* entry) {
    ++m_stats.dirs;
    LS_TRY(set_owner_and_mode(m_root.get(), -1, "", "", entry, true, true));
    struct timespec t = entry_time(entry);
    m_dir_times[m_root_ino] = DirTimes{"", {t, t}};
    m_upper_dirs.insert(m_root_ino);
    return {};
  }

  // Removes what lower layers left below the directory `dir_fd` (named `where`): what this layer
  // wrote stays, and the directories it wrote into are emptied by the same rule.
  Result<void> remove_lower(int dir_fd, const std::string& where) {
    int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      return sys_error("open directory", where, errno);
    }
    UniqueFd dir(fd);
    KeepFn keep = [this](ino_t d, const std::string& n, const struct stat& st) { return is_upper(d, n, st); };
    auto removed = remove_children(dir, &keep, where);
    if (!removed) {
      return Error{removed.error().code,
                   fmt::format("{}: member '{}': {}", m_what, m_raw, removed.error().message)};
    }
    return {};
  }

  // A whiteout hides what lower layers left and never what this layer wrote (layer::LayerApplier
  // states the rule): a lower entry is removed; a directory this layer wrote into keeps only what
  // this layer put there.
  Result<void> apply_whiteout(const layer::Member& m) {
    const bool opaque = m.kind == layer::Member::Kind::opaque;
    const std::string& parent = opaque ? m.path : m.parent;
    LS_TRY_ASSIGN(int parent_fd, parent_dir(parent, nullptr, false));
    if (parent_fd < 0) {
      log::debug("{}: whiteout '{}': nothing below to remove", m_what, m_raw);
      return {};
    }
    if (opaque) {
      return remove_lower(parent_fd, parent);
    }
    const std::string where = layer::join(parent, m.base);
    struct stat st {};
    if (::fstatat(parent_fd, m.base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) {
        return {};
      }
      return sys_error("stat", where, errno);
    }
    if (is_upper(m_parent_ino, m.base, st)) {
      if (!S_ISDIR(st.st_mode)) {
        return {};
      }
      int fd = ::openat(parent_fd, m.base.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        return sys_error("open directory", where, errno);
      }
      UniqueFd victim(fd);
      LS_TRY(touch_dir(victim.get(), where));
      return remove_lower(victim.get(), where);
    }
    auto removed = remove_at(parent_fd, m.base, st, where);
    if (!removed) {
      return Error{removed.error().code,
                   fmt::format("{}: member '{}': {}", m_what, m_raw, removed.error().message)};
    }
    return {};
  }

  Result<void> apply_file(struct archive* a, struct archive_entry* entry, int parent_fd,
                          const std::string& name, const std::string& base) {
    la_int64_t size = archive_entry_size(entry);
    if (size < 0) {
      return refuse("has a negative size");
    }
    auto usize = static_cast<std::uint64_t>(size);
    if (usize > m_options.max_bytes - m_declared) {
      return refuse("declares {} bytes; the layer would unpack to more than the limit of {} bytes", usize,
                    m_options.max_bytes);
    }
    m_declared += usize;
    if (m_memory_size > 0 && archive_entry_sparse_count(entry) == 0) {
      auto header = static_cast<std::uint64_t>(archive_read_header_position(a));
      if (header < m_memory_size && usize > m_memory_size - header) {
        return refuse("declares {} bytes but the archive has only {} bytes left from its header on", usize,
                      m_memory_size - header);
      }
    }
    constexpr int k_flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = ::openat(parent_fd, base.c_str(), k_flags, 0600);
    if (fd < 0 && errno == EEXIST) {
      LS_TRY(make_room(parent_fd, base, name, false));
      fd = ::openat(parent_fd, base.c_str(), k_flags, 0600);
    }
    if (fd < 0) {
      return sys_error("create file", name, errno);
    }
    UniqueFd file(fd);
    std::uint64_t end = 0;
    for (;;) {
      const void* buf = nullptr;
      std::size_t n = 0;
      la_int64_t offset = 0;
      int rc = archive_read_data_block(a, &buf, &n, &offset);
      if (rc == ARCHIVE_EOF) {
        break;
      }
      if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
        return refuse("can't be read: {}", archive_message(a));
      }
      if (offset < 0 || static_cast<std::uint64_t>(offset) > usize ||
          n > usize - static_cast<std::uint64_t>(offset)) {
        return refuse("has data past its declared size of {} bytes", usize);
      }
      LS_TRY(check_interrupted());
      const char* p = static_cast<const char*>(buf);
      auto at = static_cast<off_t>(offset);
      std::size_t left = n;
      while (left > 0) {
        ssize_t w = ::pwrite(file.get(), p, left, at);
        if (w < 0) {
          if (errno == EINTR) {
            continue;
          }
          return sys_error("write", name, errno);
        }
        p += w;
        at += w;
        left -= static_cast<std::size_t>(w);
      }
      m_stats.bytes += n;
      end = static_cast<std::uint64_t>(offset) + n;
    }
    if (end != usize && ::ftruncate(file.get(), static_cast<off_t>(usize)) != 0) {
      return sys_error("set the size of", name, errno);
    }
    LS_TRY(set_owner_and_mode(file.get(), parent_fd, base, name, entry, false, true));
    struct timespec t = entry_time(entry);
    struct timespec times[2] = {t, t};
    if (::futimens(file.get(), times) != 0) {
      return sys_error("set the times of", name, errno);
    }
    ++m_stats.files;
    mark_written(base);
    return {};
  }

  Result<void> apply_dir(struct archive_entry* entry, int parent_fd, const std::string& name,
                         const std::string& base) {
    if (::mkdirat(parent_fd, base.c_str(), 0700) != 0) {
      if (errno != EEXIST) {
        return sys_error("create directory", name, errno);
      }
      LS_TRY_ASSIGN(bool kept, make_room(parent_fd, base, name, true));
      if (!kept && ::mkdirat(parent_fd, base.c_str(), 0700) != 0) {
        return sys_error("create directory", name, errno);
      }
    }
    LS_TRY(set_owner_and_mode(-1, parent_fd, base, name, entry, true, true));
    struct stat st {};
    if (::fstatat(parent_fd, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return sys_error("stat", name, errno);
    }
    struct timespec t = entry_time(entry);
    m_dir_times[st.st_ino] = DirTimes{name, {t, t}};
    m_upper_dirs.insert(st.st_ino);
    ++m_stats.dirs;
    return {};
  }

  Result<void> apply_symlink(struct archive_entry* entry, int parent_fd, const std::string& name,
                             const std::string& base, const std::string& link) {
    const char* target = link.c_str();
    // The target is stored verbatim and never followed here.
    if (::symlinkat(target, parent_fd, base.c_str()) != 0) {
      if (errno != EEXIST) {
        return sys_error("create symbolic link", name, errno);
      }
      LS_TRY(make_room(parent_fd, base, name, false));
      if (::symlinkat(target, parent_fd, base.c_str()) != 0) {
        return sys_error("create symbolic link", name, errno);
      }
    }
    LS_TRY(set_owner_and_mode(-1, parent_fd, base, name, entry, false, false));
    LS_TRY(set_times(parent_fd, base, name, entry));
    ++m_stats.symlinks;
    mark_written(base);
    return {};
  }

  Result<void> apply_fifo(struct archive_entry* entry, int parent_fd, const std::string& name,
                          const std::string& base) {
    if (::mkfifoat(parent_fd, base.c_str(), 0600) != 0) {
      if (errno != EEXIST) {
        return sys_error("create FIFO", name, errno);
      }
      LS_TRY(make_room(parent_fd, base, name, false));
      if (::mkfifoat(parent_fd, base.c_str(), 0600) != 0) {
        return sys_error("create FIFO", name, errno);
      }
    }
    LS_TRY(set_owner_and_mode(-1, parent_fd, base, name, entry, false, true));
    LS_TRY(set_times(parent_fd, base, name, entry));
    ++m_stats.fifos;
    mark_written(base);
    return {};
  }

  // `target` is normalised and neither empty nor `name` (layer::classify_member checked).
  Result<void> apply_hardlink(int parent_fd, const std::string& name, const std::string& base,
                              const std::string& target) {
    const std::string_view raw_target = target;
    std::size_t slash = target.rfind('/');
    std::string target_parent = slash == std::string::npos ? std::string() : target.substr(0, slash);
    std::string target_base = slash == std::string::npos ? target : target.substr(slash + 1);
    int tfd = open_in_root(m_root_fd, target_parent, O_PATH | O_DIRECTORY);
    if (tfd < 0) {
      int err = errno;
      if (err == ENOENT || err == ENOTDIR) {
        return refuse("is a hard link to '{}', which does not exist", raw_target);
      }
      return sys_error("open the directory of hard link target", target_parent, err);
    }
    UniqueFd target_dir(tfd);
    struct stat st {};
    if (::fstatat(target_dir.get(), target_base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      int err = errno;
      if (err == ENOENT) {
        return refuse("is a hard link to '{}', which does not exist", raw_target);
      }
      return sys_error("stat hard link target", target, err);
    }
    if (S_ISDIR(st.st_mode)) {
      return refuse("is a hard link to '{}', which is a directory", raw_target);
    }
    if (::linkat(target_dir.get(), target_base.c_str(), parent_fd, base.c_str(), 0) != 0) {
      if (errno != EEXIST) {
        return sys_error("create hard link", name, errno);
      }
      struct stat existing {};
      if (::fstatat(parent_fd, base.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0 &&
          existing.st_ino == st.st_ino && existing.st_dev == st.st_dev) {
        // Already that file (a repeated member, or the same place reached through a symlink).
        ++m_stats.hardlinks;
        mark_written(base);
        return {};
      }
      LS_TRY(make_room(parent_fd, base, name, false));
      if (::linkat(target_dir.get(), target_base.c_str(), parent_fd, base.c_str(), 0) != 0) {
        return sys_error("create hard link", name, errno);
      }
    }
    ++m_stats.hardlinks;
    mark_written(base);
    return {};
  }

  // Gives every directory this layer created or changed its final times: the member's, or the ones it
  // had before the layer added to it. A directory since replaced or removed is skipped.
  Result<void> apply_dir_times() {
    m_parent_fd.reset();
    for (const auto& [ino, d] : m_dir_times) {
      int fd = open_in_root(m_root_fd, d.path, O_RDONLY | O_DIRECTORY);
      if (fd < 0) {
        continue;
      }
      UniqueFd dir(fd);
      struct stat st {};
      if (::fstat(dir.get(), &st) != 0 || st.st_ino != ino) {
        continue;
      }
      if (::futimens(dir.get(), d.times) != 0) {
        m_raw = d.path;
        return sys_error("set the times of directory", d.path, errno);
      }
    }
    return {};
  }

  int m_root_fd;
  std::string m_what;
  UnpackOptions m_options;
  std::uint64_t m_memory_size; ///< size of an in-memory archive, 0 for a stream
  UniqueFd m_root;             ///< the root, O_RDONLY (fchmod/fchown need a real descriptor)
  ino_t m_root_ino = 0;
  dev_t m_root_dev = 0;
  UnpackStats m_stats;
  std::string m_raw; ///< the current member's name as stored, for messages
  std::uint64_t m_declared = 0;
  std::uint64_t m_dropped_xattrs = 0;
  std::string m_parent_path;              ///< the cached parent directory (relative to the root) ...
  UniqueFd m_parent_fd;                   ///< ... open as O_PATH
  ino_t m_parent_ino = 0;                 ///< ... and its inode
  bool m_parent_marked = false;           ///< ... marked as written into by this layer
  std::unordered_set<ino_t> m_upper_dirs; ///< directories this layer wrote or wrote into
  std::unordered_set<Place, PlaceHash> m_upper_places; ///< non-directories this layer wrote
  std::unordered_map<ino_t, DirTimes> m_dir_times;
};

std::string describe(const UnpackStats& s) {
  return fmt::format("{} entries: {} files ({}), {} directories, {} symlinks, {} hard links, {} FIFOs, "
                     "{} whiteouts, {} skipped",
                     s.entries, s.files, log::human_size(s.bytes), s.dirs, s.symlinks, s.hardlinks, s.fifos,
                     s.whiteouts, s.skipped);
}

// ---- streaming a blob: file -> (sha256 digest) -> decompression -> (sha256 diff_id) -> tar reader ----

// SHA-256 of several byte streams on a thread of its own, so hashing (the largest cost of applying a
// layer where the CPU has no SHA instructions) overlaps decompression and file writes. update() copies
// the bytes and blocks while k_max_queued chunks wait; finish() waits for the stream's last chunk.
class HashThread {
public:
  explicit HashThread(std::size_t streams) : m_hashes(streams), m_thread([this] { run(); }) {}
  ~HashThread() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    m_thread.join();
  }
  HashThread(const HashThread&) = delete;
  HashThread& operator=(const HashThread&) = delete;

  void update(std::size_t stream, const void* data, std::size_t size) {
    if (size == 0) {
      return;
    }
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [this] { return m_queue.size() < k_max_queued; });
    std::vector<char> chunk;
    if (!m_free.empty()) {
      chunk = std::move(m_free.back());
      m_free.pop_back();
    }
    const char* p = static_cast<const char*>(data);
    chunk.assign(p, p + size);
    m_queue.emplace_back(stream, std::move(chunk));
    m_cv.notify_all();
  }

  Digest finish(std::size_t stream) {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [this] { return m_queue.empty() && !m_busy; });
    return m_hashes[stream].finish();
  }

private:
  static constexpr std::size_t k_max_queued = 8;

  void run() {
    std::unique_lock lock(m_mutex);
    for (;;) {
      m_cv.wait(lock, [this] { return m_stop || !m_queue.empty(); });
      if (m_queue.empty()) {
        return; // stopping
      }
      auto [stream, chunk] = std::move(m_queue.front());
      m_queue.pop_front();
      m_busy = true;
      lock.unlock();
      m_hashes[stream].update(chunk.data(), chunk.size());
      lock.lock();
      m_busy = false;
      m_free.push_back(std::move(chunk));
      m_cv.notify_all();
    }
  }

  std::vector<Sha256> m_hashes;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<std::pair<std::size_t, std::vector<char>>> m_queue;
  std::vector<std::vector<char>> m_free;
  bool m_busy = false;
  bool m_stop = false;
  std::thread m_thread; // last: starts once the rest is constructed
};

constexpr std::size_t k_blob_hash = 0;
constexpr std::size_t k_diff_id_hash = 1;

struct BlobStream {
  int fd = -1;
  std::string what;
  std::vector<char> buf = std::vector<char>(k_chunk);
  HashThread* hash = nullptr;
  std::uint64_t bytes = 0;
  std::uint64_t expected = 0;
  log::Progress* progress = nullptr;
  std::optional<Error> error;
};

la_ssize_t read_blob(struct archive* a, void* ctx, const void** out) {
  auto* s = static_cast<BlobStream*>(ctx);
  if (interrupted()) {
    s->error = check_interrupted().error();
    archive_set_error(a, EINTR, "interrupted");
    return -1;
  }
  auto n = read_some(s->fd, s->buf.data(), s->buf.size(), s->what);
  if (!n) {
    s->error = std::move(n).error();
    archive_set_error(a, EIO, "%s", s->error->message.c_str());
    return -1;
  }
  s->hash->update(k_blob_hash, s->buf.data(), *n);
  s->bytes += *n;
  if (s->bytes > s->expected) {
    s->error =
        invalid_input("{}: the blob is larger than the {} bytes its descriptor says", s->what, s->expected);
    archive_set_error(a, EINVAL, "%s", s->error->message.c_str());
    return -1;
  }
  if (s->progress != nullptr) {
    s->progress->advance(*n);
  }
  *out = s->buf.data();
  return static_cast<la_ssize_t>(*n);
}

struct TarStream {
  struct archive* decompressor = nullptr;
  std::string what;
  std::vector<char> buf = std::vector<char>(k_chunk);
  HashThread* hash = nullptr;
  std::uint64_t bytes = 0;
  std::uint64_t max = 0;
  std::optional<Error> error;

  // Reads the next piece of the uncompressed stream, hashing it; 0 at its end.
  la_ssize_t pull() {
    la_ssize_t n = archive_read_data(decompressor, buf.data(), buf.size());
    if (n < 0) {
      error = invalid_input("{}: can't decompress the blob: {}", what, archive_message(decompressor));
      return -1;
    }
    if (hash != nullptr) {
      hash->update(k_diff_id_hash, buf.data(), static_cast<std::size_t>(n));
    }
    bytes += static_cast<std::uint64_t>(n);
    if (bytes > max) {
      error = invalid_input("{}: the uncompressed layer is larger than the limit of {} bytes", what, max);
      return -1;
    }
    return n;
  }
};

la_ssize_t read_tar(struct archive* a, void* ctx, const void** out) {
  auto* t = static_cast<TarStream*>(ctx);
  la_ssize_t n = t->pull();
  if (n < 0) {
    archive_set_error(a, EINVAL, "%s", t->error->message.c_str());
    return -1;
  }
  *out = t->buf.data();
  return n;
}

// Reads the rest of the blob file directly, for its digest.
Result<void> drain_blob(BlobStream& s) {
  for (;;) {
    LS_TRY(check_interrupted());
    LS_TRY_ASSIGN(std::size_t n, read_some(s.fd, s.buf.data(), s.buf.size(), s.what));
    if (n == 0) {
      return {};
    }
    s.hash->update(k_blob_hash, s.buf.data(), n);
    s.bytes += n;
    if (s.bytes > s.expected) {
      return invalid_input("{}: the blob is larger than the {} bytes its descriptor says", s.what,
                           s.expected);
    }
  }
}

Result<void> check_blob(BlobStream& s, const Digest& expected) {
  if (s.bytes != s.expected) {
    return invalid_input("{}: the blob has {} bytes, its descriptor says {}", s.what, s.bytes, s.expected);
  }
  Digest got = s.hash->finish(k_blob_hash);
  if (got != expected) {
    return invalid_input("{}: digest mismatch: the blob hashes to {} (the image is corrupt)", s.what,
                         got.str());
  }
  return {};
}

} // namespace

std::string ownership_name(const UnpackOptions& options) {
  if (options.ownership == UnpackOptions::Ownership::caller) {
    return "caller";
  }
  return options.id_offset == 0 ? "keep" : fmt::format("keep+{}", options.id_offset);
}

Result<UnpackStats> apply_tar_bytes(int root_fd, std::string_view tar, const UnpackOptions& options) {
  ArchivePtr a(archive_read_new());
  if (!a) {
    return internal_error("libarchive: out of memory");
  }
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), tar.data(), tar.size()) != ARCHIVE_OK) {
    return invalid_input("layer: not a valid tar stream: {}", archive_message(a.get()));
  }
  LayerApplier applier(root_fd, "layer", options, tar.size());
  return applier.run(a.get());
}

Result<UnpackStats> apply_layer(int root_fd, const fs::path& blob, const oci::Descriptor& layer,
                                const Digest& diff_id, const UnpackOptions& options) {
  std::string what = "layer " + layer.digest.str();
  auto compression = oci::layer_compression(layer.media_type);
  if (!compression) {
    return invalid_input("{}: {}", what, compression.error().message);
  }
  if (layer.digest.algorithm() != "sha256" || diff_id.algorithm() != "sha256") {
    return invalid_input("{}: only sha256 digests are supported (diff_id {})", what, diff_id.str());
  }
  auto start = std::chrono::steady_clock::now();
  int fd = ::open(blob.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return errno_error(what + ": can't open the blob " + blob.string(), errno);
  }
  UniqueFd file(fd);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) {
    return errno_error(what + ": can't stat the blob " + blob.string(), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_input("{}: the blob {} is not a regular file", what, blob.string());
  }
  if (st.st_size != layer.size) {
    return invalid_input("{}: the blob has {} bytes, its descriptor says {}", what, st.st_size, layer.size);
  }

  std::optional<log::Progress> progress;
  if (static_cast<std::uint64_t>(layer.size) >= k_progress_min_size) {
    progress.emplace("unpacking " + layer.digest.str().substr(0, 19), static_cast<std::uint64_t>(layer.size));
  }
  HashThread hashes(2);
  BlobStream blob_stream;
  blob_stream.hash = &hashes;
  blob_stream.fd = file.get();
  blob_stream.what = what;
  blob_stream.expected = static_cast<std::uint64_t>(layer.size);
  blob_stream.progress = progress ? &*progress : nullptr;

  // Stage 1: the blob's bytes, hashed, through libarchive's decompressor ("raw" format: one entry).
  ArchivePtr decompressor(archive_read_new());
  ArchivePtr tar(archive_read_new());
  if (!decompressor || !tar) {
    return internal_error("libarchive: out of memory");
  }
  archive_read_support_format_raw(decompressor.get());
  if (*compression == oci::Compression::gzip) {
    archive_read_append_filter(decompressor.get(), ARCHIVE_FILTER_GZIP);
  } else if (*compression == oci::Compression::zstd) {
    archive_read_append_filter(decompressor.get(), ARCHIVE_FILTER_ZSTD);
  }
  TarStream tar_stream;
  // An uncompressed blob is the tar stream itself: its digest is the diff_id, hashed once.
  tar_stream.hash = *compression == oci::Compression::none ? nullptr : &hashes;
  tar_stream.decompressor = decompressor.get();
  tar_stream.what = what;
  // A compressed layer may expand only so far (oci::max_layer_expansion): a decompression bomb
  // stops early.
  tar_stream.max = options.max_bytes;
  if (*compression != oci::Compression::none) {
    tar_stream.max =
        std::min(tar_stream.max, oci::max_layer_expansion(static_cast<std::uint64_t>(layer.size)));
  }
  UnpackOptions bounded = options;
  bounded.max_bytes = tar_stream.max;

  auto applied = [&]() -> Result<UnpackStats> {
    struct archive_entry* entry = nullptr;
    if (archive_read_open(decompressor.get(), &blob_stream, nullptr, read_blob, nullptr) != ARCHIVE_OK ||
        archive_read_next_header(decompressor.get(), &entry) != ARCHIVE_OK) {
      return invalid_input("{}: can't decompress the blob: {}", what, archive_message(decompressor.get()));
    }
    // Stage 2: the uncompressed stream, hashed, into the tar reader.
    archive_read_support_format_tar(tar.get());
    if (archive_read_open(tar.get(), &tar_stream, nullptr, read_tar, nullptr) != ARCHIVE_OK) {
      return invalid_input("{}: not a valid tar stream: {}", what, archive_message(tar.get()));
    }
    LayerApplier applier(root_fd, what, bounded, 0);
    LS_TRY_ASSIGN(UnpackStats stats, applier.run(tar.get()));
    // Bytes after the tar's end-of-archive blocks still belong to the diff_id and the digest.
    for (;;) {
      la_ssize_t n = tar_stream.pull();
      if (n < 0) {
        return *tar_stream.error;
      }
      if (n == 0) {
        break;
      }
    }
    return stats;
  }();
  if (progress) {
    progress->done();
  }

  if (!applied) {
    // The most precise cause first: the blob stream's own failure, then a corrupt blob (a damaged
    // blob makes decompression or tar parsing fail first), then what the applier or decoder said.
    if (blob_stream.error) {
      return *blob_stream.error;
    }
    if (applied.error().code == ExitCode::interrupted) {
      return std::move(applied).error();
    }
    if (drain_blob(blob_stream)) {
      LS_TRY(check_blob(blob_stream, layer.digest));
    }
    if (tar_stream.error) {
      return *tar_stream.error;
    }
    return std::move(applied).error();
  }
  LS_TRY(drain_blob(blob_stream));
  LS_TRY(check_blob(blob_stream, layer.digest));
  Digest got_diff_id = tar_stream.hash != nullptr ? hashes.finish(k_diff_id_hash) : layer.digest;
  if (got_diff_id != diff_id) {
    return invalid_input(
        "{}: the uncompressed layer hashes to {}, but the image config says its diff_id is {}", what,
        got_diff_id.str(), diff_id.str());
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log::debug("{}: unpacked {} from {} in {:.2f} s", what, describe(*applied),
             log::human_size(tar_stream.bytes), seconds);
  return applied;
}

Result<void> remove_tree(const fs::path& path) {
  fs::path p = path.lexically_normal();
  if (p.has_filename() == false) {
    p = p.parent_path();
  }
  fs::path parent = p.parent_path();
  std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return internal_error("remove_tree: refusing to remove '{}'", path.string());
  }
  int fd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return {};
    }
    return errno_error("can't open " + parent.string(), errno);
  }
  UniqueFd dir(fd);
  struct stat st {};
  if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return {};
    }
    return errno_error("can't stat " + p.string(), errno);
  }
  return remove_at(dir.get(), name, st, p.string());
}

} // namespace lockstep::runner
