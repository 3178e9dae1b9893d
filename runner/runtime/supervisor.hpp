#pragma once
// The build sandbox's supervisor (docs/rootless.md): system calls a rootless build step can't make
// itself (changing a file's owner to an id it doesn't have, switching ids, creating device nodes)
// stop in the kernel (seccomp user notification) and are answered by the container's init, which
// records what was asked for on the file (runner/runtime/recorded_stat.hpp) instead of doing it.
// It never performs a privileged operation for the step: it resolves the file inside the
// container's root (the step's own view), refuses anything off the image's root filesystem, and
// writes only a user xattr, a copy-up, or an empty regular file standing for a device node.
#include "support/base/result.hpp"

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::runner {

/// How the build sandbox maps ids, which decides what the supervisor answers.
enum class SupervisorMode {
  /// Unprivileged with one id: the chown family is recorded, the setuid family, setgroups and
  /// capset succeed without changing anything, device nodes are recorded.
  single,
  /// Unprivileged with a subordinate id range (newuidmap): ids switch for real; chown changes the
  /// owner for real within the range (and keeps the record in step); device nodes are recorded.
  subuid,
  /// Root (the confined id range): only device nodes are recorded.
  root,
};

/// What one intercepted system call is.
enum class SupervisedCall {
  chown,    ///< path, uid, gid: follows a last symlink
  lchown,   ///< path, uid, gid
  fchown,   ///< fd, uid, gid
  fchownat, ///< dirfd, path, uid, gid, flags
  mknod,    ///< path, mode, dev
  mknodat,  ///< dirfd, path, mode, dev
  identity, ///< the setuid family, setgroups, capset: succeeds (single only)
  chroot,   ///< runs in the kernel; from then on roots are looked up per process
  // The stat family (unprivileged): a file with a record is shown with the recorded owner, mode or
  // device, so tools that copy a file's owner through stat() copy the image's (shadow's commonio,
  // sed -i). Everything else runs in the kernel (SECCOMP_USER_NOTIF_FLAG_CONTINUE).
  stat,       ///< path, buf
  lstat,      ///< path, buf
  fstat,      ///< fd, buf
  newfstatat, ///< dirfd, path, buf, flags
  statx,      ///< dirfd, path, flags, mask, buf
};

/// A system call the filter hands to the supervisor: its number on one architecture.
struct SupervisedSyscall {
  std::uint32_t arch = 0; ///< AUDIT_ARCH_*
  int nr = 0;
  SupervisedCall call = SupervisedCall::identity;
  bool ids16 = false;  ///< the legacy 16-bit id calls of 32-bit x86 and arm ((uid_t)-1 is 0xFFFF)
  bool native = false; ///< the architecture lockstep runs as (the stat family is shown for it only)
  std::string_view name;
};

/// The calls intercepted in `mode`, by name, for the filter.
std::vector<std::pair<std::string_view, SupervisedCall>> supervised_calls(SupervisorMode mode);

/// Everything the supervisor needs, computed before the sandbox forks.
struct SupervisorPlan {
  SupervisorMode mode = SupervisorMode::single;
  std::vector<SupervisedSyscall> syscalls;
  /// The id that the step's id 0 is in the init's view: 0 unprivileged, k_confined_host_first as root.
  std::uint32_t id_base = 0;
};

/// Runs in the container's init with the listener descriptor the step's filter returned: answers
/// notifications and reaps processes until `command` exits; returns its exit code (as
/// exit_code_of_status). Never throws; failures to handle one call answer it with an error.
int supervise(const SupervisorPlan& plan, int listener, pid_t command);

} // namespace lockstep::runner
