#include "runner/runtime/supervisor.hpp"

#include "runner/runtime/recorded_stat.hpp"
#include "support/base/log.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>

namespace lockstep::runner {

std::vector<std::pair<std::string_view, SupervisedCall>> supervised_calls(SupervisorMode mode) {
  using C = SupervisedCall;
  std::vector<std::pair<std::string_view, SupervisedCall>> calls = {{"mknod", C::mknod},
                                                                    {"mknodat", C::mknodat}};
  if (mode == SupervisorMode::root) {
    return calls;
  }
  for (auto [name, call] : std::initializer_list<std::pair<std::string_view, C>>{{"chown", C::chown},
                                                                                 {"lchown", C::lchown},
                                                                                 {"fchown", C::fchown},
                                                                                 {"fchownat", C::fchownat},
                                                                                 {"chown32", C::chown},
                                                                                 {"lchown32", C::lchown},
                                                                                 {"fchown32", C::fchown}}) {
    calls.emplace_back(name, call);
  }
  calls.emplace_back("chroot", C::chroot);
  for (auto [name, call] :
       std::initializer_list<std::pair<std::string_view, C>>{{"stat", C::stat},
                                                             {"lstat", C::lstat},
                                                             {"fstat", C::fstat},
                                                             {"newfstatat", C::newfstatat},
                                                             {"statx", C::statx}}) {
    calls.emplace_back(name, call);
  }
  if (mode == SupervisorMode::single) {
    for (std::string_view name :
         {"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid",
          "setgroups", "setuid32", "setgid32", "setreuid32", "setregid32", "setresuid32", "setresgid32",
          "setfsuid32", "setfsgid32", "setgroups32", "capset"}) {
      calls.emplace_back(name, C::identity);
    }
  }
  return calls;
}

namespace {

constexpr std::uint64_t k_all_ids = 0xFFFFFFFFULL;

struct Answer {
  std::int64_t val = 0;
  int error = 0; ///< positive errno, 0 for success
  bool continue_in_kernel = false;
};

Answer fail(int err) {
  return Answer{0, err, false};
}

// A process's credentials and umask as /proc/PID/status gives them (the init's view of ids).
struct ProcessIds {
  std::uint32_t fsuid = 0;
  std::uint32_t fsgid = 0;
  std::vector<std::uint32_t> groups;
  mode_t umask = 022;
};

std::optional<ProcessIds> process_ids(pid_t pid) {
  UniqueFd fd(::open(fmt::format("/proc/{}/status", pid).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return std::nullopt;
  }
  std::string text(16384, '\0'); // /proc/PID/status is about 1.5 KiB
  auto got = read_full(fd.get(), text.data(), text.size(), "/proc/PID/status");
  if (!got) {
    return std::nullopt;
  }
  text.resize(*got);
  ProcessIds ids;
  auto fields = [&](std::string_view key) {
    std::vector<std::uint64_t> out;
    std::size_t at = text.find("\n" + std::string(key) + ":");
    if (at == std::string::npos) {
      return out;
    }
    std::size_t end = text.find('\n', at + 1);
    std::string line = text.substr(at + key.size() + 2, end - at - key.size() - 2);
    const char* p = line.c_str();
    while (*p != '\0') {
      char* next = nullptr;
      const int base = key == "Umask" ? 8 : 10;
      unsigned long long v = std::strtoull(p, &next, base);
      if (next == p) {
        ++p;
        continue;
      }
      out.push_back(v);
      p = next;
    }
    return out;
  };
  auto uid = fields("Uid");
  auto gid = fields("Gid");
  if (uid.size() != 4 || gid.size() != 4) {
    return std::nullopt;
  }
  ids.fsuid = static_cast<std::uint32_t>(uid[3]);
  ids.fsgid = static_cast<std::uint32_t>(gid[3]);
  for (std::uint64_t g : fields("Groups")) {
    ids.groups.push_back(static_cast<std::uint32_t>(g));
  }
  if (auto um = fields("Umask"); um.size() == 1) {
    ids.umask = static_cast<mode_t>(um[0] & 0777);
  }
  return ids;
}

// Reads a NUL-terminated path from the process's memory, a page at a time.
std::optional<std::string> read_path(pid_t pid, std::uint64_t address) {
  std::string out;
  constexpr std::size_t k_page = 4096;
  while (out.size() < PATH_MAX) {
    const std::size_t in_page = k_page - (address % k_page);
    char buf[k_page];
    struct iovec local {
      buf, in_page
    };
    // NOLINTBEGIN(performance-no-int-to-ptr): an address in the tracee, never dereferenced here
    struct iovec remote {
      reinterpret_cast<void*>(address), in_page
    };
    // NOLINTEND(performance-no-int-to-ptr)
    ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) {
      return std::nullopt;
    }
    const char* nul = static_cast<const char*>(std::memchr(buf, '\0', static_cast<std::size_t>(n)));
    if (nul != nullptr) {
      out.append(buf, static_cast<std::size_t>(nul - buf));
      return out;
    }
    out.append(buf, static_cast<std::size_t>(n));
    address += static_cast<std::uint64_t>(n);
  }
  return std::nullopt; // ENAMETOOLONG
}

std::optional<std::uint64_t> mount_id(int fd, const char* path, int flags) {
  struct statx sx {};
  if (::statx(fd, path, flags | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) != 0 ||
      (sx.stx_mask & STATX_MNT_ID) == 0) {
    return std::nullopt;
  }
  return sx.stx_mnt_id;
}

class Supervisor {
public:
  Supervisor(const SupervisorPlan& plan, int listener) : m_plan(plan), m_listener(listener) {
    m_root_mount = mount_id(AT_FDCWD, "/", 0);
    m_root_fd = UniqueFd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  }

