#include "support/codec/digest.hpp"

#include "support/base/text.hpp"
#include "support/system/fs.hpp"

// The low-level SHA-256 interface runs the same assembly as EVP's but needs no provider lookup:
// EVP's first use loads openssl.cnf and builds provider tables (~0.8 ms of every `lockstep exec`).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <vector>

namespace lockstep {

namespace {} // namespace

Result<Digest> Digest::parse(std::string_view text) {
  auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    return invalid_input("invalid digest '{}': expected 'sha256:<64 hex digits>'", text);
  }
  std::string_view alg = text.substr(0, colon);
  std::string_view hex = text.substr(colon + 1);
  std::size_t want = 0;
  if (alg == "sha256") {
    want = 64;
  } else if (alg == "sha512") {
    want = 128;
  } else {
    return invalid_input("invalid digest '{}': unsupported algorithm '{}' (sha256 and sha512 are supported)",
                         text, alg);
  }
  if (hex.size() != want || !is_lower_hex(hex)) {
    return invalid_input("invalid digest '{}': {} needs exactly {} lowercase hex digits", text, alg, want);
  }
  Digest d;
  d.m_algorithm = std::string(alg);
  d.m_hex = std::string(hex);
  return d;
}

Digest Digest::from_sha256_bytes(const std::array<std::uint8_t, 32>& bytes) {
  static constexpr char k_hex[] = "0123456789abcdef";
  Digest d;
  d.m_algorithm = "sha256";
  d.m_hex.resize(64);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    d.m_hex[2 * i] = k_hex[bytes[i] >> 4];
    d.m_hex[2 * i + 1] = k_hex[bytes[i] & 0xf];
  }
  return d;
}

Sha256::Sha256() : m_ctx(new SHA256_CTX) {
  SHA256_Init(static_cast<SHA256_CTX*>(m_ctx));
}

Sha256::~Sha256() {
  delete static_cast<SHA256_CTX*>(m_ctx);
}

Sha256::Sha256(Sha256&& other) noexcept : m_ctx(other.m_ctx) {
  other.m_ctx = nullptr;
}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    delete static_cast<SHA256_CTX*>(m_ctx);
    m_ctx = other.m_ctx;
    other.m_ctx = nullptr;
  }
  return *this;
}

void Sha256::update(const void* data, std::size_t size) {
  SHA256_Update(static_cast<SHA256_CTX*>(m_ctx), data, size);
}

Digest Sha256::finish() {
  std::array<std::uint8_t, 32> out{};
  SHA256_Final(out.data(), static_cast<SHA256_CTX*>(m_ctx));
  return Digest::from_sha256_bytes(out);
}

Digest sha256_of(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.finish();
}

Result<Digest> sha256_of_file(const std::filesystem::path& path) {
  LS_TRY_ASSIGN(UniqueFd fd, open_input_file(path));
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (;;) {
    LS_TRY_ASSIGN(std::size_t n, read_some(fd.get(), buf.data(), buf.size(), path.string()));
    if (n == 0) {
      return h.finish();
    }
    h.update(buf.data(), n);
  }
}

} // namespace lockstep
