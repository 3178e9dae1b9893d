#include "builder/image/deb_package.hpp"

#include "support/base/text.hpp"
#include "support/debian/deb822.hpp"
#include "support/debian/deb_archive.hpp"
#include "support/debian/debian_version.hpp"
#include "support/oci/layer_model.hpp"
#include "support/oci/tar_reader.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

// The low-level MD5 interface needs no provider lookup (see support/codec/digest.cpp). MD5 is what dpkg
// records (md5sums, Conffiles); lockstep never trusts it for integrity, the lock's SHA-256 does that.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/md5.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

// ---- Bounds on hostile archives -------------------------------------------------------------------
constexpr std::int64_t k_max_control_member = 64LL << 20;   // one control file (md5sums of a huge package)
constexpr std::uint64_t k_max_control_total = 256ULL << 20; // all of control.tar, uncompressed
constexpr std::size_t k_max_control_members = 10000;        // entries in control.tar
constexpr const char* k_database_owner = "the dpkg database";

// Control members dpkg keeps in /var/lib/dpkg/info (besides "control", which goes into status).
constexpr std::array<std::string_view, 11> k_info_files = {"md5sums",  "conffiles", "preinst", "postinst",
                                                           "prerm",    "postrm",    "config",  "templates",
                                                           "triggers", "shlibs",    "symbols"};
constexpr std::array<std::string_view, 5> k_script_files = {"preinst", "postinst", "prerm", "postrm",
                                                            "config"};

// Top-level directories that merged /usr moves under /usr (usrmerge's and debootstrap's list).
constexpr std::array<std::string_view, 7> k_merged_dirs = {"bin",   "sbin",   "lib",   "lib32",
                                                           "lib64", "libx32", "libo32"};

class Md5 {
public:
  Md5() { MD5_Init(&m_ctx); }
  void update(const void* data, std::size_t size) { MD5_Update(&m_ctx, data, size); }
  std::string finish_hex() {
    std::array<unsigned char, MD5_DIGEST_LENGTH> raw{};
    MD5_Final(raw.data(), &m_ctx);
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char b : raw) {
      out += k_hex[b >> 4];
      out += k_hex[b & 15];
    }
    return out;
  }

private:
  MD5_CTX m_ctx{};
};

bool contains(const auto& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

std::string_view type_name(TarEntry::Type t) {
  switch (t) {
  case TarEntry::Type::file:
    return "file";
  case TarEntry::Type::dir:
    return "directory";
  case TarEntry::Type::symlink:
    return "symlink";
  case TarEntry::Type::hardlink:
    return "hard link";
  default:
    return "special file";
  }
}

// The layer entry type of a package member.
TarEntry::Type tar_type(DebMember::Type t) {
  switch (t) {
  case DebMember::Type::file:
    break;
  case DebMember::Type::dir:
    return TarEntry::Type::dir;
  case DebMember::Type::symlink:
    return TarEntry::Type::symlink;
  case DebMember::Type::hardlink:
    return TarEntry::Type::hardlink;
  }
  return TarEntry::Type::file;
}

std::string_view type_name(DebMember::Type t) {
  return type_name(tar_type(t));
}

// ---- Control file formats --------------------------------------------------------------------------

bool valid_arch_name(std::string_view s) {
  return !s.empty() && s.size() <= 64 && s.front() != '-' && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// md5sums: "HASH  path" lines (md5sum's format; "HASH *path" too).
Result<std::vector<std::pair<std::string, std::string>>> parse_md5sums(std::string_view text,
                                                                       std::string_view what) {
  std::vector<std::pair<std::string, std::string>> out;
  int line_no = 0;
  for (std::string_view line : lines_of(text)) {
    ++line_no;
    if (deb822_trim(line).empty()) {
      continue;
    }
    if (line.size() < 35 || !is_lower_hex(line.substr(0, 32)) || line[32] != ' ' ||
        (line[33] != ' ' && line[33] != '*')) {
      return invalid_input("{}: md5sums:{}: expected 'MD5  PATH', found '{}'", what, line_no, line);
    }
    std::string_view path = line.substr(34);
    while (!path.empty() && path.front() == '/') {
      path.remove_prefix(1);
    }
    auto name = normalize_member_name(path.empty() ? std::string_view(".") : path);
    if (!name || name->empty()) {
      return invalid_input("{}: md5sums:{}: '{}' is not a path inside the package", what, line_no,
                           line.substr(34));
    }
    out.emplace_back(std::move(*name), std::string(line.substr(0, 32)));
  }
  return out;
}

struct Conffile {
  std::string path;   // as listed ("/etc/foo")
  std::string member; // the data.tar member ("etc/foo")
  bool remove_on_upgrade = false;
};

// conffiles: one absolute path a line, optionally preceded by the flag "remove-on-upgrade"
// (deb-conffiles(5)).
Result<std::vector<Conffile>> parse_conffiles(std::string_view text, std::string_view what) {
  std::vector<Conffile> out;
  int line_no = 0;
  for (std::string_view line : lines_of(text)) {
    ++line_no;
    line = deb822_trim(line);
    if (line.empty()) {
      continue;
    }
    Conffile c;
    constexpr std::string_view k_flag = "remove-on-upgrade ";
    if (line.substr(0, k_flag.size()) == k_flag) {
      c.remove_on_upgrade = true;
      line = deb822_trim(line.substr(k_flag.size()));
    }
    if (line.empty() || line.front() != '/') {
      return invalid_input("{}: conffiles:{}: '{}' is not an absolute path (or an unknown flag)", what,
                           line_no, line);
    }
    auto member = normalize_member_name(line.substr(1));
    if (!member || member->empty()) {
      return invalid_input("{}: conffiles:{}: '{}' is not a path inside the package", what, line_no, line);
    }
    c.path = std::string(line);
    c.member = std::move(*member);
    out.push_back(std::move(c));
  }
  return out;
}

struct TriggerDirective {
  std::string
      directive;    // interest, interest-await, interest-noawait, activate, activate-await, activate-noawait
  std::string name; // "/path" for a file trigger
  [[nodiscard]] bool interest() const { return directive.rfind("interest", 0) == 0; }
  [[nodiscard]] bool noawait() const {
    return directive.size() > 8 && directive.substr(directive.size() - 8) == "-noawait";
  }
};

// triggers (deb-triggers(5)): "DIRECTIVE NAME" lines, '#' comments.
Result<std::vector<TriggerDirective>> parse_triggers(std::string_view text, std::string_view what) {
  static constexpr std::array<std::string_view, 6> k_directives = {
      "interest", "interest-await", "interest-noawait", "activate", "activate-await", "activate-noawait"};
  std::vector<TriggerDirective> out;
  int line_no = 0;
  for (std::string_view line : lines_of(text)) {
    ++line_no;
    line = deb822_trim(line);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    auto space = line.find_first_of(" \t");
    std::string_view directive = line.substr(0, space);
    std::string_view name =
        space == std::string_view::npos ? std::string_view() : deb822_trim(line.substr(space));
    if (!contains(k_directives, directive)) {
      return invalid_input("{}: triggers:{}: unknown directive '{}'", what, line_no, directive);
    }
    bool printable = std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 0x7f; });
    if (name.empty() || !printable) {
      return invalid_input("{}: triggers:{}: invalid trigger name '{}'", what, line_no, name);
    }
    if (name.front() == '/') {
      if (!normalize_member_name(name.substr(1))) {
        return invalid_input("{}: triggers:{}: file trigger '{}' has a '..' component", what, line_no, name);
      }
    } else if (name.find('/') != std::string_view::npos || name == "." || name == ".." || name == "File" ||
               name == "Unincorp" || name == "Lock") {
      // Explicit trigger names become file names under /var/lib/dpkg/triggers.
      return invalid_input("{}: triggers:{}: trigger name '{}' is not allowed", what, line_no, name);
    }
    out.push_back(TriggerDirective{std::string(directive), std::string(name)});
  }
  return out;
}

