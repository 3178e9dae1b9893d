#include "runner/inspect.hpp"

namespace lockstep::runner {

Result<ImageSummary> inspect_image(const std::string& ref) {
  LS_TRY_ASSIGN(oci::ImageRef parsed, oci::ImageRef::parse(ref));
  LS_TRY_ASSIGN(auto source, oci::ImageSource::open(parsed));
  LS_TRY_ASSIGN(oci::OpenedImage image, source->resolve(oci::SelectOptions{}));
  return ImageSummary{parsed, std::move(image)};
}

nlohmann::json summary_to_json(const ImageSummary& s) {
  nlohmann::json j;
  j["reference"] = s.ref.str();
  j["manifest_digest"] = s.image.manifest_digest.str();
  return j;
}

std::string summary_to_text(const ImageSummary& s) { return s.image.manifest_digest.str() + "\n"; }

} // namespace lockstep::runner
