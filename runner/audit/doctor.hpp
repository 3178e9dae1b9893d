#pragma once
// `lockstep doctor`: a snapshot of this host's GPU and MPI stack (NVIDIA driver and GPUs, mpirun,
// PMIx, UCX, libfabric, Slurm, glibc, kernel, user namespaces) and of the active Python environment
// (a venv or conda prefix read from its dist-info and conda-meta records, never through pip), and,
// given an image's facts, whether that image can run here by `lockstep preflight`'s rules.
//
// The host is read through a root directory (`/`, or `--host-root DIR`: a mounted node image or a
// test's fake /proc, /sys and /etc), every file resolved inside it; tools (mpirun, nvidia-smi,
// sinfo) come from PATH with bounded output and a timeout. The snapshot is a JSON document with a
// fixed key order that `lockstep diff` reads back (parse_snapshot). docs/doctor.md.
#include "envspec/lock/image_facts.hpp"
#include "runner/launch/host_probe.hpp"
#include "runner/launch/preflight.hpp"
#include "support/base/result.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// The snapshot schema version ("lockstep-snapshot": 1).
inline constexpr int k_snapshot_schema = 1;

/// The NVIDIA driver and where its version was read.
struct SnapshotDriver {
  std::string version; ///< "535.104.05"
  std::string from;    ///< "/proc/driver/nvidia/version" or "nvidia-smi"
  bool operator==(const SnapshotDriver&) const = default;
};

/// One GPU. Empty strings and an empty memory_mib are null in the JSON (unknown).
struct SnapshotGpu {
  int index = 0;                           ///< NVML's index (PCI bus order)
  std::string name;                        ///< "NVIDIA H100 80GB HBM3"
  std::string uuid;                        ///< "GPU-5e2f..."
  std::string compute_capability;          ///< "9.0" (nvidia-smi only)
  std::optional<std::uint64_t> memory_mib; ///< total memory (nvidia-smi only)
  bool operator==(const SnapshotGpu&) const = default;
};

/// The MPI launcher first on PATH.
struct SnapshotMpi {
  std::string impl;    ///< "openmpi", "mpich" or "unknown"
  std::string version; ///< "4.1.4"; "" (null) for an unknown implementation
  std::string path;    ///< "/usr/bin/mpirun"
  bool operator==(const SnapshotMpi&) const = default;
};

/// The host part of a snapshot. Empty strings are null in the JSON (not found or unknown).
struct SnapshotHost {
  std::string arch;             ///< "x86_64"
  std::string os;               ///< os-release's PRETTY_NAME
  std::string kernel;           ///< "6.1.0-18-amd64"
  std::string glibc;            ///< "2.36"
  bool user_namespaces = false; ///< unprivileged users can create user namespaces
  std::optional<SnapshotDriver> driver;
  std::vector<SnapshotGpu> gpus;
  std::optional<SnapshotMpi> mpi;
  std::string pmix;      ///< "4.2.2"
  std::string ucx;       ///< "1.13.1"
  std::string libfabric; ///< "1.17.0"
  std::string slurm;     ///< "22.05.8"
  bool operator==(const SnapshotHost&) const = default;
};

/// One installed Python distribution. Empty installer, build and channel are null in the JSON.
struct PythonPackage {
  std::string name;      ///< as its record spells it ("PyYAML")
  std::string version;   ///< "6.0.1"
  std::string from;      ///< "dist-info", "egg-info" or "conda"
  std::string installer; ///< dist-info's INSTALLER ("pip", "uv", "conda")
  std::string build;     ///< conda: the build string ("py311h64a7726_0")
  std::string channel;   ///< conda: the channel ("conda-forge", or its URL)
  bool operator==(const PythonPackage&) const = default;
};

/// A Python environment read from disk.
struct PythonEnv {
  std::string kind;    ///< "venv", "conda" or "prefix"
  std::string prefix;  ///< absolute, as on the captured system
  std::string version; ///< "3.11.2"; "" (null) when unknown
  /// Sorted by PEP 503 normalised name, then version, from, installer, build, channel.
  std::vector<PythonPackage> packages;
  bool operator==(const PythonEnv&) const = default;
};

/// The verdict for an image or a lock: preflight's checks that apply to it on this host.
struct TargetReport {
  std::string kind; ///< "image" or "lock"
  std::string ref;  ///< the argument as given
  /// What the target records (versions only; the `from` fields are not part of the snapshot).
  envspec::ImageFacts facts;
  std::vector<Check> checks; ///< in preflight's order; see evaluate_target
  /// True when no check failed (warnings pass).
  [[nodiscard]] bool can_run() const;
  bool operator==(const TargetReport&) const = default;
};

/// One `lockstep doctor` snapshot.
struct Snapshot {
  std::string tool; ///< "lockstep 0.1.0"
  SnapshotHost host;
  std::optional<PythonEnv> python;
  std::optional<TargetReport> target;
  bool operator==(const Snapshot&) const = default;
};

