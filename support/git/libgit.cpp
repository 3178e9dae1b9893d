// Loading libgit2 on first use (see libgit.hpp for why it is not linked).
#include "support/git/libgit.hpp"

#include "support/system/shared_library.hpp"

namespace lockstep {

namespace {

// The loaded library; `error` says why loading failed.
struct LoadedLibGit {
  LibGit lib;
  std::string error;
  bool initialised = false;

  LoadedLibGit() = default;
  LoadedLibGit(const LoadedLibGit&) = delete;
  LoadedLibGit& operator=(const LoadedLibGit&) = delete;
  // Releases libgit2's global state (caches, per-thread pcre2 data) at exit.
  ~LoadedLibGit() {
    if (initialised) {
      lib.git_libgit2_shutdown();
    }
  }

  // Loads the library and every function; on failure `error` says why.
  bool load() {
    void* handle = open_shared_library(LOCKSTEP_LIBGIT2_SONAME, error);
    if (handle == nullptr) {
      return false;
    }
#define LS_LIBGIT_LOAD(name)                                                                                 \
  if (!load_shared_function(handle, LOCKSTEP_LIBGIT2_SONAME, #name, lib.name, error)) {                      \
    return false;                                                                                            \
  }
    LS_LIBGIT_FUNCTIONS(LS_LIBGIT_LOAD)
#undef LS_LIBGIT_LOAD
    lib.git_libgit2_init();
    initialised = true;
    return true;
  }
};

LoadedLibGit& loaded() {
  static LoadedLibGit instance;
  static const bool ok = instance.load();
  (void)ok;
  return instance;
}

} // namespace

std::string LibGit::last_error() const {
  const git_error* e = git_error_last();
  return e != nullptr && e->message != nullptr ? e->message : "unknown error";
}

const LibGit* libgit() {
  LoadedLibGit& l = loaded();
  return l.initialised ? &l.lib : nullptr;
}

const std::string& libgit_load_error() {
  return loaded().error;
}

std::string oid_hex(const LibGit& git, const git_oid& oid) {
  char hex[GIT_OID_HEXSZ + 1] = {};
  git.git_oid_tostr(hex, sizeof(hex), &oid);
  return hex;
}

std::string strip_url_credentials(std::string url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) {
    return url;
  }
  auto host_start = scheme + 3;
  auto at = url.find('@', host_start);
  auto slash = url.find('/', host_start);
  if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
    url.erase(host_start, at - host_start + 1);
  }
  return url;
}

} // namespace lockstep
