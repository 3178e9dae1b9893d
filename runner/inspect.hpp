#pragma once
// `lockstep inspect`: a summary of an existing image (reference, manifest, config, layers).
#include "support/image_source.hpp"
#include "support/result.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace lockstep::runner {

/// What `inspect` reports about one image.
struct ImageSummary {
  oci::ImageRef ref;
  oci::OpenedImage image;
};

/// Opens and resolves the image named by `ref` (skopeo-style, e.g. "oci:build/hello:latest").
Result<ImageSummary> inspect_image(const std::string& ref);

/// Machine-readable form (stable keys; documented in docs/cli.md).
nlohmann::json summary_to_json(const ImageSummary& s);
/// Human-readable form for a terminal.
std::string summary_to_text(const ImageSummary& s);

} // namespace lockstep::runner
