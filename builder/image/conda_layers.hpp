#pragma once
// A lock's conda packages in the image: one layer ("conda environment") after the Debian packages and
// their facts, before the wheels, holding the conda prefix (`conda.prefix`, /opt/conda by default)
// as conda would link it: every package's files with prefix replacement, noarch: python relocated,
// entry points, conda-meta/ (one record per package, history, frozen). Archives are fetched into
// the store (size and sha256 checked against the lock), read as hostile input
// (support/conda/package.hpp) and planned (support/conda/link.hpp); each package's files are
// spilled to a temporary file of the store's while the next packages are read, so memory holds a
// package or two at a time, not the environment. See docs/conda.md ("The image's environment").
#include "builder/image/image_state.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"

#include <string>
#include <utility>
#include <vector>

namespace lockstep::builder {

/// Whether `lock` has conda packages.
bool has_conda_packages(const envspec::Lock& lock);

/// The image variables a conda environment at `prefix` sets, as `conda run` would: CONDA_PREFIX,
/// CONDA_DEFAULT_ENV, CONDA_SHLVL=1 and PATH with PREFIX/bin first (`path` is the PATH before).
std::vector<std::pair<std::string, std::string>> conda_env_vars(const std::string& prefix,
                                                                const std::string& path);

/// Fetches, checks and links every `conda` artifact of `lock` into one layer appended to `image`
/// (none when the lock has none), in dependency order (a package after what it depends on; the
/// later of two packages installing one file wins, as conda's clobber). A tampered download, an
/// archive that breaks the rules of support/conda/package.hpp or link.hpp, or one that is not
/// the package the lock names is invalid_input naming it; nothing is published then. Packages with
/// pre/post-link scripts are listed (the scripts are installed, never run).
Result<void> build_conda_layer(const envspec::Spec& spec, const envspec::Lock& lock, ImageState& image);

} // namespace lockstep::builder
