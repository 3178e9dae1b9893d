#include "support/image_source.hpp"

namespace lockstep::oci {

Result<ImageRef> ImageRef::parse(std::string_view text) {
  return invalid_input("image references are not implemented yet: '{}'", text);
}

std::string ImageRef::str() const { return path.string(); }

Result<std::unique_ptr<ImageSource>> ImageSource::open(const ImageRef& ref) {
  return invalid_input("can't open {}: not implemented yet", ref.str());
}

} // namespace lockstep::oci
