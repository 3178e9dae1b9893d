#include "support/conda/package_info.hpp"

#include "support/base/json.hpp"
#include "support/base/text.hpp"
#include "support/codec/digest.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <utility>

namespace lockstep::conda {

namespace {

using nlohmann::json;

/// Timestamps at or below this are seconds, above it milliseconds (the rule of repodata.cpp).
constexpr std::uint64_t k_max_seconds = 253'402'300'799ULL;

constexpr std::array<std::string_view, 35> k_python_keywords = {
    "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
    "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
    "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
    "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};

/// The parsed JSON of info/NAME, bounded; nullopt when the package has no such file.
Result<std::optional<json>> info_json(const std::map<std::string, std::string, std::less<>>& info,
                                      std::string_view name, const std::string& what,
                                      const PackageLimits& limits) {
  auto it = info.find(name);
  if (it == info.end()) {
    return std::optional<json>();
  }
  const std::string where = what + ": info/" + std::string(name);
  if (it->second.size() > limits.max_info_file) {
    return invalid_input("{} is {} bytes, more than the {} lockstep reads", where, it->second.size(),
                         limits.max_info_file);
  }
  LS_TRY_ASSIGN(json value, parse_json(it->second, where, limits.max_json_depth));
  if (!value.is_object()) {
    return invalid_input("{} is not a JSON object", where);
  }
  return std::optional<json>(std::move(value));
}

/// A string field: "" when absent or null; an error when of another type.
Result<std::string> string_field(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::string();
  }
  if (!it->is_string()) {
    return invalid_input("{}: '{}' is not a string", where, key);
  }
  return it->get<std::string>();
}

/// A list of strings: empty when absent or null.
Result<std::vector<std::string>> strings_field(const json& obj, const char* key, const std::string& where) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return out;
  }
  if (!it->is_array()) {
    return invalid_input("{}: '{}' is not a list", where, key);
  }
  for (const json& v : *it) {
    if (!v.is_string()) {
      return invalid_input("{}: '{}' holds something other than a string", where, key);
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

/// An unsigned integer field; `fallback` when absent.
Result<std::uint64_t> unsigned_field(const json& obj, const char* key, std::uint64_t fallback,
                                     const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return fallback;
  }
  if (!it->is_number_unsigned()) {
    return invalid_input("{}: '{}' is not a non-negative integer", where, key);
  }
  return it->get<std::uint64_t>();
}

/// "python", "generic", true (generic), false/null/absent (none).
Result<NoArch> noarch_of(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null() || (it->is_boolean() && !it->get<bool>())) {
    return NoArch::none;
  }
  if (it->is_boolean()) {
    return NoArch::generic;
  }
  if (it->is_string() && it->get<std::string>() == "python") {
    return NoArch::python;
  }
  if (it->is_string() && it->get<std::string>() == "generic") {
    return NoArch::generic;
  }
  return invalid_input("{}: '{}' is neither \"python\" nor \"generic\"", where, key);
}

Result<IndexJson> parse_index(const json& obj, const std::string& where) {
  IndexJson idx;
  LS_TRY_ASSIGN(idx.name, string_field(obj, "name", where));
  LS_TRY_ASSIGN(idx.version, string_field(obj, "version", where));
  LS_TRY_ASSIGN(idx.build, string_field(obj, "build", where));
  if (idx.name.empty() || idx.version.empty() || idx.build.empty()) {
    return invalid_input("{}: name, version and build are required", where);
  }
  LS_TRY_ASSIGN(idx.build_number, unsigned_field(obj, "build_number", 0, where));
  LS_TRY_ASSIGN(idx.depends, strings_field(obj, "depends", where));
  LS_TRY_ASSIGN(idx.constrains, strings_field(obj, "constrains", where));
  auto features = obj.find("track_features");
  if (features != obj.end() && features->is_array()) {
    LS_TRY_ASSIGN(idx.track_features, strings_field(obj, "track_features", where));
  } else {
    LS_TRY_ASSIGN(std::string text, string_field(obj, "track_features", where));
    std::size_t i = 0;
    while (i < text.size()) {
      const std::size_t j = std::min(text.find_first_of(" ,", i), text.size());
      if (j > i) {
        idx.track_features.push_back(text.substr(i, j - i));
      }
      i = j + 1;
    }
  }
  LS_TRY_ASSIGN(idx.noarch, noarch_of(obj, "noarch", where));
  LS_TRY_ASSIGN(idx.subdir, string_field(obj, "subdir", where));
  LS_TRY_ASSIGN(idx.arch, string_field(obj, "arch", where));
  LS_TRY_ASSIGN(idx.platform, string_field(obj, "platform", where));
  LS_TRY_ASSIGN(idx.license, string_field(obj, "license", where));
  LS_TRY_ASSIGN(idx.license_family, string_field(obj, "license_family", where));
  LS_TRY_ASSIGN(std::uint64_t ts, unsigned_field(obj, "timestamp", 0, where));
  idx.timestamp_ms = ts <= k_max_seconds ? ts * 1000 : ts;
  LS_TRY_ASSIGN(idx.python_site_packages_path, string_field(obj, "python_site_packages_path", where));
  return idx;
}

/// The path of a paths.json or legacy entry, checked to stay inside the prefix and out of the
/// directories conda itself owns.
Result<void> check_entry_path(std::string_view path, const std::string& where, const PackageLimits& limits) {
  if (!is_clean_relative_path(path, limits.max_path)) {
    const bool escapes = path.starts_with('/') || path == ".." || path.starts_with("../") ||
                         path.find("/../") != std::string_view::npos || path.ends_with("/..");
    return invalid_input("{}: '{}' {}; refusing the package", where, printable_ascii(path, 300),
                         escapes ? "escapes the prefix" : "is not a clean relative path");
  }
  if (path == "info" || path.starts_with("info/") || path == "conda-meta" ||
      path.starts_with("conda-meta/")) {
    return invalid_input("{}: '{}' lies in {}/, which a package may not install into (CEP 34)", where, path,
                         path.substr(0, path.find('/')));
  }
  return {};
}

Result<PathsEntry> parse_paths_entry(const json& e, const std::string& where, const PackageLimits& limits) {
  if (!e.is_object()) {
    return invalid_input("{}: an entry of 'paths' is not an object", where);
  }
  PathsEntry out;
  LS_TRY_ASSIGN(out.path, string_field(e, "_path", where));
  LS_TRY(check_entry_path(out.path, where, limits));
  const std::string at = where + ": '" + out.path + "'";
  LS_TRY_ASSIGN(std::string type, string_field(e, "path_type", at));
  if (type == "softlink") {
    out.type = PathType::softlink;
  } else if (type == "directory") {
    out.type = PathType::directory;
  } else if (type != "hardlink" && !type.empty()) {
    return invalid_input("{}: path_type '{}' is not hardlink, softlink or directory", at,
                         printable_ascii(type, 40));
  }
  LS_TRY_ASSIGN(std::string mode, string_field(e, "file_mode", at));
  if (mode == "binary") {
    out.file_mode = FileMode::binary;
  } else if (mode != "text" && !mode.empty()) {
    return invalid_input("{}: file_mode '{}' is neither text nor binary", at, printable_ascii(mode, 40));
  }
  LS_TRY_ASSIGN(out.prefix_placeholder, string_field(e, "prefix_placeholder", at));
  if (out.prefix_placeholder.find('\0') != std::string::npos ||
      out.prefix_placeholder.size() > limits.max_path) {
    return invalid_input("{}: the prefix placeholder holds a NUL byte or is too long", at);
  }
  if (auto nl = e.find("no_link"); nl != e.end() && !nl->is_null()) {
    if (!nl->is_boolean()) {
      return invalid_input("{}: no_link is not a boolean", at);
    }
    out.no_link = nl->get<bool>();
  }
  LS_TRY_ASSIGN(out.sha256, string_field(e, "sha256", at));
  out.sha256 = ascii_lower(out.sha256);
  if (!out.sha256.empty() && (out.sha256.size() != 64 || !is_lower_hex(out.sha256))) {
    return invalid_input("{}: sha256 is not 64 hex digits", at);
  }
  if (e.contains("size_in_bytes") && !e["size_in_bytes"].is_null()) {
    LS_TRY_ASSIGN(out.size, unsigned_field(e, "size_in_bytes", 0, at));
  }
  return out;
}

Result<std::vector<PathsEntry>> parse_paths(const json& obj, const std::string& where,
                                            const PackageLimits& limits) {
  LS_TRY_ASSIGN(std::uint64_t version, unsigned_field(obj, "paths_version", 0, where));
  if (version != 1) {
    return invalid_input("{}: paths_version {} is not 1, the one lockstep reads", where, version);
  }
  auto list = obj.find("paths");
  if (list == obj.end() || !list->is_array()) {
    return invalid_input("{}: 'paths' is not a list", where);
  }
  if (list->size() > limits.max_entries) {
    return invalid_input("{}: more than {} paths; refusing the package", where, limits.max_entries);
  }
  std::vector<PathsEntry> out;
  out.reserve(list->size());
  for (const json& e : *list) {
    LS_TRY_ASSIGN(PathsEntry entry, parse_paths_entry(e, where, limits));
    out.push_back(std::move(entry));
  }
  return out;
}

bool is_identifier(std::string_view s) {
  if (s.empty() || (s.front() >= '0' && s.front() <= '9')) {
    return false;
  }
  if (!std::all_of(s.begin(), s.end(), [](char c) { return is_ascii_alnum(c) || c == '_'; })) {
    return false;
  }
  return std::find(k_python_keywords.begin(), k_python_keywords.end(), s) == k_python_keywords.end();
}

bool is_dotted_identifier(std::string_view s) {
  std::size_t i = 0;
  while (i <= s.size()) {
    const std::size_t j = std::min(s.find('.', i), s.size());
    if (!is_identifier(s.substr(i, j - i))) {
      return false;
    }
    i = j + 1;
  }
  return true;
}

Result<LinkJson> parse_link(const json& obj, const std::string& where) {
  LinkJson out;
  auto noarch = obj.find("noarch");
  if (noarch == obj.end() || noarch->is_null()) {
    return out;
  }
  if (!noarch->is_object()) {
    return invalid_input("{}: 'noarch' is not an object", where);
  }
  LS_TRY_ASSIGN(out.noarch, noarch_of(*noarch, "type", where));
  LS_TRY_ASSIGN(std::vector<std::string> entry_points, strings_field(*noarch, "entry_points", where));
  std::set<std::string, std::less<>> commands;
  for (const std::string& text : entry_points) {
    LS_TRY_ASSIGN(EntryPoint ep, parse_entry_point(text, where));
    if (!commands.insert(ep.command).second) {
      return invalid_input("{}: entry point '{}' is there twice", where, ep.command);
    }
    out.entry_points.push_back(std::move(ep));
  }
  return out;
}

/// The fields of one has_prefix line: whitespace-separated, each optionally quoted ('...' or "...").
std::vector<std::string> has_prefix_fields(std::string_view line) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ' || line[i] == '\t') {
      ++i;
      continue;
    }
    const char quote = line[i] == '"' || line[i] == '\'' ? line[i] : '\0';
    const std::size_t start = quote != '\0' ? i + 1 : i;
    std::size_t end = quote != '\0' ? line.find(quote, start) : line.find_first_of(" \t", start);
    end = std::min(end, line.size());
    out.emplace_back(line.substr(start, end - start));
    i = end + (quote != '\0' ? 1 : 0);
  }
  return out;
}

