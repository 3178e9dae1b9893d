#include "support/codec/compress.hpp"
#include "support/codec/digest.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <random>
#include <string>

using namespace lockstep;

namespace {

using test::StringSink;

// (Round trips through the layer decoder: tests/unit/support/oci/test_layer_stream.cpp.)
// Mixed input: compressible text and incompressible noise, a bit over 5 chunks.
std::string sample_input() {
  std::string s;
  std::mt19937 rng(42);
  while (s.size() < 5 * k_gzip_chunk_size + 12345) {
    s += "lockstep pins every component to a version and a sha256; ";
    for (int i = 0; i < 64; ++i) {
      s += static_cast<char>(rng() & 0xff);
    }
  }
  return s;
}

std::string compress_with(Codec codec, const std::string& input, unsigned threads, std::size_t piece) {
  StringSink sink;
  ParallelCompressor c(codec, sink, threads);
  for (std::size_t i = 0; i < input.size(); i += piece) {
    c.write(input.data() + i, std::min(piece, input.size() - i));
  }
  c.finish();
  return sink.out;
}

} // namespace

TEST_CASE("gzip output is the same bytes for any thread count and write pattern", "[compress]") {
  std::string input = sample_input();
  std::string one = compress_with(Codec::gzip, input, 1, 1 << 20);
  REQUIRE(compress_with(Codec::gzip, input, 2, 4096) == one);
  REQUIRE(compress_with(Codec::gzip, input, 7, 333333) == one);
}

TEST_CASE("gzip members have a fixed header: no name, mtime 0, OS unix", "[compress]") {
  std::string out = compress_with(Codec::gzip, "hello", 2, 5);
  REQUIRE(out.size() > 18);
  CHECK(static_cast<unsigned char>(out[0]) == 0x1f);
  CHECK(static_cast<unsigned char>(out[1]) == 0x8b);
  CHECK(out[2] == 8);                              // deflate
  CHECK(out[3] == 0);                              // FLG: no FNAME/FCOMMENT/FEXTRA
  CHECK(out.substr(4, 4) == std::string(4, '\0')); // MTIME
  CHECK(out[9] == 3);                              // OS = Unix
}

TEST_CASE("gzip output is read by the gzip command line tool", "[compress]") {
  std::string input = sample_input();
  std::string gz = compress_with(Codec::gzip, input, 2, 1 << 20);
  std::string path = "/tmp/lockstep-unit-gzip-" + std::to_string(::getpid()) + ".gz";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::fwrite(gz.data(), 1, gz.size(), f);
  std::fclose(f);
  std::string cmd = "gzip -dc " + path + " | sha256sum";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[128] = {};
  REQUIRE(std::fgets(buf, sizeof(buf), p) != nullptr);
  ::pclose(p);
  std::remove(path.c_str());
  CHECK(std::string(buf).substr(0, 64) == sha256_of(input).hex());
}

TEST_CASE("zstd output is the same bytes for any worker count and write pattern", "[compress]") {
  std::string input = sample_input();
  std::string one = compress_with(Codec::zstd, input, 1, 1 << 20);
  REQUIRE(compress_with(Codec::zstd, input, 2, 4096) == one);
  REQUIRE(compress_with(Codec::zstd, input, 5, 777777) == one);
}
