#include "support/oci/tar_reader.hpp"

#include "support/system/fs.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace lockstep {

namespace detail {

struct TarLayerFeed {
  explicit TarLayerFeed(oci::LayerStream s) : stream(std::move(s)) {}
  oci::LayerStream stream;
  std::optional<Error> error;
};

namespace {

la_ssize_t read_layer_feed(struct archive* a, void* client, const void** buf) {
  auto* feed = static_cast<TarLayerFeed*>(client);
  auto piece = feed->stream.next();
  if (!piece) {
    feed->error = std::move(piece).error();
    archive_set_error(a, EINVAL, "%s", feed->error->message.c_str());
    return ARCHIVE_FATAL;
  }
  *buf = piece->data();
  return static_cast<la_ssize_t>(piece->size());
}

} // namespace

} // namespace detail

Result<TarReader> TarReader::open(const std::filesystem::path& file, std::string what) {
  LS_TRY_ASSIGN(UniqueFd fd, open_file(file, O_RDONLY | O_NONBLOCK)); // a FIFO must not block us
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_error("can't stat " + file.string(), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_input("{}: {} is not a regular file", what, file.string());
  }
  struct archive* a = archive_read_new();
  if (a == nullptr) {
    return internal_error("libarchive: out of memory");
  }
  // Tar only, and only the filters libarchive implements in-process (no external programs).
  archive_read_support_format_tar(a);
  archive_read_support_filter_none(a);
  archive_read_support_filter_gzip(a);
  archive_read_support_filter_bzip2(a);
  archive_read_support_filter_xz(a);
  archive_read_support_filter_lzma(a);
  archive_read_support_filter_lzip(a);
  archive_read_support_filter_zstd(a);
  archive_read_support_filter_lz4(a);
  TarReader reader(a, std::move(what));
  if (archive_read_open_fd(a, fd.get(), std::size_t{64} * 1024) != ARCHIVE_OK) {
    return reader.archive_failure("not a valid tar archive");
  }
  reader.m_fd = std::move(fd);
  return reader;
}

Result<TarReader> TarReader::open_layer(oci::LayerStream stream) {
  struct archive* a = archive_read_new();
  if (a == nullptr) {
    return internal_error("libarchive: out of memory");
  }
  // The stream decompresses: libarchive sees a plain tar and runs no filter of its own.
  archive_read_support_format_tar(a);
  archive_read_support_filter_none(a);
  TarReader reader(a, stream.what());
  reader.m_feed = std::make_unique<detail::TarLayerFeed>(std::move(stream));
  if (archive_read_open(a, reader.m_feed.get(), nullptr, detail::read_layer_feed, nullptr) != ARCHIVE_OK) {
    return reader.archive_failure("not a valid tar archive");
  }
  return reader;
}

TarReader::TarReader(struct archive* a, std::string what) : m_archive(a), m_what(std::move(what)) {
}

TarReader::~TarReader() {
  if (m_archive != nullptr) {
    archive_read_free(m_archive);
  }
}

TarReader::TarReader(TarReader&& o) noexcept
    : m_archive(std::exchange(o.m_archive, nullptr)), m_fd(std::move(o.m_fd)), m_feed(std::move(o.m_feed)),
      m_what(std::move(o.m_what)), m_current(std::move(o.m_current)) {
}

Error TarReader::archive_failure(const std::string& doing) const {
  if (m_feed && m_feed->error) {
    return *m_feed->error; // the layer stream's own failure: the most precise cause
  }
  const char* msg = archive_error_string(m_archive);
  int err = archive_errno(m_archive);
  ExitCode code = (err == EIO || err == EACCES || err == ENOMEM) ? ExitCode::io : ExitCode::invalid_input;
  Error e{code, m_what + ": " + doing + ": " + (msg != nullptr ? msg : "not a valid tar archive")};
  return m_feed ? m_feed->stream.blame(std::move(e)) : e;
}

// The archive ended: a layer's blob is read to its end and checked.
Result<void> TarReader::at_end() {
  m_current.clear();
  if (m_feed) {
    LS_TRY(m_feed->stream.finish());
  }
  return {};
}

