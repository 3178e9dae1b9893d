#pragma once
// Small conda package worlds for the index and solver tests: records written as "name version
// build" with their fields, grouped into channels (each a linux-64 and a noarch subdir) and built
// into a PackageIndex.
#include "support/conda/index.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace lockstep::conda::test {

/// One record: "numpy 1.26.4 py312h_0" and what it needs.
struct R {
  std::string nvb;
  std::vector<std::string> depends = {};
  std::vector<std::string> constrains = {};
  std::uint64_t build_number = 0;
  std::vector<std::string> track_features = {};
  std::uint64_t timestamp = 0;
  std::string subdir = "linux-64";
};

class World {
public:
  /// Adds `records` to `channel` (channels rank in the order they are first named).
  World& add(const std::string& channel, const std::vector<R>& records) {
    auto it = std::find(m_order.begin(), m_order.end(), channel);
    if (it == m_order.end()) {
      m_order.push_back(channel);
    }
    for (const R& r : records) {
      m_records[channel].push_back(r);
    }
    return *this;
  }

  /// The index of every channel, with these virtual packages ("__cuda 12.4").
  PackageIndex index(const std::vector<std::string>& virtual_packages = {}) {
    std::vector<ChannelRepoData> channels;
    for (const std::string& name : m_order) {
      ChannelRepoData c;
      c.channel = name;
      c.subdirs.resize(2);
      c.subdirs[0].subdir = "linux-64";
      c.subdirs[1].subdir = "noarch";
      for (const R& r : m_records[name]) {
        c.subdirs[r.subdir == "noarch" ? 1 : 0].records.push_back(record(r));
      }
      channels.push_back(std::move(c));
    }
    std::vector<VirtualPackage> vps;
    for (const std::string& v : virtual_packages) {
      auto vp = VirtualPackage::parse(v);
      REQUIRE(vp);
      vps.push_back(*vp);
    }
    auto built = PackageIndex::build(std::move(channels), vps);
    REQUIRE(built);
    return std::move(*built);
  }

private:
  const std::string& keep(std::string s) { return m_text.emplace_back(std::move(s)); }

  Record record(const R& r) {
    Record out;
    const std::size_t a = r.nvb.find(' ');
    const std::size_t b = r.nvb.find(' ', a + 1);
    REQUIRE(b != std::string::npos);
    out.name = keep(r.nvb.substr(0, a));
    out.version = keep(r.nvb.substr(a + 1, b - a - 1));
    out.build = keep(r.nvb.substr(b + 1));
    out.filename = keep(fmt::format("{}-{}-{}.conda", out.name, out.version, out.build));
    out.subdir = keep(r.subdir);
    out.build_number = r.build_number;
    out.timestamp_ms = r.timestamp;
    out.sha256 = keep(std::string(64, 'a'));
    for (const std::string& d : r.depends) {
      out.depends.emplace_back(keep(d));
    }
    for (const std::string& d : r.constrains) {
      out.constrains.emplace_back(keep(d));
    }
    for (const std::string& d : r.track_features) {
      out.track_features.emplace_back(keep(d));
    }
    if (r.subdir == "noarch") {
      out.noarch = NoArch::python;
    }
    return out;
  }

  std::vector<std::string> m_order;
  std::map<std::string, std::vector<R>> m_records;
  std::deque<std::string> m_text; // what the records' fields view (or copy)
};

} // namespace lockstep::conda::test
