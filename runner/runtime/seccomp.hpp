#pragma once
// The seccomp filter of the build sandbox: system calls a build step or a maintainer script never
// needs, and that could reach the host or the kernel's global state, fail instead of running
// (docs/run-steps.md, "Confinement").
#include "support/result.hpp"

#include <linux/filter.h>

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
/// confined command with prctl(PR_SET_SECCOMP) (no allocation after fork). Covers the native
/// architecture and its 32-bit companions (x86 and x32 on x86_64, arm on aarch64), so a 32-bit
/// binary can't get around it.
Result<std::vector<sock_filter>> confinement_filter();

} // namespace lockstep::runner
