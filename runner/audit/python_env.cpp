// The Python environment readers (python_env.hpp): conda-meta records read with a SAX parser,
// dist-info and egg-info METADATA headers, pyvenv.cfg.
//
// - A Python environment is read from its records, never by running pip or python: a broken
//   interpreter, a slow import or a different python3 on PATH must not change what is reported.
#include "runner/audit/python_env.hpp"

#include "runner/audit/doctor_text.hpp"
#include "support/base/text.hpp"
#include "support/python/pep508.hpp"
#include "support/python/wheel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace lockstep::runner::doctor_detail {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;

constexpr std::size_t k_metadata_prefix = 256ULL * 1024; // METADATA headers come first
constexpr std::size_t k_conda_meta_limit = 64ULL << 20;  // a conda-meta record lists every file

// The fields of one conda-meta record that a snapshot keeps, read without building the document:
// a record lists every file of its package and can be megabytes.
class CondaMetaFields final : public nlohmann::json_sax<json> {
public:
  std::map<std::string, std::string> values; // name, version, build, channel (strings at the top level)
  std::string error;

  bool null() override { return true; }
  bool boolean(bool /*val*/) override { return true; }
  bool number_integer(number_integer_t /*val*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*val*/) override { return true; }
  bool number_float(number_float_t /*val*/, const string_t& /*s*/) override { return true; }
  bool binary(binary_t& /*val*/) override { return true; }
  bool string(string_t& val) override {
    if (m_depth == 1 && (m_key == "name" || m_key == "version" || m_key == "build" || m_key == "channel")) {
      values[m_key] = val.substr(0, k_max_path + 1);
    }
    return true;
  }
  bool start_object(std::size_t /*elements*/) override { return enter(); }
  bool key(string_t& val) override {
    if (m_depth == 1) {
      m_key = val.substr(0, 16);
    }
    return true;
  }
  bool end_object() override { return leave(); }
  bool start_array(std::size_t /*elements*/) override { return enter(); }
  bool end_array() override { return leave(); }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) override {
    error = fmt::format("not valid JSON (at byte {})", position);
    return false;
  }

private:
  bool enter() {
    if (++m_depth > 64) {
      error = "nested more than 64 levels deep";
      return false;
    }
    return true;
  }
  bool leave() {
    --m_depth;
    return true;
  }
  int m_depth = 0;
  std::string m_key;
};

// Reads the environment's records into `env`; problems become warnings naming the file.
class PythonReader {
public:
  PythonReader(const RootFs& root, Capture& capture) : m_root(root), m_capture(capture) {}

  // The dist-info and egg-info records in `dir`; with `skip` (conda's own), those it names.
  void read_site_dir(const std::string& dir, PythonEnv& env, const std::set<std::string>& conda_names) {
    bool truncated = false;
    const std::optional<std::vector<std::string>> names = m_root.list(dir, truncated);
    if (!names) {
      return;
    }
    if (truncated) {
      warn("{}: more than {} entries; the rest are not read", m_root.shown(dir), k_max_dir_entries);
    }
    for (const std::string& name : *names) {
      if (name.ends_with(".dist-info") && m_root.is_dir(join(dir, name))) {
        read_record(join(dir, name), join(join(dir, name), "METADATA"), "dist-info", env, conda_names);
      } else if (name.ends_with(".egg-info")) {
        const std::string path = join(dir, name);
        read_record(path, m_root.is_dir(path) ? join(path, "PKG-INFO") : path, "egg-info", env, conda_names);
      }
    }
  }

  // conda-meta/*.json; returns the normalised names, so the dist-info of the same packages is skipped.
  std::set<std::string> read_conda_meta(const std::string& prefix, PythonEnv& env) {
    std::set<std::string> names;
    const std::string dir = join(prefix, "conda-meta");
    bool truncated = false;
    const std::optional<std::vector<std::string>> files = m_root.list(dir, truncated);
    if (!files) {
      warn("{}: not a readable directory; no conda packages listed", m_root.shown(dir));
      return names;
    }
    if (truncated) {
      warn("{}: more than {} entries; the rest are not read", m_root.shown(dir), k_max_dir_entries);
    }
    for (const std::string& file : *files) {
      if (!file.ends_with(".json") || !room()) {
        continue;
      }
      const std::string path = join(dir, file);
      Result<std::string> text = m_root.read(path, k_conda_meta_limit);
      if (!text) {
        warn("{}; skipped", text.error().message);
        continue;
      }
      CondaMetaFields fields;
      json::sax_parse(*text, &fields, json::input_format_t::json, true);
      if (!fields.error.empty()) {
        warn("{}: {}; skipped", m_root.shown(path), fields.error);
        continue;
      }
      PythonPackage pkg;
      pkg.from = "conda";
      pkg.name = fields.values["name"];
      pkg.version = fields.values["version"];
      pkg.build = fields.values["build"];
      pkg.channel = fields.values["channel"];
      if (!valid_package_name(pkg.name) || version_token(pkg.version).empty()) {
        warn("{}: no valid \"name\" and \"version\"; skipped", m_root.shown(path));
        continue;
      }
      if (pkg.build.size() > k_max_name || has_controls(pkg.build) || pkg.channel.size() > k_max_path ||
          has_controls(pkg.channel)) {
        warn("{}: \"build\" or \"channel\" is not printable text of bounded length; skipped",
             m_root.shown(path));
        continue;
      }
      names.insert(normalize_project_name(pkg.name));
      env.packages.push_back(std::move(pkg));
    }
    return names;
  }

