#pragma once
// Reading a wheel (a zip) as an untrusted archive: one forward pass over its members with checked
// names and bounded sizes, and its core metadata. Used to lock wheels (PEP 658 fallback) and to
// install them (builder/image/wheel_install).
#include "support/base/result.hpp"
#include "support/python/wheel.hpp"
#include "support/system/fs.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

struct archive;
struct archive_entry;

namespace lockstep {

/// The most members a wheel may have, and the most bytes of one .dist-info text file
/// (METADATA, RECORD, WHEEL, entry_points.txt) lockstep reads.
constexpr std::size_t k_max_wheel_members = 500000;
constexpr std::size_t k_max_dist_info_file = 64U << 20;

/// One forward pass over a zip's members with libarchive's seekable zip reader (it reads the
/// central directory, so skipping a member's data costs a seek, not a decompression).
class ZipReader {
public:
  /// Opens `path` (a regular file); `what` names it in messages.
  static Result<ZipReader> open(const std::filesystem::path& path, const std::string& what);
  ~ZipReader();
  ZipReader(ZipReader&& o) noexcept;
  ZipReader& operator=(ZipReader&&) = delete;
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  /// The next member's header, or nullptr at the end (`previous` names the last one in messages).
  Result<struct archive_entry*> next(const std::string& previous);
  /// Reads up to `size` bytes of the current member; 0 at its end.
  Result<std::size_t> read(void* data, std::size_t size, const std::string& member);
  /// The archive's error while `doing`, as invalid input (or I/O).
  [[nodiscard]] Error failure(const std::string& doing) const;

private:
  ZipReader(struct archive* a, std::string what) : m_archive(a), m_what(std::move(what)) {}
  struct archive* m_archive = nullptr;
  UniqueFd m_fd;
  std::string m_what;
};

/// The member's name as stored (UTF-8 where the zip says so), or nullptr.
const char* raw_name(struct archive_entry* entry);

/// A member name checked to be a clean relative path; a trailing '/' (a directory) is removed.
Result<std::string> check_member_name(const char* raw, const std::string& what);

/// A pass that lists a wheel's members: each header with its checked name, at most
/// k_max_wheel_members of them, stopping when the user interrupts.
class MemberListing {
public:
  MemberListing(ZipReader& zip, const std::string& what) : m_zip(zip), m_what(what) {}

  /// One member: its header (nullptr at the end of the archive) and its checked name.
  struct Listed {
    struct archive_entry* entry = nullptr;
    std::string name;
  };

  /// The next member.
  Result<Listed> next();

private:
  ZipReader& m_zip;
  const std::string& m_what;
  std::string m_previous;
  std::size_t m_entries = 0;
};

/// Reads the whole current member `name` of `size` bytes (refused past `limit`), checking that it
/// is exactly as long as its header says.
Result<std::string> read_whole(ZipReader& zip, const std::string& name, std::int64_t size, std::size_t limit,
                               const std::string& what);

/// Reads at most `limit` bytes of the current member (fewer at its end).
Result<std::string> read_up_to(ZipReader& zip, const std::string& member, std::size_t limit);

/// The member name and text of the wheel `whl`'s single .dist-info/METADATA (at most 16 MiB);
/// member names are checked as installing checks them.
Result<std::pair<std::string, std::string>> read_wheel_metadata_text(const std::filesystem::path& whl,
                                                                     std::string_view what);

/// The core metadata of the wheel `whl` (its single .dist-info/METADATA), for locking when the index
/// does not serve it separately (PEP 658). Member names are checked as installing checks them.
Result<CoreMetadata> read_wheel_metadata(const std::filesystem::path& whl, std::string_view what);

} // namespace lockstep
