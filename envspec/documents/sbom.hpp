#pragma once
// Software bills of materials of a lock (issue 19): SPDX 2.3 JSON and CycloneDX 1.6 JSON, each
// listing every artifact of the lock once — debs, wheels, git sources — and the base image, with
// version, sha256, where it came from (a package URL and the download URL) and its license where
// one is known. Deterministic: the creation time is the lock's epoch, and the SPDX document
// namespace and the CycloneDX serial number are derived from the subject digest (the image's
// manifest, or the lock's own digest), so the same lock and image give the same bytes anywhere.
#include "envspec/lock/lockfile.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

enum class SbomFormat { spdx_json, cyclonedx_json };

/// "spdx-json" or "cyclonedx-json"; nullopt for anything else.
std::optional<SbomFormat> parse_sbom_format(std::string_view text);

struct SbomOptions {
  std::string name;    ///< the image (or spec) the SBOM describes: its document and root component name
  Digest subject;      ///< the image's manifest digest, or the lock's digest
  std::string version; ///< lockstep's version, for the creator/tool entries
  /// License expressions by artifact sha256 (hex), where known (DEP-5 copyright files, wheel
  /// METADATA); the others are NOASSERTION (SPDX) or left out (CycloneDX).
  std::map<std::string, std::string> licenses;
};

/// The SBOM of `lock` in `format`, as compact JSON with sorted packages, ending in a newline.
std::string render_sbom(const Lock& lock, SbomFormat format, const SbomOptions& options);

/// One package an SBOM lists, however it was found (a lock's artifact, or what an image's package
/// databases record).
struct SbomComponent {
  std::string kind; ///< "deb", "wheel", "conda", "git" or "image"
  std::string name;
  std::string version;
  std::string purl;
  std::string sha256;  ///< hex of the package file; "" when not known (an image's dpkg status has none)
  std::string url;     ///< where it was downloaded from; "" when not known
  std::string license; ///< the expression it declares; "" when not known
  std::string
      id_part; ///< what tells two of one name apart in the SPDX id (a deb's architecture, a conda build)
};

/// The SBOM of `components` in `format` (sorted here; `created` the document's time, seconds since
/// the epoch), as compact JSON ending in a newline. options.licenses is not used: each component
/// carries its own.
std::string render_sbom(std::vector<SbomComponent> components, SbomFormat format, const SbomOptions& options,
                        std::int64_t created);

/// The media type (and OCI artifactType) of an SBOM: "application/spdx+json" or
/// "application/vnd.cyclonedx+json".
std::string_view sbom_media_type(SbomFormat format);

/// "spdx-json" or "cyclonedx-json".
std::string_view sbom_format_name(SbomFormat format);

/// What an SBOM file says about itself: its format, and the digest of what it describes (the SPDX
/// root package's or the CycloneDX metadata component's SHA-256, as lockstep writes them).
struct SbomSubject {
  SbomFormat format = SbomFormat::spdx_json;
  Digest subject;
};

/// Reads an SBOM's format and subject. Text that is not an SPDX 2.x or CycloneDX JSON document, or
/// one that does not name the digest it describes, is invalid_input naming `what`.
Result<SbomSubject> read_sbom_subject(std::string_view text, std::string_view what);

/// The package URL of one artifact ("pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64&distro=debian-12",
/// "pkg:pypi/torch@2.4.1", "pkg:generic/NAME@COMMIT?vcs_url=git%2BURL%40COMMIT"), from the lock's
/// repositories (a Debian or Ubuntu suite gives the distro).
std::string artifact_purl(const Lock& lock, const LockedArtifact& artifact);

/// "debian-12" for bookworm, "ubuntu-22.04" for jammy, ...; "" for a suite it doesn't know.
std::string distro_of_suite(std::string_view suite);

} // namespace lockstep::envspec
