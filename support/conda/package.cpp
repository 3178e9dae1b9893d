#include "support/conda/package.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/json.hpp"
#include "support/base/text.hpp"
#include "support/codec/archive_names.hpp"
#include "support/codec/digest.hpp"
#include "support/system/fs.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <zlib.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <utility>

namespace lockstep::conda {

namespace {

// ---- The ZIP container of a .conda (APPNOTE.TXT 6.3; CEP 35) ------------------------------------

constexpr std::uint32_t k_sig_local = 0x04034b50;
constexpr std::uint32_t k_sig_central = 0x02014b50;
constexpr std::uint32_t k_sig_eocd = 0x06054b50;
constexpr std::uint32_t k_sig_zip64_eocd = 0x06064b50;
constexpr std::uint32_t k_sig_zip64_locator = 0x07064b50;
constexpr std::size_t k_eocd_size = 22;
constexpr std::size_t k_central_size = 46;
constexpr std::size_t k_local_size = 30;
constexpr std::size_t k_zip64_eocd_size = 56;
constexpr std::size_t k_zip64_locator_size = 20;
constexpr std::size_t k_max_zip_comment = 0xFFFF;
/// A .conda has three members; a few more (a future format's additions) are tolerated, not read.
constexpr std::uint64_t k_max_zip_members = 64;
constexpr int k_max_symlink_hops = 40;           // Linux's MAXSYMLINKS
constexpr std::size_t k_read_chunk = 64U << 20;  // memory reserved ahead for one member
constexpr std::size_t k_read_buffer = 64U << 10; // one archive_read_data call

/// A little-endian reader over a slice of the archive, with its bounds checked by the caller.
std::uint64_t le(std::string_view bytes, std::size_t at, std::size_t width) {
  std::uint64_t v = 0;
  for (std::size_t i = width; i-- > 0;) {
    v = (v << 8U) | static_cast<unsigned char>(bytes[at + i]);
  }
  return v;
}

/// One member of the zip: its name and its (stored) bytes, a slice of the input.
struct ZipMember {
  std::string name;
  std::string_view data;
};

/// The end-of-central-directory facts, from the classic record or its zip64 twin.
struct CentralDirectory {
  std::uint64_t entries = 0;
  std::uint64_t size = 0;
  std::uint64_t offset = 0;
  std::uint64_t end = 0; ///< where the directory must end (the zip64 record or the EOCD)
};

Result<CentralDirectory> find_central_directory(std::string_view zip, const std::string& what) {
  auto bad = [&](std::string_view why) {
    return invalid_input("{}: not a valid .conda (zip): {}", what, why);
  };
  if (zip.size() < k_eocd_size) {
    return bad("too short for a zip archive");
  }
  // The EOCD is the last record; its comment runs exactly to the end of the file.
  std::size_t pos = zip.size() - k_eocd_size;
  const std::size_t lowest = zip.size() - std::min(zip.size(), k_eocd_size + k_max_zip_comment);
  for (;; --pos) {
    if (le(zip, pos, 4) == k_sig_eocd && pos + k_eocd_size + le(zip, pos + 20, 2) == zip.size()) {
      break;
    }
    if (pos == lowest) {
      return bad("no end of central directory record");
    }
  }
  CentralDirectory cd{le(zip, pos + 10, 2), le(zip, pos + 12, 4), le(zip, pos + 16, 4), pos};
  const bool zip64 = cd.entries == 0xFFFF || cd.size == 0xFFFFFFFF || cd.offset == 0xFFFFFFFF;
  const std::uint64_t disk = le(zip, pos + 4, 2);
  const std::uint64_t cd_disk = le(zip, pos + 6, 2);
  if ((disk != 0 && !(zip64 && disk == 0xFFFF)) || (cd_disk != 0 && !(zip64 && cd_disk == 0xFFFF))) {
    return bad("a multi-disk archive");
  }
  if (!zip64) {
    return cd;
  }
  if (pos < k_zip64_locator_size || le(zip, pos - k_zip64_locator_size, 4) != k_sig_zip64_locator) {
    return bad("zip64 sizes without a zip64 locator");
  }
  const std::uint64_t at = le(zip, pos - k_zip64_locator_size + 8, 8);
  if (at > pos - k_zip64_locator_size || pos - k_zip64_locator_size - at < k_zip64_eocd_size ||
      le(zip, at, 4) != k_sig_zip64_eocd) {
    return bad("a zip64 locator that points at no zip64 end record");
  }
  const auto zat = static_cast<std::size_t>(at);
  if (le(zip, zat + 16, 4) != 0 || le(zip, zat + 20, 4) != 0) {
    return bad("a multi-disk archive");
  }
  return CentralDirectory{le(zip, zat + 32, 8), le(zip, zat + 40, 8), le(zip, zat + 48, 8), at};
}

/// Reads the zip64 extended-information field of a central header for the fields that overflowed.
Result<void> read_zip64_extra(std::string_view extra, std::uint64_t& usize, std::uint64_t& csize,
                              std::uint64_t& offset, const std::string& bad_member) {
  std::size_t i = 0;
  while (i + 4 <= extra.size()) {
    const std::uint64_t id = le(extra, i, 2);
    const std::size_t len = le(extra, i + 2, 2);
    if (i + 4 + len > extra.size()) {
      break;
    }
    if (id == 1) {
      std::size_t at = i + 4;
      for (std::uint64_t* field : {&usize, &csize, &offset}) {
        if (*field != 0xFFFFFFFF) {
          continue;
        }
        if (at + 8 > i + 4 + len) {
          return invalid_input("{}: its zip64 field is too short", bad_member);
        }
        *field = le(extra, at, 8);
        at += 8;
      }
      return {};
    }
    i += 4 + len;
  }
  if (usize == 0xFFFFFFFF || csize == 0xFFFFFFFF || offset == 0xFFFFFFFF) {
    return invalid_input("{}: zip64 sizes without a zip64 field", bad_member);
  }
  return {};
}

/// The member whose central header starts at `at`; `next` is set to the following header.
Result<ZipMember> read_central_header(std::string_view zip, const CentralDirectory& cd, std::size_t at,
                                      std::size_t& next, const std::string& what) {
  const auto cd_end = static_cast<std::size_t>(cd.offset + cd.size);
  if (at + k_central_size > cd_end || le(zip, at, 4) != k_sig_central) {
    return invalid_input("{}: not a valid .conda (zip): a broken central directory", what);
  }
  const std::uint64_t flags = le(zip, at + 8, 2);
  const std::uint64_t method = le(zip, at + 10, 2);
  const auto crc = static_cast<std::uint32_t>(le(zip, at + 16, 4));
  std::uint64_t csize = le(zip, at + 20, 4);
  std::uint64_t usize = le(zip, at + 24, 4);
  const std::size_t name_len = le(zip, at + 28, 2);
  const std::size_t extra_len = le(zip, at + 30, 2);
  const std::size_t comment_len = le(zip, at + 32, 2);
  std::uint64_t offset = le(zip, at + 42, 4);
  next = at + k_central_size + name_len + extra_len + comment_len;
  if (next > cd_end) {
    return invalid_input("{}: not a valid .conda (zip): a broken central directory", what);
  }
  ZipMember m{std::string(zip.substr(at + k_central_size, name_len)), {}};
  const std::string member = fmt::format("{}: zip member '{}'", what, printable_ascii(m.name, 200));
  LS_TRY(
      read_zip64_extra(zip.substr(at + k_central_size + name_len, extra_len), usize, csize, offset, member));
  if ((flags & 1U) != 0) {
    return invalid_input("{} is encrypted; refusing the package", member);
  }
  if (method != 0 || csize != usize) {
    return invalid_input("{} is compressed (method {}); a .conda's members must be STORED (CEP 35)", member,
                         method);
  }
  if (offset > cd.offset || cd.offset - offset < k_local_size ||
      le(zip, static_cast<std::size_t>(offset), 4) != k_sig_local) {
    return invalid_input("{} has no local header where the central directory says", member);
  }
  const auto local = static_cast<std::size_t>(offset);
  const std::size_t local_name = le(zip, local + 26, 2);
  const std::uint64_t data_at = offset + k_local_size + local_name + le(zip, local + 28, 2);
  if (zip.substr(local + k_local_size, local_name) != m.name) {
    return invalid_input("{} has another name in its local header", member);
  }
  if (data_at > cd.offset || usize > cd.offset - data_at) {
    return invalid_input("{} runs past the end of the archive's data", member);
  }
  m.data = zip.substr(static_cast<std::size_t>(data_at), static_cast<std::size_t>(usize));
  if (crc32_z(0, reinterpret_cast<const Bytef*>(m.data.data()), m.data.size()) != crc) {
    return invalid_input("{} does not match its CRC-32; the archive is damaged", member);
  }
  return m;
}

/// Every member of a .conda's zip, found through its central directory.
Result<std::vector<ZipMember>> read_zip(std::string_view zip, const std::string& what) {
  LS_TRY_ASSIGN(CentralDirectory cd, find_central_directory(zip, what));
  if (cd.offset > cd.end || cd.size > cd.end - cd.offset) {
    return invalid_input("{}: not a valid .conda (zip): the central directory lies outside the archive",
                         what);
  }
  if (cd.entries > k_max_zip_members) {
    return invalid_input("{}: {} zip members, more than the {} a .conda may have", what, cd.entries,
                         k_max_zip_members);
  }
  std::vector<ZipMember> members;
  std::set<std::string, std::less<>> names;
  auto at = static_cast<std::size_t>(cd.offset);
  for (std::uint64_t i = 0; i < cd.entries; ++i) {
    std::size_t next = 0;
    LS_TRY_ASSIGN(ZipMember m, read_central_header(zip, cd, at, next, what));
    if (!names.insert(m.name).second) {
      return invalid_input("{}: zip member '{}' is there twice; refusing the package", what,
                           printable_ascii(m.name, 200));
    }
    members.push_back(std::move(m));
    at = next;
  }
  return members;
}

// ---- The tars ---------------------------------------------------------------------------------------

struct ArchiveFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};

/// What the tars of one package hold, gathered across the tars of a .conda.
class TarCollector {
public:
  TarCollector(std::string what, const PackageLimits& limits) : m_what(std::move(what)), m_limits(limits) {}

