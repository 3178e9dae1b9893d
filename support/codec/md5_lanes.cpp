#include "support/codec/md5_lanes.hpp"

// MD5() is deprecated as an API since OpenSSL 3.0, kept and unchanged; EVP's md5 would link
// OpenSSL's providers into the binary (support/supplychain/openssl_lib.hpp says why not).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/md5.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define LOCKSTEP_MD5_X86 1
#endif

namespace lockstep {

namespace {

constexpr std::size_t k_lanes = 16;
constexpr std::size_t k_block = 64;

// RFC 1321, 3.4: the sine table, the shifts, and which message word each step adds.
constexpr std::array<std::uint32_t, 64> k_sine = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
constexpr std::array<int, 64> k_shift = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                         5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                         4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                         6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};
constexpr std::array<std::uint32_t, 4> k_iv = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};

constexpr int word_of_step(int i) {
  return i < 16 ? i : i < 32 ? (5 * i + 1) & 15 : i < 48 ? (3 * i + 5) & 15 : (7 * i) & 15;
}

/// Sixteen lanes' state, word by word: w[j][lane].
struct alignas(64) LaneState {
  std::array<std::array<std::uint32_t, k_lanes>, 4> w{};
};

std::uint32_t load_le32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

std::uint32_t rotl(std::uint32_t x, int n) {
  return (x << n) | (x >> (32 - n));
}

// One block of one message, in plain C++: the lanes still busy when a batch runs dry finish here.
void compress_one(std::array<std::uint32_t, 4>& s, const std::uint8_t* block) {
  std::array<std::uint32_t, 16> m{};
  for (std::size_t i = 0; i < 16; ++i) {
    m[i] = load_le32(block + 4 * i);
  }
  std::uint32_t a = s[0];
  std::uint32_t b = s[1];
  std::uint32_t c = s[2];
  std::uint32_t d = s[3];
  for (int i = 0; i < 64; ++i) {
    std::uint32_t f = 0;
    if (i < 16) {
      f = d ^ (b & (c ^ d));
    } else if (i < 32) {
      f = c ^ (d & (b ^ c));
    } else if (i < 48) {
      f = b ^ c ^ d;
    } else {
      f = c ^ (b | ~d);
    }
    const auto idx = static_cast<std::size_t>(i);
    const std::uint32_t t = a + f + k_sine[idx] + m[static_cast<std::size_t>(word_of_step(i))];
    a = d;
    d = c;
    c = b;
    b = b + rotl(t, k_shift[idx]);
  }
  s[0] += a;
  s[1] += b;
  s[2] += c;
  s[3] += d;
}

using Compress16 = void (*)(LaneState& state, const std::uint8_t* const* blocks);

#ifdef LOCKSTEP_MD5_X86
// GCC 12 warns that its own AVX-512 unpack intrinsics read an uninitialised pass-through operand.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// NOLINTBEGIN(*-avoid-c-arrays,*-pro-bounds-constant-array-index): SIMD registers in plain arrays

// ----- AVX-512: one 512-bit register per state word --------------------------------------------

#define LS_AVX512 __attribute__((target("avx512f")))

