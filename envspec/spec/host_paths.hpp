#pragma once
// The rule for host paths a spec makes lockstep read (docs/spec.md, "Paths"): a path written in a
// file must lead, once every symlink is resolved, inside that file's directory, unless the command
// was given --allow-outside. It covers `extends`, `copy[].from`, local `copy[].git` and
// `stack.recipes.git` repositories, local apt and pypi repositories, wheelhouses, requirements files
// and keyrings (which may also come from the system's keyring directories). Each check runs before
// the path is opened. A lock's local files must lie in the directories local_roots() names.
#include "envspec/spec/spec.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

/// Where a path may also lead besides the directory of the file that names it.
struct ExtraRoots {
  std::vector<std::filesystem::path> dirs;
  std::string_view described; ///< how the message names them ("the system keyring directories")
};

/// Why `path` (absolute; written as `text` in a file whose directory is `dir`) may not be read: the
/// message to report at the place it is written ("... is outside the spec's directory ...; use
/// --allow-outside to allow it"), or nullopt when it leads inside `dir` or one of `extra`. Nothing is
/// opened (support/system/confine.hpp).
std::optional<std::string> outside_problem(const std::filesystem::path& path, std::string_view text,
                                           const std::filesystem::path& dir, const ExtraRoots& extra = {});

/// outside_problem() for a local git repository: the repository directory, and every place it makes
/// git read objects from (a `.git` file's `gitdir:`, `commondir`, `objects/info/alternates`, followed
/// through the repositories they name) must lead inside `dir`.
std::optional<std::string> git_outside_problem(const std::filesystem::path& repo, std::string_view text,
                                               const std::filesystem::path& dir);

/// The system directories keyrings may come from without --allow-outside: public keys only
/// (/usr/share/keyrings, /etc/apt/keyrings, /etc/apt/trusted.gpg.d).
const ExtraRoots& system_keyring_roots();

/// The directories the local files a lock names (relative URLs, absolute paths, file: URLs) may lie
/// in: the spec's directory and every local repository the spec names (file: apt and pypi
/// repositories, wheelhouses), which the spec's own loading has confined.
std::vector<std::filesystem::path> local_roots(const Spec& spec);

} // namespace lockstep::envspec