// Fields the control file may not carry: dpkg computes them (they belong to the status file).
constexpr std::array<std::string_view, 5> k_status_only_fields = {"Status", "Config-Version", "Conffiles",
                                                                  "Triggers-Pending", "Triggers-Awaited"};

Result<Deb822Paragraph> parse_control(std::string_view text, std::string_view what) {
  std::string where = std::string(what) + ": control";
  LS_TRY_ASSIGN(auto paragraphs, parse_deb822(text, where));
  if (paragraphs.size() != 1) {
    return invalid_input("{}: expected one paragraph, found {}", where, paragraphs.size());
  }
  for (const auto& f : paragraphs.front().fields) {
    for (std::string_view banned : k_status_only_fields) {
      if (iequals(f.name, banned)) {
        return invalid_input("{}:{}: a package may not set the '{}' field", where, f.line, f.name);
      }
    }
  }
  return std::move(paragraphs.front());
}

Result<void> fill_control(DebControl& c, std::string_view what) {
  std::string where = std::string(what) + ": control";
  LS_TRY_ASSIGN(auto para, parse_control(c.control, what));
  auto required = [&](std::string_view name) -> Result<std::string> {
    const std::string* v = para.find(name);
    if (v == nullptr || v->empty()) {
      return invalid_input("{}: the '{}' field is missing", where, name);
    }
    return *v;
  };
  LS_TRY_ASSIGN(c.package, required("Package"));
  LS_TRY_ASSIGN(c.version, required("Version"));
  LS_TRY_ASSIGN(c.architecture, required("Architecture"));
  if (!valid_package_name(c.package)) {
    return invalid_input("{}: invalid package name '{}'", where, c.package);
  }
  if (auto v = DebianVersion::parse(c.version); !v) {
    return invalid_input("{}: {}", where, v.error().message);
  }
  if (!valid_arch_name(c.architecture)) {
    return invalid_input("{}: invalid architecture '{}'", where, c.architecture);
  }
  if (const std::string* ma = para.find("Multi-Arch"); ma != nullptr) {
    c.multi_arch = *ma;
    if (c.multi_arch != "same" && c.multi_arch != "foreign" && c.multi_arch != "allowed" &&
        c.multi_arch != "no") {
      return invalid_input("{}: invalid Multi-Arch '{}' (same, foreign, allowed or no)", where, c.multi_arch);
    }
    if (c.multi_arch == "same" && c.architecture == "all") {
      return invalid_input("{}: Multi-Arch: same with Architecture: all", where);
    }
  }
  if (auto it = c.files.find("md5sums"); it != c.files.end()) {
    LS_TRY(parse_md5sums(it->second, what));
  }
  if (auto it = c.files.find("conffiles"); it != c.files.end()) {
    LS_TRY(parse_conffiles(it->second, what));
  }
  if (auto it = c.files.find("triggers"); it != c.files.end()) {
    LS_TRY(parse_triggers(it->second, what));
  }
  return {};
}

// ---- Placing members in the layer -------------------------------------------------------------------

bool is_merged_dir(std::string_view name) {
  return contains(k_merged_dirs, name);
}

// "bin/sh" -> "usr/bin/sh" with merged /usr.
std::string layer_path_of(const std::string& name, bool merged_usr) {
  if (!merged_usr) {
    return name;
  }
  std::string_view first = std::string_view(name).substr(0, name.find('/'));
  return is_merged_dir(first) ? "usr/" + name : name;
}

TarEntry directory_entry(const std::string& path, std::int64_t epoch) {
  TarEntry e;
  e.path = path;
  e.type = TarEntry::Type::dir;
  e.mode = 0755;
  e.mtime = epoch;
  return e;
}

void record(DebLayerPaths& seen, const TarEntry& e, std::string_view owner) {
  DebLayerPaths::Member m;
  m.type = e.type;
  m.owner = std::string(owner);
  m.link_target = e.link_target;
  m.mode = e.mode;
  m.uid = e.uid;
  m.gid = e.gid;
  m.size = e.size;
  seen.members[e.path] = std::move(m);
}

// Emits the missing parent directories of `path` (0755 root:root), so that every member's parent
// comes first. A parent that is not a directory (a symlink included) is an error: the dpkg
// database and merged /usr's links go below real directories only.
Result<void> ensure_parents(TarWriter& tar, DebLayerPaths& seen, const std::string& path, std::int64_t epoch,
                            std::string_view owner) {
  std::size_t slash = 0;
  while ((slash = path.find('/', slash)) != std::string::npos) {
    std::string parent = path.substr(0, slash);
    ++slash;
    auto it = seen.members.find(parent);
    if (it == seen.members.end()) {
      TarEntry e = directory_entry(parent, epoch);
      tar.add(e);
      record(seen, e, owner);
      continue;
    }
    if (it->second.type == TarEntry::Type::dir) {
      continue;
    }
    return invalid_input("{}: /{} would go below /{}, which {} installed as a {}", owner, path, parent,
                         it->second.owner, type_name(it->second.type));
  }
  return {};
}

