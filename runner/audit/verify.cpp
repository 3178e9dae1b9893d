// `lockstep verify`: the image's files against dpkg's and pip's records, and its package sets
// against a lock; and the image's packages as diff's component list.
#include "runner/audit/verify.hpp"

#include "envspec/documents/components.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/debian/apt_packages.hpp"
#include "support/debian/deb822.hpp"
#include "support/debian/debian_version.hpp"
#include "support/python/pep440.hpp"
#include "support/python/pep508.hpp"
#include "support/python/wheel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

namespace lockstep::runner {

namespace {

using ordered = nlohmann::ordered_json;
using Kind = VerifyProblem::Kind;

constexpr std::size_t k_max_name = 256;
constexpr std::size_t k_max_version = 256;

// "oci:out:/var/lib/dpkg/status": the file named in messages.
std::string located(const ImageContents& contents, std::string_view path) {
  return fmt::format("{}:/{}", contents.what, path);
}

// `e` with control characters in its message replaced by '?': messages quote hostile bytes.
Error sanitized(Error e) {
  for (char& c : e.message) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\n') || c == 0x7f) {
      c = '?';
    }
  }
  return e;
}

// `path` (absolute, or relative to `base`) as a normalised image path without the leading '/';
// nullopt when ".." climbs above the root.
std::optional<std::string> image_path(std::string_view base, std::string_view path) {
  std::vector<std::string> parts;
  auto add = [&](std::string_view p) {
    std::size_t i = 0;
    while (i <= p.size()) {
      std::size_t j = std::min(p.find('/', i), p.size());
      std::string_view c = p.substr(i, j - i);
      if (c == "..") {
        if (parts.empty()) {
          return false;
        }
        parts.pop_back();
      } else if (!c.empty() && c != ".") {
        parts.emplace_back(c);
      }
      i = j + 1;
    }
    return true;
  };
  if (path.empty() || path.front() != '/') {
    if (!add(base)) {
      return std::nullopt;
    }
  }
  if (!add(path)) {
    return std::nullopt;
  }
  std::string out;
  for (const auto& p : parts) {
    out += out.empty() ? p : "/" + p;
  }
  return out;
}

// Whether `path` has a ".." component.
bool has_dotdot(std::string_view path) {
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = std::min(path.find('/', i), path.size());
    if (path.substr(i, j - i) == "..") {
      return true;
    }
    i = j + 1;
  }
  return false;
}

// dpkg's md5sums: "MD5  PATH" lines (md5sum's format; "MD5 *PATH" too); paths relative to the root.
Result<std::vector<DebFile>> parse_md5sums(std::string_view text, const std::string& what) {
  std::vector<DebFile> out;
  int line_no = 0;
  for (std::string_view line : lines_of(text)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line.find_first_not_of(" \t") == std::string_view::npos) {
      continue;
    }
    if (line.size() < 35 || !is_lower_hex(line.substr(0, 32)) || line[32] != ' ' ||
        (line[33] != ' ' && line[33] != '*')) {
      return invalid_input("{}:{}: expected 'MD5  PATH', found '{}'", what, line_no,
                           !has_controls(line) ? line.substr(0, 200) : "(binary)");
    }
    std::string_view path = line.substr(34);
    auto normal = image_path("", path);
    if (!normal || normal->empty() || has_dotdot(path)) {
      return invalid_input("{}:{}: '{}' is not a path inside the image", what, line_no,
                           !has_controls(path) ? path.substr(0, 200) : "(binary)");
    }
    out.push_back({std::move(*normal), std::string(line.substr(0, 32)), line_no});
  }
  return out;
}

// The Conffiles field: " /etc/foo MD5 [obsolete] [remove-on-upgrade]" per line.
Result<std::vector<Conffile>> parse_conffiles(std::string_view value, const std::string& where) {
  std::vector<Conffile> out;
  for (std::string_view line : lines_of(value)) {
    line = deb822_trim(line);
    if (line.empty()) {
      continue;
    }
    std::vector<std::string_view> words;
    std::size_t i = 0;
    while (i < line.size()) {
      std::size_t j = line.find_first_of(" \t", i);
      if (j == std::string_view::npos) {
        j = line.size();
      }
      if (j > i) {
        words.push_back(line.substr(i, j - i));
      }
      i = j + 1;
    }
    if (words.size() < 2 || words[0].front() != '/' || !image_path("", words[0])) {
      return invalid_input("{}: Conffiles: expected '/PATH MD5', found '{}'", where,
                           !has_controls(line) ? line.substr(0, 200) : "(binary)");
    }
    Conffile c;
    c.path = std::string(words[0]);
    if (words[1] != "newconffile") {
      if (words[1].size() != 32 || !is_lower_hex(words[1])) {
        return invalid_input("{}: Conffiles: '{}' has no MD5 ('{}')", where, words[0],
                             !has_controls(words[1]) ? words[1].substr(0, 64) : "(binary)");
      }
      c.md5 = std::string(words[1]);
    }
    for (std::size_t w = 2; w < words.size(); ++w) {
      c.obsolete = c.obsolete || words[w] == "obsolete";
    }
    out.push_back(std::move(c));
  }
  return out;
}

