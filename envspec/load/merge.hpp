#pragma once
// `extends`: reading a spec and the files it extends, and merging their node trees.
#include "envspec/load/options.hpp"
#include "envspec/spec/spec.hpp"
#include "envspec/yaml/diagnostics.hpp"
#include "envspec/yaml/node.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

/// Merges `overlay` onto `base`: maps are merged key by key (recursively), lists are appended,
/// anything else is replaced by the overlay. `path` is the key path of the two nodes; paths for
/// which `is_atomic(path)` is true are replaced as a whole even when both are lists.
Node merge_nodes(Node base, Node overlay, const std::string& path, bool (*is_atomic)(std::string_view path));

/// True for key paths whose lists replace instead of append when merged: the keys the spec's shape
/// marks Merge::replace (`entrypoint`, `cmd`: appending one argv to another is never what anyone means).
bool is_atomic_list(std::string_view path);

/// The spec's node tree with every `extends` merged in.
struct MergedTree {
  Node root;                                ///< a map without the `lockstep` and `extends` keys
  std::vector<std::filesystem::path> files; ///< the spec first, then extended files in merge order
  bool complete = true;                     ///< false when some file could not be read or parsed
};

/// Parses the spec `file` (its contents are `text`), checks its `lockstep:` version, and merges
/// every file it extends (recursively) under it. Every problem is reported to `diags`. An `extends`
/// target must lead inside the directory of the file naming it unless `options.allow_outside`
/// (envspec/spec/host_paths.hpp), and a target that is not a spec is reported without its text.
MergedTree load_merged_tree(const std::filesystem::path& file, const std::string& text,
                            const LoadOptions& options, Diagnostics& diags);

} // namespace lockstep::envspec
