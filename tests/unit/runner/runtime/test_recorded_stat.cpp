#include "runner/runtime/recorded_stat.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

using namespace lockstep;
using namespace lockstep::runner;

TEST_CASE("a recorded stat round-trips through its text form", "[recorded_stat]") {
  RecordedStat r;
  r.owner = std::pair{0U, 42U};
  r.mode = 02755;
  CHECK(r.text() == "owner=0:42 mode=2755");
  auto back = RecordedStat::parse(r.text());
  REQUIRE(back);
  CHECK(back->owner == r.owner);
  CHECK(back->mode == r.mode);
  CHECK_FALSE(back->device);

  RecordedStat d;
  d.owner = std::pair{0U, 0U};
  d.mode = 0666;
  d.device = RecordedStat::Device{'c', 1, 3};
  CHECK(d.text() == "owner=0:0 mode=0666 dev=c:1:3");
  auto dev = RecordedStat::parse(d.text());
  REQUIRE(dev);
  REQUIRE(dev->device);
  CHECK(dev->device->type == 'c');
  CHECK(dev->device->minor == 3);
  CHECK(RecordedStat::parse("")->empty());
}

TEST_CASE("a malformed record is refused, never half-read", "[recorded_stat]") {
  // A build step can write the xattr itself: every malformed value is invalid input.
  for (const char* bad :
       {"owner=0", "owner=a:b", "owner=-1:0", "owner=4294967295:0", "mode=755", "mode=17777", "mode=0x55",
        "dev=x:1:2", "dev=c:1", "dev=c:4096:0", "mode=0644 owner=0:0", "owner=0:0 owner=1:1", "size=3",
        "owner=0:0  mode=0644", "owner"}) {
    INFO(bad);
    auto r = RecordedStat::parse(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
  }
  CHECK_FALSE(RecordedStat::parse(std::string(200, 'x')));
}

TEST_CASE("caller_mode is what the rootless unpack makes of an image mode", "[recorded_stat]") {
  CHECK(caller_mode(04755, false) == 0755);
  CHECK(caller_mode(02775, true) == 0775);
  CHECK(caller_mode(0440, false) == 0640);
  CHECK(caller_mode(0555, true) == 0755);
  CHECK(caller_mode(01777, true) == 01777);
}
