#include "support/supplychain/openssl_lib.hpp"

#include <dlfcn.h>

namespace lockstep::openssl {

bool LibCrypto::load() {
  // RTLD_LOCAL: the library's own references stay inside it (a static build carries libcrypto's
  // low-level digests too, unexported, so the two copies never meet).
  void* handle = ::dlopen(LOCKSTEP_LIBCRYPTO_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    error = e != nullptr ? e : "dlopen failed";
    return false;
  }
#define LS_CRYPTO_LOAD(name)                                                                                 \
  name = reinterpret_cast<decltype(name)>(::dlsym(handle, #name)); /* NOLINT(bugprone-macro-parentheses) */  \
  if ((name) == nullptr) {                                                                                   \
    error = std::string(LOCKSTEP_LIBCRYPTO_SONAME) + " has no " #name;                                       \
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
