#pragma once
// The package index a conda solve reads (docs: ../shared/reference/conda.md §1.4, §5.3): the records of
// several channels in priority order, each channel contributing its target subdir and noarch at the
// same priority, grouped by package name with parsed versions, plus the virtual packages that
// describe the target machine (`__glibc 2.36`, `__cuda 12.4`) as single-record packages. Versions
// are parsed on all cores; the grouping is deterministic whatever the thread count.
#include "support/base/result.hpp"
#include "support/conda/repodata.hpp"
#include "support/conda/version.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lockstep::conda {

/// One channel's repodata: the target subdir's and noarch's (any number of subdirs, all at the
/// channel's priority).
struct ChannelRepoData {
  /// The channel as MatchSpecs name it: "conda-forge" or a URL (canonical_channel is applied).
  std::string channel;
  std::vector<RepoData> subdirs;
};

/// A virtual package of the target (CEP 30): a record with no files that the solver treats as
/// installed ("__glibc 2.36", "__archspec 1 x86_64_v3", "__unix": build "0" when not given).
struct VirtualPackage {
  std::string name;
  std::string version;
  std::string build;

  /// Parses "NAME [VERSION [BUILD]]" (version "0" and build "0" when left out). The name must start
  /// with "__"; the version must parse as a conda version.
  static Result<VirtualPackage> parse(std::string_view text);
  /// "__glibc 2.36 0".
  [[nodiscard]] std::string str() const;
};

/// One record of the index with its parsed version.
struct IndexRecord {
  const Record* record = nullptr;
  Version version;
  /// The channel's rank, 0 the highest priority; k_virtual for a virtual package.
  std::uint32_t channel = 0;
  static constexpr std::uint32_t k_virtual = 0xffffffff;
  [[nodiscard]] bool is_virtual() const { return channel == k_virtual; }
};

/// Every record of one package name, in the index's order (channel, subdir, repodata order).
struct IndexPackage {
  std::string name;
  std::vector<IndexRecord> records;
};

/// Counts for logs and benchmarks.
struct IndexStats {
  std::size_t records = 0;       ///< records in the index (virtual packages included)
  std::size_t unparseable = 0;   ///< records left out because their version doesn't parse
  std::string first_unparseable; ///< "channel: FILENAME: why", for a warning
};

/// The records of a solve, grouped by name. Move-only: records point into the repodata it owns.
class PackageIndex {
public:
  /// Takes `channels` (first = highest priority) and the target's virtual packages. A channel
  /// record whose name is a given virtual package's is left out (the target, not a channel, says
  /// what the machine has). Records whose version doesn't parse are left out and counted. Errors:
  /// two virtual packages of one name.
  static Result<PackageIndex> build(std::vector<ChannelRepoData> channels,
                                    const std::vector<VirtualPackage>& virtual_packages = {});

  PackageIndex(const PackageIndex&) = delete;
  PackageIndex& operator=(const PackageIndex&) = delete;
  PackageIndex(PackageIndex&&) noexcept = default;
  PackageIndex& operator=(PackageIndex&&) noexcept = default;
  ~PackageIndex() = default;

  /// The channels by rank, canonical ("conda-forge", "pkgs/main", or a URL).
  [[nodiscard]] const std::vector<std::string>& channels() const { return m_channel_names; }
  /// Every package, sorted by name.
  [[nodiscard]] const std::vector<IndexPackage>& packages() const { return m_packages; }
  /// The package `name` (lowercase), or nullptr when no channel has it.
  [[nodiscard]] const IndexPackage* find(std::string_view name) const;
  [[nodiscard]] const IndexStats& stats() const { return m_stats; }

private:
  PackageIndex() = default;

  std::vector<ChannelRepoData> m_channels;
  std::vector<std::string> m_channel_names;
  std::vector<std::string> m_virtual_text; // what m_virtual_records view
  std::vector<Record> m_virtual_records;
  std::vector<IndexPackage> m_packages;
  std::unordered_map<std::string_view, std::size_t> m_by_name; // views of m_packages[i].name
  IndexStats m_stats;
};

} // namespace lockstep::conda
