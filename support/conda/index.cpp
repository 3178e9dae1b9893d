// The package index of a conda solve (see index.hpp).
#include "support/conda/index.hpp"

#include "support/base/parallel.hpp"
#include "support/conda/match_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <thread>

namespace lockstep::conda {

namespace {

// Records parsed per task: big enough that handing out work costs nothing, small enough that
// two to sixteen cores share a 50,000-record index evenly.
constexpr std::size_t k_chunk = 2048;

// What an error calls the origin of a virtual package.
const std::string k_virtual_channel = "virtual";

// A record to index: where it comes from and the slot its package keeps for it.
struct Place {
  const Record* record = nullptr;
  std::uint32_t channel = 0;
  std::uint32_t package = 0;
  std::uint32_t slot = 0;
};

// Parses every version straight into its slot, on all cores (each slot is written by one task);
// a version that doesn't parse leaves its slot without a record and its error in `errors`.
void parse_versions(const std::vector<Place>& places, std::vector<IndexPackage>& packages,
                    std::vector<std::string>& errors) {
  const std::size_t chunks = (places.size() + k_chunk - 1) / k_chunk;
  const std::size_t threads = std::max(1U, std::thread::hardware_concurrency());
  for_each_index(chunks, threads, [&](std::size_t c) {
    const std::size_t end = std::min(places.size(), (c + 1) * k_chunk);
    for (std::size_t i = c * k_chunk; i < end; ++i) {
      const Place& at = places[i];
      ParseResult<Version> v = Version::parse(at.record->version);
      if (v) {
        packages[at.package].records[at.slot] = IndexRecord{at.record, std::move(v).value(), at.channel};
      } else {
        errors[i] = v.error().message;
      }
    }
  });
}

} // namespace

Result<VirtualPackage> VirtualPackage::parse(std::string_view text) {
  std::vector<std::string_view> parts;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t start = text.find_first_not_of(" \t", i);
    if (start == std::string_view::npos) {
      break;
    }
    const std::size_t end = std::min(text.find_first_of(" \t", start), text.size());
    parts.push_back(text.substr(start, end - start));
    i = end;
  }
  if (parts.empty() || parts.size() > 3) {
    return invalid_input("virtual package '{}': expected NAME [VERSION [BUILD]]", text);
  }
  VirtualPackage out{std::string(parts[0]), parts.size() > 1 ? std::string(parts[1]) : "0",
                     parts.size() > 2 ? std::string(parts[2]) : "0"};
  if (!out.name.starts_with("__") || out.name.size() < 3) {
    return invalid_input("virtual package '{}': a virtual package's name starts with \"__\"", text);
  }
  if (ParseResult<Version> v = Version::parse(out.version); !v) {
    return v.error().to_error(fmt::format("virtual package {}: version", out.name), out.version);
  }
  return out;
}

std::string VirtualPackage::str() const {
  return fmt::format("{} {} {}", name, version, build);
}

Result<PackageIndex> PackageIndex::build(std::vector<ChannelRepoData> channels,
                                         const std::vector<VirtualPackage>& virtual_packages) {
  PackageIndex index;
  std::set<std::string, std::less<>> virtual_names;
  // The virtual packages' records view the index's own copies of their strings (never resized).
  index.m_virtual_text.reserve(virtual_packages.size() * 4);
  index.m_virtual_records.reserve(virtual_packages.size());
  for (const VirtualPackage& vp : virtual_packages) {
    if (!virtual_names.insert(vp.name).second) {
      return invalid_input("virtual package {} is given twice", vp.name);
    }
    Record r;
    r.name = index.m_virtual_text.emplace_back(vp.name);
    r.version = index.m_virtual_text.emplace_back(vp.version);
    r.build = index.m_virtual_text.emplace_back(vp.build);
    r.filename = index.m_virtual_text.emplace_back(fmt::format("{}-{}-{}", vp.name, vp.version, vp.build));
    index.m_virtual_records.push_back(std::move(r));
  }
  index.m_channels = std::move(channels);
  std::size_t total = index.m_virtual_records.size();
  for (const ChannelRepoData& c : index.m_channels) {
    index.m_channel_names.push_back(canonical_channel(c.channel));
    for (const RepoData& r : c.subdirs) {
      total += r.records.size();
    }
  }

  // Every record in the index's order (channel, subdir, repodata order; virtual packages last),
  // each given a slot in its package (packages in first-seen order), then the versions parsed.
  std::vector<Place> places;
  places.reserve(total);
  std::unordered_map<std::string_view, std::uint32_t> package_of;
  package_of.reserve(total / 4 + 16);
  std::vector<IndexPackage> packages;
  const auto place = [&](const Record& rec, std::uint32_t channel) {
    auto [it, fresh] = package_of.try_emplace(rec.name, static_cast<std::uint32_t>(packages.size()));
    if (fresh) {
      packages.push_back(IndexPackage{std::string(rec.name), {}});
    }
    auto& slots = packages[it->second].records;
    places.push_back(Place{&rec, channel, it->second, static_cast<std::uint32_t>(slots.size())});
    slots.emplace_back();
  };
  for (std::size_t c = 0; c < index.m_channels.size(); ++c) {
    for (const RepoData& r : index.m_channels[c].subdirs) {
      for (const Record& rec : r.records) {
        if (virtual_names.empty() || virtual_names.count(rec.name) == 0) {
          place(rec, static_cast<std::uint32_t>(c));
        }
      }
    }
  }
  for (const Record& rec : index.m_virtual_records) {
    place(rec, IndexRecord::k_virtual);
  }
  std::vector<std::string> errors(places.size());
  parse_versions(places, packages, errors);

  // The records whose version doesn't parse are left out, the first named for a warning.
  for (std::size_t i = 0; i < places.size(); ++i) {
    if (errors[i].empty()) {
      continue;
    }
    if (index.m_stats.unparseable++ == 0) {
      const Place& p = places[i];
      const std::string& where =
          p.channel == IndexRecord::k_virtual ? k_virtual_channel : index.m_channel_names[p.channel];
      index.m_stats.first_unparseable =
          fmt::format("{}: {}: version '{}': {}", where, p.record->filename, p.record->version, errors[i]);
    }
  }
  index.m_stats.records = places.size() - index.m_stats.unparseable;
  if (index.m_stats.unparseable > 0) {
    for (IndexPackage& p : packages) {
      std::erase_if(p.records, [](const IndexRecord& r) { return r.record == nullptr; });
    }
    std::erase_if(packages, [](const IndexPackage& p) { return p.records.empty(); });
  }
  std::sort(packages.begin(), packages.end(),
            [](const IndexPackage& a, const IndexPackage& b) { return a.name < b.name; });
  index.m_packages = std::move(packages);
  index.m_by_name.reserve(index.m_packages.size());
  for (std::size_t i = 0; i < index.m_packages.size(); ++i) {
    index.m_by_name.emplace(index.m_packages[i].name, i);
  }
  return index;
}

const IndexPackage* PackageIndex::find(std::string_view name) const {
  auto it = m_by_name.find(name);
  return it == m_by_name.end() ? nullptr : &m_packages[it->second];
}

} // namespace lockstep::conda