// Where the unpacker will put package member `e`, found with the unpacker's own rule
// (layer::resolve_parent) over what this layer holds so far: dpkg follows a symbolic
// link to a directory (merged /usr, `usr/lib/foo -> ../share/foo`), and so does the unpacker. Sets
// e.path to that place and returns the directories to emit first (the parents the layer lacks).
// A parent through a link to anything but a directory this layer already holds is refused: the
// layer can't know what lies below the image's other layers (an absolute `/opt/elsewhere`, `/tmp`),
// and the unpacker refuses a link to a missing directory, so such an image would not run
// (docs/debs.md, "Files below a symbolic link").
Result<std::vector<std::string>> resolve_member_parent(const DebLayerPaths& seen, TarEntry& e,
                                                       std::string_view what) {
  const std::size_t slash = e.path.rfind('/');
  if (slash == std::string::npos) {
    return std::vector<std::string>{};
  }
  const std::string parent = e.path.substr(0, slash);
  // Every path the layer holds has real directories above it (members are placed where their parents
  // resolve to), so a parent the layer holds as a directory resolves to itself.
  if (auto it = seen.members.find(parent);
      it != seen.members.end() && it->second.type == TarEntry::Type::dir) {
    return std::vector<std::string>{};
  }
  auto lookup = [&seen](const std::string& path) {
    return layer::lookup_in(seen.members, path, [](const DebLayerPaths::Member& m) {
      return m.type == TarEntry::Type::dir       ? layer::Entry::Type::directory
             : m.type == TarEntry::Type::symlink ? layer::Entry::Type::symlink
                                                 : layer::Entry::Type::other;
    });
  };
  layer::Parent r = layer::resolve_parent(parent, lookup);
  const DebLayerPaths::Member* at = nullptr;
  if (auto it = seen.members.find(r.path); it != seen.members.end()) {
    at = &it->second;
  }
  switch (r.status) {
  case layer::Parent::Status::ok:
    e.path = (r.path.empty() ? std::string() : r.path + "/") + e.path.substr(slash + 1);
    return std::move(r.created);
  case layer::Parent::Status::link_to_missing:
    return invalid_input(
        "{}: /{} would go below /{}, a symbolic link to {} that {} installed, which does not lead to a "
        "directory installed before it in this layer; refusing the package, as the image could not be "
        "unpacked (files may go below a package's symbolic link only where it leads to a directory of the "
        "same layer, as merged /usr's do)",
        what, e.path, r.path, at != nullptr ? at->link_target : "?", at != nullptr ? at->owner : "a package");
  case layer::Parent::Status::not_directory:
    return invalid_input("{}: /{} would go below /{}, which is not a directory ({} installed a {} there)",
                         what, e.path, r.path, at != nullptr ? at->owner : "a package",
                         at != nullptr ? type_name(at->type) : "file");
  case layer::Parent::Status::loop:
    return invalid_input("{}: /{} would go below /{}, where symbolic links loop", what, e.path, r.path);
  }
  return internal_error("resolve_member_parent: unknown status");
}

// What to do with a member whose layer path another member already took.
enum class Placement { emit, skip };

Result<Placement> place(const DebLayerPaths& seen, const TarEntry& e, std::string_view owner) {
  auto it = seen.members.find(e.path);
  if (it == seen.members.end()) {
    return Placement::emit;
  }
  const DebLayerPaths::Member& old = it->second;
  if (e.type == TarEntry::Type::dir) {
    // A directory shared by many packages is emitted once (the first package's attributes); dpkg
    // also keeps a symlink to a directory where a package ships the directory (merged /usr).
    if (old.type == TarEntry::Type::dir || old.type == TarEntry::Type::symlink) {
      return Placement::skip;
    }
    return invalid_input("{}: ships the directory /{}, but {} installed a {} there", owner, e.path, old.owner,
                         type_name(old.type));
  }
  if (old.type == TarEntry::Type::dir) {
    return invalid_input(
        "{}: ships a {} at /{}, but {} installed a directory there (dpkg refuses to replace a "
        "directory with a non-directory)",
        owner, type_name(e.type), e.path, old.owner);
  }
  if (old.owner == k_base_owner) {
    return Placement::emit; // the base's symbolic link, replaced as dpkg replaces it
  }
  return Placement::skip;
}

// A non-directory skipped because another package emitted it first: silent when both are the same
// (Multi-Arch: same packages share files), a warning otherwise.
void report_shadowed(const DebLayerPaths::Member& old, const TarEntry& e, const std::string& md5,
                     std::string_view owner) {
  bool same = old.type == e.type && old.link_target == e.link_target && old.mode == e.mode &&
              old.uid == e.uid && old.gid == e.gid &&
              (e.type != TarEntry::Type::file || (old.size == e.size && old.md5 == md5));
  if (same) {
    log::debug("{}: /{} is identical to {}'s; shared", owner, e.path, old.owner);
    return;
  }
  log::warn(
      "{}: /{} is also shipped by {}, whose {} is kept (a layer can't replace a member); if this package "
      "should replace it (Replaces:), list it first",
      owner, e.path, old.owner, type_name(old.type));
}

// The layer member for a data.tar member: the merged-/usr path, the mtime clamped to the epoch.
// A hard link's target is mapped by the caller.
Result<TarEntry> layer_entry(const DebMember& m, const DebLayerOptions& options, std::string_view what) {
  TarEntry e;
  e.type = tar_type(m.type);
  e.mode = m.mode;
  e.uid = m.uid;
  e.gid = m.gid;
  e.mtime = std::clamp<std::int64_t>(m.mtime, 0, options.epoch);
  e.size = m.type == DebMember::Type::file ? m.size : 0;
  e.link_target = m.link_target;
  e.path = layer_path_of(m.name, options.merged_usr);
  if (options.diversions != nullptr) {
    auto d = options.diversions->find("/" + m.name);
    if (d != options.diversions->end() && d->second.by != options.package && m.type != DebMember::Type::dir) {
      e.path = layer_path_of(d->second.to.substr(1), options.merged_usr); // another package diverted it
    }
  }
  if (options.statoverrides != nullptr) {
    if (auto o = options.statoverrides->find("/" + m.name); o != options.statoverrides->end()) {
      e.uid = o->second.uid;
      e.gid = o->second.gid;
      e.mode = o->second.mode;
    }
  }
  if (options.merged_usr && is_merged_dir(m.name) && m.type != DebMember::Type::dir) {
    // A package that ships merged /usr's own root symlink (bin -> usr/bin) keeps it as it is.
    if (m.type != DebMember::Type::symlink ||
        (m.link_target != "usr/" + m.name && m.link_target != "/usr/" + m.name)) {
      return invalid_input("{}: ships /{} as a {}, which merged /usr makes a symlink to usr/{}", what, m.name,
                           type_name(m.type), m.name);
    }
    e.path = m.name;
  }
  return e;
}

// Reads a regular file's data, into `tar` unless it is null (a skipped member), and returns its MD5.
Result<std::string> copy_data(InnerTar& data, TarWriter* tar, log::Progress& progress, std::vector<char>& buf,
                              const DebMember& m) {
  Md5 hash;
  std::uint64_t got = 0;
  for (;;) {
    LS_TRY_ASSIGN(std::size_t n, data.read(buf.data(), buf.size()));
    if (n == 0) {
      break;
    }
    got += n;
    if (got > static_cast<std::uint64_t>(m.size)) {
      break;
    }
    hash.update(buf.data(), n);
    if (tar != nullptr) {
      tar->write_data(buf.data(), n);
    }
    progress.advance(n);
  }
  if (got != static_cast<std::uint64_t>(m.size)) {
    return data.error_at(m.name, fmt::format("{} bytes of data where its header says {}", got, m.size));
  }
  return hash.finish_hex();
}

// ---- The dpkg database -----------------------------------------------------------------------------