  // One notification: look the call up, act, answer.
  std::chrono::steady_clock::duration busy{};
  std::uint64_t calls = 0;
  std::uint64_t continued = 0;

  void handle(const struct seccomp_notif& req) {
    ++calls;
    Answer a = fail(ENOSYS);
    const SupervisedSyscall* sc = nullptr;
    for (const SupervisedSyscall& s : m_plan.syscalls) {
      if (s.arch == req.data.arch && s.nr == req.data.nr) {
        sc = &s;
        break;
      }
    }
    if (sc != nullptr) {
      a = dispatch(*sc, req);
    }
    struct seccomp_notif_resp resp {};
    resp.id = req.id;
    if (a.continue_in_kernel) {
      ++continued;
      resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    } else {
      resp.val = a.val;
      resp.error = -a.error;
    }
    if (::ioctl(m_listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && errno != ENOENT) {
      log::debug("supervisor: can't answer {} of pid {}: {}", sc ? sc->name : "?", req.pid,
                 std::strerror(errno));
    }
  }

private:
  const SupervisorPlan& m_plan;
  int m_listener;
  std::optional<std::uint64_t> m_root_mount;
  UniqueFd m_root_fd;
  bool m_chrooted = false; ///< some process called chroot: roots are looked up per process from then on

  [[nodiscard]] bool still_valid(const struct seccomp_notif& req) const {
    std::uint64_t id = req.id;
    return ::ioctl(m_listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
  }

  static std::uint64_t id_arg(const SupervisedSyscall& sc, std::uint64_t v) {
    v &= 0xFFFFFFFFULL;
    if (sc.ids16 && (v & 0xFFFFU) == 0xFFFFU) {
      return k_all_ids;
    }
    return sc.ids16 ? (v & 0xFFFFU) : v;
  }

  Answer dispatch(const SupervisedSyscall& sc, const struct seccomp_notif& req) {
    const auto* args = req.data.args;
    switch (sc.call) {
    case SupervisedCall::identity:
      return Answer{};
    case SupervisedCall::chroot:
      m_chrooted = true;
      return Answer{0, 0, true};
    case SupervisedCall::chown:
      return chown_path(req, AT_FDCWD, args[0], id_arg(sc, args[1]), id_arg(sc, args[2]), 0);
    case SupervisedCall::lchown:
      return chown_path(req, AT_FDCWD, args[0], id_arg(sc, args[1]), id_arg(sc, args[2]),
                        AT_SYMLINK_NOFOLLOW);
    case SupervisedCall::fchown:
      return chown_fd(req, static_cast<int>(args[0]), id_arg(sc, args[1]), id_arg(sc, args[2]));
    case SupervisedCall::fchownat:
      return chown_path(req, static_cast<int>(args[0]), args[1], id_arg(sc, args[2]), id_arg(sc, args[3]),
                        static_cast<int>(args[4]));
    case SupervisedCall::mknod:
      return make_node(req, AT_FDCWD, args[0], static_cast<mode_t>(args[1]),
                       static_cast<std::uint32_t>(args[2]));
    case SupervisedCall::mknodat:
      return make_node(req, static_cast<int>(args[0]), args[1], static_cast<mode_t>(args[2]),
                       static_cast<std::uint32_t>(args[3]));
    case SupervisedCall::stat:
    case SupervisedCall::lstat:
    case SupervisedCall::fstat:
    case SupervisedCall::newfstatat:
    case SupervisedCall::statx:
      return sc.native ? show_stat(sc.call, req) : Answer{0, 0, true};
    }
    return fail(ENOSYS);
  }

  // The directory a path of the process starts from: its root for an absolute path, else its
  // working directory or the directory `dirfd` it passed.
  UniqueFd start_dir(pid_t pid, int dirfd, bool absolute) const {
    if (absolute && !m_chrooted && m_root_fd.valid()) {
      return UniqueFd(::dup(m_root_fd.get())); // every process's root is the init's until one chroots
    }
    std::string where = absolute            ? fmt::format("/proc/{}/root", pid)
                        : dirfd == AT_FDCWD ? fmt::format("/proc/{}/cwd", pid)
                                            : fmt::format("/proc/{}/fd/{}", pid, dirfd);
    return UniqueFd(::open(where.c_str(), O_PATH | O_CLOEXEC));
  }

  // Resolves the process's (dirfd, path) as the kernel would for it, inside the container: the
  // init's root is the container's root, so ".." and absolute symlinks stop there; magic links
  // (/proc/PID/fd/N, /proc/self/root) are refused. Returns an O_PATH descriptor, or an errno.
  std::pair<UniqueFd, int> resolve(const struct seccomp_notif& req, int dirfd, std::uint64_t path_address,
                                   bool follow, bool empty_path_ok) {
    std::optional<std::string> path = read_path(static_cast<pid_t>(req.pid), path_address);
    if (!path) {
      return {UniqueFd(), EFAULT};
    }
    if (path->empty()) {
      if (!empty_path_ok) {
        return {UniqueFd(), ENOENT};
      }
      UniqueFd fd(::open(fmt::format("/proc/{}/fd/{}", req.pid, dirfd).c_str(), O_PATH | O_CLOEXEC));
      return {std::move(fd), errno == 0 ? EBADF : errno};
    }
    const bool absolute = (*path)[0] == '/';
    UniqueFd base = start_dir(static_cast<pid_t>(req.pid), dirfd, absolute);
    if (!base.valid()) {
      return {UniqueFd(), errno == ENOENT ? EBADF : errno};
    }
    std::uint64_t resolve = RESOLVE_NO_MAGICLINKS | (absolute ? RESOLVE_IN_ROOT : 0);
    std::uint64_t flags = O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW);
    int fd = sys_openat2(base.get(), absolute ? path->c_str() + 1 : path->c_str(), flags, resolve);
    if (fd < 0) {
      return {UniqueFd(), errno};
    }
    return {UniqueFd(fd), 0};
  }

  // Whether `fd` is on the image's root filesystem (the overlay whose upper directory becomes the
  // layer), not on a tmpfs, /proc, /dev or a bind from the host.
  [[nodiscard]] bool in_image(int fd) const {
    auto m = mount_id(fd, "", AT_EMPTY_PATH);
    return m && m_root_mount && *m == *m_root_mount;
  }

  Answer chown_fd(const struct seccomp_notif& req, int fd, std::uint64_t uid, std::uint64_t gid) {
    UniqueFd target(::open(fmt::format("/proc/{}/fd/{}", req.pid, fd).c_str(), O_PATH | O_CLOEXEC));
    if (!target.valid()) {
      return fail(EBADF);
    }
    return chown_target(req, std::move(target), uid, gid);
  }

  Answer chown_path(const struct seccomp_notif& req, int dirfd, std::uint64_t path, std::uint64_t uid,
                    std::uint64_t gid, int flags) {
    if ((flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)) != 0) {
      return fail(EINVAL);
    }
    auto [target, err] =
        resolve(req, dirfd, path, (flags & AT_SYMLINK_NOFOLLOW) == 0, (flags & AT_EMPTY_PATH) != 0);
    if (!target.valid()) {
      return fail(err);
    }
    return chown_target(req, std::move(target), uid, gid);
  }

