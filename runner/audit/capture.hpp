#pragma once
// What `lockstep doctor` captures and from where (DoctorOptions), and what a capture holds
// (Capture): the snapshot, the same facts in preflight's terms, and the warnings. Shared by the
// host and Python readers, the report and the entry points of doctor.hpp.
#include "runner/audit/snapshot.hpp"
#include "runner/launch/host_probe.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace lockstep::runner {

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

} // namespace lockstep::runner
