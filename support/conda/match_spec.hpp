#pragma once
// conda MatchSpecs (CEP 29; docs: ../shared/reference/conda.md §4): "conda-forge/linux-64::numpy
// >=1.26,<2 py312*[md5=...]" parsed (the '='/space rules of §4.2 included), matched against a
// record's fields and printed in conda's canonical form (§4.3) for the lock. Errors carry the byte
// offset of the problem so that a spec loader can print a caret under it (render_caret).
#include "support/conda/parse_error.hpp"
#include "support/conda/string_match.hpp"
#include "support/conda/version.hpp"
#include "support/conda/version_spec.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::conda {

/// Whether `subdir` is one of conda's known platform subdirs or "noarch" (conda.md §1.1).
bool is_known_subdir(std::string_view subdir);

/// A channel as MatchSpecs compare it: without a trailing '/' or trailing known subdir, and with the
/// default channel alias (https://conda.anaconda.org/) or repo.anaconda.com's host taken off:
/// "https://conda.anaconda.org/conda-forge/linux-64/" -> "conda-forge",
/// "https://repo.anaconda.com/pkgs/main" -> "pkgs/main"; any other URL stays a URL.
std::string canonical_channel(std::string_view channel);

/// The fields of a package record (repodata, conda-meta) a MatchSpec looks at. Views: the caller
/// keeps the record alive while matching.
struct RecordFields {
  std::string_view name;
  const Version* version = nullptr; ///< nullptr: unknown, and a spec with a version never matches
  std::string_view build;
  std::uint64_t build_number = 0;
  std::string_view channel; ///< a channel name or URL (canonical_channel is applied)
  std::string_view subdir;
  std::string_view md5;
  std::string_view sha256;
  std::string_view fn;
  std::string_view url;
  std::string_view license;
  std::string_view license_family;
  std::string_view track_features; ///< names separated by spaces or commas
  std::string_view features;       ///< names separated by spaces or commas
};

/// A `build_number` constraint: "3", "*", ">=3" (==, =, !=, <, <=, >, >= over integers), "^1.$".
class BuildNumberSpec {
public:
  /// Parses `text`; errors carry the offset in `text`.
  static ParseResult<BuildNumberSpec> parse(std::string_view text);
  [[nodiscard]] bool matches(std::uint64_t build_number) const;
  /// "3", ">=3", "*" or the regular expression as written.
  [[nodiscard]] std::string str() const;

private:
  VersionOp m_op = VersionOp::any; // any, equal, not_equal, less..., or pattern
  std::uint64_t m_value = 0;
  StringMatcher m_pattern;
};

/// A parsed MatchSpec: what a record must be to match. Fields not given match anything.
class MatchSpec {
public:
  /// The longest spec text accepted, in bytes.
  static constexpr std::size_t k_max_length = 4096;

  /// Parses `text`: `[channel[/subdir]::]name[ version[ build]][[key=value,...]]`, a '#' comment
  /// dropped; also a package URL ending in .conda or .tar.bz2, and the legacy "feature@". Strict mode
  /// for what people write, lenient for repodata's `depends` (see SpecMode). Errors carry the offset
  /// in `text` of the offending byte.
  static ParseResult<MatchSpec> parse(std::string_view text, SpecMode mode = SpecMode::strict);

  /// Whether `record` satisfies every field of the spec. Names compare case-insensitively, builds
  /// case-sensitively (as conda does), md5 and sha256 in either case.
  [[nodiscard]] bool matches(const RecordFields& record) const;

  /// conda's canonical form (conda.md §4.3): "conda-forge/linux-64::numpy==1.26.4=py312h_0",
  /// "numpy=1.26", "numpy[version='>=1.26,<2',build=py312*]". It parses back to an equal spec.
  [[nodiscard]] std::string str() const;

  /// The name matcher ("*" when any name matches); lowered.
  [[nodiscard]] const StringMatcher& name() const { return m_name; }
  /// The channel matcher over canonical channels, when one is given (and not "*").
  [[nodiscard]] const std::optional<StringMatcher>& channel() const { return m_channel; }
  [[nodiscard]] const std::optional<std::string>& subdir() const { return m_subdir; }
  [[nodiscard]] const std::optional<VersionSpec>& version() const { return m_version; }
  [[nodiscard]] const std::optional<StringMatcher>& build() const { return m_build; }
  [[nodiscard]] const std::optional<BuildNumberSpec>& build_number() const { return m_build_number; }
  [[nodiscard]] const std::optional<std::string>& md5() const { return m_md5; }
  [[nodiscard]] const std::optional<std::string>& sha256() const { return m_sha256; }
  [[nodiscard]] const std::optional<std::string>& fn() const { return m_fn; }
  [[nodiscard]] const std::optional<std::string>& url() const { return m_url; }
  [[nodiscard]] const std::optional<StringMatcher>& license() const { return m_license; }
  [[nodiscard]] const std::optional<StringMatcher>& license_family() const { return m_license_family; }
  /// The track_features / features a record must have, sorted, when given.
  [[nodiscard]] const std::optional<std::vector<std::string>>& track_features() const {
    return m_track_features;
  }
  [[nodiscard]] const std::optional<std::vector<std::string>>& features() const { return m_features; }

  friend bool operator==(const MatchSpec& a, const MatchSpec& b) { return a.str() == b.str(); }

private:
  friend class MatchSpecParser;

  StringMatcher m_name;
  std::optional<StringMatcher> m_channel;
  std::optional<std::string> m_subdir;
  std::optional<VersionSpec> m_version;
  std::optional<StringMatcher> m_build;
  std::optional<BuildNumberSpec> m_build_number;
  std::optional<std::string> m_md5;
  std::optional<std::string> m_sha256;
  std::optional<std::string> m_fn;
  std::optional<std::string> m_url;
  std::optional<StringMatcher> m_license;
  std::optional<StringMatcher> m_license_family;
  std::optional<std::vector<std::string>> m_track_features;
  std::optional<std::vector<std::string>> m_features;
};

} // namespace lockstep::conda
