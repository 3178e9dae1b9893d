#pragma once
// The Python environment of a `lockstep doctor` snapshot: the active venv or conda environment, or
// --python's prefix, read from its records (pyvenv.cfg, dist-info, egg-info, conda-meta) inside the
// captured root, never by running pip or python. Not part of the audit room's public API.
#include "runner/audit/capture.hpp"
#include "runner/audit/root_fs.hpp"
#include "runner/audit/snapshot.hpp"
#include "support/base/result.hpp"

#include <optional>

namespace lockstep::runner::doctor_detail {

/// Reads the environment `options` name (--python, else $VIRTUAL_ENV, else $CONDA_PREFIX) into a
/// PythonEnv, packages sorted; nullopt when there is none. pyvenv.cfg's home and
/// include-system-site-packages go into `capture`, and so does every file that could not be read,
/// as a warning. Errors only for a --python prefix that can't be used (invalid_input).
Result<std::optional<PythonEnv>> read_python(const RootFs& root, const DoctorOptions& options,
                                             Capture& capture);

} // namespace lockstep::runner::doctor_detail