  Answer chown_target(const struct seccomp_notif& req, UniqueFd target, std::uint64_t uid,
                      std::uint64_t gid) {
    if (!still_valid(req)) {
      return fail(ENOENT);
    }
    if (!in_image(target.get())) {
      log::debug("supervisor: pid {} asked to chown a file outside the image's root: refused", req.pid);
      return fail(EPERM);
    }
    struct stat st {};
    if (::fstat(target.get(), &st) != 0) {
      return fail(errno);
    }
    const bool is_dir = S_ISDIR(st.st_mode);
    if (!is_dir && !S_ISREG(st.st_mode)) {
      return chown_special(req, target.get(), st, uid, gid);
    }
    // A real descriptor for the xattr (an O_PATH one can't carry it).
    UniqueFd file(::open(fmt::format("/proc/self/fd/{}", target.get()).c_str(),
                         O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (is_dir ? O_DIRECTORY : 0)));
    if (!file.valid()) {
      return fail(errno);
    }
    auto record = read_recorded_stat(file.get());
    RecordedStat r = record && *record ? **record : RecordedStat{};
    const std::pair<std::uint32_t, std::uint32_t> current =
        r.owner ? *r.owner : std::pair{st.st_uid - m_plan.id_base, st.st_gid - m_plan.id_base};
    const Ids wanted = requested(current, uid, gid);
    if (auto refused = check_unprivileged_chown(req, current, wanted, uid, gid); refused != 0) {
      return fail(refused);
    }
    // chown clears setuid, and setgid with group execute, on anything but a directory (root too).
    if (!is_dir) {
      const auto kill = [](mode_t m) -> mode_t {
        mode_t out = m & ~static_cast<mode_t>(S_ISUID);
        if ((m & S_IXGRP) != 0) {
          out &= ~static_cast<mode_t>(S_ISGID);
        }
        return out;
      };
      if (r.mode) {
        r.mode = kill(*r.mode);
      }
      const mode_t now = st.st_mode & 07777;
      if (kill(now) != now && ::fchmod(file.get(), kill(now)) != 0) {
        return fail(errno);
      }
    }
    if (m_plan.mode == SupervisorMode::subuid) {
      // Ids in the range are real: change the owner, and keep no recorded one.
      if (::fchownat(target.get(), "", wanted.first + m_plan.id_base, wanted.second + m_plan.id_base,
                     AT_EMPTY_PATH) != 0) {
        return fail(errno);
      }
      r.owner.reset();
      if (!record || !*record) {
        return Answer{};
      }
    } else {
      r.owner = wanted;
    }
    // Writing the xattr copies a lower file up into the layer, as the chown would have.
    if (auto w = write_recorded_stat(file.get(), r); !w) {
      log::warn("supervisor: {}", w.error().message);
      return fail(EIO);
    }
    return Answer{};
  }

