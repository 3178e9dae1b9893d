#include "builder/image/wheel_install.hpp"

#include "support/base/interrupt.hpp"
#include "support/codec/digest.hpp"
#include "support/python/wheel_archive.hpp"
#include "support/system/fs.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <map>
#include <optional>
#include <utility>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t k_max_member_size = 16LL << 30;
constexpr std::uint64_t k_max_total_size = 64ULL << 30;
constexpr std::size_t k_max_script_in_memory = 16U << 20;
constexpr std::size_t k_chunk = 1U << 20;
constexpr std::string_view k_installer = "lockstep\n";
constexpr std::string_view k_python_shebang = "#!python";

// ---- paths ---------------------------------------------------------------------------------------

Result<void> check_target_dir(std::string_view value, std::string_view field) {
  bool ok = !value.empty() && value.front() != '/' && value.back() != '/';
  std::size_t i = 0;
  while (ok && i <= value.size()) {
    std::size_t j = value.find('/', i);
    j = j == std::string_view::npos ? value.size() : j;
    std::string_view comp = value.substr(i, j - i);
    ok = !comp.empty() && comp != "." && comp != "..";
    i = j + 1;
  }
  if (!ok) {
    return invalid_input("wheel target {} '{}' must be a relative path inside the image (like usr/local/bin)",
                         field, value);
  }
  return {};
}

/// Depth-first order with names sorted bytewise in each directory: '/' sorts before every byte.
bool tree_less(const std::string& a, const std::string& b) {
  std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    int ca = a[i] == '/' ? 0 : static_cast<unsigned char>(a[i]) + 1;
    int cb = b[i] == '/' ? 0 : static_cast<unsigned char>(b[i]) + 1;
    if (ca != cb) {
      return ca < cb;
    }
  }
  return a.size() < b.size();
}

/// `path` relative to the directory `base` (both clean relative paths), with "../" as needed.
std::string relative_to(const std::string& path, const std::string& base) {
  auto components = [](const std::string& s) {
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i <= s.size()) {
      std::size_t j = s.find('/', i);
      j = j == std::string::npos ? s.size() : j;
      out.push_back(s.substr(i, j - i));
      i = j + 1;
    }
    return out;
  };
  auto p = components(path);
  auto b = components(base);
  std::size_t common = 0;
  while (common < p.size() - 1 && common < b.size() && p[common] == b[common]) {
    ++common;
  }
  std::string out;
  for (std::size_t k = common; k < b.size(); ++k) {
    out += "../";
  }
  for (std::size_t k = common; k < p.size(); ++k) {
    out += p[k];
    if (k + 1 < p.size()) {
      out += '/';
    }
  }
  return out;
}

std::string default_headers_dir(const WheelTarget& target, const std::string& name) {
  std::string python = "python3";
  std::size_t i = 0;
  const std::string& sp = target.site_packages;
  while (i <= sp.size()) {
    std::size_t j = sp.find('/', i);
    j = j == std::string::npos ? sp.size() : j;
    std::string comp = sp.substr(i, j - i);
    if (comp.rfind("python3.", 0) == 0) {
      python = comp;
      break;
    }
    i = j + 1;
  }
  return target.data_dir + "/include/" + python + "/" + name;
}

bool valid_script_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.size() <= 255 &&
         std::none_of(name.begin(), name.end(), [](char c) {
           auto u = static_cast<unsigned char>(c);
           return u < 0x20 || u == 0x7f || c == '/' || c == '\\';
         });
}

// ---- the plan ------------------------------------------------------------------------------------

struct Member {
  std::string name;
  std::int64_t size = 0;
  bool executable = false;
  std::optional<std::string> data; ///< read during the listing
};

/// One tar member to write.
struct Output {
  std::string path;
  bool is_dir = false;
  std::uint32_t mode = 0644;
  std::uint64_t size = 0;
  std::optional<std::size_t> member; ///< data comes from this zip member (verified on the way)
  std::string data;                  ///< otherwise, this content
  Digest expected;                   ///< the member's RECORD hash
};

bool is_dist_info_text(const std::string& rest) {
  return rest == "RECORD" || rest == "WHEEL" || rest == "METADATA" || rest == "entry_points.txt";
}

