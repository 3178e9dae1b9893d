// The package index of a conda solve (support/conda/index): channels in priority order with their
// noarch subdirs, records grouped by name in a deterministic order, unparseable versions left out
// and counted, and virtual packages as single-record packages.
#include "support/conda/index.hpp"
#include "tests/unit/support/conda/conda_world.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

using namespace lockstep;
using namespace lockstep::conda;
using namespace lockstep::conda::test;

TEST_CASE("an index groups every channel's records by name, in channel then subdir order", "[conda][index]") {
  World w;
  w.add("https://conda.anaconda.org/conda-forge/", {{"numpy 1.26.4 py312h_0", {}},
                                                    {"six 1.16.0 pyh_0", {}, {}, 0, {}, 0, "noarch"},
                                                    {"numpy 2.0.0 py312h_0", {}}});
  w.add("pkgs/main", {{"numpy 1.26.0 py312h_1", {}}, {"zlib 1.3 h_0", {}}});
  const PackageIndex index = w.index();
  CHECK(index.channels() == std::vector<std::string>{"conda-forge", "pkgs/main"});
  REQUIRE(index.packages().size() == 3);
  CHECK(index.packages()[0].name == "numpy"); // sorted by name
  const IndexPackage* numpy = index.find("numpy");
  REQUIRE(numpy != nullptr);
  REQUIRE(numpy->records.size() == 3);
  CHECK(numpy->records[0].record->version == "1.26.4");
  CHECK(numpy->records[1].record->version == "2.0.0");
  CHECK(numpy->records[2].channel == 1);
  CHECK(numpy->records[1].version > numpy->records[0].version);
  const IndexPackage* six = index.find("six");
  REQUIRE(six != nullptr);
  CHECK(six->records[0].record->subdir == "noarch");
  CHECK(six->records[0].channel == 0);
  CHECK(index.find("scipy") == nullptr);
  CHECK(index.stats().records == 5);
  CHECK(index.stats().unparseable == 0);
}

TEST_CASE("records whose version doesn't parse are left out and counted", "[conda][index]") {
  World w;
  w.add("c", {{"ok 1.0 0", {}}, {"bad 1..2 0", {}}, {"bad 1.0 0", {}}, {"worse 1!2!3 0", {}}});
  const PackageIndex index = w.index();
  CHECK(index.stats().records == 2);
  CHECK(index.stats().unparseable == 2);
  CHECK_THAT(index.stats().first_unparseable, Catch::StartsWith("c: bad-1..2-0.conda: version '1..2': "));
  REQUIRE(index.find("bad") != nullptr);
  CHECK(index.find("bad")->records.size() == 1);
  CHECK(index.find("worse") == nullptr);
}

TEST_CASE("virtual packages are single-record packages that replace a channel's record of the name",
          "[conda][index]") {
  World w;
  w.add("c", {{"__cuda 99 0", {}}, {"foo 1.0 0", {}}});
  const PackageIndex index = w.index({"__glibc 2.36", "__unix", "__archspec 1 x86_64_v3", "__cuda 12.4"});
  const IndexPackage* cuda = index.find("__cuda");
  REQUIRE(cuda != nullptr);
  REQUIRE(cuda->records.size() == 1);
  CHECK(cuda->records[0].is_virtual());
  CHECK(cuda->records[0].record->version == "12.4");
  CHECK(cuda->records[0].record->build == "0");
  const IndexPackage* arch = index.find("__archspec");
  REQUIRE(arch != nullptr);
  CHECK(arch->records[0].record->build == "x86_64_v3");
  CHECK(index.find("__unix")->records[0].record->version == "0");
  CHECK(index.stats().records == 5);
}

TEST_CASE("a virtual package is NAME [VERSION [BUILD]] with a name starting with __", "[conda][index]") {
  auto v = VirtualPackage::parse("  __archspec 1   x86_64_v3 ");
  REQUIRE(v);
  CHECK(v->str() == "__archspec 1 x86_64_v3");
  CHECK(VirtualPackage::parse("__unix")->str() == "__unix 0 0");
  CHECK_THAT(VirtualPackage::parse("glibc 2.36").error().message, Catch::Contains("starts with \"__\""));
  CHECK_THAT(VirtualPackage::parse("__glibc 2..36").error().message, Catch::Contains("version"));
  CHECK_FALSE(VirtualPackage::parse(""));
  CHECK_FALSE(VirtualPackage::parse("__a 1 2 3"));
  std::vector<ChannelRepoData> none;
  auto twice = PackageIndex::build(std::move(none),
                                   {*VirtualPackage::parse("__unix"), *VirtualPackage::parse("__unix 1")});
  REQUIRE_FALSE(twice);
  CHECK_THAT(twice.error().message, Catch::Contains("__unix is given twice"));
}

TEST_CASE("a large index is the same whatever the order the cores parse it in", "[conda][index]") {
  // Enough records for several parallel chunks; the grouping must follow the index's order.
  World w;
  std::vector<R> records;
  for (int i = 0; i < 9000; ++i) {
    records.push_back(R{fmt::format("pkg{} {}.{} b{}", i % 37, i / 37, i % 5, i)});
  }
  w.add("c", records);
  const PackageIndex index = w.index();
  CHECK(index.stats().records == 9000);
  REQUIRE(index.packages().size() == 37);
  for (const IndexPackage& p : index.packages()) {
    for (std::size_t k = 1; k < p.records.size(); ++k) {
      const std::string_view a = p.records[k - 1].record->build;
      const std::string_view b = p.records[k].record->build;
      REQUIRE(std::stoi(std::string(a.substr(1))) < std::stoi(std::string(b.substr(1))));
      REQUIRE(p.records[k].version.str() == p.records[k].record->version);
    }
  }
}
