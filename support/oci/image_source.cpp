#include "support/oci/image_source.hpp"

namespace lockstep::oci {

namespace {

constexpr std::string_view k_oci_prefix = "oci:";
constexpr std::string_view k_oci_archive_prefix = "oci-archive:";
constexpr std::string_view k_docker_archive_prefix = "docker-archive:";
constexpr std::string_view k_docker_prefix = "docker://";
constexpr std::string_view k_oras_prefix = "oras://";

Error bad_reference(std::string_view text) {
  return invalid_input("invalid image reference '{}': expected oci:DIR[:TAG], oci-archive:FILE[:TAG], "
                       "docker-archive:FILE, docker://[HOST/]REPO[:TAG][@DIGEST] or oras://HOST/REPO[:TAG]",
                       text);
}

std::string_view prefix_of(ImageRef::Transport t) {
  switch (t) {
  case ImageRef::Transport::oci_dir:
    return k_oci_prefix;
  case ImageRef::Transport::oci_archive:
    return k_oci_archive_prefix;
  case ImageRef::Transport::docker_archive:
    return k_docker_archive_prefix;
  case ImageRef::Transport::docker:
    return k_docker_prefix;
  case ImageRef::Transport::oras:
    return k_oras_prefix;
  }
  return k_oci_prefix;
}

} // namespace

Result<ImageRef> ImageRef::parse(std::string_view text) {
  ImageRef ref;
  std::string_view rest;
  for (auto [prefix, transport] :
       {std::pair{k_docker_prefix, Transport::docker}, std::pair{k_oras_prefix, Transport::oras}}) {
    if (text.starts_with(prefix)) {
      ref.transport = transport;
      LS_TRY_ASSIGN(ref.remote, RegistryRef::parse(text.substr(prefix.size())));
      return ref;
    }
  }
  if (text.substr(0, k_oci_prefix.size()) == k_oci_prefix) {
    ref.transport = Transport::oci_dir;
    rest = text.substr(k_oci_prefix.size());
  } else if (text.substr(0, k_oci_archive_prefix.size()) == k_oci_archive_prefix) {
    ref.transport = Transport::oci_archive;
    rest = text.substr(k_oci_archive_prefix.size());
  } else if (text.substr(0, k_docker_archive_prefix.size()) == k_docker_archive_prefix) {
    ref.transport = Transport::docker_archive;
    rest = text.substr(k_docker_archive_prefix.size());
  } else {
    return bad_reference(text);
  }
  std::string_view path = rest;
  std::string_view tag;
  if (ref.transport == Transport::docker_archive) {
    // As skopeo: FILE[:NAME[:TAG]], split at the first ':'.
    if (std::size_t colon = rest.find(':'); colon != std::string_view::npos) {
      path = rest.substr(0, colon);
      tag = rest.substr(colon + 1);
      if (!valid_docker_ref(tag)) {
        return invalid_input("invalid image reference '{}': '{}' is not an image name (expected "
                             "docker-archive:FILE[:NAME[:TAG]])",
                             text, tag);
      }
    }
  } else if (std::size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    std::string_view suffix = rest.substr(colon + 1);
    if (suffix.empty()) {
      return invalid_input("invalid image reference '{}': empty tag after ':'", text);
    }
    if (valid_tag(suffix)) {
      path = rest.substr(0, colon);
      tag = suffix;
    }
  }
  if (path.empty()) {
    return invalid_input("invalid image reference '{}': no path after '{}'", text, prefix_of(ref.transport));
  }
  ref.path = std::filesystem::path(std::string(path));
  ref.tag = std::string(tag);
  return ref;
}

std::string ImageRef::str() const {
  if (is_remote()) {
    return std::string(prefix_of(transport)) + remote.str();
  }
  std::string out = std::string(prefix_of(transport)) + path.string();
  if (!tag.empty()) {
    out += ":" + tag;
  }
  return out;
}

} // namespace lockstep::oci
