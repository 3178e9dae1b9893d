#pragma once
// Reading a Debian binary package (.deb) as hostile input: the ar container and the tars inside it.
//
// A .deb is an ar archive: "debian-binary" ("2.0\n"), then "control.tar[.gz|.xz|.zst]", then
// "data.tar[.gz|.xz|.bz2|.lzma|.zst]" (deb(5)); members whose names start with '_' may sit between
// them and are ignored. libarchive reads the ar container and the inner tars (no temporary files,
// no external decompressors); every name, size, owner and type is checked and bounded.
// Callers hold a C.UTF-8 LC_CTYPE around the reads (Utf8Locale) so that names pass through
// unchanged; read_deb_files() does so itself.
#include "support/base/result.hpp"
#include "support/system/fs.hpp"

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct archive; // libarchive

namespace lockstep {

/// The compressors dpkg allows for control.tar ("" is none).
inline constexpr std::array<std::string_view, 4> k_control_suffixes = {"", ".gz", ".xz", ".zst"};
/// The compressors dpkg allows for data.tar ("" is none).
inline constexpr std::array<std::string_view, 6> k_data_suffixes = {"",     ".gz",  ".xz",
                                                                    ".zst", ".bz2", ".lzma"};
/// At most this many entries in one data.tar.
inline constexpr std::size_t k_deb_max_data_members = 4U << 20;
/// At most this many bytes of regular files in one package's data.tar.
inline constexpr std::uint64_t k_deb_max_data_total = 256ULL << 30;

namespace detail {
/// Frees a libarchive reader.
struct ArchiveReadFree {
  void operator()(struct archive* a) const;
};
} // namespace detail

/// One member of a .deb's inner tar (control.tar or data.tar), checked.
struct DebMember {
  enum class Type { file, dir, symlink, hardlink };
  std::string name; ///< normalised ("usr/bin/x"); "" for the root "./"
  Type type = Type::file;
  std::uint32_t mode = 0; ///< permission bits (07777)
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::int64_t mtime = 0;
  std::int64_t size = 0;   ///< regular files only
  std::string link_target; ///< symlink: verbatim; hard link: normalised member name
};

/// A tar inside the ar archive, read through the ar member's data (no temporary file).
class InnerTar {
public:
  /// Reads ar member `member` (the current one of `outer`) as a tar compressed with `suffix`
  /// (".gz", ".xz", ".zst", ".bz2", ".lzma" or "" for none); any other compression is refused.
  /// `where` names the package in every error. More than `max_members` members is invalid_input.
  static Result<std::unique_ptr<InnerTar>> open(struct archive* outer, const std::string& member,
                                                std::string_view suffix, std::string where,
                                                std::size_t max_members);
  ~InnerTar();
  InnerTar(const InnerTar&) = delete;
  InnerTar& operator=(const InnerTar&) = delete;

  /// The next member, checked; nullopt at the end. A hostile name, owner, size or type (device
  /// nodes, FIFOs), or one member too many, is an invalid_input error; SIGINT/SIGTERM ends it.
  Result<std::optional<DebMember>> next();
  /// "WHERE: MEMBER: 'NAME' has WHY" as an invalid_input error.
  [[nodiscard]] Error error_at(const std::string& name, const std::string& why) const;
  /// Reads the current member's data; 0 at its end.
  Result<std::size_t> read(void* data, std::size_t size);
  /// Reads exactly `size` bytes of the current member into a string (size already bounded).
  Result<std::string> read_all(std::int64_t size);

private:
  InnerTar(struct archive* outer, std::string where);
  static ssize_t read_callback(struct archive* a, void* client, const void** buffer);
  [[nodiscard]] Error failure(const std::string& doing) const;

  std::unique_ptr<struct archive, detail::ArchiveReadFree> m_archive;
  struct archive* m_outer;
  std::string m_where;
  std::string m_member;
  std::vector<char> m_buf;
  std::string m_outer_error;
  std::string m_last;
  int m_filter = 0; // ARCHIVE_FILTER_NONE
  bool m_filter_checked = false;
  std::size_t m_max_members = 0;
  std::size_t m_count = 0;
};

/// The ar archive of a .deb, read member by member in deb(5)'s strict order.
class DebArchive {
public:
  /// Opens `deb` (a regular file); `what` names it in every error.
  static Result<DebArchive> open(const std::filesystem::path& deb, std::string_view what);

  /// The libarchive reader, positioned at the current member (for InnerTar::open).
  [[nodiscard]] struct archive* get() const { return m_archive.get(); }
  /// Reads "debian-binary": format 2.x.
  Result<void> read_debian_binary();
  /// Moves to the next required member, "<stem><suffix>" with a suffix from `suffixes`, skipping
  /// members named "_*" (reserved for additions older readers ignore); returns the suffix.
  Result<std::string> expect(std::string_view stem, std::span<const std::string_view> suffixes);
  /// The current member's name (as expect() found it).
  [[nodiscard]] const std::string& member() const { return m_member; }

private:
  DebArchive(struct archive* a, std::string what);
  Result<std::optional<std::string>> next_name();

  std::unique_ptr<struct archive, detail::ArchiveReadFree> m_archive;
  UniqueFd m_fd;
  std::string m_what;
  std::string m_member;
  std::int64_t m_size = 0;
  std::size_t m_count = 0;
};

/// Reads `ar` (just opened) up to its data.tar: debian-binary checked, control.tar skipped.
/// `what` names the package in errors.
Result<std::unique_ptr<InnerTar>> open_deb_data(DebArchive& ar, std::string_view what);

/// The regular files of `deb`'s data.tar whose normalised member names ("usr/lib/...") `wanted`
/// accepts, with their contents (each at most `max_each` bytes, else invalid_input naming the
/// member), in archive order. Hard links, symlinks and directories are not returned; a wanted name
/// listed twice is refused. A malformed package is invalid_input naming `what`.
Result<std::vector<std::pair<std::string, std::string>>>
read_deb_files(const std::filesystem::path& deb, const std::function<bool(std::string_view)>& wanted,
               std::uint64_t max_each, std::string_view what);

} // namespace lockstep
