// A lock's conda packages as an explicit file or a conda-lock.yml v1. See conda_export.hpp.
#include "builder/lock/conda_export.hpp"

#include "envspec/spec/spec.hpp"
#include "support/conda/link.hpp"
#include "support/oci/oci.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

namespace lockstep::builder {

namespace {

// The lock's conda artifacts in install order.
std::vector<const envspec::LockedArtifact*> conda_in_order(const envspec::Lock& lock) {
  std::vector<const envspec::LockedArtifact*> condas;
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> depends;
  for (const envspec::LockedArtifact& a : lock.artifacts) {
    if (a.kind == "conda" && a.conda) {
      condas.push_back(&a);
      names.push_back(a.name);
      depends.push_back(a.conda->depends);
    }
  }
  std::vector<const envspec::LockedArtifact*> out;
  for (std::size_t i : conda::install_order(names, depends)) {
    out.push_back(condas[i]);
  }
  return out;
}

// The platform's subdir, as the lock's packages name it ("linux-64"): the first that isn't noarch.
std::string platform_subdir(const std::vector<const envspec::LockedArtifact*>& condas) {
  for (const envspec::LockedArtifact* a : condas) {
    if (a->conda->subdir != "noarch") {
      return a->conda->subdir;
    }
  }
  return condas.empty() ? std::string() : condas.front()->conda->subdir;
}

std::string explicit_text(const envspec::Lock& lock,
                          const std::vector<const envspec::LockedArtifact*>& condas,
                          const CondaExportOptions& options) {
  std::string out = fmt::format("# This file may be used to create an environment using:\n"
                                "# $ conda create --name <env> --file <this file>\n"
                                "# platform: {}\n"
                                "# lockstep export --explicit, from {} (sha256:{})\n"
                                "@EXPLICIT\n",
                                platform_subdir(condas), options.lock_name, envspec::lock_digest(lock).hex());
  for (const envspec::LockedArtifact* a : condas) {
    out += fmt::format("{}#sha256:{}\n", a->url, a->sha256.hex());
  }
  return out;
}

// "python >=3.11,<3.12.0a0" -> ("python", ">=3.11,<3.12.0a0"), as conda-lock splits a dependency.
std::pair<std::string, std::string> split_dependency(const std::string& spec) {
  const std::size_t space = spec.find(' ');
  if (space == std::string::npos) {
    return {spec, ""};
  }
  std::string rest = spec.substr(space + 1);
  while (!rest.empty() && rest.front() == ' ') {
    rest.erase(0, 1);
  }
  return {spec.substr(0, space), rest};
}

// One platform's part of a conda-lock.yml: its lock (the share of a multi-platform lock), its
// subdir, its conda packages in install order.
struct PlatformPart {
  envspec::Lock lock;
  std::string subdir;
  std::vector<const envspec::LockedArtifact*> condas;
};

std::string conda_lock_text(const envspec::Lock& lock, const std::vector<PlatformPart>& parts,
                            const CondaExportOptions& options) {
  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "version" << YAML::Value << 1;
  y << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "content_hash" << YAML::Value << YAML::BeginMap;
  for (const PlatformPart& part : parts) {
    y << YAML::Key << part.subdir << YAML::Value << envspec::lock_digest(part.lock).hex();
  }
  y << YAML::EndMap;
  y << YAML::Key << "channels" << YAML::Value << YAML::BeginSeq;
  for (const envspec::LockedRepo& r : lock.repos) {
    if (r.kind == "conda") {
      y << YAML::BeginMap << YAML::Key << "url" << YAML::Value << r.url << YAML::Key << "used_env_vars"
        << YAML::Value << YAML::Flow << YAML::BeginSeq << YAML::EndSeq << YAML::EndMap;
    }
  }
  y << YAML::EndSeq;
  y << YAML::Key << "platforms" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const PlatformPart& part : parts) {
    y << part.subdir;
  }
  y << YAML::EndSeq;
  y << YAML::Key << "sources" << YAML::Value << YAML::Flow << YAML::BeginSeq << options.spec_name
    << YAML::EndSeq;
  y << YAML::EndMap;
  y << YAML::Key << "package" << YAML::Value << YAML::BeginSeq;
  auto entry = [&](const envspec::LockedArtifact& a, const char* manager, const std::string& md5,
                   const std::string& platform) {
    y << YAML::BeginMap;
    y << YAML::Key << "name" << YAML::Value << a.name;
    y << YAML::Key << "version" << YAML::Value << YAML::DoubleQuoted << a.version;
    y << YAML::Key << "manager" << YAML::Value << manager;
    y << YAML::Key << "platform" << YAML::Value << platform;
    y << YAML::Key << "dependencies" << YAML::Value << YAML::BeginMap;
    if (a.conda) {
      std::vector<std::pair<std::string, std::string>> deps;
      for (const std::string& d : a.conda->depends) {
        deps.push_back(split_dependency(d));
      }
      std::sort(deps.begin(), deps.end());
      for (const auto& [name, constraint] : deps) {
        y << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << constraint;
      }
    }
    y << YAML::EndMap;
    y << YAML::Key << "url" << YAML::Value << a.url;
    y << YAML::Key << "hash" << YAML::Value << YAML::BeginMap;
    if (!md5.empty()) {
      y << YAML::Key << "md5" << YAML::Value << md5;
    }
    y << YAML::Key << "sha256" << YAML::Value << a.sha256.hex() << YAML::EndMap;
    if (a.conda) {
      y << YAML::Key << "build" << YAML::Value << YAML::DoubleQuoted << a.conda->build;
    }
    y << YAML::Key << "category" << YAML::Value << "main";
    y << YAML::Key << "optional" << YAML::Value << false;
    y << YAML::EndMap;
  };
  for (const PlatformPart& part : parts) {
    for (const envspec::LockedArtifact* a : part.condas) {
      entry(*a, "conda", a->conda->md5, part.subdir);
    }
    for (const envspec::LockedArtifact& a : part.lock.artifacts) { // pip after conda, as CEP 37 asks
      if (a.kind == "wheel") {
        entry(a, "pip", "", part.subdir);
      }
    }
  }
  y << YAML::EndSeq << YAML::EndMap;
  return fmt::format("# conda-lock.yml v1 (CEP 37) written by lockstep export --conda-lock from {}\n{}\n",
                     options.lock_name, y.c_str());
}

} // namespace