// dpkg's field order in the status file (lib/dpkg/parse.c fieldinfos); other fields follow in the
// order the control file has them.
constexpr std::array<std::string_view, 33> k_field_order = {
    "Package",         "Essential",      "Protected",      "Status",
    "Priority",        "Section",        "Installed-Size", "Origin",
    "Maintainer",      "Bugs",           "Architecture",   "Multi-Arch",
    "Source",          "Version",        "Revision",       "Config-Version",
    "Replaces",        "Provides",       "Depends",        "Pre-Depends",
    "Recommends",      "Suggests",       "Breaks",         "Conflicts",
    "Enhances",        "Conffiles",      "Filename",       "Size",
    "MD5sum",          "MSDOS-Filename", "Description",    "Triggers-Pending",
    "Triggers-Awaited"};
constexpr std::array<std::string_view, 9> k_relation_fields = {"Replaces",    "Provides",   "Depends",
                                                               "Pre-Depends", "Recommends", "Suggests",
                                                               "Breaks",      "Conflicts",  "Enhances"};
// Known to dpkg but not written to the status file (archive fields, the obsolete Revision).
constexpr std::array<std::string_view, 5> k_dropped_fields = {"Revision", "Filename", "Size", "MD5sum",
                                                              "MSDOS-Filename"};

std::string_view canonical_field(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 5> k_nicknames = {{
      {"Recommended", "Recommends"},
      {"Optional", "Suggests"},
      {"Class", "Priority"},
      {"Package-Revision", "Revision"},
      {"Package_Revision", "Revision"},
  }};
  for (const auto& [nick, canon] : k_nicknames) {
    if (iequals(name, nick)) {
      return canon;
    }
  }
  for (std::string_view known : k_field_order) {
    if (iequals(name, known)) {
      return known;
    }
  }
  return {};
}

// "Name: value" with continuation lines indented by one space, as dpkg writes it.
void append_field(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += ':';
  std::vector<std::string_view> lines = lines_of(value);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
    }
    if (i > 0 || !lines[i].empty()) {
      out += ' ';
    }
    out += lines[i];
  }
  out += '\n';
}

std::string render_version(const DebianVersion& v) {
  // dpkg keeps a 0 epoch only where the upstream part contains ':' (vdew_nonambig).
  if (v.epoch == 0 && v.upstream.find(':') != std::string::npos) {
    return "0:" + v.str();
  }
  return v.str();
}

Result<std::string> render_relations(std::string_view value, std::string_view field, std::string_view what) {
  LS_TRY_ASSIGN(auto groups, parse_relation_field(value));
  std::string out;
  for (const auto& group : groups) {
    if (!out.empty()) {
      out += ", ";
    }
    for (std::size_t i = 0; i < group.size(); ++i) {
      const DebRelation& r = group[i];
      if (!r.restrictions.empty()) {
        return invalid_input(
            "{}: control: {}: '{}' has build restrictions, which a binary package can't have", what, field,
            r.str());
      }
      if (i > 0) {
        out += " | ";
      }
      out += r.name;
      if (!r.arch_qualifier.empty()) {
        out += ':' + r.arch_qualifier;
      }
      if (r.relation && r.version) {
        out += fmt::format(" ({} {})", version_relation_name(*r.relation), render_version(*r.version));
      }
    }
  }
  return out;
}

struct PackageRecord {
  const InstalledDeb* deb = nullptr;
  std::string dpkg_name;
  std::map<std::string, std::string> md5_by_member; // from the data
  std::vector<Conffile> conffiles;
  std::vector<TriggerDirective> triggers;
};

Result<std::string> status_paragraph(const PackageRecord& rec, DebState state, std::string_view what,
                                     const std::string* config_version) {
  const DebControl& c = rec.deb->control;
  LS_TRY_ASSIGN(auto para, parse_control(c.control, what));
  std::map<std::string_view, std::string> known;
  std::vector<const Deb822Field*> arbitrary;
  for (const auto& f : para.fields) {
    std::string_view canon = canonical_field(f.name);
    if (canon.empty()) {
      arbitrary.push_back(&f);
    } else if (known.count(canon) != 0) {
      return invalid_input("{}: control: the field '{}' appears twice (under another name)", what, canon);
    } else {
      known.emplace(canon, f.value);
    }
  }
  std::string out;
  for (std::string_view field : k_field_order) {
    if (field == "Status") {
      append_field(out, field, state == DebState::installed ? "install ok installed" : "install ok unpacked");
      continue;
    }
    if (field == "Config-Version") {
      // Only a package still to configure has one (dpkg refuses it with "install ok installed").
      if (config_version != nullptr && state == DebState::unpacked) {
        append_field(out, field, *config_version);
      }
      continue;
    }
    if (field == "Conffiles") {
      if (!rec.conffiles.empty()) {
        std::string v;
        for (const Conffile& cf : rec.conffiles) {
          v += '\n' + cf.path + ' ';
          if (cf.remove_on_upgrade) {
            v += "newconffile remove-on-upgrade";
          } else {
            v += rec.md5_by_member.at(cf.member);
          }
        }
        append_field(out, field, v);
      }
      continue;
    }
    auto it = known.find(field);
    if (it == known.end() || contains(k_dropped_fields, field)) {
      continue;
    }
    const std::string& value = it->second;
    if (field == "Essential" || field == "Protected") {
      if (value == "yes") {
        append_field(out, field, "yes");
      } else if (value != "no") {
        return invalid_input("{}: control: {}: '{}' is neither yes nor no", what, field, value);
      }
    } else if (field == "Multi-Arch") {
      if (value != "no") {
        append_field(out, field, value);
      }
    } else if (field == "Version") {
      LS_TRY_ASSIGN(auto v, DebianVersion::parse(value));
      append_field(out, field, render_version(v));
    } else if (contains(k_relation_fields, field)) {
      auto rendered = render_relations(value, field, what);
      if (!rendered) {
        return rendered.error().with_context(std::string(what) + ": control: " + std::string(field));
      }
      if (!rendered->empty()) {
        append_field(out, field, *rendered);
      }
    } else {
      append_field(out, field, value);
    }
  }
  for (const Deb822Field* f : arbitrary) {
    append_field(out, f->name, f->value);
  }
  return out;
}

struct DbFile {
  std::string content;
  std::uint32_t mode = 0644;
  bool dir = false;
};

} // namespace

// ---- Public functions ------------------------------------------------------------------------------

bool DebControl::has_maintainer_scripts() const {
  return files.count("preinst") != 0 || files.count("postinst") != 0;
}

std::string DebControl::dpkg_name() const {
  return multi_arch == "same" ? package + ":" + architecture : package;
}

