#pragma once
// Python wheels as data (the "Binary distribution format" and "Platform compatibility tags" pages
// of the Python packaging specifications; PEP 427, 425, 600): file names and their tags, the tags a
// CPython on glibc Linux supports in priority order, and the small text files inside a wheel:
// METADATA (core metadata), WHEEL, entry_points.txt and RECORD. Installing a wheel is
// builder/image/wheel_install.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/python/pep440.hpp"
#include "support/python/pep508.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep {

/// One compatibility tag: python-abi-platform ("cp311-cp311-manylinux_2_17_x86_64").
struct WheelTag {
  std::string python;
  std::string abi;
  std::string platform;

  [[nodiscard]] std::string str() const { return python + "-" + abi + "-" + platform; }
  friend bool operator==(const WheelTag&, const WheelTag&) = default;
  friend auto operator<=>(const WheelTag&, const WheelTag&) = default;
};

/// A parsed wheel file name: `{dist}-{version}(-{build})?-{python}-{abi}-{platform}.whl`.
struct WheelName {
  std::string filename;
  std::string distribution; ///< as in the file name ("typing_extensions")
  std::string project;      ///< normalised (normalize_project_name)
  std::string version_text; ///< as in the file name
  PyVersion version;
  std::optional<std::uint64_t> build_number; ///< the build tag's leading digits
  std::string build_tag;                     ///< the whole build tag ("1", "2abc"); empty if none
  /// Every tag of the compressed tag sets ("py2.py3-none-any" -> py2-none-any, py3-none-any), in
  /// file-name order.
  std::vector<WheelTag> tags;

  /// Parses a file name (not a path). Errors are invalid_input naming it and the part at fault.
  static Result<WheelName> parse(std::string_view filename);
};

/// The tags a CPython `python` ("3.11") on glibc `glibc` ("2.36") Linux for `machine` ("x86_64",
/// "aarch64", ...) installs, best first, exactly as packaging.tags.sys_tags() lists them there:
/// cp311-cp311-{platforms}, cp311-abi3-*, cp311-none-*, cp310..cp32-abi3-*, py311/py3/py310..py30
/// -none-{platforms}, cp311-none-any, py311/py3/py310..py30-none-any; the platforms are
/// manylinux_2_{glibc minor}..manylinux_2_17 (..2_5 on x86_64 and i686) with the legacy aliases
/// manylinux2014/2010/1 after 2_17/2_12/2_5, then linux_{machine}.
Result<std::vector<WheelTag>> supported_tags(std::string_view python, std::string_view glibc,
                                             std::string_view machine);

/// The position in `supported` of the best tag of `wheel` (lower is better), or nullopt when the
/// wheel does not install there.
std::optional<std::size_t> best_tag_rank(const WheelName& wheel, const std::vector<WheelTag>& supported);

/// "Name: value" headers of an email-style file (METADATA, WHEEL), up to the first blank line;
/// continuation lines (starting with a space or tab) are joined with '\n'. Names keep their case.
Result<std::vector<std::pair<std::string, std::string>>> parse_email_headers(std::string_view text,
                                                                             std::string_view what);

/// What lockstep reads from a wheel's METADATA (core metadata 1.0 to 2.x).
struct CoreMetadata {
  std::string metadata_version;
  std::string name;
  std::string project; ///< normalised
  PyVersion version;
  std::vector<Requirement> requires_dist;
  std::optional<SpecifierSet> requires_python;
  std::vector<std::string> provides_extra; ///< normalised
};

/// Parses METADATA (at most 16 MiB). Missing Name or Version, an invalid version, requirement or
/// Requires-Python is invalid_input naming `what`.
Result<CoreMetadata> parse_core_metadata(std::string_view text, std::string_view what);

/// The license a METADATA declares, as an SPDX expression: License-Expression (core metadata 2.4,
/// PEP 639) normalised; else a `License:` that names a license (an SPDX identifier or a common
/// spelling such as "MIT License", not a license's text); else the one "License ::" trove
/// classifier when there is exactly one. "" when none of these says (a malformed METADATA too).
std::string metadata_license(std::string_view metadata);

/// A wheel's WHEEL file.
struct WheelInfo {
  int version_major = 1;
  int version_minor = 0;
  bool root_is_purelib = false;
  std::vector<std::string> tags; ///< the `Tag:` lines
  std::string generator;
  std::string build;
};

/// Parses WHEEL. A missing or malformed Wheel-Version, or a major version other than 1, is
/// invalid_input (the spec: a newer major version must not be installed). A newer minor version
/// is accepted; the caller should warn.
Result<WheelInfo> parse_wheel_info(std::string_view text, std::string_view what);

/// One entry point: `name = module:attr [extras]` in a [group].
struct EntryPoint {
  std::string group; ///< "console_scripts"
  std::string name;  ///< "pip"
  std::string module;
  std::string attr; ///< "main" or "Cli.run"; empty when only a module is named
  std::vector<std::string> extras;
};

/// Parses entry_points.txt (INI style, as importlib.metadata reads it). A malformed line is
/// invalid_input naming `what` and the line.
Result<std::vector<EntryPoint>> parse_entry_points(std::string_view text, std::string_view what);

/// One RECORD row: path, hash, size.
struct RecordEntry {
  std::string path;
  std::optional<Digest> hash; ///< sha256; unset for RECORD itself (and signatures)
  std::optional<std::uint64_t> size;
  friend bool operator==(const RecordEntry&, const RecordEntry&) = default;
};

/// "sha256=<urlsafe base64 without padding>" for a sha256 digest.
std::string record_hash(const Digest& digest);
/// Parses "sha256=..." (the only algorithm lockstep accepts; weaker ones are refused, sha384 and
/// sha512 are not supported).
Result<Digest> parse_record_hash(std::string_view text);

/// Parses RECORD (CSV as Python's csv module writes it; quoted fields allowed). Rows must have
/// three fields; blank lines are skipped. Errors are invalid_input naming `what` and the row.
Result<std::vector<RecordEntry>> parse_record(std::string_view text, std::string_view what);
/// Writes RECORD rows as pip does: CSV with minimal quoting and "\r\n" line ends, in the given order.
std::string write_record(const std::vector<RecordEntry>& rows);

} // namespace lockstep
