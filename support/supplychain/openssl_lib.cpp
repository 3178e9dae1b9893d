#include "support/supplychain/openssl_lib.hpp"

#include "support/system/shared_library.hpp"

namespace lockstep::openssl {

bool LibCrypto::load() {
  // A static build carries libcrypto's low-level digests too, unexported: RTLD_LOCAL
  // (open_shared_library) keeps the two copies apart.
  void* handle = open_shared_library(LOCKSTEP_LIBCRYPTO_SONAME, error);
  if (handle == nullptr) {
    return false;
  }
#define LS_CRYPTO_LOAD(name)                                                                                 \
  if (!load_shared_function(handle, LOCKSTEP_LIBCRYPTO_SONAME, #name, name, error)) {                        \
    return false;                                                                                            \
  }
  LS_CRYPTO_FUNCTIONS(LS_CRYPTO_LOAD)
#undef LS_CRYPTO_LOAD
  return true;
}

Result<const LibCrypto*> libcrypto() {
  static LibCrypto lib;
  static const bool ok = lib.load();
  if (!ok) {
    return external_error("can't load OpenSSL's libcrypto ({}), which lockstep needs for signing keys and "
                          "signatures: install libssl3 (Debian, Ubuntu) or openssl-libs (Fedora)",
                          lib.error);
  }
  return &lib;
}

} // namespace lockstep::openssl
