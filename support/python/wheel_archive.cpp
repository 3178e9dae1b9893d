#include "support/python/wheel_archive.hpp"

#include "support/base/interrupt.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <utility>
#include <vector>

namespace lockstep {

namespace fs = std::filesystem;

Result<ZipReader> ZipReader::open(const fs::path& path, const std::string& what) {
  LS_TRY_ASSIGN(UniqueFd fd, open_file(path, O_RDONLY | O_NONBLOCK));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_error("can't stat " + path.string(), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_input("{}: {} is not a regular file", what, path.string());
  }
  struct archive* a = archive_read_new();
  if (a == nullptr) {
    return internal_error("libarchive: out of memory");
  }
  archive_read_support_format_zip_seekable(a);
  archive_read_support_filter_none(a);
  ZipReader z(a, what);
  if (archive_read_open_fd(a, fd.get(), std::size_t{64} * 1024) != ARCHIVE_OK) {
    return z.failure("not a valid zip archive");
  }
  z.m_fd = std::move(fd);
  return z;
}

ZipReader::~ZipReader() {
  if (m_archive != nullptr) {
    archive_read_free(m_archive);
  }
}

ZipReader::ZipReader(ZipReader&& o) noexcept
    : m_archive(std::exchange(o.m_archive, nullptr)), m_fd(std::move(o.m_fd)), m_what(std::move(o.m_what)) {
}

Result<struct archive_entry*> ZipReader::next(const std::string& previous) {
  struct archive_entry* entry = nullptr;
  int rc = archive_read_next_header(m_archive, &entry);
  if (rc == ARCHIVE_EOF) {
    return static_cast<struct archive_entry*>(nullptr);
  }
  if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
    return failure(previous.empty() ? std::string("not a valid zip archive")
                                    : "can't read the member after '" + previous + "'");
  }
  return entry;
}

Result<std::size_t> ZipReader::read(void* data, std::size_t size, const std::string& member) {
  la_ssize_t n = archive_read_data(m_archive, data, size);
  if (n < 0) {
    return failure("can't read member '" + member + "'");
  }
  return static_cast<std::size_t>(n);
}

Error ZipReader::failure(const std::string& doing) const {
  const char* msg = archive_error_string(m_archive);
  int err = archive_errno(m_archive);
  ExitCode code = (err == EIO || err == EACCES || err == ENOMEM) ? ExitCode::io : ExitCode::invalid_input;
  return Error{code, m_what + ": " + doing + ": " + (msg != nullptr ? msg : "not a valid zip archive")};
}

const char* raw_name(struct archive_entry* entry) {
  const char* raw = archive_entry_pathname_utf8(entry);
  return raw != nullptr ? raw : archive_entry_pathname(entry);
}

