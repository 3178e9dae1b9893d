#include "envspec/documents/sbom.hpp"

#include "support/base/json.hpp"
#include "support/conda/match_spec.hpp"
#include "support/oci/oci.hpp"
#include "support/python/pep508.hpp"
#include "support/supplychain/purl.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
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

// The lock's artifacts and base image as SBOM components.
std::vector<SbomComponent> components_of(const Lock& lock, const SbomOptions& options) {
  std::vector<SbomComponent> out;
  if (lock.base) {
    SbomComponent e;
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
    out.push_back(std::move(e));
  }
  for (const LockedArtifact& a : lock.artifacts) {
    SbomComponent e;
    e.kind = a.kind;
    e.name = a.name;
    e.version = a.version;
    e.purl = artifact_purl(lock, a);
    e.sha256 = a.sha256.hex();
    e.url = a.url;
    if (auto it = options.licenses.find(e.sha256); it != options.licenses.end()) {
      e.license = it->second;
    }
    e.id_part = a.kind == "deb" ? a.arch : "";
    out.push_back(std::move(e));
  }
  return out;
}

// One entry of the SBOM: a component and its SPDX id.
struct Entry : SbomComponent {
  std::string id;
};

// The components with their ids, sorted; an id two components would share gets "-2", "-3", ...
std::vector<Entry> entries(std::vector<SbomComponent> components) {
  std::vector<Entry> out;
  out.reserve(components.size());
  for (SbomComponent& c : components) {
    Entry e{std::move(c), ""};
    e.id = spdx_id(e.kind, e.name, e.id_part);
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const Entry& x, const Entry& y) {
    return std::tie(x.kind, x.name, x.id, x.version, x.purl) <
           std::tie(y.kind, y.name, y.id, y.version, y.purl);
  });
  std::set<std::string> taken;
  for (const Entry& e : out) {
    taken.insert(e.id);
  }
  // Two of one id (a wheel in two environments): the later ones get the first free "-N".
  std::string previous;
  for (Entry& e : out) {
    std::string base = e.id;
    if (base == previous) {
      for (int n = 2;; ++n) {
        std::string id = fmt::format("{}-{}", base, n);
        if (taken.insert(id).second) {
          e.id = std::move(id);
          break;
        }
      }
    }
    previous = std::move(base);
  }
  return out;
}