  /// Reads one tar compressed with `filter` (ARCHIVE_FILTER_ZSTD or _BZIP2) from memory; `member`
  /// names it in errors ("" for a .tar.bz2).
  Result<void> read(std::string_view compressed, int filter, const std::string& member);

  std::map<std::string, std::string, std::less<>> info;     ///< info/ files by name ("index.json")
  std::map<std::string, PayloadEntry, std::less<>> payload; ///< every other member
  std::int64_t info_mtime = 0;

private:
  Result<void> add(struct archive* a, struct archive_entry* entry, const std::string& where);
  Result<std::string> read_data(struct archive* a, std::int64_t size, const std::string& where,
                                const std::string& name);
  [[nodiscard]] Error failure(struct archive* a, const std::string& where, const std::string& doing) const;

  std::string m_what;
  const PackageLimits& m_limits;
  std::set<std::string, std::less<>> m_seen;
  std::size_t m_entries = 0;
  std::uint64_t m_bytes = 0;
};

Error TarCollector::failure(struct archive* a, const std::string& where, const std::string& doing) const {
  const char* msg = archive_error_string(a);
  return invalid_input("{}{}: {}: {}", m_what, where, doing,
                       msg != nullptr ? msg : "not a valid tar archive");
}

Result<void> TarCollector::read(std::string_view compressed, int filter, const std::string& member) {
  const std::string where = member.empty() ? std::string() : ": " + member;
  std::unique_ptr<struct archive, ArchiveFree> a(archive_read_new());
  if (!a) {
    return internal_error("libarchive: out of memory");
  }
  archive_read_support_format_tar(a.get());
  const int rc = filter == ARCHIVE_FILTER_ZSTD ? archive_read_support_filter_zstd(a.get())
                                               : archive_read_support_filter_bzip2(a.get());
  if (rc != ARCHIVE_OK) {
    // ARCHIVE_WARN: libarchive would run an external program; lockstep never lets it.
    return external_error("{}{}: this libarchive can't decompress it in-process", m_what, where);
  }
  Utf8Locale locale;
  if (archive_read_open_memory(a.get(), compressed.data(), compressed.size()) != ARCHIVE_OK) {
    return failure(a.get(), where, "not a valid compressed tar");
  }
  bool first = true;
  for (;;) {
    struct archive_entry* entry = nullptr;
    const int next = archive_read_next_header(a.get(), &entry);
    if (next == ARCHIVE_EOF) {
      return {};
    }
    if (next != ARCHIVE_OK && next != ARCHIVE_WARN) {
      return failure(a.get(), where, first ? "not a valid compressed tar" : "can't read the next member");
    }
    if (first && (archive_filter_code(a.get(), 0) != filter || archive_filter_count(a.get()) != 2)) {
      return invalid_input("{}{}: not compressed as its name says ({}); refusing the package", m_what, where,
                           archive_filter_name(a.get(), 0));
    }
    first = false;
    LS_TRY(add(a.get(), entry, where));
  }
}

Result<std::string> TarCollector::read_data(struct archive* a, std::int64_t size, const std::string& where,
                                            const std::string& name) {
  if (size < 0 || static_cast<std::uint64_t>(size) > m_limits.max_total_bytes - m_bytes) {
    return invalid_input("{}{}: '{}' takes the package past {} bytes unpacked; refusing it", m_what, where,
                         name, m_limits.max_total_bytes);
  }
  m_bytes += static_cast<std::uint64_t>(size);
  // The header's size is a claim: memory grows with the bytes that really come, not with it.
  const auto want = static_cast<std::size_t>(size);
  std::string out;
  out.reserve(std::min(want, k_read_chunk));
  std::array<char, k_read_buffer> buf{};
  for (;;) {
    const la_ssize_t n = archive_read_data(a, buf.data(), buf.size());
    if (n < 0) {
      return failure(a, where, "can't read '" + name + "'");
    }
    if (n == 0) {
      break;
    }
    if (static_cast<std::size_t>(n) > want - out.size()) {
      return invalid_input("{}{}: '{}' is longer than its header says", m_what, where, name);
    }
    out.append(buf.data(), static_cast<std::size_t>(n));
  }
  if (out.size() != want) {
    return invalid_input("{}{}: '{}' is shorter than its header says", m_what, where, name);
  }
  return out;
}

Result<void> TarCollector::add(struct archive* a, struct archive_entry* entry, const std::string& where) {
  if (++m_entries > m_limits.max_entries) {
    return invalid_input("{}: more than {} archive members; refusing the package", m_what,
                         m_limits.max_entries);
  }
  if ((m_entries & 255U) == 0) {
    LS_TRY(check_interrupted());
  }
  const char* raw = archive_entry_pathname(entry);
  if (raw == nullptr || std::string_view(raw).size() > m_limits.max_path) {
    return invalid_input("{}{}: a member has an unreadable or overlong name; refusing the package", m_what,
                         where);
  }
  auto normal = normalize_member_name(raw);
  if (!normal) {
    return invalid_input("{}{}: {}; refusing the package", m_what, where, normal.error().message);
  }
  std::string name = std::move(*normal);
  auto bad = [&](std::string_view why) {
    return invalid_input("{}{}: '{}' {}; refusing the package", m_what, where, printable_ascii(name, 300),
                         why);
  };
  if (!name.empty() && !is_clean_relative_path(name, m_limits.max_path)) {
    return bad("is not a clean UTF-8 path (control characters, backslashes)");
  }
  if (archive_entry_hardlink(entry) != nullptr) {
    return bad("is a hard link; conda packages are installed without them");
  }
  const auto type = archive_entry_filetype(entry);
  if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
    return bad("is a device node, FIFO or socket; only files, directories and symlinks are installed");
  }
  if (name.empty() || name == "info") {
    return type == AE_IFDIR ? Result<void>() : bad("is not a directory");
  }
  if (!m_seen.insert(name).second) {
    // cph (Python's tarfile adding directories recursively) writes a directory more than once;
    // a repeated directory is harmless, anything else twice is refused.
    auto again = payload.find(name);
    if (type == AE_IFDIR && again != payload.end() && again->second.kind == EntryKind::directory) {
      return {};
    }
    return bad("is in the package twice");
  }
  if (name.starts_with("info/")) {
    if (type == AE_IFREG) {
      LS_TRY_ASSIGN(std::string data, read_data(a, archive_entry_size(entry), where, name));
      if (name == "info/index.json") {
        info_mtime = archive_entry_mtime(entry);
      }
      info.emplace(name.substr(5), std::move(data));
    }
    return {};
  }
  PayloadEntry p;
  p.path = name;
  p.mtime = archive_entry_mtime(entry);
  // Permission bits only, as conda extracts under umask 022: no setuid/setgid/sticky, no group or
  // other write.
  p.mode = static_cast<std::uint32_t>(archive_entry_perm(entry)) & 0755U;
  if (type == AE_IFREG) {
    p.kind = EntryKind::file;
    LS_TRY_ASSIGN(p.data, read_data(a, archive_entry_size(entry), where, name));
  } else if (type == AE_IFDIR) {
    p.kind = EntryKind::directory;
  } else {
    p.kind = EntryKind::symlink;
    const char* target = archive_entry_symlink(entry);
    p.target = target != nullptr ? target : "";
    if (p.target.empty() || p.target.size() > m_limits.max_path || has_controls(p.target)) {
      return bad("is a symlink with an empty, overlong or unprintable target");
    }
  }
  payload.emplace(name, std::move(p));
  return {};
}