// Rows (a lane's 16 message words each) to columns (one word of every lane each).
LS_AVX512 inline void transpose16(__m512i (&r)[16]) {
  __m512i t[16];
  __m512i u[16];
  for (std::size_t k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  for (std::size_t k = 0; k < 4; ++k) {
    u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  for (std::size_t k = 0; k < 2; ++k) {
    for (std::size_t j = 0; j < 4; ++j) {
      t[8 * k + j] = _mm512_shuffle_i32x4(u[8 * k + j], u[8 * k + 4 + j], 0x88);
      t[8 * k + 4 + j] = _mm512_shuffle_i32x4(u[8 * k + j], u[8 * k + 4 + j], 0xdd);
    }
  }
  for (std::size_t j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd);
  }
}

template <int N> LS_AVX512 inline __m512i rotl512(__m512i x) {
  return _mm512_rol_epi32(x, N);
}

template <int I> LS_AVX512 inline void step512(__m512i (&s)[4], const __m512i (&m)[16]) {
  // The registers rotate roles each step: a is s[(64 - I) % 4], b the next, and so on.
  __m512i& a = s[static_cast<std::size_t>((64 - I) & 3)];
  const __m512i b = s[static_cast<std::size_t>((65 - I) & 3)];
  const __m512i c = s[static_cast<std::size_t>((66 - I) & 3)];
  const __m512i d = s[static_cast<std::size_t>((67 - I) & 3)];
  __m512i f;
  if constexpr (I < 16) {
    f = _mm512_ternarylogic_epi32(b, c, d, 0xCA); // (b & c) | (~b & d)
  } else if constexpr (I < 32) {
    f = _mm512_ternarylogic_epi32(b, c, d, 0xE4); // (b & d) | (c & ~d)
  } else if constexpr (I < 48) {
    f = _mm512_ternarylogic_epi32(b, c, d, 0x96); // b ^ c ^ d
  } else {
    f = _mm512_ternarylogic_epi32(b, c, d, 0x39); // c ^ (b | ~d)
  }
  const __m512i k = _mm512_set1_epi32(static_cast<int>(k_sine[I]));
  const __m512i t = _mm512_add_epi32(_mm512_add_epi32(a, f), _mm512_add_epi32(k, m[word_of_step(I)]));
  a = _mm512_add_epi32(b, rotl512<k_shift[I]>(t));
}

template <int... I>
LS_AVX512 inline void steps512(__m512i (&s)[4], const __m512i (&m)[16],
                               std::integer_sequence<int, I...> /*steps*/) {
  (step512<I>(s, m), ...);
}

LS_AVX512 void compress_avx512(LaneState& state, const std::uint8_t* const* blocks) {
  __m512i m[16];
  for (std::size_t i = 0; i < k_lanes; ++i) {
    m[i] = _mm512_loadu_si512(blocks[i]);
  }
  transpose16(m);
  __m512i s[4];
  __m512i before[4];
  for (std::size_t j = 0; j < 4; ++j) {
    s[j] = _mm512_load_si512(state.w[j].data());
    before[j] = s[j];
  }
  steps512(s, m, std::make_integer_sequence<int, 64>{});
  for (std::size_t j = 0; j < 4; ++j) {
    _mm512_store_si512(state.w[j].data(), _mm512_add_epi32(s[j], before[j]));
  }
}

// ----- AVX2: two groups of eight lanes, interleaved --------------------------------------------

#define LS_AVX2 __attribute__((target("avx2")))

LS_AVX2 inline void transpose8(__m256i (&r)[8]) {
  const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]);
  const __m256i t1 = _mm256_unpackhi_epi32(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(r[2], r[3]);
  const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]);
  const __m256i t5 = _mm256_unpackhi_epi32(r[4], r[5]);
  const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]);
  const __m256i t7 = _mm256_unpackhi_epi32(r[6], r[7]);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2);
  const __m256i u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3);
  const __m256i u3 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi64(t4, t6);
  const __m256i u5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi64(t5, t7);
  const __m256i u7 = _mm256_unpackhi_epi64(t5, t7);
  r[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
  r[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
  r[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
  r[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
  r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
  r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
  r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
  r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

template <int N> LS_AVX2 inline __m256i rotl256(__m256i x) {
  return _mm256_or_si256(_mm256_slli_epi32(x, N), _mm256_srli_epi32(x, 32 - N));
}

using Group256 = __m256i[4];
using Words256 = __m256i[16];

template <int I> LS_AVX2 inline void step256(Group256& s, const Words256& m) {
  __m256i& a = s[static_cast<std::size_t>((64 - I) & 3)];
  const __m256i b = s[static_cast<std::size_t>((65 - I) & 3)];
  const __m256i c = s[static_cast<std::size_t>((66 - I) & 3)];
  const __m256i d = s[static_cast<std::size_t>((67 - I) & 3)];
  __m256i f;
  if constexpr (I < 16) {
    f = _mm256_xor_si256(d, _mm256_and_si256(b, _mm256_xor_si256(c, d)));
  } else if constexpr (I < 32) {
    f = _mm256_xor_si256(c, _mm256_and_si256(d, _mm256_xor_si256(b, c)));
  } else if constexpr (I < 48) {
    f = _mm256_xor_si256(b, _mm256_xor_si256(c, d));
  } else {
    f = _mm256_xor_si256(c, _mm256_or_si256(b, _mm256_xor_si256(d, _mm256_set1_epi32(-1))));
  }
  const __m256i k = _mm256_set1_epi32(static_cast<int>(k_sine[I]));
  const __m256i t = _mm256_add_epi32(_mm256_add_epi32(a, f), _mm256_add_epi32(k, m[word_of_step(I)]));
  a = _mm256_add_epi32(b, rotl256<k_shift[I]>(t));
}

template <int... I>
LS_AVX2 inline void steps256(Group256& s0, const Words256& m0, Group256& s1, const Words256& m1,
                             std::integer_sequence<int, I...> /*steps*/) {
  ((step256<I>(s0, m0), step256<I>(s1, m1)), ...);
}

LS_AVX2 void load_group(Words256& m, const std::uint8_t* const* blocks) {
  __m256i lo[8];
  __m256i hi[8];
  for (std::size_t i = 0; i < 8; ++i) {
    lo[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[i]));      // NOLINT
    hi[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[i] + 32)); // NOLINT
  }
  transpose8(lo);
  transpose8(hi);
  for (std::size_t i = 0; i < 8; ++i) {
    m[i] = lo[i];
    m[8 + i] = hi[i];
  }
}

LS_AVX2 void compress_avx2(LaneState& state, const std::uint8_t* const* blocks) {
  Words256 m0;
  Words256 m1;
  load_group(m0, blocks);
  load_group(m1, blocks + 8);
  Group256 s0;
  Group256 s1;
  Group256 b0;
  Group256 b1;
  for (std::size_t j = 0; j < 4; ++j) {
    s0[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(state.w[j].data()));     // NOLINT
    s1[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(state.w[j].data() + 8)); // NOLINT
    b0[j] = s0[j];
    b1[j] = s1[j];
  }
  steps256(s0, m0, s1, m1, std::make_integer_sequence<int, 64>{});
  for (std::size_t j = 0; j < 4; ++j) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(state.w[j].data()),
                       _mm256_add_epi32(s0[j], b0[j])); // NOLINT
    _mm256_store_si256(reinterpret_cast<__m256i*>(state.w[j].data() + 8),
                       _mm256_add_epi32(s1[j], b1[j])); // NOLINT
  }
}