/// The path list of a package without paths.json, from info/files, has_prefix and no_link.
Result<std::vector<PathsEntry>> legacy_paths(const std::vector<PayloadEntry>& payload,
                                             const std::map<std::string, std::string, std::less<>>& info,
                                             const std::string& what, const PackageLimits& limits) {
  std::vector<PathsEntry> out;
  std::map<std::string, std::size_t, std::less<>> index;
  for (std::string_view raw : text_lines(info.at("files"))) {
    std::string_view line = trim(raw);
    if (line.empty()) {
      continue;
    }
    LS_TRY(check_entry_path(line, what + ": info/files", limits));
    auto found = std::lower_bound(payload.begin(), payload.end(), line,
                                  [](const PayloadEntry& e, std::string_view path) { return e.path < path; });
    const PayloadEntry* p = found != payload.end() && found->path == line ? &*found : nullptr;
    if (p == nullptr) {
      return invalid_input("{}: info/files lists '{}', which is not in the package; refusing it", what, line);
    }
    PathsEntry e;
    e.path = std::string(line);
    e.type = p->kind == EntryKind::symlink     ? PathType::softlink
             : p->kind == EntryKind::directory ? PathType::directory
                                               : PathType::hardlink;
    if (p->kind == EntryKind::file) {
      e.sha256 = sha256_of(p->data).hex();
      e.size = p->data.size();
    }
    if (!index.emplace(e.path, out.size()).second) {
      return invalid_input("{}: info/files lists '{}' twice; refusing the package", what, line);
    }
    out.push_back(std::move(e));
  }
  auto lookup = [&](std::string_view file, std::string_view path) -> Result<PathsEntry*> {
    auto it = index.find(path);
    if (it == index.end()) {
      return invalid_input("{}: info/{} names '{}', which info/files does not list", what, file,
                           printable_ascii(path, 300));
    }
    return &out[it->second];
  };
  if (auto hp = info.find("has_prefix"); hp != info.end()) {
    for (std::string_view raw : text_lines(hp->second)) {
      std::vector<std::string> f = has_prefix_fields(trim(raw));
      if (f.empty()) {
        continue;
      }
      if (f.size() != 1 && (f.size() != 3 || (f[1] != "text" && f[1] != "binary") || f[0].empty())) {
        return invalid_input("{}: info/has_prefix line '{}' is neither PATH nor PLACEHOLDER MODE PATH", what,
                             printable_ascii(raw, 300));
      }
      LS_TRY_ASSIGN(PathsEntry * e, lookup("has_prefix", f.back()));
      e->prefix_placeholder = f.size() == 1 ? std::string(k_legacy_placeholder) : f[0];
      e->file_mode = f.size() == 3 && f[1] == "binary" ? FileMode::binary : FileMode::text;
    }
  }
  if (auto nl = info.find("no_link"); nl != info.end()) {
    for (std::string_view raw : text_lines(nl->second)) {
      if (!trim(raw).empty()) {
        LS_TRY_ASSIGN(PathsEntry * e, lookup("no_link", trim(raw)));
        e->no_link = true;
      }
    }
  }
  return out;
}

} // namespace

