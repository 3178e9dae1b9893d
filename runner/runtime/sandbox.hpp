#pragma once
// The container runtime: namespaces, mounts, pivot_root and the command's process, with no setuid
// helper. `lockstep exec` and the build's `run:` steps both enter containers through
// run_in_sandbox(); docs/exec.md describes the behaviour and the security notes.
#include "runner/runtime/emulation.hpp"
#include "runner/runtime/join.hpp"
#include "runner/runtime/subids.hpp"
#include "runner/runtime/supervisor.hpp"
#include "support/base/result.hpp"
#include "support/system/fs.hpp"

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::runner {

/// One bind mount of a host path into the container.
struct BindSpec {
  /// Host path; symlinks in it are followed (the caller chose it).
  std::filesystem::path source;
  /// Absolute path in the container, resolved inside the root: a symlink in the image never
  /// redirects it onto the host.
  std::string target;
  enum class Access { read_write, read_only };
  Access access = Access::read_write;
  /// What a missing source means: an error, or skip this bind.
  enum class Need { required, optional };
  Need need = Need::required;
  /// Whether mounts below the source come along (mount --rbind) or only the source's own mount.
  enum class Depth { recursive, single };
  Depth depth = Depth::recursive;
};

/// A squashfs image inside a file, loop-mounted read-only as the root inside the container's
/// mount namespace (needs root; the loop device detaches itself when the container ends).
struct LoopRoot {
  std::filesystem::path file;
  std::uint64_t offset = 0; ///< where the squashfs starts in the file
  std::uint64_t size = 0;   ///< its length; 0 = to the end of the file
};

/// Caller-provided directories of a writable overlay over the root (build steps): changes land in
/// `upper`, which the caller reads afterwards. Both must be on the same filesystem.
struct OverlayDirs {
  std::filesystem::path upper;
  std::filesystem::path work;
};

/// Where the container's /tmp comes from.
enum class TmpPolicy { tmpfs, host };
/// The container's network: the host's, or a new namespace with only `lo` up.
enum class NetworkPolicy { host, none };
/// The container's /dev: the host's (recursive bind), or a tmpfs holding only null, zero, full,
/// random, urandom, tty, pts/, shm/ and the device nodes listed in `nodes`.
struct DevPolicy {
  enum class Mode { host, minimal };
  Mode mode = Mode::host;
  /// Host device nodes bound into the minimal /dev (targets below /dev; ignored with Mode::host,
  /// whose /dev has them all).
  std::vector<BindSpec> nodes;
};

/// What to do when the working directory does not exist in the container.
enum class CwdMissing {
  fail,     ///< an error (exit code 2)
  use_root, ///< start in / instead
  create,   ///< create it (in the tmpfs overlay; the image is never modified)
};

/// Everything run_in_sandbox() needs. The defaults are those of `lockstep exec`.
struct SandboxConfig {
  /// The root directory (an unpacked image, an extracted or FUSE-mounted SIF, a sandbox dir).
  std::filesystem::path root;
  /// When set, the root is this squashfs instead of `root` (root only).
  std::optional<LoopRoot> loop_root;
  /// The root is mounted read-only (ignored when `overlay` is set). When false (and no overlay),
  /// missing mount points are created in the root directory itself.
  bool read_only = true;
  /// A writable overlay with caller-provided upper/work directories (build steps). Missing mount
  /// points go into a layer of their own below `upper`, which records the command's changes only.
  std::optional<OverlayDirs> overlay;
  /// A writable overlay whose changes live in a tmpfs and vanish at exit (--writable-tmpfs).
  bool writable_tmpfs = false;

  /// Confinement for code the caller did not write (build steps, maintainer scripts; docs/run-steps.md,
  /// "Confinement"). The command runs in a user namespace of its own that owns none of the
  /// container's other namespaces, so it has no capability over its mounts, network or pids, let
  /// alone the host's; as root its ids 0.. are the host ids from k_confined_host_first (the root
  /// must be owned by them, see UnpackOptions::id_offset), never host root. Also: new pid, IPC and
  /// cgroup namespaces with a /proc of their own (requires pid_namespace), a session of its own
  /// with stdin from /dev/null (no controlling terminal to push input into), a private /dev/pts and
  /// /dev/shm, no_new_privs and the seccomp filter of runner/runtime/seccomp.hpp.
  bool confined = false;
  /// Confined only: the system calls a supervisor in the container's init answers instead of the
  /// kernel (runner/runtime/supervisor.hpp), for this way of mapping ids; nullopt = none.
  std::optional<SupervisorMode> supervisor;
  /// Unprivileged and confined, with uid and gid 0: map the caller's subordinate ids too (0 is the
  /// caller, 1.. the ranges; newuidmap/newgidmap write the maps), so ids switch for real.
  std::optional<SubordinateIds> subids;

  NetworkPolicy network = NetworkPolicy::host;
  /// A new pid namespace: a small init (pid 1) reaps orphans and forwards signals; the command
  /// is pid 2.
  bool pid_namespace = false;
  /// A new UTS namespace with this hostname.
  std::optional<std::string> hostname;

  /// Mount the default table: /dev, /proc, /sys, /etc/resolv.conf, /etc/hosts (docs/exec.md).
  bool default_binds = true;
  DevPolicy dev;
  TmpPolicy tmp = TmpPolicy::tmpfs;
  /// The caller's home directory, bound read-write at the same path; nullopt = none.
  std::optional<std::filesystem::path> home;
  /// Further binds (--bind, GPU libraries), mounted in order after the default table.
  std::vector<BindSpec> binds;

  /// The user and group inside the container; default: the caller's.
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;

  /// The command's complete environment ("K=V"); PATH in it is used to find argv[0].
  std::vector<std::string> env;
  /// Absolute working directory inside the container.
  std::string cwd = "/";
  CwdMissing cwd_missing = CwdMissing::fail;
  /// The command; argv[0] without a '/' is looked up in the PATH of `env`.
  std::vector<std::string> argv;
  /// The command's umask; default: the caller's.
  std::optional<mode_t> umask;
  /// Where the command's stdout goes: the caller's stdout, or its stderr (build steps, whose
  /// output must not mix with lockstep's own stdout).
  enum class Stdout { inherit, to_stderr };
  Stdout stdout_to = Stdout::inherit;
  /// Run another architecture's programs under qemu-user, through a binfmt_misc of the
  /// container's own (runner/runtime/emulation.hpp). As root, the container then runs in a user
  /// namespace mapping every id to itself (a loop-mounted root is not possible there, and the
  /// overlay keeps its opaque marks in user.* xattrs); a confined step's namespace inherits it.
  std::optional<Emulation> emulation;
};

/// As root, a confined command's ids 0..k_confined_id_count-1 are host ids k_confined_host_first..:
/// above every id a directory service hands out (SSSD's ranges end below 2^31), and never host
/// root, whose uid the kernel trusts in places capabilities don't guard (/proc/sys, /proc/sysrq-trigger).
constexpr std::uint32_t k_confined_host_first = 0x80000000U;
constexpr std::uint32_t k_confined_id_count = 0x7FFFFFFFU;

/// Exit statuses for a command that could not be started: k_exit_not_executable, k_exit_not_found
/// (join.hpp).

/// Runs `config.argv` in a new container and waits for it. Returns the command's exit code, or
/// 128+N when signal N killed it. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to
/// this process are forwarded to the command. Failures before the command starts are Errors
/// (exit codes 2/3/4/70; 126/127 when the command cannot be executed or found).
/// Must be called while the process runs a single thread.
Result<int> run_in_sandbox(const SandboxConfig& config);

/// A container assembled as run_in_sandbox() assembles it, with no command in it: the namespaces a
/// process joins (setns: the user namespace first, then the mount namespace, whose root is the
/// container's) to run in it. Ranks of one job on one node share one (runner/runtime/hold.hpp). The
/// namespaces live as long as these descriptors or a process in them.
struct HeldContainer {
  UniqueFd mount_ns;
  UniqueFd user_ns;     ///< invalid when no user namespace was made (root)
  std::string cwd;      ///< the working directory, resolved inside (CwdMissing applied)
  bool set_ids = false; ///< root: setgroups/setgid/setuid to uid/gid after joining
  uid_t uid = 0;
  gid_t gid = 0;
};

/// Assembles `config`'s container (without running its command) and keeps it. Only a container
/// with a mount (and user) namespace can be held: no pid, UTS or network namespace, no confinement,
/// no writable overlay (internal_error otherwise). Failures are those of run_in_sandbox().
/// Must be called while the process runs a single thread.
Result<HeldContainer> hold_sandbox(const SandboxConfig& config);

/// What a path inside a root is.
enum class PathKind { missing, directory, other };
/// Looks `target` up below `root` exactly as the sandbox looks up mount points: every component,
/// symlinks included, resolved inside `root`; magic links refused.
Result<PathKind> probe_in_root(const std::filesystem::path& root, const std::string& target);
/// Where the sandbox puts the mount point for `target` in an image root: the path it resolves to
/// inside the root (symlinks followed as if the root were "/", ".." stopping at it), and what is
/// there now (PathKind::missing: the sandbox creates it in its overlay, not in the image).
struct MountPointLookup {
  std::string path; ///< absolute, inside the root
  PathKind kind = PathKind::missing;
};
Result<MountPointLookup> lookup_mount_point(const std::filesystem::path& root, const std::string& target);
/// Creates `target` below `root` as the sandbox creates missing mount points (in its tmpfs
/// overlay): parents as directories, the last component as `kind`. Never creates anything
/// outside `root`.
Result<void> create_in_root(const std::filesystem::path& root, const std::string& target, PathKind kind);

} // namespace lockstep::runner
