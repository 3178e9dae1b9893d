#pragma once
// The seccomp filter of the build sandbox: system calls a build step or a maintainer script never
// needs, and that could reach the host or the kernel's global state, fail instead of running
// (docs/run-steps.md, "Confinement").
#include "runner/runtime/supervisor.hpp"
#include "support/base/result.hpp"

#include <linux/filter.h>

#include <optional>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// One refused system call and the errno it fails with.
struct DeniedSyscall {
  std::string_view name;
  int error; ///< EPERM, or ENOSYS where callers are expected to fall back (clone3, io_uring)
};

/// The system calls the build sandbox refuses outright (besides clone with a namespace flag).
const std::vector<DeniedSyscall>& confinement_denied_syscalls();

/// The filter as a classic BPF program, built once by libseccomp in the parent and loaded in the
/// confined command with seccomp(2) (no allocation after fork). Covers the native architecture and
/// its 32-bit companions (x86 and x32 on x86_64, arm on aarch64), so a 32-bit binary can't get
/// around it. With `supervised`, the calls of supervised_calls() notify the supervisor instead
/// (SECCOMP_RET_USER_NOTIF), and `syscalls` receives their numbers on each architecture; a kernel
/// without user notification is an external error saying what to do.
Result<std::vector<sock_filter>> confinement_filter(std::optional<SupervisorMode> supervised = std::nullopt,
                                                    std::vector<SupervisedSyscall>* syscalls = nullptr);

/// Whether this kernel (and libseccomp) can hand system calls to a supervisor; the error says what
/// is missing and what to do.
Result<void> check_user_notification();

/// Makes libseccomp report `level` as the kernel's API level (tests of a kernel without user
/// notification; cli/main.cpp applies LOCKSTEP_TEST_SECCOMP_API).
void force_seccomp_api_level(unsigned int level);

} // namespace lockstep::runner
