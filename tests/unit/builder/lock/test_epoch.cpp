#include "builder/lock/epoch.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;
using namespace lockstep::builder;

TEST_CASE("SOURCE_DATE_EPOCH values are parsed strictly", "[epoch]") {
  CHECK(*parse_epoch("0") == 0);
  CHECK(*parse_epoch("1700000000") == 1700000000);
  CHECK(*parse_epoch("253402300799") == 253402300799);
  for (const char* bad : {"", "-1", "+5", "1.5", "12abc", "yesterday", "253402300800", " 1"}) {
    auto r = parse_epoch(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK(r.error().message ==
          fmt::format("SOURCE_DATE_EPOCH='{}' is not a valid epoch: expected whole seconds "
                      "since 1970 (e.g. SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)), at "
                      "most 253402300799",
                      bad));
  }
}

TEST_CASE("without SOURCE_DATE_EPOCH the epoch is 0, never the clock", "[epoch]") {
  ::unsetenv("SOURCE_DATE_EPOCH");
  CHECK(*image_epoch() == 0);
  ::setenv("SOURCE_DATE_EPOCH", "42", 1);
  CHECK(*image_epoch() == 42);
  ::unsetenv("SOURCE_DATE_EPOCH");
}
