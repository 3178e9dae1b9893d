#pragma once
// `run:` steps: a shell command run in the build sandbox over the image built so far, whose
// filesystem changes become a layer. The root built so far is the lower layer of an overlay; the
// step writes to a fresh upper directory; the upper directory, normalised, is the new layer
// (overlayfs whiteouts become `.wh.` members, opaque directories `.wh..wh..opq`).
#include "builder/image/image_state.hpp"
#include "builder/image/layer_builder.hpp"
#include "builder/image/layer_plan.hpp"
#include "envspec/spec/spec.hpp"
#include "runner/runtime/root_cache.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace lockstep::builder {

/// Everything a step's result depends on besides the layers below it.
struct RunStepInputs {
  std::vector<Digest> parent_diff_ids; ///< the layers the step runs over, base first
  std::vector<std::string> env;        ///< the environment it runs with, "K=V"
  std::string workdir;                 ///< its working directory in the image
  std::int64_t epoch = 0;
  std::string settings; ///< layer codec settings (layer_settings())
};

/// The fingerprint recorded in the layer cache for a step: equal fingerprints mean the step
/// would run over the same root with the same command and environment.
Digest run_step_fingerprint(const envspec::RunStep& step, const RunStepInputs& inputs);

/// How the overlay that ran the step recorded deletions and opaque directories.
struct UpperLayout {
  /// The opaque-directory xattr: "trusted.overlay.opaque" (overlay mounted by real root) or
  /// "user.overlay.opaque" (mounted in a user namespace with `userxattr`).
  std::string opaque_xattr = "user.overlay.opaque";
  /// The step's user namespace: the host ids in the upper directory and the image's ids they are.
  /// An unprivileged build maps its own uid/gid to 0 (and, with subordinate ids, the range to 1..),
  /// a root build the confined range (runner::k_confined_host_first); the default keeps host ids as
  /// they are. An id outside every range can't come from the step, and is refused.
  /// Host ids [first, first + count) are the image's ids [inside, inside + count).
  struct IdRange {
    std::uint32_t first = 0;
    std::uint32_t count = 0xFFFFFFFFU;
    std::uint32_t inside = 0;
  };
  std::vector<IdRange> uids{IdRange{}};
  std::vector<IdRange> gids{IdRange{}};
  /// Paths (relative, "etc/resolv.conf") the sandbox created as mount points. They stay out of
  /// the layer when they are empty and `lower` lacks them.
  std::set<std::string> mount_points;
};

/// Normalises the upper directory in place so that the layer is reproducible: drops files that
/// record when or where the build ran (logs, package-manager caches, *-old backups) and clamps the
/// source mtime recorded in timestamp-based `.pyc` files to the epoch. Returns what was dropped.
Result<std::vector<std::string>> normalize_upper(const std::filesystem::path& upper, std::int64_t epoch);

/// Plans the layer holding the changes in `upper` (the overlay's upper directory) over the
/// unpacked root `lower`: entries depth-first in bytewise name order, mtimes clamped to `epoch`,
/// whiteouts for deletions and opaque directories, hard links kept.
Result<LayerPlan> plan_upper_layer(const std::filesystem::path& upper, const std::filesystem::path& lower,
                                   const UpperLayout& layout, std::int64_t epoch);

/// How one step runs over the image, besides the step itself.
struct StepOptions {
  std::string workdir; ///< its working directory in the image, "" for /
  /// Names the step in progress, errors and history instead of "run[N]" (steps lockstep generates,
  /// such as configuring packages).
  std::string label;
  /// The image's first layers, already unpacking in the background (runner::start_root), or null.
  runner::RootHead* root_head = nullptr;
};

/// How the build sandbox's root is unpacked: as root, owned by the ids the confined step's ids map
/// to (never host root's); else by the caller.
runner::UnpackOptions run_step_unpack_options();

/// Runs `step` (the `index`-th of the spec's steps) in the build sandbox over `image` (its layers,
/// Env and sandbox ids) and builds its layer, or takes the layer from the cache when the same step
/// ran over the same layers before; the caller appends it. A step that fails is a check_failed
/// error carrying its exit status.
Result<BuiltLayer> build_run_step(const envspec::RunStep& step, std::size_t index, const ImageState& image,
                                  const StepOptions& options);

} // namespace lockstep::builder
