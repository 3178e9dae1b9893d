#pragma once
// Where the stack solver's recipes come from for a spec: the built-in recipes, or a team's recipes
// repository named in the spec (`stack.recipes: {git: URL, rev: REV}`), read at one commit from the
// store's git cache (builder/lock/git_source.hpp). The lock records that commit, so re-locking with the
// same rev later, or on another machine, reads exactly the same recipe bytes (docs/recipes.md).
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "envspec/stack/recipes.hpp"
#include "support/base/result.hpp"

#include <filesystem>
#include <optional>

namespace lockstep::builder {

/// The recipes for `spec`'s stack. With a recipes repository, its rev is resolved (fetching when
/// the cache lacks it) and the files under its `recipes/` directory (or its root, when it has none)
/// are read at that commit; files it doesn't have come from the built-in set.
Result<envspec::RecipeSet> recipes_for_spec(const envspec::Spec& spec,
                                            const std::filesystem::path& store_root);

/// Like recipes_for_spec without the network: a recipes repository is read from the cache at the
/// commit `previous` (the spec's lock) records for it, or at `rev` when it is a full commit id. A
/// repository the cache doesn't hold is an external error saying to run `lockstep lock` once.
Result<envspec::RecipeSet> recipes_for_spec_offline(const envspec::Spec& spec,
                                                    const std::filesystem::path& store_root,
                                                    const std::optional<envspec::Lock>& previous);

} // namespace lockstep::builder