Result<DebControl> read_deb_control(const fs::path& deb, std::string_view what) {
  Utf8Locale locale;
  LS_TRY_ASSIGN(DebArchive ar, DebArchive::open(deb, what));
  LS_TRY(ar.read_debian_binary());
  LS_TRY_ASSIGN(std::string suffix, ar.expect("control.tar", k_control_suffixes));
  LS_TRY_ASSIGN(auto tar,
                InnerTar::open(ar.get(), ar.member(), suffix, std::string(what), k_max_control_members));
  DebControl c;
  bool have_control = false;
  std::uint64_t total = 0;
  for (;;) {
    LS_TRY_ASSIGN(auto m, tar->next());
    if (!m) {
      break;
    }
    // Every file counts towards the bound: skipping a member still decompresses it.
    total += static_cast<std::uint64_t>(m->size);
    if (total > k_max_control_total) {
      return invalid_input("{}: {} holds more than {} bytes", what, ar.member(), k_max_control_total);
    }
    bool wanted = m->name == "control" || contains(k_info_files, m->name);
    if (!wanted || m->type == DebMember::Type::dir) {
      continue; // the root, other files, subdirectories: not dpkg's business either
    }
    if (m->type != DebMember::Type::file) {
      return invalid_input("{}: {}: '{}' is a {}, not a file", what, ar.member(), m->name,
                           type_name(m->type));
    }
    if (m->size > k_max_control_member) {
      return invalid_input("{}: {}: '{}' has {} bytes (at most {})", what, ar.member(), m->name, m->size,
                           k_max_control_member);
    }
    LS_TRY_ASSIGN(std::string text, tar->read_all(m->size));
    if (m->name == "control") {
      if (have_control) {
        return invalid_input("{}: {} has two control files", what, ar.member());
      }
      have_control = true;
      c.control = std::move(text);
    } else if (!c.files.emplace(m->name, std::move(text)).second) {
      return invalid_input("{}: {} has two '{}' members", what, ar.member(), m->name);
    }
  }
  if (!have_control) {
    return invalid_input("{}: {} has no control file", what, ar.member());
  }
  LS_TRY(ar.expect("data.tar", k_data_suffixes));
  LS_TRY(fill_control(c, what));
  return c;
}

Result<DebContents> write_deb_data(TarWriter& tar, log::Progress& progress, const fs::path& deb,
                                   const DebLayerOptions& options, DebLayerPaths& seen,
                                   std::string_view what) {
  Utf8Locale locale;
  try {
    LS_TRY_ASSIGN(DebArchive ar, DebArchive::open(deb, what));
    LS_TRY_ASSIGN(auto data, open_deb_data(ar, what));

    DebContents out;
    out.paths.emplace_back("/.");
    std::set<std::string> names;                    // member names already read from this package
    std::map<std::string, std::string> md5_of_name; // regular files and hard links of this package
    std::map<std::string, std::string> placed_at;   // their paths in the layer
    std::vector<char> buf(1U << 20);
    std::uint64_t total = 0;
    for (;;) {
      LS_TRY_ASSIGN(auto m, data->next());
      if (!m) {
        break;
      }
      if (m->name.empty()) {
        if (m->type != DebMember::Type::dir) {
          return invalid_input("{}: {}: the root './' is a {}, not a directory", what, ar.member(),
                               type_name(m->type));
        }
        continue; // the image root is not a member
      }
      if (!names.insert(m->name).second) {
        return invalid_input("{}: {} lists '{}' twice; refusing the package", what, ar.member(), m->name);
      }
      out.paths.push_back("/" + m->name);

      LS_TRY_ASSIGN(TarEntry e, layer_entry(*m, options, what));
      std::string md5;
      if (m->type == DebMember::Type::hardlink) {
        auto target = md5_of_name.find(m->link_target);
        if (target == md5_of_name.end()) {
          return invalid_input("{}: hard link /{} -> /{}: the target is not a file earlier in the package",
                               what, m->name, m->link_target);
        }
        md5 = target->second;
        e.link_target = placed_at.at(m->link_target);
      }
      LS_TRY_ASSIGN(std::vector<std::string> parents, resolve_member_parent(seen, e, what));

      LS_TRY_ASSIGN(Placement placement, place(seen, e, what));
      if (placement == Placement::emit) {
        for (const std::string& dir : parents) {
          TarEntry d = directory_entry(dir, options.epoch);
          tar.add(d);
          record(seen, d, what);
        }
        tar.add(e);
        record(seen, e, what);
      }
      if (m->type == DebMember::Type::file) {
        total += static_cast<std::uint64_t>(m->size);
        if (total > k_deb_max_data_total) {
          return invalid_input("{}: {} holds more than {} bytes of files", what, ar.member(),
                               k_deb_max_data_total);
        }
        LS_TRY_ASSIGN(md5,
                      copy_data(*data, placement == Placement::emit ? &tar : nullptr, progress, buf, *m));
        if (placement == Placement::emit) {
          seen.members[e.path].md5 = md5;
        }
      }
      if (placement == Placement::skip && e.type != TarEntry::Type::dir) {
        report_shadowed(seen.members.at(e.path), e, md5, what);
      }
      if (m->type == DebMember::Type::file || m->type == DebMember::Type::hardlink) {
        md5_of_name[m->name] = md5;
        placed_at[m->name] = e.path;
        out.md5s.emplace_back(m->name, md5);
      }
    }
    return out;
  } catch (const Failure& f) {
    return f.error();
  }
}

Result<void> emit_merged_usr_links(TarWriter& tar, DebLayerPaths& seen, std::int64_t epoch,
                                   std::string_view native_arch) {
  // debootstrap's setup_merged_usr (and mmdebstrap's merged-usr hook): the multilib directories
  // each architecture links.
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 12> k_multilib = {{
      {"amd64", "lib32 lib64 libx32"},
      {"i386", "lib64 libx32"},
      {"mips", "lib32 lib64"},
      {"mipsel", "lib32 lib64"},
      {"mips64", "lib32 lib64 libo32"},
      {"mips64el", "lib32 lib64 libo32"},
      {"powerpc", "lib64"},
      {"ppc64", "lib32 lib64"},
      {"ppc64el", "lib64"},
      {"s390x", "lib32"},
      {"sparc64", "lib32 lib64"},
      {"x32", "lib32 lib64 libx32"},
  }};
  std::string dirs = "bin sbin lib";
  for (const auto& [arch, extra] : k_multilib) {
    if (arch == native_arch) {
      dirs += ' ';
      dirs += extra;
    }
  }
  try {
    std::size_t pos = 0;
    while (pos < dirs.size()) {
      std::size_t end = std::min(dirs.find(' ', pos), dirs.size());
      std::string dir = dirs.substr(pos, end - pos);
      pos = end + 1;
      TarEntry usr_dir = directory_entry("usr/" + dir, epoch);
      LS_TRY(ensure_parents(tar, seen, usr_dir.path, epoch, "merged /usr"));
      LS_TRY_ASSIGN(Placement p, place(seen, usr_dir, "merged /usr"));
      if (p == Placement::emit) {
        tar.add(usr_dir);
        record(seen, usr_dir, "merged /usr");
      }
      TarEntry link;
      link.path = dir;
      link.type = TarEntry::Type::symlink;
      link.mode = 0777;
      link.mtime = epoch;
      link.link_target = "usr/" + dir;
      auto it = seen.members.find(dir);
      if (it != seen.members.end()) {
        if (it->second.type == TarEntry::Type::symlink &&
            (it->second.link_target == link.link_target ||
             it->second.link_target == "/" + link.link_target)) {
          continue;
        }
        return invalid_input("merged /usr: /{} is a {} installed by {}, not a symlink to usr/{}", dir,
                             type_name(it->second.type), it->second.owner, dir);
      }
      tar.add(link);
      record(seen, link, "merged /usr");
    }
    return {};
  } catch (const Failure& f) {
    return f.error();
  }
}

