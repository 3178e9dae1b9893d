#include "support/conda/link.hpp"

#include "support/base/text.hpp"
#include "support/codec/digest.hpp"
#include "support/conda/match_spec.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <ctime>
#include <map>
#include <optional>
#include <set>

namespace lockstep::conda {

namespace {

using nlohmann::json;

constexpr std::size_t k_max_shebang = 127; // Linux's limit, counting "#!" (conda MAX_SHEBANG_LENGTH)
constexpr int k_link_type_copy = 3;        // conda's LinkType.copy
constexpr std::array<std::string_view, 4> k_link_script_actions = {"pre-link", "post-link", "pre-unlink",
                                                                   "post-unlink"};

/// The prefix of `options`, checked: absolute, clean, no trailing '/', no control characters.
Result<void> check_prefix(std::string_view prefix) {
  if (prefix.size() < 2 || prefix.front() != '/' || !is_clean_relative_path(prefix.substr(1), 4000)) {
    return invalid_input("conda prefix '{}' is not an absolute, normalised path (like /opt/conda)",
                         printable_ascii(prefix, 300));
  }
  return {};
}

/// `url` without trailing slashes.
std::string canonical_url(std::string_view url) {
  while (url.ends_with('/')) {
    url.remove_suffix(1);
  }
  return std::string(url);
}

/// "3.11" -> true; the X.Y of a python version.
bool is_python_xy(std::string_view v) {
  const std::size_t dot = v.find('.');
  return dot != std::string_view::npos && dot > 0 && dot + 1 < v.size() && all_digits(v.substr(0, dot)) &&
         all_digits(v.substr(dot + 1));
}

/// Where a noarch: python package's path lands (conda's get_python_noarch_target_path).
std::string noarch_python_target(const std::string& path, const std::string& site_packages) {
  if (path.starts_with("site-packages/")) {
    return site_packages + path.substr(13);
  }
  if (path.starts_with("python-scripts/")) {
    return "bin" + path.substr(14);
  }
  return path;
}

/// The first line's shebang rewritten to the /usr/bin/env form when too long or when its
/// executable's directory holds an escaped space (conda's replace_long_shebang, first line only).
std::string shorten_shebang(std::string data) {
  if (!data.starts_with("#!")) {
    return data;
  }
  const std::size_t eol = std::min(data.find('\n'), data.size());
  const std::string_view line(data.data(), eol);
  std::size_t i = 2;
  while (i < line.size() && line[i] == ' ') {
    ++i;
  }
  if (i >= line.size() || line[i] != '/') {
    return data;
  }
  const std::size_t exe_start = i;
  while (i < line.size()) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == ' ') {
      i += 2;
    } else if (line[i] == ' ' || line[i] == '\r' || line[i] == '\t') {
      break;
    } else {
      ++i;
    }
  }
  const std::string_view exe = line.substr(exe_start, i - exe_start);
  const std::string_view options = line.substr(i);
  const std::size_t slash = exe.rfind('/');
  const std::string_view dir = exe.substr(0, slash);
  if (line.size() <= k_max_shebang && dir.find("\\ ") == std::string_view::npos) {
    return data;
  }
  std::string out = "#!/usr/bin/env ";
  out += exe.substr(slash + 1);
  out += options;
  out += std::string_view(data).substr(eol);
  return out;
}