// One status paragraph.
Result<InstalledDeb> parse_status_paragraph(const Deb822Paragraph& p, const std::string& what) {
  InstalledDeb d;
  d.line = p.line;
  auto field = [&](std::string_view name) -> const Deb822Field* {
    for (const Deb822Field& f : p.fields) {
      if (f.name.size() == name.size() &&
          std::equal(f.name.begin(), f.name.end(), name.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
          })) {
        return &f;
      }
    }
    return nullptr;
  };
  const Deb822Field* package = field("Package");
  if (package == nullptr) {
    return invalid_input("{}:{}: a paragraph without a Package field", what, p.line);
  }
  if (package->value.size() > k_max_name || !valid_package_name(package->value)) {
    return invalid_input("{}:{}: '{}' is not a valid package name", what, package->line,
                         !has_controls(package->value) ? package->value.substr(0, 64) : "(binary)");
  }
  d.name = package->value;
  const Deb822Field* status = field("Status");
  if (status == nullptr) {
    return invalid_input("{}:{}: package {} has no Status field", what, p.line, d.name);
  }
  {
    std::vector<std::string> words;
    std::string word;
    for (char c : status->value + " ") {
      if (c == ' ' || c == '\t') {
        if (!word.empty()) {
          words.push_back(std::move(word));
          word.clear();
        }
      } else {
        word += c;
      }
    }
    static const std::set<std::string> wants = {"unknown", "install", "hold", "deinstall", "purge"};
    static const std::set<std::string> states = {"not-installed",    "config-files",    "half-installed",
                                                 "unpacked",         "half-configured", "triggers-awaited",
                                                 "triggers-pending", "installed"};
    if (words.size() != 3 || wants.count(words[0]) == 0 || states.count(words[2]) == 0) {
      return invalid_input("{}:{}: package {}: Status '{}' is not 'WANT FLAG STATE'", what, status->line,
                           d.name, !has_controls(status->value) ? status->value.substr(0, 64) : "(binary)");
    }
    d.want = words[0];
    d.state = words[2];
  }
  if (const Deb822Field* v = field("Version"); v != nullptr) {
    if (v->value.size() > k_max_version || !DebianVersion::parse(v->value)) {
      return invalid_input("{}:{}: package {}: '{}' is not a valid version", what, v->line, d.name,
                           !has_controls(v->value) ? v->value.substr(0, 64) : "(binary)");
    }
    d.version = v->value;
  } else if (d.state != "not-installed") {
    return invalid_input("{}:{}: package {} ({}) has no Version field", what, p.line, d.name, d.state);
  }
  if (const Deb822Field* a = field("Architecture"); a != nullptr) {
    if (a->value.empty() || a->value.size() > 64 || !valid_package_name(a->value + "x")) {
      return invalid_input("{}:{}: package {}: '{}' is not a valid architecture", what, a->line, d.name,
                           !has_controls(a->value) ? a->value.substr(0, 64) : "(binary)");
    }
    d.arch = a->value;
  }
  if (const Deb822Field* m = field("Multi-Arch"); m != nullptr) {
    d.multi_arch = m->value;
  }
  if (const Deb822Field* c = field("Conffiles"); c != nullptr) {
    LS_TRY_ASSIGN(d.conffiles,
                  parse_conffiles(c->value, fmt::format("{}:{}: package {}", what, c->line, d.name)));
  }
  return d;
}

// /var/lib/dpkg/diversions: three lines per diversion (from, to, package).
Result<std::map<std::string, Diversion>> parse_diversions(std::string_view text, const std::string& what) {
  std::map<std::string, Diversion> out;
  std::vector<std::string_view> lines = lines_of(text);
  if (lines.size() % 3 != 0) {
    return invalid_input("{}: {} lines, not a multiple of 3 (from, to, package)", what, lines.size());
  }
  for (std::size_t i = 0; i < lines.size(); i += 3) {
    if (lines[i].empty() || lines[i].front() != '/' || lines[i + 1].empty() || lines[i + 1].front() != '/' ||
        !image_path("", lines[i]) || !image_path("", lines[i + 1])) {
      return invalid_input("{}:{}: a diversion is two absolute paths and a package", what, i + 1);
    }
    out[std::string(lines[i])] = Diversion{std::string(lines[i + 1]), std::string(lines[i + 2])};
  }
  return out;
}