// ---- Reading the containers -------------------------------------------------------------------------

/// The tars of a .conda: metadata.json checked, then info- and pkg- read through libarchive.
Result<void> read_conda_container(std::string_view bytes, std::string_view stem, TarCollector& tars,
                                  const std::string& what, const PackageLimits& limits) {
  LS_TRY_ASSIGN(std::vector<ZipMember> members, read_zip(bytes, what));
  auto find = [&](const std::string& name) -> const ZipMember* {
    auto it =
        std::find_if(members.begin(), members.end(), [&](const ZipMember& m) { return m.name == name; });
    return it == members.end() ? nullptr : &*it;
  };
  const ZipMember* metadata = find("metadata.json");
  const std::string info_name = fmt::format("info-{}.tar.zst", stem);
  const std::string pkg_name = fmt::format("pkg-{}.tar.zst", stem);
  const ZipMember* info = find(info_name);
  const ZipMember* pkg = find(pkg_name);
  if (metadata == nullptr || info == nullptr || pkg == nullptr) {
    return invalid_input("{}: a .conda holds metadata.json, {} and {}; this one lacks {}", what, info_name,
                         pkg_name,
                         metadata == nullptr ? "metadata.json"
                         : info == nullptr   ? info_name
                                             : pkg_name);
  }
  LS_TRY_ASSIGN(nlohmann::json meta,
                parse_json(metadata->data, what + ": metadata.json", limits.max_json_depth));
  const auto version = meta.is_object() ? meta.find("conda_pkg_format_version") : meta.end();
  if (!meta.is_object() || version == meta.end() || !version->is_number_integer() || *version != 2) {
    return invalid_input("{}: metadata.json does not say conda_pkg_format_version 2", what);
  }
  LS_TRY(tars.read(info->data, ARCHIVE_FILTER_ZSTD, info_name));
  return tars.read(pkg->data, ARCHIVE_FILTER_ZSTD, pkg_name);
}