// NOLINTEND(*-avoid-c-arrays,*-pro-bounds-constant-array-index)
#pragma GCC diagnostic pop
#endif // LOCKSTEP_MD5_X86

Compress16 kernel(Md5Lanes::Kind kind) {
#ifdef LOCKSTEP_MD5_X86
  switch (kind) {
  case Md5Lanes::Kind::avx512:
    return compress_avx512;
  case Md5Lanes::Kind::avx2:
    return compress_avx2;
  case Md5Lanes::Kind::scalar:
    break;
  }
#else
  (void)kind;
#endif
  return nullptr;
}

// One lane's message: its whole blocks where they lie, then the padded tail (RFC 1321, 3.1-3.2).
struct Lane {
  std::size_t message = SIZE_MAX; ///< SIZE_MAX: idle
  const std::uint8_t* data = nullptr;
  std::size_t whole = 0;  ///< whole blocks of the message
  std::size_t blocks = 0; ///< with the tail's one or two
  std::size_t next = 0;
  alignas(64) std::array<std::uint8_t, 2 * k_block> tail{};

  void start(std::size_t index, const std::uint8_t* bytes, std::size_t size) {
    message = index;
    data = bytes;
    whole = size / k_block;
    next = 0;
    const std::size_t rest = size % k_block;
    tail.fill(0);
    if (rest > 0) {
      std::memcpy(tail.data(), bytes + whole * k_block, rest);
    }
    tail[rest] = 0x80;
    const std::size_t tail_blocks = rest < k_block - 8 ? 1 : 2;
    const std::uint64_t bits = static_cast<std::uint64_t>(size) * 8;
    for (std::size_t i = 0; i < 8; ++i) {
      tail[tail_blocks * k_block - 8 + i] = static_cast<std::uint8_t>(bits >> (8 * i));
    }
    blocks = whole + tail_blocks;
  }

  [[nodiscard]] const std::uint8_t* block() const {
    return next < whole ? data + next * k_block : tail.data() + (next - whole) * k_block;
  }
};

} // namespace

Md5Lanes::Kind Md5Lanes::best() {
  for (Kind k : {Kind::avx512, Kind::avx2}) {
    if (supported(k)) {
      return k;
    }
  }
  return Kind::scalar;
}