/// Replaces every occurrence of `from` in `s` by `to`.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  std::size_t pos = 0;
  for (std::size_t hit = s.find(from); hit != std::string_view::npos; hit = s.find(from, pos)) {
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

/// One installed path and its paths_data entry.
struct Planned {
  PrefixPath path;
  json record;
};

/// The installed form of one paths.json entry.
Result<Planned> plan_entry(const PathsEntry& e, PayloadEntry* payload, std::string target,
                           const LinkOptions& options, const std::string& what) {
  Planned p;
  p.path.path = std::move(target);
  p.record = json::object();
  p.record["_path"] = p.path.path;
  p.record["path_type"] = std::string(path_type_name(e.type));
  if (e.no_link) {
    p.record["no_link"] = true;
  }
  if (e.type == PathType::directory) {
    p.path.kind = PrefixKind::directory;
    p.path.mode = payload != nullptr ? payload->mode | 0700U : 0755U;
    p.path.mtime = payload != nullptr ? payload->mtime : options.generated_mtime;
    p.path.generated = payload == nullptr;
    return p;
  }
  if (payload == nullptr || (payload->kind == EntryKind::file) != (e.type == PathType::hardlink)) {
    return invalid_input("{}: '{}' is not in the package as paths.json says", what, e.path);
  }
  p.path.mode = payload->mode;
  p.path.mtime = payload->mtime;
  if (!e.sha256.empty()) {
    p.record["sha256"] = e.sha256;
  }
  if (e.type == PathType::softlink) {
    p.path.kind = PrefixKind::symlink;
    p.path.target = payload->target;
    if (e.size) {
      p.record["size_in_bytes"] = *e.size;
    }
    return p;
  }
  p.path.kind = PrefixKind::file;
  const std::string sha256 = e.sha256.empty() ? sha256_of(payload->data).hex() : e.sha256;
  p.record["sha256"] = sha256;
  if (e.prefix_placeholder.empty()) {
    p.path.data = std::move(payload->data);
  } else {
    p.record["file_mode"] = std::string(file_mode_name(e.file_mode));
    p.record["prefix_placeholder"] = e.prefix_placeholder;
    if (e.file_mode == FileMode::text) {
      p.path.data = replace_prefix_text(payload->data, e.prefix_placeholder, options.prefix);
    } else {
      LS_TRY_ASSIGN(p.path.data, replace_prefix_binary(payload->data, e.prefix_placeholder, options.prefix,
                                                       what + ": " + e.path));
    }
    if (p.path.data != payload->data) {
      p.path.generated = true;
      p.path.mtime = options.generated_mtime;
    }
  }
  p.record["sha256_in_prefix"] = p.path.generated ? sha256_of(p.path.data).hex() : sha256;
  p.record["size_in_bytes"] = p.path.data.size();
  return p;
}

/// The entry points of a noarch: python package's link.json, as files.
std::vector<Planned> plan_entry_points(const Package& pkg, const LinkOptions& options) {
  std::vector<Planned> out;
  if (!pkg.link) {
    return out;
  }
  const std::string python = options.prefix + "/bin/python" + options.python_version;
  for (const EntryPoint& ep : pkg.link->entry_points) {
    Planned p;
    p.path.path = "bin/" + ep.command;
    p.path.kind = PrefixKind::file;
    p.path.mode = 0755;
    p.path.mtime = options.generated_mtime;
    p.path.generated = true;
    p.path.data = entry_point_script(ep, python);
    p.record = json::object();
    p.record["_path"] = p.path.path;
    p.record["path_type"] = "unix_python_entry_point";
    p.record["sha256_in_prefix"] = sha256_of(p.path.data).hex();
    p.record["size_in_bytes"] = p.path.data.size();
    out.push_back(std::move(p));
  }
  return out;
}

/// "conda-forge" for a channel on anaconda.org (conda's canonical name), else the URL.
std::string meta_channel(std::string_view channel) {
  constexpr std::string_view k_alias = "https://conda.anaconda.org/";
  if (channel.starts_with(k_alias)) {
    channel.remove_prefix(k_alias.size());
  }
  return canonical_url(channel);
}

/// The record conda-meta is written from, owned (whether Record holds strings or views).
struct MetaRecord {
  std::string filename;
  std::string name;
  std::string version;
  std::string build;
  std::uint64_t build_number = 0;
  std::vector<std::string> depends;
  std::vector<std::string> constrains;
  std::vector<std::string> track_features;
  NoArch noarch = NoArch::none;
  std::string subdir;
  std::uint64_t timestamp_ms = 0;
  std::string md5;
  std::string sha256;
  std::uint64_t size = 0;
  std::string license;
  std::string python_site_packages_path;
};

template <typename List> std::vector<std::string> owned(const List& list) {
  return std::vector<std::string>(list.begin(), list.end());
}

/// The locked record, with index.json filling what it leaves empty.
Result<MetaRecord> merged_record(const Package& pkg, const PackageOrigin& origin, const std::string& what) {
  const Record& lock = origin.record;
  const IndexJson& idx = pkg.index;
  MetaRecord r{std::string(lock.filename),
               std::string(lock.name),
               std::string(lock.version),
               std::string(lock.build),
               lock.build_number,
               owned(lock.depends),
               owned(lock.constrains),
               owned(lock.track_features),
               lock.noarch,
               std::string(lock.subdir),
               lock.timestamp_ms,
               std::string(lock.md5),
               std::string(lock.sha256),
               lock.size,
               std::string(lock.license),
               std::string(lock.python_site_packages_path)};
  if (r.name.empty()) {
    r.name = idx.name;
    r.version = idx.version;
    r.build = idx.build;
    r.build_number = idx.build_number;
    r.depends = idx.depends;
    r.constrains = idx.constrains;
    r.track_features = idx.track_features;
    r.noarch = idx.noarch;
    r.timestamp_ms = idx.timestamp_ms;
  } else if (r.name != idx.name || r.version != idx.version || r.build != idx.build) {
    return invalid_input("{}: the lock names {}-{}-{}, the archive holds {}-{}-{}; refusing it", what, r.name,
                         r.version, r.build, idx.name, idx.version, idx.build);
  }
  if (r.filename.empty()) {
    r.filename = pkg.stem + (pkg.format == PackageFormat::conda ? ".conda" : ".tar.bz2");
  }
  if (r.subdir.empty()) {
    r.subdir = idx.subdir;
  }
  if (r.license.empty()) {
    r.license = idx.license;
  }
  if (r.python_site_packages_path.empty()) {
    r.python_site_packages_path = idx.python_site_packages_path;
  }
  return r;
}

/// The conda-meta/<dist>.json text.
std::string conda_meta_json(const Package& pkg, const MetaRecord& r, const PackageOrigin& origin,
                            const LinkOptions& options, const std::vector<Planned>& planned) {
  const std::string cache = options.prefix + "/pkgs/";
  json j = json::object();
  j["name"] = r.name;
  j["version"] = r.version;
  j["build"] = r.build;
  j["build_number"] = r.build_number;
  j["channel"] = origin.channel.empty() ? std::string() : canonical_url(origin.channel) + "/" + r.subdir;
  j["subdir"] = r.subdir;
  j["depends"] = r.depends;
  j["constrains"] = r.constrains;
  std::string features;
  for (const std::string& f : r.track_features) {
    features += (features.empty() ? "" : " ") + f;
  }
  j["track_features"] = features;
  if (r.noarch != NoArch::none) {
    j["noarch"] = noarch_name(r.noarch);
  }
  for (const auto& [key, value] : {std::pair{"license", r.license},
                                   {"license_family", pkg.index.license_family},
                                   {"arch", pkg.index.arch},
                                   {"platform", pkg.index.platform},
                                   {"md5", r.md5},
                                   {"python_site_packages_path", r.python_site_packages_path}}) {
    if (!value.empty()) {
      j[key] = value;
    }
  }
  if (r.timestamp_ms != 0) {
    j["timestamp"] = r.timestamp_ms;
  }
  j["sha256"] = r.sha256;
  j["size"] = r.size;
  j["fn"] = r.filename;
  j["url"] = origin.url;
  j["extracted_package_dir"] = cache + pkg.stem;
  j["package_tarball_full_path"] = cache + r.filename;
  j["link"] = json{{"source", cache + pkg.stem}, {"type", k_link_type_copy}};
  j["requested_spec"] = origin.requested_specs.empty() ? std::string() : origin.requested_specs.front();
  j["requested_specs"] = origin.requested_specs;
  json files = json::array();
  json paths = json::array();
  for (const Planned& p : planned) {
    files.push_back(p.path.path);
    paths.push_back(p.record);
  }
  j["files"] = std::move(files);
  j["paths_data"] = json{{"paths", std::move(paths)}, {"paths_version", 1}};
  return j.dump(2, ' ', true, json::error_handler_t::replace);
}

/// The site-packages directory of noarch: python packages (prefix-relative).
Result<std::string> site_packages_of(const LinkOptions& options, const std::string& what) {
  if (!is_python_xy(options.python_version)) {
    return invalid_input(
        "{}: a noarch: python package needs the environment's python version as X.Y, not '{}'", what,
        printable_ascii(options.python_version, 40));
  }
  if (options.python_site_packages_path.empty()) {
    return "lib/python" + options.python_version + "/site-packages";
  }
  if (!is_clean_relative_path(options.python_site_packages_path, 4000)) {
    return invalid_input("{}: python_site_packages_path '{}' is not a clean path inside the prefix (CEP 17)",
                         what, printable_ascii(options.python_site_packages_path, 300));
  }
  return options.python_site_packages_path;
}

// The package name a dependency MatchSpec names ("python >=3.11" -> "python"); "" when unreadable.
std::string dependency_name(const std::string& spec) {
  auto m = MatchSpec::parse(spec, SpecMode::lenient);
  return m && m->name().kind() == StringMatcher::Kind::exact ? m->name().str() : std::string();
}

} // namespace

