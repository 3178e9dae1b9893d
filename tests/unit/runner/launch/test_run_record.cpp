// Rank reports and their gathering into a run record (runner/launch/run_record.cpp).
#include "runner/launch/run_record.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <sys/stat.h>

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

TEST_CASE_METHOD(
    test::TempDirFixture,
    "a rank's second report replaces its first, and a link in its place; a file in the way is an error",
    "[run_record]") {
  const std::filesystem::path ranks = dir() / "ranks";
  REQUIRE_OK(write_rank_report(ranks, RankReport{4, 0, "n1", 0, "", 1, 2}));
  REQUIRE_OK(write_rank_report(ranks, RankReport{4, 0, "n2", 3, "", 5, 6})); // a relaunch, say
  std::ofstream(dir() / "elsewhere") << "untouched\n";
  std::filesystem::create_symlink(dir() / "elsewhere", ranks / "rank-5.json");
  REQUIRE_OK(write_rank_report(ranks, RankReport{5, 0, "n1", 0, "", 1, 2}));
  CHECK(test::slurp(dir() / "elsewhere") == "untouched\n"); // the link was replaced, not followed
  CHECK_FALSE(std::filesystem::is_symlink(ranks / "rank-5.json"));
  std::vector<RankReport> back = read_rank_reports(ranks);
  REQUIRE(back.size() == 2);
  CHECK(back[0] == RankReport{4, 0, "n2", 3, "", 5, 6});
  CHECK(back[1] == RankReport{5, 0, "n1", 0, "", 1, 2});
  std::ofstream(dir() / "file") << "x";
  Result<void> blocked = write_rank_report(dir() / "file" / "ranks", RankReport{6, 0, "n1", 0, "", 1, 2});
  REQUIRE_FALSE(blocked.ok());
  CHECK(blocked.error().message ==
        "can't create " + (dir() / "file" / "ranks" / "rank-6.json").string() + ": Not a directory");
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

TEST_CASE_METHOD(test::TempDirFixture, "run directories are 0700 and their files 0600 whatever the umask",
                 "[run_record]") {
  auto mode = [](const std::filesystem::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
  };
  for (mode_t umask_value : std::initializer_list<mode_t>{0000, 0022, 0777}) {
    const std::filesystem::path runs = dir() / fmt::format("runs-{:o}", umask_value);
    const mode_t old = ::umask(umask_value);
    Result<void> made = make_record_dirs(runs / "job" / "ranks");
    Result<void> written = write_rank_report(runs / "job" / "ranks", RankReport{3, 0, "n1", 0, "", 1, 2});
    ::umask(old);
    REQUIRE_OK(made);
    REQUIRE_OK(written);
    for (const auto& d : {runs, runs / "job", runs / "job" / "ranks"}) {
      CHECK(mode(d) == 0700);
    }
    CHECK(mode(runs / "job" / "ranks" / "rank-3.json") == 0600);
    // Nothing but the report is left there (no temporary file).
    CHECK(std::distance(std::filesystem::directory_iterator(runs / "job" / "ranks"),
                        std::filesystem::directory_iterator()) == 1);
  }
  REQUIRE_OK(write_unsynced(dir() / "hostfile", "n1 slots=2\n", 0600));
  REQUIRE_OK(write_unsynced(dir() / "hostfile", "n2 slots=2\n", 0600)); // replaced whole
  CHECK(test::slurp(dir() / "hostfile") == "n2 slots=2\n");
  CHECK_FALSE(write_unsynced(dir() / "no-such-dir" / "x", "x", 0600).ok());
  // What exists is left alone; a file in the way is an error.
  std::filesystem::create_directory(dir() / "shared");
  std::filesystem::permissions(dir() / "shared", std::filesystem::perms(0755));
  REQUIRE_OK(make_record_dirs(dir() / "shared" / "job"));
  CHECK(mode(dir() / "shared") == 0755);
  CHECK(mode(dir() / "shared" / "job") == 0700);
  std::ofstream(dir() / "file") << "x";
  Result<void> blocked = make_record_dirs(dir() / "file");
  REQUIRE_FALSE(blocked.ok());
  CHECK(blocked.error().code == ExitCode::io);
}
