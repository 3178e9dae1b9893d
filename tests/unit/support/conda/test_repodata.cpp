// A conda channel's repodata.json (support/conda/repodata): the fields kept, conda's rules for twins
// and timestamps, malformed records left out and counted, and hostile indexes refused with bounds.
#include "support/conda/repodata.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>

using namespace lockstep;
using namespace lockstep::conda;

namespace {

const std::string k_sha = std::string(64, 'a');
const std::string k_md5 = std::string(32, 'b');

// One record's JSON; `extra` is spliced in before the closing brace.
std::string record(std::string_view name, std::string_view version, std::string_view build,
                   std::string_view extra = "") {
  return fmt::format(R"({{"name": "{}", "version": "{}", "build": "{}", "build_number": 3, "sha256": "{}",
    "md5": "{}", "size": 1234, "subdir": "linux-64", "depends": ["python >=3.11,<3.12.0a0", "libzlib"]{}}})",
                     name, version, build, k_sha, k_md5, extra);
}

const Record* find(const RepoData& r, std::string_view filename) {
  for (const Record& rec : r.records) {
    if (rec.filename == filename) {
      return &rec;
    }
  }
  return nullptr;
}

} // namespace

TEST_CASE("a repodata index gives every record with the fields lockstep keeps", "[conda][repodata]") {
  const std::string json = fmt::format(
      R"({{"info": {{"subdir": "linux-64", "base_url": "https://mirror.example/cf/linux-64/"}},
          "repodata_version": 2,
          "packages": {{"zlib-1.3-h1_0.tar.bz2": {}}},
          "packages.conda": {{"numpy-1.26.4-py311h64a7726_0.conda": {}}},
          "removed": ["old-1.0-0.tar.bz2"], "signatures": {{"x": {{"y": [1, 2, {{}}]}}}}}})",
      record("zlib", "1.3", "h1_0", R"(, "noarch": "generic", "timestamp": 1700000000)"),
      record("numpy", "1.26.4", "py311h64a7726_0",
             R"(, "constrains": ["numpy-base <0a0"], "track_features": "a, b c", "timestamp": 1707225380409,
                "license": "BSD-3-Clause", "future_field": {"nested": [true]}, "noarch": false)"));
  auto r = parse_repodata(json, "test");
  REQUIRE(r);
  CHECK(r->subdir == "linux-64");
  CHECK(r->base_url == "https://mirror.example/cf/linux-64/");
  CHECK(r->removed == std::vector<std::string>{"old-1.0-0.tar.bz2"});
  CHECK(r->skipped == 0);
  REQUIRE(r->records.size() == 2);
  const Record* numpy = find(*r, "numpy-1.26.4-py311h64a7726_0.conda");
  REQUIRE(numpy != nullptr);
  CHECK(numpy->name == "numpy");
  CHECK(numpy->version == "1.26.4");
  CHECK(numpy->build == "py311h64a7726_0");
  CHECK(numpy->build_number == 3);
  CHECK(numpy->depends == std::vector<std::string_view>{"python >=3.11,<3.12.0a0", "libzlib"});
  CHECK(numpy->constrains == std::vector<std::string_view>{"numpy-base <0a0"});
  CHECK(numpy->track_features == std::vector<std::string_view>{"a", "b", "c"});
  CHECK(numpy->timestamp_ms == 1707225380409ULL);
  CHECK(numpy->license == "BSD-3-Clause");
  CHECK(numpy->noarch == NoArch::none);
  CHECK(numpy->sha256 == k_sha);
  CHECK(numpy->md5 == k_md5);
  CHECK(numpy->size == 1234);
  CHECK(numpy->is_conda_format());
  const Record* zlib = find(*r, "zlib-1.3-h1_0.tar.bz2");
  REQUIRE(zlib != nullptr);
  CHECK(zlib->noarch == NoArch::generic);
  CHECK(zlib->timestamp_ms == 1700000000000ULL); // seconds, scaled as conda does
  CHECK_FALSE(zlib->is_conda_format());
}

