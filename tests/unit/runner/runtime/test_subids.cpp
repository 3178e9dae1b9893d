#include "runner/runtime/subids.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;
using namespace lockstep::runner;

TEST_CASE("a user's subordinate range is found by name or number", "[subids]") {
  const std::string text = "# comment\nalice:100000:65536\nbob:165536:0\nbob:231072:65536\n1003:296608:1000\n"
                           "malformed\ncarol:x:5\n";
  auto a = find_subid_range(text, "alice", 1001);
  REQUIRE(a);
  CHECK(a->first == 100000);
  CHECK(a->count == 65536);
  auto b = find_subid_range(text, "bob", 1002);
  REQUIRE(b); // an empty range is skipped
  CHECK(b->first == 231072);
  auto numeric = find_subid_range(text, "dave", 1003);
  REQUIRE(numeric);
  CHECK(numeric->count == 1000);
  CHECK_FALSE(find_subid_range(text, "carol", 1004));
  CHECK_FALSE(find_subid_range(text, "erin", 1005));
  CHECK_FALSE(find_subid_range("alice:1:99999999999\n", "alice", 1));
}

TEST_CASE("the userns modes are auto, subuid and single", "[subids]") {
  CHECK(*parse_userns_mode("auto") == UsernsMode::automatic);
  CHECK(*parse_userns_mode("subuid") == UsernsMode::subuid);
  CHECK(*parse_userns_mode("single") == UsernsMode::single);
  auto bad = parse_userns_mode("keep-id");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == ExitCode::invalid_input);
  CHECK(bad.error().message.find("auto, subuid or single") != std::string::npos);
  CHECK_FALSE(*choose_subordinate_ids(UsernsMode::single));
}
