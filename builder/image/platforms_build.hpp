#pragma once
// `platforms: [linux/amd64, linux/arm64]`: one image per platform, each the image a build of that
// platform alone gives (envspec::spec_for_platform, builder::platform_lock), under one OCI image
// index. The OCI layout and archive hold the index; a docker-archive lists every platform's image
// in its manifest.json and holds the index too; a SIF, an SBOM and the provenance file are one per
// platform, their paths naming the architecture with `{arch}` (build/x-{arch}.sif).
// docs/multi-platform.md.
#include "builder/image/build.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"

#include <filesystem>
#include <string>

namespace lockstep::builder {

/// Builds every platform of `spec` (two or more) and writes the index outputs. The result's
/// manifest is the index; `platforms` holds each platform's own result.
Result<BuildResult> build_platforms(const envspec::Spec& spec, const BuildOptions& options);

/// `path` with every `{arch}` replaced by the platform's architecture ("arm64"), or an error
/// naming `what` when several platforms would all write the one path.
Result<std::filesystem::path> platform_path(const std::filesystem::path& path, const oci::Platform& platform,
                                            std::string_view what);

} // namespace lockstep::builder
