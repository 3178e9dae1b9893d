#pragma once
// What git_source.cpp (the cache and fetches) and git_export.cpp (trees into layers) share: libgit2
// set up for the cache, URL and commit checks, and opening the cache. Internal to builder/lock.
#include "support/base/result.hpp"
#include "support/git/libgit.hpp"

#include <filesystem>
#include <string>

namespace lockstep::builder {

/// libgit2, loaded and set up for the cache (new objects and refs fsynced); external when missing.
Result<const LibGit*> load_libgit();

/// The URL as messages show it: without credentials.
std::string shown(const std::string& url);

/// A git source's URL, refused (invalid_input) unless an absolute path, file://, http://, https://
/// or git:// within the length bound, without control characters.
Result<void> validate_url(const std::string& url);

/// A full commit id of `url`, lowercased; anything else is invalid_input.
Result<std::string> validate_commit(const std::string& commit, const std::string& url);

using Repo = GitPtr<git_repository>;

/// The bare repository at `dir` (a cache), opened.
Result<Repo> open_repo(const LibGit& git, const std::filesystem::path& dir);

/// `hex` (a validated full commit id) as libgit2's oid.
Result<git_oid> parse_oid(const LibGit& git, const std::string& hex);

} // namespace lockstep::builder