Error record_mismatch(const std::string& what, const std::string& member, std::string_view why) {
  return invalid_input("{}: {} does not match the wheel's RECORD ({}); the wheel was modified or is corrupt",
                       what, member, why);
}

Result<void> verify_data(const std::string& data, const Output& out, const std::string& member,
                         const std::string& what) {
  if (data.size() != out.size) {
    return record_mismatch(what, member, fmt::format("{} bytes, RECORD says {}", data.size(), out.size));
  }
  Digest actual = sha256_of(data);
  if (actual != out.expected) {
    return record_mismatch(what, member,
                           fmt::format("sha256 {} instead of {}", actual.hex(), out.expected.hex()));
  }
  return {};
}

/// Reads the current member's data, verifying size and hash; `sink` gets each chunk before the
/// check at the end.
template <typename Sink>
Result<void> read_verified(ZipReader& zip, const Output& out, const std::string& member,
                           const std::string& what, std::vector<char>& buf, Sink&& sink) {
  Sha256 hash;
  std::uint64_t total = 0;
  for (;;) {
    throw_if_interrupted();
    LS_TRY_ASSIGN(std::size_t n, zip.read(buf.data(), buf.size(), member));
    if (n == 0) {
      break;
    }
    if (total + n > out.size) {
      return record_mismatch(what, member, fmt::format("more than the {} bytes RECORD says", out.size));
    }
    total += n;
    hash.update(buf.data(), n);
    sink(buf.data(), n);
  }
  if (total != out.size) {
    return record_mismatch(what, member, fmt::format("{} bytes, RECORD says {}", total, out.size));
  }
  Digest actual = hash.finish();
  if (actual != out.expected) {
    return record_mismatch(what, member,
                           fmt::format("sha256 {} instead of {}", actual.hex(), out.expected.hex()));
  }
  return {};
}

TarEntry tar_entry(const Output& out, std::int64_t epoch) {
  TarEntry e;
  e.path = out.path;
  e.type = out.is_dir ? TarEntry::Type::dir : TarEntry::Type::file;
  e.mode = out.mode;
  e.mtime = epoch;
  e.size = out.is_dir ? 0 : static_cast<std::int64_t>(out.size);
  return e;
}

/// The console_scripts/gui_scripts wrapper pip writes for `entry` (distlib's template), with
/// `#!python`.
std::string entry_point_script(const EntryPoint& entry, std::string_view python) {
  std::string import_name = entry.attr.substr(0, entry.attr.find('.'));
  return fmt::format("#!{}\n"
                     "# -*- coding: utf-8 -*-\n"
                     "import re\n"
                     "import sys\n"
                     "from {} import {}\n"
                     "if __name__ == '__main__':\n"
                     "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                     "    sys.exit({}())\n",
                     python, entry.module, import_name, entry.attr);
}

// ---- the passes ----------------------------------------------------------------------------------

/// A zip member name split at its first '/': ("demo-1.0.dist-info", "RECORD").
std::pair<std::string, std::string> split_first(const std::string& name) {
  auto slash = name.find('/');
  return {name.substr(0, slash), slash == std::string::npos ? std::string() : name.substr(slash + 1)};
}

bool is_dist_info_dir(const std::string& dir) {
  return dir.size() > 10 && dir.substr(dir.size() - 10) == ".dist-info";
}

bool is_data_dir(const std::string& dir) {
  return dir.size() > 5 && dir.substr(dir.size() - 5) == ".data";
}

/// One wheel being installed: what each pass of install_wheel learns, for the passes after it.
struct WheelInstall {
  WheelInstall(const fs::path& whl_, const WheelTarget& target_, const std::string& what_)
      : whl(whl_), target(target_), what(what_) {}

