#include "support/git_info.hpp"

#include "support/log.hpp"

#include <git2.h>

#include <cstdlib>
#include <memory>

namespace lockstep {

namespace {

struct LibGit {
  LibGit() { git_libgit2_init(); }
  ~LibGit() { git_libgit2_shutdown(); }
  LibGit(const LibGit&) = delete;
  LibGit& operator=(const LibGit&) = delete;
};

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
  static LibGit lib;
  const char* ceiling = std::getenv("GIT_CEILING_DIRECTORIES"); // NOLINT(concurrency-mt-unsafe)
  git_repository* raw = nullptr;
  if (git_repository_open_ext(&raw, path.c_str(), 0, ceiling) != 0) {
    return std::nullopt;
  }
  std::unique_ptr<git_repository, void (*)(git_repository*)> repo(raw, git_repository_free);
  if (git_repository_is_bare(repo.get()) != 0) {
    return std::nullopt;
  }
  GitInfo info;
  git_oid oid;
  if (git_reference_name_to_id(&oid, repo.get(), "HEAD") == 0) {
    char hex[GIT_OID_HEXSZ + 1] = {};
    git_oid_tostr(hex, sizeof(hex), &oid);
    info.commit = hex;
  }
  git_status_options opts = GIT_STATUS_OPTIONS_INIT;
  opts.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
  opts.flags = GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
  git_status_list* status = nullptr;
  if (git_status_list_new(&status, repo.get(), &opts) == 0) {
    info.dirty = git_status_list_entrycount(status) > 0;
    git_status_list_free(status);
  } else {
    const git_error* e = git_error_last();
    log::debug("git status failed: {}", e != nullptr ? e->message : "unknown error");
  }
  git_remote* remote = nullptr;
  if (git_remote_lookup(&remote, repo.get(), "origin") == 0) {
    if (const char* url = git_remote_url(remote)) {
      info.remote = strip_credentials(url);
    }
    git_remote_free(remote);
  }
  return info;
}

} // namespace lockstep
