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
//
// The parts, each its own file: the snapshot and its JSON (snapshot.hpp), what a capture holds
// (capture.hpp), the host facts and their parsers (host_facts.hpp), the verdict and the report
// (doctor_report.hpp); the root reader, the Python reader and the shared text rules are internal
// (root_fs.hpp, python_env.hpp, doctor_text.hpp).
#include "runner/audit/capture.hpp"
#include "runner/audit/doctor_report.hpp"
#include "runner/audit/host_facts.hpp"
#include "runner/audit/snapshot.hpp"
#include "support/base/result.hpp"

#include <optional>
#include <string>
#include <vector>

namespace lockstep::runner {

/// $VIRTUAL_ENV, $CONDA_PREFIX and $PATH (the usual system directories when unset); root `/`.
DoctorOptions doctor_options_from_env();

/// Captures the host and the Python environment. Errors only for bad options: a host root that is
/// not a directory, or a --python prefix that doesn't exist (invalid_input). Everything else that
/// can't be read is null in the snapshot and a line in Capture::warnings.
Result<Capture> capture(const DoctorOptions& options);

/// Only the Python environment capture() would read (the active venv or conda environment, or
/// --python's prefix), with its warnings; nullopt when there is none. For `lockstep init --from`.
Result<std::optional<PythonEnv>> capture_python(const DoctorOptions& options,
                                                std::vector<std::string>& warnings);

} // namespace lockstep::runner
