#include "support/codec/compress.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/layer_stream.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <zlib.h>

#include <array>
#include <random>
#include <string>
#include <vector>

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

Result<std::string> read_all(const std::string& blob, LayerCodec codec, LayerCheck check = {},
                             unsigned decoders = LayerStream::auto_decoders) {
  LS_TRY_ASSIGN(LayerStream s,
                LayerStream::open(memory_blob_reader(blob), codec, "layer", std::move(check), decoders));
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
  return LayerCheck{sha256_of(blob), blob.size(), sha256_of(plain), std::nullopt};
}

// Gzip members in sequence, each compressed from one piece at `level` (0 stores it).
std::string gzip_members(const std::vector<std::string>& pieces, int level = 6) {
  std::string out;
  for (const std::string& piece : pieces) {
    z_stream z{};
    REQUIRE(deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    std::string member(deflateBound(&z, piece.size()), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.data())); // NOLINT
    z.avail_in = static_cast<uInt>(piece.size());
    z.next_out = reinterpret_cast<Bytef*>(member.data()); // NOLINT
    z.avail_out = static_cast<uInt>(member.size());
    REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
    member.resize(z.total_out);
    deflateEnd(&z);
    out += member;
  }
  return out;
}

// One gzip member for the whole input, as `gzip`, pigz and Go write.
std::string one_member_gzip(const std::string& input) {
  return gzip_members({input});
}

// The decoder counts every test compares: in order on the caller's thread, and ahead on 1-4.
constexpr std::array<unsigned, 4> k_decoders{0, 1, 2, 4};

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

TEST_CASE("members decoded ahead give exactly the bytes decoded in order", "[layer_stream]") {
  const std::string plain = sample(9U << 20);
  // Pieces of 1 MiB of noise stored as they are (level 0): each member holds the gzip headers of
  // the small .gz files inside the noise, candidates the chain must drop.
  std::string noisy;
  std::mt19937 rng(3);
  while (noisy.size() < (6U << 20)) {
    noisy += one_member_gzip(sample(3000 + rng() % 5000));
    for (int i = 0; i < 20000; ++i) {
      noisy += static_cast<char>(rng() & 0xff);
    }
  }
  std::vector<std::string> noisy_pieces;
  for (std::size_t at = 0; at < noisy.size(); at += 1U << 20) {
    noisy_pieces.push_back(noisy.substr(at, 1U << 20));
  }
  // One member of 6 MiB that inflates past what a decoder holds, between ordinary ones.
  const std::vector<std::string> big_pieces{sample(300000), std::string(6U << 20, 'z'), sample(500000),
                                            sample(70000)};
  std::string big_plain;
  for (const auto& p : big_pieces) {
    big_plain += p;
  }
  const std::string members = compressed(Codec::gzip, plain);
  const std::string single = one_member_gzip(plain); // one member: the reader finds no chain
  const std::string stored = gzip_members(noisy_pieces, 0);
  const std::string big = gzip_members(big_pieces);
  const std::string trailing = members + std::string(100, '\0') + "\x1f\x8b\x08\x00 not a member";
  for (auto [name, blob, want] :
       {std::tuple{"lockstep's members", members, plain}, std::tuple{"one member", single, plain},
        std::tuple{"stored members with gzip files inside", stored, noisy},
        std::tuple{"a member too big to hold", big, big_plain},
        std::tuple{"bytes after the last member", trailing, plain}}) {
    for (unsigned decoders : k_decoders) {
      INFO(name << ", " << decoders << " decoders");
      auto got = read_all(blob, LayerCodec::gzip,
                          LayerCheck{sha256_of(blob), blob.size(), sha256_of(want), std::nullopt}, decoders);
      REQUIRE(got);
      CHECK(got->size() == want.size());
      CHECK(*got == want);
    }
  }
}

TEST_CASE("a fault found ahead is reported as the sequential decoder reports it", "[layer_stream]") {
  const std::string plain = sample(6U << 20);
  const std::string blob = compressed(Codec::gzip, plain);
  std::string damaged = blob;
  const std::size_t at = blob.size() / 2 + 1000; // inside a member's deflate data, not its header
  damaged[at] = static_cast<char>(damaged[at] ^ 0x55);
  const std::string truncated = blob.substr(0, blob.size() * 2 / 3);
  std::vector<std::string> messages;
  for (const std::string& bad : {damaged, truncated}) {
    for (unsigned decoders : k_decoders) {
      INFO(decoders << " decoders");
      auto r = read_all(bad, LayerCodec::gzip, {}, decoders);
      REQUIRE_FALSE(r);
      CHECK(r.error().code == ExitCode::invalid_input);
      messages.push_back(r.error().message);
      auto checked = read_all(bad, LayerCodec::gzip, check_of(blob, plain), decoders);
      REQUIRE_FALSE(checked);
      CHECK_THAT(checked.error().message,
                 Catch::Contains("layer: digest mismatch") || Catch::Contains("the blob has"));
    }
  }
  for (std::size_t i = 1; i < messages.size(); ++i) {
    CHECK(messages[i] == messages[i < k_decoders.size() ? 0 : k_decoders.size()]);
  }
}

TEST_CASE("lockstep's layers are decoded ahead; one big member is decoded in order", "[layer_stream]") {
  const std::string plain = sample(5U << 20);
  auto ahead = [](const std::string& blob, unsigned decoders) -> std::uint64_t {
    auto s = LayerStream::open(memory_blob_reader(blob), LayerCodec::gzip, "layer", {}, decoders);
    REQUIRE(s);
    REQUIRE(s->finish());
    return s->members_decoded_ahead();
  };
  const std::string members = compressed(Codec::gzip, plain);
  CHECK(ahead(members, 2) == 5); // a member per MiB
  CHECK(ahead(members, 0) == 0);
  CHECK(ahead(one_member_gzip(plain), 2) == 0);
}

TEST_CASE("A layer that expands past its bound is refused while it streams, as gzip and as zstd",
          "[layer_stream]") {
  const std::string plain(3U << 20, '\0'); // 3 MiB of zeros: a few KiB compressed
  for (Codec codec : {Codec::gzip, Codec::zstd}) {
    const std::string blob = compressed(codec, plain);
    LayerCheck bounded = check_of(blob, plain);
    bounded.max_out = 1U << 20;
    auto refused = read_all(blob, LayerCodec::detect, bounded);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ExitCode::invalid_input);
    CHECK_THAT(refused.error().message, Catch::Contains("larger than the limit of 1048576 bytes"));
    bounded.max_out = plain.size(); // exactly at the bound is fine
    auto read = read_all(blob, LayerCodec::detect, bounded);
    REQUIRE(read);
    CHECK(*read == plain);
  }
  CHECK(max_layer_expansion(0) == 1ULL << 30);
  CHECK(max_layer_expansion(100ULL << 20) == 10000ULL << 20);
}