Result<std::string> check_member_name(const char* raw, const std::string& what) {
  if (raw == nullptr || *raw == '\0') {
    return invalid_input("{}: a zip member has an empty or unreadable name; refusing the wheel", what);
  }
  std::string_view name(raw);
  auto bad = [&](std::string_view why) {
    return invalid_input("{}: zip member '{}' {}; refusing the wheel", what, name, why);
  };
  if (name.front() == '/') {
    return bad("has an absolute name");
  }
  if (name.find('\\') != std::string_view::npos) {
    return bad("has a backslash in its name");
  }
  if (std::any_of(name.begin(), name.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return bad("has a control character in its name");
  }
  std::string_view clean = name;
  if (clean.back() == '/') {
    clean.remove_suffix(1);
  }
  std::size_t i = 0;
  while (i <= clean.size()) {
    std::size_t j = clean.find('/', i);
    j = j == std::string_view::npos ? clean.size() : j;
    std::string_view comp = clean.substr(i, j - i);
    if (comp == "..") {
      return bad("has a '..' component");
    }
    if (comp.empty() || comp == ".") {
      return bad("has an empty or '.' component");
    }
    i = j + 1;
  }
  return std::string(clean);
}

Result<MemberListing::Listed> MemberListing::next() {
  throw_if_interrupted();
  LS_TRY_ASSIGN(struct archive_entry * entry, m_zip.next(m_previous));
  if (entry == nullptr) {
    return Listed{};
  }
  if (++m_entries > k_max_wheel_members) {
    return invalid_input("{}: more than {} zip members; refusing the wheel", m_what, k_max_wheel_members);
  }
  LS_TRY_ASSIGN(std::string name, check_member_name(raw_name(entry), m_what));
  m_previous = name;
  return Listed{entry, std::move(name)};
}

Result<std::string> read_whole(ZipReader& zip, const std::string& name, std::int64_t size, std::size_t limit,
                               const std::string& what) {
  if (size > static_cast<std::int64_t>(limit)) {
    return invalid_input("{}: {} is {} bytes, more than the {} lockstep reads", what, name, size, limit);
  }
  std::string out(static_cast<std::size_t>(size), '\0');
  std::size_t total = 0;
  for (;;) {
    if (total == out.size()) {
      char extra = 0;
      LS_TRY_ASSIGN(std::size_t n, zip.read(&extra, 1, name));
      if (n != 0) {
        return invalid_input("{}: zip member {} is longer than its header says", what, name);
      }
      break;
    }
    LS_TRY_ASSIGN(std::size_t n, zip.read(out.data() + total, out.size() - total, name));
    if (n == 0) {
      return invalid_input("{}: zip member {} is shorter than its header says", what, name);
    }
    total += n;
  }
  return out;
}

/// Reads at most `limit` bytes of the current member (fewer at its end).
Result<std::string> read_up_to(ZipReader& zip, const std::string& member, std::size_t limit) {
  std::string out;
  std::vector<char> buf(std::size_t{64} * 1024);
  while (out.size() < limit) {
    LS_TRY_ASSIGN(std::size_t n, zip.read(buf.data(), std::min(buf.size(), limit - out.size()), member));
    if (n == 0) {
      break;
    }
    out.append(buf.data(), n);
  }
  return out;
}

Result<std::pair<std::string, std::string>> read_wheel_metadata_text(const fs::path& whl,
                                                                     std::string_view what_view) {
  const std::string what(what_view);
  LS_TRY_ASSIGN(ZipReader zip, ZipReader::open(whl, what));
  MemberListing listing(zip, what);
  std::set<std::string> dist_infos;
  std::optional<std::string> metadata;
  std::string metadata_name;
  for (;;) {
    LS_TRY_ASSIGN(MemberListing::Listed listed, listing.next());
    auto& [entry, name] = listed;
    if (entry == nullptr) {
      break;
    }
    std::string first = name.substr(0, name.find('/'));
    if (first.size() <= 10 || first.substr(first.size() - 10) != ".dist-info") {
      continue;
    }
    dist_infos.insert(first);
    if (name == first + "/METADATA" && archive_entry_filetype(entry) == AE_IFREG) {
      const std::int64_t size = archive_entry_size_is_set(entry) != 0 ? archive_entry_size(entry) : -1;
      if (size < 0) {
        return invalid_input("{}: zip member '{}' has no size; refusing the wheel", what, name);
      }
      LS_TRY_ASSIGN(metadata, read_whole(zip, name, size, k_max_dist_info_file, what));
      metadata_name = name;
    }
  }
  if (dist_infos.size() != 1 || !metadata) {
    return invalid_input(
        "{}: expected exactly one .dist-info directory with a METADATA file; not a valid wheel", what);
  }
  return std::pair{std::move(metadata_name), std::move(*metadata)};
}

Result<CoreMetadata> read_wheel_metadata(const fs::path& whl, std::string_view what_view) {
  const std::string what(what_view);
  LS_TRY_ASSIGN(auto metadata, read_wheel_metadata_text(whl, what));
  return parse_core_metadata(metadata.second, what + ": " + metadata.first);
}

} // namespace lockstep
