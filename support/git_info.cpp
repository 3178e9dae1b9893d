#include "support/git_info.hpp"

#include "support/log.hpp"

#include <git2.h>

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <mutex>

namespace lockstep {

namespace {

// libgit2, loaded on first use (LOCKSTEP_LIBGIT2_SONAME, fixed at build time). Only the functions
// lockstep calls are looked up; the declarations in git2.h give their types.
struct LibGit {
#define LS_GIT_FUNCTIONS(X)                                                                                  \
  X(git_libgit2_init)                                                                                        \
  X(git_libgit2_shutdown)                                                                                    \
  X(git_repository_open_ext)                                                                                 \
  X(git_repository_free)                                                                                     \
  X(git_repository_is_bare)                                                                                  \
  X(git_reference_name_to_id)                                                                                \
  X(git_oid_tostr)                                                                                           \
  X(git_status_list_new)                                                                                     \
  X(git_status_list_entrycount)                                                                              \
  X(git_status_list_free)                                                                                    \
  X(git_error_last)                                                                                          \
  X(git_remote_lookup)                                                                                       \
  X(git_remote_url)                                                                                          \
  X(git_remote_free)
#define LS_GIT_MEMBER(name) decltype(&::name) name = nullptr; // NOLINT(bugprone-macro-parentheses)
  LS_GIT_FUNCTIONS(LS_GIT_MEMBER)
#undef LS_GIT_MEMBER
  std::string error;
  bool initialised = false;

  LibGit() = default;
  LibGit(const LibGit&) = delete;
  LibGit& operator=(const LibGit&) = delete;
  // Releases libgit2's global state (caches, per-thread pcre2 data) at exit.
  ~LibGit() {
    if (initialised) {
      git_libgit2_shutdown();
    }
  }

  // Loads the library and every function; on failure `error` says why.
  bool load() {
    void* handle = ::dlopen(LOCKSTEP_LIBGIT2_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = ::dlerror();
      error = e != nullptr ? e : "dlopen failed";
      return false;
    }
#define LS_GIT_LOAD(name)                                                                                    \
  name = reinterpret_cast<decltype(name)>(::dlsym(handle, #name)); /* NOLINT(bugprone-macro-parentheses) */  \
  if (name == nullptr) {                                                                                     \
    error = std::string(LOCKSTEP_LIBGIT2_SONAME) + " has no " #name;                                         \
    return false;                                                                                            \
  }
    LS_GIT_FUNCTIONS(LS_GIT_LOAD)
#undef LS_GIT_LOAD
    git_libgit2_init();
    initialised = true;
    return true;
  }
#undef LS_GIT_FUNCTIONS
};

const LibGit* libgit() {
  static LibGit lib;
  static bool ok = lib.load();
  if (!ok) {
    static std::once_flag warned;
    std::call_once(warned,
                   [] { log::warn("can't load libgit2 ({}); the git revision is not recorded", lib.error); });
    return nullptr;
  }
  return &lib;
}

std::string strip_credentials(std::string url) {
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

} // namespace

std::optional<GitInfo> git_info_for(const std::filesystem::path& path) {
  const LibGit* git = libgit();
  if (git == nullptr) {
    return std::nullopt;
  }
  const char* ceiling = std::getenv("GIT_CEILING_DIRECTORIES");
  git_repository* raw = nullptr;
  if (git->git_repository_open_ext(&raw, path.c_str(), 0, ceiling) != 0) {
    return std::nullopt;
  }
  std::unique_ptr<git_repository, void (*)(git_repository*)> repo(raw, git->git_repository_free);
  if (git->git_repository_is_bare(repo.get()) != 0) {
    return std::nullopt;
  }
  GitInfo info;
  git_oid oid;
  if (git->git_reference_name_to_id(&oid, repo.get(), "HEAD") == 0) {
    char hex[GIT_OID_HEXSZ + 1] = {};
    git->git_oid_tostr(hex, sizeof(hex), &oid);
    info.commit = hex;
  }
  git_status_options opts{}; // (GIT_STATUS_OPTIONS_INIT leaves fields out, which clang warns about)
  opts.version = GIT_STATUS_OPTIONS_VERSION;
  opts.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
  opts.flags = GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
  git_status_list* status = nullptr;
  if (git->git_status_list_new(&status, repo.get(), &opts) == 0) {
    info.dirty = git->git_status_list_entrycount(status) > 0;
    git->git_status_list_free(status);
  } else {
    const git_error* e = git->git_error_last();
    log::debug("git status failed: {}", e != nullptr ? e->message : "unknown error");
  }
  git_remote* remote = nullptr;
  if (git->git_remote_lookup(&remote, repo.get(), "origin") == 0) {
    if (const char* url = git->git_remote_url(remote)) {
      info.remote = strip_credentials(url);
    }
    git->git_remote_free(remote);
  }
  return info;
}

} // namespace lockstep
