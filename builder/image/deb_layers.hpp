#pragma once
// Installing a lock's Debian packages into image layers, the apko way: each .deb's data.tar is
// streamed into the layer of its group (base, mpi, cuda, python, app: a change rebuilds only its
// group), then a small layer holds the dpkg database, then, when any package has maintainer
// scripts, one sandboxed step runs them (`dpkg --configure -a`, as mmdebstrap does). See docs/debs.md.
#include "builder/image/image_state.hpp"
#include "envspec/lock/lockfile.hpp"
#include "support/base/result.hpp"

#include <map>
#include <string>

namespace lockstep::builder {

/// What installing the lock's Debian packages needs besides the image (ImageState) and the lock.
struct DebInputs {
  std::string native_arch; ///< dpkg's architecture (amd64, arm64, ...)
  /// The snapshot service of each apt repository (lock repository URL -> base, the spec's
  /// snapshot_url or a known one): a pool file gone upstream is fetched from the snapshot of its
  /// Release's date.
  std::map<std::string, std::string> snapshot_bases;
};

/// Fetches (verifying size and sha256 against the lock) and installs every `deb` artifact of
/// `lock`, appending layers to `image`. A package with maintainer scripts in an image without
/// /bin/sh or dpkg is an invalid_input error naming the package and what is missing. Over a base
/// (image.base_metadata), the database layer holds the base's status plus the new packages, and
/// whiteouts for what the replaced versions had and the new ones don't (docs/debs.md, "Over a base
/// image").
Result<void> build_deb_layers(const envspec::Lock& lock, const DebInputs& inputs, ImageState& image);

} // namespace lockstep::builder
