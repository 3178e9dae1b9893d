#pragma once
// What this host offers a job before any rank starts: its MPI launcher, PMIx and UCX libraries,
// NVIDIA driver and GPUs, whether user namespaces work, and the free space where images are
// unpacked. `lockstep preflight` (runner/launch/preflight.hpp) runs these probes on every node before a
// launch, so each is cheap: a few milliseconds in all, one `mpirun --version` the slowest part.
// Every probe's result is plain data, so the checks built on them are testable without the host.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace lockstep::runner {

/// The host's MPI launcher: the first `mpirun` on PATH and what `mpirun --version` says.
struct HostMpi {
  std::string path;    ///< the mpirun found; "" when none is on PATH
  std::string impl;    ///< "openmpi", "mpich", "unknown"; "" when there is no mpirun or it failed
  std::string version; ///< "4.1.4"; "" for an unknown implementation
  std::string banner;  ///< the first line of its output, printable and at most 160 bytes
  std::string error;   ///< why `mpirun --version` said nothing usable; "" when it did
};

/// Reads `mpirun --version` output: "mpirun (Open MPI) 4.1.4" -> {openmpi, 4.1.4}; MPICH's Hydra
/// ("HYDRA build details:" then "Version: 4.0.2") -> {mpich, 4.0.2}; anything else (Intel MPI,
/// ...) -> {unknown, ""} with the first line as banner. Empty output gives an empty impl.
HostMpi parse_mpirun_version(std::string_view output);

/// Finds `mpirun` in the colon-separated `path_list` and runs `mpirun --version` (stdin from
/// /dev/null, 4 KiB of output kept, killed after 2 s). Never fails: problems land in HostMpi::error.
HostMpi probe_mpirun(std::string_view path_list);

/// The release in PMIx_Get_version()'s text: "OpenPMIx 4.2.2rc2 (PMIx Standard: 4.2, ...)" ->
/// "4.2.2rc2" (a leading 'v' dropped); "" when there is no version-like word.
std::string pmix_version_from(std::string_view text);

/// The version of the host's libpmix.so.2 (dlopen, PMIx_Get_version, dlclose); "" when absent.
/// Remembered in the store by the identity of the file the loader would load, as UCX's is.
std::string probe_pmix();
/// The version of the host's libucp.so.0 (ucp_get_version_string); "" when absent.
std::string probe_ucx();

/// Whether lockstep can create the user namespace its rootless containers need.
enum class UsernsState {
  not_needed, ///< running as root: no user namespace is made
  allowed,    ///< a test child created one
  disabled,   ///< /proc/sys/user/max_user_namespaces is 0
  denied,     ///< unshare(CLONE_NEWUSER) failed in the test child
};

/// The user namespace probe's result; `detail` says why for disabled and denied.
struct HostUserns {
  UsernsState state = UsernsState::allowed;
  std::string detail;
};

/// Root: not_needed. Otherwise reads max_user_namespaces and forks a child that calls
/// unshare(CLONE_NEWUSER) and exits with 0 or the errno.
HostUserns probe_user_namespaces();

/// The kernel settings that decide whether unprivileged users get user namespaces, each the value
/// its /proc/sys file holds ("" when it can't be read).
struct UsernsSettings {
  std::string max_user_namespaces;       ///< /proc/sys/user/max_user_namespaces
  std::string unprivileged_userns_clone; ///< /proc/sys/kernel/unprivileged_userns_clone
  std::string apparmor_restrict;         ///< /proc/sys/kernel/apparmor_restrict_unprivileged_userns
};

/// What the settings alone say, without a test child (a host read from its files, as `lockstep
/// doctor --host-root` reads one): disabled or denied with the reason probe_user_namespaces gives,
/// else allowed.
HostUserns userns_from_settings(const UsernsSettings& settings);

/// Free space for unpacking images.
struct HostSpace {
  std::filesystem::path path;   ///< the lockstep cache ($LOCKSTEP_CACHE or its default)
  std::uint64_t free_bytes = 0; ///< available to unprivileged users (statvfs f_bavail)
  std::string error;            ///< why it could not be measured; "" when it was
};

/// statvfs of `cache_root`, or of its nearest existing ancestor when it doesn't exist yet.
HostSpace probe_space(const std::filesystem::path& cache_root);

/// Everything preflight needs to know about this host.
struct HostProbe {
  std::string hostname;       ///< gethostname(2), printable
  std::string platform;       ///< this node's, as OCI names it ("linux/arm64"); "" when not probed
  HostMpi mpi;                ///< see probe_mpirun (remembered in the store by the program's identity)
  std::string pmix;           ///< see probe_pmix
  std::string ucx;            ///< see probe_ucx
  std::string driver_version; ///< the NVIDIA driver ("535.104.05"); "" when none is loaded
  std::size_t gpu_count = 0;  ///< GPUs the driver lists
  std::string gpu_error;      ///< why the driver or GPU list could not be read; "" when they could
  HostUserns userns;
  HostSpace space;
};

/// Probes this host: $PATH's mpirun, the libraries, the GPUs of gpu_host_from_env() (which honours
/// LOCKSTEP_GPU_HOST_ROOT), user namespaces and the lockstep cache's file system. Never fails.
/// libfabric is not probed: loading libfabric.so.1 runs its providers' set-up, ~200 ms here.
HostProbe probe_host();

} // namespace lockstep::runner
