#pragma once
// `lockstep inspect`: a summary of an existing image (reference, manifest, config, layers).
// The output forms are documented in docs/inspect.md.
#include "support/base/result.hpp"
#include "support/oci/image_source.hpp"

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
/// Same, choosing among several images (platform of a multi-platform index, tag, digest pin).
Result<ImageSummary> inspect_image(const std::string& ref, const oci::SelectOptions& options);

/// Machine-readable form (stable keys; documented in docs/inspect.md).
nlohmann::json summary_to_json(const ImageSummary& s);
/// Human-readable form for a terminal; text taken from the image has control characters escaped.
std::string summary_to_text(const ImageSummary& s);

/// Short form of a layer media type for tables: "tar+gzip", "tar+zstd (docker)"... Unknown types
/// come back whole.
std::string short_media_type(const std::string& media_type);

} // namespace lockstep::runner