Result<std::optional<TarMember>> TarReader::next() {
  struct archive_entry* entry = nullptr;
  int rc = archive_read_next_header(m_archive, &entry);
  if (rc == ARCHIVE_EOF) {
    LS_TRY(at_end());
    return std::optional<TarMember>();
  }
  if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
    return archive_failure(m_current.empty() ? std::string("not a valid tar archive")
                                             : "can't read the member after '" + m_current + "'");
  }
  const char* raw = archive_entry_pathname(entry);
  if (raw == nullptr) {
    raw = archive_entry_pathname_utf8(entry);
  }
  if (raw == nullptr) {
    return invalid_input("{}: archive member with an unreadable name", m_what);
  }
  auto name = normalize_member_name(raw);
  if (!name) {
    return invalid_input("{}: {}; refusing the archive", m_what, name.error().message);
  }
  TarMember m;
  m.name = std::move(*name);
  m.mode = static_cast<std::uint32_t>(archive_entry_perm(entry)) & 07777U;
  m_current = m.name;
  m_view_offset = 0;
  m_held = nullptr;
  if (const char* target = archive_entry_hardlink(entry); target != nullptr) {
    auto t = normalize_member_name(target);
    if (!t) {
      return invalid_input("{}: hard link '{}' -> {}; refusing the archive", m_what, m.name,
                           t.error().message);
    }
    m.type = TarMember::Type::hardlink;
    m.link_target = std::move(*t);
    return std::optional<TarMember>(std::move(m));
  }
  switch (archive_entry_filetype(entry)) {
  case AE_IFREG:
    m.type = TarMember::Type::file;
    m.size = archive_entry_size(entry);
    if (m.size < 0) {
      return invalid_input("{}: archive member '{}' has a negative size", m_what, m.name);
    }
    break;
  case AE_IFDIR:
    m.type = TarMember::Type::directory;
    break;
  case AE_IFLNK: {
    m.type = TarMember::Type::symlink;
    const char* target = archive_entry_symlink(entry);
    m.link_target = target != nullptr ? target : "";
    break;
  }
  default:
    m.type = TarMember::Type::other;
    break;
  }
  return std::optional<TarMember>(std::move(m));
}

Result<std::optional<layer::Member>> TarReader::next_layer_member() {
  struct archive_entry* entry = nullptr;
  int rc = archive_read_next_header(m_archive, &entry);
  if (rc == ARCHIVE_EOF) {
    LS_TRY(at_end());
    return std::optional<layer::Member>();
  }
  if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
    return archive_failure(m_current.empty() ? std::string("not a valid tar archive")
                                             : "can't read the member after '" + m_current + "'");
  }
  LS_TRY_ASSIGN(layer::Member m, layer::classify_member(entry, m_what));
  m_current = m.raw;
  m_view_offset = 0;
  m_held = nullptr;
  return std::optional<layer::Member>(std::move(m));
}

const oci::LayerStream* TarReader::layer_stream() const {
  return m_feed ? &m_feed->stream : nullptr;
}

Result<std::size_t> TarReader::read(void* data, std::size_t size) {
  la_ssize_t n = archive_read_data(m_archive, data, size);
  if (n < 0) {
    return archive_failure("can't read archive member '" + m_current + "'");
  }
  return static_cast<std::size_t>(n);
}

Result<std::span<const char>> TarReader::read_view(char* scratch, std::size_t size) {
  if (m_held == nullptr) {
    const void* block = nullptr;
    std::size_t n = 0;
    la_int64_t offset = 0;
    int rc = archive_read_data_block(m_archive, &block, &n, &offset);
    if (rc == ARCHIVE_EOF) {
      return std::span<const char>();
    }
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      return archive_failure("can't read archive member '" + m_current + "'");
    }
    if (offset < m_view_offset) {
      return invalid_input("{}: member '{}' has sparse blocks out of order", m_what, m_current);
    }
    m_held = block;
    m_held_size = n;
    m_held_offset = offset;
  }
  if (m_held_offset > m_view_offset) { // a hole: zeros first
    const auto n = static_cast<std::size_t>(
        std::min<std::int64_t>(m_held_offset - m_view_offset, static_cast<std::int64_t>(size)));
    std::memset(scratch, 0, n);
    m_view_offset += static_cast<std::int64_t>(n);
    return std::span<const char>(scratch, n);
  }
  std::span<const char> out(static_cast<const char*>(m_held), m_held_size);
  m_view_offset += static_cast<std::int64_t>(m_held_size);
  m_held = nullptr;
  if (out.empty()) { // the zero-length block that ends a sparse member: read on
    return read_view(scratch, size);
  }
  return out;
}

} // namespace lockstep
