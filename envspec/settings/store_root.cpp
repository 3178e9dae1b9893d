// settings::store_root (settings.hpp): where the store is. Its own file because every variable it
// reads is part of the key of a node's shared container (runner/runtime/join.hpp), which
// tests/unit/runner/runtime/test_join.cpp checks by reading this file.
#include "envspec/settings/settings.hpp"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace lockstep::settings {

namespace fs = std::filesystem;

fs::path store_root() {
  if (const char* env = std::getenv("LOCKSTEP_CACHE"); env != nullptr && *env != '\0') {
    return fs::path(env);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return fs::path(xdg) / "lockstep";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return fs::path(home) / ".cache" / "lockstep";
  }
  return fs::path("/tmp") / ("lockstep-cache-" + std::to_string(::getuid()));
}

} // namespace lockstep::settings