/// The nearest proper ancestor of `path` that the payload holds as a file or a symlink, or nullptr.
const PayloadEntry* non_directory_parent(const std::map<std::string, PayloadEntry, std::less<>>& payload,
                                         std::string_view path) {
  for (std::size_t slash = path.rfind('/'); slash != std::string_view::npos && slash > 0;
       slash = path.rfind('/', slash - 1)) {
    auto it = payload.find(path.substr(0, slash));
    if (it != payload.end() && it->second.kind != EntryKind::directory) {
      return &it->second;
    }
  }
  return nullptr;
}

/// The payload's own rules: nothing under a symlink or a file, every symlink resolving inside the prefix.
Result<void> check_payload(const std::map<std::string, PayloadEntry, std::less<>>& payload,
                           const std::string& what) {
  std::map<std::string, std::string, std::less<>> symlinks;
  for (const auto& [path, entry] : payload) {
    if (entry.kind == EntryKind::symlink) {
      symlinks.emplace(path, entry.target);
    }
  }
  for (const auto& [path, entry] : payload) {
    if (const PayloadEntry* parent = non_directory_parent(payload, path)) {
      return invalid_input("{}: '{}' lies under the {} '{}'; refusing the package", what, path,
                           parent->kind == EntryKind::symlink ? "symlink" : "file", parent->path);
    }
    if (entry.kind == EntryKind::symlink && !symlink_stays_inside(path, entry.target, symlinks)) {
      return invalid_input("{}: symlink '{}' -> '{}' resolves outside the prefix; refusing the package", what,
                           path, printable_ascii(entry.target, 300));
    }
  }
  return {};
}

