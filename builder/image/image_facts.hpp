#pragma once
// The image facts in a build (envspec/lock/image_facts.hpp): derived from the lock with the CUDA driver
// floor from the embedded recipe recipes/cuda/drivers.yaml, and written into the image as the small
// layer /.lockstep/facts.json. docs/spec.md, "What the image records".
#include "builder/image/image_state.hpp"
#include "envspec/lock/image_facts.hpp"
#include "envspec/lock/lockfile.hpp"
#include "support/base/result.hpp"

namespace lockstep::builder {

/// The CUDA driver table: $LOCKSTEP_RECIPES_DIR/cuda/drivers.yaml when that variable is set,
/// otherwise the copy embedded at build time.
Result<envspec::CudaDriverTable> load_cuda_driver_table();

/// The facts of an image built from `lock`; the driver table is read only when the lock holds CUDA.
/// A CUDA version the table lacks is logged and leaves the driver floor empty.
Result<envspec::ImageFacts> image_facts_for(const envspec::Lock& lock);

/// Appends the layer holding /.lockstep/facts.json (directory 0755, file 0644, owner 0:0, mtime
/// the epoch) to `image`. Its cache key is the file's content, the epoch and the codec settings
/// only, so it is rebuilt exactly when the recorded facts change. Nothing for empty facts.
Result<void> build_facts_layer(const envspec::ImageFacts& facts, ImageState& image);

} // namespace lockstep::builder
