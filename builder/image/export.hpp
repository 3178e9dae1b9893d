#pragma once
// `lockstep export`: a Dockerfile or an Apptainer definition file from a spec and its lock, for teams
// that build with Docker or Apptainer. Every .deb and wheel is fetched by its exact lock URL and
// checked by sha256, git sources are pinned by commit, and what the recipe cannot express (a base
// image tag that moves, run: steps, lockstep's deterministic layers) is listed in a comment block
// at its top. Text only: nothing is fetched or run. The mapping is described in docs/export.md.
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"

#include <string>
#include <vector>

namespace lockstep::builder {

/// Which recipe to write.
enum class ExportFormat {
  dockerfile,    ///< a BuildKit Dockerfile (`# syntax=docker/dockerfile:1.6`)
  apptainer_def, ///< an Apptainer (Singularity) definition file
};

/// What to write it from and how to name the inputs in its header.
struct ExportOptions {
  ExportFormat format = ExportFormat::dockerfile;
  /// The lock and spec file names as the header mentions them ("lockstep.lock"); never read.
  std::string lock_name = "lockstep.lock";
  std::string spec_name = "lockstep.yaml";
};

/// The recipe and the things it cannot express.
struct ExportResult {
  std::string text; ///< the whole recipe, ending in a newline
  /// One line each, in a fixed order ("the base image is not pinned by digest: ..."); also in the
  /// comment block at the top of `text`.
  std::vector<std::string> limitations;
};

/// Writes the recipe for `spec` built from `lock` (which must be the spec's current lock: the caller
/// checks staleness). Deterministic: the same spec and lock give the same bytes. A lock or spec
/// value that can't be written safely into the recipe (a URL with quotes or whitespace, a file name
/// with '/', an environment value with a newline in a Dockerfile) is invalid_input naming it.
Result<ExportResult> export_recipe(const envspec::Spec& spec, const envspec::Lock& lock,
                                   const ExportOptions& options);

} // namespace lockstep::builder
