#include "envspec/sbom.hpp"

#include "support/oci/oci.hpp"
#include "support/purl.hpp"
#include "support/python/pep508.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <tuple>
#include <utility>
#include <vector>

namespace lockstep::envspec {

namespace {

using ordered = nlohmann::ordered_json;

// Debian's and Ubuntu's codenames and the releases they name (debian.org/releases,
// wiki.ubuntu.com/Releases). Suites such as "stable" move, so only codenames are mapped.
constexpr std::array<std::pair<std::string_view, std::string_view>, 13> k_suites = {{
    {"buster", "debian-10"},
    {"bullseye", "debian-11"},
    {"bookworm", "debian-12"},
    {"trixie", "debian-13"},
    {"forky", "debian-14"},
    {"bionic", "ubuntu-18.04"},
    {"focal", "ubuntu-20.04"},
    {"jammy", "ubuntu-22.04"},
    {"lunar", "ubuntu-23.04"},
    {"mantic", "ubuntu-23.10"},
    {"noble", "ubuntu-24.04"},
    {"oracular", "ubuntu-24.10"},
    {"plucky", "ubuntu-25.04"},
}};

// The suite a deb came from: its repository's one suite ("bookworm-updates" counts as bookworm).
std::string suite_of(const Lock& lock, const LockedArtifact& a) {
  if (a.repo < 0 || static_cast<std::size_t>(a.repo) >= lock.repos.size()) {
    return "";
  }
  const LockedRepo& r = lock.repos[static_cast<std::size_t>(a.repo)];
  std::string suite = !r.suite.empty() ? r.suite : (r.suites.empty() ? "" : r.suites.front().suite);
  return suite.substr(0, suite.find('-'));
}

// A stable element id: "SPDXRef-" and the text with anything but letters, digits, '.' and '-' as '-'.
std::string spdx_id(std::string_view kind, std::string_view name, std::string_view extra) {
  std::string out = fmt::format("SPDXRef-{}-{}{}{}", kind, name, extra.empty() ? "" : "-", extra);
  for (char& c : out) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
    if (!ok) {
      c = '-';
    }
  }
  return out;
}

// A name-based UUID (version 5 layout, RFC 9562) from a digest: the same subject, the same UUID.
std::string uuid_of(const Digest& d) {
  std::string hex = sha256_of("lockstep-sbom:" + d.str()).hex().substr(0, 32);
  hex[12] = '5';
  static constexpr char k_variant[] = "89ab";
  hex[16] = k_variant[(hex[16] >= 'a' ? hex[16] - 'a' + 10 : hex[16] - '0') & 3];
  return fmt::format("{}-{}-{}-{}-{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4),
                     hex.substr(16, 4), hex.substr(20, 12));
}

// One entry of the SBOM: an artifact of the lock or the base image.
struct Entry {
  std::string kind; // deb, wheel, git, image
  std::string name;
  std::string version;
  std::string purl;
  std::string sha256; // hex, "" for none
  std::string url;
  std::string license; // "" when not known
  std::string id;      // SPDX id
};

std::vector<Entry> entries(const Lock& lock, const SbomOptions& options) {
  std::vector<Entry> out;
  if (lock.base) {
    Entry e;
    e.kind = "image";
    std::string ref = lock.base->image;
    if (ref.starts_with("docker://")) {
      ref = ref.substr(9);
    }
    const std::size_t colon = ref.rfind(':');
    const std::size_t slash = ref.rfind('/');
    const bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
    const std::string repository = tagged ? ref.substr(0, colon) : ref;
    e.name = repository;
    e.version = lock.base->manifest.str();
    e.purl = oci_purl(repository, lock.base->manifest.str(), tagged ? ref.substr(colon + 1) : "");
    e.sha256 = lock.base->manifest.hex();
    e.url = lock.base->image;
    e.id = spdx_id("image", repository, "");
    out.push_back(std::move(e));
  }
  for (const LockedArtifact& a : lock.artifacts) {
    Entry e;
    e.kind = a.kind;
    e.name = a.name;
    e.version = a.version;
    e.purl = artifact_purl(lock, a);
    e.sha256 = a.sha256.hex();
    e.url = a.url;
    if (auto it = options.licenses.find(e.sha256); it != options.licenses.end()) {
      e.license = it->second;
    }
    e.id = spdx_id(a.kind, a.name, a.kind == "deb" ? a.arch : "");
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const Entry& x, const Entry& y) {
    return std::tie(x.kind, x.name, x.id) < std::tie(y.kind, y.name, y.id);
  });
  return out;
}