  using Ids = std::pair<std::uint32_t, std::uint32_t>;

  // The owner a chown asks for: (uid_t)-1 keeps that half of the current one.
  static Ids requested(Ids current, std::uint64_t uid, std::uint64_t gid) {
    return Ids{uid == k_all_ids ? current.first : static_cast<std::uint32_t>(uid),
               gid == k_all_ids ? current.second : static_cast<std::uint32_t>(gid)};
  }

  // Subordinate ids: a process that isn't root in the sandbox may only give its own files to a
  // group it is in (chown(2)'s rule); root may do anything. With one id everyone is root.
  int check_unprivileged_chown(const struct seccomp_notif& req,
                               std::pair<std::uint32_t, std::uint32_t> current,
                               std::pair<std::uint32_t, std::uint32_t> wanted, std::uint64_t uid,
                               std::uint64_t gid) const {
    if (m_plan.mode != SupervisorMode::subuid) {
      return 0;
    }
    std::optional<ProcessIds> ids = process_ids(static_cast<pid_t>(req.pid));
    if (!ids) {
      return ESRCH;
    }
    const std::uint32_t fsuid = ids->fsuid - m_plan.id_base;
    if (fsuid == 0) {
      return 0;
    }
    if (current.first != fsuid || (uid != k_all_ids && wanted.first != current.first)) {
      return EPERM;
    }
    if (gid != k_all_ids && wanted.second != current.second) {
      const std::uint32_t g = wanted.second + m_plan.id_base;
      if (g != ids->fsgid && std::find(ids->groups.begin(), ids->groups.end(), g) == ids->groups.end()) {
        return EPERM;
      }
    }
    return 0;
  }

