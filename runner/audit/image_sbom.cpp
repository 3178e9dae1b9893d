// The SBOM of an image from its package databases: see image_sbom.hpp.
#include "runner/audit/image_sbom.hpp"

#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/base/version.hpp"
#include "support/conda/match_spec.hpp"
#include "support/debian/copyright.hpp"
#include "support/python/pep508.hpp"
#include "support/python/wheel.hpp"
#include "support/supplychain/purl.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace lockstep::runner {

namespace {

// A value of os-release ("KEY=value" or KEY="value"), "" when absent.
std::string os_release_value(std::string_view text, std::string_view key) {
  std::string out;
  for_each_line(text, [&](std::string_view line) {
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == '=') {
      std::string_view v = trim(line.substr(key.size() + 1));
      if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
        v = v.substr(1, v.size() - 2);
      }
      out = std::string(v);
    }
    return true;
  });
  return out;
}

// True for a purl namespace or qualifier value lockstep writes as it found it: [a-z0-9.+-]{1,64}.
bool plain_token(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-';
  });
}

// The purl vendor and distro of the image's debs, from os-release: ("debian", "debian-12"),
// ("ubuntu", "ubuntu-22.04"); a testing or unstable Debian (no VERSION_ID) by its codename; a
// derivative by its own ID. ("debian", "") when the image says nothing usable.
std::pair<std::string, std::string> deb_distro(const ImageContents& contents) {
  const std::string* text = contents.text("etc/os-release");
  if (text == nullptr) {
    text = contents.text("usr/lib/os-release");
  }
  if (text == nullptr) {
    return {"debian", ""};
  }
  const std::string id = os_release_value(*text, "ID");
  const std::string version = os_release_value(*text, "VERSION_ID");
  const std::string vendor = plain_token(id) ? id : "debian";
  if (plain_token(version)) {
    return {vendor, vendor + "-" + version};
  }
  const std::string codename = os_release_value(*text, "VERSION_CODENAME");
  return {vendor, plain_token(codename) ? vendor + "-" + codename : ""};
}

// A conda package's channel by its canonical name ("conda-forge"), from its record's channel or
// URL, without the subdir; "" when neither says.
std::string conda_channel(const InstalledConda& c) {
  std::string channel = c.channel;
  if (channel.empty() && !c.url.empty()) {
    channel = c.url.substr(0, c.url.rfind('/') == std::string::npos ? 0 : c.url.rfind('/'));
  }
  if (!c.subdir.empty() && channel.ends_with("/" + c.subdir)) {
    channel.resize(channel.size() - c.subdir.size() - 1);
  }
  return channel.empty() ? channel : conda::canonical_channel(channel);
}

} // namespace

std::vector<envspec::SbomComponent> scanned_components(const ImageContents& contents,
                                                       const ImagePackages& packages) {
  std::vector<envspec::SbomComponent> out;
  const auto [vendor, distro] = deb_distro(contents);
  for (const InstalledDeb& d : packages.debs) {
    if (!d.installed()) {
      continue; // removed, or half-installed: dpkg-query -W lists it, but nothing of it is in use
    }
    envspec::SbomComponent c;
    c.kind = "deb";
    c.name = d.name;
    c.version = d.version;
    c.purl = deb_purl(vendor, d.name, d.version, d.arch, distro);
    if (const std::string* copyright = contents.text("usr/share/doc/" + d.name + "/copyright")) {
      c.license = dep5_license(*copyright);
    }
    c.id_part = d.arch;
    out.push_back(std::move(c));
  }
  for (const InstalledDist& d : packages.dists) {
    if (d.from_deb) {
      continue; // the deb that installed it is listed
    }
    envspec::SbomComponent c;
    c.kind = "wheel";
    c.name = d.project;
    c.version = d.version;
    c.purl = pypi_purl(d.project, d.version);
    if (const std::string* metadata = contents.text(d.dir + "/METADATA")) {
      c.license = metadata_license(*metadata);
    }
    out.push_back(std::move(c));
  }
  for (const InstalledConda& d : packages.condas) {
    envspec::SbomComponent c;
    c.kind = "conda";
    c.name = d.name;
    c.version = d.version;
    PackageUrl p;
    p.type = "conda";
    p.name = d.name;
    p.version = d.version;
    p.qualifiers["build"] = d.build;
    if (!d.subdir.empty()) {
      p.qualifiers["subdir"] = d.subdir;
    }
    if (const std::string channel = conda_channel(d); !channel.empty()) {
      p.qualifiers["channel"] = channel;
    }
    if (!d.url.empty()) {
      p.qualifiers["type"] = d.url.ends_with(".tar.bz2") ? "tar.bz2" : "conda";
    }
    c.purl = p.str();
    c.sha256 = d.sha256;
    c.url = d.url.find("://") != std::string::npos ? d.url : "";
    c.id_part = d.build;
    out.push_back(std::move(c));
  }
  return out;
}

Result<ScannedSbom> scan_image_sbom(const ImageArg& image, const std::string& what,
                                    envspec::SbomFormat format, const std::string& name,
                                    std::int64_t created) {
  if (image.kind == ImageArg::Kind::directory) {
    return invalid_input("{}: a root directory has no digest for an SBOM to describe; give the image (an OCI "
                         "layout, an archive, docker://, a SIF)",
                         what);
  }
  ContentsOptions options;
  options.digests = false; // only the package databases are read
  log::Timer t("sbom: read the image's package databases");
  LS_TRY_ASSIGN(const ImageContents contents, read_image_contents(image, options));
  LS_TRY_ASSIGN(const ImagePackages packages, image_packages(contents));
  t.stop();
  if (!contents.digest) {
    return invalid_input("{}: the image has no digest for an SBOM to describe", what);
  }
  ScannedSbom out;
  std::vector<envspec::SbomComponent> components = scanned_components(contents, packages);
  for (const envspec::SbomComponent& c : components) {
    (c.kind == "deb" ? out.debs : c.kind == "wheel" ? out.wheels : out.condas) += 1;
  }
  envspec::SbomOptions sbom;
  sbom.name = name.empty() ? what : name;
  sbom.subject = *contents.digest;
  sbom.version = std::string(k_version);
  out.text = envspec::render_sbom(std::move(components), format, sbom, created);
  return out;
}

} // namespace lockstep::runner