// Name and version of a .dist-info directory: METADATA's, else its own name ("demo-1.0.dist-info").
void read_dist(const ImageContents& contents, InstalledDist& dist) {
  const std::string base = dist.dir.substr(dist.dir.rfind('/') + 1);
  const std::string stem = base.substr(0, base.size() - std::string_view(".dist-info").size());
  const std::size_t dash = stem.find('-');
  dist.name = stem.substr(0, dash);
  dist.version = dash == std::string::npos ? std::string() : stem.substr(dash + 1);
  if (const std::string* text = contents.text(dist.dir + "/METADATA")) {
    if (auto headers = parse_email_headers(*text, dist.dir + "/METADATA")) {
      for (const auto& [k, v] : *headers) {
        if (k == "Name" && !v.empty() && v.size() <= k_max_name && !has_controls(v)) {
          dist.name = v;
        } else if (k == "Version" && !v.empty() && v.size() <= k_max_version && !has_controls(v)) {
          dist.version = v;
        }
      }
    }
  }
  if (const std::string* text = contents.text(dist.dir + "/INSTALLER")) {
    std::string first = text->substr(0, std::min(text->find('\n'), std::size_t{64}));
    dist.installer = !has_controls(first) ? std::string(deb822_trim(first)) : std::string();
  }
  dist.project = normalize_project_name(dist.name);
}

// Calls fn(name, locked or null, installed or null) for every name of either map, in name order:
// the join of a lock's packages with an image's by name.
template <typename Locked, typename Installed, typename Fn>
void for_each_by_name(const std::map<std::string, const Locked*>& locked,
                      const std::map<std::string, const Installed*>& installed, Fn&& fn) {
  auto l = locked.begin();
  auto i = installed.begin();
  while (l != locked.end() || i != installed.end()) {
    if (i == installed.end() || (l != locked.end() && l->first < i->first)) {
      fn(l->first, l->second, static_cast<const Installed*>(nullptr));
      ++l;
    } else if (l == locked.end() || i->first < l->first) {
      fn(i->first, static_cast<const Locked*>(nullptr), i->second);
      ++i;
    } else {
      fn(l->first, l->second, i->second);
      ++l;
      ++i;
    }
  }
}

// The lock's conda packages against the image's conda-meta records, by name.
void compare_conda_with_lock(const envspec::Lock& lock, const ImagePackages& packages,
                             std::vector<VerifyProblem>& out) {
  std::map<std::string, const envspec::LockedArtifact*> locked;
  std::map<std::string, const InstalledConda*> installed;
  for (const auto& a : lock.artifacts) {
    if (a.kind == "conda" && a.conda) {
      locked.emplace(a.name, &a);
    }
  }
  for (const InstalledConda& c : packages.condas) {
    installed.emplace(c.name, &c);
  }
  for_each_by_name(locked, installed,
                   [&](const std::string& n, const envspec::LockedArtifact* l, const InstalledConda* i) {
                     if (l != nullptr && i != nullptr) {
                       const std::string want = l->version + "=" + l->conda->build;
                       const std::string have = i->version + "=" + i->build;
                       if (want != have) {
                         out.push_back({Kind::conda_changed, n, "",
                                        fmt::format("conda {}: lock says {}, image has {}", n, want, have)});
                       }
                     } else if (l != nullptr) {
                       out.push_back({Kind::conda_missing, n, "",
                                      fmt::format("conda {}: lock says {}={}, not installed", n, l->version,
                                                  l->conda->build)});
                     } else {
                       out.push_back({Kind::conda_extra, n, "",
                                      fmt::format("conda {}: installed ({}={}, /{}), not in the lock", n,
                                                  i->version, i->build, i->record)});
                     }
                   });
}