std::string_view path_type_name(PathType type) {
  switch (type) {
  case PathType::hardlink:
    return "hardlink";
  case PathType::softlink:
    return "softlink";
  case PathType::directory:
    return "directory";
  }
  return "hardlink";
}

std::string_view file_mode_name(FileMode mode) {
  return mode == FileMode::binary ? "binary" : "text";
}

bool is_clean_relative_path(std::string_view path, std::size_t max_path) {
  if (path.empty() || path.size() > max_path || path.front() == '/' || path.back() == '/' ||
      path.find('\\') != std::string_view::npos || has_controls(path) ||
      first_invalid_utf8(path).has_value()) {
    return false;
  }
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = std::min(path.find('/', i), path.size());
    std::string_view comp = path.substr(i, j - i);
    if (comp.empty() || comp == "." || comp == "..") {
      return false;
    }
    i = j + 1;
  }
  return true;
}

Result<EntryPoint> parse_entry_point(std::string_view text, std::string_view what) {
  auto bad = [&](std::string_view why) {
    return invalid_input("{}: entry point '{}' {}", what, printable_ascii(text, 200), why);
  };
  const std::size_t eq = text.find('=');
  const std::size_t colon = text.find(':', eq == std::string_view::npos ? 0 : eq);
  if (eq == std::string_view::npos || colon == std::string_view::npos) {
    return bad("is not 'command = module:function'");
  }
  EntryPoint ep{std::string(trim(text.substr(0, eq))), std::string(trim(text.substr(eq + 1, colon - eq - 1))),
                std::string(trim(text.substr(colon + 1)))};
  const bool plain_name = !ep.command.empty() && ep.command.size() <= 255 && ep.command.front() != '.' &&
                          ep.command.find_first_of("/\\ \t") == std::string::npos &&
                          !has_controls(ep.command) && ep.command != "..";
  if (!plain_name) {
    return bad("has a command that is not a plain file name");
  }
  if (!is_dotted_identifier(ep.module) || !is_dotted_identifier(ep.function)) {
    return bad("has a module or function that is not a dotted Python identifier");
  }
  return ep;
}

