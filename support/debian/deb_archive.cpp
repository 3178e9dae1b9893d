#include "support/debian/deb_archive.hpp"

#include "support/base/interrupt.hpp"
#include "support/codec/archive_names.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <clocale>
#include <set>

namespace lockstep {

namespace fs = std::filesystem;

namespace {

// ---- Bounds on hostile archives -------------------------------------------------------------------
constexpr std::int64_t k_max_debian_binary = 64;
constexpr std::size_t k_max_ar_members = 16;
constexpr std::int64_t k_max_data_member = 64LL << 30; // one file in data.tar
constexpr std::size_t k_max_member_name = 4095;        // PATH_MAX - 1 for names and link targets
constexpr std::uint32_t k_max_id = 0xFFFFFFFEU;        // (uid_t)-1 is not an owner

std::string archive_message(struct archive* a) {
  const char* m = archive_error_string(a);
  return m != nullptr ? m : "unknown error";
}

} // namespace

void detail::ArchiveReadFree::operator()(struct archive* a) const {
  archive_read_free(a);
}

// ---- An inner tar ----------------------------------------------------------------------------------

InnerTar::InnerTar(struct archive* outer, std::string where)
    : m_outer(outer), m_where(std::move(where)), m_buf(64U << 10) {
}

InnerTar::~InnerTar() = default;

Result<std::unique_ptr<InnerTar>> InnerTar::open(struct archive* outer, const std::string& member,
                                                 std::string_view suffix, std::string where,
                                                 std::size_t max_members) {
  auto self = std::unique_ptr<InnerTar>(new InnerTar(outer, std::move(where)));
  self->m_max_members = max_members;
  struct archive* a = archive_read_new();
  if (a == nullptr) {
    return internal_error("libarchive: out of memory");
  }
  self->m_archive.reset(a);
  archive_read_support_format_tar(a);
  // Only the compressor the member's name announces (libarchive falls back to none otherwise,
  // which the filter check after the first header catches).
  int rc = ARCHIVE_OK;
  if (suffix == ".gz") {
    rc = archive_read_support_filter_gzip(a);
    self->m_filter = ARCHIVE_FILTER_GZIP;
  } else if (suffix == ".xz") {
    rc = archive_read_support_filter_xz(a);
    self->m_filter = ARCHIVE_FILTER_XZ;
  } else if (suffix == ".zst") {
    rc = archive_read_support_filter_zstd(a);
    self->m_filter = ARCHIVE_FILTER_ZSTD;
  } else if (suffix == ".bz2") {
    rc = archive_read_support_filter_bzip2(a);
    self->m_filter = ARCHIVE_FILTER_BZIP2;
  } else if (suffix == ".lzma") {
    rc = archive_read_support_filter_lzma(a);
    self->m_filter = ARCHIVE_FILTER_LZMA;
  } else {
    rc = archive_read_support_filter_none(a);
    self->m_filter = ARCHIVE_FILTER_NONE;
  }
  if (rc != ARCHIVE_OK) {
    // ARCHIVE_WARN: libarchive would run an external program; lockstep never lets it.
    return external_error("{}: this libarchive can't decompress {} in-process", self->m_where, member);
  }
  self->m_member = member;
  if (archive_read_open(a, self.get(), nullptr, &InnerTar::read_callback, nullptr) != ARCHIVE_OK) {
    return self->failure("not a valid " + member);
  }
  return self;
}

Result<std::optional<DebMember>> InnerTar::next() {
  struct archive_entry* entry = nullptr;
  int rc = archive_read_next_header(m_archive.get(), &entry);
  if (rc == ARCHIVE_EOF) {
    return std::optional<DebMember>();
  }
  if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
    return failure(m_last.empty() ? "not a valid " + m_member
                                  : "can't read the member after '" + m_last + "'");
  }
  if (++m_count > m_max_members) {
    return invalid_input("{}: {} has more than {} members", m_where, m_member, m_max_members);
  }
  if ((m_count & 255U) == 0) {
    LS_TRY(check_interrupted());
  }
  if (!m_filter_checked) {
    m_filter_checked = true;
    int count = archive_filter_count(m_archive.get());
    if (archive_filter_code(m_archive.get(), 0) != m_filter ||
        count > (m_filter == ARCHIVE_FILTER_NONE ? 1 : 2)) {
      return invalid_input("{}: {} is not compressed the way its name says ({}); refusing the package",
                           m_where, m_member, archive_filter_name(m_archive.get(), 0));
    }
  }
  const char* raw = archive_entry_pathname(entry);
  if (raw == nullptr) {
    raw = archive_entry_pathname_utf8(entry);
  }
  if (raw == nullptr) {
    return invalid_input("{}: {} has a member with an unreadable name", m_where, m_member);
  }
  std::string_view raw_name(raw);
  if (raw_name.size() > k_max_member_name) {
    return invalid_input("{}: {} has a member name of {} bytes (at most {})", m_where, m_member,
                         raw_name.size(), k_max_member_name);
  }
  auto name = normalize_member_name(raw_name);
  if (!name) {
    return invalid_input("{}: {}: {}; refusing the package", m_where, m_member, name.error().message);
  }
  DebMember m;
  m.name = std::move(*name);
  m_last = m.name;
  m.mode = static_cast<std::uint32_t>(archive_entry_perm(entry)) & 07777U;
  auto uid = archive_entry_uid(entry);
  auto gid = archive_entry_gid(entry);
  if (uid < 0 || gid < 0 || uid > k_max_id || gid > k_max_id) {
    return invalid_input("{}: {}: '{}' has an invalid owner {}:{}", m_where, m_member, m.name, uid, gid);
  }
  m.uid = static_cast<std::uint32_t>(uid);
  m.gid = static_cast<std::uint32_t>(gid);
  m.mtime = archive_entry_mtime(entry);
  if (const char* target = archive_entry_hardlink(entry); target != nullptr) {
    auto t = normalize_member_name(target);
    if (!t || t->empty()) {
      return invalid_input(
          "{}: {}: hard link '{}' -> '{}' is not a path inside the package; refusing the package", m_where,
          m_member, m.name, target);
    }
    m.type = DebMember::Type::hardlink;
    m.link_target = std::move(*t);
    return std::optional<DebMember>(std::move(m));
  }
  switch (archive_entry_filetype(entry)) {
  case AE_IFREG:
    m.type = DebMember::Type::file;
    m.size = archive_entry_size(entry);
    if (m.size < 0 || m.size > k_max_data_member) {
      return invalid_input("{}: {}: '{}' has a size of {} bytes (at most {})", m_where, m_member, m.name,
                           m.size, k_max_data_member);
    }
    break;
  case AE_IFDIR:
    m.type = DebMember::Type::dir;
    break;
  case AE_IFLNK: {
    m.type = DebMember::Type::symlink;
    const char* target = archive_entry_symlink(entry);
    m.link_target = target != nullptr ? target : "";
    if (m.link_target.empty() || m.link_target.size() > k_max_member_name) {
      return invalid_input("{}: {}: symlink '{}' has an empty or overlong target", m_where, m_member, m.name);
    }
    break;
  }
  case AE_IFCHR:
  case AE_IFBLK:
    return invalid_input(
        "{}: {}: '{}' is a device node; packages installed by lockstep may not create devices", m_where,
        m_member, m.name);
  default:
    return invalid_input("{}: {}: '{}' is a FIFO, socket or unknown type; only files, directories and links "
                         "are installed",
                         m_where, m_member, m.name);
  }
  return std::optional<DebMember>(std::move(m));
}

