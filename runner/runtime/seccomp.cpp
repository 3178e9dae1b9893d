#include "runner/runtime/seccomp.hpp"

#include "support/system/fs.hpp"

#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

namespace lockstep::runner {

const std::vector<DeniedSyscall>& confinement_denied_syscalls() {
  static const std::vector<DeniedSyscall> denied = {
      // Mounts: the sandbox's own mounts are made before the filter; a step makes none.
      {"mount", EPERM},
      {"umount2", EPERM},
      {"pivot_root", EPERM},
      {"fsopen", EPERM},
      {"fsconfig", EPERM},
      {"fsmount", EPERM},
      {"fspick", EPERM},
      {"move_mount", EPERM},
      {"open_tree", EPERM},
      {"mount_setattr", EPERM},
      // New namespaces or joining others (clone with a namespace flag is refused separately).
      {"unshare", EPERM},
      {"setns", EPERM},
      // The kernel itself: modules, kexec, reboot, swap, accounting, quotas, the kernel log, clocks.
      {"init_module", EPERM},
      {"finit_module", EPERM},
      {"delete_module", EPERM},
      {"kexec_load", EPERM},
      {"kexec_file_load", EPERM},
      {"reboot", EPERM},
      {"swapon", EPERM},
      {"swapoff", EPERM},
      {"acct", EPERM},
      {"quotactl", EPERM},
      {"quotactl_fd", EPERM},
      {"syslog", EPERM},
      {"settimeofday", EPERM},
      {"clock_settime", EPERM},
      {"clock_adjtime", EPERM},
      {"adjtimex", EPERM},
      {"iopl", EPERM},
      {"ioperm", EPERM},
      {"lookup_dcookie", EPERM},
      {"uselib", EPERM},
      {"vm86", EPERM},
      {"vm86old", EPERM},
      // Keyrings, eBPF, perf, userfaultfd: global kernel state and well-known escape tools.
      {"keyctl", EPERM},
      {"add_key", EPERM},
      {"request_key", EPERM},
      {"bpf", EPERM},
      {"perf_event_open", EPERM},
      {"userfaultfd", EPERM},
      // File handles bypass path resolution (the "shocker" escape).
      {"open_by_handle_at", EPERM},
      {"name_to_handle_at", EPERM},
      // io_uring runs work outside seccomp's view; callers fall back to plain system calls.
      {"io_uring_setup", ENOSYS},
      {"io_uring_enter", ENOSYS},
      {"io_uring_register", ENOSYS},
      // clone3's flags live in memory seccomp can't read: ENOSYS makes glibc fall back to clone.
      {"clone3", ENOSYS},
  };
  return denied;
}

namespace {

struct ContextDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using Context = std::unique_ptr<void, ContextDeleter>;

Error seccomp_error(const std::string& what, int rc) {
  return Error{ExitCode::internal, fmt::format("can't build the build sandbox's seccomp filter: {}: {}", what,
                                               std::strerror(-rc))};
}

} // namespace

void force_seccomp_api_level(unsigned int level) {
  seccomp_api_set(level);
}

Result<void> check_user_notification() {
  // API level 6: SECCOMP_RET_USER_NOTIF (Linux 5.0) and SECCOMP_USER_NOTIF_FLAG_CONTINUE (5.5).
  const unsigned int api = seccomp_api_get();
  if (api < 6) {
    return Error{
        ExitCode::external,
        fmt::format("this kernel can't hand system calls to a supervisor (seccomp user notification, "
                    "Linux 5.5 or later; libseccomp reports API level {}), which a build without root "
                    "needs to give files other owners; build as root, or on a newer kernel "
                    "(docs/rootless.md)",
                    api)};
  }
  return {};
}

Result<std::vector<sock_filter>> confinement_filter(std::optional<SupervisorMode> supervised,
                                                    std::vector<SupervisedSyscall>* syscalls) {
  Context ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) {
    return Error{ExitCode::internal, "can't build the build sandbox's seccomp filter: seccomp_init failed"};
  }
  const std::uint32_t native = seccomp_arch_native();
  std::vector<std::uint32_t> companions;
  if (native == SCMP_ARCH_X86_64) {
    companions = {SCMP_ARCH_X86, SCMP_ARCH_X32};
  } else if (native == SCMP_ARCH_AARCH64) {
    companions = {SCMP_ARCH_ARM};
  }
  for (std::uint32_t arch : companions) {
    if (int rc = seccomp_arch_add(ctx.get(), arch); rc < 0 && rc != -EEXIST) {
      return seccomp_error("adding a companion architecture", rc);
    }
  }
  for (const DeniedSyscall& d : confinement_denied_syscalls()) {
    const int nr = seccomp_syscall_resolve_name(std::string(d.name).c_str());
    if (nr == __NR_SCMP_ERROR) {
      continue; // not a system call of this architecture
    }
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(static_cast<std::uint32_t>(d.error)), nr, 0);
        rc < 0) {
      return seccomp_error(std::string(d.name), rc);
    }
  }
  // clone with any namespace flag; plain fork/thread creation stays allowed.
  constexpr std::uint64_t k_clone_newtime = 0x00000080; // <linux/sched.h>; not in every libc's sched.h
  for (std::uint64_t flag :
       {std::uint64_t{CLONE_NEWNS}, std::uint64_t{CLONE_NEWUTS}, std::uint64_t{CLONE_NEWIPC},
        std::uint64_t{CLONE_NEWUSER}, std::uint64_t{CLONE_NEWPID}, std::uint64_t{CLONE_NEWNET},
        std::uint64_t{CLONE_NEWCGROUP}, k_clone_newtime}) {
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        rc < 0) {
      return seccomp_error("clone", rc);
    }
  }
  if (supervised) {
    LS_TRY(check_user_notification());
    std::vector<std::uint32_t> arches = {native};
    arches.insert(arches.end(), companions.begin(), companions.end());
    for (const auto& [name, call] : supervised_calls(*supervised)) {
      const std::string n(name);
      const int nr = seccomp_syscall_resolve_name(n.c_str());
      if (nr == __NR_SCMP_ERROR) {
        continue;
      }
      if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_NOTIFY, nr, 0); rc < 0) {
        if (nr < 0) {
          continue; // a call none of the filter's architectures has
        }
        return seccomp_error(n, rc);
      }
      if (syscalls == nullptr) {
        continue;
      }
      for (std::uint32_t arch : arches) {
        const int anr = seccomp_syscall_resolve_name_arch(arch, n.c_str());
        if (anr < 0) {
          continue;
        }
        const bool legacy16 = (arch == SCMP_ARCH_X86 || arch == SCMP_ARCH_ARM) &&
                              (name == "chown" || name == "lchown" || name == "fchown");
        syscalls->push_back(SupervisedSyscall{arch, anr, call, legacy16, arch == native, name});
      }
    }
  }
  // Export the program through a memory file and read it back.
  UniqueFd mem(::memfd_create("lockstep-seccomp", MFD_CLOEXEC));
  if (!mem.valid()) {
    return errno_error("can't create a memory file for the seccomp filter", errno);
  }
  if (int rc = seccomp_export_bpf(ctx.get(), mem.get()); rc < 0) {
    return seccomp_error("export", rc);
  }
  const off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0) {
    return Error{ExitCode::internal, "can't build the build sandbox's seccomp filter: a malformed program"};
  }
  std::vector<sock_filter> program(static_cast<std::size_t>(size) / sizeof(sock_filter));
  if (::pread(mem.get(), program.data(), static_cast<std::size_t>(size), 0) != size) {
    return errno_error("can't read the seccomp filter back", errno);
  }
  return program;
}

} // namespace lockstep::runner
