#include "support/oci/tar_writer.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <sys/stat.h>

#include <clocale>
#include <exception>

namespace lockstep {

// Exceptions must not unwind through libarchive's C frames: the callback parks them here and
// TarWriter::check() rethrows after libarchive has returned.
struct TarWriter::CallbackState {
  ByteSink* sink;
  std::exception_ptr error;
};

namespace {

la_ssize_t write_callback(struct archive* /*a*/, void* client, const void* buf, size_t size) {
  auto* state = static_cast<TarWriter::CallbackState*>(client);
  if (state->sink == nullptr) {
    return static_cast<la_ssize_t>(size); // being destroyed without finish(): discard
  }
  try {
    state->sink->write(buf, size);
  } catch (...) {
    state->error = std::current_exception();
    return -1;
  }
  return static_cast<la_ssize_t>(size);
}

mode_t file_type_bits(TarEntry::Type t) {
  switch (t) {
  case TarEntry::Type::file:
  case TarEntry::Type::hardlink:
    return AE_IFREG;
  case TarEntry::Type::dir:
    return AE_IFDIR;
  case TarEntry::Type::symlink:
    return AE_IFLNK;
  case TarEntry::Type::char_device:
    return AE_IFCHR;
  case TarEntry::Type::block_device:
    return AE_IFBLK;
  case TarEntry::Type::fifo:
    return AE_IFIFO;
  }
  return AE_IFREG;
}

} // namespace

TarWriter::TarWriter(ByteSink& out)
    : m_state(std::make_unique<CallbackState>(CallbackState{&out, nullptr})), m_archive(archive_write_new()),
      m_entry(archive_entry_new()) {
  Utf8Locale locale;
  check(archive_write_set_format_pax_restricted(m_archive), "set format");
  // SCHILY.xattr.* records only (no LIBARCHIVE.xattr.* duplicates): what containerd and Go read.
  check(archive_write_set_format_option(m_archive, "pax", "xattrheader", "SCHILY"), "set xattr header");
  check(archive_write_set_bytes_per_block(m_archive, 0), "set block size");
  check(archive_write_open2(m_archive, m_state.get(), nullptr, write_callback, nullptr, nullptr), "open");
}

TarWriter::~TarWriter() {
  Utf8Locale locale;
  m_state->sink = nullptr;
  archive_entry_free(m_entry);
  archive_write_free(m_archive);
}

void TarWriter::check(int r, const char* what) {
  if (m_state->error) {
    std::exception_ptr e = m_state->error;
    m_state->error = nullptr;
    std::rethrow_exception(e);
  }
  if (r < ARCHIVE_OK) {
    const char* msg = archive_error_string(m_archive);
    throw Failure(internal_error("tar writer: {}: {}", what, msg != nullptr ? msg : "unknown error"));
  }
}

void TarWriter::add(const TarEntry& e) {
  Utf8Locale locale;
  archive_entry_clear(m_entry);
  std::string path = e.type == TarEntry::Type::dir ? e.path + "/" : e.path;
  archive_entry_copy_pathname(m_entry, path.c_str());
  archive_entry_set_filetype(m_entry, file_type_bits(e.type));
  archive_entry_set_perm(m_entry, static_cast<mode_t>(e.mode & 07777));
  archive_entry_set_uid(m_entry, e.uid);
  archive_entry_set_gid(m_entry, e.gid);
  archive_entry_set_mtime(m_entry, e.mtime, 0);
  switch (e.type) {
  case TarEntry::Type::file:
    archive_entry_set_size(m_entry, e.size);
    break;
  case TarEntry::Type::hardlink:
    archive_entry_copy_hardlink(m_entry, e.link_target.c_str());
    archive_entry_set_size(m_entry, 0);
    break;
  case TarEntry::Type::symlink:
    archive_entry_copy_symlink(m_entry, e.link_target.c_str());
    archive_entry_set_size(m_entry, 0);
    break;
  case TarEntry::Type::char_device:
  case TarEntry::Type::block_device:
    archive_entry_set_rdevmajor(m_entry, e.dev_major);
    archive_entry_set_rdevminor(m_entry, e.dev_minor);
    archive_entry_set_size(m_entry, 0);
    break;
  case TarEntry::Type::dir:
  case TarEntry::Type::fifo:
    archive_entry_set_size(m_entry, 0);
    break;
  }
  for (const auto& [name, value] : e.xattrs) {
    archive_entry_xattr_add_entry(m_entry, name.c_str(), value.data(), value.size());
  }
  int r = archive_write_header(m_archive, m_entry);
  // ARCHIVE_WARN: the name is not valid UTF-8 and was written raw with hdrcharset=BINARY.
  check(r == ARCHIVE_WARN && !m_state->error ? ARCHIVE_OK : r, path.c_str());
}

void TarWriter::write_data(const void* data, std::size_t size) {
  Utf8Locale locale;
  la_ssize_t n = archive_write_data(m_archive, data, size);
  if (n < 0 || static_cast<std::size_t>(n) != size) {
    check(ARCHIVE_FATAL, "write data");
  }
}

void TarWriter::finish() {
  if (!m_finished) {
    Utf8Locale locale;
    m_finished = true;
    check(archive_write_close(m_archive), "close");
  }
}

} // namespace lockstep