std::vector<std::size_t> install_order(const std::vector<std::string>& names,
                                       const std::vector<std::vector<std::string>>& depends) {
  std::map<std::string_view, std::size_t> by_name;
  for (std::size_t i = 0; i < names.size(); ++i) {
    by_name.emplace(names[i], i);
  }
  std::vector<std::set<std::size_t>> needs(names.size());
  for (std::size_t i = 0; i < names.size() && i < depends.size(); ++i) {
    for (const std::string& d : depends[i]) {
      auto it = by_name.find(dependency_name(d));
      if (it != by_name.end() && it->second != i) {
        needs[i].insert(it->second);
      }
    }
  }
  std::vector<std::size_t> order;
  std::vector<bool> done(names.size(), false);
  while (order.size() < names.size()) {
    std::optional<std::size_t> next;
    for (const auto& [name, i] : by_name) { // name order
      if (!done[i] && std::all_of(needs[i].begin(), needs[i].end(), [&](std::size_t n) { return done[n]; })) {
        next = i;
        break;
      }
    }
    if (!next) { // a cycle: the smallest name not yet installed
      for (const auto& [name, i] : by_name) {
        if (!done[i]) {
          next = i;
          break;
        }
      }
    }
    if (!next) {
      break; // what is left is a name given twice (by_name holds one): after the rest, in order
    }
    done[*next] = true;
    order.push_back(*next);
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!done[i]) {
      order.push_back(i);
    }
  }
  return order;
}

