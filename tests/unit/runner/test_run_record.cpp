// Rank reports and their gathering into a run record (runner/run_record.cpp).
#include "runner/run_record.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <fstream>

using namespace lockstep;
using namespace lockstep::runner;

TEST_CASE_METHOD(test::TempDirFixture, "rank reports round-trip and the first failure is the earliest",
                 "[run_record]") {
  RankReport a{0, 0, "n1", 0, "", 100, 900};
  RankReport b{1, 0, "n2", 3, "", 100, 500};
  RankReport c{2, 0, "n3", 143, "", 100, 700}; // torn down after b failed
  for (const RankReport& r : {a, b, c}) {
    REQUIRE(write_rank_report(dir() / "ranks", r).ok());
  }
  std::ofstream(dir() / "ranks" / "rank-9.json") << "{\"rank\": 9, \"bogus\": 1}\n";
  std::ofstream(dir() / "ranks" / "notes.txt") << "ignored\n";
  std::vector<RankReport> back = read_rank_reports(dir() / "ranks");
  REQUIRE(back.size() == 3);
  CHECK(back[0] == a);
  CHECK(back[1] == b);
  CHECK(back[2] == c);
  std::optional<RankReport> f = first_failure(back);
  REQUIRE(f);
  CHECK(f->rank == 1);
  CHECK(f->node == "n2");
  CHECK_FALSE(first_failure({a}));
}

TEST_CASE("rank reports are parsed strictly", "[run_record]") {
  CHECK(rank_report_from_json("[]", "r").error().message == "r: not a JSON object");
  CHECK(rank_report_from_json("{\"rank\":1,\"exit_code\":300}", "r").error().message ==
        "r: 'exit_code' must be an integer in [0, 255]");
  CHECK(rank_report_from_json("{\"node\":\"n1\"}", "r").error().message == "r: 'rank' is missing");
  CHECK(rank_report_from_json("{\"rank\":1,\"x\":1}", "r").error().message == "r: unknown key 'x'");
  RankReport r = unwrap(rank_report_from_json(
      "{\"rank\":3,\"local_rank\":1,\"node\":\"n2\",\"exit_code\":0,\"start_ns\":1,\"end_ns\":2}", "r"));
  CHECK(r.rank == 3);
  CHECK(r.local_rank == 1);
}

TEST_CASE("times are written as UTC ISO 8601 with milliseconds", "[run_record]") {
  CHECK(iso8601_utc(0) == "1970-01-01T00:00:00.000Z");
  CHECK(iso8601_utc(1796083141123456789LL) == "2026-11-30T23:59:01.123Z");
}