TEST_CASE("a .conda record and its .tar.bz2 twin are one candidate, the .conda one", "[conda][repodata]") {
  const std::string json = fmt::format(
      R"({{"packages": {{"six-1.16-pyh6c4a22f_0.tar.bz2": {}}}, "packages.conda": {{"six-1.16-pyh6c4a22f_0.conda": {}}}}})",
      fmt::format(R"({{"name": "six", "version": "1.16", "build": "pyh6c4a22f_0", "md5": "{}", "size": 99,
                      "noarch": "python", "track_features": ["x"]}})",
                  std::string(32, 'c')),
      record("six", "1.16", "pyh6c4a22f_0", R"(, "noarch": "python")"));
  auto r = parse_repodata(json, "test");
  REQUIRE(r);
  REQUIRE(r->records.size() == 1);
  const Record& six = r->records[0];
  CHECK(six.filename == "six-1.16-pyh6c4a22f_0.conda");
  CHECK(six.noarch == NoArch::python);
  CHECK(six.legacy_bz2_md5 == std::string(32, 'c'));
  CHECK(six.legacy_bz2_size == 99);
  CHECK(six.md5 == k_md5);
}

TEST_CASE("malformed records are left out and counted, the first one named", "[conda][repodata]") {
  const auto index = [](std::string_view filename, const std::string& rec) {
    return fmt::format(
        R"({{"info": {{"subdir": "linux-64"}}, "packages.conda": {{"ok-1-0.conda": {}, "{}": {}}}}})",
        record("ok", "1", "0"), filename, rec);
  };
  struct Case {
    std::string filename;
    std::string rec;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"notanartifact.zip", record("a", "1", "0"), "not NAME-VERSION-BUILD"},
      {"a-1-0.conda", record("b", "1", "0"), "the record says b-1-0"},
      {"A-1-0.conda", record("A", "1", "0"), "not a conda package name"},
      {"a-1-0.conda", R"({"name": "a", "version": "1", "build": "0", "sha256": "xyz"})",
       "sha256 is not 64 hex"},
      {"a-1-0.conda", R"({"name": "a", "version": "1", "build": "0"})", "neither sha256 nor md5"},
      {"a-1-0.conda", record("a", "1", "0", R"(, "build_number": "3")"), "\"build_number\" is a string"},
      {"a-1-0.conda", record("a", "1", "0", R"(, "depends": "python")"), "\"depends\" is a string"},
      {"a-1-0.conda", record("a", "1", "0", R"(, "depends": [1])"), "\"depends\" has a number"},
      {"a-1-0.conda", record("a", "1", "0", R"(, "noarch": "java")"), "\"noarch\" is \"java\""},
      {"a-1-0.conda", record("a", "1", "0", R"(, "size": -1)"), "\"size\" is a negative number"},
      {"a-1-0.conda", "[1, 2]", "a-1-0.conda"},
      {"a-1-0.conda", "\"text\"", "not an object"},
      {"a-1-0.conda", record("a", "1", "0").replace(record("a", "1", "0").find("linux-64"), 8, "osx-arm64"),
       "its subdir osx-arm64 is not the index's linux-64"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.filename, c.rec);
    auto r = parse_repodata(index(c.filename, c.rec), "test");
    REQUIRE(r);
    REQUIRE(r->records.size() == 1);
    CHECK(r->records[0].filename == "ok-1-0.conda");
    CHECK(r->skipped == 1);
    CHECK_THAT(r->first_skipped, Catch::Contains(c.why));
  }
}

