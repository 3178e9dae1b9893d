#pragma once
// Reading a conda package archive as hostile input (CEP 34/35; facts in
// ../shared/reference/conda.md §6): `.conda` (a ZIP of STORED members: metadata.json,
// pkg-<stem>.tar.zst, info-<stem>.tar.zst) and `.tar.bz2`, into the parsed info/ files
// (index.json, paths.json, link.json) and the payload (every member outside info/, with its bytes).
//
// The ZIP container of a `.conda` is read by a small central-directory reader of our own, not by
// libarchive: libarchive does not say how a zip member is compressed (CEP 35 requires STORED, and
// a deflated member must be refused, not inflated), and with our reader each tar.zst member stays a
// slice of the input (no copy) that libarchive then reads from memory. Zip64 records are read.
//
// Everything about the archive is checked before a byte of it is used, and each refusal is an
// ExitCode::invalid_input error naming the package and the member: absolute names, '..', names
// that are not UTF-8 or too long, device nodes, FIFOs and sockets, tar hard links, a path twice,
// more entries or bytes than PackageLimits allow, JSON nested too deep, a paths.json entry that
// is not in the payload (or is of another type there), lies outside the prefix, or names info/ or
// conda-meta/, a payload file whose sha256 or size disagrees with paths.json, a symlink whose
// target leaves the prefix (followed through the package's other symlinks), and a member under a
// symlink or a file. A directory repeated is accepted (cph writes some twice). Setuid, setgid and
// sticky bits are dropped, and group/other write bits cleared (conda extracts under umask 022).
// Payload members paths.json does not list stay in `payload` but are not installed (as conda).
//
// Without info/paths.json the legacy files are read (conda's fallback): info/files (one path a
// line), info/has_prefix (`PATH` = text mode with the placeholder /opt/anaconda1anaconda2anaconda3,
// or `PLACEHOLDER MODE PATH`, each field optionally quoted) and info/no_link; the path type comes
// from the payload and the sha256 and size are computed from it.
//
// The whole package is held in memory (bounded by PackageLimits::max_total_bytes).
#include "support/base/result.hpp"
#include "support/conda/package_info.hpp"
#include "support/conda/repodata.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::conda {

/// The two archive formats.
enum class PackageFormat : std::uint8_t {
  conda,   ///< `.conda`, format version 2
  tar_bz2, ///< `.tar.bz2`, format version 1
};

/// A package read and checked.
struct Package {
  std::string stem; ///< name-version-build, from the file name
  PackageFormat format = PackageFormat::conda;
  IndexJson index;
  PathsSource paths_source = PathsSource::paths_json;
  std::vector<PathsEntry> paths;     ///< in paths.json's order
  std::optional<LinkJson> link;      ///< when info/link.json is present
  std::vector<PayloadEntry> payload; ///< sorted by path (bytewise)
  std::int64_t info_mtime = 0;       ///< mtime of info/index.json in the archive

  /// The payload entry at `path`, or nullptr.
  [[nodiscard]] const PayloadEntry* find(std::string_view path) const;
};

/// The format an artifact file name announces, or nullopt when it is neither `.conda` nor
/// `.tar.bz2`.
std::optional<PackageFormat> package_format_of(std::string_view filename);

/// Reads the package whose archive bytes are `bytes`; `filename` ("numpy-1.26.4-py311h_0.conda")
/// gives the format and the stem, which must agree with index.json's name, version and build.
/// Every refusal (see the file comment) is ExitCode::invalid_input naming `filename`.
Result<Package> read_package(std::string_view bytes, std::string_view filename,
                             const PackageLimits& limits = {});

/// read_package() of the file at `path`; `filename` defaults to the path's file name.
Result<Package> read_package_file(const std::filesystem::path& path, std::string_view filename = {},
                                  const PackageLimits& limits = {});

/// Checks an archive's bytes against what the lock says of them: ExitCode::invalid_input naming
/// `what` when the size differs from `size` or the sha256 from `sha256` (lowercase hex), saying
/// both values.
Result<void> verify_archive(std::string_view bytes, std::string_view sha256, std::uint64_t size,
                            std::string_view what);

/// Whether `target`, the target of a symlink at `link_path` (both prefix-relative), resolves inside
/// the prefix when every symlink of `symlinks` (path -> target, prefix-relative) is followed, as the
/// kernel would (at most 40 links). Absolute targets never do. Used for one package and again for
/// the merged prefix.
bool symlink_stays_inside(std::string_view link_path, std::string_view target,
                          const std::map<std::string, std::string, std::less<>>& symlinks);

} // namespace lockstep::conda