  // The site-packages (and, for a system prefix, dist-packages) directories of `prefix`.
  std::vector<std::string> site_dirs(const std::string& prefix, bool with_dist_packages) {
    std::vector<std::string> dirs;
    const std::string lib = join(prefix, "lib");
    bool truncated = false;
    const std::optional<std::vector<std::string>> names = m_root.list(lib, truncated);
    if (!names) {
      return dirs;
    }
    for (const std::string& name : *names) {
      if (!name.starts_with("python") && !name.starts_with("pypy")) {
        continue;
      }
      for (const char* leaf : {"site-packages", "dist-packages"}) {
        if (std::string_view(leaf) == "dist-packages" && !with_dist_packages) {
          continue;
        }
        if (const std::string dir = join(join(lib, name), leaf); m_root.is_dir(dir)) {
          dirs.push_back(dir);
        }
      }
    }
    return dirs;
  }

  // "3.11" when `prefix`/lib holds exactly one pythonX.Y directory.
  std::string version_from_lib(const std::string& prefix) {
    bool truncated = false;
    const std::optional<std::vector<std::string>> names = m_root.list(join(prefix, "lib"), truncated);
    std::string found;
    for (const std::string& name : names.value_or(std::vector<std::string>{})) {
      const std::string v = name.starts_with("python") ? three_numbers(name.substr(6)) : std::string();
      if (v.find('.') == std::string::npos) {
        continue;
      }
      if (!found.empty()) {
        return {};
      }
      found = v;
    }
    return found;
  }

private:
  template <typename... Args> void warn(fmt::format_string<Args...> f, Args&&... args) {
    m_capture.warnings.push_back(fmt::format(f, std::forward<Args>(args)...));
  }

  bool room() {
    if (m_count < k_max_packages) {
      return true;
    }
    if (!m_full_warned) {
      warn("more than {} packages; the rest are not listed", k_max_packages);
      m_full_warned = true;
    }
    return false;
  }

  void read_record(const std::string& record, const std::string& metadata, const char* from, PythonEnv& env,
                   const std::set<std::string>& conda_names) {
    if (!room()) {
      return;
    }
    Result<std::string> text = m_root.read(metadata, k_metadata_prefix, false);
    if (!text) {
      warn("{}; skipped", text.error().message);
      return;
    }
    const std::string shown = m_root.shown(metadata);
    Result<std::vector<std::pair<std::string, std::string>>> headers = parse_email_headers(*text, shown);
    if (!headers) {
      warn("{}; skipped", headers.error().message);
      return;
    }
    PythonPackage pkg;
    pkg.from = from;
    for (const auto& [key, value] : *headers) {
      const std::string k = ascii_lower(key);
      if (k == "name" && pkg.name.empty()) {
        pkg.name = value;
      } else if (k == "version" && pkg.version.empty()) {
        pkg.version = value;
      }
    }
    if (!valid_package_name(pkg.name)) {
      warn("{}: no valid Name header; skipped", shown);
      return;
    }
    if (version_token(pkg.version).empty()) {
      warn("{}: no valid Version header; skipped", shown);
      return;
    }
    if (pkg.from == "dist-info") {
      if (Result<std::string> installer = m_root.read(join(record, "INSTALLER"), 4096, false); installer) {
        const std::string_view line = first_line(*installer);
        if (valid_package_name(line)) {
          pkg.installer = std::string(line);
        } else if (!line.empty()) {
          warn("{}: not an installer name; ignored", m_root.shown(join(record, "INSTALLER")));
        }
      }
    }
    // In a conda environment conda's own packages have dist-info too; they are listed once, as conda's.
    if (!conda_names.empty() &&
        (pkg.installer == "conda" || conda_names.count(normalize_project_name(pkg.name)) != 0)) {
      return;
    }
    ++m_count;
    env.packages.push_back(std::move(pkg));
  }

  const RootFs& m_root;
  Capture& m_capture;
  std::size_t m_count = 0;
  bool m_full_warned = false;
};

// pyvenv.cfg's "key = value" lines, keys lowercased.
std::map<std::string, std::string> parse_pyvenv_cfg(std::string_view text) {
  std::map<std::string, std::string> out;
  for (const std::string_view line : text_lines(text)) {
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      continue;
    }
    const std::string key = ascii_lower(trim_chars(line.substr(0, eq), " \t\r"));
    out.emplace(key, trim_chars(line.substr(eq + 1), " \t\r"));
  }
  return out;
}