std::string render_spdx(const Lock& lock, const SbomOptions& options) {
  ordered doc;
  doc["spdxVersion"] = "SPDX-2.3";
  doc["dataLicense"] = "CC0-1.0";
  doc["SPDXID"] = "SPDXRef-DOCUMENT";
  doc["name"] = options.name;
  doc["documentNamespace"] =
      fmt::format("https://spdx.org/spdxdocs/lockstep/{}-{}", options.name, options.subject.hex());
  doc["creationInfo"] = {{"created", oci::rfc3339(lock.epoch)},
                         {"creators", {fmt::format("Tool: lockstep-{}", options.version)}}};
  ordered root;
  root["SPDXID"] = "SPDXRef-image";
  root["name"] = options.name;
  root["downloadLocation"] = "NOASSERTION";
  root["filesAnalyzed"] = false;
  root["checksums"] = {{{"algorithm", "SHA256"}, {"checksumValue", options.subject.hex()}}};
  root["primaryPackagePurpose"] = "CONTAINER";
  ordered packages = ordered::array({root});
  ordered relationships = ordered::array();
  relationships.push_back({{"spdxElementId", "SPDXRef-DOCUMENT"},
                           {"relationshipType", "DESCRIBES"},
                           {"relatedSpdxElement", "SPDXRef-image"}});
  for (const Entry& e : entries(lock, options)) {
    ordered p;
    p["SPDXID"] = e.id;
    p["name"] = e.name;
    p["versionInfo"] = e.version;
    p["downloadLocation"] = e.url.empty() || e.url.find("://") == std::string::npos ? "NOASSERTION" : e.url;
    p["filesAnalyzed"] = false;
    if (!e.sha256.empty()) {
      p["checksums"] = {{{"algorithm", "SHA256"}, {"checksumValue", e.sha256}}};
    }
    p["licenseConcluded"] = "NOASSERTION";
    p["licenseDeclared"] = e.license.empty() ? "NOASSERTION" : e.license;
    p["copyrightText"] = "NOASSERTION";
    p["externalRefs"] = {
        {{"referenceCategory", "PACKAGE-MANAGER"}, {"referenceType", "purl"}, {"referenceLocator", e.purl}}};
    packages.push_back(std::move(p));
    relationships.push_back(
        {{"spdxElementId", "SPDXRef-image"}, {"relationshipType", "CONTAINS"}, {"relatedSpdxElement", e.id}});
  }
  doc["packages"] = std::move(packages);
  doc["relationships"] = std::move(relationships);
  return doc.dump() + "\n";
}

std::string render_cyclonedx(const Lock& lock, const SbomOptions& options) {
  ordered doc;
  doc["bomFormat"] = "CycloneDX";
  doc["specVersion"] = "1.6";
  doc["serialNumber"] = "urn:uuid:" + uuid_of(options.subject);
  doc["version"] = 1;
  ordered tool = {{"type", "application"}, {"name", "lockstep"}, {"version", options.version}};
  ordered subject = {{"type", "container"},
                     {"bom-ref", "image"},
                     {"name", options.name},
                     {"hashes", {{{"alg", "SHA-256"}, {"content", options.subject.hex()}}}}};
  doc["metadata"] = {
      {"timestamp", oci::rfc3339(lock.epoch)}, {"tools", {{"components", {tool}}}}, {"component", subject}};
  ordered components = ordered::array();
  for (const Entry& e : entries(lock, options)) {
    ordered c;
    c["type"] = e.kind == "image" ? "container" : "library";
    c["bom-ref"] = e.purl;
    c["name"] = e.name;
    c["version"] = e.version;
    if (!e.sha256.empty()) {
      c["hashes"] = {{{"alg", "SHA-256"}, {"content", e.sha256}}};
    }
    if (!e.license.empty()) {
      c["licenses"] = {{{"expression", e.license}}};
    }
    c["purl"] = e.purl;
    if (e.url.find("://") != std::string::npos) {
      c["externalReferences"] = {{{"type", e.kind == "git" ? "vcs" : "distribution"}, {"url", e.url}}};
    }
    components.push_back(std::move(c));
  }
  doc["components"] = std::move(components);
  return doc.dump() + "\n";
}

} // namespace

std::optional<SbomFormat> parse_sbom_format(std::string_view text) {
  if (text == "spdx-json") {
    return SbomFormat::spdx_json;
  }
  if (text == "cyclonedx-json") {
    return SbomFormat::cyclonedx_json;
  }
  return std::nullopt;
}

std::string distro_of_suite(std::string_view suite) {
  for (const auto& [codename, distro] : k_suites) {
    if (codename == suite) {
      return std::string(distro);
    }
  }
  return "";
}

std::string artifact_purl(const Lock& lock, const LockedArtifact& a) {
  if (a.kind == "deb") {
    const std::string distro = distro_of_suite(suite_of(lock, a));
    const std::string vendor = distro.starts_with("ubuntu") ? "ubuntu" : "debian";
    return deb_purl(vendor, a.name, a.version, a.arch, distro);
  }
  if (a.kind == "wheel") {
    return pypi_purl(normalize_project_name(a.name), a.version);
  }
  PackageUrl p; // git: the repository's last path segment, at the commit
  p.type = "generic";
  std::string name = a.name;
  while (!name.empty() && name.back() == '/') {
    name.pop_back();
  }
  name = name.substr(name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1);
  if (name.ends_with(".git")) {
    name.resize(name.size() - 4);
  }
  p.name = name.empty() ? "source" : name;
  p.version = a.version;
  p.qualifiers = {{"vcs_url", fmt::format("git+{}@{}", a.name, a.version)}};
  return p.str();
}

std::string render_sbom(const Lock& lock, SbomFormat format, const SbomOptions& options) {
  return format == SbomFormat::spdx_json ? render_spdx(lock, options) : render_cyclonedx(lock, options);
}

} // namespace lockstep::envspec
