#pragma once
// Running another architecture's programs (an arm64 image on an x86_64 host) under qemu-user,
// without touching the host: the container gets a binfmt_misc of its own. Since Linux 6.7 a user
// namespace may mount a private binfmt_misc instance; a handler registered there with the F flag
// (the interpreter opened once, at registration) runs every foreign program its processes and
// their children start, and nothing outside. The handler is the one Debian's qemu-user-static
// ships (/usr/lib/binfmt.d/qemu-ARCH.conf). Where the kernel has no private instance, a handler
// the host registered with F is used instead. docs/exec.md, "Other architectures".
#include "support/base/result.hpp"
#include "support/system/fs.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep::runner {

/// A qemu-user handler for one architecture, as the container registers it.
struct Emulation {
  std::string architecture; ///< the image's, as OCI names it ("arm64")
  std::string host;         ///< this machine's ("amd64")
  std::string name;         ///< the handler's name ("qemu-aarch64")
  /// The registration line for binfmt_misc's `register` (":name:M::magic:mask:interpreter:flags"),
  /// with flags F (and P where the interpreter is Debian's -binfmt-P name), never C.
  std::string registration;
  std::filesystem::path interpreter;
  /// The host already has this handler, enabled and with F: used if no private one can be made.
  bool host_handler = false;
};

/// This machine's architecture as OCI names it (uname's machine: x86_64 -> amd64, aarch64 -> arm64).
std::string host_architecture();

/// How to run programs of `architecture` (OCI: "arm64", "amd64", "riscv64", "ppc64le", "s390x")
/// here: nullopt when it is this machine's own (or empty, unknown to the caller). An architecture
/// qemu-user-static has no handler for, or a host without it, is an error saying what to install.
/// `binfmt_dir` is where the handlers' configuration lies (tests give another).
Result<std::optional<Emulation>>
plan_emulation(std::string_view architecture, const std::filesystem::path& binfmt_dir = "/usr/lib/binfmt.d");

/// In the container's process, inside its new user and mount namespaces and before its root is
/// entered: mounts a binfmt_misc of its own over /proc/sys/fs/binfmt_misc and registers the
/// handler. Where the kernel refuses a private instance, a host handler (Emulation::host_handler)
/// is relied on; without one, an error naming the kernel and what to do. The private instance
/// lives while its mount does: the returned descriptor holds it (invalid for the host's handler)
/// and must stay open in the container's init until the container ends.
Result<UniqueFd> register_emulation(const Emulation& emulation);

/// "emulating linux/arm64 on this linux/amd64 machine with qemu-user (qemu-aarch64)": what the
/// user is told; programs run several times slower.
std::string emulation_note(const Emulation& emulation);

} // namespace lockstep::runner
