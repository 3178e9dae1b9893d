#include "builder/image/wheel_install.hpp"

#include "support/digest.hpp"
#include "support/fs.hpp"
#include "support/interrupt.hpp"
#include "support/python/wheel_archive.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
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

} // namespace

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

Result<WheelInstallInfo> install_wheel(TarWriter& tar, log::Progress& progress, const fs::path& whl,
                                       const WheelTarget& target, std::set<std::string>& seen,
                                       std::string_view what_view) {
  const std::string what(what_view);
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

  // 1. List the members; read the .dist-info text files and small scripts now.
  std::vector<Member> members;
  std::map<std::string, std::size_t> by_name;
  std::set<std::string> top_level;
  std::uint64_t total_size = 0;
  {
    LS_TRY_ASSIGN(ZipReader zip, ZipReader::open(whl, what));
    MemberListing listing(zip, what);
    std::size_t script_bytes = 0;
    for (;;) {
      LS_TRY_ASSIGN(MemberListing::Listed listed, listing.next());
      auto& [entry, name] = listed;
      if (entry == nullptr) {
        break;
      }
      top_level.insert(name.substr(0, name.find('/')));
      if (archive_entry_is_encrypted(entry) != 0) {
        return invalid_input("{}: zip member '{}' is encrypted; refusing the wheel", what, name);
      }
      auto type = archive_entry_filetype(entry);
      if (type == AE_IFDIR) {
        continue; // directories are implied by the files
      }
      if (type == AE_IFLNK) {
        return invalid_input("{}: zip member '{}' is a symbolic link; refusing the wheel", what, name);
      }
      if (type != AE_IFREG) {
        return invalid_input("{}: zip member '{}' is not a regular file; refusing the wheel", what, name);
      }
      if (by_name.count(name) != 0) {
        return invalid_input("{}: zip member '{}' appears twice; refusing the wheel", what, name);
      }
      Member m;
      m.name = name;
      m.size = archive_entry_size_is_set(entry) != 0 ? archive_entry_size(entry) : -1;
      if (m.size < 0 || m.size > k_max_member_size) {
        return invalid_input("{}: zip member '{}' has no size or is larger than 16 GiB; refusing the wheel",
                             what, name);
      }
      total_size += static_cast<std::uint64_t>(m.size);
      if (total_size > k_max_total_size) {
        return invalid_input("{}: the members add up to more than 64 GiB; refusing the wheel", what);
      }
      m.executable = (archive_entry_perm(entry) & 0111) != 0;
      // Read now: the .dist-info files lockstep parses, and scripts (their `#!python` line is rewritten).
      auto slash = name.find('/');
      std::string first = name.substr(0, slash);
      std::string rest = slash == std::string::npos ? std::string() : name.substr(slash + 1);
      bool dist_info_text =
          first.size() > 10 && first.substr(first.size() - 10) == ".dist-info" && is_dist_info_text(rest);
      bool script =
          first.size() > 5 && first.substr(first.size() - 5) == ".data" && rest.rfind("scripts/", 0) == 0;
      if (dist_info_text) {
        LS_TRY_ASSIGN(m.data, read_whole(zip, m.name, m.size, k_max_dist_info_file, what));
      } else if (script) {
        // Only a script whose first line is rewritten is needed whole; others stream like any member.
        LS_TRY_ASSIGN(std::string head, read_up_to(zip, name, k_python_shebang.size()));
        if (head == k_python_shebang) {
          LS_TRY_ASSIGN(std::string tail, read_up_to(zip, name, k_max_script_in_memory));
          script_bytes += head.size() + tail.size();
          if (script_bytes > k_max_script_in_memory) {
            return invalid_input(
                "{}: the '#!python' scripts add up to more than {} bytes; refusing the wheel", what,
                k_max_script_in_memory);
          }
          m.data = head + tail;
        }
      }
      by_name.emplace(name, members.size());
      members.push_back(std::move(m));
    }
  }

  // 2. The .dist-info directory names the distribution; it must agree with METADATA and the file name.
  std::vector<std::string> dist_infos;
  for (const auto& t : top_level) {
    if (t.size() > 10 && t.substr(t.size() - 10) == ".dist-info") {
      dist_infos.push_back(t);
    }
  }
  if (dist_infos.size() != 1) {
    return invalid_input("{}: expected exactly one .dist-info directory, found {}; not a valid wheel", what,
                         dist_infos.size());
  }
  const std::string dist_info = dist_infos.front();
  const std::string stem = dist_info.substr(0, dist_info.size() - 10);
  const std::string data_prefix = stem + ".data";
  auto dash = stem.rfind('-'); // the version has no '-' in a dist-info name; old names may
  if (dash == std::string::npos) {
    return invalid_input("{}: .dist-info directory '{}' is not NAME-VERSION.dist-info", what, dist_info);
  }
  auto dist_version = PyVersion::parse(stem.substr(dash + 1));
  if (!dist_version) {
    return invalid_input("{}: .dist-info directory '{}': {}", what, dist_info, dist_version.error().message);
  }
  const std::string dist_project = normalize_project_name(stem.substr(0, dash));
  for (const auto& name : {std::string(what), whl.filename().string()}) {
    if (auto wn = WheelName::parse(name)) {
      if (wn->project != dist_project || wn->version != *dist_version) {
        return invalid_input("{}: the wheel contains {}, which is not {} {}", what, dist_info, wn->project,
                             wn->version.str());
      }
      break;
    }
  }
  for (const auto& t : top_level) {
    if (t.size() > 5 && t.substr(t.size() - 5) == ".data" && t != data_prefix) {
      return invalid_input("{}: unexpected data directory '{}' (expected {})", what, t, data_prefix);
    }
  }
  auto text_of = [&](const std::string& file) -> const std::string* {
    auto it = by_name.find(dist_info + "/" + file);
    return it == by_name.end() || !members[it->second].data ? nullptr : &*members[it->second].data;
  };
  const std::string* wheel_text = text_of("WHEEL");
  const std::string* metadata_text = text_of("METADATA");
  const std::string* record_text = text_of("RECORD");
  if (wheel_text == nullptr || metadata_text == nullptr || record_text == nullptr) {
    return invalid_input("{}: {} has no {}; not a valid wheel", what, dist_info,
                         wheel_text == nullptr      ? "WHEEL"
                         : metadata_text == nullptr ? "METADATA"
                                                    : "RECORD");
  }
  WheelInstallInfo info;
  LS_TRY_ASSIGN(info.wheel, parse_wheel_info(*wheel_text, what + ": " + dist_info + "/WHEEL"));
  if (info.wheel.version_minor > 0) {
    log::warn("{}: wheel format version 1.{} is newer than 1.0; installing it anyway", what,
              info.wheel.version_minor);
  }
  LS_TRY_ASSIGN(info.metadata, parse_core_metadata(*metadata_text, what + ": " + dist_info + "/METADATA"));
  if (info.metadata.project != dist_project || info.metadata.version != *dist_version) {
    return invalid_input("{}: METADATA says {} {}, but the .dist-info directory is {}", what,
                         info.metadata.name, info.metadata.version.str(), dist_info);
  }
  info.project = dist_project;
  info.version = *dist_version;
  LS_TRY_ASSIGN(auto record, parse_record(*record_text, what + ": " + dist_info + "/RECORD"));
  std::vector<EntryPoint> entry_points;
  if (const std::string* eps = text_of("entry_points.txt")) {
    LS_TRY_ASSIGN(entry_points, parse_entry_points(*eps, what + ": " + dist_info + "/entry_points.txt"));
  }

  // 3. Every member is in RECORD with its hash and size, and every RECORD row is a member.
  const std::set<std::string> unrecorded = {dist_info + "/RECORD", dist_info + "/RECORD.jws",
                                            dist_info + "/RECORD.p7s"};
  std::map<std::string, const RecordEntry*> recorded;
  for (const auto& row : record) {
    if (!recorded.emplace(row.path, &row).second) {
      return invalid_input("{}: RECORD lists {} twice", what, row.path);
    }
    if (by_name.count(row.path) == 0) {
      return invalid_input("{}: RECORD lists {}, which is not in the wheel", what, row.path);
    }
  }
  for (const auto& m : members) {
    if (unrecorded.count(m.name) != 0) {
      continue;
    }
    auto it = recorded.find(m.name);
    if (it == recorded.end()) {
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

  // 4. Where each member goes.
  const std::string headers_dir =
      target.headers_dir.empty() ? default_headers_dir(target, info.metadata.name) : target.headers_dir;
  std::vector<Output> outputs;
  std::map<std::string, std::size_t> output_of;        // tar path -> index in outputs
  std::map<std::size_t, std::size_t> output_of_member; // member index -> index in outputs
  auto add_output = [&](Output out) -> Result<void> {
    if (!output_of.emplace(out.path, outputs.size()).second) {
      return invalid_input("{}: two members would be installed as /{}", what, out.path);
    }
    outputs.push_back(std::move(out));
    return {};
  };
  for (std::size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    auto slash = m.name.find('/');
    std::string first = m.name.substr(0, slash);
    std::string rest = slash == std::string::npos ? std::string() : m.name.substr(slash + 1);
    Output out;
    out.size = static_cast<std::uint64_t>(m.size);
    out.mode = m.executable ? 0755 : 0644;
    bool rewrite_shebang = false;
    if (first == dist_info) {
      if (unrecorded.count(m.name) != 0 || rest == "INSTALLER") {
        continue; // RECORD is rewritten and signatures of it would be stale; INSTALLER is ours
      }
      out.path = target.site_packages + "/" + m.name;
    } else if (first == data_prefix) {
      auto scheme_end = rest.find('/');
      std::string scheme = rest.substr(0, scheme_end);
      if (scheme_end == std::string::npos) {
        return invalid_input("{}: {} is not inside a .data scheme directory", what, m.name);
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
                             what, m.name, scheme);
      }
    } else {
      out.path = target.site_packages + "/" + m.name;
    }
    out.expected = *recorded.at(m.name)->hash;
    if (m.data) {
      LS_TRY(verify_data(*m.data, out, m.name, what));
      out.data = *m.data;
      if (rewrite_shebang) {
        // As pip's fix_script: the whole first line becomes "#!<python>".
        auto nl = out.data.find('\n');
        out.data =
            "#!" + target.python + "\n" + (nl == std::string::npos ? std::string() : out.data.substr(nl + 1));
        out.size = out.data.size();
        out.expected = sha256_of(out.data);
      }
    } else {
      out.member = i;
      output_of_member.emplace(i, outputs.size());
    }
    LS_TRY(add_output(std::move(out)));
  }
  for (const auto& ep : entry_points) {
    if (ep.group != "console_scripts" && ep.group != "gui_scripts") {
      continue;
    }
    if (!valid_script_name(ep.name) || ep.attr.empty()) {
      return invalid_input("{}: entry point '{} = {}:{}' cannot be installed as a script", what, ep.name,
                           ep.module, ep.attr);
    }
    Output out;
    out.path = target.scripts_dir + "/" + ep.name;
    out.mode = 0755;
    out.data = entry_point_script(ep, target.python);
    out.size = out.data.size();
    out.expected = sha256_of(out.data);
    info.scripts.push_back(out.path);
    LS_TRY(add_output(std::move(out)));
  }
  const std::string dist_info_path = target.site_packages + "/" + dist_info;
  info.dist_info = dist_info_path;
  {
    Output installer;
    installer.path = dist_info_path + "/INSTALLER";
    installer.data = std::string(k_installer);
    installer.size = installer.data.size();
    installer.expected = sha256_of(installer.data);
    LS_TRY(add_output(std::move(installer)));
  }
  // RECORD of the installed files, relative to site-packages, sorted as pip sorts it.
  {
    std::vector<RecordEntry> rows;
    for (const auto& out : outputs) {
      rows.push_back(RecordEntry{relative_to(out.path, target.site_packages), out.expected, out.size});
    }
    const std::string record_path = dist_info_path + "/RECORD";
    rows.push_back(RecordEntry{relative_to(record_path, target.site_packages), std::nullopt, std::nullopt});
    std::sort(rows.begin(), rows.end(),
              [](const RecordEntry& a, const RecordEntry& b) { return a.path < b.path; });
    Output out;
    out.path = record_path;
    out.data = write_record(rows);
    out.size = out.data.size();
    out.expected = sha256_of(out.data);
    LS_TRY(add_output(std::move(out)));
  }

  // 5. Directories, and conflicts with what earlier wheels put in this layer.
  std::set<std::string> dirs;
  for (const auto& out : outputs) {
    for (auto slash = out.path.rfind('/'); slash != std::string::npos;
         slash = out.path.rfind('/', slash - 1)) {
      dirs.insert(out.path.substr(0, slash));
      if (slash == 0) {
        break;
      }
    }
  }
  for (const auto& out : outputs) {
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
      outputs.push_back(std::move(d));
    }
  }

  // 6. Write in tree order. Zip members stream from the zip when their turn comes while reading it;
  // members the zip holds earlier are verified into memory (up to target.buffer_bytes) or left for
  // another pass over the zip.
  std::vector<std::size_t> order(outputs.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return tree_less(outputs[a].path, outputs[b].path); });
  std::vector<std::size_t> rank(outputs.size()); // outputs index -> position in order
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    rank[order[pos]] = pos;
  }
  std::size_t cursor = 0;
  std::map<std::size_t, std::string> held; // position -> verified content
  std::uint64_t held_bytes = 0;
  auto write_content = [&](const Output& out, const std::string& data) {
    tar.add(tar_entry(out, target.epoch));
    if (!data.empty()) {
      tar.write_data(data.data(), data.size());
    }
    progress.advance(data.size());
    info.files.push_back(out.path);
    info.bytes += data.size();
  };
  auto emit_ready = [&] {
    while (cursor < order.size()) {
      const Output& out = outputs[order[cursor]];
      if (out.is_dir) {
        tar.add(tar_entry(out, target.epoch));
        seen.insert(out.path + "/");
      } else if (!out.member) {
        write_content(out, out.data);
        seen.insert(out.path);
      } else if (auto it = held.find(cursor); it != held.end()) {
        write_content(out, it->second);
        seen.insert(out.path);
        held_bytes -= it->second.size();
        held.erase(it);
      } else {
        return;
      }
      ++cursor;
    }
  };
  emit_ready();
  std::vector<char> buf(k_chunk);
  while (cursor < order.size()) {
    ++info.zip_passes;
    const std::size_t waiting = cursor;
    LS_TRY_ASSIGN(ZipReader zip, ZipReader::open(whl, what));
    std::string previous;
    while (cursor < order.size()) {
      LS_TRY_ASSIGN(struct archive_entry * entry, zip.next(previous));
      if (entry == nullptr) {
        break;
      }
      LS_TRY_ASSIGN(std::string name, check_member_name(raw_name(entry), what));
      previous = name;
      auto member = by_name.find(name);
      if (member == by_name.end() || archive_entry_filetype(entry) != AE_IFREG) {
        continue;
      }
      auto it = output_of_member.find(member->second);
      if (it == output_of_member.end()) {
        continue; // read during the listing, or not installed
      }
      const std::size_t pos = rank[it->second];
      const Output& out = outputs[it->second];
      if (pos < cursor || held.count(pos) != 0) {
        continue;
      }
      if (pos == cursor) {
        tar.add(tar_entry(out, target.epoch));
        LS_TRY(read_verified(zip, out, name, what, buf, [&](const char* data, std::size_t n) {
          tar.write_data(data, n);
          progress.advance(n);
        }));
        info.files.push_back(out.path);
        info.bytes += out.size;
        seen.insert(out.path);
        ++cursor;
        emit_ready();
      } else if (held_bytes + out.size <= target.buffer_bytes) {
        std::string data;
        data.reserve(out.size);
        LS_TRY(read_verified(zip, out, name, what, buf,
                             [&](const char* chunk, std::size_t n) { data.append(chunk, n); }));
        held_bytes += data.size();
        held.emplace(pos, std::move(data));
      }
    }
    if (cursor == waiting) {
      return invalid_input("{}: zip member {} was not found when reading the wheel again; did it change?",
                           what, members[*outputs[order[cursor]].member].name);
    }
  }
  log::debug("{}: installed {} files ({}) in {} pass(es) over the zip", what, info.files.size(),
             log::human_size(info.bytes), info.zip_passes);
  return info;
}

} // namespace lockstep::builder