std::string replace_prefix_text(std::string_view data, std::string_view placeholder,
                                std::string_view prefix) {
  if (placeholder.empty()) {
    return std::string(data);
  }
  std::string text(data);
  const std::size_t eol = text.find('\n');
  if (eol != std::string::npos) {
    const std::string shebang = "#!" + std::string(placeholder);
    const std::string first = text.substr(0, eol);
    if (first.find(shebang) != std::string::npos) {
      const std::string escaped = "#!" + replace_all(prefix, " ", "\\ ");
      text = replace_all(first, shebang, escaped) + text.substr(eol);
    }
  }
  return shorten_shebang(replace_all(text, placeholder, prefix));
}

Result<std::string> replace_prefix_binary(std::string_view data, std::string_view placeholder,
                                          std::string_view prefix, std::string_view what) {
  std::string out;
  if (placeholder.empty()) {
    return std::string(data);
  }
  out.reserve(data.size());
  std::size_t pos = 0;
  for (std::size_t hit = data.find(placeholder); hit != std::string_view::npos;
       hit = data.find(placeholder, pos)) {
    const std::size_t nul = data.find('\0', hit + placeholder.size());
    if (nul == std::string_view::npos) {
      break; // no C string ends after it: left alone, as conda leaves it
    }
    if (prefix.size() > placeholder.size()) {
      return invalid_input(
          "{}: the prefix {} ({} bytes) is longer than the binary placeholder {} ({} bytes); "
          "choose a shorter prefix",
          what, prefix, prefix.size(), printable_ascii(placeholder, 300), placeholder.size());
    }
    const std::string_view cstring = data.substr(hit, nul - hit);
    const std::string replaced = replace_all(cstring, placeholder, prefix);
    out.append(data.substr(pos, hit - pos));
    out.append(replaced);
    out.append(cstring.size() - replaced.size(), '\0');
    pos = nul;
  }
  out.append(data.substr(pos));
  return out;
}

std::string entry_point_script(const EntryPoint& ep, std::string_view python) {
  std::string shebang = "#!" + std::string(python) + "\n";
  if (shebang.size() > k_max_shebang || python.find(' ') != std::string_view::npos) {
    // Valid sh and valid Python: sh execs the interpreter on this file, Python sees a string.
    shebang = fmt::format("#!/bin/sh\n'''exec' \"{}\" \"$0\" \"$@\"\n' '''\n", python);
  }
  const std::string_view import_name = std::string_view(ep.function).substr(0, ep.function.find('.'));
  return fmt::format("{}# -*- coding: utf-8 -*-\n"
                     "import re\n"
                     "import sys\n"
                     "\n"
                     "from {} import {}\n"
                     "\n"
                     "if __name__ == '__main__':\n"
                     "    sys.argv[0] = re.sub(r'(-script\\.pyw?|\\.exe)?$', '', sys.argv[0])\n"
                     "    sys.exit({}())\n",
                     shebang, ep.module, import_name, ep.function);
}

