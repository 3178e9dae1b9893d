#pragma once
// Keys and signed payloads as sigstore's cosign writes them, and as containers/image (skopeo,
// podman) reads and writes them for `sigstoreSigned` policies (docs/signing.md):
//
// - Keys: ECDSA P-256. A public key is a PEM "PUBLIC KEY" (PKIX). A private key is cosign's
//   encrypted file, a PEM "ENCRYPTED SIGSTORE PRIVATE KEY" (or cosign 1's "ENCRYPTED COSIGN
//   PRIVATE KEY") whose body is JSON: {"kdf": {"name": "scrypt", "params": {"N", "r", "p"},
//   "salt"}, "cipher": {"name": "nacl/secretbox", "nonce"}, "ciphertext"} (byte strings base64),
//   the ciphertext being the PKCS #8 DER of the key sealed with NaCl's secretbox under the scrypt
//   key of a passphrase; or a plain PEM "PRIVATE KEY" (PKCS #8) or "EC PRIVATE KEY" (SEC 1).
// - Signatures: ECDSA over SHA-256 of the payload bytes, ASN.1 DER, base64 where stored.
// - The payload of an image signature: "simple signing" JSON naming the image's manifest digest
//   and reference, {"critical": {"identity": {"docker-reference"}, "image":
//   {"docker-manifest-digest"}, "type": "cosign container image signature"}, "optional": {...}}.
//
// OpenSSL does the elliptic-curve work and scrypt; libsodium the secretbox.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

/// An ECDSA P-256 key pair (or only its public half).
class SigningKey {
public:
  /// Reads a private key file in one of the forms above; `passphrase` is asked only for an
  /// encrypted one. A file that is no such key, or a wrong passphrase, is invalid_input naming
  /// `path`.
  static Result<SigningKey> load_private(const std::filesystem::path& path,
                                         const std::function<Result<std::string>()>& passphrase);
  /// Reads a PEM "PUBLIC KEY" file (an ECDSA P-256 key); anything else is invalid_input.
  static Result<SigningKey> load_public(const std::filesystem::path& path);
  /// Parses a PEM public key from text.
  static Result<SigningKey> parse_public(std::string_view pem, std::string_view what);
  /// A fresh P-256 key pair.
  static Result<SigningKey> generate();

  /// The DER ECDSA signature of SHA-256(`data`). Needs the private half.
  [[nodiscard]] Result<std::string> sign(std::string_view data) const;
  /// Whether `der_signature` is this key's signature of SHA-256(`data`).
  [[nodiscard]] bool verify(std::string_view data, std::string_view der_signature) const;

  /// The public key as a PEM "PUBLIC KEY".
  [[nodiscard]] std::string public_pem() const;
  /// sha256 of the public key's DER: names the key in messages.
  [[nodiscard]] Digest key_id() const;
  /// The private key as cosign's encrypted PEM ("ENCRYPTED SIGSTORE PRIVATE KEY"), scrypt N=32768
  /// r=8 p=1 as cosign writes it.
  [[nodiscard]] Result<std::string> encrypted_private_pem(std::string_view passphrase) const;

  SigningKey(SigningKey&&) noexcept;
  SigningKey& operator=(SigningKey&&) noexcept;
  ~SigningKey();

private:
  struct Impl;
  explicit SigningKey(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

/// The simple-signing payload of `digest` as `reference` ("HOST/REPO:TAG" or "HOST/REPO"), with
/// `creator` under optional. Compact JSON with sorted keys (deterministic).
std::string simple_signing_payload(std::string_view reference, const Digest& digest,
                                   std::string_view creator);

/// What a simple-signing payload says. Anything that is not such a payload (other fields under
/// critical, another type, a malformed digest) is invalid_input naming `what`.
struct SimpleSigning {
  std::string reference;
  Digest digest;
};
Result<SimpleSigning> parse_simple_signing(std::string_view payload, std::string_view what);

/// DSSE's pre-authentication encoding of a payload: "DSSEv1 <len(type)> <type> <len(body)> <body>"
/// (lengths in decimal bytes): what a DSSE signature signs.
std::string dsse_pae(std::string_view payload_type, std::string_view payload);

/// The media type of a DSSE envelope stored as an OCI artifact (a signed provenance attached to an
/// image).
inline constexpr std::string_view k_media_dsse = "application/vnd.dsse.envelope.v1+json";

/// A DSSE envelope (compact JSON): {"payload": base64, "payloadType", "signatures": [{"keyid": "",
/// "sig": base64 DER}]}, signed by `key`.
Result<std::string> dsse_sign(const SigningKey& key, std::string_view payload_type, std::string_view payload);

/// A DSSE envelope read back: its payload type, payload, and each signature (DER).
struct DsseEnvelope {
  std::string payload_type;
  std::string payload;
  std::vector<std::string> signatures;
};
/// Parses an envelope; a malformed one (fields missing, bad base64) is invalid_input naming `what`.
Result<DsseEnvelope> parse_dsse(std::string_view text, std::string_view what);

} // namespace lockstep