bool needs_configure(const std::vector<InstalledDeb>& debs) {
  return std::any_of(debs.begin(), debs.end(),
                     [](const InstalledDeb& d) { return d.control.has_maintainer_scripts(); });
}

namespace {

// Checks every package (control re-validated, md5sums against the data, conffiles present,
// instances co-installable) and gathers what the database files need, sorted as dpkg sorts the
// status file: by name, then architecture.
Result<std::vector<PackageRecord>> check_packages(const std::vector<InstalledDeb>& debs) {
  std::vector<PackageRecord> records;
  records.reserve(debs.size());
  for (const InstalledDeb& deb : debs) {
    PackageRecord rec;
    rec.deb = &deb;
    DebControl check = deb.control; // re-validated: InstalledDeb is a plain struct anyone can fill
    std::string what = check.package.empty() ? std::string("a package") : "package " + check.package;
    LS_TRY(fill_control(check, what));
    if (check.package != deb.control.package || check.architecture != deb.control.architecture ||
        check.multi_arch != deb.control.multi_arch || check.version != deb.control.version) {
      return invalid_input("{}: the control fields don't match the control file", what);
    }
    rec.dpkg_name = deb.control.dpkg_name();
    for (const auto& [name, md5] : deb.contents.md5s) {
      rec.md5_by_member[name] = md5;
    }
    if (auto it = deb.control.files.find("md5sums"); it != deb.control.files.end()) {
      LS_TRY_ASSIGN(auto listed, parse_md5sums(it->second, what));
      for (const auto& [path, md5] : listed) {
        auto actual = rec.md5_by_member.find(path);
        if (actual == rec.md5_by_member.end()) {
          return invalid_input("{}: md5sums lists /{}, which the package's data doesn't have", what, path);
        }
        if (actual->second != md5) {
          return invalid_input("{}: md5sums says {} for /{}, but its data has {}: the package is corrupt",
                               what, md5, path, actual->second);
        }
      }
    }
    if (auto it = deb.control.files.find("conffiles"); it != deb.control.files.end()) {
      LS_TRY_ASSIGN(rec.conffiles, parse_conffiles(it->second, what));
      for (const Conffile& cf : rec.conffiles) {
        if (!cf.remove_on_upgrade && rec.md5_by_member.count(cf.member) == 0) {
          return invalid_input("{}: conffile {} is not a file in the package's data", what, cf.path);
        }
      }
    }
    if (auto it = deb.control.files.find("triggers"); it != deb.control.files.end()) {
      LS_TRY_ASSIGN(rec.triggers, parse_triggers(it->second, what));
    }
    records.push_back(std::move(rec));
  }
  // dpkg writes the status file sorted by name, then architecture.
  std::sort(records.begin(), records.end(), [](const PackageRecord& a, const PackageRecord& b) {
    return std::tie(a.deb->control.package, a.deb->control.architecture) <
           std::tie(b.deb->control.package, b.deb->control.architecture);
  });
  for (std::size_t i = 1; i < records.size(); ++i) {
    const DebControl& a = records[i - 1].deb->control;
    const DebControl& b = records[i].deb->control;
    if (a.package != b.package) {
      continue;
    }
    if (a.architecture == b.architecture) {
      return invalid_input("dpkg database: package {}:{} is listed twice", a.package, a.architecture);
    }
    if (a.multi_arch != "same" || b.multi_arch != "same") {
      return invalid_input(
          "dpkg database: {}:{} and {}:{} can only be installed together with Multi-Arch: same", a.package,
          a.architecture, b.package, b.architecture);
    }
  }

  return records;
}

// The database's files and directories, keyed by path (a std::map: parents sort before their
// children, and the order is fixed).
Result<std::map<std::string, DbFile>> database_files(const std::vector<PackageRecord>& records,
                                                     DebState state, std::string_view native_arch,
                                                     const BaseDatabase* base) {
  const std::string db = "var/lib/dpkg";
  std::map<std::string, DbFile> files;
  for (const char* dir : {"", "/alternatives", "/info", "/parts", "/triggers", "/updates"}) {
    files[db + dir] = DbFile{"", 0755, true};
  }
  std::set<std::string> foreign;
  for (const PackageRecord& rec : records) {
    const std::string& arch = rec.deb->control.architecture;
    if (arch != "all" && arch != native_arch) {
      foreign.insert(arch);
    }
  }
  std::string arch_file = std::string(native_arch) + "\n";
  if (base != nullptr) {
    for (const std::string& a : base->arches) {
      if (!a.empty() && a != native_arch) {
        foreign.insert(a);
      }
    }
  }
  for (const std::string& a : foreign) {
    arch_file += a + "\n";
  }
  files[db + "/arch"] = DbFile{arch_file};
  if (base == nullptr) {
    files[db + "/available"] = DbFile{};
    files[db + "/info/format"] = DbFile{"1\n"};
  }

  // name, architecture -> paragraph: the base's kept ones and the new ones, sorted as dpkg sorts.
  std::map<std::pair<std::string, std::string>, std::string> paragraphs;
  if (base != nullptr) {
    for (const BaseDatabase::Paragraph& p : base->status) {
      paragraphs[{p.package, p.architecture}] = p.text;
    }
  }
  std::string file_triggers = base != nullptr ? base->file_triggers : std::string();
  std::map<std::string, std::string> explicit_triggers;
  if (base != nullptr) {
    explicit_triggers = base->triggers;
  }
  for (const PackageRecord& rec : records) {
    const DebControl& c = rec.deb->control;
    std::string what = "package " + rec.dpkg_name;
    const std::string* config_version = nullptr;
    if (base != nullptr) {
      if (auto it = base->config_versions.find(rec.dpkg_name); it != base->config_versions.end()) {
        config_version = &it->second;
      }
    }
    LS_TRY_ASSIGN(std::string paragraph, status_paragraph(rec, state, what, config_version));
    paragraphs[{c.package, c.architecture}] = paragraph;
    const std::string info = db + "/info/" + rec.dpkg_name + ".";
    std::string list;
    for (const std::string& p : rec.deb->contents.paths) {
      list += p + "\n";
    }
    files[info + "list"] = DbFile{list};
    if (c.files.count("md5sums") == 0) {
      // dpkg generates the md5sums a package doesn't ship (regular files and hard links).
      std::string md5sums;
      for (const auto& [path, md5] : rec.deb->contents.md5s) {
        md5sums += md5 + "  " + path + "\n";
      }
      if (!md5sums.empty()) {
        files[info + "md5sums"] = DbFile{md5sums};
      }
    }
    for (const auto& [name, content] : c.files) {
      if (contains(k_info_files, name)) {
        files[info + name] = DbFile{content, contains(k_script_files, name) ? 0755U : 0644U};
      }
    }
    std::set<std::string> interests;
    for (const TriggerDirective& t : rec.triggers) {
      if (!t.interest() || !interests.insert(t.name).second) {
        continue;
      }
      std::string who = rec.dpkg_name + (t.noawait() ? "/noawait" : "");
      if (t.name.front() == '/') {
        file_triggers += t.name + " " + who + "\n";
      } else {
        explicit_triggers[t.name] += who + "\n";
      }
    }
  }
  std::string status;
  for (const auto& [key, paragraph] : paragraphs) {
    status += paragraph + "\n";
  }
  files[db + "/status"] = DbFile{status};
  if (!file_triggers.empty()) {
    files[db + "/triggers/File"] = DbFile{file_triggers};
  }
  for (const auto& [name, content] : explicit_triggers) {
    files[db + "/triggers/" + name] = DbFile{content};
  }

  return files;
}

// Writes the database files into the layer; a package that shipped one of them is an error.
Result<void> emit_database(TarWriter& tar, DebLayerPaths& seen, const std::map<std::string, DbFile>& files,
                           std::int64_t epoch) {
  try {
    for (const auto& [path, f] : files) {
      TarEntry e;
      e.path = path;
      e.type = f.dir ? TarEntry::Type::dir : TarEntry::Type::file;
      e.mode = f.mode;
      e.mtime = epoch;
      e.size = f.dir ? 0 : static_cast<std::int64_t>(f.content.size());
      LS_TRY(ensure_parents(tar, seen, path, epoch, k_database_owner));
      LS_TRY_ASSIGN(Placement p, place(seen, e, k_database_owner));
      if (p == Placement::skip) {
        if (!f.dir) {
          return invalid_input("/{} belongs to the dpkg database, but {} ships it", path,
                               seen.members.at(path).owner);
        }
        if (seen.members.at(path).type != TarEntry::Type::dir) {
          return invalid_input("/{} must be a directory for the dpkg database, but {} made it a {}", path,
                               seen.members.at(path).owner, type_name(seen.members.at(path).type));
        }
        continue;
      }
      tar.add(e);
      if (!f.dir) {
        tar.write_data(f.content.data(), f.content.size());
      }
      record(seen, e, k_database_owner);
    }
    return {};
  } catch (const Failure& f) {
    return f.error();
  }
}

} // namespace

