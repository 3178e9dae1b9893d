#include "builder/image/signing.hpp"

#include "envspec/settings/settings.hpp"
#include "support/base/version.hpp"
#include "support/codec/base64.hpp"
#include "support/registry/client.hpp"
#include "support/registry/referrers.hpp"
#include "support/store/blob_store.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

// A passphrase typed on the terminal, without echo.
Result<std::string> prompt(const char* question) {
  std::FILE* tty = std::fopen("/dev/tty", "r+");
  if (tty == nullptr) {
    return invalid_input(
        "the key's passphrase: give --passphrase-file or set LOCKSTEP_KEY_PASSPHRASE (there is "
        "no terminal to ask on)");
  }
  std::fputs(question, tty);
  std::fflush(tty);
  termios old{};
  const bool restore = ::tcgetattr(::fileno(tty), &old) == 0;
  if (restore) {
    termios quiet = old;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(::fileno(tty), TCSAFLUSH, &quiet);
  }
  std::string line;
  for (int c = std::fgetc(tty); c != EOF && c != '\n'; c = std::fgetc(tty)) {
    line += static_cast<char>(c);
  }
  if (restore) {
    ::tcsetattr(::fileno(tty), TCSAFLUSH, &old);
  }
  std::fputs("\n", tty);
  std::fclose(tty);
  return line;
}

} // namespace

Result<std::string> key_passphrase(const std::string& file, bool confirm) {
  if (!file.empty()) {
    LS_TRY_ASSIGN(std::string text, read_file(file, 64 << 10));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
      text.pop_back();
    }
    return text;
  }
  for (const char* name : {"LOCKSTEP_KEY_PASSPHRASE", "COSIGN_PASSWORD"}) {
    if (const char* v = std::getenv(name)) {
      return std::string(v);
    }
  }
  LS_TRY_ASSIGN(std::string first, prompt("Passphrase for the private key: "));
  if (confirm) {
    LS_TRY_ASSIGN(std::string again, prompt("The passphrase again: "));
    if (again != first) {
      return invalid_input("the two passphrases differ; nothing was written");
    }
  }
  return first;
}

std::string signed_reference(const oci::RegistryRef& ref) {
  return ref.tag.empty() ? ref.name() : ref.name() + ":" + ref.tag;
}

Result<Digest> sign_image(const oci::RegistryRef& ref, const Digest& digest, const SigningKey& key) {
  const std::string payload =
      simple_signing_payload(signed_reference(ref), digest, fmt::format("lockstep {}", k_version));
  LS_TRY_ASSIGN(std::string signature, key.sign(payload));
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  return registry::add_signature(ref, digest, payload, base64_encode(signature), store,
                                 registry::default_client_options());
}

Result<SignedImage> sign_registry_image(const oci::RegistryRef& ref, const std::string& key_path,
                                        const std::string& passphrase_file) {
  LS_TRY_ASSIGN(SigningKey key,
                SigningKey::load_private(key_path, [&] { return key_passphrase(passphrase_file, false); }));
  LS_TRY_ASSIGN(oci::Descriptor manifest,
                registry::resolve_manifest(ref, registry::default_client_options()));
  LS_TRY_ASSIGN(Digest sig_manifest, sign_image(ref, manifest.digest, key));
  SignedImage signed_image;
  signed_image.tag = registry::signature_tag(manifest.digest);
  signed_image.manifest = std::move(manifest);
  signed_image.reference = signed_reference(ref);
  signed_image.key_id = key.key_id().str();
  signed_image.signatures_manifest = sig_manifest;
  return signed_image;
}

Result<KeyPair> generate_key_pair(const std::string& prefix, const std::string& passphrase_file) {
  const fs::path priv = prefix + ".key";
  const fs::path pub = prefix + ".pub";
  std::error_code ec;
  for (const fs::path& p : {priv, pub}) {
    if (fs::exists(fs::symlink_status(p, ec))) {
      return invalid_input("generate-key: {} exists; lockstep never overwrites a key (remove it or give "
                           "--output-prefix)",
                           p.string());
    }
  }
  LS_TRY_ASSIGN(std::string secret, key_passphrase(passphrase_file, true));
  LS_TRY_ASSIGN(SigningKey key, SigningKey::generate());
  LS_TRY_ASSIGN(std::string priv_pem, key.encrypted_private_pem(secret));
  LS_TRY_ASSIGN(AtomicFile p, AtomicFile::create(fs::absolute(priv), 0600));
  LS_TRY(p.write(priv_pem));
  LS_TRY(p.commit());
  LS_TRY_ASSIGN(AtomicFile q, AtomicFile::create(fs::absolute(pub), 0644));
  LS_TRY(q.write(key.public_pem()));
  LS_TRY(q.commit());
  return KeyPair{priv, pub, key.key_id().str()};
}

} // namespace lockstep::builder