bool Md5Lanes::supported(Kind kind) {
  switch (kind) {
  case Kind::scalar:
    return true;
#ifdef LOCKSTEP_MD5_X86
  case Kind::avx2:
    return __builtin_cpu_supports("avx2") != 0;
  case Kind::avx512:
    return __builtin_cpu_supports("avx512f") != 0;
#else
  case Kind::avx2:
  case Kind::avx512:
    return false;
#endif
  }
  return false;
}

std::string_view Md5Lanes::name(Kind kind) {
  switch (kind) {
  case Kind::avx512:
    return "avx512";
  case Kind::avx2:
    return "avx2";
  case Kind::scalar:
    break;
  }
  return "scalar";
}

Md5Lanes::Md5Lanes(Kind kind) : m_kind(supported(kind) ? kind : Kind::scalar) {
}

std::size_t Md5Lanes::add(const void* data, std::size_t size) {
  m_messages.push_back(Message{static_cast<const std::uint8_t*>(data), size});
  m_digests.emplace_back();
  return m_messages.size() - 1;
}

void Md5Lanes::clear() {
  m_messages.clear();
  m_digests.clear();
  m_done = 0;
}

void Md5Lanes::run() {
  const Compress16 compress = kernel(m_kind);
  if (compress == nullptr) {
    for (; m_done < m_messages.size(); ++m_done) {
      const Message& msg = m_messages[m_done];
      MD5(msg.data, msg.size, m_digests[m_done].data());
    }
    return;
  }
  // Longest first, so that the lanes run dry together; a lane that ends takes the next message.
  std::vector<std::size_t> order(m_messages.size() - m_done);
  std::iota(order.begin(), order.end(), m_done);
  std::stable_sort(order.begin(), order.end(),
                   [this](std::size_t a, std::size_t b) { return m_messages[a].size > m_messages[b].size; });
  // Below this many busy lanes, one core hashing them one after the other is faster.
  const std::size_t alone = m_kind == Kind::avx512 ? 2 : 6;
  static const std::array<std::uint8_t, k_block> idle_block{};

  std::array<Lane, k_lanes> lanes;
  LaneState state;
  std::size_t queued = 0;
  auto take = [&](std::size_t l) {
    if (queued == order.size()) {
      lanes[l].message = SIZE_MAX;
      return;
    }
    const std::size_t i = order[queued++];
    lanes[l].start(i, m_messages[i].data, m_messages[i].size);
    for (std::size_t j = 0; j < 4; ++j) {
      state.w[j][l] = k_iv[j];
    }
  };
  auto finish = [&](std::size_t l, const std::array<std::uint32_t, 4>& s) {
    Md5Digest& out = m_digests[lanes[l].message];
    for (std::size_t j = 0; j < 4; ++j) {
      for (std::size_t b = 0; b < 4; ++b) {
        out[4 * j + b] = static_cast<std::uint8_t>(s[j] >> (8 * b));
      }
    }
  };
  for (std::size_t l = 0; l < k_lanes; ++l) {
    take(l);
  }
  std::array<const std::uint8_t*, k_lanes> blocks{};
  for (;;) {
    std::size_t busy = 0;
    for (std::size_t l = 0; l < k_lanes; ++l) {
      const bool on = lanes[l].message != SIZE_MAX;
      busy += on ? 1 : 0;
      blocks[l] = on ? lanes[l].block() : idle_block.data();
    }
    if (busy == 0) {
      break;
    }
    if (busy <= alone && queued == order.size()) {
      for (std::size_t l = 0; l < k_lanes; ++l) {
        Lane& lane = lanes[l];
        if (lane.message == SIZE_MAX) {
          continue;
        }
        std::array<std::uint32_t, 4> s{state.w[0][l], state.w[1][l], state.w[2][l], state.w[3][l]};
        for (; lane.next < lane.blocks; ++lane.next) {
          compress_one(s, lane.block());
        }
        finish(l, s);
      }
      break;
    }
    compress(state, blocks.data());
    for (std::size_t l = 0; l < k_lanes; ++l) {
      Lane& lane = lanes[l];
      if (lane.message != SIZE_MAX && ++lane.next == lane.blocks) {
        finish(l, {state.w[0][l], state.w[1][l], state.w[2][l], state.w[3][l]});
        take(l);
      }
    }
  }
  m_done = m_messages.size();
}

} // namespace lockstep
