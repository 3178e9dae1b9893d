// `packages:` (docs/spec.md): apt names and pip requirements, and the project files a pip item
// may name (requirements files, pyproject.toml, environment.yml).
#include "envspec/load/schema_walker.hpp"
#include "support/conda/match_spec.hpp"
#include "support/python/pep508.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

namespace lockstep::envspec::detail {

// `packages: {apt: [NAME[:ARCH][=VERSION]...], pip: [REQUIREMENT... | {requirements: FILE}],
// conda: [MATCHSPEC...]}`.
void SchemaWalker::packages(const Node& v, Packages& out) {
  if (!expect_map(v, "packages", "a map {apt: [...], pip: [...], conda: [...]}")) {
    return;
  }
  for (const MapEntry& e : v.entries) {
    const std::string path = child_path("packages", e.key);
    if (e.key != "apt" && e.key != "pip" && e.key != "conda") {
      unknown_key(e, "packages", m_shapes.packages);
      continue;
    }
    if (!expect_list(e.value, path, "a list of package names")) {
      continue;
    }
    for (std::size_t i = 0; i < e.value.items.size(); ++i) {
      const Node& item = e.value.items[i];
      const std::string ipath = item_path(path, i);
      if (e.key == "pip" && item.is_map()) {
        pip_file(item, ipath, out);
        continue;
      }
      if (e.key == "conda") {
        conda_package(item, ipath, out);
        continue;
      }
      const std::string* s =
          nonempty_string(item, ipath, e.key == "apt" ? "a package name" : "a requirement");
      if (s == nullptr) {
        continue;
      }
      PackageRequest req;
      req.text = *s;
      req.location = item.location;
      if (e.key == "pip") {
        req.name = *s;
        out.pip.push_back(std::move(req));
        continue;
      }
      // Debian policy 5.6.1 (names), 5.6.12 (versions); ':ARCH' as apt-get accepts it; '*' in the
      // version is a glob (NAME=2.18.*+cuda12.1, docs/apt-resolver.md).
      static const std::regex apt_re("([a-z0-9][a-z0-9+.-]+)(:([a-z0-9-]+))?(=([0-9A-Za-z.+~:*-]+))?");
      std::smatch m;
      if (!std::regex_match(*s, m, apt_re)) {
        error(
            item.location, ipath,
            fmt::format("invalid package '{}': expected NAME, NAME=VERSION, NAME=VERSION-GLOB (with '*') or "
                        "NAME:ARCH (lowercase letters, digits and + - .)",
                        *s));
        continue;
      }
      req.name = m[1].str();
      req.arch = m[3].str();
      req.version = m[5].str();
      out.apt.push_back(std::move(req));
    }
  }
}

// `packages.conda[i]`: a MatchSpec, read as conda reads what people type (strict: `numpy 1.2` is
// exact, `numpy=1.2` a prefix, `*.*` refused); the caret points at the byte that is wrong.
void SchemaWalker::conda_package(const Node& item, const std::string& path, Packages& out) {
  const std::string* s = nonempty_string(item, path, "a conda MatchSpec, e.g. numpy>=1.26");
  if (s == nullptr) {
    return;
  }
  conda::ParseResult<conda::MatchSpec> spec = conda::MatchSpec::parse(*s, conda::SpecMode::strict);
  if (!spec) {
    const std::size_t at = std::min(spec.error().offset, s->empty() ? 0 : s->size() - 1);
    error(sub_location(item, at, 1), path,
          fmt::format("invalid conda package '{}': {}", *s, spec.error().message));
    return;
  }
  PackageRequest req;
  req.text = *s;
  req.name = spec->name().str();
  req.location = item.location;
  out.conda.push_back(std::move(req));
}

// `packages.pip[i]` as a map: a file of requirements. {requirements: FILE}, {pyproject: FILE,
// extras: [...]} or {conda-env: FILE}.
void SchemaWalker::pip_file(const Node& item, const std::string& path, Packages& out) {
  if (item.find("pyproject") != nullptr) {
    pyproject_file(item, path, out.pip);
  } else if (item.find("conda-env") != nullptr) {
    conda_env_file(item, path, out);
  } else {
    requirements_file(item, path, out.pip);
  }
}

// Reads the host file named by `key` of `item` (confined like every host path); nullopt after reporting.
std::optional<std::pair<std::string, std::string>>
SchemaWalker::pip_file_text(const MapEntry& file, const std::string& key_path, std::string_view what) {
  const std::string* s = nonempty_string(file.value, key_path, what);
  if (s == nullptr) {
    return std::nullopt;
  }
  const fs::path resolved = resolve_host_path(file.value);
  if (!confined(file.value, key_path, resolved, *s)) {
    return std::nullopt;
  }
  Result<std::string> text = read_file(resolved, 4 << 20);
  if (!text) {
    error(file.value.location, key_path, fmt::format("can't read {}: {}", *s, text.error().message));
    return std::nullopt;
  }
  return std::pair{*s, std::move(*text)};
}

// A pip request read from a project file at `where` (the spec entry that names the file).
PackageRequest SchemaWalker::pip_request(const ImportedRequirement& r, const SourceLocation& where) {
  PackageRequest req;
  req.text = r.text;
  req.name = r.text;
  req.from_file = r.where;
  req.location = where;
  return req;
}

// `{pyproject: FILE, extras: [...]}`: [project].dependencies and the named optional dependencies.
void SchemaWalker::pyproject_file(const Node& item, const std::string& path,
                                  std::vector<PackageRequest>& out) {
  const MapEntry* file = item.find("pyproject");
  std::vector<std::string> extras;
  for (const MapEntry& e : item.entries) {
    if (e.key == "extras") {
      if (!expect_list(e.value, child_path(path, "extras"), "a list of extra names")) {
        return;
      }
      for (std::size_t i = 0; i < e.value.items.size(); ++i) {
        if (const std::string* x = nonempty_string(e.value.items[i], item_path(child_path(path, "extras"), i),
                                                   "an extra name")) {
          extras.push_back(*x);
        }
      }
    } else if (e.key != "pyproject") {
      unknown_key(e, path, m_shapes.pyproject);
      return;
    }
  }
  const std::string key_path = child_path(path, "pyproject");
  auto text = pip_file_text(*file, key_path, "a pyproject.toml");
  if (!text) {
    return;
  }
  Result<std::vector<ImportedRequirement>> reqs = read_pyproject(text->second, text->first, extras);
  if (!reqs) {
    error(file->value.location, key_path, reqs.error().message);
    return;
  }
  for (const ImportedRequirement& r : *reqs) {
    out.push_back(pip_request(r, file->value.location));
  }
}

// `{conda-env: FILE}`: an environment.yml. Its pip: section and the conda packages PyPI has become
// pip requests, those Debian has apt requests; its python pin and CUDA, cuDNN, NCCL and MPI
// packages become `stack:` keys (applied in walk(), after `stack:` is read).
void SchemaWalker::conda_env_file(const Node& item, const std::string& path, Packages& out) {
  const MapEntry* file = item.find("conda-env");
  for (const MapEntry& e : item.entries) {
    if (e.key != "conda-env") {
      unknown_key(e, path, m_shapes.conda_env);
      return;
    }
  }
  const std::string key_path = child_path(path, "conda-env");
  auto text = pip_file_text(*file, key_path, "an environment.yml");
  if (!text) {
    return;
  }
  Result<CondaEnv> env = read_conda_env(text->second, text->first);
  if (!env) {
    error(file->value.location, key_path, env.error().message);
    return;
  }
  for (const ImportedRequirement& r : env->pip) {
    out.pip.push_back(pip_request(r, file->value.location));
  }
  for (const ImportedRequirement& r : env->apt) {
    PackageRequest req;
    req.text = r.text;
    req.name = r.text;
    req.origin = r.where;
    req.location = file->value.location;
    out.apt.push_back(std::move(req));
  }
  m_conda_stack.push_back(PendingStack{std::move(*env), file->value.location, key_path});
}

// `packages.pip[i]: {requirements: FILE}`: a pip requirements file (e.g. `pip freeze` or
// pip-compile --generate-hashes output) whose pins, with their hashes, become requests.
void SchemaWalker::requirements_file(const Node& item, const std::string& path,
                                     std::vector<PackageRequest>& out) {
  const MapEntry* file = item.find("requirements");
  if (file == nullptr) {
    error(item.location, path,
          "expected a requirement string or a map {requirements: FILE}, {pyproject: FILE, extras: [...]} or "
          "{conda-env: FILE}");
    return;
  }
  for (const MapEntry& e : item.entries) {
    if (e.key != "requirements") {
      unknown_key(e, path, m_shapes.requirements);
      return;
    }
  }
  const std::string key_path = child_path(path, "requirements");
  const std::string* s = nonempty_string(file->value, key_path, "a requirements file");
  if (s == nullptr) {
    return;
  }
  const fs::path resolved = resolve_host_path(file->value);
  if (!confined(file->value, key_path, resolved, *s)) {
    return;
  }
  Result<std::string> text = read_file(resolved, 4 << 20);
  if (!text) {
    error(file->value.location, key_path, fmt::format("can't read {}: {}", *s, text.error().message));
    return;
  }
  Result<RequirementsFile> parsed = parse_requirements_txt(*text, *s);
  if (!parsed) {
    error(file->value.location, key_path, parsed.error().message);
    return;
  }
  const bool any_hash = std::any_of(parsed->requirements.begin(), parsed->requirements.end(),
                                    [](const PinnedRequirement& r) { return !r.hashes.empty(); });
  for (const PinnedRequirement& r : parsed->requirements) {
    if ((parsed->require_hashes || any_hash) && r.hashes.empty()) {
      error(file->value.location, key_path,
            fmt::format("{}:{}: {} has no --hash, but the file checks hashes (pip's hash-checking mode "
                        "needs one for every requirement)",
                        *s, r.line, r.requirement.str()));
      continue;
    }
    PackageRequest req;
    req.text = r.requirement.str();
    req.name = req.text;
    for (const Digest& d : r.hashes) {
      req.hashes.push_back(d.hex());
    }
    req.from_file = fmt::format("{}:{}", *s, r.line);
    req.location = file->value.location;
    out.push_back(std::move(req));
  }
}

} // namespace lockstep::envspec::detail
