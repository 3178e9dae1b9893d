#include "support/git/git_info.hpp"

#include "support/base/log.hpp"
#include "support/git/libgit.hpp"

#include <cstdlib>
#include <memory>
#include <mutex>

namespace lockstep {

namespace {

// libgit2, or nullptr (with one warning per process) when it can't be loaded.
const LibGit* libgit_or_warn() {
  const LibGit* lib = libgit();
  if (lib == nullptr) {
    static std::once_flag warned;
    std::call_once(warned, [] {
      log::warn("can't load libgit2 ({}); the git revision is not recorded", libgit_load_error());
    });
  }
  return lib;
}

} // namespace

std::optional<GitInfo> git_info_for(const std::filesystem::path& path) {
  const LibGit* git = libgit_or_warn();
  if (git == nullptr) {
    return std::nullopt;
  }
  const char* ceiling = std::getenv("GIT_CEILING_DIRECTORIES");
  git_repository* raw = nullptr;
  if (git->git_repository_open_ext(&raw, path.c_str(), 0, ceiling) != 0) {
    return std::nullopt;
  }
  GitPtr<git_repository> repo(raw, git->git_repository_free);
  if (git->git_repository_is_bare(repo.get()) != 0) {
    return std::nullopt;
  }
  GitInfo info;
  git_oid oid;
  if (git->git_reference_name_to_id(&oid, repo.get(), "HEAD") == 0) {
    info.commit = oid_hex(*git, oid);
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
    log::debug("git status failed: {}", git->last_error());
  }
  git_remote* remote = nullptr;
  if (git->git_remote_lookup(&remote, repo.get(), "origin") == 0) {
    if (const char* url = git->git_remote_url(remote)) {
      info.remote = strip_url_credentials(url);
    }
    git->git_remote_free(remote);
  }
  return info;
}

} // namespace lockstep
