#pragma once
// Package URLs (purl: "pkg:type/namespace/name@version?qualifiers#subpath", the package-url
// specification), as SBOMs name packages: pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64&distro=debian-12,
// pkg:pypi/torch@2.4.1, pkg:oci/debian@sha256:...?repository_url=docker.io/library/debian.
//
// Encoding, as the specification's "Character encoding" section says: the unreserved characters
// (A-Z a-z 0-9 . - _ ~) and the colon are written as they are, everything else is percent-encoded
// with upper-case hex ('+' is %2B, ' ' is %20, '@' is %40); '/' separates namespace segments and is
// kept in qualifier values (repository_url=docker.io/library/debian), encoded inside a name.
// Qualifier keys are lower case and sorted; empty values are left out.
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

struct PackageUrl {
  std::string type;                              ///< "deb", "pypi", "oci", "generic", ...: lower case
  std::vector<std::string> namespace_segments;   ///< "debian"; empty for none
  std::string name;                              ///< required
  std::string version;                           ///< "" for none
  std::map<std::string, std::string> qualifiers; ///< key -> value (keys lower case)
  std::string subpath;                           ///< "" for none

  /// The canonical string form.
  [[nodiscard]] std::string str() const;
};

/// `s` percent-encoded as a purl component (see above); '/' kept when `keep_slash`.
std::string purl_encode(std::string_view s, bool keep_slash = false);

/// pkg:deb/VENDOR/NAME@VERSION?arch=ARCH&distro=DISTRO ("debian", "debian-12"; "ubuntu", "ubuntu-22.04").
std::string deb_purl(std::string_view vendor, std::string_view name, std::string_view version,
                     std::string_view arch, std::string_view distro);

/// pkg:pypi/NAME@VERSION; NAME as PEP 503 normalises it (normalize_project_name, support/python).
std::string pypi_purl(std::string_view normalized_name, std::string_view version);

/// pkg:oci/NAME@DIGEST?repository_url=REPOSITORY[&tag=TAG]: NAME is the repository's last path
/// segment, lower case; DIGEST the manifest's "sha256:<hex>".
std::string oci_purl(std::string_view repository, std::string_view digest, std::string_view tag = "");

} // namespace lockstep
