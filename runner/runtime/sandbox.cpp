// Entering a container: child_main() and assemble_root() list the steps, docs/exec.md the why.
//
// Mounting is done with file descriptors throughout (open_tree, fsopen/fsmount, move_mount,
// mount_setattr, openat2): every source is captured as a detached mount before anything is
// mounted, and every target is opened with RESOLVE_IN_ROOT inside the new root, so neither a
// symlink in the image nor a path swapped in between can redirect a mount onto the host.
#include "runner/runtime/sandbox.hpp"

#include "runner/runtime/join.hpp"
#include "runner/runtime/seccomp.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/loop.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <functional>
#include <net/if.h>
#include <set>
#include <string_view>
#include <utility>

namespace lockstep::runner {

namespace {

// ---------------------------------------------------------------------------------------------
// Small system-call helpers

// "/a/b" -> "a/b", "/" -> "." (openat2 paths relative to the root fd).
std::string relative_to_root(std::string_view target) {
  while (!target.empty() && target.front() == '/') {
    target.remove_prefix(1);
  }
  return target.empty() ? std::string(".") : std::string(target);
}

// Opens `target` below `root_fd` as an O_PATH fd, every component resolved inside the root and
// magic links (/proc/self/fd/N) refused. Returns -errno on failure.
int open_in_root(int root_fd, std::string_view target, int extra_flags = 0) {
  int fd = sys_openat2(root_fd, relative_to_root(target).c_str(),
                       O_PATH | O_CLOEXEC | static_cast<std::uint64_t>(extra_flags),
                       RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  return fd >= 0 ? fd : -errno;
}

enum class EntryType { directory, file };

// Where a mount point lies in an image: `target` walked component by component from the image
// root with O_NOFOLLOW, symlinks expanded by hand as if the root were "/" (".." stops at the
// root), so the result never leaves it.
struct ImagePath {
  std::vector<std::string> existing; ///< canonical directories that exist, from the root
  std::vector<std::string> missing;  ///< the components after them that don't exist yet
  PathKind kind = PathKind::missing; ///< what `target` is when nothing is missing
  struct stat last {};               ///< its stat when it exists, else the deepest existing dir's
};

Result<ImagePath> walk_image(int root_fd, const std::string& target) {
  constexpr int k_max_links = 40;
  ImagePath out;
  if (::fstat(root_fd, &out.last) != 0) {
    return errno_error("can't stat the root", errno);
  }
  std::vector<struct stat> stats; // of `existing`, for ".."
  std::vector<UniqueFd> dirs;     // fds of `existing`, for ".."
  auto current = [&] { return dirs.empty() ? root_fd : dirs.back().get(); };
  std::vector<std::string> pending = path_components(target);
  std::reverse(pending.begin(), pending.end()); // a stack: next component at the back
  int links = 0;
  while (!pending.empty()) {
    std::string comp = std::move(pending.back());
    pending.pop_back();
    if (comp == ".") {
      continue;
    }
    if (comp == "..") {
      if (!dirs.empty()) {
        dirs.pop_back();
        stats.pop_back();
        out.existing.pop_back();
      }
      if (stats.empty()) {
        ::fstat(root_fd, &out.last);
      } else {
        out.last = stats.back();
      }
      continue;
    }
    UniqueFd fd(::openat(current(), comp.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid() && errno == ENOENT) {
      out.missing.push_back(comp);
      for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
        if (*it == "..") {
          return invalid_input("can't create the mount point {} in the image: it climbs out of a missing "
                               "directory",
                               target);
        }
        if (*it != ".") {
          out.missing.push_back(*it);
        }
      }
      return out;
    }
    if (!fd.valid()) {
      return errno_error("can't look up " + target + " in the image", errno);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
      return errno_error("can't stat " + target + " in the image", errno);
    }
    if (S_ISLNK(st.st_mode)) {
      if (++links > k_max_links) {
        return invalid_input("can't look up {} in the image: too many levels of symbolic links", target);
      }
      std::array<char, 4096> buf{};
      ssize_t n = ::readlinkat(fd.get(), "", buf.data(), buf.size());
      if (n < 0 || static_cast<std::size_t>(n) >= buf.size()) {
        return errno_error("can't read a symlink on the way to " + target + " in the image",
                           n < 0 ? errno : ENAMETOOLONG);
      }
      std::string_view link(buf.data(), static_cast<std::size_t>(n));
      if (!link.empty() && link.front() == '/') {
        dirs.clear();
        stats.clear();
        out.existing.clear();
        ::fstat(root_fd, &out.last);
      }
      std::vector<std::string> parts = path_components(link);
      pending.insert(pending.end(), parts.rbegin(), parts.rend());
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      out.existing.push_back(comp);
      dirs.push_back(std::move(fd));
      stats.push_back(st);
      out.last = st;
      continue;
    }
    if (!pending.empty()) {
      return invalid_input("can't look up {} in the image: {} is not a directory", target, comp);
    }
    out.existing.push_back(comp);
    out.kind = PathKind::other;
    out.last = st;
    return out;
  }
  out.kind = PathKind::directory;
  return out;
}

// Makes a missing mount point in `layer_fd`, a directory on our own tmpfs that overlayfs puts
// above the image (the upper directory, or a layer of mount points): the existing directories on
// the way are created with the image's modes (merged with the image's by overlayfs), then the
// missing part. Nothing is written to the image, and no copy-up is needed (which a user
// namespace could not do in directories owned by unmapped ids).
Result<void> make_in_layer(int layer_fd, int image_fd, const ImagePath& where, EntryType type,
                           const std::string& target) {
  UniqueFd dir(::fcntl(layer_fd, F_DUPFD_CLOEXEC, 3));
  UniqueFd image_dir(::fcntl(image_fd, F_DUPFD_CLOEXEC, 3));
  auto step_into = [&](const std::string& name, mode_t mode, const struct stat* like) -> Result<void> {
    if (::mkdirat(dir.get(), name.c_str(), mode) != 0 && errno != EEXIST) {
      return errno_error("can't create the mount point " + target + " in the overlay", errno);
    }
    UniqueFd next(::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) {
      return errno_error("can't open the mount point " + target + " in the overlay", errno);
    }
    if (like != nullptr) {
      (void)::fchmod(next.get(), like->st_mode & 07777);
      (void)::fchown(next.get(), like->st_uid, like->st_gid); // fails harmlessly for unmapped ids
    }
    dir = std::move(next);
    return {};
  };
  const bool same = layer_fd == image_fd;
  for (const std::string& name : where.existing) {
    if (same) {
      LS_TRY(step_into(name, 0755, nullptr));
      continue;
    }
    UniqueFd next(::openat(image_dir.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!next.valid() || ::fstat(next.get(), &st) != 0) {
      return errno_error("can't stat " + name + " on the way to " + target + " in the image", errno);
    }
    LS_TRY(step_into(name, 0755, &st));
    image_dir = std::move(next);
  }
  // What the image lacks belongs to the image's root directory's owner, as a build step's own
  // mkdir would: a confined step (whose ids aren't the host's) can still write there.
  struct stat root_st {};
  (void)::fstat(image_fd, &root_st);
  root_st.st_mode = S_IFDIR | 0755;
  for (std::size_t i = 0; i < where.missing.size(); ++i) {
    const std::string& name = where.missing[i];
    if (i + 1 == where.missing.size() && type == EntryType::file) {
      int fd = ::openat(dir.get(), name.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd < 0) {
        return errno_error("can't create the mount point " + target + " in the overlay", errno);
      }
      ::close(fd);
    } else {
      LS_TRY(step_into(name, 0755, &root_st));
    }
  }
  return {};
}

// Creates a missing `target` where we may write (a writable root, or one of our own tmpfs
// mounts) along the path walk_image() resolved: a symlink can't lead the creation outside.
Result<void> make_in_root(int root_fd, const std::string& target, EntryType type) {
  LS_TRY_ASSIGN(ImagePath where, walk_image(root_fd, target));
  if (where.kind != PathKind::missing) {
    return {};
  }
  return make_in_layer(root_fd, root_fd, where, type, target);
}

// The kernel's own explanation of a failed fsconfig() (read from the fs context fd), if any.
std::string fs_context_log(int fs_fd) {
  std::string out;
  std::array<char, 512> buf{};
  for (;;) {
    ssize_t n = ::read(fs_fd, buf.data(), buf.size() - 1);
    if (n <= 0) {
      break;
    }
    std::string_view line(buf.data(), static_cast<std::size_t>(n));
    if (line.size() > 2 && (line[0] == 'e' || line[0] == 'w') && line[1] == ' ') {
      out += (out.empty() ? "" : "; ") + std::string(line.substr(2));
    }
  }
  return out;
}

// A new filesystem instance as a detached mount: fsopen + fsconfig + fsmount.
Result<UniqueFd> new_filesystem(const char* type,
                                const std::vector<std::pair<std::string, std::string>>& options,
                                unsigned attrs, const std::string& what) {
  UniqueFd fs(fsopen(type, FSOPEN_CLOEXEC));
  if (!fs.valid()) {
    return errno_error(fmt::format("can't create a {} filesystem for {}", type, what), errno);
  }
  auto fail = [&](const std::string& step) -> Error {
    int err = errno;
    std::string why = fs_context_log(fs.get());
    Error e = errno_error(fmt::format("can't mount {} for {} ({})", type, what, step), err);
    if (!why.empty()) {
      e.message += " (" + why + ")";
    }
    return e;
  };
  for (const auto& [key, value] : options) {
    int rc = value.empty() ? fsconfig(fs.get(), FSCONFIG_SET_FLAG, key.c_str(), nullptr, 0)
                           : fsconfig(fs.get(), FSCONFIG_SET_STRING, key.c_str(), value.c_str(), 0);
    if (rc < 0) {
      return fail(value.empty() ? key : key + "=" + value);
    }
  }
  if (fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) < 0) {
    return fail("create");
  }
  UniqueFd mnt(fsmount(fs.get(), FSMOUNT_CLOEXEC, attrs));
  if (!mnt.valid()) {
    return fail("fsmount");
  }
  return mnt;
}

Result<void> set_mount_attrs(int tree, std::uint64_t attrs, bool recursive, const std::string& what) {
  struct mount_attr attr {};
  attr.attr_set = attrs;
  unsigned flags = AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0U);
  if (mount_setattr(tree, "", flags, &attr, sizeof attr) < 0) {
    return errno_error("can't set the mount flags of " + what, errno);
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// The mount table

// One mount the container gets, in the order they are made.
struct MountRequest {
  enum class Kind { bind, proc, sysfs, tmpfs, dev_tmpfs, devpts };
  Kind kind = Kind::bind;
  BindSpec bind; // source/access/need/depth for binds; target for all
  /// The default /etc files: mounted only where the image has them, or when the tmpfs overlay is
  /// in place anyway (a missing one alone does not justify the overlay).
  bool only_if_target_exists = false;
  std::string label; // names the mount in messages ("/dev", "--bind /data:/mnt")
};

BindSpec bind_spec(const std::string& source, const std::string& target, BindSpec::Access access,
                   BindSpec::Need need, BindSpec::Depth depth) {
  return BindSpec{source, target, access, need, depth};
}

// The default bind table (like Charliecloud's BINDS_DEFAULT), then /tmp, home and the caller's
// binds. Order matters: a mount inside another comes after it.
std::vector<MountRequest> mount_table(const SandboxConfig& c) {
  using A = BindSpec::Access;
  using N = BindSpec::Need;
  using D = BindSpec::Depth;
  std::vector<MountRequest> t;
  auto add_bind = [&](BindSpec b, std::string label, bool only_if_target_exists = false) {
    t.push_back(
        MountRequest{MountRequest::Kind::bind, std::move(b), only_if_target_exists, std::move(label)});
  };
  if (c.default_binds) {
    if (c.dev.mode == DevPolicy::Mode::host) {
      add_bind(bind_spec("/dev", "/dev", A::read_write, N::required, D::recursive), "/dev");
    } else {
      t.push_back(MountRequest{MountRequest::Kind::dev_tmpfs,
                               bind_spec("", "/dev", A::read_write, N::required, D::single), false,
                               "/dev (minimal)"});
      for (const char* node :
           {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}) {
        add_bind(bind_spec(node, node, A::read_write, N::required, D::single), node);
      }
      if (c.confined) {
        // The host's terminals and shared memory stay out of reach: instances of their own.
        t.push_back(MountRequest{MountRequest::Kind::devpts,
                                 bind_spec("", "/dev/pts", A::read_write, N::required, D::single), false,
                                 "/dev/pts (new instance)"});
        t.push_back(MountRequest{MountRequest::Kind::tmpfs,
                                 bind_spec("", "/dev/shm", A::read_write, N::required, D::single), false,
                                 "/dev/shm (tmpfs)"});
      } else {
        add_bind(bind_spec("/dev/pts", "/dev/pts", A::read_write, N::optional, D::single), "/dev/pts");
        add_bind(bind_spec("/dev/shm", "/dev/shm", A::read_write, N::optional, D::single), "/dev/shm");
      }
      for (const BindSpec& node : c.dev.nodes) {
        add_bind(node, node.source.string() == node.target
                           ? node.target
                           : fmt::format("{} (from {})", node.target, node.source.string()));
      }
    }
    if (c.pid_namespace) {
      t.push_back(MountRequest{MountRequest::Kind::proc,
                               bind_spec("", "/proc", A::read_write, N::required, D::single), false,
                               "/proc (new)"});
    } else {
      add_bind(bind_spec("/proc", "/proc", A::read_write, N::required, D::recursive), "/proc");
    }
    if (c.network == NetworkPolicy::none) {
      // sysfs shows the network namespace of whoever mounted it: a new one for the new namespace.
      t.push_back(MountRequest{MountRequest::Kind::sysfs,
                               bind_spec("", "/sys", A::read_only, N::required, D::single), false,
                               "/sys (new)"});
    } else {
      add_bind(bind_spec("/sys", "/sys", A::read_only, N::required, D::recursive), "/sys");
    }
    add_bind(bind_spec("/etc/resolv.conf", "/etc/resolv.conf", A::read_only, N::optional, D::single),
             "/etc/resolv.conf", true);
    add_bind(bind_spec("/etc/hosts", "/etc/hosts", A::read_only, N::optional, D::single), "/etc/hosts", true);
  }
  if (c.tmp == TmpPolicy::tmpfs) {
    t.push_back(MountRequest{MountRequest::Kind::tmpfs,
                             bind_spec("", "/tmp", A::read_write, N::required, D::single), false,
                             "/tmp (tmpfs)"});
  } else {
    add_bind(bind_spec("/tmp", "/tmp", A::read_write, N::required, D::single), "/tmp (host)");
  }
  if (c.home) {
    add_bind(bind_spec(c.home->string(), c.home->string(), A::read_write, N::required, D::recursive), "home");
  }
  for (const BindSpec& b : c.binds) {
    add_bind(
        b, fmt::format("--bind {}:{}{}", b.source.string(), b.target, b.access == A::read_only ? ":ro" : ""));
  }
  return t;
}

// A captured mount: a detached tree waiting to be attached at `target`.
struct Mount {
  const MountRequest* request = nullptr;
  UniqueFd tree;
  bool directory = true;
};

// True when `target` lies in (or is) an earlier mount's target: its mount point is then looked
// up after that mount is in place, not in the image.
bool covered_by_earlier(const std::vector<Mount>& mounts, std::size_t index) {
  const std::string& t = mounts[index].request->bind.target;
  for (std::size_t i = 0; i < index; ++i) {
    const std::string& e = mounts[i].request->bind.target;
    if (t == e ||
        (t.size() > e.size() && t.compare(0, e.size(), e) == 0 && (e == "/" || t[e.size()] == '/'))) {
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Reporting from the child: a failure before the command runs travels to the parent over a
// close-on-exec pipe; EOF without a record means the command was executed.

struct ReportHeader {
  std::int32_t code;   ///< the error's ExitCode
  std::int32_t status; ///< its pass-through exit status, -1 when none
  std::uint32_t length;
};

[[noreturn]] void child_fail(int report_fd, const Error& error) {
  std::string msg = error.message.substr(0, 3800);
  ReportHeader h{static_cast<std::int32_t>(error.code), error.exit_status,
                 static_cast<std::uint32_t>(msg.size())};
  std::string record(reinterpret_cast<const char*>(&h), sizeof h);
  record += msg;
  (void)!::write(report_fd, record.data(), record.size()); // one write below PIPE_BUF: atomic
  _exit(error.process_exit() & 0xff);
}

// The ExitCode a child reported, checked against the table.
ExitCode reported_code(std::int32_t code) {
  switch (code) {
  case static_cast<std::int32_t>(ExitCode::ok):
  case static_cast<std::int32_t>(ExitCode::check_failed):
  case static_cast<std::int32_t>(ExitCode::invalid_input):
  case static_cast<std::int32_t>(ExitCode::external):
  case static_cast<std::int32_t>(ExitCode::io):
  case static_cast<std::int32_t>(ExitCode::interrupted):
    return static_cast<ExitCode>(code);
  default:
    return ExitCode::internal;
  }
}

// ---------------------------------------------------------------------------------------------
// Signals: forwarded from each waiting process to the one it waits for.

// Default dispositions and an empty mask, as a freshly started command expects (signals the
// caller ignored, such as SIGHUP under nohup, stay ignored).
void reset_signals_for_child(const sigset_t& old_mask) {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int s : k_forwarded_signals) {
    struct sigaction cur {};
    sigaction(s, nullptr, &cur);
    if (cur.sa_handler != SIG_IGN) {
      sigaction(s, &sa, nullptr);
    }
  }
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
}

// ---------------------------------------------------------------------------------------------
// The child side

// What the parent computed for the child (validated before any fork).
struct Plan {
  const SandboxConfig* config = nullptr;
  std::vector<MountRequest> table;
  bool user_namespace = false; // the caller is not root
  uid_t outer_uid = 0;
  gid_t outer_gid = 0;
  uid_t uid = 0; // inside
  gid_t gid = 0;
  int report_fd = -1;
  std::vector<sock_filter> seccomp;         // the confinement filter (config.confined)
  std::optional<SupervisorPlan> supervisor; // config.supervisor
  // The confined command's user namespace is mapped by the init (root, or subordinate ids), with
  // these maps; else the command maps its one id itself.
  bool init_maps_command = false;
  std::string command_uid_map;
  std::string command_gid_map;
  // Subordinate ids: the child asks the parent (which runs newuidmap/newgidmap) on request_fd and
  // waits for its answer on done_fd.
  int subid_request_fd = -1;
  int subid_done_fd = -1;
  // Root in a user namespace of its own (config.emulation): the parent, root outside, writes maps
  // of every id to itself when the child asks on subid_request_fd.
  bool root_user_namespace = false;
  // Unprivileged with config.emulation: the container's user namespace maps the caller to 0 (only
  // its root may register a binfmt_misc handler); just before the command, a nested user namespace
  // maps the requested ids (uid, gid) to that 0, and inherits the handler.
  bool nest_user = false;
  // hold_sandbox: the child writes the working directory here instead of running a command, then
  // waits for EOF on release_fd while the parent takes its namespaces.
  int hold_fd = -1;
  int release_fd = -1;
};

Result<void> write_proc_file(const char* path, const std::string& text) {
  UniqueFd fd(::open(path, O_WRONLY | O_CLOEXEC));
  if (!fd.valid() || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return errno_error(fmt::format("can't write '{}' to {}", text.substr(0, text.size() - 1), path), errno);
  }
  return {};
}

// Maps the caller's uid/gid (one id each, as an unprivileged process may) to the requested ids.
Result<void> write_id_maps(const Plan& p) {
  LS_TRY(write_proc_file("/proc/self/setgroups", "deny\n"));
  const bool emulating = p.config->emulation.has_value();
  LS_TRY(write_proc_file("/proc/self/uid_map", fmt::format("{} {} 1\n", emulating ? 0 : p.uid, p.outer_uid)));
  LS_TRY(write_proc_file("/proc/self/gid_map", fmt::format("{} {} 1\n", emulating ? 0 : p.gid, p.outer_gid)));
  return {};
}

// Plan::nest_user: a user namespace inside the container's, mapping the requested ids to its 0.
Result<void> nest_user_namespace(const Plan& p) {
  if (::unshare(CLONE_NEWUSER) < 0) {
    return errno_error("can't create the command's user namespace", errno);
  }
  LS_TRY(write_proc_file("/proc/self/setgroups", "deny\n"));
  LS_TRY(write_proc_file("/proc/self/uid_map", fmt::format("{} 0 1\n", p.uid)));
  LS_TRY(write_proc_file("/proc/self/gid_map", fmt::format("{} 0 1\n", p.gid)));
  return {};
}

// Subordinate ids: only the setuid newuidmap/newgidmap may map a range, and only from outside the
// namespace; the child asks the parent, which runs them (answer_map_request), and waits.
Result<void> await_subid_maps(const Plan& p) {
  if (::write(p.subid_request_fd, "m", 1) != 1) {
    return errno_error("can't ask for the subordinate id maps", errno);
  }
  char b = 0;
  ssize_t n = 0;
  do {
    n = ::read(p.subid_done_fd, &b, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1 || b != 'k') {
    return Error{ExitCode::external,
                 p.root_user_namespace
                     ? "the container's id maps were not written"
                     : "the subordinate id maps were not written (newuidmap/newgidmap failed)"};
  }
  ::close(p.subid_request_fd);
  ::close(p.subid_done_fd);
  return {};
}

// ---------------------------------------------------------------------------------------------
// Confinement (SandboxConfig::confined): the command's own user namespace, made after the
// container is assembled, so it owns none of the namespaces the container's mounts, network and
// pids belong to.

// The pipes between a confined command and its init when lockstep runs as root: only a process
// with CAP_SETUID over the parent namespace may map a range of ids, so the command creates its
// user namespace, tells the init, which writes the maps and answers.
struct ConfineSync {
  int to_init[2] = {-1, -1};
  int to_command[2] = {-1, -1};
};

Result<void> wait_byte(int fd, const char* what) {
  char b = 0;
  for (;;) {
    ssize_t n = ::read(fd, &b, 1);
    if (n == 1) {
      return {};
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    return Error{ExitCode::internal, fmt::format("confinement: {} did not answer", what)};
  }
}

// The command's side, between fork and exec: a session of its own (no controlling terminal whose
// input it could push to: TIOCSTI), stdin from /dev/null, its user namespace and ids, then
// no_new_privs and the seccomp filter.
Result<void> confine_command(const Plan& p, const ConfineSync& sync, int supervisor_sock) {
  if (::setsid() < 0) {
    return errno_error("confinement: can't start a session of the build step's own", errno);
  }
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null.valid() || ::dup2(null.get(), STDIN_FILENO) < 0) {
    return errno_error("confinement: can't read stdin from /dev/null", errno);
  }
  if (::unshare(CLONE_NEWUSER) < 0) {
    return errno_error("confinement: can't create the build step's user namespace", errno);
  }
  if (!p.init_maps_command) {
    // Unprivileged: the one id we have maps to itself, one level down. The maps are written by
    // this process, which must own its /proc files for that (the init it was forked from isn't
    // dumpable; nothing else runs in the container yet).
    ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    LS_TRY(write_proc_file("/proc/self/setgroups", "deny\n"));
    LS_TRY(write_proc_file("/proc/self/uid_map", fmt::format("{} {} 1\n", p.uid, p.uid)));
    LS_TRY(write_proc_file("/proc/self/gid_map", fmt::format("{} {} 1\n", p.gid, p.gid)));
  } else {
    // Root (or subordinate ids): the init maps 0.. to the confined host range (or the namespace's
    // whole range); then become the requested ids there, without supplementary groups.
    if (p.user_namespace) {
      // The init writes this process's maps as root of the container's user namespace, which must
      // own its /proc files for that (inherited non-dumpable, they are the host's root's); it
      // executes the step next anyway, which makes it dumpable.
      ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    }
    if (::write(sync.to_init[1], "u", 1) != 1) {
      return errno_error("confinement: can't signal the init", errno);
    }
    LS_TRY(wait_byte(sync.to_command[0], "the init"));
    if (::setgroups(0, nullptr) < 0 || ::setresgid(p.gid, p.gid, p.gid) < 0 ||
        ::setresuid(p.uid, p.uid, p.uid) < 0) {
      return errno_error(fmt::format("confinement: can't switch to uid {} gid {}", p.uid, p.gid), errno);
    }
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
    return errno_error("confinement: can't set no_new_privs", errno);
  }
  struct sock_fprog prog {};
  prog.len = static_cast<unsigned short>(p.seccomp.size());
  prog.filter = const_cast<sock_filter*>(p.seccomp.data());
  if (!p.supervisor) {
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
      return errno_error("confinement: can't load the seccomp filter", errno);
    }
    return {};
  }
  const long listener =
      ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (listener < 0) {
    return errno_error("confinement: can't load the seccomp filter with a supervisor", errno);
  }
  UniqueFd fd(static_cast<int>(listener));
  // Supervised: the listener goes to the init over the socket pair (runner/runtime/join.hpp's framing).
  if (auto sent = join::send_message(supervisor_sock, "", {fd.get()}); !sent) {
    return Error{sent.error().code,
                 "confinement: can't hand the seccomp listener to the init: " + sent.error().message};
  }
  return {};
}

// The init's side (root only): once the command has its user namespace, map its ids 0.. to the
// confined host range.
Result<void> map_confined_ids(const Plan& p, pid_t command, const ConfineSync& sync) {
  if (!wait_byte(sync.to_init[0], "the build step")) {
    return {}; // it failed before; its report says why
  }
  LS_TRY(write_proc_file(fmt::format("/proc/{}/uid_map", command).c_str(), p.command_uid_map));
  LS_TRY(write_proc_file(fmt::format("/proc/{}/gid_map", command).c_str(), p.command_gid_map));
  if (::write(sync.to_command[1], "k", 1) != 1) {
    return errno_error("confinement: can't answer the build step", errno);
  }
  return {};
}

Result<void> bring_up_loopback() {
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) {
    return errno_error("can't open a socket to configure lo", errno);
  }
  struct ifreq ifr {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) < 0) {
    return errno_error("can't read the flags of lo", errno);
  }
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) < 0) {
    return errno_error("can't bring lo up", errno);
  }
  return {};
}

// Attaches the squashfs at `src` to a free loop device (read-only, detached automatically when
// the last mount goes) and returns it mounted as a detached tree.
Result<UniqueFd> mount_loop_root(const LoopRoot& src) {
  LS_TRY_ASSIGN(UniqueFd file, open_file(src.file, O_RDONLY));
  UniqueFd ctl(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!ctl.valid()) {
    return Error{ExitCode::external,
                 fmt::format("can't open /dev/loop-control to mount {}: {} (loop mounts need "
                             "root; use --sif-mount fuse or extract)",
                             src.file.string(), std::strerror(errno))};
  }
  for (int attempt = 0; attempt < 20; ++attempt) {
    int n = ::ioctl(ctl.get(), LOOP_CTL_GET_FREE);
    if (n < 0) {
      return Error{ExitCode::external, fmt::format("can't get a free loop device: {}", std::strerror(errno))};
    }
    std::string dev = fmt::format("/dev/loop{}", n);
    UniqueFd loop(::open(dev.c_str(), O_RDONLY | O_CLOEXEC));
    if (!loop.valid()) {
      return Error{ExitCode::external, fmt::format("can't open {}: {}", dev, std::strerror(errno))};
    }
    struct loop_config cfg {};
    cfg.fd = static_cast<std::uint32_t>(file.get());
    cfg.info.lo_offset = src.offset;
    cfg.info.lo_sizelimit = src.size;
    cfg.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
    if (::ioctl(loop.get(), LOOP_CONFIGURE, &cfg) < 0) {
      if (errno == EBUSY) {
        continue; // another process took it between GET_FREE and CONFIGURE
      }
      return Error{ExitCode::external,
                   fmt::format("can't attach {} to {}: {}", src.file.string(), dev, std::strerror(errno))};
    }
    log::debug("sandbox: {} (offset {}, {} bytes) attached to {}", src.file.string(), src.offset, src.size,
               dev);
    return new_filesystem("squashfs", {{"source", dev}, {"ro", ""}},
                          MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, src.file.string());
  }
  return Error{ExitCode::external, "can't get a free loop device: all were taken while trying"};
}

// Captures the source of one mount as a detached tree (nullopt: optional and absent).
Result<std::optional<Mount>> capture(const MountRequest& r, std::set<dev_t>& own_tmpfs) {
  Mount m;
  m.request = &r;
  switch (r.kind) {
  case MountRequest::Kind::proc: {
    LS_TRY_ASSIGN(m.tree, new_filesystem("proc", {}, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                                         "/proc"));
    return std::optional<Mount>(std::move(m));
  }
  case MountRequest::Kind::sysfs: {
    LS_TRY_ASSIGN(m.tree,
                  new_filesystem("sysfs", {},
                                 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                                 "/sys"));
    return std::optional<Mount>(std::move(m));
  }
  case MountRequest::Kind::devpts: {
    LS_TRY_ASSIGN(m.tree,
                  new_filesystem("devpts", {{"newinstance", ""}, {"ptmxmode", "0666"}, {"mode", "0620"}},
                                 MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, r.label));
    return std::optional<Mount>(std::move(m));
  }
  case MountRequest::Kind::tmpfs:
  case MountRequest::Kind::dev_tmpfs: {
    const bool dev = r.kind == MountRequest::Kind::dev_tmpfs;
    LS_TRY_ASSIGN(m.tree, new_filesystem("tmpfs", {{"mode", dev ? "0755" : "1777"}},
                                         MOUNT_ATTR_NOSUID | (dev ? 0U : MOUNT_ATTR_NODEV), r.label));
    struct stat st {};
    if (::fstat(m.tree.get(), &st) == 0) {
      own_tmpfs.insert(st.st_dev);
    }
    if (dev) {
      // The minimal /dev: mount points for the bound nodes are created on demand; these links
      // are what programs expect beside them.
      for (auto [name, to] : {std::pair{"fd", "/proc/self/fd"}, std::pair{"stdin", "/proc/self/fd/0"},
                              std::pair{"stdout", "/proc/self/fd/1"}, std::pair{"stderr", "/proc/self/fd/2"},
                              std::pair{"ptmx", "pts/ptmx"}}) {
        if (::symlinkat(to, m.tree.get(), name) < 0) {
          return errno_error(fmt::format("can't create /dev/{} in the minimal /dev", name), errno);
        }
      }
    }
    return std::optional<Mount>(std::move(m));
  }
  case MountRequest::Kind::bind: {
    const BindSpec& b = r.bind;
    bool recursive = b.depth == BindSpec::Depth::recursive;
    m.tree = UniqueFd(open_tree(AT_FDCWD, b.source.c_str(),
                                OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0U)));
    if (!m.tree.valid() && errno == EINVAL && !recursive) {
      // In a user namespace the kernel refuses a single-level clone of a tree with mounts
      // locked beneath it (they would be uncovered); those mounts stay, so bind them too.
      log::debug("sandbox: {} has mounts beneath it the kernel keeps; binding them too", b.source.string());
      recursive = true;
      m.tree =
          UniqueFd(open_tree(AT_FDCWD, b.source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
    }
    if (!m.tree.valid()) {
      if (errno == ENOENT && b.need == BindSpec::Need::optional) {
        log::debug("sandbox: skip {}: {} does not exist on the host", r.label, b.source.string());
        return std::optional<Mount>();
      }
      Error e = errno_error(fmt::format("can't bind {} to {}", b.source.string(), b.target), errno);
      if (errno == ENOENT) {
        e.code = ExitCode::invalid_input;
      }
      return e;
    }
    if (b.access == BindSpec::Access::read_only) {
      LS_TRY(set_mount_attrs(m.tree.get(), MOUNT_ATTR_RDONLY, recursive, r.label));
    }
    struct stat st {};
    if (::fstat(m.tree.get(), &st) < 0) {
      return errno_error("can't stat " + b.source.string(), errno);
    }
    m.directory = S_ISDIR(st.st_mode);
    return std::optional<Mount>(std::move(m));
  }
  }
  return internal_error("unknown mount kind");
}

// Mounts `m` at its target inside the root. A missing target is created only on a tmpfs this
// sandbox made (/tmp, the minimal /dev); elsewhere it was created up front or is an error.
Result<void> attach(int root_fd, Mount& m, const std::set<dev_t>& own_tmpfs) {
  const std::string& target = m.request->bind.target;
  int fd = open_in_root(root_fd, target);
  if (fd == -ENOENT) {
    // Created only when the deepest directory that exists is on one of our own tmpfs mounts.
    LS_TRY_ASSIGN(ImagePath where, walk_image(root_fd, target));
    if (own_tmpfs.count(where.last.st_dev) == 0) {
      return invalid_input("can't mount {}: the mount point {} does not exist in the container (it lies in "
                           "a mounted directory that lockstep does not create mount points in)",
                           m.request->label, target);
    }
    LS_TRY(
        make_in_layer(root_fd, root_fd, where, m.directory ? EntryType::directory : EntryType::file, target));
    fd = open_in_root(root_fd, target);
  }
  if (fd < 0) {
    return errno_error(
        fmt::format("can't mount {}: can't resolve {} in the container", m.request->label, target), -fd);
  }
  UniqueFd target_fd(fd);
  struct stat st {};
  if (::fstat(target_fd.get(), &st) < 0) {
    return errno_error("can't stat the mount point " + target, errno);
  }
  if (S_ISDIR(st.st_mode) != m.directory) {
    return invalid_input("can't mount {}: {} is a {} in the container but the source is a {}",
                         m.request->label, target, S_ISDIR(st.st_mode) ? "directory" : "file",
                         m.directory ? "directory" : "file");
  }
  if (move_mount(m.tree.get(), "", target_fd.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) <
      0) {
    return errno_error(fmt::format("can't mount {} on {}", m.request->label, target), errno);
  }
  log::debug("sandbox: mounted {} on {}", m.request->label, target);
  return {};
}

// Where the container tree is assembled before pivot_root: a tmpfs over the host's /tmp, visible
// only in the container's (private) mount namespace. Every source was captured before this
// mount hides the host's /tmp.
constexpr const char* k_staging = "/tmp";

Result<UniqueFd> overlay(const std::string& lowerdir, const std::string& upper, const std::string& work,
                         bool user_namespace, const std::string& what) {
  std::vector<std::pair<std::string, std::string>> opts = {{"lowerdir", lowerdir}};
  if (!upper.empty()) {
    opts.emplace_back("upperdir", upper);
    opts.emplace_back("workdir", work);
  }
  if (user_namespace) {
    opts.emplace_back("userxattr", ""); // trusted.* xattrs are out of reach in a user namespace
  }
  return new_filesystem("overlay", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, what);
}

Result<void> attach_at(int tree, int dir_fd, const char* name) {
  if (::mkdirat(dir_fd, name, 0755) < 0 && errno != EEXIST) {
    return errno_error(fmt::format("can't create {}/{}", k_staging, name), errno);
  }
  if (move_mount(tree, "", dir_fd, name, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
    return errno_error(fmt::format("can't attach a mount at {}/{}", k_staging, name), errno);
  }
  return {};
}

// Runs `argv` with `env`, looking argv[0] up in the PATH of `env` (not of this process). Returns
// only on failure, with the error to report.
Error exec_command(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  return join::exec_failure_error(argv[0], join::exec_in_path(argv, env));
}

} // namespace

namespace {

// ---- assembling the root --------------------------------------------------------------------------

// A mount point the image lacks.
struct MissingMountPoint {
  std::string target;
  ImagePath where;
  EntryType type;
};

// The container's mount tree being assembled: what each pass of assemble_root learns.
struct RootAssembly {
  explicit RootAssembly(const Plan& plan) : p(plan), c(*plan.config) {}

  const Plan& p;
  const SandboxConfig& c;
  std::set<dev_t> own_tmpfs; ///< tmpfs file systems the sandbox made (capture, attach)
  // capture_sources
  UniqueFd image;     ///< the image root as a detached tree
  UniqueFd upper_dir; ///< c.overlay's upper and work directories, held open
  UniqueFd work_dir;  //   (named as /proc/self/fd/N: the staging tmpfs may hide their paths)
  std::vector<Mount> mounts;
  // find_missing_mount_points
  std::vector<MissingMountPoint> missing;          ///< needed: they justify the overlay
  std::vector<MissingMountPoint> missing_optional; ///< the default /etc files: made only when there is one
  std::vector<bool> skip; ///< mounts whose optional mount point is missing (until one is made)
  // stage
  bool overlay_needed = false;
  UniqueFd staging; ///< the staging tmpfs on k_staging, when the tree is assembled there
  // make_root
  UniqueFd root; ///< the root the container sees
};

// Pass 1: capture the image root and every mount source as detached trees, before anything is
// mounted: later passes hide the host's /tmp, and no path is looked up twice.
Result<void> capture_sources(RootAssembly& a) {
  const SandboxConfig& c = a.c;
  if (c.loop_root) {
    LS_TRY_ASSIGN(a.image, mount_loop_root(*c.loop_root));
    log::debug("sandbox: root: kernel loop mount of the squashfs in {}", c.loop_root->file.string());
  } else {
    a.image = UniqueFd(open_tree(AT_FDCWD, c.root.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    if (!a.image.valid()) {
      return errno_error("can't bind the image root " + c.root.string(), errno);
    }
    log::debug("sandbox: root: bind of {}", c.root.string());
  }
  if (c.overlay) {
    LS_TRY_ASSIGN(a.upper_dir, open_file(c.overlay->upper, O_PATH | O_DIRECTORY));
    LS_TRY_ASSIGN(a.work_dir, open_file(c.overlay->work, O_PATH | O_DIRECTORY));
  }
  for (const MountRequest& r : a.p.table) {
    LS_TRY_ASSIGN(std::optional<Mount> m, capture(r, a.own_tmpfs));
    if (m) {
      a.mounts.push_back(std::move(*m));
    }
  }
  return {};
}

// Pass 2: the mount points the image lacks. Targets inside an earlier mount are looked up once
// that mount is in place (pass 5).
Result<void> find_missing_mount_points(RootAssembly& a) {
  a.skip.assign(a.mounts.size(), false);
  for (std::size_t i = 0; i < a.mounts.size(); ++i) {
    if (covered_by_earlier(a.mounts, i)) {
      continue;
    }
    const MountRequest& r = *a.mounts[i].request;
    Result<ImagePath> where = walk_image(a.image.get(), r.bind.target);
    if (!where) {
      return where.error().with_context("can't mount " + r.label);
    }
    if (where->kind != PathKind::missing) {
      continue;
    }
    MissingMountPoint m{r.bind.target, std::move(*where),
                        a.mounts[i].directory ? EntryType::directory : EntryType::file};
    (r.only_if_target_exists ? a.missing_optional : a.missing).push_back(std::move(m));
    a.skip[i] = r.only_if_target_exists;
  }
  if (a.c.cwd_missing == CwdMissing::create) {
    LS_TRY_ASSIGN(ImagePath where, walk_image(a.image.get(), a.c.cwd));
    if (where.kind == PathKind::missing) {
      a.missing.push_back(MissingMountPoint{a.c.cwd, std::move(where), EntryType::directory});
    }
  }
  return {};
}

// Pass 3: stage: pivot_root needs the new root to be a mount point somewhere. A directory root on
// the fast path is attached over its own directory (as `mount --bind R R`); otherwise the tree is
// assembled on a tmpfs over /tmp, private to this mount namespace (every source was captured
// above, so nothing hidden by it is needed), with the image root at /tmp/root.
Result<void> stage(RootAssembly& a) {
  const SandboxConfig& c = a.c;
  a.overlay_needed = c.overlay || c.writable_tmpfs || (!a.missing.empty() && c.read_only);
  if (!a.overlay_needed && !c.loop_root) {
    if (move_mount(a.image.get(), "", AT_FDCWD, c.root.c_str(), MOVE_MOUNT_F_EMPTY_PATH) < 0) {
      return errno_error("can't bind the image root " + c.root.string(), errno);
    }
    return {};
  }
  LS_TRY_ASSIGN(a.staging, new_filesystem("tmpfs", {{"mode", "0700"}}, 0, "the staging area"));
  if (move_mount(a.staging.get(), "", AT_FDCWD, k_staging, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
    return errno_error(fmt::format("can't mount the staging tmpfs on {}", k_staging), errno);
  }
  return attach_at(a.image.get(), a.staging.get(), "root");
}

// A new directory `name` on the staging tmpfs, opened.
Result<UniqueFd> make_staging_dir(const RootAssembly& a, const char* name) {
  if (::mkdirat(a.staging.get(), name, 0755) != 0) {
    return errno_error(fmt::format("can't create {}/{}", k_staging, name), errno);
  }
  UniqueFd fd(::openat(a.staging.get(), name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    return errno_error(fmt::format("can't open {}/{}", k_staging, name), errno);
  }
  return fd;
}

// Makes every missing mount point in the overlay layer `layer_fd`, whose top directory stands for
// the root directory (it gets the image root's mode); no mount is skipped then.
Result<void> fill_mount_point_layer(RootAssembly& a, int layer_fd) {
  struct stat st {};
  if (::fstat(a.image.get(), &st) == 0) {
    (void)::fchmod(layer_fd, st.st_mode & 07777);
    (void)::fchown(layer_fd, st.st_uid, st.st_gid); // fails harmlessly for unmapped ids
  }
  for (const std::vector<MissingMountPoint>* list : {&a.missing, &a.missing_optional}) {
    for (const MissingMountPoint& m : *list) {
      LS_TRY(make_in_layer(layer_fd, a.image.get(), m.where, m.type, m.target));
      log::debug("sandbox: mount point {} created in the overlay", m.target);
    }
  }
  std::fill(a.skip.begin(), a.skip.end(), false);
  return {};
}

// The caller's overlay (`run:` steps): its upper directory records the command's changes only, so
// mount points live in a layer of their own between it and the image.
Result<void> overlay_with_caller_upper(RootAssembly& a, const std::string& lower) {
  std::string lowers = lower;
  if (!a.missing.empty() || !a.missing_optional.empty()) {
    LS_TRY_ASSIGN(UniqueFd layer, make_staging_dir(a, "mounts"));
    LS_TRY(fill_mount_point_layer(a, layer.get()));
    lowers = fmt::format("{}/mounts:{}", k_staging, lower);
  }
  LS_TRY_ASSIGN(a.root,
                overlay(lowers, fmt::format("/proc/self/fd/{}", a.upper_dir.get()),
                        fmt::format("/proc/self/fd/{}", a.work_dir.get()), a.p.user_namespace, "the root"));
  log::debug("sandbox: root: overlay with upper {}{}", a.c.overlay->upper.string(),
             a.missing.empty() ? "" : " over a mount-point layer");
  return {};
}

// An overlay whose upper directory is on the staging tmpfs: mount points the image lacks, and
// with --writable-tmpfs the command's writes, discarded at exit.
Result<void> tmpfs_overlay(RootAssembly& a, const std::string& lower) {
  LS_TRY_ASSIGN(UniqueFd upper, make_staging_dir(a, "upper"));
  LS_TRY_ASSIGN(UniqueFd work, make_staging_dir(a, "work"));
  LS_TRY(fill_mount_point_layer(a, upper.get()));
  LS_TRY_ASSIGN(a.root, overlay(lower, fmt::format("{}/upper", k_staging), fmt::format("{}/work", k_staging),
                                a.p.user_namespace, "the root"));
  if (!a.c.writable_tmpfs) {
    LS_TRY(set_mount_attrs(a.root.get(), MOUNT_ATTR_RDONLY, false, "the root"));
  }
  log::debug("sandbox: root: tmpfs overlay ({}; {} mount point(s) created)",
             a.c.writable_tmpfs ? "writable, discarded at exit" : "read-only", a.missing.size());
  return {};
}

// The plain bind: read-only unless asked otherwise (then missing mount points go into the
// writable root itself).
Result<void> plain_bind(RootAssembly& a) {
  for (const MissingMountPoint& m : a.missing) {
    LS_TRY(make_in_root(a.image.get(), m.target, m.type));
    log::debug("sandbox: mount point {} created in the writable root", m.target);
  }
  std::uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (a.c.read_only ? MOUNT_ATTR_RDONLY : 0U);
  LS_TRY(set_mount_attrs(a.image.get(), attrs, false, "the root"));
  log::debug("sandbox: root: plain bind ({})", a.c.read_only ? "read-only" : "writable");
  return {};
}

// Pass 4: the root the container sees. Mount points the image lacks go into a directory on the
// staging tmpfs that overlayfs stacks above the image; the image is never modified. The plain
// bind is the fast path when nothing is missing.
Result<void> make_root(RootAssembly& a) {
  const std::string lower = fmt::format("{}/root", k_staging);
  if (a.c.overlay) {
    LS_TRY(overlay_with_caller_upper(a, lower));
  } else if (a.overlay_needed) {
    LS_TRY(tmpfs_overlay(a, lower));
  } else {
    LS_TRY(plain_bind(a));
  }
  if (a.root.valid()) {
    return attach_at(a.root.get(), a.staging.get(), "newroot");
  }
  a.root = std::move(a.image);
  return {};
}

// Pass 5: the mount table, in order, each target resolved inside the new root.
Result<void> attach_mounts(RootAssembly& a) {
  for (std::size_t i = 0; i < a.mounts.size(); ++i) {
    if (a.skip[i]) {
      log::debug("sandbox: skip {}: the image has no {}", a.mounts[i].request->label,
                 a.mounts[i].request->bind.target);
      continue;
    }
    LS_TRY(attach(a.root.get(), a.mounts[i], a.own_tmpfs));
  }
  return {};
}

// Pass 6: pivot_root the runc way: the old root ends up stacked on the new one and is detached,
// taking the staging tmpfs and the host's tree with it.
Result<void> pivot_into(int root_fd) {
  if (::fchdir(root_fd) < 0) {
    return errno_error("can't enter the new root", errno);
  }
  if (syscall(SYS_pivot_root, ".", ".") < 0) {
    return errno_error("can't pivot_root into the new root", errno);
  }
  if (::umount2(".", MNT_DETACH) < 0) {
    return errno_error("can't detach the old root", errno);
  }
  if (::chdir("/") < 0) {
    return errno_error("can't enter the new root", errno);
  }
  log::debug("sandbox: pivot_root done");
  return {};
}

// Assembles the container's mount tree and pivots into it. Runs inside the new namespaces (in
// pid 1 of the new pid namespace when there is one), before the identity change.
Result<void> assemble_root(const Plan& p) {
  RootAssembly a(p);
  // 1. The image root and every mount source, captured before anything is mounted.
  LS_TRY(capture_sources(a));
  // 2. The mount points the image lacks.
  LS_TRY(find_missing_mount_points(a));
  // 3. Where the tree is assembled: over the root itself, or on a staging tmpfs.
  LS_TRY(stage(a));
  // 4. The root the container sees: an overlay when mount points are missing, else a plain bind.
  LS_TRY(make_root(a));
  // 5. The mount table, each target resolved inside the new root.
  LS_TRY(attach_mounts(a));
  // 6. pivot_root into it.
  return pivot_into(a.root.get());
}

// Enters the working directory, resolved inside the new root with magic links refused: neither
// a leaked descriptor nor /proc/self/fd/N can lead outside (CVE-2024-21626). Returns the
// directory actually entered.
Result<std::string> enter_workdir(const SandboxConfig& c) {
  UniqueFd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  int fd = open_in_root(root.get(), c.cwd, O_DIRECTORY);
  std::string cwd = c.cwd;
  if (fd == -ENOENT && c.cwd_missing == CwdMissing::use_root) {
    log::debug("sandbox: the working directory {} does not exist in the container; using /", c.cwd);
    cwd = "/";
    fd = open_in_root(root.get(), "/", O_DIRECTORY);
  }
  if (fd == -ENOENT || fd == -ENOTDIR) {
    return invalid_input("the working directory {} does not exist in the container", c.cwd);
  }
  if (fd == -ELOOP) {
    return invalid_input("the working directory {} is refused: it goes through a /proc magic link (such as "
                         "/proc/self/fd/N) or a symlink loop",
                         c.cwd);
  }
  if (fd < 0) {
    return errno_error("can't resolve the working directory " + c.cwd + " in the container", -fd);
  }
  UniqueFd dir(fd);
  if (::fchdir(dir.get()) < 0) {
    return errno_error("can't enter the working directory " + c.cwd, errno);
  }
  return cwd;
}

// The child: new namespaces, the mount tree, the identity, then the command. Never returns.
[[noreturn]] void child_main(const Plan& p, const sigset_t& old_mask, pid_t parent) {
  const SandboxConfig& c = *p.config;
  auto check = [&](const Result<void>& r) {
    if (!r) {
      child_fail(p.report_fd, r.error());
    }
  };

  // 1. Die with the parent; no inherited descriptor reaches the command (CVE-2024-21626).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) {
    _exit(1);
  }
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  const mode_t old_umask = ::umask(022);

  // 2. Namespaces: user (unless root), mount, and uts/net/pid as asked.
  int flags = CLONE_NEWNS;
  flags |= p.user_namespace ? CLONE_NEWUSER : 0;
  flags |= c.hostname ? CLONE_NEWUTS : 0;
  flags |= c.network == NetworkPolicy::none ? CLONE_NEWNET : 0;
  flags |= c.pid_namespace ? CLONE_NEWPID : 0;
  flags |= c.confined ? CLONE_NEWIPC | CLONE_NEWCGROUP : 0;
  if (::unshare(flags) < 0) {
    child_fail(p.report_fd,
               Error{ExitCode::external,
                     fmt::format("can't create the container's namespaces: {}{}", std::strerror(errno),
                                 p.user_namespace ? " (are unprivileged user namespaces allowed? see "
                                                    "/proc/sys/user/max_user_namespaces)"
                                                  : "")});
  }
  if (p.user_namespace && (c.subids || p.root_user_namespace)) {
    check(await_subid_maps(p));
  } else if (p.user_namespace) {
    check(write_id_maps(p));
    log::debug("sandbox: user namespace: uid {} -> {}, gid {} -> {}", p.outer_uid, p.uid, p.outer_gid, p.gid);
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) {
    child_fail(p.report_fd, errno_error("can't make the container's mounts private", errno));
  }
  log::debug("sandbox: namespaces: mount{}{}{}{}", p.user_namespace ? ", user" : "",
             c.hostname ? ", uts" : "", c.network == NetworkPolicy::none ? ", net" : "",
             c.pid_namespace ? ", pid" : "");
  UniqueFd binfmt_misc; // held by the init (or the command) for the container's lifetime
  if (c.emulation) {
    // While the host's interpreter is still in reach: opened now (F), it serves every process of
    // the container and their children.
    Result<UniqueFd> registered = register_emulation(*c.emulation);
    if (!registered) {
      child_fail(p.report_fd, registered.error());
    }
    binfmt_misc = std::move(*registered);
  }

  // 3. A new pid namespace starts with the next child: this process stays outside and waits.
  if (c.pid_namespace) {
    pid_t init = ::fork();
    if (init < 0) {
      child_fail(p.report_fd, errno_error("can't fork the container's init", errno));
    }
    if (init > 0) {
      ::close(p.report_fd);
      SignalForwarding forwarding(init);
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      _exit(wait_exit_code(init));
    }
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::prctl(PR_SET_NAME, "lockstep-init");
    // The init is a copy of lockstep (its memory holds the caller's environment): nothing in the
    // container may read it through /proc/1/{environ,mem} or ptrace.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  }

  // 4. Hostname and network.
  if (c.hostname && ::sethostname(c.hostname->data(), c.hostname->size()) < 0) {
    child_fail(p.report_fd, errno_error("can't set the hostname " + *c.hostname, errno));
  }
  if (c.network == NetworkPolicy::none) {
    check(bring_up_loopback());
    log::debug("sandbox: network: new namespace, lo up");
  }

  // 5. The mount tree, then pivot_root.
  check(assemble_root(p));

  // 6. The identity: in a user namespace the id maps already made us the requested user; as
  //    root, drop to it. No new privileges from here on (setuid bits in the image are inert).
  if ((!p.user_namespace || p.root_user_namespace) && !c.confined && (p.uid != 0 || p.gid != 0)) {
    if (::setgroups(1, &p.gid) < 0 || ::setgid(p.gid) < 0 || ::setuid(p.uid) < 0) {
      child_fail(p.report_fd, errno_error(fmt::format("can't switch to uid {} gid {}", p.uid, p.gid), errno));
    }
  }
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);

  // 7. The working directory and the command's environment.
  Result<std::string> cwd = enter_workdir(c);
  if (!cwd) {
    child_fail(p.report_fd, cwd.error());
  }
  std::vector<std::string> env;
  for (const std::string& e : c.env) {
    if (e.rfind("PWD=", 0) != 0) {
      env.push_back(e);
    }
  }
  env.push_back("PWD=" + *cwd);
  ::umask(c.umask.value_or(old_umask));
  if (c.stdout_to == SandboxConfig::Stdout::to_stderr && ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    child_fail(p.report_fd, errno_error("can't send the command's stdout to stderr", errno));
  }
  if (p.hold_fd >= 0) {
    // Held (hold_sandbox): no command; the parent opens this process's namespaces, then lets go.
    std::string msg(sizeof(std::uint32_t), '\0');
    const auto size = static_cast<std::uint32_t>(cwd->size());
    std::memcpy(msg.data(), &size, sizeof size);
    msg += *cwd;
    if (::write(p.hold_fd, msg.data(), msg.size()) != static_cast<ssize_t>(msg.size())) {
      _exit(1);
    }
    char byte = 0;
    while (::read(p.release_fd, &byte, 1) < 0 && errno == EINTR) {
    }
    _exit(0);
  }
  if (p.nest_user) {
    check(nest_user_namespace(p));
  }
  log::debug("sandbox: exec {} in {} as uid {} gid {}", c.argv[0], *cwd, p.uid, p.gid);

  // 8. Without a pid namespace the command replaces this process.
  if (!c.pid_namespace) {
    reset_signals_for_child(old_mask);
    child_fail(p.report_fd, exec_command(c.argv, env));
  }

  // 9. With one, this process is its init (pid 1): it starts the command, forwards signals to it,
  //    reaps every orphan, and exits with the command's status (the kernel then kills the rest).
  sigset_t fwd = forwarded_signal_set();
  sigprocmask(SIG_BLOCK, &fwd, nullptr);
  ConfineSync sync;
  if (c.confined && p.init_maps_command &&
      (::pipe2(sync.to_init, O_CLOEXEC) < 0 || ::pipe2(sync.to_command, O_CLOEXEC) < 0)) {
    child_fail(p.report_fd, errno_error("can't create the confinement pipes", errno));
  }
  int supervisor_socks[2] = {-1, -1};
  if (p.supervisor && ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, supervisor_socks) < 0) {
    child_fail(p.report_fd, errno_error("can't create the supervisor's socket pair", errno));
  }
  pid_t cmd = ::fork();
  if (cmd < 0) {
    child_fail(p.report_fd, errno_error("can't fork the command", errno));
  }
  if (cmd == 0) {
    if (c.confined) {
      if (supervisor_socks[0] >= 0) {
        ::close(supervisor_socks[0]);
      }
      check(confine_command(p, sync, supervisor_socks[1]));
    }
    reset_signals_for_child(old_mask);
    child_fail(p.report_fd, exec_command(c.argv, env));
  }
  if (c.confined && p.init_maps_command) {
    ::close(sync.to_init[1]); // EOF when the command dies before asking
    check(map_confined_ids(p, cmd, sync));
  }
  UniqueFd listener;
  if (p.supervisor) {
    ::close(supervisor_socks[1]); // EOF when the command dies before sending the listener
    // Nothing arrives when the command died before sending the listener; its report says why.
    std::vector<int> fds;
    if (join::receive_message(supervisor_socks[0], 0, fds) && fds.size() == 1) {
      listener = UniqueFd(fds[0]);
    } else {
      for (int fd : fds) {
        ::close(fd);
      }
    }
    ::close(supervisor_socks[0]);
  }
  ::close(p.report_fd);
  SignalForwarding forwarding(cmd);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (listener.valid()) {
    _exit(supervise(*p.supervisor, listener.get(), cmd));
  }
  int code = 128;
  for (;;) {
    int status = 0;
    pid_t w = ::waitpid(-1, &status, 0);
    if (w < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    if (w == cmd) {
      code = exit_code_of_status(status);
      break;
    }
  }
  _exit(code);
}

// What the child process starts with.
struct ChildStart {
  const Plan* plan;
  sigset_t old_mask; // the caller's signal mask, restored for the command
  pid_t parent;
  int report_read_end;        // the parent's end of the report pipe, closed in the child
  int hold_read_end = -1;     // hold_sandbox: the parent's ends of its two pipes, closed in the child
  int release_write_end = -1; //
};

int child_entry(void* arg) {
  const auto* start = static_cast<const ChildStart*>(arg);
  ::close(start->report_read_end);
  if (start->hold_read_end >= 0) {
    ::close(start->hold_read_end);
    ::close(start->release_write_end);
  }
  child_main(*start->plan, start->old_mask, start->parent);
}

// How the child gets its memory: a copy (fork), or this process's memory shared until it execs
// the command (start_sharing_child). The shared form skips copying the page tables and the
// copy-on-write faults that follow, a good part of the start-up cost; it can't be used when the
// child keeps running lockstep code (the waiter of a pid namespace). The child never writes to
// anything the parent owns.
enum class ChildMemory { copy, share };

pid_t start_child(ChildStart& start, ChildMemory memory) {
  if (memory == ChildMemory::copy) {
    pid_t pid = ::fork();
    if (pid == 0) {
      child_entry(&start);
    }
    return pid;
  }
  return start_sharing_child(child_entry, &start);
}

// Checks the config before anything is forked; returns the plan the child follows.
Result<Plan> make_plan(const SandboxConfig& c) {
  if (c.argv.empty() || c.argv[0].empty()) {
    return invalid_input("no command to run in the container");
  }
  if (!c.loop_root) {
    struct stat st {};
    if (::stat(c.root.c_str(), &st) < 0) {
      Error e = errno_error("can't use " + c.root.string() + " as the container root", errno);
      e.code = ExitCode::invalid_input;
      return e;
    }
    if (!S_ISDIR(st.st_mode)) {
      return invalid_input("can't use {} as the container root: not a directory", c.root.string());
    }
  }
  if (c.cwd.empty() || c.cwd[0] != '/') {
    return invalid_input("the working directory must be an absolute path: '{}'", c.cwd);
  }
  LS_TRY(normalize_image_path(c.cwd));
  Plan p;
  p.config = &c;
  p.table = mount_table(c);
  for (MountRequest& r : p.table) {
    const std::string& t = r.bind.target;
    if (t.empty() || t[0] != '/') {
      return invalid_input("can't mount {}: the target must be an absolute path", r.label);
    }
    Result<std::string> norm = normalize_image_path(t);
    if (!norm) {
      return invalid_input("can't mount {}: {}", r.label, norm.error().message);
    }
    if (*norm == "/") {
      return invalid_input("can't mount {}: the target can't be the container's root", r.label);
    }
    r.bind.target = *norm;
  }
  p.outer_uid = ::geteuid();
  p.outer_gid = ::getegid();
  p.user_namespace = p.outer_uid != 0;
  if (c.emulation && !p.user_namespace) {
    // binfmt_misc instances belong to user namespaces: root takes one mapping every id to itself
    // (a confined step's own namespace, nested in it, inherits the handler and maps the confined
    // range as it would from the host's).
    if (c.loop_root) {
      return internal_error("a loop-mounted root can't be used in a user namespace (emulation)");
    }
    p.user_namespace = true;
    p.root_user_namespace = true;
  }
  p.uid = c.uid.value_or(p.outer_uid);
  p.gid = c.gid.value_or(p.outer_gid);
  p.nest_user = c.emulation && !p.root_user_namespace && (p.uid != 0 || p.gid != 0);
  if (c.subids && (!p.user_namespace || !c.confined || p.uid != 0 || p.gid != 0)) {
    return internal_error("subordinate ids are mapped for an unprivileged, confined step as uid 0 only");
  }
  p.init_maps_command = !p.user_namespace || p.root_user_namespace || c.subids.has_value();
  if (!p.user_namespace || p.root_user_namespace) {
    p.command_uid_map = fmt::format("0 {} {}\n", k_confined_host_first, k_confined_id_count);
    p.command_gid_map = p.command_uid_map;
  } else if (c.subids) {
    // Root on a line of its own: the kernel lets the container's root map its own id 0 one level
    // down, but refuses a range starting at 0 without CAP_SETFCAP over the host's namespace.
    p.command_uid_map = fmt::format("0 0 1\n1 1 {}\n", c.subids->uid_count);
    p.command_gid_map = fmt::format("0 0 1\n1 1 {}\n", c.subids->gid_count);
  }
  if (c.confined) {
    if (!c.pid_namespace) {
      return internal_error("a confined sandbox needs its own pid namespace");
    }
    if (c.supervisor) {
      SupervisorPlan sp;
      sp.mode = *c.supervisor;
      sp.id_base = p.user_namespace && !p.root_user_namespace ? 0 : k_confined_host_first;
      LS_TRY_ASSIGN(p.seccomp, confinement_filter(sp.mode, &sp.syscalls));
      p.supervisor = std::move(sp);
    } else {
      LS_TRY_ASSIGN(p.seccomp, confinement_filter());
    }
  }
  return p;
}

} // namespace

namespace {

// The parent's side of await_subid_maps: when the child asks on `request_fd`, `write_maps` writes
// its id maps, and the answer on `done_fd` says whether they were.
Result<void> answer_map_request(int request_fd, int done_fd,
                                const std::function<Result<void>()>& write_maps) {
  char b = 0;
  ssize_t n = 0;
  do {
    n = ::read(request_fd, &b, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) {
    return {}; // the child failed before asking; its report says why
  }
  if (auto mapped = write_maps(); !mapped) {
    (void)::write(done_fd, "x", 1);
    return mapped.error();
  }
  if (::write(done_fd, "k", 1) != 1) {
    return errno_error("can't tell the container its id maps are written", errno);
  }
  return {};
}

// Root in a user namespace of its own (Plan::root_user_namespace): every id of the child's
// namespace maps to the same host id.
Result<void> write_root_maps(pid_t child) {
  const std::string all = "0 0 4294967295\n";
  for (const char* map : {"uid_map", "gid_map"}) {
    LS_TRY(write_proc_file(fmt::format("/proc/{}/{}", child, map).c_str(), all));
  }
  return {};
}

} // namespace

Result<int> run_in_sandbox(const SandboxConfig& config) {
  LS_TRY_ASSIGN(Plan plan, make_plan(config));
  log::Timer timer("start the container");

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0) {
    return errno_error("can't create a pipe", errno);
  }
  UniqueFd report(fds[0]);
  plan.report_fd = fds[1];
  int request[2] = {-1, -1};
  int done[2] = {-1, -1};
  if ((config.subids || plan.root_user_namespace) &&
      (::pipe2(request, O_CLOEXEC) < 0 || ::pipe2(done, O_CLOEXEC) < 0)) {
    return errno_error("can't create a pipe", errno);
  }
  UniqueFd request_read(request[0]);
  UniqueFd request_write(request[1]);
  UniqueFd done_read(done[0]);
  UniqueFd done_write(done[1]);
  plan.subid_request_fd = request[1];
  plan.subid_done_fd = done[0];
  sigset_t fwd = forwarded_signal_set();
  ChildStart start{&plan, {}, ::getpid(), fds[0]};
  sigprocmask(SIG_BLOCK, &fwd, &start.old_mask);
  const sigset_t old_mask = start.old_mask;
  const pid_t pid = start_child(start, config.pid_namespace || plan.root_user_namespace ? ChildMemory::copy
                                                                                        : ChildMemory::share);
  ::close(fds[1]);
  if (pid < 0) {
    int err = errno;
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return errno_error("can't fork the container process", err);
  }
  SignalForwarding forwarding(pid);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (config.subids || plan.root_user_namespace) {
    request_write.reset();
    done_read.reset();
    // Subordinate ids through newuidmap/newgidmap; root's identity maps directly.
    auto mapped = answer_map_request(request_read.get(), done_write.get(), [&]() -> Result<void> {
      return plan.root_user_namespace ? write_root_maps(pid) : write_subid_maps(*config.subids, pid);
    });
    if (!mapped) {
      ::kill(pid, SIGKILL);
      (void)wait_exit_code(pid);
      return mapped.error();
    }
  }

  // The report pipe closes when the command is executed (close-on-exec), or carries the error.
  std::string record;
  std::array<char, 4096> buf{};
  for (;;) {
    ssize_t n = ::read(report.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    record.append(buf.data(), static_cast<std::size_t>(n));
  }
  timer.stop();
  const int code = wait_exit_code(pid);
  if (record.size() >= sizeof(ReportHeader)) {
    ReportHeader h{};
    std::memcpy(&h, record.data(), sizeof h);
    return Error{reported_code(h.code), record.substr(sizeof h, h.length), false,
                 h.status >= 0 && h.status <= 255 ? h.status : -1};
  }
  return code;
}

namespace {

// The error a child reported on `report`, or a generic one when it reported nothing.
Error reported_error(int report, const char* what) {
  std::string record;
  std::array<char, 4096> buf{};
  ssize_t n = 0;
  while ((n = ::read(report, buf.data(), buf.size())) > 0 || (n < 0 && errno == EINTR)) {
    record.append(buf.data(), static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
  }
  if (record.size() >= sizeof(ReportHeader)) {
    ReportHeader h{};
    std::memcpy(&h, record.data(), sizeof h);
    return Error{reported_code(h.code), record.substr(sizeof h, h.length), false,
                 h.status >= 0 && h.status <= 255 ? h.status : -1};
  }
  return internal_error("{}: the container process ended without a report", what);
}

} // namespace

Result<HeldContainer> hold_sandbox(const SandboxConfig& config) {
  if (config.pid_namespace || config.hostname || config.network != NetworkPolicy::host || config.confined ||
      config.overlay || config.writable_tmpfs) {
    return internal_error("a held container has only a mount (and user) namespace and a read-only root");
  }
  LS_TRY_ASSIGN(Plan plan, make_plan(config));
  if (config.emulation) {
    return invalid_input(
        "ranks can't join a shared container under emulation yet; run the job on nodes of the "
        "image's architecture");
  }
  log::Timer timer("hold the container");
  std::array<int, 2> report{-1, -1};
  std::array<int, 2> ready{-1, -1};
  std::array<int, 2> release{-1, -1};
  if (::pipe2(report.data(), O_CLOEXEC) < 0 || ::pipe2(ready.data(), O_CLOEXEC) < 0 ||
      ::pipe2(release.data(), O_CLOEXEC) < 0) {
    int err = errno;
    for (int fd : {report[0], report[1], ready[0], ready[1], release[0], release[1]}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    return errno_error("can't create a pipe", err);
  }
  UniqueFd report_read(report[0]);
  UniqueFd ready_read(ready[0]);
  UniqueFd release_write(release[1]);
  plan.report_fd = report[1];
  plan.hold_fd = ready[1];
  plan.release_fd = release[0];
  ChildStart start{&plan, {}, ::getpid(), report[0], ready[0], release[1]};
  sigset_t fwd = forwarded_signal_set();
  sigprocmask(SIG_BLOCK, &fwd, &start.old_mask);
  const pid_t pid = start_child(start, ChildMemory::copy);
  const int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &start.old_mask, nullptr);
  for (int fd : {report[1], ready[1], release[0]}) {
    ::close(fd);
  }
  if (pid < 0) {
    return errno_error("can't fork the container process", fork_errno);
  }
  // The child answers with the working directory once the container stands, or ends (reporting why).
  std::uint32_t size = 0;
  Result<std::size_t> got = read_full(ready_read.get(), &size, sizeof size, "the container process");
  std::string cwd;
  if (got && *got == sizeof size && size <= 4096) {
    cwd.resize(size);
    got = read_full(ready_read.get(), cwd.data(), cwd.size(), "the container process");
  }
  if (!got || *got != cwd.size() || cwd.empty()) {
    release_write.reset();
    (void)wait_exit_code(pid);
    return reported_error(report_read.get(), "hold the container");
  }
  HeldContainer held;
  held.cwd = cwd;
  held.set_ids = !plan.user_namespace && (plan.uid != 0 || plan.gid != 0);
  held.uid = plan.uid;
  held.gid = plan.gid;
  const std::string proc = fmt::format("/proc/{}/ns/", pid);
  Result<UniqueFd> mnt = open_file(proc + "mnt", O_RDONLY);
  Result<UniqueFd> user =
      plan.user_namespace ? open_file(proc + "user", O_RDONLY) : Result<UniqueFd>(UniqueFd());
  release_write.reset();
  (void)wait_exit_code(pid);
  if (!mnt || !user) {
    return (!mnt ? mnt.error() : user.error()).with_context("can't keep the container's namespaces");
  }
  held.mount_ns = std::move(*mnt);
  held.user_ns = std::move(*user);
  log::debug("sandbox: holding the container (cwd {}{})", held.cwd,
             plan.user_namespace ? ", user namespace" : "");
  return held;
}

Result<PathKind> probe_in_root(const std::filesystem::path& root, const std::string& target) {
  LS_TRY_ASSIGN(UniqueFd root_fd, open_file(root, O_PATH | O_DIRECTORY));
  int fd = open_in_root(root_fd.get(), target);
  if (fd == -ENOENT) {
    return PathKind::missing;
  }
  if (fd < 0) {
    return errno_error("can't resolve " + target + " in " + root.string(), -fd);
  }
  UniqueFd f(fd);
  struct stat st {};
  if (::fstat(f.get(), &st) < 0) {
    return errno_error("can't stat " + target, errno);
  }
  return S_ISDIR(st.st_mode) ? PathKind::directory : PathKind::other;
}

Result<MountPointLookup> lookup_mount_point(const std::filesystem::path& root, const std::string& target) {
  LS_TRY_ASSIGN(std::string norm, normalize_image_path(target));
  LS_TRY_ASSIGN(UniqueFd root_fd, open_file(root, O_PATH | O_DIRECTORY));
  LS_TRY_ASSIGN(ImagePath where, walk_image(root_fd.get(), norm));
  MountPointLookup out;
  out.kind = where.kind;
  for (const std::vector<std::string>* part : {&where.existing, &where.missing}) {
    for (const std::string& c : *part) {
      out.path += "/" + c;
    }
  }
  if (out.path.empty()) {
    out.path = "/";
  }
  return out;
}

Result<void> create_in_root(const std::filesystem::path& root, const std::string& target, PathKind kind) {
  if (kind == PathKind::missing) {
    return internal_error("create_in_root: nothing to create");
  }
  LS_TRY_ASSIGN(std::string norm, normalize_image_path(target));
  LS_TRY_ASSIGN(UniqueFd root_fd, open_file(root, O_PATH | O_DIRECTORY));
  return make_in_root(root_fd.get(), norm,
                      kind == PathKind::directory ? EntryType::directory : EntryType::file);
}

} // namespace lockstep::runner