Error InnerTar::error_at(const std::string& name, const std::string& why) const {
  return invalid_input("{}: {}: '{}' has {}", m_where, m_member, name, why);
}

Result<std::size_t> InnerTar::read(void* data, std::size_t size) {
  la_ssize_t n = archive_read_data(m_archive.get(), data, size);
  if (n < 0) {
    return failure("can't read '" + m_last + "'");
  }
  return static_cast<std::size_t>(n);
}

Result<std::string> InnerTar::read_all(std::int64_t size) {
  std::string out(static_cast<std::size_t>(size), '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    LS_TRY_ASSIGN(std::size_t n, read(out.data() + got, out.size() - got));
    if (n == 0) {
      return invalid_input("{}: {}: '{}' is truncated", m_where, m_member, m_last);
    }
    got += n;
  }
  return out;
}

ssize_t InnerTar::read_callback(struct archive* /*a*/, void* client, const void** buffer) {
  auto* self = static_cast<InnerTar*>(client);
  la_ssize_t n = archive_read_data(self->m_outer, self->m_buf.data(), self->m_buf.size());
  if (n < 0) {
    self->m_outer_error = archive_message(self->m_outer);
    return ARCHIVE_FATAL;
  }
  *buffer = self->m_buf.data();
  return n;
}

Error InnerTar::failure(const std::string& doing) const {
  // A failure of the ar archive underneath (truncation) says more than the tar reader's message.
  std::string why = m_outer_error.empty() ? archive_message(m_archive.get()) : m_outer_error;
  int err = archive_errno(m_archive.get());
  ExitCode code =
      (err == EIO || err == ENOMEM) && m_outer_error.empty() ? ExitCode::io : ExitCode::invalid_input;
  return Error{code, fmt::format("{}: {}: {}", m_where, doing, why)};
}

// ---- The ar container ------------------------------------------------------------------------------

DebArchive::DebArchive(struct archive* a, std::string what) : m_archive(a), m_what(std::move(what)) {
}

Result<DebArchive> DebArchive::open(const fs::path& deb, std::string_view what) {
  LS_TRY_ASSIGN(UniqueFd fd, open_file(deb, O_RDONLY | O_NONBLOCK)); // a FIFO must not block us
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_error("can't stat " + deb.string(), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_input("{}: {} is not a regular file", what, deb.string());
  }
  struct archive* a = archive_read_new();
  if (a == nullptr) {
    return internal_error("libarchive: out of memory");
  }
  DebArchive d(a, std::string(what));
  archive_read_support_format_ar(a);
  archive_read_support_filter_none(a);
  if (archive_read_open_fd(a, fd.get(), 64U << 10) != ARCHIVE_OK) {
    return invalid_input("{}: not a Debian package (an ar archive): {}", what, archive_message(a));
  }
  d.m_fd = std::move(fd);
  return d;
}