/// Each paths.json entry against the payload: present, of its type, with its sha256 and size.
Result<void> check_paths_against_payload(const Package& pkg, const std::string& what) {
  std::set<std::string_view> seen;
  for (const PathsEntry& e : pkg.paths) {
    if (!seen.insert(e.path).second) {
      return invalid_input("{}: paths.json lists '{}' twice; refusing the package", what, e.path);
    }
    const PayloadEntry* p = pkg.find(e.path);
    if (p == nullptr) {
      if (e.type == PathType::directory) {
        continue; // an empty directory the archive left out is created anyway
      }
      return invalid_input("{}: paths.json lists '{}', which is not in the package; refusing it", what,
                           e.path);
    }
    const EntryKind want = e.type == PathType::hardlink   ? EntryKind::file
                           : e.type == PathType::softlink ? EntryKind::symlink
                                                          : EntryKind::directory;
    if (p->kind != want) {
      return invalid_input("{}: paths.json says '{}' is a {}, the archive holds a {}; refusing the package",
                           what, e.path, path_type_name(e.type),
                           p->kind == EntryKind::file      ? "file"
                           : p->kind == EntryKind::symlink ? "symlink"
                                                           : "directory");
    }
    if (p->kind != EntryKind::file) {
      continue; // a softlink's sha256 is not reliable (rattler hashes the link text, CEP 34 the target)
    }
    if (e.size && *e.size != p->data.size()) {
      return invalid_input("{}: '{}' is {} bytes, paths.json says {}; refusing the package", what, e.path,
                           p->data.size(), *e.size);
    }
    if (!e.sha256.empty()) {
      const std::string actual = sha256_of(p->data).hex();
      if (actual != e.sha256) {
        return invalid_input("{}: '{}' has sha256 {}, paths.json says {}; refusing the package", what, e.path,
                             actual, e.sha256);
      }
    }
  }
  return {};
}

