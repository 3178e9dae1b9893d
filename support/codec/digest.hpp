#pragma once
// SHA-256 hashing and validated content digests ("sha256:<64 lowercase hex>").
#include "support/base/result.hpp"

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace lockstep {

/// A validated content digest. Only sha256 is produced; sha512 is accepted when reading images.
/// Validating before use matters: digests become file names (containers/image CVE-2024-3727).
class Digest {
public:
  Digest() = default;

  /// Parses "ALG:HEX" strictly: sha256 needs exactly 64 lowercase hex digits, sha512 128.
  static Result<Digest> parse(std::string_view text);
  /// Builds a sha256 digest from 32 raw bytes.
  static Digest from_sha256_bytes(const std::array<std::uint8_t, 32>& bytes);

  [[nodiscard]] const std::string& algorithm() const { return m_algorithm; }
  [[nodiscard]] const std::string& hex() const { return m_hex; }
  /// "sha256:<hex>".
  [[nodiscard]] std::string str() const { return m_algorithm + ":" + m_hex; }
  [[nodiscard]] bool empty() const { return m_hex.empty(); }

  friend bool operator==(const Digest&, const Digest&) = default;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 takes the defaulted <=>'s `== 0` for a pointer
  friend auto operator<=>(const Digest&, const Digest&) = default;

private:
  std::string m_algorithm;
  std::string m_hex;
};

/// Streaming SHA-256 (OpenSSL; uses the CPU's SHA extensions where present).
class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;

  void update(const void* data, std::size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  /// Finishes the hash; the object must not be updated afterwards.
  Digest finish();

private:
  void* m_ctx = nullptr; // SHA256_CTX
};

/// SHA-256 of a byte string.
Digest sha256_of(std::string_view data);
/// SHA-256 of a file's contents.
Result<Digest> sha256_of_file(const std::filesystem::path& path);

} // namespace lockstep
