// ImageSource::open: a local image reference to the reader of its kind (image_dir.cpp for OCI layout
// directories, image_archive.cpp for OCI archives and docker-archives).
#include "support/oci/image_internal.hpp"
#include "support/oci/image_source.hpp"

namespace lockstep::oci {

Result<std::unique_ptr<ImageSource>> ImageSource::open(const ImageRef& ref) {
  if (ref.is_remote()) {
    return internal_error("{}: registry images are opened through registry::open_image", ref.str());
  }
  if (ref.transport == ImageRef::Transport::oci_dir) {
    return detail::open_oci_dir(ref);
  }
  return detail::open_archive(ref);
}

} // namespace lockstep::oci