/// index.json's name, version and build against the file name's.
Result<void> check_identity(const Package& pkg, std::string_view filename, const std::string& what) {
  auto parts = split_artifact_filename(filename);
  if (!parts) {
    return invalid_input("{}: not a conda artifact name (NAME-VERSION-BUILD.conda or .tar.bz2)", what);
  }
  if (parts->name != pkg.index.name || parts->version != pkg.index.version ||
      parts->build != pkg.index.build) {
    return invalid_input(
        "{}: info/index.json names {}-{}-{}, not what the file name says; refusing the package", what,
        pkg.index.name, pkg.index.version, pkg.index.build);
  }
  return {};
}

} // namespace

// ---- Public functions -------------------------------------------------------------------------------

const PayloadEntry* Package::find(std::string_view path) const {
  auto it = std::lower_bound(payload.begin(), payload.end(), path,
                             [](const PayloadEntry& e, std::string_view p) { return e.path < p; });
  return it != payload.end() && it->path == path ? &*it : nullptr;
}

std::optional<PackageFormat> package_format_of(std::string_view filename) {
  if (filename.ends_with(".conda")) {
    return PackageFormat::conda;
  }
  if (filename.ends_with(".tar.bz2")) {
    return PackageFormat::tar_bz2;
  }
  return std::nullopt;
}