Result<void> write_dpkg_database(TarWriter& tar, DebLayerPaths& seen, const std::vector<InstalledDeb>& debs,
                                 DebState state, std::int64_t epoch, std::string_view native_arch,
                                 const BaseDatabase* base) {
  if (!valid_arch_name(native_arch) || native_arch == "all") {
    return invalid_input("dpkg database: invalid native architecture '{}'", native_arch);
  }
  LS_TRY_ASSIGN(auto records, check_packages(debs));
  LS_TRY_ASSIGN(auto files, database_files(records, state, native_arch, base));
  return emit_database(tar, seen, files, epoch);
}

Result<std::map<std::string, Diversion>> parse_diversions(std::string_view text, std::string_view what) {
  const std::vector<std::string_view> lines = lines_of(text);
  if (lines.size() % 3 != 0) {
    return invalid_input("{}: {} lines, not whole entries of three (from, to, package)", what, lines.size());
  }
  std::map<std::string, Diversion> out;
  for (std::size_t i = 0; i < lines.size(); i += 3) {
    if (!lines[i].starts_with("/") || !lines[i + 1].starts_with("/") || lines[i + 2].empty()) {
      return invalid_input("{}:{}: a diversion needs two absolute paths and a package", what, i + 1);
    }
    out[std::string(lines[i])] = Diversion{std::string(lines[i + 1]), std::string(lines[i + 2])};
  }
  return out;
}

namespace {

// The id of NAME in an /etc/passwd or /etc/group text (the third field), or "#ID".
std::optional<std::uint32_t> id_of(std::string_view name, std::string_view table) {
  if (name.starts_with("#")) {
    std::uint32_t v = 0;
    const std::string digits(name.substr(1));
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    v = static_cast<std::uint32_t>(std::stoul(digits));
    return v;
  }
  for (const std::string_view line : text_lines(table)) {
    const std::size_t c1 = line.find(':');
    const std::size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    const std::size_t c3 = c2 == std::string_view::npos ? c2 : line.find(':', c2 + 1);
    if (c3 == std::string_view::npos || line.substr(0, c1) != name) {
      continue;
    }
    const std::string digits(line.substr(c2 + 1, c3 - c2 - 1));
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    return static_cast<std::uint32_t>(std::stoul(digits));
  }
  return std::nullopt;
}

} // namespace

Result<std::map<std::string, StatOverride>> parse_statoverride(std::string_view text, std::string_view passwd,
                                                               std::string_view group,
                                                               std::string_view what) {
  std::map<std::string, StatOverride> out;
  std::size_t pos = 0;
  int number = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const std::string line(text.substr(pos, end - pos));
    pos = end + 1;
    ++number;
    if (deb822_trim(line).empty()) {
      continue;
    }
    std::istringstream in(line);
    std::string user, grp, mode, path;
    if (!(in >> user >> grp >> mode >> path) || !path.starts_with("/") ||
        mode.find_first_not_of("01234567") != std::string::npos || mode.size() > 5) {
      return invalid_input("{}:{}: '{}' is not USER GROUP MODE PATH", what, number, line);
    }
    const auto uid = id_of(user, passwd);
    const auto gid = id_of(grp, group);
    if (!uid || !gid) {
      return invalid_input("{}:{}: {} {} is not in the base image's /etc/{}", what, number,
                           !uid ? "user" : "group", !uid ? user : grp, !uid ? "passwd" : "group");
    }
    out[path] = StatOverride{*uid, *gid, static_cast<std::uint32_t>(std::stoul(mode, nullptr, 8))};
  }
  return out;
}

void seed_base_paths(DebLayerPaths& seen, const std::vector<std::string>& directories,
                     const std::map<std::string, std::string>& symlinks) {
  for (const std::string& dir : directories) {
    DebLayerPaths::Member m;
    m.type = TarEntry::Type::dir;
    m.owner = std::string(k_base_owner);
    m.mode = 0755;
    seen.members.emplace(dir, std::move(m));
  }
  for (const auto& [path, target] : symlinks) {
    DebLayerPaths::Member m;
    m.type = TarEntry::Type::symlink;
    m.owner = std::string(k_base_owner);
    m.link_target = target;
    m.mode = 0777;
    seen.members.emplace(path, std::move(m));
  }
}

