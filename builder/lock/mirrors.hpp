#pragma once
// The mirrors a build asks before upstream (support/net/mirror.hpp, docs/vendor.md), from the command
// line, the spec and the environment, in that order.
#include "support/base/result.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace lockstep::builder {

/// Sets the process's mirrors (support/net/mirror.hpp): `cli` (--mirror, relative to the working
/// directory), then the spec's `mirrors` (relative to `spec_dir`), then LOCKSTEP_MIRRORS (separated by
/// blanks); each a directory (DIR or dir:DIR) or docker://REGISTRY/REPO. `offline` forbids upstream.
Result<void> configure_mirrors(const std::vector<std::string>& cli, const std::vector<std::string>& spec,
                               const std::filesystem::path& spec_dir, bool offline);

} // namespace lockstep::builder