bool symlink_stays_inside(std::string_view link_path, std::string_view target,
                          const std::map<std::string, std::string, std::less<>>& symlinks) {
  std::vector<std::string> where = path_components(link_path);
  if (where.empty()) {
    return false;
  }
  where.pop_back(); // the link's directory
  std::deque<std::string> todo;
  auto push_target = [&](std::string_view t) {
    std::vector<std::string> parts = path_components(t);
    todo.insert(todo.begin(), parts.begin(), parts.end());
    return !t.starts_with('/');
  };
  if (!push_target(target)) {
    return false;
  }
  int hops = 0;
  while (!todo.empty()) {
    std::string comp = std::move(todo.front());
    todo.pop_front();
    if (comp == ".") {
      continue;
    }
    if (comp == "..") {
      if (where.empty()) {
        return false;
      }
      where.pop_back();
      continue;
    }
    where.push_back(std::move(comp));
    std::string joined;
    for (const std::string& c : where) {
      joined += joined.empty() ? c : "/" + c;
    }
    auto link = symlinks.find(joined);
    if (link == symlinks.end()) {
      continue;
    }
    if (++hops > k_max_symlink_hops) {
      return false;
    }
    where.pop_back();
    if (!push_target(link->second)) {
      return false;
    }
  }
  return true;
}

Result<void> verify_archive(std::string_view bytes, std::string_view sha256, std::uint64_t size,
                            std::string_view what) {
  if (bytes.size() != size) {
    return invalid_input("{}: the archive is {} bytes, the lock says {}; refusing it", what, bytes.size(),
                         size);
  }
  const std::string actual = sha256_of(bytes).hex();
  if (actual != ascii_lower(sha256)) {
    return invalid_input("{}: the archive has sha256 {}, the lock says {}; refusing it", what, actual,
                         sha256);
  }
  return {};
}

Result<Package> read_package(std::string_view bytes, std::string_view filename, const PackageLimits& limits) {
  const std::string what = filename.empty() ? std::string("conda package") : std::string(filename);
  auto format = package_format_of(filename);
  if (!format) {
    return invalid_input("{}: not a conda package name (.conda or .tar.bz2)", what);
  }
  Package pkg;
  pkg.format = *format;
  pkg.stem = std::string(filename.substr(0, filename.size() - (*format == PackageFormat::conda ? 6 : 8)));
  TarCollector tars(what, limits);
  if (pkg.format == PackageFormat::conda) {
    LS_TRY(read_conda_container(bytes, pkg.stem, tars, what, limits));
  } else {
    LS_TRY(tars.read(bytes, ARCHIVE_FILTER_BZIP2, ""));
  }
  LS_TRY(check_payload(tars.payload, what));
  pkg.info_mtime = tars.info_mtime;
  pkg.payload.reserve(tars.payload.size());
  for (auto& [path, entry] : tars.payload) {
    pkg.payload.push_back(std::move(entry));
  }
  LS_TRY_ASSIGN(InfoFiles info, read_info_files(tars.info, pkg.payload, what, limits));
  pkg.index = std::move(info.index);
  pkg.paths_source = info.paths_source;
  pkg.paths = std::move(info.paths);
  pkg.link = std::move(info.link);
  LS_TRY(check_identity(pkg, filename, what));
  LS_TRY(check_paths_against_payload(pkg, what));
  return pkg;
}

Result<Package> read_package_file(const std::filesystem::path& path, std::string_view filename,
                                  const PackageLimits& limits) {
  const std::string name = filename.empty() ? path.filename().string() : std::string(filename);
  LS_TRY_ASSIGN(std::string bytes, read_file(path, limits.max_total_bytes));
  return read_package(bytes, name, limits);
}

} // namespace lockstep::conda