// The lock's debs and wheels against what the image has installed.
// Over an image base (the lock records one), what the base had installed counts as the lock's: the
// dpkg status and the .dist-info directories after the base's layers (dev.lockstep.base.layers).
void compare_with_lock(const envspec::Lock& lock, const ImagePackages& packages,
                       const ImageContents& contents, std::vector<VerifyProblem>& out) {
  std::map<std::pair<std::string, std::string>, std::string> base_debs; // (name, arch) -> version
  const bool over_base = lock.base.has_value();
  if (over_base && contents.base_dpkg_status) {
    if (auto base = parse_dpkg_status(*contents.base_dpkg_status, "the base image's dpkg status")) {
      for (const InstalledPackage& i : *base) {
        if (i.installed()) {
          base_debs[{i.package.name, i.package.architecture}] = i.package.version.str();
        }
      }
    }
  }
  // Debs: matched by (name, arch), then by name alone (a changed architecture).
  std::map<std::pair<std::string, std::string>, const envspec::LockedArtifact*> locked;
  std::map<std::pair<std::string, std::string>, const InstalledDeb*> installed;
  for (const auto& a : lock.artifacts) {
    if (a.kind == "deb") {
      locked.emplace(std::make_pair(a.name, a.arch), &a);
    }
  }
  for (const InstalledDeb& d : packages.debs) {
    if (d.installed()) {
      installed.emplace(std::make_pair(d.name, d.arch), &d);
    }
  }
  std::vector<VerifyProblem> debs;
  for (auto it = locked.begin(); it != locked.end();) {
    auto match = installed.find(it->first);
    if (match != installed.end()) {
      if (!envspec::debian_versions_equal(it->second->version, match->second->version)) {
        debs.push_back({Kind::deb_changed, it->second->name, "",
                        fmt::format("deb {}: lock says {}, image has {}", it->second->name,
                                    it->second->version, match->second->version)});
      }
      installed.erase(match);
      it = locked.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& entry : locked) {
    const envspec::LockedArtifact* a = entry.second;
    auto other = std::find_if(installed.begin(), installed.end(),
                              [&](const auto& i) { return i.first.first == a->name; });
    if (other != installed.end()) {
      debs.push_back({Kind::deb_changed, a->name, "",
                      fmt::format("deb {}: lock says {} ({}), image has {} ({})", a->name, a->version,
                                  a->arch, other->second->version, other->second->arch)});
      installed.erase(other);
    } else {
      debs.push_back({Kind::deb_missing, a->name, "",
                      fmt::format("deb {}: lock says {}, not installed", a->name, a->version)});
    }
  }
  for (const auto& [key, d] : installed) {
    auto in_base = base_debs.find(key);
    if (in_base != base_debs.end() && envspec::debian_versions_equal(in_base->second, d->version)) {
      continue; // the base image's, as it was
    }
    if (in_base != base_debs.end()) {
      debs.push_back({Kind::deb_extra, d->name, "",
                      fmt::format("deb {}: installed ({}), not in the lock, and the base image has {}",
                                  d->name, d->version, in_base->second)});
      continue;
    }
    debs.push_back({Kind::deb_extra, d->name, "",
                    fmt::format("deb {}: installed ({}), not in the lock{}", d->name, d->version,
                                over_base ? " nor in the base image" : "")});
  }
  std::stable_sort(debs.begin(), debs.end(),
                   [](const VerifyProblem& x, const VerifyProblem& y) { return x.package < y.package; });
  out.insert(out.end(), debs.begin(), debs.end());

  // Wheels: by normalised project name; .dist-info directories of Debian packages don't count.
  std::map<std::string, const envspec::LockedArtifact*> wheels;
  std::map<std::string, const InstalledDist*> dists;
  for (const auto& a : lock.artifacts) {
    if (a.kind == "wheel") {
      wheels.emplace(normalize_project_name(a.name), &a);
    }
  }
  for (const InstalledDist& d : packages.dists) {
    if (!d.from_deb && !(over_base && contents.base_dist_infos.count(d.dir) != 0)) {
      dists.emplace(d.project, &d);
    }
  }
  for_each_by_name(
      wheels, dists, [&](const std::string& n, const envspec::LockedArtifact* w, const InstalledDist* d) {
        if (w != nullptr && d != nullptr) {
          if (!envspec::python_versions_equal(w->version, d->version)) {
            out.push_back({Kind::wheel_changed, n, "",
                           fmt::format("wheel {}: lock says {}, image has {}", n, w->version, d->version)});
          }
        } else if (w != nullptr) {
          out.push_back({Kind::wheel_missing, n, "",
                         fmt::format("wheel {}: lock says {}, not installed", n, w->version)});
        } else {
          out.push_back(
              {Kind::wheel_extra, n, "",
               fmt::format("wheel {}: installed ({}, /{}), not in the lock", n, d->version, d->dir)});
        }
      });
  compare_conda_with_lock(lock, packages, out);
}

// Checks one file dpkg recorded for `package`.
void check_deb_file(const ImageContents& contents, const ImagePackages& packages, const std::string& package,
                    std::string path, const std::string& md5, bool conffile, VerifyReport& report) {
  if (auto d = packages.diversions.find(path); d != packages.diversions.end() && d->second.by != package) {
    path = d->second.to;
  }
  ++report.files;
  const std::string what = conffile ? "conffile " : "";
  const ImageEntry* e = contents.resolve(path, FollowLast::yes);
  if (e == nullptr) {
    report.problems.push_back({Kind::file_missing, package, path,
                               fmt::format("{}: {}missing (in {}'s record)", path, what, package)});
  } else if (e->type != ImageEntry::Type::file) {
    report.problems.push_back(
        {Kind::file_type, package, path,
         fmt::format("{}: not a regular file ({}'s record lists a {}file)", path, package, what)});
  } else if (hex_of(e->md5.data(), e->md5.size()) != md5) {
    report.problems.push_back(
        {Kind::md5, package, path, fmt::format("{}: {}md5 differs from {}'s record", path, what, package)});
  }
}

// One RECORD row with a hash, and the image path it names.
struct RecordRow {
  const RecordEntry* row = nullptr;
  std::string path;
};

// The hashed rows of one .dist-info directory's RECORD; nullopt when it has no RECORD.
Result<std::optional<std::vector<RecordRow>>>
record_rows(const ImageContents& contents, const InstalledDist& dist, std::vector<RecordEntry>& storage) {
  const std::string record_path = dist.dir + "/RECORD";
  const std::string* text = contents.text(record_path);
  if (text == nullptr) {
    return std::optional<std::vector<RecordRow>>();
  }
  const std::string where = located(contents, record_path);
  Result<std::vector<RecordEntry>> parsed = parse_record(*text, where);
  if (!parsed) {
    return sanitized(std::move(parsed).error());
  }
  storage = std::move(*parsed);
  const std::string site =
      dist.dir.substr(0, dist.dir.rfind('/') == std::string::npos ? 0 : dist.dir.rfind('/'));
  std::vector<RecordRow> out;
  for (std::size_t i = 0; i < storage.size(); ++i) {
    const RecordEntry& row = storage[i];
    if (!row.hash) {
      continue; // RECORD itself, signatures: pip skips them too
    }
    if (row.path.find('\0') != std::string::npos || row.path.size() > 4096) {
      return invalid_input("{}: entry {}: not a valid path", where, i + 1);
    }
    std::optional<std::string> path = image_path(site, row.path);
    if (!path || path->empty()) {
      return invalid_input("{}: entry {} ('{}') points outside the image", where, i + 1,
                           !has_controls(row.path) ? row.path.substr(0, 200) : "(binary)");
    }
    out.push_back({&row, std::move(*path)});
  }
  return std::optional<std::vector<RecordRow>>(std::move(out));
}

// Checks every RECORD row with a hash of one .dist-info directory.
Result<void> check_record(const ImageContents& contents, const InstalledDist& dist, VerifyReport& report) {
  std::vector<RecordEntry> storage;
  LS_TRY_ASSIGN(const std::optional<std::vector<RecordRow>> rows, record_rows(contents, dist, storage));
  if (!rows) {
    return {};
  }
  ++report.wheels;
  const std::string package = fmt::format("{} {}", dist.name, dist.version);
  for (const RecordRow& r : *rows) {
    const RecordEntry& row = *r.row;
    const std::string shown = "/" + r.path;
    ++report.files;
    const ImageEntry* e = contents.resolve(r.path, FollowLast::yes);
    if (e == nullptr) {
      report.problems.push_back(
          {Kind::file_missing, package, shown, fmt::format("{}: missing (in {}'s RECORD)", shown, package)});
    } else if (e->type != ImageEntry::Type::file) {
      report.problems.push_back(
          {Kind::file_type, package, shown,
           fmt::format("{}: not a regular file ({}'s RECORD lists a file)", shown, package)});
    } else if (!e->has_sha256) {
      return internal_error("{}: no SHA-256 was computed for {} (read the image with read_for_verify)",
                            contents.what, shown);
    } else if (hex_of(e->sha256.data(), e->sha256.size()) != row.hash->hex()) {
      const std::string sizes = row.size && *row.size != e->size
                                    ? fmt::format(" ({} bytes, RECORD says {})", e->size, *row.size)
                                    : "";
      report.problems.push_back(
          {Kind::sha256, package, shown,
           fmt::format("{}: sha256 differs from {}'s RECORD{}", shown, package, sizes)});
    } else if (row.size && *row.size != e->size) {
      report.problems.push_back({Kind::size, package, shown,
                                 fmt::format("{}: size differs from {}'s RECORD ({} bytes, RECORD says {})",
                                             shown, package, e->size, *row.size)});
    }
  }
  return {};
}

// Checks one conda package's paths_data: files by sha256 and size, soft links by type. A path
// other packages' records list too (`owners`: path -> the records listing it) was clobbered by one
// of them, as conda's path_conflict allows: it is right when it matches any of their records.
void check_conda(const ImageContents& contents, const InstalledConda& c,
                 const std::map<std::string_view, std::vector<const CondaMetaPath*>>& owners,
                 VerifyReport& report) {
  ++report.conda;
  const std::string package = fmt::format("{} {}={}", c.name, c.version, c.build);
  for (const CondaMetaPath& p : c.paths) {
    const std::string shown = "/" + p.path;
    if (p.type == "directory") {
      continue;
    }
    ++report.files;
    if (p.type == "softlink") {
      const ImageEntry* e = contents.resolve(p.path, FollowLast::no);
      if (e == nullptr) {
        report.problems.push_back({Kind::file_missing, package, shown,
                                   fmt::format("{}: missing (in {}'s conda-meta record)", shown, package)});
      } else if (e->type != ImageEntry::Type::symlink) {
        report.problems.push_back(
            {Kind::link_type, package, shown,
             fmt::format("{}: not a symbolic link ({}'s conda-meta record lists a soft link)", shown,
                         package)});
      }
      continue;
    }
    const ImageEntry* e = contents.resolve(p.path, FollowLast::yes);
    if (e == nullptr) {
      report.problems.push_back({Kind::file_missing, package, shown,
                                 fmt::format("{}: missing (in {}'s conda-meta record)", shown, package)});
      continue;
    }
    if (e->type != ImageEntry::Type::file) {
      report.problems.push_back(
          {Kind::file_type, package, shown,
           fmt::format("{}: not a regular file ({}'s conda-meta record lists a file)", shown, package)});
      continue;
    }
    const std::string have = e->has_sha256 ? hex_of(e->sha256.data(), e->sha256.size()) : std::string();
    const auto matches = [&](const CondaMetaPath* o) {
      return !have.empty() && o->sha256 == have && (!o->size || *o->size == e->size);
    };
    if (const auto& listed = owners.at(p.path);
        listed.size() > 1 && std::any_of(listed.begin(), listed.end(), matches)) {
      continue; // installed by another package that lists it
    }
    if (!p.sha256.empty() && !have.empty() && have != p.sha256) {
      report.problems.push_back(
          {Kind::sha256, package, shown,
           fmt::format("{}: sha256 differs from {}'s conda-meta record", shown, package)});
    } else if (p.size && *p.size != e->size) {
      report.problems.push_back(
          {Kind::size, package, shown,
           fmt::format("{}: size differs from {}'s conda-meta record ({} bytes, the record says {})", shown,
                       package, e->size, *p.size)});
    }
  }
}

} // namespace

