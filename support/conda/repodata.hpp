#pragma once
// A conda channel's index of one subdir, `repodata.json` (CEP 36; facts in docs/conda.md,
// "Channels"): every package record, read from hostile bytes with bounded work. The reader is a SAX
// pass (rapidjson's, measured 4x nlohmann's on a 35 MB index) that decodes strings in place and keeps
// views of only the fields lockstep solves, locks and installs with; a record that breaks the format
// is left out and counted, as conda leaves it out, and the index as a whole fails only when its shape
// is wrong or a limit is hit.
#include "support/base/result.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::conda {

/// How a package is installed across platforms (`noarch` of the record, CEP 34).
enum class NoArch : std::uint8_t {
  none,    ///< a platform package
  generic, ///< files linked verbatim (`"generic"`, or legacy `true`)
  python,  ///< site-packages and python-scripts relocated at install
};

/// "python", "generic", or "" for NoArch::none: how records, conda-meta and the lock spell it.
std::string_view noarch_name(NoArch n);
/// The NoArch `name` spells (noarch_name's inverse, "" being none); nullopt for another word.
std::optional<NoArch> noarch_from_name(std::string_view name);

/// One package record of the index, as the index has it (after the channel's repodata patches).
/// The text fields are views into the decoded document that RepoData::text keeps (or, for a record
/// built by hand, into strings its builder keeps): a Record is valid while that text lives, and code
/// that keeps a record past its index copies what it needs into strings.
struct Record {
  std::string_view filename; ///< "numpy-1.26.4-py311h64a7726_0.conda"; the stem is name-version-build
  std::string_view name;
  std::string_view version; ///< as written; conda::Version parses it
  std::string_view build;
  std::uint64_t build_number = 0;
  std::vector<std::string_view> depends;    ///< MatchSpecs in the space form ("python >=3.11,<3.12.0a0")
  std::vector<std::string_view> constrains; ///< applied only when the named package is present
  std::vector<std::string_view> track_features;
  NoArch noarch = NoArch::none;
  std::string_view subdir;        ///< the record's own, else the index's (`info.subdir`)
  std::uint64_t timestamp_ms = 0; ///< build time in ms (values in seconds are scaled); 0 when absent
  std::string_view md5;           ///< of the archive, lowercase hex; may be empty
  std::string_view sha256;        ///< of the archive, lowercase hex; may be empty
  std::uint64_t size = 0;         ///< of the archive
  std::string_view license;
  std::string_view python_site_packages_path; ///< only on python records (CEP 17)
  std::string_view legacy_bz2_md5; ///< the .tar.bz2 twin of a .conda record, when the index has both
  std::uint64_t legacy_bz2_size = 0;
  [[nodiscard]] bool is_conda_format() const { return filename.ends_with(".conda"); }
};

/// One subdir's index.
struct RepoData {
  std::string subdir;   ///< `info.subdir` ("" when the index doesn't say)
  std::string base_url; ///< `info.base_url` (CEP 15), "" when files sit beside repodata.json
  /// Every record, `.conda` preferred over a `.tar.bz2` of the same stem (whose md5 and size become
  /// legacy_bz2_*): the .conda records in the index's order, then the other .tar.bz2 ones.
  std::vector<Record> records;
  std::vector<std::string> removed; ///< filenames the channel withdrew
  std::size_t skipped = 0;          ///< records left out as malformed
  std::string first_skipped;        ///< the first of them and why, for a warning
  /// The document, decoded in place (JSON escapes resolved, hashes lowercased): what the records'
  /// fields view. Shared, so that records can outlive a moved or destroyed RepoData with it.
  std::shared_ptr<const std::string> text;
};

/// Bounds on reading one index; the defaults take conda-forge's largest subdirs with room to spare.
struct RepoDataLimits {
  /// conda-forge's largest subdirs held about 300,000 records in 2026; a mirror beyond this sets
  /// LOCKSTEP_CONDA_MAX_RECORDS.
  std::size_t max_records = 500'000;
  std::size_t max_depth = 32;       ///< nesting of arrays and objects
  std::size_t max_string = 1 << 20; ///< one string, bytes
  std::size_t max_list = 10'000;    ///< entries of one depends/constrains list
};

/// Reads `json` (the bytes of a repodata.json; moved in, it is decoded in place and kept as
/// RepoData::text: records are views into it, with no string of their own). `origin` names it in
/// errors ("https://.../linux-64/repodata.json"). ExitCode::invalid_input when it is not JSON (a NUL
/// byte ends the document), not shaped like an index, declares a repodata_version above 2, or
/// passes a limit.
Result<RepoData> parse_repodata(std::string json, std::string_view origin, const RepoDataLimits& limits = {});

/// name, version and build of an artifact filename ("numpy-1.26.4-py311h_0.conda": the stem split
/// at its last two '-'); nullopt when it is not `<stem>.conda` or `<stem>.tar.bz2` with three parts.
struct ArtifactName {
  std::string_view name;
  std::string_view version;
  std::string_view build;
};
std::optional<ArtifactName> split_artifact_filename(std::string_view filename);

} // namespace lockstep::conda
