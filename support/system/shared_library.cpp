#include "support/system/shared_library.hpp"

#include <dlfcn.h>

namespace lockstep {

void* open_shared_library(const char* soname, std::string& error) {
  void* handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    error = e != nullptr ? e : "dlopen failed";
  }
  return handle;
}

void* shared_library_function(void* handle, const char* soname, const char* name, std::string& error) {
  void* fn = ::dlsym(handle, name);
  if (fn == nullptr) {
    error = std::string(soname) + " has no " + name;
  }
  return fn;
}

} // namespace lockstep
