#pragma once
// OpenSSL's public-key half (EVP keys, PEM and DER, ECDSA, scrypt), loaded with dlopen on first use
// by sigstore.cpp, the only user. Internal to support/supplychain.
//
// Why not linked: EVP brings OpenSSL's providers (every cipher, key manager and encoder: 4 MB and
// ~16,000 relocations in a static build), and every start of lockstep pays for relocating them,
// each rank of `lockstep run` included (docs/launch.md, "Ranks on one node"). The digests lockstep
// computes everywhere (SHA-256, base64) come from libcrypto's low-level functions, which stay linked.
#include "support/base/result.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <string>

namespace lockstep::openssl {

// Only the functions sigstore.cpp calls are looked up; the declarations in OpenSSL's headers give
// their types.
struct LibCrypto {
#define LS_CRYPTO_FUNCTIONS(X)                                                                               \
  X(BIO_new)                                                                                                 \
  X(BIO_new_mem_buf)                                                                                         \
  X(BIO_s_mem)                                                                                               \
  X(BIO_ctrl)                                                                                                \
  X(BIO_free)                                                                                                \
  X(CRYPTO_free)                                                                                             \
  X(CRYPTO_clear_free)                                                                                       \
  X(EVP_PKEY_Q_keygen)                                                                                       \
  X(EVP_PKEY_is_a)                                                                                           \
  X(EVP_PKEY_get_utf8_string_param)                                                                          \
  X(EVP_PKEY_free)                                                                                           \
  X(EVP_PKEY2PKCS8)                                                                                          \
  X(EVP_PBE_scrypt)                                                                                          \
  X(EVP_MD_CTX_new)                                                                                          \
  X(EVP_MD_CTX_free)                                                                                         \
  X(EVP_sha256)                                                                                              \
  X(EVP_DigestSignInit)                                                                                      \
  X(EVP_DigestSign)                                                                                          \
  X(EVP_DigestVerifyInit)                                                                                    \
  X(EVP_DigestVerify)                                                                                        \
  X(PEM_read_bio_PrivateKey)                                                                                 \
  X(PEM_read_bio_PUBKEY)                                                                                     \
  X(PEM_write_bio_PUBKEY)                                                                                    \
  X(d2i_AutoPrivateKey)                                                                                      \
  X(i2d_PUBKEY)                                                                                              \
  X(i2d_PKCS8_PRIV_KEY_INFO)                                                                                 \
  X(PKCS8_PRIV_KEY_INFO_free)
#define LS_CRYPTO_MEMBER(name) decltype(&::name) name = nullptr; // NOLINT(bugprone-macro-parentheses)
  LS_CRYPTO_FUNCTIONS(LS_CRYPTO_MEMBER)
#undef LS_CRYPTO_MEMBER
  std::string error;

  // Loads the library and every function; on failure `error` says why.
  bool load();
};

/// The loaded library; an ExitCode::external error says how to install it when it can't be loaded.
Result<const LibCrypto*> libcrypto();

} // namespace lockstep::openssl