  const fs::path& whl;
  const WheelTarget& target;
  const std::string& what;
  // list_members
  std::vector<Member> members;
  std::map<std::string, std::size_t> by_name; ///< member name -> index in members
  std::set<std::string> top_level;            ///< first components of the member names
  // name_distribution, read_dist_info
  std::string dist_info;   ///< "NAME-VERSION.dist-info"
  std::string data_prefix; ///< "NAME-VERSION.data"
  std::vector<RecordEntry> record;
  std::vector<EntryPoint> entry_points;
  WheelInstallInfo info;
  // check_record
  std::set<std::string> unrecorded; ///< RECORD and its signatures, which RECORD does not list
  std::map<std::string, const RecordEntry*> recorded;
  // plan_*
  std::vector<Output> outputs;
  std::map<std::string, std::size_t> output_of;        ///< tar path -> index in outputs
  std::map<std::size_t, std::size_t> output_of_member; ///< member index -> index in outputs
};

Result<void> check_target(const WheelTarget& target) {
  LS_TRY(check_target_dir(target.site_packages, "site_packages"));
  LS_TRY(check_target_dir(target.scripts_dir, "scripts_dir"));
  LS_TRY(check_target_dir(target.data_dir, "data_dir"));
  if (!target.headers_dir.empty()) {
    LS_TRY(check_target_dir(target.headers_dir, "headers_dir"));
  }
  if (target.python.empty() || target.python.front() != '/' || target.python.size() > 127 ||
      std::any_of(target.python.begin(), target.python.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    return invalid_input(
        "wheel target python '{}' must be an absolute path without spaces, at most 127 bytes", target.python);
  }
  return {};
}

/// The member `entry` named `name`, refused when unsafe; nullopt for a directory (implied by the
/// files). `total_size` adds up the members so far.
Result<std::optional<Member>> check_member(struct archive_entry* entry, const std::string& name,
                                           const WheelInstall& w, std::uint64_t& total_size) {
  const std::string& what = w.what;
  if (archive_entry_is_encrypted(entry) != 0) {
    return invalid_input("{}: zip member '{}' is encrypted; refusing the wheel", what, name);
  }
  auto type = archive_entry_filetype(entry);
  if (type == AE_IFDIR) {
    return std::optional<Member>();
  }
  if (type == AE_IFLNK) {
    return invalid_input("{}: zip member '{}' is a symbolic link; refusing the wheel", what, name);
  }
  if (type != AE_IFREG) {
    return invalid_input("{}: zip member '{}' is not a regular file; refusing the wheel", what, name);
  }
  if (w.by_name.count(name) != 0) {
    return invalid_input("{}: zip member '{}' appears twice; refusing the wheel", what, name);
  }
  Member m;
  m.name = name;
  m.size = archive_entry_size_is_set(entry) != 0 ? archive_entry_size(entry) : -1;
  if (m.size < 0 || m.size > k_max_member_size) {
    return invalid_input("{}: zip member '{}' has no size or is larger than 16 GiB; refusing the wheel", what,
                         name);
  }
  total_size += static_cast<std::uint64_t>(m.size);
  if (total_size > k_max_total_size) {
    return invalid_input("{}: the members add up to more than 64 GiB; refusing the wheel", what);
  }
  m.executable = (archive_entry_perm(entry) & 0111) != 0;
  return std::optional<Member>(std::move(m));
}

/// Reads the current member into `m.data` now when it is a .dist-info file lockstep parses, or a
/// script whose `#!python` line is rewritten (others stream like any member). `script_bytes` adds
/// up the scripts held.
Result<void> read_early(ZipReader& zip, Member& m, std::size_t& script_bytes, const std::string& what) {
  auto [first, rest] = split_first(m.name);
  if (is_dist_info_dir(first) && is_dist_info_text(rest)) {
    LS_TRY_ASSIGN(m.data, read_whole(zip, m.name, m.size, k_max_dist_info_file, what));
  } else if (is_data_dir(first) && rest.rfind("scripts/", 0) == 0) {
    LS_TRY_ASSIGN(std::string head, read_up_to(zip, m.name, k_python_shebang.size()));
    if (head == k_python_shebang) {
      LS_TRY_ASSIGN(std::string tail, read_up_to(zip, m.name, k_max_script_in_memory));
      script_bytes += head.size() + tail.size();
      if (script_bytes > k_max_script_in_memory) {
        return invalid_input("{}: the '#!python' scripts add up to more than {} bytes; refusing the wheel",
                             what, k_max_script_in_memory);
      }
      m.data = head + tail;
    }
  }
  return {};
}

// Pass 1: list the members; read the .dist-info text files and small scripts now.
Result<void> list_members(WheelInstall& w) {
  LS_TRY_ASSIGN(ZipReader zip, ZipReader::open(w.whl, w.what));
  MemberListing listing(zip, w.what);
  std::uint64_t total_size = 0;
  std::size_t script_bytes = 0;
  for (;;) {
    LS_TRY_ASSIGN(MemberListing::Listed listed, listing.next());
    auto& [entry, name] = listed;
    if (entry == nullptr) {
      return {};
    }
    w.top_level.insert(name.substr(0, name.find('/')));
    LS_TRY_ASSIGN(std::optional<Member> m, check_member(entry, name, w, total_size));
    if (!m) {
      continue;
    }
    LS_TRY(read_early(zip, *m, script_bytes, w.what));
    w.by_name.emplace(name, w.members.size());
    w.members.push_back(std::move(*m));
  }
}

// Pass 2a: the one .dist-info directory names the distribution (project and version); the wheel's
// file name, when it is one, must agree, and the only .data directory allowed is its twin.
Result<std::pair<std::string, PyVersion>> name_distribution(WheelInstall& w) {
  const std::string& what = w.what;
  std::vector<std::string> dist_infos;
  std::copy_if(w.top_level.begin(), w.top_level.end(), std::back_inserter(dist_infos), is_dist_info_dir);
  if (dist_infos.size() != 1) {
    return invalid_input("{}: expected exactly one .dist-info directory, found {}; not a valid wheel", what,
                         dist_infos.size());
  }
  w.dist_info = dist_infos.front();
  const std::string stem = w.dist_info.substr(0, w.dist_info.size() - 10);
  w.data_prefix = stem + ".data";
  auto dash = stem.rfind('-'); // the version has no '-' in a dist-info name; old names may
  if (dash == std::string::npos) {
    return invalid_input("{}: .dist-info directory '{}' is not NAME-VERSION.dist-info", what, w.dist_info);
  }
  auto version = PyVersion::parse(stem.substr(dash + 1));
  if (!version) {
    return invalid_input("{}: .dist-info directory '{}': {}", what, w.dist_info, version.error().message);
  }
  std::string project = normalize_project_name(stem.substr(0, dash));
  for (const auto& name : {what, w.whl.filename().string()}) {
    if (auto wn = WheelName::parse(name)) {
      if (wn->project != project || wn->version != *version) {
        return invalid_input("{}: the wheel contains {}, which is not {} {}", what, w.dist_info, wn->project,
                             wn->version.str());
      }
      break;
    }
  }
  for (const auto& t : w.top_level) {
    if (is_data_dir(t) && t != w.data_prefix) {
      return invalid_input("{}: unexpected data directory '{}' (expected {})", what, t, w.data_prefix);
    }
  }
  return std::make_pair(std::move(project), *version);
}

// Pass 2b: WHEEL, METADATA (naming the same distribution), RECORD and entry_points.txt.
Result<void> read_dist_info(WheelInstall& w, const std::string& project, const PyVersion& version) {
  const std::string& what = w.what;
  auto text_of = [&](const std::string& file) -> const std::string* {
    auto it = w.by_name.find(w.dist_info + "/" + file);
    return it == w.by_name.end() || !w.members[it->second].data ? nullptr : &*w.members[it->second].data;
  };
  const std::string* wheel_text = text_of("WHEEL");
  const std::string* metadata_text = text_of("METADATA");
  const std::string* record_text = text_of("RECORD");
  if (wheel_text == nullptr || metadata_text == nullptr || record_text == nullptr) {
    return invalid_input("{}: {} has no {}; not a valid wheel", what, w.dist_info,
                         wheel_text == nullptr      ? "WHEEL"
                         : metadata_text == nullptr ? "METADATA"
                                                    : "RECORD");
  }
  const std::string where = what + ": " + w.dist_info + "/";
  WheelInstallInfo& info = w.info;
  LS_TRY_ASSIGN(info.wheel, parse_wheel_info(*wheel_text, where + "WHEEL"));
  if (info.wheel.version_minor > 0) {
    log::warn("{}: wheel format version 1.{} is newer than 1.0; installing it anyway", what,
              info.wheel.version_minor);
  }
  LS_TRY_ASSIGN(info.metadata, parse_core_metadata(*metadata_text, where + "METADATA"));
  if (info.metadata.project != project || info.metadata.version != version) {
    return invalid_input("{}: METADATA says {} {}, but the .dist-info directory is {}", what,
                         info.metadata.name, info.metadata.version.str(), w.dist_info);
  }
  info.project = project;
  info.version = version;
  LS_TRY_ASSIGN(w.record, parse_record(*record_text, where + "RECORD"));
  if (const std::string* eps = text_of("entry_points.txt")) {
    LS_TRY_ASSIGN(w.entry_points, parse_entry_points(*eps, where + "entry_points.txt"));
  }
  return {};
}

// Pass 3: every member is in RECORD with its hash and size, and every RECORD row is a member.
Result<void> check_record(WheelInstall& w) {
  const std::string& what = w.what;
  w.unrecorded = {w.dist_info + "/RECORD", w.dist_info + "/RECORD.jws", w.dist_info + "/RECORD.p7s"};
  for (const auto& row : w.record) {
    if (!w.recorded.emplace(row.path, &row).second) {
      return invalid_input("{}: RECORD lists {} twice", what, row.path);
    }
    if (w.by_name.count(row.path) == 0) {
      return invalid_input("{}: RECORD lists {}, which is not in the wheel", what, row.path);
    }
  }
  for (const auto& m : w.members) {
    if (w.unrecorded.count(m.name) != 0) {
      continue;
    }
    auto it = w.recorded.find(m.name);
    if (it == w.recorded.end()) {
      return invalid_input("{}: {} is not listed in the wheel's RECORD; refusing the wheel", what, m.name);
    }
    if (!it->second->hash || !it->second->size) {
      return invalid_input("{}: RECORD has no hash or size for {}; refusing the wheel", what, m.name);
    }
    if (*it->second->size != static_cast<std::uint64_t>(m.size)) {
      return record_mismatch(what, m.name,
                             fmt::format("{} bytes, RECORD says {}", m.size, *it->second->size));
    }
  }
  return {};
}

Result<void> add_output(WheelInstall& w, Output out) {
  if (!w.output_of.emplace(out.path, w.outputs.size()).second) {
    return invalid_input("{}: two members would be installed as /{}", w.what, out.path);
  }
  w.outputs.push_back(std::move(out));
  return {};
}

/// An output made of `data` (written by lockstep, not taken from the zip).
Output generated(std::string path, std::string data, std::uint32_t mode) {
  Output out;
  out.path = std::move(path);
  out.mode = mode;
  out.data = std::move(data);
  out.size = out.data.size();
  out.expected = sha256_of(out.data);
  return out;
}

/// Where the member `m` of the .data directory (`rest` after it: "SCHEME/PATH") goes, per its
/// scheme; a script is made executable and, when it starts with `#!python`, marked for rewriting.
Result<void> place_data_member(const WheelInstall& w, const Member& m, const std::string& rest,
                               const std::string& headers_dir, Output& out, bool& rewrite_shebang) {
  const WheelTarget& target = w.target;
  auto scheme_end = rest.find('/');
  std::string scheme = rest.substr(0, scheme_end);
  if (scheme_end == std::string::npos) {
    return invalid_input("{}: {} is not inside a .data scheme directory", w.what, m.name);
  }
  std::string sub = rest.substr(scheme_end + 1);
  if (scheme == "purelib" || scheme == "platlib") {
    out.path = target.site_packages + "/" + sub;
  } else if (scheme == "scripts") {
    out.path = target.scripts_dir + "/" + sub;
    out.mode = 0755;
    rewrite_shebang = m.data.has_value(); // read during the listing only when it starts with #!python
  } else if (scheme == "data") {
    out.path = target.data_dir + "/" + sub;
  } else if (scheme == "headers") {
    out.path = headers_dir + "/" + sub;
  } else {
    return invalid_input("{}: {}: unknown .data scheme '{}' (expected purelib, platlib, scripts, data or "
                         "headers)",
                         w.what, m.name, scheme);
  }
  return {};
}

/// The output of member `i` (nullopt: not installed as it is). A member read during the listing is
/// verified now and carried as content, its `#!python` line rewritten; others stream from the zip.
Result<std::optional<Output>> output_for_member(const WheelInstall& w, std::size_t i,
                                                const std::string& headers_dir) {
  const Member& m = w.members[i];
  auto [first, rest] = split_first(m.name);
  Output out;
  out.size = static_cast<std::uint64_t>(m.size);
  out.mode = m.executable ? 0755 : 0644;
  bool rewrite_shebang = false;
  if (first == w.dist_info) {
    // RECORD is rewritten and signatures of it would be stale; INSTALLER is ours.
    if (w.unrecorded.count(m.name) != 0 || rest == "INSTALLER") {
      return std::optional<Output>();
    }
    out.path = w.target.site_packages + "/" + m.name;
  } else if (first == w.data_prefix) {
    LS_TRY(place_data_member(w, m, rest, headers_dir, out, rewrite_shebang));
  } else {
    out.path = w.target.site_packages + "/" + m.name;
  }
  out.expected = *w.recorded.at(m.name)->hash;
  if (!m.data) {
    out.member = i;
    return std::optional<Output>(std::move(out));
  }
  LS_TRY(verify_data(*m.data, out, m.name, w.what));
  out.data = *m.data;
  if (rewrite_shebang) {
    // As pip's fix_script: the whole first line becomes "#!<python>".
    auto nl = out.data.find('\n');
    out.data =
        "#!" + w.target.python + "\n" + (nl == std::string::npos ? std::string() : out.data.substr(nl + 1));
    out.size = out.data.size();
    out.expected = sha256_of(out.data);
  }
  return std::optional<Output>(std::move(out));
}

// Pass 4a: where each member goes.
Result<void> plan_members(WheelInstall& w) {
  const std::string headers_dir = w.target.headers_dir.empty()
                                      ? default_headers_dir(w.target, w.info.metadata.name)
                                      : w.target.headers_dir;
  for (std::size_t i = 0; i < w.members.size(); ++i) {
    LS_TRY_ASSIGN(std::optional<Output> out, output_for_member(w, i, headers_dir));
    if (!out) {
      continue;
    }
    if (out->member) {
      w.output_of_member.emplace(i, w.outputs.size());
    }
    LS_TRY(add_output(w, std::move(*out)));
  }
  return {};
}

// Pass 4b: the console_scripts and gui_scripts wrappers.
Result<void> plan_entry_point_scripts(WheelInstall& w) {
  for (const auto& ep : w.entry_points) {
    if (ep.group != "console_scripts" && ep.group != "gui_scripts") {
      continue;
    }
    if (!valid_script_name(ep.name) || ep.attr.empty()) {
      return invalid_input("{}: entry point '{} = {}:{}' cannot be installed as a script", w.what, ep.name,
                           ep.module, ep.attr);
    }
    Output out =
        generated(w.target.scripts_dir + "/" + ep.name, entry_point_script(ep, w.target.python), 0755);
    w.info.scripts.push_back(out.path);
    LS_TRY(add_output(w, std::move(out)));
  }
  return {};
}

// Pass 4c: the .dist-info completed with INSTALLER and the RECORD of the installed files (relative
// to site-packages, sorted as pip sorts it).
Result<void> plan_installer_and_record(WheelInstall& w) {
  const std::string& site_packages = w.target.site_packages;
  const std::string dist_info_path = site_packages + "/" + w.dist_info;
  w.info.dist_info = dist_info_path;
  LS_TRY(add_output(w, generated(dist_info_path + "/INSTALLER", std::string(k_installer), 0644)));
  std::vector<RecordEntry> rows;
  for (const auto& out : w.outputs) {
    rows.push_back(RecordEntry{relative_to(out.path, site_packages), out.expected, out.size});
  }
  const std::string record_path = dist_info_path + "/RECORD";
  rows.push_back(RecordEntry{relative_to(record_path, site_packages), std::nullopt, std::nullopt});
  std::sort(rows.begin(), rows.end(),
            [](const RecordEntry& a, const RecordEntry& b) { return a.path < b.path; });
  return add_output(w, generated(record_path, write_record(rows), 0644));
}

// Pass 5: the parent directories, and conflicts with what earlier wheels put in this layer.
Result<void> plan_directories(WheelInstall& w, const std::set<std::string>& seen) {
  const std::string& what = w.what;
  std::set<std::string> dirs;
  for (const auto& out : w.outputs) {
    for (auto slash = out.path.rfind('/'); slash != std::string::npos;
         slash = out.path.rfind('/', slash - 1)) {
      dirs.insert(out.path.substr(0, slash));
      if (slash == 0) {
        break;
      }
    }
  }
  for (const auto& out : w.outputs) {
    if (dirs.count(out.path) != 0) {
      return invalid_input("{}: /{} would be both a file and a directory", what, out.path);
    }
    if (seen.count(out.path) != 0 || seen.count(out.path + "/") != 0) {
      return invalid_input("{}: /{} is already installed in this layer by another wheel", what, out.path);
    }
  }
  for (const auto& dir : dirs) {
    if (seen.count(dir) != 0) {
      return invalid_input(
          "{}: /{} is a file installed by another wheel, but this wheel needs a directory there", what, dir);
    }
    if (seen.count(dir + "/") == 0) {
      Output d;
      d.path = dir;
      d.is_dir = true;
      d.mode = 0755;
      w.outputs.push_back(std::move(d));
    }
  }
  return {};
}

// Pass 6: the outputs into the tar in tree order. Zip members stream from the zip when their turn
// comes while reading it; members the zip holds earlier are verified into memory (up to
// target.buffer_bytes) or left for another pass over the zip.
class TreeOrderWriter {
public:
  TreeOrderWriter(WheelInstall& w, TarWriter& tar, log::Progress& progress, std::set<std::string>& seen)
      : m_w(w), m_tar(tar), m_progress(progress), m_seen(seen), m_order(w.outputs.size()),
        m_rank(w.outputs.size()), m_buf(k_chunk) {
    for (std::size_t i = 0; i < m_order.size(); ++i) {
      m_order[i] = i;
    }
    std::sort(m_order.begin(), m_order.end(),
              [&](std::size_t a, std::size_t b) { return tree_less(w.outputs[a].path, w.outputs[b].path); });
    for (std::size_t pos = 0; pos < m_order.size(); ++pos) {
      m_rank[m_order[pos]] = pos;
    }
  }

  Result<void> write() {
    emit_ready();
    while (m_cursor < m_order.size()) {
      ++m_w.info.zip_passes;
      const std::size_t waiting = m_cursor;
      LS_TRY(zip_pass());
      if (m_cursor == waiting) {
        return invalid_input("{}: zip member {} was not found when reading the wheel again; did it change?",
                             m_w.what, m_w.members[*m_w.outputs[m_order[m_cursor]].member].name);
      }
    }
    return {};
  }

private:
  void write_content(const Output& out, const std::string& data) {
    m_tar.add(tar_entry(out, m_w.target.epoch));
    if (!data.empty()) {
      m_tar.write_data(data.data(), data.size());
    }
    m_progress.advance(data.size());
    m_w.info.files.push_back(out.path);
    m_w.info.bytes += data.size();
  }

  // Writes the outputs whose turn it is and whose content is at hand.
  void emit_ready() {
    while (m_cursor < m_order.size()) {
      const Output& out = m_w.outputs[m_order[m_cursor]];
      if (out.is_dir) {
        m_tar.add(tar_entry(out, m_w.target.epoch));
        m_seen.insert(out.path + "/");
      } else if (!out.member) {
        write_content(out, out.data);
        m_seen.insert(out.path);
      } else if (auto it = m_held.find(m_cursor); it != m_held.end()) {
        write_content(out, it->second);
        m_seen.insert(out.path);
        m_held_bytes -= it->second.size();
        m_held.erase(it);
      } else {
        return;
      }
      ++m_cursor;
    }
  }

  // One read of the zip, taking every member still needed.
  Result<void> zip_pass() {
    LS_TRY_ASSIGN(ZipReader zip, ZipReader::open(m_w.whl, m_w.what));
    std::string previous;
    while (m_cursor < m_order.size()) {
      LS_TRY_ASSIGN(struct archive_entry * entry, zip.next(previous));
      if (entry == nullptr) {
        break;
      }
      LS_TRY_ASSIGN(std::string name, check_member_name(raw_name(entry), m_w.what));
      previous = name;
      auto member = m_w.by_name.find(name);
      if (member == m_w.by_name.end() || archive_entry_filetype(entry) != AE_IFREG) {
        continue;
      }
      auto it = m_w.output_of_member.find(member->second);
      if (it == m_w.output_of_member.end()) {
        continue; // read during the listing, or not installed
      }
      LS_TRY(take(zip, name, it->second));
    }
    return {};
  }

  // The current zip member `name`, output `index`: written now when its turn has come, held in
  // memory when it fits, else left for the next pass.
  Result<void> take(ZipReader& zip, const std::string& name, std::size_t index) {
    const std::size_t pos = m_rank[index];
    const Output& out = m_w.outputs[index];
    if (pos < m_cursor || m_held.count(pos) != 0) {
      return {};
    }
    if (pos == m_cursor) {
      m_tar.add(tar_entry(out, m_w.target.epoch));
      LS_TRY(read_verified(zip, out, name, m_w.what, m_buf, [&](const char* data, std::size_t n) {
        m_tar.write_data(data, n);
        m_progress.advance(n);
      }));
      m_w.info.files.push_back(out.path);
      m_w.info.bytes += out.size;
      m_seen.insert(out.path);
      ++m_cursor;
      emit_ready();
    } else if (m_held_bytes + out.size <= m_w.target.buffer_bytes) {
      std::string data;
      data.reserve(out.size);
      LS_TRY(read_verified(zip, out, name, m_w.what, m_buf,
                           [&](const char* chunk, std::size_t n) { data.append(chunk, n); }));
      m_held_bytes += data.size();
      m_held.emplace(pos, std::move(data));
    }
    return {};
  }

  WheelInstall& m_w;
  TarWriter& m_tar;
  log::Progress& m_progress;
  std::set<std::string>& m_seen;
  std::vector<std::size_t> m_order;          ///< outputs indexes in tree order
  std::vector<std::size_t> m_rank;           ///< outputs index -> position in m_order
  std::size_t m_cursor = 0;                  ///< the next position to write
  std::map<std::size_t, std::string> m_held; ///< position -> verified content
  std::uint64_t m_held_bytes = 0;
  std::vector<char> m_buf;
};

} // namespace