  // Symbolic links, FIFOs and sockets can't carry a user xattr: the call copies them up (as the
  // chown would have); with subordinate ids the owner changes for real, else an owner other than
  // root is not kept, and that is said.
  Answer chown_special(const struct seccomp_notif& req, int target, const struct stat& st, std::uint64_t uid,
                       std::uint64_t gid) {
    const std::pair<std::uint32_t, std::uint32_t> current{st.st_uid - m_plan.id_base,
                                                          st.st_gid - m_plan.id_base};
    const Ids wanted = requested(current, uid, gid);
    if (auto refused = check_unprivileged_chown(req, current, wanted, uid, gid); refused != 0) {
      return fail(refused);
    }
    if (m_plan.mode == SupervisorMode::subuid) {
      if (::fchownat(target, "", wanted.first + m_plan.id_base, wanted.second + m_plan.id_base,
                     AT_EMPTY_PATH) != 0) {
        return fail(errno);
      }
      return Answer{};
    }
    if (::fchownat(target, "", static_cast<uid_t>(-1), static_cast<gid_t>(-1), AT_EMPTY_PATH) != 0) {
      return fail(errno);
    }
    if (wanted.first != 0 || wanted.second != 0) {
      char link[PATH_MAX];
      ssize_t n = ::readlink(fmt::format("/proc/self/fd/{}", target).c_str(), link, sizeof link - 1);
      log::warn(
          "build sandbox: {} is kept owned by 0:0, not {}:{}: a rootless build records the owner of regular "
          "files and directories only (use --userns subuid, or build as root)",
          n > 0 ? std::string(link, static_cast<std::size_t>(n)) : std::string("a special file"),
          wanted.first, wanted.second);
    }
    return Answer{};
  }