Result<PackagePlan> plan_package(Package pkg, const PackageOrigin& origin, const LinkOptions& options) {
  const std::string what = pkg.stem;
  LS_TRY(check_prefix(options.prefix));
  LS_TRY_ASSIGN(MetaRecord record, merged_record(pkg, origin, what));
  std::string site_packages;
  const bool noarch_python = pkg.index.noarch == NoArch::python;
  if (noarch_python) {
    LS_TRY_ASSIGN(site_packages, site_packages_of(options, what));
  }
  std::vector<Planned> planned;
  for (const PathsEntry& e : pkg.paths) {
    auto payload =
        std::lower_bound(pkg.payload.begin(), pkg.payload.end(), e.path,
                         [](const PayloadEntry& p, const std::string& path) { return p.path < path; });
    PayloadEntry* found = payload != pkg.payload.end() && payload->path == e.path ? &*payload : nullptr;
    std::string target = noarch_python ? noarch_python_target(e.path, site_packages) : e.path;
    LS_TRY_ASSIGN(Planned p, plan_entry(e, found, std::move(target), options, what));
    planned.push_back(std::move(p));
  }
  if (noarch_python) {
    for (Planned& p : plan_entry_points(pkg, options)) {
      planned.push_back(std::move(p));
    }
  }
  std::sort(planned.begin(), planned.end(),
            [](const Planned& a, const Planned& b) { return a.path.path < b.path.path; });
  for (std::size_t i = 1; i < planned.size(); ++i) {
    if (planned[i].path.path == planned[i - 1].path.path) {
      return invalid_input("{}: two of its entries install '{}'; refusing the package", what,
                           planned[i].path.path);
    }
  }
  PackagePlan plan;
  plan.name = record.name;
  plan.dist = record.name + "-" + record.version + "-" + record.build;
  plan.history_id = meta_channel(origin.channel) + "/" + record.subdir + "::" + plan.dist;
  plan.requested_specs = origin.requested_specs;
  for (const Planned& p : planned) {
    for (std::string_view action : k_link_script_actions) {
      if (p.path.path == fmt::format("bin/.{}-{}.sh", record.name, action)) {
        plan.link_scripts.push_back(p.path.path);
      }
    }
  }
  plan.conda_meta.path = "conda-meta/" + plan.dist + ".json";
  plan.conda_meta.data = conda_meta_json(pkg, record, origin, options, planned);
  plan.conda_meta.mtime = options.generated_mtime;
  plan.conda_meta.generated = true;
  plan.paths.reserve(planned.size());
  for (Planned& p : planned) {
    plan.paths.push_back(std::move(p.path));
  }
  return plan;
}

std::string history_text(const std::vector<PackagePlan>& plans, const PrefixOptions& options) {
  std::tm tm{};
  const auto t = static_cast<std::time_t>(options.time);
  gmtime_r(&t, &tm);
  std::array<char, 32> when{};
  std::strftime(when.data(), when.size(), "%Y-%m-%d %H:%M:%S", &tm);
  std::string out = fmt::format("==> {} <==\n# cmd: {}\n", when.data(), options.command);
  std::vector<std::string> ids;
  std::vector<std::string> specs;
  for (const PackagePlan& p : plans) {
    ids.push_back(p.history_id);
    for (const std::string& s : p.requested_specs) {
      if (std::find(specs.begin(), specs.end(), s) == specs.end()) {
        specs.push_back(s);
      }
    }
  }
  std::sort(ids.begin(), ids.end());
  for (const std::string& id : ids) {
    out += "+" + id + "\n";
  }
  if (!specs.empty()) {
    // A Python list of str, as conda writes it (repr: single quotes unless the text holds one).
    out += "# update specs: [";
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const char quote =
          specs[i].find('\'') != std::string::npos && specs[i].find('"') == std::string::npos ? '"' : '\'';
      std::string escaped;
      for (char c : specs[i]) {
        if (c == '\\' || c == quote) {
          escaped += '\\';
        }
        escaped += c;
      }
      out += fmt::format("{}{}{}{}", i == 0 ? "" : ", ", quote, escaped, quote);
    }
    out += "]\n";
  }
  return out;
}

