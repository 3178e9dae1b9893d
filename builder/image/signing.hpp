#pragma once
// Signing registry images in cosign's format (docs/signing.md): the key files `lockstep
// generate-key` writes, the passphrase that opens a private key, and the signature stored beside an
// image in its registry, which skopeo's `sigstoreSigned` policies accept. Checking signatures is
// runner/audit/verify_signed.hpp.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/oci.hpp"
#include "support/oci/registry_ref.hpp"
#include "support/supplychain/sigstore.hpp"

#include <filesystem>
#include <string>

namespace lockstep::builder {

/// The passphrase of a private key: from `file` (--passphrase-file, its line ends dropped), else
/// LOCKSTEP_KEY_PASSPHRASE or COSIGN_PASSWORD, else asked on the terminal without echo (twice with
/// `confirm`, which must agree). No terminal to ask on is invalid_input.
Result<std::string> key_passphrase(const std::string& file, bool confirm);

/// The reference a signature names: HOST/REPO:TAG, or HOST/REPO for a digest.
std::string signed_reference(const oci::RegistryRef& ref);

/// Signs `digest` as `ref` names it and stores the signature under the image's signature tag;
/// returns the signature manifest's digest.
Result<Digest> sign_image(const oci::RegistryRef& ref, const Digest& digest, const SigningKey& key);

/// A registry image `sign_registry_image` signed.
struct SignedImage {
  oci::Descriptor manifest;   ///< the image's manifest, as the registry holds it
  std::string reference;      ///< the reference the signature names (signed_reference)
  std::string key_id;         ///< the key's id (sha256 of its public key)
  std::string tag;            ///< the tag the signatures are stored under
  Digest signatures_manifest; ///< the signature manifest under that tag
};

/// `lockstep sign`: signs the image `ref` names with the private key at `key_path` (its passphrase
/// from key_passphrase(passphrase_file)).
Result<SignedImage> sign_registry_image(const oci::RegistryRef& ref, const std::string& key_path,
                                        const std::string& passphrase_file);

/// The key files generate_key_pair wrote.
struct KeyPair {
  std::filesystem::path private_key; ///< PREFIX.key, encrypted, mode 0600
  std::filesystem::path public_key;  ///< PREFIX.pub
  std::string key_id;
};

/// `lockstep generate-key`: a new ECDSA P-256 key pair in cosign's formats, PREFIX.key encrypted
/// with the passphrase (key_passphrase(passphrase_file, confirm)) and PREFIX.pub. An existing file
/// is never overwritten (invalid_input, before the passphrase is asked).
Result<KeyPair> generate_key_pair(const std::string& prefix, const std::string& passphrase_file);

} // namespace lockstep::builder
