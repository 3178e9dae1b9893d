#pragma once
// A `lockstep doctor` snapshot: what a host offers (driver, GPUs, MPI stack, glibc, kernel, user
// namespaces), its active Python environment and, given a target, preflight's verdict on it; as a
// JSON document with a fixed key order (snapshot_json) that `lockstep diff` reads back strictly
// (parse_snapshot). docs/doctor.md.
#include "envspec/lock/image_facts.hpp"
#include "runner/launch/preflight.hpp"
#include "support/base/result.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
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

} // namespace lockstep::runner
