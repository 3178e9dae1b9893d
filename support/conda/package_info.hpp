#pragma once
// What a conda package holds, and its info/ files parsed as hostile input (CEP 34;
// ../shared/reference/conda.md §6.3, §7.1): index.json, paths.json (paths_version 1), link.json and,
// for packages older than paths.json, the legacy info/files, info/has_prefix and info/no_link.
// read_package() (package.hpp) calls read_info_files() once the archive's members are gathered;
// the entry-point grammar is public for tests and tools.
#include "support/base/result.hpp"
#include "support/conda/repodata.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::conda {

/// How a path is materialised (paths.json `path_type`).
enum class PathType : std::uint8_t { hardlink, softlink, directory };

/// How the prefix placeholder is replaced (paths.json `file_mode`).
enum class FileMode : std::uint8_t { text, binary };

/// "hardlink", "softlink", "directory": the paths.json spelling.
std::string_view path_type_name(PathType type);
/// "text", "binary".
std::string_view file_mode_name(FileMode mode);

/// One entry of info/paths.json (paths_version 1).
struct PathsEntry {
  std::string path; ///< prefix-relative, '/'-separated, checked clean
  PathType type = PathType::hardlink;
  FileMode file_mode = FileMode::text;
  std::string prefix_placeholder; ///< "" when the file holds no placeholder
  bool no_link = false;
  std::string sha256;                ///< lowercase hex of the packaged file; "" when not given
  std::optional<std::uint64_t> size; ///< size_in_bytes of the packaged file, when given
};

/// The fields of info/index.json lockstep uses.
struct IndexJson {
  std::string name;
  std::string version;
  std::string build;
  std::uint64_t build_number = 0;
  std::vector<std::string> depends;
  std::vector<std::string> constrains;
  std::vector<std::string> track_features; ///< split at spaces and commas
  NoArch noarch = NoArch::none;
  std::string subdir;
  std::string arch;     ///< "" when absent or null
  std::string platform; ///< "" when absent or null
  std::string license;
  std::string license_family;
  std::uint64_t timestamp_ms = 0;
  std::string python_site_packages_path; ///< only on python packages (CEP 17)
};

/// One `cmd = module:func` of link.json's noarch.entry_points, validated: `command` is a plain
/// file name (no '/', '\\', control characters, leading '.'), module and function are dotted
/// Python identifiers that are not keywords.
struct EntryPoint {
  std::string command;
  std::string module;
  std::string function;
};

/// info/link.json (package_metadata_version 1).
struct LinkJson {
  NoArch noarch = NoArch::none;
  std::vector<EntryPoint> entry_points;
};

/// The kind of a payload member.
enum class EntryKind : std::uint8_t { file, symlink, directory };

/// One member of the archive outside info/, as the archive has it.
struct PayloadEntry {
  std::string path; ///< normalised ("lib/libz.so.1"), never empty
  EntryKind kind = EntryKind::file;
  std::uint32_t mode = 0; ///< permission bits, at most 0755
  std::int64_t mtime = 0; ///< the member's mtime (seconds)
  std::string data;       ///< a file's bytes
  std::string target;     ///< a symlink's target, verbatim (relative, checked to stay inside)
};

/// Where the package's path list came from.
enum class PathsSource : std::uint8_t {
  paths_json, ///< info/paths.json
  legacy,     ///< info/files, info/has_prefix, info/no_link
};

/// Bounds on one package. The defaults take the largest conda-forge packages (CUDA libraries,
/// PyTorch: a few GiB unpacked, tens of thousands of files) with room to spare.
struct PackageLimits {
  std::uint64_t max_total_bytes = 32ULL << 30; ///< bytes of all files unpacked, info/ included
  std::size_t max_entries = 1'000'000;         ///< members of the archive's tars together
  std::size_t max_path = 4095;                 ///< bytes of a path or a symlink target
  int max_json_depth = 16;                     ///< nesting in index.json, paths.json, link.json
  std::uint64_t max_info_file = 256ULL << 20;  ///< bytes of one info/ file that is parsed
};

/// Whether `path` is a clean prefix-relative path: not empty, no leading '/', no empty, '.' or '..'
/// component, no backslash or control character, valid UTF-8, at most `max_path` bytes.
bool is_clean_relative_path(std::string_view path, std::size_t max_path);

/// The placeholder of legacy has_prefix lines that name only a path (conda's PREFIX_PLACEHOLDER).
inline constexpr std::string_view k_legacy_placeholder = "/opt/anaconda1anaconda2anaconda3";

/// What info/ says of a package.
struct InfoFiles {
  IndexJson index;
  PathsSource paths_source = PathsSource::paths_json;
  std::vector<PathsEntry> paths; ///< in paths.json's order
  std::optional<LinkJson> link;  ///< when info/link.json is present
};

/// Parses `info` (the files under info/, by name without the "info/" prefix); the legacy path list
/// reads `payload` (sorted by path) for types and hashes. `what` names the package in errors;
/// every refusal is invalid_input.
Result<InfoFiles> read_info_files(const std::map<std::string, std::string, std::less<>>& info,
                                  const std::vector<PayloadEntry>& payload, const std::string& what,
                                  const PackageLimits& limits);

/// Parses one `cmd = module:func` entry point (link.json noarch.entry_points), validated as
/// EntryPoint says; identifiers are ASCII. `what` names the package in errors.
Result<EntryPoint> parse_entry_point(std::string_view text, std::string_view what);

} // namespace lockstep::conda
