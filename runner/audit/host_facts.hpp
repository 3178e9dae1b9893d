#pragma once
// The host part of a `lockstep doctor` snapshot: the NVIDIA driver and GPUs, the MPI launcher,
// PMIx, UCX, libfabric, Slurm, glibc, the kernel, the OS and user namespaces, read inside the
// captured root (root_fs.hpp), tools run bounded. The parsers of what those files and tools say
// are public for tests; probe_host_facts is doctor's own.
#include "runner/audit/capture.hpp"
#include "runner/audit/root_fs.hpp"
#include "runner/audit/snapshot.hpp"
#include "support/base/result.hpp"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// The GPUs and driver in `nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,
/// driver_version --format=csv,noheader,nounits` output ("0, NVIDIA H100 80GB HBM3, GPU-..., 9.0,
/// 81559, 535.104.05"); "[N/A]"-style values are unknown. A line without six fields is invalid_input.
struct NvidiaSmiReport {
  std::vector<SnapshotGpu> gpus;
  std::string driver_version; ///< the first line's
};
Result<NvidiaSmiReport> parse_nvidia_smi(std::string_view output);

/// PRETTY_NAME from os-release text (quotes and backslash escapes removed), else "NAME VERSION_ID",
/// else "".
std::string os_pretty_name(std::string_view os_release);

/// The version in glibc's banner inside libc.so.6 ("... stable release version 2.36.") or "".
std::string glibc_version_in(std::string_view libc_bytes);

/// The version in `sinfo --version` / `srun --version` output ("slurm 22.05.8", "slurm-wlm 21.08.5")
/// or "".
std::string slurm_version_from(std::string_view output);

/// The upstream versions of those of `packages` that dpkg status text lists as installed
/// ("libfabric1" with "Version: 1.17.0-3" -> "1.17.0"); the others are absent from the map. Text
/// that is not deb822 gives an empty map.
std::map<std::string, std::string> dpkg_installed_versions(std::string_view status_text,
                                                           const std::vector<std::string>& packages);

namespace doctor_detail {

/// Reads the host facts of `root` into a SnapshotHost, the same facts in preflight's terms into
/// `capture.probe`, the GPU list's source into `capture.gpus_from`, and what could not be read into
/// `capture.warnings`. Never fails.
SnapshotHost probe_host_facts(const RootFs& root, const DoctorOptions& options, Capture& capture);

} // namespace doctor_detail

} // namespace lockstep::runner
