#pragma once
// A lock's conda packages in the formats conda's own tools install from, so that the set the image
// holds installs the same outside it (docs/conda.md, "People's files, both ways"):
//   - explicit (CEP 23, `conda create --file FILE`, `micromamba create -f FILE`): "@EXPLICIT", then
//     one `URL#sha256:HEX` line a package in install order (each after what it depends on);
//   - conda-lock.yml v1 (CEP 37, `conda-lock install`): every conda package with its URL, md5 and
//     sha256, its dependencies as a name -> constraint map, category main; the lock's wheels as
//     `manager: pip` entries after them; metadata.content_hash is the lockstep lock's own sha256
//     (conda-lock hashes its inputs; the lock is lockstep's whole input), channels in the spec's
//     order, sources the spec file.
#include "envspec/lock/lockfile.hpp"
#include "support/base/result.hpp"

#include <string>

namespace lockstep::builder {

/// The two formats.
enum class CondaExportFormat { explicit_file, conda_lock };

/// What the header names; nothing is read.
struct CondaExportOptions {
  CondaExportFormat format = CondaExportFormat::explicit_file;
  std::string lock_name = "lockstep.lock";
  std::string spec_name = "lockstep.yaml";
};

/// The text of `lock`'s conda packages in `options.format`. A lock without conda packages is
/// invalid_input (nothing to export).
Result<std::string> export_conda(const envspec::Lock& lock, const CondaExportOptions& options);

} // namespace lockstep::builder