Result<std::string> export_conda(const envspec::Lock& lock, const CondaExportOptions& options) {
  if (options.format == CondaExportFormat::explicit_file) {
    if (!lock.platforms.empty()) {
      return invalid_input("export: {} is for {}; an explicit file is for one: give --platform",
                           options.lock_name, fmt::join(lock.platforms, ", "));
    }
    const std::vector<const envspec::LockedArtifact*> condas = conda_in_order(lock);
    if (condas.empty()) {
      return invalid_input("export: {} has no conda packages (packages.conda) to export", options.lock_name);
    }
    return explicit_text(lock, condas, options);
  }
  // conda-lock.yml lists every platform's packages, each entry naming its platform's subdir.
  std::vector<PlatformPart> parts;
  parts.reserve(envspec::lock_platforms(lock).size()); // `condas` points into each part's lock
  for (const std::string& platform : envspec::lock_platforms(lock)) {
    PlatformPart& part = parts.emplace_back();
    part.lock = envspec::lock_for_platform(lock, platform);
    part.condas = conda_in_order(part.lock);
    if (part.condas.empty()) {
      return invalid_input("export: {} has no conda packages (packages.conda) to export", options.lock_name);
    }
    part.subdir = lock.platforms.empty() ? platform_subdir(part.condas) : std::string();
    if (part.subdir.empty()) {
      if (const Result<oci::Platform> p = oci::Platform::parse(platform)) {
        part.subdir = envspec::conda_subdir(*p);
      }
    }
  }
  return conda_lock_text(lock, parts, options);
}

} // namespace lockstep::builder
