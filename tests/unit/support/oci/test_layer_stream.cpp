#include "support/compress.hpp"
#include "support/digest.hpp"
#include "support/oci/layer_stream.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <zlib.h>

#include <random>
#include <string>

using namespace lockstep;
using namespace lockstep::oci;

namespace {

// Compressible text with incompressible noise, `size` bytes.
std::string sample(std::size_t size) {
  std::string s;
  std::mt19937 rng(7);
  while (s.size() < size) {
    s += "every layer is read once, front to back; ";
    for (int i = 0; i < 48; ++i) {
      s += static_cast<char>(rng() & 0xff);
    }
  }
  s.resize(size);
  return s;
}

// lockstep's own layer compression (gzip members of 1 MiB, or one zstd frame).
std::string compressed(Codec codec, const std::string& input) {
  test::StringSink sink;
  ParallelCompressor c(codec, sink, 2);
  c.write(input.data(), input.size());
  c.finish();
  return sink.out;
}

// One gzip member for the whole input, as `gzip`, pigz and Go write.
std::string one_member_gzip(const std::string& input) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, input.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data())); // NOLINT
  z.avail_in = static_cast<uInt>(input.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data()); // NOLINT
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

Result<std::string> read_all(const std::string& blob, LayerCodec codec, LayerCheck check = {}) {
  LS_TRY_ASSIGN(LayerStream s, LayerStream::open(memory_blob_reader(blob), codec, "layer", std::move(check)));
  std::string out;
  for (;;) {
    LS_TRY_ASSIGN(std::span<const std::uint8_t> piece, s.next());
    if (piece.empty()) {
      return out;
    }
    out.append(reinterpret_cast<const char*>(piece.data()), piece.size()); // NOLINT
  }
}

LayerCheck check_of(const std::string& blob, const std::string& plain) {
  return LayerCheck{sha256_of(blob), blob.size(), sha256_of(plain)};
}

} // namespace

TEST_CASE("a layer decodes to the same bytes whatever its compression", "[layer_stream]") {
  // 20 MiB: more than two input windows, so members straddle refills.
  const std::string plain = sample(20U << 20);
  const std::string members = compressed(Codec::gzip, plain);
  const std::string single = one_member_gzip(plain);
  const std::string zstd = compressed(Codec::zstd, plain);
  for (auto [name, blob, codec] :
       {std::tuple{"gzip members", members, LayerCodec::gzip},
        std::tuple{"one gzip member", single, LayerCodec::gzip}, std::tuple{"zstd", zstd, LayerCodec::zstd},
        std::tuple{"uncompressed", plain, LayerCodec::none}}) {
    INFO(name);
    auto got = read_all(blob, codec, check_of(blob, plain));
    REQUIRE(got);
    CHECK(*got == plain);
    auto detected = read_all(blob, LayerCodec::detect, check_of(blob, plain));
    REQUIRE(detected);
    CHECK(*detected == plain);
  }
}

TEST_CASE("a damaged layer is named by its digest, not by the decoder's complaint", "[layer_stream]") {
  const std::string plain = sample(3U << 20);
  for (Codec codec : {Codec::gzip, Codec::zstd}) {
    const std::string blob = compressed(codec, plain);
    std::string damaged = blob;
    damaged[damaged.size() / 2] = static_cast<char>(damaged[damaged.size() / 2] ^ 0x55);
    auto r =
        read_all(damaged, codec == Codec::gzip ? LayerCodec::gzip : LayerCodec::zstd, check_of(blob, plain));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK_THAT(r.error().message, Catch::Contains("layer: digest mismatch: the blob hashes to sha256:"));
  }
}

TEST_CASE("size, digest and diff_id are each checked at the end", "[layer_stream]") {
  const std::string plain = sample(1U << 20);
  const std::string blob = compressed(Codec::gzip, plain);
  LayerCheck wrong_size = check_of(blob, plain);
  wrong_size.size = blob.size() + 1;
  auto r = read_all(blob, LayerCodec::gzip, wrong_size);
  REQUIRE_FALSE(r);
  CHECK(r.error().message ==
        fmt::format("layer: the blob has {} bytes, its descriptor says {}", blob.size(), blob.size() + 1));
  LayerCheck shorter = check_of(blob, plain);
  shorter.size = blob.size() - 1;
  r = read_all(blob, LayerCodec::gzip, shorter);
  REQUIRE_FALSE(r);
  CHECK(r.error().message ==
        fmt::format("layer: the blob has {} bytes, its descriptor says {}", blob.size(), blob.size() - 1));
  LayerCheck wrong_diff = check_of(blob, plain);
  wrong_diff.diff_id = sha256_of("something else");
  r = read_all(blob, LayerCodec::gzip, wrong_diff);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message,
             Catch::Contains("the uncompressed layer hashes to " + sha256_of(plain).str()));
}

TEST_CASE("truncated or mislabelled layers are refused", "[layer_stream]") {
  const std::string plain = sample(2U << 20);
  const std::string gz = one_member_gzip(plain);
  auto r = read_all(gz.substr(0, gz.size() / 2), LayerCodec::gzip);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("ends in the middle of a member"));
  const std::string zst = compressed(Codec::zstd, plain);
  r = read_all(zst.substr(0, zst.size() - 10), LayerCodec::zstd);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("zstd data ends in the middle of a frame"));
  r = read_all(plain, LayerCodec::gzip);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "layer: not gzip data (the blob does not start with a gzip header)");
  r = read_all(gz, LayerCodec::zstd);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "layer: not zstd data (the blob does not start with a zstd header)");
}

TEST_CASE("bytes after the last gzip member end the stream but count for the digest", "[layer_stream]") {
  const std::string plain = sample(100000);
  const std::string blob = compressed(Codec::gzip, plain) + std::string(1024, '\0');
  auto r = read_all(blob, LayerCodec::gzip, check_of(blob, plain));
  REQUIRE(r);
  CHECK(*r == plain);
}

TEST_CASE("empty input round-trips through lockstep's compression", "[layer_stream]") {
  for (Codec codec : {Codec::gzip, Codec::zstd}) {
    const std::string blob = compressed(codec, "");
    auto r = read_all(blob, codec == Codec::gzip ? LayerCodec::gzip : LayerCodec::zstd, check_of(blob, ""));
    REQUIRE(r);
    CHECK(r->empty());
  }
}