Result<ImagePackages> image_packages(const ImageContents& contents) {
  ImagePackages out;
  out.native_arch = contents.architecture;
  if (const std::string* arch = contents.text("var/lib/dpkg/arch")) {
    std::string first(deb822_trim(arch->substr(0, arch->find('\n'))));
    if (!first.empty() && first.size() <= 64 && !has_controls(first)) {
      out.native_arch = first;
    }
  }
  if (const std::string* status = contents.text("var/lib/dpkg/status")) {
    out.has_dpkg = true;
    const std::string what = located(contents, "var/lib/dpkg/status");
    Result<std::vector<Deb822Paragraph>> parsed = parse_deb822(*status, what);
    if (!parsed) {
      return sanitized(std::move(parsed).error());
    }
    const std::vector<Deb822Paragraph>& paragraphs = *parsed;
    std::set<std::pair<std::string, std::string>> seen;
    for (const Deb822Paragraph& p : paragraphs) {
      LS_TRY_ASSIGN(InstalledDeb d, parse_status_paragraph(p, what));
      if (!seen.emplace(d.name, d.arch).second) {
        return invalid_input("{}:{}: package {}:{} is listed twice", what, d.line, d.name, d.arch);
      }
      // dpkg names the info files NAME:ARCH for Multi-Arch: same packages, NAME otherwise.
      const std::string qualified = "var/lib/dpkg/info/" + d.name + ":" + d.arch + ".md5sums";
      const std::string plain = "var/lib/dpkg/info/" + d.name + ".md5sums";
      const bool same = d.multi_arch == "same";
      for (const std::string& file :
           same ? std::vector<std::string>{qualified, plain} : std::vector<std::string>{plain, qualified}) {
        if (const std::string* md5sums = contents.text(file)) {
          d.md5sums = file;
          LS_TRY_ASSIGN(d.files, parse_md5sums(*md5sums, located(contents, file)));
          break;
        }
      }
      out.debs.push_back(std::move(d));
    }
    std::sort(out.debs.begin(), out.debs.end(), [](const InstalledDeb& a, const InstalledDeb& b) {
      return std::tie(a.name, a.arch) < std::tie(b.name, b.arch);
    });
  }
  if (const std::string* diversions = contents.text("var/lib/dpkg/diversions")) {
    LS_TRY_ASSIGN(out.diversions,
                  parse_diversions(*diversions, located(contents, "var/lib/dpkg/diversions")));
  }
  // The .dist-info directories, and which of them Debian packages installed.
  std::set<std::string> deb_paths;
  for (const InstalledDeb& d : out.debs) {
    for (const DebFile& f : d.files) {
      if (f.path.size() > 9 && f.path.compare(f.path.size() - 9, 9, "/METADATA") == 0) {
        std::string resolved;
        if (contents.resolve(f.path, FollowLast::no, &resolved) != nullptr) {
          deb_paths.insert(resolved);
        }
      }
    }
  }
  constexpr std::string_view suffix = ".dist-info";
  for (const auto& [path, e] : contents.entries()) {
    if (e.type != ImageEntry::Type::directory || path.size() <= suffix.size() ||
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    InstalledDist dist;
    dist.dir = path;
    read_dist(contents, dist);
    dist.from_deb = deb_paths.count(path + "/METADATA") != 0;
    out.dists.push_back(std::move(dist));
  }
  LS_TRY_ASSIGN(out.condas, image_conda_packages(contents));
  return out;
}

envspec::ComponentSet image_components(const ImageContents& contents, const ImagePackages& packages) {
  envspec::ComponentSet set;
  set.kind = "image";
  set.what = contents.what;
  for (const InstalledDeb& d : packages.debs) {
    if (!d.installed()) {
      continue;
    }
    const bool foreign =
        !d.arch.empty() && d.arch != "all" && d.arch != packages.native_arch && !packages.native_arch.empty();
    set.components.push_back({"deb", foreign ? d.name + ":" + d.arch : d.name, d.version, ""});
  }
  for (const InstalledDist& d : packages.dists) {
    if (!d.from_deb) {
      set.components.push_back({"wheel", d.project, d.version, ""});
    }
  }
  for (envspec::Component& c : envspec::stack_components(contents.labels)) {
    set.components.push_back(std::move(c));
  }
  set.coverage["deb"] = envspec::Coverage::complete;
  for (const InstalledConda& c : packages.condas) {
    set.components.push_back({"conda", c.name, c.version + "=" + c.build, ""});
  }
  set.coverage["python"] = envspec::Coverage::complete;
  if (!packages.condas.empty()) {
    set.coverage["conda"] = envspec::Coverage::complete; // compared where the image has an environment
  }
  set.coverage["stack"] = envspec::Coverage::complete;
  set.architecture = contents.architecture;
  (void)set.finish();
  return set;
}

namespace {

// "lock-digest", "deb-missing", ... (the JSON form).
std::string_view problem_kind_name(VerifyProblem::Kind kind) {
  switch (kind) {
  case Kind::lock_digest:
    return "lock-digest";
  case Kind::lock_platform:
    return "lock-platform";
  case Kind::deb_missing:
    return "deb-missing";
  case Kind::deb_extra:
    return "deb-extra";
  case Kind::deb_changed:
    return "deb-changed";
  case Kind::deb_state:
    return "deb-state";
  case Kind::wheel_missing:
    return "wheel-missing";
  case Kind::wheel_extra:
    return "wheel-extra";
  case Kind::wheel_changed:
    return "wheel-changed";
  case Kind::conda_missing:
    return "conda-missing";
  case Kind::conda_extra:
    return "conda-extra";
  case Kind::conda_changed:
    return "conda-changed";
  case Kind::link_type:
    return "not-a-link";
  case Kind::file_missing:
    return "missing";
  case Kind::file_type:
    return "not-a-file";
  case Kind::md5:
    return "md5";
  case Kind::sha256:
    return "sha256";
  case Kind::size:
    return "size";
  }
  return "unknown";
}

} // namespace

Result<VerifyReport> verify_contents(const ImageContents& contents, const VerifyOptions& options) {
  if (!contents.has_digests) {
    return internal_error("verify_contents: the image was read without digests");
  }
  VerifyReport report;
  report.image = contents.what;
  report.digest = contents.digest;
  report.lock = options.lock != nullptr ? options.lock_name : std::string();
  LS_TRY_ASSIGN(const ImagePackages packages, image_packages(contents));

  // 1. The lock: digest, then the package sets.
  const envspec::Lock* lock = options.lock;
  std::optional<envspec::Lock> share; // a multi-platform lock: the image's platform's share
  if (lock != nullptr && !lock->platforms.empty()) {
    share = envspec::lock_share_for_arch(*lock, contents.architecture);
    if (share) {
      report.lock_platform = share->platform;
      lock = &*share;
    } else {
      report.problems.push_back(
          {Kind::lock_platform, "", "",
           fmt::format("the image is for {}, {} is for {}: verify the image of one of those platforms "
                       "(--platform for an index)",
                       contents.architecture.empty() ? std::string("an unknown architecture")
                                                     : "architecture " + contents.architecture,
                       options.lock_name, fmt::join(lock->platforms, ", "))});
      lock = nullptr;
    }
  }
  if (lock != nullptr) {
    const std::string want = envspec::lock_digest(*lock).str();
    if (!contents.lock_digest.empty() && contents.lock_digest != want) {
      report.problems.push_back(
          {Kind::lock_digest, "", "",
           fmt::format("image was built from a different lock (the image records {}, {} is {})",
                       !has_controls(contents.lock_digest) ? contents.lock_digest.substr(0, 80) : "(binary)",
                       options.lock_name, want)});
    }
    compare_with_lock(*lock, packages, contents, report.problems);
  }

  // 2. dpkg's records, package by package.
  for (const InstalledDeb& d : packages.debs) {
    if (!d.installed()) {
      if ((d.want == "install" || d.want == "hold") && d.state != "not-installed" &&
          d.state != "config-files") {
        report.problems.push_back(
            {Kind::deb_state, d.name, "",
             fmt::format("deb {}: not fully installed (Status: {} ok {})", d.name, d.want, d.state)});
      }
      continue;
    }
    ++report.debs;
    std::set<std::string> conffiles;
    for (const Conffile& c : d.conffiles) {
      if (c.obsolete || c.md5.empty()) {
        continue;
      }
      check_deb_file(contents, packages, d.name, c.path, c.md5, true, report);
      conffiles.insert(c.path);
    }
    for (const DebFile& f : d.files) {
      const std::string path = "/" + f.path;
      if (conffiles.count(path) == 0) {
        check_deb_file(contents, packages, d.name, path, f.md5, false, report);
      }
    }
  }

  // 3. conda's records, package by package.
  std::map<std::string_view, std::vector<const CondaMetaPath*>> owners;
  for (const InstalledConda& c : packages.condas) {
    for (const CondaMetaPath& p : c.paths) {
      owners[p.path].push_back(&p);
    }
  }
  for (const InstalledConda& c : packages.condas) {
    check_conda(contents, c, owners, report);
  }

  // 4. pip's records.
  // A Debian package's .dist-info is covered by its md5sums; its RECORD (when it ships one) is
  // Debian's, not pip's, and not always in pip's format (hex digests), so it is not read.
  for (const InstalledDist& dist : packages.dists) {
    if (!dist.from_deb) {
      LS_TRY(check_record(contents, dist, report));
    }
  }
  return report;
}

Result<ImageContents> read_for_verify(const ImageArg& image) {
  LS_TRY_ASSIGN(ImageContents contents, read_image_contents(image));
  // The files a RECORD names outside the paths hashed with SHA-256 (a wheel's data files): one
  // more read of the image for them. Malformed records are left for verify_contents to report.
  std::set<std::string> missing;
  auto packages = image_packages(contents);
  if (packages) {
    for (const InstalledDist& dist : packages->dists) {
      std::vector<RecordEntry> storage;
      if (dist.from_deb) {
        continue;
      }
      auto rows = record_rows(contents, dist, storage);
      if (!rows || !*rows) {
        continue;
      }
      for (const RecordRow& r : **rows) {
        std::string real;
        const ImageEntry* e = contents.resolve(r.path, FollowLast::yes, &real);
        if (e != nullptr && e->type == ImageEntry::Type::file && !e->has_sha256) {
          missing.insert(real); // the path the file is stored at (a RECORD may name it through a link)
        }
      }
    }
  }
  if (packages) {
    for (const InstalledConda& c : packages->condas) {
      for (const CondaMetaPath& p : c.paths) {
        std::string real;
        const ImageEntry* e = p.sha256.empty() || p.type == "softlink" || p.type == "directory"
                                  ? nullptr
                                  : contents.resolve(p.path, FollowLast::yes, &real);
        if (e != nullptr && e->type == ImageEntry::Type::file && !e->has_sha256) {
          missing.insert(real);
        }
      }
    }
  }
  if (missing.empty()) {
    return contents;
  }
  log::debug("verify: {} file(s) named by a RECORD need a SHA-256; reading the image again", missing.size());
  ContentsOptions again;
  again.sha256_paths = &missing;
  LS_TRY_ASSIGN(const ImageContents second, read_image_contents(image, again));
  for (auto& [path, e] : contents.mutable_entries()) {
    if (e.type != ImageEntry::Type::file || e.has_sha256) {
      continue;
    }
    const auto& entries = second.entries();
    if (auto it = entries.find(path); it != entries.end() && it->second.has_sha256) {
      e.sha256 = it->second.sha256;
      e.has_sha256 = true;
    }
  }
  return contents;
}

std::string render_verify_text(const VerifyReport& report) {
  std::string out;
  for (const VerifyProblem& p : report.problems) {
    out += p.message + "\n";
  }
  std::string subject = report.image;
  if (report.digest) {
    subject += " (" + report.digest->str() + ")";
  }
  const std::size_t packages = report.debs + report.wheels + report.conda;
  const std::string conda = report.conda == 0 ? std::string() : fmt::format(", {} conda", report.conda);
  out += fmt::format("{}: {} package{} ({} deb{}, {} wheel{}{}), {} file{} checked{}: ", subject, packages,
                     packages == 1 ? "" : "s", report.debs, report.debs == 1 ? "" : "s", report.wheels,
                     report.wheels == 1 ? "" : "s", conda, report.files, report.files == 1 ? "" : "s",
                     report.lock.empty() ? std::string()
                     : report.lock_platform.empty()
                         ? " against " + report.lock
                         : fmt::format(" against {} ({})", report.lock, report.lock_platform));
  out += report.ok()
             ? "ok\n"
             : fmt::format("{} problem{}\n", report.problems.size(), report.problems.size() == 1 ? "" : "s");
  return out;
}

nlohmann::ordered_json verify_json(const VerifyReport& report) {
  ordered problems = ordered::array();
  for (const VerifyProblem& p : report.problems) {
    problems.push_back(ordered{{"kind", problem_kind_name(p.kind)},
                               {"package", p.package.empty() ? ordered(nullptr) : ordered(p.package)},
                               {"path", p.path.empty() ? ordered(nullptr) : ordered(p.path)},
                               {"message", p.message}});
  }
  return ordered{
      {"verify", 1},
      {"image", report.image},
      {"digest", report.digest ? ordered(report.digest->str()) : ordered(nullptr)},
      {"lock", report.lock.empty() ? ordered(nullptr) : ordered(report.lock)},
      {"lock-platform", report.lock_platform.empty() ? ordered(nullptr) : ordered(report.lock_platform)},
      {"ok", report.ok()},
      {"checked", ordered{{"debs", report.debs},
                          {"wheels", report.wheels},
                          {"conda", report.conda},
                          {"files", report.files}}},
      {"problems", std::move(problems)}};
}

} // namespace lockstep::runner