std::string render_spdx(const std::vector<Entry>& all, const SbomOptions& options, std::int64_t created) {
  ordered doc;
  doc["spdxVersion"] = "SPDX-2.3";
  doc["dataLicense"] = "CC0-1.0";
  doc["SPDXID"] = "SPDXRef-DOCUMENT";
  doc["name"] = options.name;
  doc["documentNamespace"] =
      fmt::format("https://spdx.org/spdxdocs/lockstep/{}-{}", options.name, options.subject.hex());
  doc["creationInfo"] = {{"created", oci::rfc3339(created)},
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
  for (const Entry& e : all) {
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
  // SPDX 2.3 (10.1): every LicenseRef- a package uses is declared in the document.
  std::set<std::string> refs;
  for (const auto& p : packages) {
    const std::string declared = p.value("licenseDeclared", "");
    for (std::size_t at = declared.find("LicenseRef-"); at != std::string::npos;
         at = declared.find("LicenseRef-", at + 1)) {
      std::size_t end = at + 11;
      while (end < declared.size() && (std::isalnum(static_cast<unsigned char>(declared[end])) != 0 ||
                                       declared[end] == '.' || declared[end] == '-')) {
        ++end;
      }
      refs.insert(declared.substr(at, end - at));
    }
  }
  if (!refs.empty()) {
    ordered infos = ordered::array();
    for (const std::string& r : refs) {
      infos.push_back(
          {{"licenseId", r},
           {"name", r.substr(11)},
           {"extractedText",
            fmt::format(
                "A license the SPDX License List does not name, declared as '{}' (or a name like it) by "
                "a package's DEP-5 copyright file or METADATA; its text is in that package.",
                r.substr(11))}});
    }
    doc["hasExtractedLicensingInfos"] = std::move(infos);
  }
  doc["packages"] = std::move(packages);
  doc["relationships"] = std::move(relationships);
  return doc.dump() + "\n";
}

std::string render_cyclonedx(const std::vector<Entry>& all, const SbomOptions& options,
                             std::int64_t created) {
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
      {"timestamp", oci::rfc3339(created)}, {"tools", {{"components", {tool}}}}, {"component", subject}};
  ordered components = ordered::array();
  for (const Entry& e : all) {
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

std::string_view sbom_media_type(SbomFormat format) {
  return format == SbomFormat::spdx_json ? "application/spdx+json" : "application/vnd.cyclonedx+json";
}

std::string_view sbom_format_name(SbomFormat format) {
  return format == SbomFormat::spdx_json ? "spdx-json" : "cyclonedx-json";
}

namespace {} // namespace

Result<SbomSubject> read_sbom_subject(std::string_view text, std::string_view what) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return invalid_input("{}: not a JSON document", what);
  }
  SbomSubject out;
  // The digest in a hashes/checksums array: the SHA-256 entry's hex.
  auto sha256_in = [](const nlohmann::json* list, const char* alg_key, const char* alg,
                      const char* value_key) -> std::optional<Digest> {
    if (list == nullptr || !list->is_array()) {
      return std::nullopt;
    }
    for (const auto& h : *list) {
      if (json_string(h, alg_key) == alg && !json_string(h, value_key).empty()) {
        if (auto d = Digest::parse("sha256:" + h[value_key].get<std::string>())) {
          return *d;
        }
      }
    }
    return std::nullopt;
  };
  std::optional<Digest> subject;
  if (doc.contains("spdxVersion")) {
    out.format = SbomFormat::spdx_json;
    const auto packages = doc.find("packages");
    if (packages != doc.end() && packages->is_array()) {
      for (const auto& p : *packages) {
        if (json_string(p, "SPDXID") == "SPDXRef-image") {
          const auto c = p.find("checksums");
          subject = sha256_in(c == p.end() ? nullptr : &*c, "algorithm", "SHA256", "checksumValue");
        }
      }
    }
  } else if (json_string(doc, "bomFormat") == "CycloneDX") {
    out.format = SbomFormat::cyclonedx_json;
    const nlohmann::json* component = nullptr;
    if (auto m = doc.find("metadata"); m != doc.end() && m->is_object()) {
      if (auto c = m->find("component"); c != m->end() && c->is_object()) {
        component = &*c;
      }
    }
    if (component != nullptr) {
      const auto h = component->find("hashes");
      subject = sha256_in(h == component->end() ? nullptr : &*h, "alg", "SHA-256", "content");
    }
  } else {
    return invalid_input("{}: neither an SPDX (spdxVersion) nor a CycloneDX (bomFormat) JSON document", what);
  }
  if (!subject) {
    return invalid_input(
        "{}: the SBOM does not name the digest of the image it describes (as `lockstep sbom` "
        "writes: the SHA-256 of its {})",
        what, out.format == SbomFormat::spdx_json ? "SPDXRef-image package" : "metadata component");
  }
  out.subject = *subject;
  return out;
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
  if (a.kind == "conda" && a.conda) {
    // pkg:conda/NAME@VERSION?build=B&channel=C&subdir=S&type=conda (purl-spec's conda type); the
    // channel by its canonical name ("conda-forge"), or its URL where it has none.
    PackageUrl p;
    p.type = "conda";
    p.name = a.name;
    p.version = a.version;
    const std::string file = a.url.substr(a.url.rfind('/') == std::string::npos ? 0 : a.url.rfind('/') + 1);
    p.qualifiers = {{"build", a.conda->build},
                    {"subdir", a.conda->subdir},
                    {"type", file.ends_with(".tar.bz2") ? "tar.bz2" : "conda"}};
    if (a.repo >= 0 && static_cast<std::size_t>(a.repo) < lock.repos.size()) {
      p.qualifiers["channel"] = conda::canonical_channel(lock.repos[static_cast<std::size_t>(a.repo)].url);
    }
    return p.str();
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

std::string render_sbom(std::vector<SbomComponent> components, SbomFormat format, const SbomOptions& options,
                        std::int64_t created) {
  const std::vector<Entry> all = entries(std::move(components));
  return format == SbomFormat::spdx_json ? render_spdx(all, options, created)
                                         : render_cyclonedx(all, options, created);
}

std::string render_sbom(const Lock& lock, SbomFormat format, const SbomOptions& options) {
  return render_sbom(components_of(lock, options), format, options, lock.epoch);
}

} // namespace lockstep::envspec
