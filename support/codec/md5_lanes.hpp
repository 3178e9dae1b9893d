#pragma once
// MD5 of many messages at once. One MD5 is a chain of dependent steps, so a single message runs at
// about 0.7 GB/s on a core whatever the CPU; sixteen independent messages in the lanes of SIMD
// registers (AVX-512: one 512-bit register per state word; AVX2: two 256-bit ones) run three to
// six times faster in total. verify hashes an image's small files this way for dpkg's md5sums.
// The digests are plain MD5 (RFC 1321): the lanes change only how many are computed at once.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace lockstep {

using Md5Digest = std::array<std::uint8_t, 16>;

class Md5Lanes {
public:
  enum class Kind { scalar, avx2, avx512 };
  /// The fastest kind this CPU runs.
  static Kind best();
  /// Whether this CPU (and build) can run `kind`.
  static bool supported(Kind kind);
  static std::string_view name(Kind kind);

  explicit Md5Lanes(Kind kind = best());

  /// Queues a message; its bytes must stay valid until run(). Returns its index for digest().
  std::size_t add(const void* data, std::size_t size);
  /// Hashes every queued message not hashed yet.
  void run();
  /// Message `i`'s digest, once run() has hashed it.
  [[nodiscard]] const Md5Digest& digest(std::size_t i) const { return m_digests[i]; }
  [[nodiscard]] std::size_t size() const { return m_messages.size(); }
  /// Forgets every message and digest.
  void clear();

private:
  struct Message {
    const std::uint8_t* data = nullptr;
    std::size_t size = 0;
  };
  Kind m_kind;
  std::vector<Message> m_messages;
  std::vector<Md5Digest> m_digests;
  std::size_t m_done = 0; ///< messages hashed so far
};

} // namespace lockstep