Result<WheelInstallInfo> install_wheel(TarWriter& tar, log::Progress& progress, const fs::path& whl,
                                       const WheelTarget& target, std::set<std::string>& seen,
                                       std::string_view what_view) {
  const std::string what(what_view);
  LS_TRY(check_target(target));
  WheelInstall w(whl, target, what);
  // 1. The members, checked; the .dist-info text files and `#!python` scripts read now.
  LS_TRY(list_members(w));
  // 2. The .dist-info directory names the distribution; its files must agree with it.
  LS_TRY_ASSIGN(auto distribution, name_distribution(w));
  LS_TRY(read_dist_info(w, distribution.first, distribution.second));
  // 3. Every member is in RECORD with its hash and size, and every RECORD row is a member.
  LS_TRY(check_record(w));
  // 4. Where each member goes, the entry point wrappers, INSTALLER and the new RECORD.
  LS_TRY(plan_members(w));
  LS_TRY(plan_entry_point_scripts(w));
  LS_TRY(plan_installer_and_record(w));
  // 5. Parent directories, and conflicts with what earlier wheels put in this layer.
  LS_TRY(plan_directories(w, seen));
  // 6. The tar members in tree order, streamed from the zip (in as few passes as memory allows).
  LS_TRY(TreeOrderWriter(w, tar, progress, seen).write());
  log::debug("{}: installed {} files ({}) in {} pass(es) over the zip", what, w.info.files.size(),
             log::human_size(w.info.bytes), w.info.zip_passes);
  return std::move(w.info);
}

} // namespace lockstep::builder
