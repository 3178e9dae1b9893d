#pragma once
// git sources (`copy: [{git: URL, rev: REV, to: PATH}]`) in the image: one layer per source, the
// tree of the locked commit, checked against the sha256 the lock recorded for its export.
// See docs/git-sources.md.
#include "builder/deb_layers.hpp"
#include "envspec/lockfile.hpp"
#include "envspec/spec.hpp"
#include "support/digest.hpp"
#include "support/result.hpp"

#include <cstdint>
#include <filesystem>
#include <string>

namespace lockstep::builder {

/// The sha256 and size of lockstep's canonical export of a commit's tree (a tar of the tree at "/",
/// epoch 0, owner 0:0): what a lock pins a git source's content by, beyond git's SHA-1 commit id.
struct GitTreeDigest {
  Digest sha256;
  std::uint64_t size = 0;
};

/// Computes the GitTreeDigest of `commit` of `url` (fetching it into the store's git cache if needed).
Result<GitTreeDigest> git_export_digest(const std::filesystem::path& store_root, const std::string& url,
                                        const std::string& commit, const std::string& rev_hint = {});

/// Appends one layer per git `copy` item of `spec`, each from the commit `lock` pins for it. A
/// source whose content no longer matches the lock's sha256 is invalid_input.
Result<void> build_git_layers(const envspec::Spec& spec, const envspec::Lock& lock, PackageBuildState& state);

} // namespace lockstep::builder