  // The stat family: the kernel answers unless the file is on the image's root and has a record;
  // then the supervisor stats it the same way and shows the recorded owner, mode and device.
  Answer show_stat(SupervisedCall call, const struct seccomp_notif& req) {
    const Answer kernel{0, 0, true};
    const auto* args = req.data.args;
    UniqueFd target;
    std::uint64_t buf = 0;
    int statx_flags = 0;
    unsigned int statx_mask = 0;
    if (call == SupervisedCall::fstat) {
      if (!might_have_record(req, static_cast<int>(args[0]), 0, AT_EMPTY_PATH)) {
        return kernel;
      }
      target = UniqueFd(::open(fmt::format("/proc/{}/fd/{}", req.pid, static_cast<int>(args[0])).c_str(),
                               O_PATH | O_CLOEXEC));
      buf = args[1];
    } else {
      int dirfd = AT_FDCWD;
      std::uint64_t path = args[0];
      int flags = call == SupervisedCall::lstat ? AT_SYMLINK_NOFOLLOW : 0;
      if (call == SupervisedCall::stat || call == SupervisedCall::lstat) {
        buf = args[1];
      } else if (call == SupervisedCall::newfstatat) {
        dirfd = static_cast<int>(args[0]);
        path = args[1];
        buf = args[2];
        flags = static_cast<int>(args[3]);
      } else {
        dirfd = static_cast<int>(args[0]);
        path = args[1];
        flags = static_cast<int>(args[2]);
        statx_mask = static_cast<unsigned int>(args[3]);
        buf = args[4];
        statx_flags = flags & AT_STATX_SYNC_TYPE;
      }
      if ((flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT | AT_STATX_SYNC_TYPE)) != 0) {
        return kernel;
      }
      if (!might_have_record(req, dirfd, path, flags)) {
        return kernel;
      }
      auto resolved =
          resolve(req, dirfd, path, (flags & AT_SYMLINK_NOFOLLOW) == 0, (flags & AT_EMPTY_PATH) != 0);
      target = std::move(resolved.first);
    }
    if (!target.valid()) {
      return kernel; // the kernel gives the error
    }
    struct statx sx {};
    const unsigned int mask = call == SupervisedCall::statx ? statx_mask : STATX_BASIC_STATS;
    if (::statx(target.get(), "", AT_EMPTY_PATH | statx_flags, mask | STATX_MNT_ID, &sx) != 0 ||
        !(S_ISREG(sx.stx_mode) || S_ISDIR(sx.stx_mode)) || (sx.stx_mask & STATX_MNT_ID) == 0 ||
        !m_root_mount || sx.stx_mnt_id != *m_root_mount) {
      return kernel;
    }
    char value[128];
    ssize_t n = ::getxattr(fmt::format("/proc/self/fd/{}", target.get()).c_str(), k_recorded_stat_xattr,
                           value, sizeof value);
    if (n <= 0) {
      return kernel;
    }
    auto record = RecordedStat::parse(std::string_view(value, static_cast<std::size_t>(n)));
    if (!record || !still_valid(req)) {
      return kernel;
    }
    const RecordedStat& r = *record;
    if (r.owner) {
      sx.stx_uid = r.owner->first;
      sx.stx_gid = r.owner->second;
    }
    const bool is_dir = S_ISDIR(sx.stx_mode);
    if (r.mode && (sx.stx_mode & 07777) == caller_mode(*r.mode, is_dir)) {
      sx.stx_mode = static_cast<std::uint16_t>((sx.stx_mode & S_IFMT) | *r.mode);
    }
    if (r.device && S_ISREG(sx.stx_mode) && sx.stx_size == 0) {
      sx.stx_mode =
          static_cast<std::uint16_t>((r.device->type == 'b' ? S_IFBLK : S_IFCHR) | (sx.stx_mode & 07777));
      sx.stx_rdev_major = r.device->major;
      sx.stx_rdev_minor = r.device->minor;
    }
    if (call == SupervisedCall::statx) {
      sx.stx_mask &= ~static_cast<std::uint32_t>(STATX_MNT_ID) | (statx_mask & STATX_MNT_ID);
      return write_back(req, buf, &sx, sizeof sx);
    }
    struct stat st {};
    st.st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
    st.st_ino = sx.stx_ino;
    st.st_nlink = sx.stx_nlink;
    st.st_mode = sx.stx_mode;
    st.st_uid = sx.stx_uid;
    st.st_gid = sx.stx_gid;
    st.st_rdev = makedev(sx.stx_rdev_major, sx.stx_rdev_minor);
    st.st_size = static_cast<off_t>(sx.stx_size);
    st.st_blksize = static_cast<blksize_t>(sx.stx_blksize);
    st.st_blocks = static_cast<blkcnt_t>(sx.stx_blocks);
    st.st_atim = {sx.stx_atime.tv_sec, sx.stx_atime.tv_nsec};
    st.st_mtim = {sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec};
    st.st_ctim = {sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec};
    return write_back(req, buf, &st, sizeof st);
  }

