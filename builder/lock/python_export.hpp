#pragma once
// The Python packages of a lock in the formats other installers read, so that the same set installs
// outside the image: a pip requirements file (every wheel pinned with `==` and `--hash=sha256:`,
// with the index and find-links options of the repositories they came from), and a PEP 751
// `pylock.toml` (lock-version 1.0: each package with its wheel's URL or path, size and sha256).
// Text only: nothing is fetched. See docs/python-resolver.md ("Exporting").
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"

#include <filesystem>
#include <string>

namespace lockstep::builder {

/// Which file to write.
enum class PythonExportFormat {
  requirements, ///< pip's requirements format, for `pip install --require-hashes --no-deps -r FILE`
  pylock,       ///< PEP 751 pylock.toml
};

/// Where things are, to write local wheels' paths relative to the output.
struct PythonExportOptions {
  PythonExportFormat format = PythonExportFormat::requirements;
  std::string lock_name = "lockstep.lock"; ///< as the header names it; never read
  std::filesystem::path spec_dir;          ///< relative lock URLs are relative to it
  std::filesystem::path output_dir;        ///< where the file will be (paths in it are relative to this)
};

/// The file for the wheels of `lock` (made from `spec`). A lock without wheels, or a URL that
/// can't be written safely (whitespace or control characters), is invalid_input. Deterministic.
Result<std::string> export_python(const envspec::Spec& spec, const envspec::Lock& lock,
                                  const PythonExportOptions& options);

} // namespace lockstep::builder