namespace {

/// Refuses a path under another package's file or symlink.
Result<void>
check_parents(const std::map<std::string, std::pair<std::size_t, PrefixPath>, std::less<>>& by_path,
              const std::vector<PackagePlan>& plans) {
  for (const auto& [path, owned] : by_path) {
    for (std::size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0;
         slash = path.rfind('/', slash - 1)) {
      auto parent = by_path.find(std::string_view(path).substr(0, slash));
      if (parent != by_path.end() && parent->second.second.kind != PrefixKind::directory) {
        return invalid_input(
            "conda prefix: '{}' of {} lies under the {} '{}' of {}; refusing the environment", path,
            plans[owned.first].dist, parent->second.second.kind == PrefixKind::symlink ? "symlink" : "file",
            parent->first, plans[parent->second.first].dist);
      }
    }
  }
  return {};
}

} // namespace

Result<PrefixPlan> merge_plans(std::vector<PackagePlan> plans, const PrefixOptions& options) {
  PrefixPlan out;
  std::map<std::string, std::pair<std::size_t, PrefixPath>, std::less<>> by_path;
  std::set<std::string, std::less<>> names;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    PackagePlan& plan = plans[i];
    if (!names.insert(plan.name).second) {
      return invalid_input("conda prefix: '{}' is installed twice ({}); refusing the environment", plan.name,
                           plan.dist);
    }
    for (PrefixPath& p : plan.paths) {
      auto [it, inserted] = by_path.try_emplace(p.path, i, PrefixPath{});
      if (inserted) {
        it->second.second = std::move(p);
        continue;
      }
      PrefixPath& old = it->second.second;
      const bool old_dir = old.kind == PrefixKind::directory;
      if (old_dir && p.kind == PrefixKind::directory) {
        continue; // shared directories: the first package's stays
      }
      if (old_dir || p.kind == PrefixKind::directory) {
        return invalid_input(
            "conda prefix: {} installs a {} at '{}' where {} has a {}; refusing the environment", plan.dist,
            p.kind == PrefixKind::directory ? "directory" : "file", p.path, plans[it->second.first].dist,
            old_dir ? "directory" : "file");
      }
      out.clobbers.push_back(Clobber{p.path, plan.dist, plans[it->second.first].dist});
      it->second = {i, std::move(p)};
    }
    for (const std::string& script : plan.link_scripts) {
      out.link_scripts.emplace_back(plan.dist, script);
    }
  }
  LS_TRY(check_parents(by_path, plans));
  std::map<std::string, std::string, std::less<>> symlinks;
  for (const auto& [path, owned] : by_path) {
    if (owned.second.kind == PrefixKind::symlink) {
      symlinks.emplace(path, owned.second.target);
    }
  }
  for (const auto& [path, target] : symlinks) {
    if (!symlink_stays_inside(path, target, symlinks)) {
      return invalid_input(
          "conda prefix: symlink '{}' -> '{}' of {} resolves outside the prefix; refusing the "
          "environment",
          path, printable_ascii(target, 300), plans[by_path.find(path)->second.first].dist);
    }
  }
  std::stable_sort(out.clobbers.begin(), out.clobbers.end(),
                   [](const Clobber& a, const Clobber& b) { return a.path < b.path; });
  out.paths.reserve(by_path.size() + plans.size() + 2);
  for (auto& [path, owned] : by_path) {
    out.paths.push_back(std::move(owned.second));
  }
  PrefixPath history{
      "conda-meta/history", PrefixKind::file, 0644, options.time, history_text(plans, options), {}, true, {}};
  out.paths.push_back(std::move(history));
  if (options.frozen) {
    std::string message;
    if (!options.frozen_message.empty()) {
      message = json{{"message", options.frozen_message}}.dump(-1, ' ', true, json::error_handler_t::replace);
    }
    out.paths.push_back(
        PrefixPath{"conda-meta/frozen", PrefixKind::file, 0644, options.time, message, {}, true, {}});
  }
  for (PackagePlan& plan : plans) {
    out.paths.push_back(std::move(plan.conda_meta));
  }
  std::sort(out.paths.begin(), out.paths.end(),
            [](const PrefixPath& a, const PrefixPath& b) { return a.path < b.path; });
  return out;
}

} // namespace lockstep::conda
