// Edit distance and "did you mean".
#include "envspec/yaml/suggest.hpp"

#include <catch2/catch.hpp>

using lockstep::envspec::closest_match;
using lockstep::envspec::edit_distance;

TEST_CASE("Edit distance counts insertions, deletions, substitutions and swaps", "[suggest]") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("labls", "labels") == 1);
  CHECK(edit_distance("labelz", "labels") == 1);
  CHECK(edit_distance("cdm", "cmd") == 1);
  CHECK(edit_distance("entrypiont", "entrypoint") == 1);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("Name", "name") == 0);
}

TEST_CASE("A suggestion is offered only for a close match", "[suggest]") {
  const std::vector<std::string_view> keys = {"name", "env", "labels", "platform", "workdir", "cmd"};
  CHECK(closest_match("labls", keys) == "labels");
  CHECK(closest_match("platfrom", keys) == "platform");
  CHECK(closest_match("workingdir", keys) == "workdir");
  CHECK(closest_match("nme", keys) == "name");
  CHECK(closest_match("ev", keys) == "env");
  CHECK_FALSE(closest_match("frobnicate", keys));
  CHECK_FALSE(closest_match("xyz", keys));
  CHECK_FALSE(closest_match("environment", keys));
}

TEST_CASE("Ties go to the earlier candidate", "[suggest]") {
  CHECK(closest_match("ab", {"ac", "ad"}) == "ac");
}
