#pragma once
// Shared libraries lockstep loads with dlopen on first use instead of linking them (libcurl,
// libgit2, OpenSSL's EVP half: support/net/curl_lib.hpp, support/git/libgit.hpp,
// support/supplychain/openssl_lib.hpp say why each), and their functions by name. A library stays
// loaded for the life of the process.
#include <string>

namespace lockstep {

/// dlopen(soname, RTLD_NOW | RTLD_LOCAL): RTLD_LOCAL keeps the library's own references inside it,
/// so a static build's unexported copies of the same code never meet it. nullptr on failure, with
/// `error` set to dlerror's text.
void* open_shared_library(const char* soname, std::string& error);

/// The address of function `name` in `handle`, or nullptr with `error` set to "SONAME has no NAME".
void* shared_library_function(void* handle, const char* soname, const char* name, std::string& error);

/// Sets `fn` to function `name` of `handle` with the type `fn` has (its declaration in the library's
/// header gives it); false, with `error` set, when the library has no such function.
template <typename Fn>
bool load_shared_function(void* handle, const char* soname, const char* name, Fn& fn, std::string& error) {
  fn = reinterpret_cast<Fn>(shared_library_function(handle, soname, name, error)); // NOLINT
  return fn != nullptr;
}

} // namespace lockstep
