// The one JSON entry point for untrusted input: nesting bounded before anything is built.
#include "support/base/json.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

using namespace lockstep;

namespace {

std::string nested(int levels, const std::string& inner = "") {
  return std::string(static_cast<std::size_t>(levels), '[') + inner +
         std::string(static_cast<std::size_t>(levels), ']');
}

} // namespace

TEST_CASE("JSON nested up to the limit parses and one level more is refused, located", "[json]") {
  REQUIRE(parse_json(nested(k_max_json_depth), "x.json").ok());
  CHECK_FALSE(find_json_depth_excess(nested(k_max_json_depth)));

  const auto deep = parse_json("{\"a\":\n  " + nested(k_max_json_depth) + "}", "x.json");
  REQUIRE_FALSE(deep);
  CHECK(deep.error().code == ExitCode::invalid_input);
  CHECK(deep.error().message ==
        "x.json: JSON nested more than 128 levels deep (line 2, column 130); refusing it");
}

TEST_CASE("JSON depth counts brackets outside strings only", "[json]") {
  const std::string in_string =
      "{\"k\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}";
  REQUIRE(parse_json(in_string, "s.json").ok());
  // Closing brackets bring the depth back: many shallow siblings are fine.
  std::string siblings = "[";
  for (int i = 0; i < 1000; ++i) {
    siblings += (i != 0 ? "," : "") + nested(100);
  }
  siblings += "]";
  REQUIRE(parse_json(siblings, "s.json").ok());
  CHECK(find_json_depth_excess(nested(5), 4)->offset == 4);
  // An escaped backslash does not escape the quote after it: the brackets after it count.
  CHECK(find_json_depth_excess("[\"a\\\\\", " + nested(4) + "]", 4)->offset == 11);
  CHECK_FALSE(find_json_depth_excess("[\"a\\\\\\\"" + nested(4) + "\"]", 4));
}

TEST_CASE("Hostile nesting is refused before it is built, and fast", "[json]") {
  const std::string deep = nested(1000000);
  const auto start = std::chrono::steady_clock::now();
  const auto r = parse_json(deep, "lock");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "lock: JSON nested more than 128 levels deep (line 1, column 129); refusing it");
  // Unbalanced text is not the scanner's business: the parser refuses it.
  CHECK(parse_json(std::string(200000, ']'), "lock").error().message == "lock: not valid JSON");
  CHECK(parse_json("{\"a\": 1", "lock").error().message == "lock: not valid JSON");
}

// Hidden (timing on a shared CI machine is noise): run with `unit_support "[.benchmark]"`.
TEST_CASE("The depth scan costs little next to parsing", "[json][.benchmark]") {
  // About 8 MiB of a lock-like document (an array of flat objects).
  std::string big = "[";
  for (int i = 0; i < 40000; ++i) {
    big += (i != 0 ? "," : "");
    big +=
        R"({"kind":"deb","name":"libfoo)" + std::to_string(i) +
        R"(","version":"1.2.3-4","arch":"amd64","size":123456,"sha256":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","url":"http://deb.debian.org/debian/pool/main/f/foo/libfoo_1.2.3-4_amd64.deb"})";
  }
  big += "]";
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  CHECK_FALSE(find_json_depth_excess(big));
  auto t1 = clock::now();
  REQUIRE(nlohmann::json::parse(big).size() == 40000);
  auto t2 = clock::now();
  const double scan = std::chrono::duration<double>(t1 - t0).count();
  const double parse = std::chrono::duration<double>(t2 - t1).count();
  WARN("depth scan " << scan * 1000 << " ms, parse " << parse * 1000 << " ms for " << big.size() << " bytes");
  CHECK(scan < parse / 3);
}
