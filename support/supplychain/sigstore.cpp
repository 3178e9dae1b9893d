// cosign-format keys, ECDSA signatures and simple-signing payloads: see sigstore.hpp.
#include "support/supplychain/sigstore.hpp"

#include "support/base/json.hpp"
#include "support/codec/base64.hpp"
#include "support/supplychain/openssl_lib.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <openssl/core_names.h>

#include <sodium.h>

#include <array>
#include <vector>

namespace lockstep {

namespace {

// OpenSSL, loaded (openssl_lib.hpp): every key this file holds was made through it, so where a key
// exists the library is loaded; the entry points that make keys ask openssl::libcrypto() first.
const openssl::LibCrypto& crypto() {
  return **openssl::libcrypto();
}

constexpr std::string_view k_sigstore_pem = "ENCRYPTED SIGSTORE PRIVATE KEY";
constexpr std::string_view k_cosign_pem = "ENCRYPTED COSIGN PRIVATE KEY";
constexpr std::string_view k_payload_type = "cosign container image signature";
// Key files are small; scrypt parameters are bounded so that a hostile file can't ask for
// gigabytes of memory or hours of work.
constexpr std::uint64_t k_max_key_file = 64 << 10;
constexpr std::uint64_t k_max_scrypt_n = 1 << 20;
constexpr std::uint64_t k_max_scrypt_r = 32;
constexpr std::uint64_t k_max_scrypt_p = 16;
constexpr std::uint64_t k_scrypt_n = 32768; // what cosign writes
constexpr std::uint64_t k_scrypt_r = 8;
constexpr std::uint64_t k_scrypt_p = 1;

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { crypto().EVP_PKEY_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
struct BioFree {
  void operator()(BIO* b) const { crypto().BIO_free(b); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { crypto().EVP_MD_CTX_free(c); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

// An ECDSA key on P-256, or an error naming `what`.
Result<Pkey> require_p256(Pkey key, std::string_view what) {
  if (!key) {
    return invalid_input("{}: not a key OpenSSL can read", what);
  }
  std::array<char, 64> group{};
  std::size_t len = 0;
  if (crypto().EVP_PKEY_is_a(key.get(), "EC") == 0 ||
      crypto().EVP_PKEY_get_utf8_string_param(key.get(), OSSL_PKEY_PARAM_GROUP_NAME, group.data(),
                                              group.size(), &len) != 1 ||
      std::string_view(group.data(), len) != "prime256v1") {
    return invalid_input(
        "{}: not an ECDSA P-256 key (lockstep signs and verifies with P-256, as cosign does)", what);
  }
  return key;
}

// The base64 body of the PEM block of `type` in `text`, decoded; nullopt when there is none.
Result<std::optional<std::string>> pem_body(std::string_view text, std::string_view type,
                                            std::string_view what) {
  const std::string begin = fmt::format("-----BEGIN {}-----", type);
  const std::string end = fmt::format("-----END {}-----", type);
  const std::size_t b = text.find(begin);
  if (b == std::string_view::npos) {
    return std::optional<std::string>();
  }
  const std::size_t e = text.find(end, b + begin.size());
  if (e == std::string_view::npos) {
    return invalid_input("{}: the {} block has no END line", what, type);
  }
  std::string b64;
  for (char c : text.substr(b + begin.size(), e - b - begin.size())) {
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') {
      b64 += c;
    }
  }
  LS_TRY_ASSIGN(std::string body, base64_decode(b64, what));
  return std::optional<std::string>(std::move(body));
}

std::string pem_block(std::string_view type, std::string_view bytes) {
  const std::string b64 = base64_encode(bytes);
  std::string out = fmt::format("-----BEGIN {}-----\n", type);
  for (std::size_t i = 0; i < b64.size(); i += 64) {
    out += b64.substr(i, 64) + "\n";
  }
  return out + fmt::format("-----END {}-----\n", type);
}

Result<std::array<unsigned char, crypto_secretbox_KEYBYTES>>
scrypt_key(std::string_view passphrase, std::string_view salt, std::uint64_t n, std::uint64_t r,
           std::uint64_t p, std::string_view what) {
  std::array<unsigned char, crypto_secretbox_KEYBYTES> key{};
  const std::uint64_t maxmem = 128 * r * n + (64ULL << 20);
  if (crypto().EVP_PBE_scrypt(passphrase.data(), passphrase.size(),
                              reinterpret_cast<const unsigned char*>(salt.data()), salt.size(), n, r, p,
                              maxmem, key.data(), key.size()) != 1) {
    return invalid_input("{}: scrypt failed (N={}, r={}, p={})", what, n, r, p);
  }
  return key;
}

Result<std::string> json_bytes(const nlohmann::json& j, const char* key, std::string_view what) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) {
    return invalid_input("{}: the encrypted key has no \"{}\"", what, key);
  }
  return base64_decode(j[key].get<std::string>(), what);
}

// cosign's encrypted key: the PKCS #8 DER inside.
Result<std::string> decrypt_cosign(std::string_view body, std::string_view passphrase,
                                   std::string_view what) {
  LS_TRY_ASSIGN(nlohmann::json j, parse_json(body, std::string(what)));
  const nlohmann::json& kdf = j.is_object() && j.contains("kdf") ? j["kdf"] : nlohmann::json();
  const nlohmann::json& cipher = j.is_object() && j.contains("cipher") ? j["cipher"] : nlohmann::json();
  const auto name_of = [](const nlohmann::json& o) {
    return o.is_object() && o.contains("name") && o["name"].is_string() ? o["name"].get<std::string>()
                                                                        : std::string();
  };
  if (!kdf.is_object() || name_of(kdf) != "scrypt" || !kdf.contains("params") || !kdf["params"].is_object()) {
    return invalid_input("{}: the encrypted key's kdf is not scrypt", what);
  }
  if (!cipher.is_object() || name_of(cipher) != "nacl/secretbox") {
    return invalid_input("{}: the encrypted key's cipher is not nacl/secretbox", what);
  }
  const nlohmann::json& params = kdf["params"];
  const auto number = [&](const char* key, std::uint64_t max) -> std::optional<std::uint64_t> {
    if (!params.contains(key) || !params[key].is_number_unsigned()) {
      return std::nullopt;
    }
    const auto v = params[key].get<std::uint64_t>();
    return v >= 1 && v <= max ? std::optional<std::uint64_t>(v) : std::nullopt;
  };
  const auto n = number("N", k_max_scrypt_n);
  const auto r = number("r", k_max_scrypt_r);
  const auto p = number("p", k_max_scrypt_p);
  if (!n || !r || !p) {
    return invalid_input("{}: scrypt parameters missing or beyond N={}, r={}, p={}", what, k_max_scrypt_n,
                         k_max_scrypt_r, k_max_scrypt_p);
  }
  LS_TRY_ASSIGN(std::string salt, json_bytes(kdf, "salt", what));
  LS_TRY_ASSIGN(std::string nonce, json_bytes(cipher, "nonce", what));
  LS_TRY_ASSIGN(std::string sealed, json_bytes(j, "ciphertext", what));
  if (nonce.size() != crypto_secretbox_NONCEBYTES || sealed.size() < crypto_secretbox_MACBYTES) {
    return invalid_input("{}: the encrypted key's nonce or ciphertext has the wrong size", what);
  }
  LS_TRY_ASSIGN(auto key, scrypt_key(passphrase, salt, *n, *r, *p, what));
  std::string der(sealed.size() - crypto_secretbox_MACBYTES, '\0');
  if (crypto_secretbox_open_easy(reinterpret_cast<unsigned char*>(der.data()),
                                 reinterpret_cast<const unsigned char*>(sealed.data()), sealed.size(),
                                 reinterpret_cast<const unsigned char*>(nonce.data()), key.data()) != 0) {
    sodium_memzero(key.data(), key.size());
    return invalid_input("{}: the passphrase does not open this key", what);
  }
  sodium_memzero(key.data(), key.size());
  return der;
}

Result<void> sodium_ready() {
  if (sodium_init() < 0) {
    return internal_error("libsodium could not be initialised");
  }
  return {};
}

} // namespace

struct SigningKey::Impl {
  Pkey key;
  bool has_private = false;
};

SigningKey::SigningKey(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {
}
SigningKey::SigningKey(SigningKey&&) noexcept = default;
SigningKey& SigningKey::operator=(SigningKey&&) noexcept = default;
SigningKey::~SigningKey() = default;

Result<SigningKey> SigningKey::load_private(const std::filesystem::path& path,
                                            const std::function<Result<std::string>()>& passphrase) {
  LS_TRY(openssl::libcrypto());
  const std::string what = path.string();
  LS_TRY_ASSIGN(std::string text, read_file(path, k_max_key_file));
  Pkey key;
  std::optional<std::string> encrypted;
  for (std::string_view type : {k_sigstore_pem, k_cosign_pem}) {
    LS_TRY_ASSIGN(encrypted, pem_body(text, type, what));
    if (encrypted) {
      break;
    }
  }
  if (encrypted) {
    LS_TRY(sodium_ready());
    LS_TRY_ASSIGN(std::string secret, passphrase());
    LS_TRY_ASSIGN(std::string der, decrypt_cosign(*encrypted, secret, what));
    sodium_memzero(secret.data(), secret.size());
    const auto* p = reinterpret_cast<const unsigned char*>(der.data());
    key.reset(crypto().d2i_AutoPrivateKey(nullptr, &p, static_cast<long>(der.size())));
    sodium_memzero(der.data(), der.size());
  } else {
    if (text.find("ENCRYPTED PRIVATE KEY") != std::string::npos) {
      return invalid_input("{}: a PKCS #8 key encrypted by OpenSSL; give cosign's encrypted form or an "
                           "unencrypted PRIVATE KEY",
                           what);
    }
    Bio bio(crypto().BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
    key.reset(crypto().PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  }
  if (!key) {
    return invalid_input("{}: not a private key (expected cosign's ENCRYPTED SIGSTORE PRIVATE KEY, or a PEM "
                         "PRIVATE KEY / EC PRIVATE KEY)",
                         what);
  }
  auto impl = std::make_unique<Impl>();
  LS_TRY_ASSIGN(impl->key, require_p256(std::move(key), what));
  impl->has_private = true;
  return SigningKey(std::move(impl));
}

Result<SigningKey> SigningKey::parse_public(std::string_view pem, std::string_view what) {
  LS_TRY(openssl::libcrypto());
  if (pem.find("-----BEGIN PUBLIC KEY-----") == std::string_view::npos) {
    return invalid_input("{}: not a PEM PUBLIC KEY", what);
  }
  Bio bio(crypto().BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Pkey key(crypto().PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  auto impl = std::make_unique<Impl>();
  LS_TRY_ASSIGN(impl->key, require_p256(std::move(key), what));
  return SigningKey(std::move(impl));
}

Result<SigningKey> SigningKey::load_public(const std::filesystem::path& path) {
  LS_TRY_ASSIGN(std::string text, read_file(path, k_max_key_file));
  return parse_public(text, path.string());
}

Result<SigningKey> SigningKey::generate() {
  LS_TRY(openssl::libcrypto());
  Pkey key(crypto().EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) {
    return internal_error("OpenSSL could not generate a P-256 key");
  }
  auto impl = std::make_unique<Impl>();
  impl->key = std::move(key);
  impl->has_private = true;
  return SigningKey(std::move(impl));
}

Result<std::string> SigningKey::sign(std::string_view data) const {
  if (!m_impl->has_private) {
    return invalid_input("signing needs a private key");
  }
  MdCtx ctx(crypto().EVP_MD_CTX_new());
  std::size_t len = 0;
  if (!ctx ||
      crypto().EVP_DigestSignInit(ctx.get(), nullptr, crypto().EVP_sha256(), nullptr, m_impl->key.get()) !=
          1 ||
      crypto().EVP_DigestSign(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(data.data()),
                              data.size()) != 1) {
    return internal_error("OpenSSL could not sign");
  }
  std::string sig(len, '\0');
  if (crypto().EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                              reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    return internal_error("OpenSSL could not sign");
  }
  sig.resize(len);
  return sig;
}

bool SigningKey::verify(std::string_view data, std::string_view der_signature) const {
  MdCtx ctx(crypto().EVP_MD_CTX_new());
  return ctx &&
         crypto().EVP_DigestVerifyInit(ctx.get(), nullptr, crypto().EVP_sha256(), nullptr,
                                       m_impl->key.get()) == 1 &&
         crypto().EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(der_signature.data()),
                                   der_signature.size(), reinterpret_cast<const unsigned char*>(data.data()),
                                   data.size()) == 1;
}

std::string SigningKey::public_pem() const {
  Bio bio(crypto().BIO_new(crypto().BIO_s_mem()));
  crypto().PEM_write_bio_PUBKEY(bio.get(), m_impl->key.get());
  char* data = nullptr;
  const long len = crypto().BIO_ctrl(bio.get(), BIO_CTRL_INFO, 0, static_cast<void*>(&data));
  return std::string(data, static_cast<std::size_t>(len));
}

Digest SigningKey::key_id() const {
  unsigned char* der = nullptr;
  const int len = crypto().i2d_PUBKEY(m_impl->key.get(), &der);
  Digest d = sha256_of(std::string_view(reinterpret_cast<const char*>(der), static_cast<std::size_t>(len)));
  crypto().CRYPTO_free(der, OPENSSL_FILE, OPENSSL_LINE);
  return d;
}

Result<std::string> SigningKey::encrypted_private_pem(std::string_view passphrase) const {
  if (!m_impl->has_private) {
    return invalid_input("no private key to write");
  }
  LS_TRY(sodium_ready());
  PKCS8_PRIV_KEY_INFO* info = crypto().EVP_PKEY2PKCS8(m_impl->key.get());
  unsigned char* der = nullptr;
  const int len = info == nullptr ? -1 : crypto().i2d_PKCS8_PRIV_KEY_INFO(info, &der);
  crypto().PKCS8_PRIV_KEY_INFO_free(info);
  if (len <= 0) {
    return internal_error("OpenSSL could not encode the private key");
  }
  std::string plain(reinterpret_cast<const char*>(der), static_cast<std::size_t>(len));
  crypto().CRYPTO_clear_free(der, static_cast<std::size_t>(len), OPENSSL_FILE, OPENSSL_LINE);
  std::string salt(32, '\0');
  std::string nonce(crypto_secretbox_NONCEBYTES, '\0');
  randombytes_buf(salt.data(), salt.size());
  randombytes_buf(nonce.data(), nonce.size());
  LS_TRY_ASSIGN(auto key, scrypt_key(passphrase, salt, k_scrypt_n, k_scrypt_r, k_scrypt_p, "key"));
  std::string sealed(plain.size() + crypto_secretbox_MACBYTES, '\0');
  crypto_secretbox_easy(reinterpret_cast<unsigned char*>(sealed.data()),
                        reinterpret_cast<const unsigned char*>(plain.data()), plain.size(),
                        reinterpret_cast<const unsigned char*>(nonce.data()), key.data());
  sodium_memzero(key.data(), key.size());
  sodium_memzero(plain.data(), plain.size());
  const nlohmann::ordered_json j = {{"kdf",
                                     {{"name", "scrypt"},
                                      {"params", {{"N", k_scrypt_n}, {"r", k_scrypt_r}, {"p", k_scrypt_p}}},
                                      {"salt", base64_encode(salt)}}},
                                    {"cipher", {{"name", "nacl/secretbox"}, {"nonce", base64_encode(nonce)}}},
                                    {"ciphertext", base64_encode(sealed)}};
  return pem_block(k_sigstore_pem, j.dump());
}

std::string simple_signing_payload(std::string_view reference, const Digest& digest,
                                   std::string_view creator) {
  const nlohmann::json j = {{"critical",
                             {{"identity", {{"docker-reference", reference}}},
                              {"image", {{"docker-manifest-digest", digest.str()}}},
                              {"type", k_payload_type}}},
                            {"optional", {{"creator", creator}}}};
  return j.dump();
}

Result<SimpleSigning> parse_simple_signing(std::string_view payload, std::string_view what_view) {
  const std::string what(what_view);
  LS_TRY_ASSIGN(nlohmann::json j, parse_json(payload, what));
  const auto exact = [](const nlohmann::json& o, std::initializer_list<const char*> keys) {
    if (!o.is_object() || o.size() != keys.size()) {
      return false;
    }
    for (const char* k : keys) {
      if (!o.contains(k)) {
        return false;
      }
    }
    return true;
  };
  if (!exact(j, {"critical", "optional"}) || !exact(j["critical"], {"identity", "image", "type"})) {
    return invalid_input("{}: not a simple-signing payload (critical: identity, image, type; optional)",
                         what);
  }
  const nlohmann::json& critical = j["critical"];
  if (!critical["type"].is_string() || critical["type"].get<std::string>() != k_payload_type) {
    return invalid_input("{}: the payload's type is not \"{}\"", what, k_payload_type);
  }
  if (!exact(critical["image"], {"docker-manifest-digest"}) ||
      !critical["image"]["docker-manifest-digest"].is_string() ||
      !exact(critical["identity"], {"docker-reference"}) ||
      !critical["identity"]["docker-reference"].is_string()) {
    return invalid_input("{}: the payload's image or identity is malformed", what);
  }
  auto digest = Digest::parse(critical["image"]["docker-manifest-digest"].get<std::string>());
  if (!digest) {
    return invalid_input("{}: {}", what, digest.error().message);
  }
  return SimpleSigning{critical["identity"]["docker-reference"].get<std::string>(), *digest};
}

std::string dsse_pae(std::string_view payload_type, std::string_view payload) {
  return fmt::format("DSSEv1 {} {} {} {}", payload_type.size(), payload_type, payload.size(), payload);
}

Result<std::string> dsse_sign(const SigningKey& key, std::string_view payload_type,
                              std::string_view payload) {
  LS_TRY_ASSIGN(std::string sig, key.sign(dsse_pae(payload_type, payload)));
  const nlohmann::ordered_json j = {{"payload", base64_encode(payload)},
                                    {"payloadType", payload_type},
                                    {"signatures", {{{"keyid", ""}, {"sig", base64_encode(sig)}}}}};
  return j.dump();
}

Result<DsseEnvelope> parse_dsse(std::string_view text, std::string_view what_view) {
  const std::string what(what_view);
  LS_TRY_ASSIGN(nlohmann::json j, parse_json(text, what));
  if (!j.is_object() || !j.contains("payload") || !j["payload"].is_string() || !j.contains("payloadType") ||
      !j["payloadType"].is_string() || !j.contains("signatures") || !j["signatures"].is_array()) {
    return invalid_input("{}: not a DSSE envelope (payload, payloadType, signatures)", what);
  }
  DsseEnvelope out;
  out.payload_type = j["payloadType"].get<std::string>();
  LS_TRY_ASSIGN(out.payload, base64_decode(j["payload"].get<std::string>(), what + ": payload"));
  for (const auto& s : j["signatures"]) {
    if (!s.is_object() || !s.contains("sig") || !s["sig"].is_string()) {
      return invalid_input("{}: a signature without \"sig\"", what);
    }
    LS_TRY_ASSIGN(std::string der, base64_decode(s["sig"].get<std::string>(), what + ": sig"));
    out.signatures.push_back(std::move(der));
  }
  return out;
}

} // namespace lockstep
