#include "support/supplychain/purl.hpp"

#include "support/base/text.hpp"

namespace lockstep {

namespace {

bool unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_' || c == '~' || c == ':';
}

} // namespace

std::string purl_encode(std::string_view s, bool keep_slash) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (unreserved(c) || (keep_slash && c == '/')) {
      out += c;
    } else {
      const auto b = static_cast<unsigned char>(c);
      out += '%';
      out += k_hex[b >> 4U];
      out += k_hex[b & 15U];
    }
  }
  return out;
}

std::string PackageUrl::str() const {
  std::string out = "pkg:" + ascii_lower(type) + "/";
  for (const std::string& segment : namespace_segments) {
    if (!segment.empty()) {
      out += purl_encode(segment) + "/";
    }
  }
  out += purl_encode(name);
  if (!version.empty()) {
    out += "@" + purl_encode(version);
  }
  char sep = '?';
  for (const auto& [key, value] : qualifiers) { // std::map: sorted by key
    if (!value.empty()) {
      out += sep;
      out += ascii_lower(key) + "=" + purl_encode(value, true);
      sep = '&';
    }
  }
  if (!subpath.empty()) {
    out += "#" + purl_encode(subpath, true);
  }
  return out;
}

std::string deb_purl(std::string_view vendor, std::string_view name, std::string_view version,
                     std::string_view arch, std::string_view distro) {
  PackageUrl p;
  p.type = "deb";
  p.namespace_segments = {ascii_lower(vendor)};
  p.name = ascii_lower(name);
  p.version = std::string(version);
  p.qualifiers = {{"arch", std::string(arch)}, {"distro", std::string(distro)}};
  return p.str();
}

std::string pypi_purl(std::string_view normalized_name, std::string_view version) {
  PackageUrl p;
  p.type = "pypi";
  p.name = std::string(normalized_name);
  p.version = std::string(version);
  return p.str();
}

std::string oci_purl(std::string_view repository, std::string_view digest, std::string_view tag) {
  PackageUrl p;
  p.type = "oci";
  const std::size_t slash = repository.rfind('/');
  p.name = ascii_lower(slash == std::string_view::npos ? repository : repository.substr(slash + 1));
  p.version = std::string(digest);
  p.qualifiers = {{"repository_url", std::string(repository)}, {"tag", std::string(tag)}};
  return p.str();
}

} // namespace lockstep