/// The snapshot as JSON, keys in this order (nulls as documented on the structs):
///   {"lockstep-snapshot":1,"tool":...,
///    "host":{"arch","os","kernel","glibc","user_namespaces","driver":{"version","from"}|null,
///            "gpus":[{"index","name","uuid","compute_capability","memory_mib"}],
///            "mpi":{"impl","version","path"}|null,"pmix","ucx","libfabric","slurm"},
///    "python":{"kind","prefix","version",
///              "packages":[{"name","version","from","installer","build","channel"}]}|null,
///    "target":{"kind","ref","facts":{"mpi":{"impl","version"}|null,"pmix","ucx","libfabric","cuda",
///              "cuda_driver_floor"},"can_run","checks":[{"name","status","detail"}]}}  (only with a target)
nlohmann::ordered_json snapshot_json(const Snapshot& snapshot);

/// snapshot_json() indented by two spaces, with a final newline (what `doctor --json` prints).
std::string render_snapshot(const Snapshot& snapshot);

/// Parses a snapshot strictly: at most 64 MiB and 16 levels deep; every key required (except
/// "target") and no others; each value of its type; names, versions and paths printable and bounded;
/// "can_run" consistent with the checks. Anything else is invalid_input naming `what` and the key
/// path ("snap.json: host.gpus[0].memory_mib: expected an integer or null").
Result<Snapshot> parse_snapshot(std::string_view text, std::string_view what);

// ---------------------------------------------------------------------------------------------
// Capturing

/// What to capture and from where.
struct DoctorOptions {
  /// Every file is read as if this were `/` (symlinks and ".." stay inside it).
  std::filesystem::path host_root = "/";
  /// $VIRTUAL_ENV and $CONDA_PREFIX ("" = unset): absolute paths on the captured system.
  std::string virtual_env;
  std::string conda_prefix;
  /// --python PREFIX: read this prefix instead of the active environment ("" = not given).
  std::string python_prefix;
  /// Where mpirun, nvidia-smi, sinfo and srun are looked up (colon-separated, like $PATH).
  std::string path_list;
};

/// $VIRTUAL_ENV, $CONDA_PREFIX and $PATH (the usual system directories when unset); root `/`.
DoctorOptions doctor_options_from_env();

/// A capture: the snapshot, the probe preflight's rules read, and what a reader should know.
struct Capture {
  Snapshot snapshot;     ///< without a target
  HostProbe probe;       ///< the same facts in preflight's terms (for evaluate_target)
  std::string gpus_from; ///< "nvidia-smi", "/proc/driver/nvidia/gpus" or "" (no GPU list)
  /// From pyvenv.cfg: the base interpreter's directory and whether system site-packages are
  /// visible (they are not listed).
  std::string python_home;
  bool system_site_packages = false;
  /// Files that could not be read or parsed (a malformed METADATA, a conda-meta file that is not
  /// JSON, a tool that failed): one line each, naming the file or tool. Never fatal.
  std::vector<std::string> warnings;
};

/// Captures the host and the Python environment. Errors only for bad options: a host root that is
/// not a directory, or a --python prefix that doesn't exist (invalid_input). Everything else that
/// can't be read is null in the snapshot and a line in Capture::warnings.
Result<Capture> capture(const DoctorOptions& options);

/// Only the Python environment capture() would read (the active venv or conda environment, or
/// --python's prefix), with its warnings; nullopt when there is none. For `lockstep init --from`.
Result<std::optional<PythonEnv>> capture_python(const DoctorOptions& options,
                                                std::vector<std::string>& warnings);

/// The preflight checks for a target with `facts` on the captured host, as `lockstep run` would
/// make them with its defaults: the hybrid MPI model, started by the host's mpirun when there is
/// one, else by Slurm when `sinfo`/`srun` answered, else locally; GPUs requested when the target
/// records CUDA. `image` is the probed image (its check is kept) or nullptr for a lock (no image,
/// space checks). Skipped checks are dropped. With `gpu_min_cc` (the target's lowest GPU compute
/// capability: dev.lockstep.gpu.min-cc, or the lock's stack) a "gpu-arch" check follows: every GPU
/// whose compute capability nvidia-smi reported must be at least that. Pure.
TargetReport evaluate_target(std::string kind, const std::string& ref, const envspec::ImageFacts& facts,
                             const Capture& host, const ImageProbe* image, std::uint64_t unpack_bytes,
                             std::string_view gpu_min_cc = {});

/// The human report: an aligned table of the host, its GPUs, the MPI stack and the Python
/// environment, then the target's verdict with one line per check. Deterministic.
std::string render_doctor_report(const Capture& capture, const std::optional<TargetReport>& target);

// ---------------------------------------------------------------------------------------------
// Parsers (exposed for tests)

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

} // namespace lockstep::runner
