#include "support/oci/registry_ref.hpp"

#include "support/oci/oci.hpp"

#include <algorithm>

namespace lockstep::oci {

namespace {

constexpr std::string_view k_form = "[HOST[:PORT]/]REPO[:TAG][@sha256:DIGEST]";
constexpr std::string_view k_docker_hub_api = "registry-1.docker.io";

bool has_upper(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

} // namespace

Result<RegistryRef> RegistryRef::parse(std::string_view text) {
  RegistryRef ref;
  if (text.empty()) {
    return invalid_input("empty registry reference: expected {}", k_form);
  }
  std::string_view rest = text;
  if (std::size_t at = rest.find('@'); at != std::string_view::npos) {
    std::string_view digest = rest.substr(at + 1);
    auto parsed = Digest::parse(digest);
    if (!parsed || parsed->algorithm() != "sha256") {
      return invalid_input("invalid image reference '{}': '{}' is not a sha256 digest (sha256: and 64 "
                           "lower-case hex digits)",
                           text, digest);
    }
    ref.digest = *parsed;
    rest = rest.substr(0, at);
  }
  // The tag is after the last ':' that follows the last '/'.
  std::size_t slash = rest.rfind('/');
  std::size_t colon = rest.rfind(':');
  std::string_view name = rest;
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    std::string_view tag = rest.substr(colon + 1);
    if (!valid_tag(tag)) {
      return invalid_input(
          "invalid image reference '{}': '{}' is not a valid tag ([A-Za-z0-9_][A-Za-z0-9._-], "
          "at most 128 characters)",
          text, tag);
    }
    ref.tag = std::string(tag);
    name = rest.substr(0, colon);
  }
  std::size_t first = name.find('/');
  if (first != std::string_view::npos && looks_like_host(name.substr(0, first))) {
    std::string_view host = name.substr(0, first);
    if (!valid_registry_host(host)) {
      return invalid_input("invalid image reference '{}': '{}' is not a registry host (HOST[:PORT])", text,
                           host);
    }
    ref.host = std::string(host);
    std::transform(ref.host.begin(), ref.host.end(), ref.host.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
    ref.repository = std::string(name.substr(first + 1));
  } else {
    ref.host = std::string(k_docker_hub);
    ref.repository = std::string(name);
  }
  if (ref.host == "index.docker.io" || ref.host == k_docker_hub_api) {
    ref.host = std::string(k_docker_hub);
  }
  if (ref.host == k_docker_hub && ref.repository.find('/') == std::string::npos) {
    ref.repository = "library/" + ref.repository;
  }
  if (has_upper(ref.repository)) {
    return invalid_input("invalid image reference '{}': repository names must be lower case", text);
  }
  if (!valid_repository_name(ref.repository)) {
    return invalid_input("invalid image reference '{}': '{}' is not a valid repository name (lower-case "
                         "letters, digits and separators; expected {})",
                         text, ref.repository, k_form);
  }
  if (ref.tag.empty() && !ref.digest) {
    ref.tag = "latest";
  }
  return ref;
}

std::string RegistryRef::name() const {
  return host + "/" + repository;
}

std::string RegistryRef::str() const {
  std::string out = name();
  if (!tag.empty()) {
    out += ":" + tag;
  }
  if (digest) {
    out += "@" + digest->str();
  }
  return out;
}

std::string RegistryRef::api_reference() const {
  return digest ? digest->str() : tag;
}

std::string RegistryRef::api_host() const {
  return host == k_docker_hub ? std::string(k_docker_hub_api) : host;
}

} // namespace lockstep::oci