std::string configure_script(const std::vector<InstalledDeb>& debs_in_order,
                             const std::map<std::string, std::string>& upgrades) {
  std::map<std::string, int> instances; // DPKG_MAINTSCRIPT_PACKAGE_REFCOUNT: installed instances of a name
  for (const InstalledDeb& d : debs_in_order) {
    ++instances[d.control.package];
  }
  std::string s = R"(#!/bin/sh
# Written by lockstep: configures the Debian packages whose files lockstep unpacked into this image
# (docs/debs.md). Like mmdebstrap: no service starts, no questions, C.UTF-8; each package's
# preinst runs as "preinst install" (dpkg did not unpack them, so it never ran them), then dpkg
# configures everything, then ldconfig. What it replaces is put back and its logs are removed.
set -eu
export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true
export LC_ALL=C.UTF-8 LANGUAGE=C.UTF-8 LANG=C.UTF-8
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
unset DPKG_ROOT DPKG_ADMINDIR
cd /

lockstep_policy=/usr/sbin/policy-rc.d
lockstep_ssd=
lockstep_cleanup() {
  if [ -e "$lockstep_policy.lockstep-saved" ]; then
    mv -f "$lockstep_policy.lockstep-saved" "$lockstep_policy"
  else
    rm -f "$lockstep_policy"
  fi
  if [ -n "$lockstep_ssd" ]; then
    mv -f "$lockstep_ssd.REAL" "$lockstep_ssd"
  fi
}
trap lockstep_cleanup EXIT
trap 'exit 130' INT TERM

# invoke-rc.d and deb-systemd-invoke ask policy-rc.d: 101 means "don't start anything".
if [ -d /usr/sbin ]; then
  if [ -e "$lockstep_policy" ] || [ -L "$lockstep_policy" ]; then
    mv -f "$lockstep_policy" "$lockstep_policy.lockstep-saved"
  fi
  printf '#!/bin/sh\nexit 101\n' > "$lockstep_policy"
  chmod 0755 "$lockstep_policy"
fi
# Scripts that call start-stop-daemon directly get a no-op.
for lockstep_path in /sbin/start-stop-daemon /usr/sbin/start-stop-daemon; do
  if [ -z "$lockstep_ssd" ] && [ -f "$lockstep_path" ] && [ ! -L "$lockstep_path" ] && [ ! -e "$lockstep_path.REAL" ]; then
    mv "$lockstep_path" "$lockstep_path.REAL"
    printf '#!/bin/sh\necho "Warning: Fake start-stop-daemon called, doing nothing" >&2\n' > "$lockstep_path"
    chmod 0755 "$lockstep_path"
    lockstep_ssd=$lockstep_path
  fi
done

DPKG_RUNNING_VERSION=$(/usr/bin/dpkg --robot --version 2>/dev/null || true)
export DPKG_RUNNING_VERSION="${DPKG_RUNNING_VERSION%% *}"

# lockstep_preinst PACKAGE ARCH INFO-NAME REFCOUNT: what dpkg --unpack would have run first.
lockstep_preinst() {
  lockstep_status=0
  DPKG_MAINTSCRIPT_PACKAGE=$1 DPKG_MAINTSCRIPT_ARCH=$2 DPKG_MAINTSCRIPT_NAME=preinst \
    DPKG_MAINTSCRIPT_PACKAGE_REFCOUNT=$4 DPKG_ADMINDIR=/var/lib/dpkg DPKG_ROOT= \
    "/var/lib/dpkg/info/$3.preinst" install || lockstep_status=$?
  if [ "$lockstep_status" -ne 0 ]; then
    echo "lockstep: the preinst of $1 ($2) failed with exit status $lockstep_status" >&2
    exit 1
  fi
}
)";
  if (!upgrades.empty()) {
    s +=
        R"(# lockstep_preinst_upgrade PACKAGE ARCH INFO-NAME REFCOUNT OLD-VERSION: for a package that replaces
# the base image's version.
lockstep_preinst_upgrade() {
  lockstep_status=0
  DPKG_MAINTSCRIPT_PACKAGE=$1 DPKG_MAINTSCRIPT_ARCH=$2 DPKG_MAINTSCRIPT_NAME=preinst \
    DPKG_MAINTSCRIPT_PACKAGE_REFCOUNT=$4 DPKG_ADMINDIR=/var/lib/dpkg DPKG_ROOT= \
    "/var/lib/dpkg/info/$3.preinst" upgrade "$5" || lockstep_status=$?
  if [ "$lockstep_status" -ne 0 ]; then
    echo "lockstep: the preinst of $1 ($2) failed with exit status $lockstep_status" >&2
    exit 1
  fi
}
)";
  }
  // base-passwd's preinst first: it writes /etc/passwd and /etc/group, which every other script
  // expects (debconf's Config.pm looks up root's home directory; without it Perl warns about an
  // uninitialized value on line 22). dpkg runs it first too when it installs the essential set.
  std::vector<const InstalledDeb*> preinst_order;
  for (const InstalledDeb& d : debs_in_order) {
    if (d.control.package == "base-passwd") {
      preinst_order.insert(preinst_order.begin(), &d);
    } else {
      preinst_order.push_back(&d);
    }
  }
  for (const InstalledDeb* dp : preinst_order) {
    const InstalledDeb& d = *dp;
    if (d.control.files.count("preinst") == 0) {
      continue;
    }
    auto old = upgrades.find(d.control.dpkg_name());
    if (old != upgrades.end()) {
      s += fmt::format("lockstep_preinst_upgrade {} {} {} {} {}\n", shell_quote(d.control.package),
                       shell_quote(d.control.architecture), shell_quote(d.control.dpkg_name()),
                       instances[d.control.package], shell_quote(old->second));
      continue;
    }
    s += fmt::format("lockstep_preinst {} {} {} {}\n", shell_quote(d.control.package),
                     shell_quote(d.control.architecture), shell_quote(d.control.dpkg_name()),
                     instances[d.control.package]);
  }
  s += R"(
/usr/bin/dpkg --configure --pending
if command -v ldconfig >/dev/null 2>&1; then
  ldconfig
fi

# Logs and caches that record times or inode numbers (mmdebstrap's cleanup/reproducible).
rm -f /var/log/dpkg.log /var/log/alternatives.log /var/cache/ldconfig/aux-cache
)";
  return s;
}

Result<void> check_configure_possible(const std::vector<InstalledDeb>& debs, ImageTools tools) {
  if (tools.sh && tools.dpkg) {
    return {};
  }
  for (const InstalledDeb& d : debs) {
    if (!d.control.has_maintainer_scripts()) {
      continue;
    }
    std::string scripts;
    for (const char* name : {"preinst", "postinst"}) {
      if (d.control.files.count(name) != 0) {
        scripts += scripts.empty() ? name : std::string(" and ") + name;
      }
    }
    std::string missing = !tools.sh && !tools.dpkg ? "/bin/sh and dpkg" : (!tools.sh ? "/bin/sh" : "dpkg");
    return invalid_input(
        "package {} {} has maintainer scripts ({}) that must run in the image, but the image has no "
        "{}: add the packages that provide it (dash, dpkg) or build on a base image that has it",
        d.control.package, d.control.version, scripts, missing);
  }
  return {};
}

} // namespace lockstep::builder