TEST_CASE("an index that is not one is refused with a located error", "[conda][repodata]") {
  struct Case {
    std::string json;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"{\"packages\": {", "not a JSON document"},
      {"[]", "the top level is an array"},
      {"\"x\"", "the top level is not an object"},
      {"42", "the top level is not an object"},
      {"{\"repodata_version\": 3}", "repodata_version 3"},
      {"{\"info\": {\"repodata_version\": 7}}", "repodata_version 7"},
      {"{\"repodata_version\": \"1\"}", "\"repodata_version\" is not a number"},
      {"{} {}", "not a JSON document"},
      {"{\"x\": \"\xff\xfe\"}", "not a JSON document"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.json);
    auto r = parse_repodata(c.json, "https://example/linux-64/repodata.json");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK_THAT(r.error().message, Catch::StartsWith("https://example/linux-64/repodata.json: "));
    CHECK_THAT(r.error().message, Catch::Contains(c.why));
  }
}

TEST_CASE("an empty index is valid and has no records", "[conda][repodata]") {
  for (const char* json : {"", "  \n", "{}"}) {
    auto r = parse_repodata(json, "test");
    REQUIRE(r);
    CHECK(r->records.empty());
  }
}

TEST_CASE("reading an index is bounded: depth, string length and record count", "[conda][repodata]") {
  RepoDataLimits limits;
  limits.max_depth = 8;
  limits.max_string = 100;
  limits.max_records = 2;
  const std::string deep = "{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto r = parse_repodata(deep, "deep", limits);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("nested deeper than 8 levels"));
  r = parse_repodata(fmt::format("{{\"info\": {{\"subdir\": \"{}\"}}}}", std::string(101, 'x')), "long",
                     limits);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("a string of 101 bytes (at most 100)"));
  const std::string three =
      fmt::format(R"({{"packages.conda": {{"a-1-0.conda": {}, "b-1-0.conda": {}, "c-1-0.conda": {}}}}})",
                  record("a", "1", "0"), record("b", "1", "0"), record("c", "1", "0"));
  r = parse_repodata(three, "many", limits);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("more than 2 package records"));
  // The default bound stops a deep document before the parser's recursion gets deep: the handler
  // refuses the 33rd level before the parser descends into it.
  const std::string very_deep = "{\"x\": " + std::string(1'000'000, '[');
  CHECK_FALSE(parse_repodata(very_deep, "very deep"));
}

TEST_CASE("artifact filenames split at their last two dashes", "[conda][repodata]") {
  auto p = split_artifact_filename("python-dateutil-2.9.0-pyhd8ed1ab_0.conda");
  REQUIRE(p);
  CHECK(p->name == "python-dateutil");
  CHECK(p->version == "2.9.0");
  CHECK(p->build == "pyhd8ed1ab_0");
  p = split_artifact_filename("_openmp_mutex-4.5-2_gnu.tar.bz2");
  REQUIRE(p);
  CHECK(p->name == "_openmp_mutex");
  for (const char* bad : {"a-1.conda", "-1-0.conda", "a--0.conda", "a-1-.conda", "a-1-0.zip",
                          "../a-1-0.conda", "x/a-1-0.conda", "a-1-0.tar.gz"}) {
    CAPTURE(bad);
    CHECK_FALSE(split_artifact_filename(bad));
  }
}

TEST_CASE("records view the decoded document, which they can outlive the index with", "[conda][repodata]") {
  const std::string json =
      fmt::format(R"({{"info": {{"subdir": "linux-64"}}, "packages.conda": {{"a-1-0.conda": {}}}}})",
                  R"({"name": "a", "version": "1", "build": "0", "build_number": 0, "depends": ["b \u003e=1"],
          "sha256": ")" +
                      std::string(64, 'A') + R"("})");
  Record kept;
  std::shared_ptr<const std::string> text;
  {
    auto r = parse_repodata(json, "test");
    REQUIRE(r);
    REQUIRE(r->records.size() == 1);
    kept = r->records[0];
    text = r->text;
  }
  CHECK(kept.subdir == "linux-64");                              // the index's, as the record has none
  CHECK(kept.depends == std::vector<std::string_view>{"b >=1"}); // the escape decoded in place
  CHECK(kept.sha256 == std::string(64, 'a'));                    // lowercased in place
  CHECK(kept.name.data() >= text->data());
  CHECK(kept.name.data() < text->data() + text->size());
}