  // The fast answer for most stat calls: the same path, looked up by the init in one call, has no
  // record. Absolute paths are the init's own until a process chroots; relative ones start from the
  // process's working directory or descriptor through /proc. A magic link may lead elsewhere here
  // (/proc/self is the init), which only sends the call down the exact path.
  bool might_have_record(const struct seccomp_notif& req, int dirfd, std::uint64_t path_address, int flags) {
    std::string where;
    if (path_address == 0) {
      where = fmt::format("/proc/{}/fd/{}", req.pid, dirfd);
    } else {
      std::optional<std::string> path = read_path(static_cast<pid_t>(req.pid), path_address);
      if (!path) {
        return false;
      }
      if (path->empty()) {
        if ((flags & AT_EMPTY_PATH) == 0) {
          return false;
        }
        where = dirfd == AT_FDCWD ? fmt::format("/proc/{}/cwd", req.pid)
                                  : fmt::format("/proc/{}/fd/{}", req.pid, dirfd);
      } else if ((*path)[0] == '/') {
        if (m_chrooted) {
          return true;
        }
        where = std::move(*path);
      } else {
        where = (dirfd == AT_FDCWD ? fmt::format("/proc/{}/cwd/", req.pid)
                                   : fmt::format("/proc/{}/fd/{}/", req.pid, dirfd)) +
                *path;
      }
    }
    char value[8];
    const bool follow = path_address == 0 || (flags & AT_SYMLINK_NOFOLLOW) == 0;
    ssize_t n = follow ? ::getxattr(where.c_str(), k_recorded_stat_xattr, value, sizeof value)
                       : ::lgetxattr(where.c_str(), k_recorded_stat_xattr, value, sizeof value);
    return n > 0 || (n < 0 && errno == ERANGE);
  }

  // Writes a result into the process's buffer; a bad address is EFAULT, as the kernel says.
  Answer write_back(const struct seccomp_notif& req, std::uint64_t address, const void* data,
                    std::size_t size) {
    struct iovec local {
      const_cast<void*>(data), size
    };
    // NOLINTBEGIN(performance-no-int-to-ptr): an address in the tracee, never dereferenced here
    struct iovec remote {
      reinterpret_cast<void*>(address), size
    };
    // NOLINTEND(performance-no-int-to-ptr)
    if (::process_vm_writev(static_cast<pid_t>(req.pid), &local, 1, &remote, 1, 0) !=
        static_cast<ssize_t>(size)) {
      return fail(EFAULT);
    }
    return Answer{};
  }