Result<InfoFiles> read_info_files(const std::map<std::string, std::string, std::less<>>& info,
                                  const std::vector<PayloadEntry>& payload, const std::string& what,
                                  const PackageLimits& limits) {
  InfoFiles out;
  LS_TRY_ASSIGN(std::optional<json> index, info_json(info, "index.json", what, limits));
  if (!index) {
    return invalid_input("{}: the package has no info/index.json", what);
  }
  LS_TRY_ASSIGN(out.index, parse_index(*index, what + ": info/index.json"));
  LS_TRY_ASSIGN(std::optional<json> paths, info_json(info, "paths.json", what, limits));
  if (paths) {
    out.paths_source = PathsSource::paths_json;
    LS_TRY_ASSIGN(out.paths, parse_paths(*paths, what + ": info/paths.json", limits));
  } else if (info.contains("files")) {
    out.paths_source = PathsSource::legacy;
    LS_TRY_ASSIGN(out.paths, legacy_paths(payload, info, what, limits));
  } else {
    return invalid_input("{}: the package has neither info/paths.json nor info/files", what);
  }
  LS_TRY_ASSIGN(std::optional<json> link, info_json(info, "link.json", what, limits));
  if (link) {
    LS_TRY_ASSIGN(LinkJson parsed, parse_link(*link, what + ": info/link.json"));
    out.link = std::move(parsed);
  }
  return out;
}

} // namespace lockstep::conda
