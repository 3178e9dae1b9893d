#include "builder/lock/base_contents.hpp"

#include "support/base/json.hpp"
#include "support/base/log.hpp"
#include "support/debian/apt_packages.hpp"
#include "support/debian/apt_sources.hpp"
#include "support/oci/image_contents.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <regex>
#include <set>

namespace lockstep::builder {

namespace {

using json = nlohmann::json;

constexpr const char* k_record_ns = "base-metadata";
constexpr const char* k_record_version = "v3";
constexpr std::uint64_t k_max_record = 1ULL << 30;

json to_json(const BaseMetadata& m) {
  return json{{"has_dpkg_status", m.has_dpkg_status},
              {"dpkg_status", m.dpkg_status},
              {"dpkg_arch", m.dpkg_arch},
              {"dpkg_diversions", m.dpkg_diversions},
              {"dpkg_statoverride", m.dpkg_statoverride},
              {"dpkg_lists", m.dpkg_lists},
              {"dpkg_triggers", m.dpkg_triggers},
              {"apt_sources", m.apt_sources},
              {"dist_info", m.dist_info},
              {"dpkg_info_names", m.dpkg_info_names},
              {"symlinks", m.symlinks},
              {"directories", m.directories},
              {"python_headers", m.python_headers},
              {"python_executables", m.python_executables},
              {"config_env", m.config_env},
              {"passwd", m.passwd},
              {"group", m.group},
              {"merged_usr", m.merged_usr},
              {"has_sh", m.has_sh},
              {"has_dpkg", m.has_dpkg}};
}

std::optional<BaseMetadata> from_json(const std::string& text, const Digest& manifest) {
  Result<json> parsed = parse_json(text, "base image metadata record");
  if (!parsed) {
    return std::nullopt;
  }
  try {
    const json& j = *parsed;
    BaseMetadata m;
    m.manifest = manifest;
    m.has_dpkg_status = j.at("has_dpkg_status").get<bool>();
    m.dpkg_status = j.at("dpkg_status").get<std::string>();
    m.dpkg_arch = j.at("dpkg_arch").get<std::string>();
    m.dpkg_diversions = j.at("dpkg_diversions").get<std::string>();
    m.dpkg_statoverride = j.at("dpkg_statoverride").get<std::string>();
    m.dpkg_lists = j.at("dpkg_lists").get<std::map<std::string, std::string>>();
    m.dpkg_triggers = j.at("dpkg_triggers").get<std::map<std::string, std::string>>();
    m.apt_sources = j.at("apt_sources").get<std::map<std::string, std::string>>();
    m.dist_info = j.at("dist_info").get<std::map<std::string, std::string>>();
    m.dpkg_info_names = j.at("dpkg_info_names").get<std::vector<std::string>>();
    m.symlinks = j.at("symlinks").get<std::map<std::string, std::string>>();
    m.directories = j.at("directories").get<std::vector<std::string>>();
    m.python_headers = j.at("python_headers").get<std::map<std::string, std::string>>();
    m.python_executables = j.at("python_executables").get<std::vector<std::string>>();
    m.config_env = j.at("config_env").get<std::vector<std::string>>();
    m.passwd = j.at("passwd").get<std::string>();
    m.group = j.at("group").get<std::string>();
    m.merged_usr = j.at("merged_usr").get<bool>();
    m.has_sh = j.at("has_sh").get<bool>();
    m.has_dpkg = j.at("has_dpkg").get<bool>();
    return m;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::string text_or_empty(const oci::ImageContents& contents, std::string_view path) {
  const std::string* t = contents.text(path);
  return t == nullptr ? std::string() : *t;
}

bool is_file(const oci::ImageContents& contents, std::string_view path) {
  const oci::ImageEntry* e = contents.resolve(path, oci::FollowLast::yes);
  return e != nullptr && e->type == oci::ImageEntry::Type::file;
}

// Everything kept directly under `dir` (with a trailing '/') whose name ends in `suffix`, by the
// rest of its name without the suffix (or by its whole path with `by_path`).
void collect(const oci::ImageContents& contents, std::string_view dir, std::string_view suffix, bool by_path,
             std::map<std::string, std::string>& out) {
  const auto& entries = contents.entries();
  for (auto it = entries.lower_bound(std::string(dir)); it != entries.end(); ++it) {
    const std::string& path = it->first;
    if (path.compare(0, dir.size(), dir) != 0) {
      break;
    }
    std::string_view name = std::string_view(path).substr(dir.size());
    if (name.empty() || name.find('/') != std::string_view::npos || !it->second.text ||
        name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) {
      continue;
    }
    out[by_path ? path : std::string(name.substr(0, name.size() - suffix.size()))] = *it->second.text;
  }
}

// The config's Env, where it is a list of strings.
std::vector<std::string> config_env_of(const json& config) {
  std::vector<std::string> out;
  const json* env = nullptr;
  if (config.is_object() && config.contains("config") && config["config"].is_object() &&
      config["config"].contains("Env") && config["config"]["Env"].is_array()) {
    env = &config["config"]["Env"];
  }
  if (env != nullptr) {
    for (const json& e : *env) {
      if (e.is_string()) {
        out.push_back(e.get<std::string>());
      }
    }
  }
  return out;
}

// python3 or python3.N.
bool is_python_name(std::string_view name) {
  if (name == "python3") {
    return true;
  }
  if (name.substr(0, 8) != "python3." || name.size() == 8) {
    return false;
  }
  return std::all_of(name.begin() + 8, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

BaseMetadata metadata_of(const oci::ImageContents& contents, const Digest& manifest, const json& config) {
  BaseMetadata m;
  m.manifest = manifest;
  m.config_env = config_env_of(config);
  const std::string* status = contents.text("var/lib/dpkg/status");
  m.has_dpkg_status = status != nullptr;
  if (status != nullptr) {
    m.dpkg_status = *status;
  }
  m.dpkg_arch = text_or_empty(contents, "var/lib/dpkg/arch");
  m.dpkg_diversions = text_or_empty(contents, "var/lib/dpkg/diversions");
  m.dpkg_statoverride = text_or_empty(contents, "var/lib/dpkg/statoverride");
  collect(contents, "var/lib/dpkg/info/", ".list", false, m.dpkg_lists);
  collect(contents, "var/lib/dpkg/triggers/", "", false, m.dpkg_triggers);
  if (const std::string* t = contents.text("etc/apt/sources.list")) {
    m.apt_sources["etc/apt/sources.list"] = *t;
  }
  collect(contents, "etc/apt/sources.list.d/", ".list", true, m.apt_sources);
  collect(contents, "etc/apt/sources.list.d/", ".sources", true, m.apt_sources);
  for (const auto& [path, entry] : contents.entries()) {
    constexpr std::string_view metadata = ".dist-info/METADATA";
    if (entry.text && path.size() > metadata.size() &&
        path.compare(path.size() - metadata.size(), metadata.size(), metadata) == 0) {
      m.dist_info[path.substr(0, path.size() - std::string_view("/METADATA").size())] = *entry.text;
    }
  }
  m.passwd = text_or_empty(contents, "etc/passwd");
  m.group = text_or_empty(contents, "etc/group");
  constexpr std::string_view info = "var/lib/dpkg/info/";
  for (const auto& [path, entry] : contents.entries()) {
    if (entry.type == oci::ImageEntry::Type::symlink) {
      m.symlinks[path] = entry.link_target;
    } else if (entry.type == oci::ImageEntry::Type::directory) {
      m.directories.push_back(path);
    } else if (entry.type == oci::ImageEntry::Type::file) {
      const std::size_t slash = path.rfind('/');
      const std::string_view name = std::string_view(path).substr(slash == std::string::npos ? 0 : slash + 1);
      if (is_python_name(name)) {
        m.python_executables.push_back(path);
      } else if (name == "patchlevel.h" && entry.text) {
        m.python_headers[path] = *entry.text;
      }
    }
    if (path.compare(0, info.size(), info) == 0 && path.find('/', info.size()) == std::string::npos) {
      m.dpkg_info_names.push_back(path.substr(info.size()));
    }
  }
  m.merged_usr = true;
  for (const char* dir : {"bin", "sbin", "lib"}) {
    auto it = m.symlinks.find(dir);
    m.merged_usr = m.merged_usr && it != m.symlinks.end() &&
                   (it->second == std::string("usr/") + dir || it->second == std::string("/usr/") + dir);
  }
  m.has_sh = is_file(contents, "bin/sh");
  m.has_dpkg = is_file(contents, "usr/bin/dpkg");
  return m;
}

// Records `m` for its manifest. The record is an optimisation: failing to write it costs a re-read.
void remember(const BaseMetadata& m, const BlobStore& store, const std::string& key) {
  if (auto blob = store.put(to_json(m).dump())) {
    if (auto r = store.put_record(k_record_ns, key, blob->digest.str()); !r) {
      log::debug("can't record the base image's metadata: {}", r.error().message);
    }
  }
}

} // namespace

std::optional<BaseMetadata> cached_base_metadata(const Digest& manifest, const BlobStore& store) {
  if (auto record = store.get_record(k_record_ns, manifest.hex() + "-" + k_record_version)) {
    if (auto digest = Digest::parse(*record)) {
      if (auto text = store.read(*digest, k_max_record)) {
        return from_json(*text, manifest);
      }
    }
  }
  return std::nullopt;
}

Result<BaseMetadata> read_base_metadata(const OpenedBase& base, const BlobStore& store) {
  const Digest& manifest = base.image.manifest_digest;
  const std::string key = manifest.hex() + "-" + k_record_version;
  if (auto cached = cached_base_metadata(manifest, store)) {
    return std::move(*cached);
  }
  log::Timer timer("read base image");
  oci::ContentsOptions options;
  options.digests = false;
  LS_TRY_ASSIGN(oci::ImageContents contents,
                oci::read_opened_image(*base.source, base.image, base.what, options));
  BaseMetadata m = metadata_of(contents, manifest, base.image.config);
  remember(m, store, key);
  return m;
}

Result<BaseMetadata> read_stored_base_metadata(const oci::OpenedImage& image, const BlobStore& store,
                                               const std::string& what) {
  const Digest& manifest = image.manifest_digest;
  if (auto cached = cached_base_metadata(manifest, store)) {
    return std::move(*cached);
  }
  log::Timer timer("read base image");
  oci::ContentsOptions options;
  options.digests = false;
  oci::ImageContents contents;
  contents.what = what;
  for (const oci::Descriptor& layer : image.manifest.layers) {
    LS_TRY(oci::apply_layer_to_contents(contents, store.blob_path(layer.digest),
                                        fmt::format("{}: layer {}", what, layer.digest.str()), options));
  }
  BaseMetadata m = metadata_of(contents, manifest, image.config);
  remember(m, store, manifest.hex() + "-" + k_record_version);
  return m;
}

std::string resolve_in_base(const BaseMetadata& base, const std::string& path) {
  std::vector<std::string> parts;
  std::string rest = path.substr(1);
  for (int hops = 0; hops < 40;) {
    const std::size_t slash = rest.find('/');
    if (slash == std::string::npos) {
      break;
    }
    parts.push_back(rest.substr(0, slash));
    rest = rest.substr(slash + 1);
    std::string joined;
    for (const std::string& p : parts) {
      joined += (joined.empty() ? "" : "/") + p;
    }
    auto link = base.symlinks.find(joined);
    if (link == base.symlinks.end()) {
      continue;
    }
    ++hops;
    const std::string& target = link->second;
    parts.pop_back();
    if (target.starts_with("/")) {
      parts.clear();
    }
    std::string t = target;
    while (!t.empty()) {
      const std::size_t s2 = t.find('/');
      const std::string c = t.substr(0, s2);
      t = s2 == std::string::npos ? std::string() : t.substr(s2 + 1);
      if (c.empty() || c == ".") {
        continue;
      }
      if (c == "..") {
        if (!parts.empty()) {
          parts.pop_back();
        }
        continue;
      }
      parts.push_back(c);
    }
  }
  std::string out;
  for (const std::string& p : parts) {
    out += p + "/";
  }
  return out + rest;
}

// "3.11.2", "3.13.0rc1", "3.12.0~b1" (Debian's upstream versions and CPython's PY_VERSION) as the
// PEP 440 python_full_version of X.Y `version`; nullopt when it is not X.Y[.Z] of that version.
std::optional<std::string> python_full_version(const std::string& text, const std::string& version) {
  static const std::regex full_re(R"(([0-9]+)\.([0-9]+)(\.([0-9]+))?(~?(a|b|rc)([0-9]+))?.*)");
  std::smatch m;
  if (!std::regex_match(text, m, full_re) || m[1].str() + "." + m[2].str() != version) {
    return std::nullopt;
  }
  return version + "." + (m[4].matched ? m[4].str() : "0") +
         (m[5].matched ? m[6].str() + m[7].str() : std::string());
}

namespace {

// "a/b/../c/./d" -> "a/c/d" (relative to the root; ".." stops at the root).
std::string normalise_in_root(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = path.find('/', i);
    j = j == std::string::npos ? path.size() : j;
    const std::string c = path.substr(i, j - i);
    if (c == "..") {
      if (!parts.empty()) {
        parts.pop_back();
      }
    } else if (!c.empty() && c != ".") {
      parts.push_back(c);
    }
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, "/"));
}

std::string parent_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

} // namespace

Result<BasePython> find_base_python(const BaseMetadata& base, const std::string& interpreter) {
  BasePython t;
  t.interpreter = interpreter;
  // Follow the path's links (parents and the file itself) through the base.
  std::string path = interpreter;
  std::string resolved;
  for (int hops = 0;; ++hops) {
    resolved = normalise_in_root(resolve_in_base(base, path));
    auto link = base.symlinks.find(resolved);
    if (link == base.symlinks.end()) {
      break;
    }
    if (hops == 40) {
      return invalid_input("base.python {}: more than 40 symbolic links in the base image", interpreter);
    }
    const std::string& to = link->second;
    path = "/" + normalise_in_root(to.starts_with("/") ? to : parent_of(resolved) + "/" + to);
  }
  const std::string shown =
      "/" + resolved == interpreter ? interpreter : interpreter + " (/" + resolved + ")";
  if (!std::binary_search(base.python_executables.begin(), base.python_executables.end(), resolved)) {
    std::vector<std::string> found;
    for (const std::string& p : base.python_executables) {
      found.push_back("/" + p);
    }
    return invalid_input("base.python {} is not a python3 or python3.N file in the base image; {}", shown,
                         found.empty() ? std::string("the base has none")
                                       : fmt::format("the base has {}", fmt::join(found, ", ")));
  }
  const std::string bin = parent_of(resolved);
  if (bin != "bin" && !bin.ends_with("/bin")) {
    return invalid_input(
        "base.python {}: expected an interpreter in a PREFIX/bin directory, as CPython installs it", shown);
  }
  const std::string prefix = parent_of(bin);
  const std::string include = (prefix.empty() ? "" : prefix + "/") + "include/";
  // X.Y from the file's name, else from the prefix's one include/python3.N.
  const std::string name = resolved.substr(resolved.rfind('/') + 1);
  std::string version = name.size() > 6 ? name.substr(6) : std::string();
  if (version.find('.') == std::string::npos) {
    std::vector<std::string> versions;
    for (const auto& [header, text] : base.python_headers) {
      if (header.starts_with(include + "python3.") && header.ends_with("/patchlevel.h")) {
        const std::string dir = header.substr(include.size(), header.size() - include.size() - 13);
        if (dir.find('/') == std::string::npos) {
          versions.push_back(dir.substr(6));
        }
      }
    }
    if (versions.size() != 1) {
      return invalid_input(
          "base.python {}: can't tell which Python 3 it is: name python3.N itself (e.g. /{}.11)", shown,
          resolved);
    }
    version = versions.front();
  }
  t.version = version;
  const std::string header = include + "python" + version + "/patchlevel.h";
  std::optional<std::string> full;
  std::string from;
  if (auto h = base.python_headers.find(header); h != base.python_headers.end()) {
    static const std::regex py_version_re(R"(#define[ \t]+PY_VERSION[ \t]+"([^"]+)\")");
    std::smatch m;
    if (std::regex_search(h->second, m, py_version_re)) {
      full = python_full_version(m[1].str(), version);
      from = "/" + header;
    }
  }
  if (!full) {
    for (const std::string& e : base.config_env) {
      if (e.starts_with("PYTHON_VERSION=")) {
        full = python_full_version(e.substr(15), version);
        from = "the config's " + e;
      }
    }
  }
  if (!full) {
    return invalid_input("base.python {}: can't tell its full version: the base image has no /{} with its "
                         "PY_VERSION, and its config sets no PYTHON_VERSION={}.N",
                         shown, header, version);
  }
  t.full_version = *full;
  t.from = from;
  t.file = resolved;
  t.prefix = prefix;
  t.bin = bin;
  t.site = (prefix.empty() ? "" : prefix + "/") + "lib/python" + version + "/site-packages";
  return t;
}

Result<envspec::Lock> lock_with_base_packages(const envspec::Lock& lock, const BaseMetadata& base) {
  envspec::Lock merged = lock;
  if (!base.has_dpkg_status) {
    return merged;
  }
  LS_TRY_ASSIGN(std::vector<InstalledPackage> installed,
                parse_dpkg_status(base.dpkg_status, "base image: /var/lib/dpkg/status"));
  std::set<std::pair<std::string, std::string>> locked;
  for (const envspec::LockedArtifact& a : lock.artifacts) {
    if (a.kind == "deb") {
      locked.emplace(a.name, a.arch);
    }
  }
  for (const InstalledPackage& i : installed) {
    if (!i.installed() || locked.count({i.package.name, i.package.architecture}) != 0) {
      continue;
    }
    envspec::LockedArtifact a;
    a.kind = "deb";
    a.name = i.package.name;
    a.version = i.package.version.str();
    a.arch = i.package.architecture;
    a.reason = "installed in the base image";
    merged.artifacts.push_back(std::move(a));
  }
  return merged;
}

Result<envspec::StackContext> stack_context_over_base(const envspec::Spec& spec, const BaseMetadata& base,
                                                      const std::string& base_name) {
  envspec::StackContext ctx = envspec::stack_context(spec);
  ctx.base_name = base_name;
  if (!spec.base.python.empty()) {
    LS_TRY_ASSIGN(BasePython python, find_base_python(base, spec.base.python));
    ctx.base_python = python.version;
    ctx.base_python_path = spec.base.python;
  }
  if (!base.has_dpkg_status) {
    return ctx;
  }
  LS_TRY_ASSIGN(std::vector<InstalledPackage> installed,
                parse_dpkg_status(base.dpkg_status, base_name + ": /var/lib/dpkg/status"));
  // "cuda-cudart-12-4" -> (12, 4); "python3.10" -> (3, 10).
  const auto numbers = [](std::string_view rest, char sep) -> std::optional<std::pair<int, int>> {
    const std::size_t at = rest.find(sep);
    if (at == std::string_view::npos || at == 0 || at + 1 == rest.size() ||
        rest.find_first_not_of("0123456789", 0) != at ||
        rest.find_first_not_of("0123456789", at + 1) != std::string_view::npos || rest.size() > 12) {
      return std::nullopt;
    }
    return std::pair{std::stoi(std::string(rest.substr(0, at))), std::stoi(std::string(rest.substr(at + 1)))};
  };
  std::optional<std::pair<int, int>> cuda;
  std::optional<std::pair<int, int>> python;
  for (const InstalledPackage& i : installed) {
    if (!i.installed()) {
      continue;
    }
    const std::string& name = i.package.name;
    if (name.starts_with("cuda-cudart-")) {
      if (auto v = numbers(std::string_view(name).substr(12), '-'); v && (!cuda || *v > *cuda)) {
        cuda = v;
        ctx.base_cuda = fmt::format("{}.{}", v->first, v->second);
        ctx.base_cuda_package = name + " " + i.package.version.str();
      }
    } else if (name.starts_with("python3.") && spec.base.python.empty()) {
      if (auto v = numbers(std::string_view(name).substr(6), '.'); v && (!python || *v > *python)) {
        python = v;
        ctx.base_python = fmt::format("{}.{}", v->first, v->second);
      }
    }
  }
  return ctx;
}

namespace {

// "http://host/path/" -> "host/path": mirrors over http and https are the same repository.
std::string uri_key(std::string uri) {
  if (const std::size_t scheme = uri.find("://"); scheme != std::string::npos) {
    uri.erase(0, scheme + 3);
  }
  while (!uri.empty() && uri.back() == '/') {
    uri.pop_back();
  }
  return uri;
}

// The suites of a spec repository (a flat one has none).
std::vector<std::string> suites_of(const envspec::Repo& repo) {
  if (repo.flat || !repo.suites.empty()) {
    return repo.flat ? std::vector<std::string>() : repo.suites;
  }
  return repo.suite.empty() ? std::vector<std::string>() : std::vector<std::string>{repo.suite};
}

// The `repos` entry that would add `s`.
std::string repos_entry(const AptSource& s) {
  const std::string keyring =
      s.signed_by.empty() ? std::string("KEYRING") : s.signed_by.substr(s.signed_by.rfind('/') + 1);
  if (s.suite.ends_with("/")) {
    const std::string url = s.suite == "/" ? s.uri : s.uri + (s.uri.ends_with("/") ? "" : "/") + s.suite;
    return fmt::format("{{apt: {}, flat: true, keyring: {}}}", url, keyring);
  }
  return fmt::format("{{apt: {}, suite: {}, components: [{}], keyring: {}}}", s.uri, s.suite,
                     fmt::join(s.components, ", "), keyring);
}

} // namespace

std::vector<std::string> sources_the_spec_lacks(const envspec::Spec& spec, const BaseMetadata& base) {
  std::vector<std::string> out;
  for (const auto& [path, text] : base.apt_sources) {
    const std::string what = "/" + path;
    auto sources =
        path.ends_with(".sources") ? parse_sources_deb822(text, what) : parse_sources_list(text, what);
    if (!sources) {
      out.push_back(fmt::format("the base image's {} can't be read: {}", what, sources.error().message));
      continue;
    }
    for (const AptSource& s : *sources) {
      if (s.type != "deb") {
        continue;
      }
      std::set<std::string> covered;
      bool found = false;
      for (const envspec::Repo& r : spec.repos) {
        if (r.kind != envspec::Repo::Kind::apt) {
          continue;
        }
        const std::vector<std::string> suites = suites_of(r);
        const bool same = s.suite.ends_with("/")
                              ? uri_key(r.url) == uri_key(s.uri + "/" + s.suite)
                              : std::find(suites.begin(), suites.end(), s.suite) != suites.end();
        if (same) {
          found = true;
          covered.insert(r.components.begin(), r.components.end());
        }
      }
      std::vector<std::string> missing;
      for (const std::string& c : s.components) {
        if (covered.count(c) == 0) {
          missing.push_back(c);
        }
      }
      if (found && missing.empty()) {
        continue;
      }
      const std::string lacks = found ? fmt::format("whose component{} {} the spec's repos lack",
                                                    missing.size() == 1 ? "" : "s", fmt::join(missing, ", "))
                                      : std::string("which the spec's repos lack");
      out.push_back(fmt::format("the base image's {}:{} has `{}`, {} (lockstep never uses a base's apt "
                                "sources on its own); to install from it, add to repos:\n  - {}",
                                what, s.at, s.line, lacks, repos_entry(s)));
    }
  }
  return out;
}

} // namespace lockstep::builder