// Sorts by PEP 503 name, then version, from, installer, build, channel and the name as spelt.
void sort_packages(std::vector<PythonPackage>& packages) {
  std::vector<std::pair<std::string, PythonPackage>> keyed;
  keyed.reserve(packages.size());
  for (PythonPackage& p : packages) {
    keyed.emplace_back(normalize_project_name(p.name), std::move(p));
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) {
    const PythonPackage& a = x.second;
    const PythonPackage& b = y.second;
    return std::tie(x.first, a.version, a.from, a.installer, a.build, a.channel, a.name) <
           std::tie(y.first, b.version, b.from, b.installer, b.build, b.channel, b.name);
  });
  packages.clear();
  for (auto& [key, p] : keyed) {
    packages.push_back(std::move(p));
  }
}

// `path` without trailing slashes ("/" stays).
std::string without_trailing_slash(std::string path) {
  while (path.size() > 1 && path.back() == '/') {
    path.pop_back();
  }
  return path;
}

// Which environment to read: --python, else $VIRTUAL_ENV, else $CONDA_PREFIX. Returns the kind
// ("" for none) and the prefix.
Result<std::pair<std::string, std::string>>
choose_environment(const RootFs& root, const DoctorOptions& options, std::vector<std::string>& warnings) {
  auto usable = [&](std::string_view var, const std::string& value) {
    if (!value.starts_with('/') || value.size() > k_max_path || has_controls(value)) {
      warnings.push_back(fmt::format("{}={} is not an absolute path; no Python environment read", var,
                                     printable_ascii(value, 200)));
      return false;
    }
    if (!root.is_dir(value)) {
      warnings.push_back(fmt::format("{}={}: {} is not a directory; no Python environment read", var, value,
                                     root.shown(value)));
      return false;
    }
    return true;
  };
  if (!options.python_prefix.empty()) {
    std::string prefix = options.python_prefix;
    if (!prefix.starts_with('/')) {
      if (!root.live()) {
        return invalid_input("--python {}: with --host-root the prefix must be an absolute path", prefix);
      }
      prefix = fs::absolute(prefix).lexically_normal().string();
    }
    if (prefix.size() > k_max_path || has_controls(prefix)) {
      return invalid_input("--python: not a usable path");
    }
    prefix = without_trailing_slash(prefix);
    if (!root.is_dir(prefix)) {
      return invalid_input("--python {}: {} is not a directory", prefix, root.shown(prefix));
    }
    if (root.is_dir(join(prefix, "conda-meta"))) {
      return std::pair{std::string("conda"), prefix};
    }
    if (root.exists(join(prefix, "pyvenv.cfg"))) {
      return std::pair{std::string("venv"), prefix};
    }
    return std::pair{std::string("prefix"), prefix};
  }
  if (!options.virtual_env.empty()) {
    return usable("VIRTUAL_ENV", options.virtual_env)
               ? std::pair{std::string("venv"), without_trailing_slash(options.virtual_env)}
               : std::pair{std::string(), std::string()};
  }
  if (!options.conda_prefix.empty()) {
    return usable("CONDA_PREFIX", options.conda_prefix)
               ? std::pair{std::string("conda"), without_trailing_slash(options.conda_prefix)}
               : std::pair{std::string(), std::string()};
  }
  return std::pair{std::string(), std::string()};
}

} // namespace

Result<std::optional<PythonEnv>> read_python(const RootFs& root, const DoctorOptions& options,
                                             Capture& capture) {
  LS_TRY_ASSIGN(const auto chosen, choose_environment(root, options, capture.warnings));
  const auto& [kind, prefix] = chosen;
  if (kind.empty()) {
    return std::optional<PythonEnv>();
  }
  PythonEnv env;
  env.kind = kind;
  env.prefix = prefix;
  PythonReader reader(root, capture);
  std::set<std::string> conda_names;
  if (kind == "venv") {
    const std::string cfg_path = join(prefix, "pyvenv.cfg");
    if (Result<std::string> cfg = root.read(cfg_path, k_small_file); cfg) {
      std::map<std::string, std::string> cfg_values = parse_pyvenv_cfg(*cfg);
      std::string version = cfg_values["version"];
      if (version.empty()) {
        version = cfg_values["version_info"];
      }
      env.version = three_numbers(version);
      capture.python_home = printable_ascii(cfg_values["home"], k_max_path);
      capture.system_site_packages = ascii_lower(cfg_values["include-system-site-packages"]) == "true";
    } else {
      capture.warnings.push_back(
          fmt::format("{}; the venv's Python version is unknown", cfg.error().message));
    }
  } else if (kind == "conda") {
    conda_names = reader.read_conda_meta(prefix, env);
    for (const PythonPackage& pkg : env.packages) {
      if (pkg.name == "python") {
        env.version = pkg.version;
      }
    }
  }
  if (env.version.empty()) {
    env.version = reader.version_from_lib(prefix);
  }
  for (const std::string& dir : reader.site_dirs(prefix, kind == "prefix")) {
    reader.read_site_dir(dir, env, conda_names);
  }
  sort_packages(env.packages);
  return std::optional<PythonEnv>(std::move(env));
}

} // namespace lockstep::runner::doctor_detail
