// An image's conda-meta records, read as hostile input. See conda_meta.hpp.
#include "runner/audit/conda_meta.hpp"

#include "support/base/json.hpp"
#include "support/base/text.hpp"
#include "support/conda/package_info.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace lockstep::runner {

namespace {

constexpr std::string_view k_conda_meta = "/conda-meta/";
constexpr std::size_t k_max_field = 4096;

Result<InstalledConda> parse_record(const std::string& text, const std::string& record,
                                    const std::string& where) {
  LS_TRY_ASSIGN(const nlohmann::json j, parse_json(text, where, 16));
  if (!j.is_object()) {
    return invalid_input("{}: a conda-meta record is a JSON object", where);
  }
  InstalledConda c;
  c.record = record;
  c.prefix = record.substr(0, record.rfind(k_conda_meta));
  c.name = json_string(j, "name");
  c.version = json_string(j, "version");
  c.build = json_string(j, "build");
  c.url = json_string(j, "url");
  for (const std::string* f : {&c.name, &c.version, &c.build}) {
    if (f->empty() || f->size() > k_max_field || has_controls(*f)) {
      return invalid_input("{}: name, version and build must be non-empty strings without control characters",
                           where);
    }
  }
  // Descriptive fields: kept only when short, printable and (sha256) 64 hex digits.
  const auto field = [&j](const char* key) {
    std::string v = json_string(j, key);
    return v.size() > k_max_field || has_controls(v) ? std::string() : v;
  };
  c.sha256 = ascii_lower(field("sha256"));
  if (c.sha256.size() != 64 || !is_lower_hex(c.sha256)) {
    c.sha256.clear();
  }
  c.subdir = field("subdir");
  c.channel = field("channel");
  c.license = field("license");
  if (has_controls(c.url) || c.url.size() > k_max_field) {
    c.url.clear();
  }
  const auto data = j.find("paths_data");
  if (data == j.end() || !data->is_object()) {
    return c; // conda before 4.3 wrote only "files"; nothing to check the files against
  }
  const auto paths = data->find("paths");
  if (paths == data->end() || !paths->is_array()) {
    return invalid_input("{}: paths_data.paths is not a list", where);
  }
  c.paths.reserve(paths->size());
  for (std::size_t i = 0; i < paths->size(); ++i) {
    const nlohmann::json& e = (*paths)[i];
    const std::string rel = json_string(e, "_path");
    if (!conda::is_clean_relative_path(rel, conda::PackageLimits{}.max_path)) {
      return invalid_input("{}: paths_data.paths[{}]: '{}' is not a path inside the prefix", where, i,
                           printable_ascii(rel, 200));
    }
    CondaMetaPath p;
    p.path = c.prefix + "/" + rel;
    p.type = json_string(e, "path_type");
    p.sha256 = ascii_lower(json_string(e, "sha256_in_prefix"));
    if (p.sha256.empty()) {
      p.sha256 = ascii_lower(json_string(e, "sha256"));
    }
    if (!p.sha256.empty() && (p.sha256.size() != 64 || !is_lower_hex(p.sha256))) {
      return invalid_input("{}: paths_data.paths[{}] ({}): the sha256 is not 64 hex digits", where, i, rel);
    }
    if (auto s = e.find("size_in_bytes"); s != e.end() && s->is_number_unsigned()) {
      p.size = s->get<std::uint64_t>();
    }
    c.paths.push_back(std::move(p));
  }
  return c;
}

} // namespace

bool is_conda_meta_record(std::string_view path) {
  const std::size_t at = path.rfind(k_conda_meta);
  if (at == std::string_view::npos || at == 0) {
    return false;
  }
  const std::string_view name = path.substr(at + k_conda_meta.size());
  return name.size() > 5 && name.ends_with(".json") && name.find('/') == std::string_view::npos;
}

Result<std::vector<InstalledConda>> image_conda_packages(const ImageContents& contents) {
  std::vector<InstalledConda> out;
  for (const auto& [path, entry] : contents.entries()) {
    if (entry.type != ImageEntry::Type::file || !is_conda_meta_record(path)) {
      continue;
    }
    const std::string* text = contents.text(path);
    if (text == nullptr) {
      continue;
    }
    const std::string where = fmt::format("{}:/{}", contents.what, path);
    LS_TRY_ASSIGN(InstalledConda c, parse_record(*text, path, where));
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const InstalledConda& a, const InstalledConda& b) {
    return std::tie(a.prefix, a.name, a.record) < std::tie(b.prefix, b.name, b.record);
  });
  return out;
}

} // namespace lockstep::runner