Result<void> DebArchive::read_debian_binary() {
  LS_TRY_ASSIGN(auto name, next_name());
  if (!name || *name != "debian-binary") {
    return invalid_input("{}: not a Debian package: the first member is '{}', expected 'debian-binary'",
                         m_what, name ? *name : std::string("(none)"));
  }
  if (m_size > k_max_debian_binary) {
    return invalid_input("{}: debian-binary has {} bytes; expected '2.0'", m_what, m_size);
  }
  std::string text(static_cast<std::size_t>(std::max<std::int64_t>(m_size, 0)), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    la_ssize_t n = archive_read_data(m_archive.get(), text.data() + got, text.size() - got);
    if (n <= 0) {
      return invalid_input("{}: can't read debian-binary: {}", m_what,
                           n == 0 ? std::string("truncated") : archive_message(m_archive.get()));
    }
    got += static_cast<std::size_t>(n);
  }
  std::string_view line(text);
  line = line.substr(0, line.find('\n'));
  bool ok = line.size() >= 3 && line.substr(0, 2) == "2." &&
            std::all_of(line.begin() + 2, line.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
            text.find('\n') != std::string::npos;
  if (!ok) {
    return invalid_input("{}: unsupported Debian package format '{}' in debian-binary (lockstep reads 2.x)",
                         m_what, line);
  }
  return {};
}

Result<std::string> DebArchive::expect(std::string_view stem, std::span<const std::string_view> suffixes) {
  for (;;) {
    LS_TRY_ASSIGN(auto name, next_name());
    if (!name) {
      return invalid_input("{}: the package ends before its {} member (truncated?)", m_what, stem);
    }
    if (!name->empty() && name->front() == '_') {
      continue;
    }
    std::string_view n(*name);
    if (n.substr(0, stem.size()) == stem &&
        std::find(suffixes.begin(), suffixes.end(), n.substr(stem.size())) != suffixes.end()) {
      m_member = *name;
      return std::string(n.substr(stem.size()));
    }
    return invalid_input("{}: member '{}' where {}[.gz|.xz|.zst...] was expected; refusing the package",
                         m_what, n, stem);
  }
}

Result<std::optional<std::string>> DebArchive::next_name() {
  struct archive_entry* entry = nullptr;
  int rc = archive_read_next_header(m_archive.get(), &entry);
  if (rc == ARCHIVE_EOF) {
    return std::optional<std::string>();
  }
  if (rc != ARCHIVE_OK) {
    return invalid_input("{}: not a valid Debian package: {}", m_what, archive_message(m_archive.get()));
  }
  if (++m_count > k_max_ar_members) {
    return invalid_input("{}: more than {} ar members before data.tar; refusing the package", m_what,
                         k_max_ar_members);
  }
  const char* name = archive_entry_pathname(entry);
  m_size = archive_entry_size(entry);
  return std::optional<std::string>(name != nullptr ? name : "");
}

// ---- Files out of data.tar -------------------------------------------------------------------------

Result<std::unique_ptr<InnerTar>> open_deb_data(DebArchive& ar, std::string_view what) {
  LS_TRY(ar.read_debian_binary());
  LS_TRY(ar.expect("control.tar", k_control_suffixes));
  LS_TRY_ASSIGN(std::string suffix, ar.expect("data.tar", k_data_suffixes));
  return InnerTar::open(ar.get(), ar.member(), suffix, std::string(what), k_deb_max_data_members);
}

Result<std::vector<std::pair<std::string, std::string>>>
read_deb_files(const fs::path& deb, const std::function<bool(std::string_view)>& wanted,
               std::uint64_t max_each, std::string_view what) {
  Utf8Locale locale;
  LS_TRY_ASSIGN(DebArchive ar, DebArchive::open(deb, what));
  LS_TRY_ASSIGN(auto data, open_deb_data(ar, what));
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> names; // the wanted files read so far
  std::uint64_t total = 0;
  for (;;) {
    LS_TRY_ASSIGN(auto m, data->next());
    if (!m) {
      break;
    }
    if (m->type != DebMember::Type::file) {
      continue;
    }
    // Every file counts towards the bound: skipping a member still decompresses it.
    total += static_cast<std::uint64_t>(m->size);
    if (total > k_deb_max_data_total) {
      return invalid_input("{}: {} holds more than {} bytes of files", what, ar.member(),
                           k_deb_max_data_total);
    }
    if (!wanted(m->name)) {
      continue;
    }
    if (static_cast<std::uint64_t>(m->size) > max_each) {
      return invalid_input("{}: {}: '{}' has {} bytes (at most {})", what, ar.member(), m->name, m->size,
                           max_each);
    }
    if (!names.insert(m->name).second) {
      return invalid_input("{}: {} lists '{}' twice; refusing the package", what, ar.member(), m->name);
    }
    LS_TRY_ASSIGN(std::string content, data->read_all(m->size));
    out.emplace_back(m->name, std::move(content));
  }
  return out;
}

} // namespace lockstep
