#pragma once
// The SBOM of an image without its lock (`lockstep sbom IMAGE` for an image lockstep did not build,
// or whose lock is gone; docs/sbom.md), as syft reads one: the packages the image's own databases
// record — dpkg's status (each installed deb, its license from its DEP-5 copyright file), the
// Python `*.dist-info` directories no deb owns (the license their METADATA declares), and conda's
// conda-meta records — with package URLs (the distro from os-release). The image's files are
// hostile input, read through read_image_contents' bounds; the result is deterministic.
#include "envspec/documents/sbom.hpp"
#include "runner/audit/image_contents.hpp"
#include "runner/audit/verify.hpp"
#include "support/base/result.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::runner {

/// The packages `packages` (read from `contents`) lists, as SBOM components: installed debs, the
/// dist-info directories no deb installed, conda packages.
std::vector<envspec::SbomComponent> scanned_components(const ImageContents& contents,
                                                       const ImagePackages& packages);

/// What scanning an image gave: its SBOM, and how many packages of each kind it lists.
struct ScannedSbom {
  std::string text;
  std::size_t debs = 0;
  std::size_t wheels = 0;
  std::size_t condas = 0;
};

/// Reads `image` (an OCI image in any form, or a SIF: what has a digest to describe) and renders
/// its SBOM in `format`, named `name` (default: the image as given), describing its manifest
/// digest (a SIF: the file's sha256); `created` is the document's time. A root directory is
/// invalid_input: it has no digest.
Result<ScannedSbom> scan_image_sbom(const ImageArg& image, const std::string& what,
                                    envspec::SbomFormat format, const std::string& name,
                                    std::int64_t created);

} // namespace lockstep::runner
