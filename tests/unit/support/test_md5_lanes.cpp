// MD5 of many messages at once (support/md5_lanes): every kind this CPU runs gives OpenSSL's digests,
// whatever the mix of lengths, the padding boundaries and the order of batches.
#include "support/codec/md5_lanes.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <openssl/evp.h>

#include <random>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

Md5Digest reference(const std::string& s) {
  Md5Digest d{};
  EVP_Digest(s.data(), s.size(), d.data(), nullptr, EVP_md5(), nullptr);
  return d;
}

std::vector<Md5Lanes::Kind> kinds() {
  std::vector<Md5Lanes::Kind> out;
  for (auto k : {Md5Lanes::Kind::scalar, Md5Lanes::Kind::avx2, Md5Lanes::Kind::avx512}) {
    if (Md5Lanes::supported(k)) {
      out.push_back(k);
    }
  }
  return out;
}

std::string noise(std::mt19937& rng, std::size_t size) {
  std::string s(size, '\0');
  for (char& c : s) {
    c = static_cast<char>(rng() & 0xff);
  }
  return s;
}

} // namespace

TEST_CASE("Md5Lanes gives RFC 1321's digests", "[md5_lanes]") {
  for (auto kind : kinds()) {
    INFO(Md5Lanes::name(kind));
    Md5Lanes lanes(kind);
    const std::string empty;
    const std::string abc = "abc";
    const std::string alphabet = "abcdefghijklmnopqrstuvwxyz";
    lanes.add(empty.data(), empty.size());
    lanes.add(abc.data(), abc.size());
    lanes.add(alphabet.data(), alphabet.size());
    lanes.run();
    auto hex = [](const Md5Digest& d) {
      std::string s;
      for (auto b : d) {
        s += fmt::format("{:02x}", b);
      }
      return s;
    };
    CHECK(hex(lanes.digest(0)) == "d41d8cd98f00b204e9800998ecf8427e");
    CHECK(hex(lanes.digest(1)) == "900150983cd24fb0d6963f7d28e17f72");
    CHECK(hex(lanes.digest(2)) == "c3fcd3d76192e4007dfb496cca67e13b");
  }
}

TEST_CASE("Md5Lanes agrees with OpenSSL on every length around the padding and in any mix", "[md5_lanes]") {
  std::mt19937 rng(11);
  std::vector<std::string> messages;
  for (std::size_t n = 0; n <= 200; ++n) { // one and two padding blocks, block boundaries
    messages.push_back(noise(rng, n));
  }
  for (int i = 0; i < 40; ++i) { // long ones that keep a lane busy while others turn over
    messages.push_back(noise(rng, 1000 + rng() % 300000));
  }
  messages.push_back(noise(rng, 3U << 20));
  for (auto kind : kinds()) {
    INFO(Md5Lanes::name(kind));
    Md5Lanes lanes(kind);
    for (const auto& m : messages) {
      lanes.add(m.data(), m.size());
    }
    lanes.run();
    REQUIRE(lanes.size() == messages.size());
    for (std::size_t i = 0; i < messages.size(); ++i) {
      INFO("message " << i << " of " << messages[i].size() << " bytes");
      CHECK(lanes.digest(i) == reference(messages[i]));
    }
  }
}

TEST_CASE("Md5Lanes hashes in batches: run() takes what was added since the last run", "[md5_lanes]") {
  std::mt19937 rng(5);
  std::vector<std::string> messages;
  for (int i = 0; i < 50; ++i) {
    messages.push_back(noise(rng, rng() % 5000));
  }
  for (auto kind : kinds()) {
    INFO(Md5Lanes::name(kind));
    Md5Lanes lanes(kind);
    for (std::size_t i = 0; i < messages.size(); ++i) {
      lanes.add(messages[i].data(), messages[i].size());
      if (i % 7 == 3) {
        lanes.run();
      }
    }
    lanes.run();
    for (std::size_t i = 0; i < messages.size(); ++i) {
      CHECK(lanes.digest(i) == reference(messages[i]));
    }
    lanes.clear();
    CHECK(lanes.size() == 0);
    lanes.add(messages[0].data(), messages[0].size());
    lanes.run();
    CHECK(lanes.digest(0) == reference(messages[0]));
  }
}