  // mknod of a character or block device: an empty regular file with the node recorded. Other
  // nodes (FIFOs, sockets, files, overlay whiteouts 0:0) are the kernel's to make.
  Answer make_node(const struct seccomp_notif& req, int dirfd, std::uint64_t path_address, mode_t mode,
                   std::uint32_t dev) {
    const mode_t type = mode & S_IFMT;
    if ((type != S_IFCHR && type != S_IFBLK) || (type == S_IFCHR && dev == 0)) {
      return Answer{0, 0, true};
    }
    std::optional<std::string> path = read_path(static_cast<pid_t>(req.pid), path_address);
    if (!path) {
      return fail(EFAULT);
    }
    if (path->empty()) {
      return fail(ENOENT);
    }
    std::string parent = ".";
    std::string name = *path;
    if (auto slash = path->rfind('/'); slash != std::string::npos) {
      parent = slash == 0 ? "/" : path->substr(0, slash);
      name = path->substr(slash + 1);
    }
    if (name.empty() || name == "." || name == "..") {
      return fail(EEXIST);
    }
    // The parent is resolved like any path of the process; its address is re-read as a string.
    const bool absolute = (*path)[0] == '/';
    UniqueFd base = start_dir(static_cast<pid_t>(req.pid), dirfd, absolute);
    if (!base.valid()) {
      return fail(EBADF);
    }
    const std::string rel = absolute ? parent.substr(1) : parent;
    int pfd = sys_openat2(base.get(), rel.empty() ? "." : rel.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC,
                          RESOLVE_NO_MAGICLINKS | (absolute ? RESOLVE_IN_ROOT : 0));
    if (pfd < 0) {
      return fail(errno);
    }
    UniqueFd dir(pfd);
    std::optional<ProcessIds> ids = process_ids(static_cast<pid_t>(req.pid));
    if (!ids || !still_valid(req)) {
      return fail(ESRCH);
    }
    if (!in_image(dir.get())) {
      log::debug("supervisor: pid {} asked for a device node outside the image's root: refused", req.pid);
      return fail(EPERM);
    }
    const mode_t perm = mode & 07777 & ~ids->umask;
    UniqueFd node(
        ::openat(dir.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!node.valid()) {
      return fail(errno);
    }
    if (m_plan.id_base != 0 && ::fchown(node.get(), m_plan.id_base, m_plan.id_base) != 0) {
      return fail(errno);
    }
    if (::fchmod(node.get(), caller_mode(perm, false)) != 0) {
      return fail(errno);
    }
    RecordedStat r;
    r.owner = std::pair{ids->fsuid - m_plan.id_base, ids->fsgid - m_plan.id_base};
    r.mode = perm;
    const std::uint32_t major = (dev & 0xfff00U) >> 8;
    const std::uint32_t minor = (dev & 0xffU) | ((dev >> 12) & 0xfff00U);
    r.device = RecordedStat::Device{type == S_IFBLK ? 'b' : 'c', major, minor};
    if (auto w = write_recorded_stat(node.get(), r); !w) {
      log::warn("supervisor: {}", w.error().message);
      ::unlinkat(dir.get(), name.c_str(), 0);
      return fail(EIO);
    }
    return Answer{};
  }
};

long sys_seccomp(unsigned op, unsigned flags, void* args) {
  return ::syscall(SYS_seccomp, op, flags, args);
}

} // namespace

int supervise(const SupervisorPlan& plan, int listener, pid_t command) {
  struct seccomp_notif_sizes sizes {};
  if (sys_seccomp(SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) {
    sizes.seccomp_notif = sizeof(struct seccomp_notif);
  }
  std::vector<char> buffer(std::max<std::size_t>(sizes.seccomp_notif, sizeof(struct seccomp_notif)));
  Supervisor supervisor(plan, listener);
  // Linux 6.6+: wake the stopped thread on the supervisor's CPU (the round trip is most of a
  // call's cost); older kernels refuse the flag, which changes nothing else.
  constexpr unsigned long k_notif_set_flags = _IOW('!', 4, std::uint64_t);
  constexpr std::uint64_t k_sync_wake_up = 1;
  (void)::ioctl(listener, k_notif_set_flags, k_sync_wake_up);
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, command, 0)));
  bool listening = true;
  for (;;) {
    // Reap whatever exited (orphans included); stop when the command did.
    for (;;) {
      int status = 0;
      pid_t w = ::waitpid(-1, &status, WNOHANG);
      if (w == command) {
        log::debug("supervisor: {} calls, {} of them left to the kernel, {} ms answering", supervisor.calls,
                   supervisor.continued,
                   std::chrono::duration_cast<std::chrono::milliseconds>(supervisor.busy).count());
        return exit_code_of_status(status);
      }
      if (w <= 0) {
        break;
      }
    }
    struct pollfd fds[2] = {{listening ? listener : -1, POLLIN, 0}, {pidfd.get(), POLLIN, 0}};
    int n = ::poll(fds, 2, 250);
    if (n < 0) {
      continue; // EINTR: a forwarded signal
    }
    if ((fds[0].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0 && (fds[0].revents & POLLIN) == 0) {
      listening = false;
      continue;
    }
    if ((fds[0].revents & POLLIN) != 0) {
      std::fill(buffer.begin(), buffer.end(), 0);
      auto* req = reinterpret_cast<struct seccomp_notif*>(buffer.data());
      if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) == 0) {
        auto t0 = std::chrono::steady_clock::now();
        supervisor.handle(*req);
        supervisor.busy += std::chrono::steady_clock::now() - t0;
      }
    }
  }
}

} // namespace lockstep::runner
