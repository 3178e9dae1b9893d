#pragma once
// Installing a lock's Debian packages into image layers, the apko way: each .deb's data.tar is
// streamed into the layer of its group (base, mpi, cuda, python, app: a change rebuilds only its
// group), then a small layer holds the dpkg database, then, when any package has maintainer
// scripts, one sandboxed step runs them (`dpkg --configure -a`, as mmdebstrap does). See docs/debs.md.
#include "builder/image/layer_builder.hpp"
#include "builder/lock/base_contents.hpp"
#include "envspec/lock/lockfile.hpp"
#include "runner/runtime/subids.hpp"
#include "support/base/result.hpp"
#include "support/codec/compress.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/oci.hpp"
#include "support/store/blob_store.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace lockstep::builder {

/// The image built so far, which the package layers extend.
struct PackageBuildState {
  const BlobStore* store = nullptr;
  Codec codec = Codec::gzip;
  std::int64_t epoch = 0;
  std::string native_arch;             ///< dpkg's architecture (amd64, arm64, ...)
  std::vector<std::string> env;        ///< the image's Env, for the configure step
  std::vector<oci::Descriptor> layers; ///< in, then appended to
  std::vector<Digest> diff_ids;        ///< in, then appended to
  std::vector<bool> cached;            ///< one per appended layer
  std::vector<std::string> history;    ///< one per appended layer
  /// Where the lock's local files may be read from (envspec::local_roots; support/net/http.hpp).
  std::vector<std::filesystem::path> local_roots;
  /// The snapshot service of each apt repository (lock repository URL -> base, the spec's
  /// snapshot_url or a known one): a pool file gone upstream is fetched from the snapshot of its
  /// Release's date.
  std::map<std::string, std::string> snapshot_bases;
  /// The image base's installed state, when the packages go over an image base (else null): its
  /// dpkg database is extended, its links and directories are respected, a locked package it has
  /// at another version replaces that one.
  const BaseMetadata* base = nullptr;
  /// Unprivileged: subordinate ids for the configure step (BuildOptions::subids).
  std::optional<runner::SubordinateIds> subids;
};

/// Appends a built layer to `state` and logs it ("layer sha256:0123… 3.8 MiB CREATED_BY (cached)").
void append_layer(PackageBuildState& state, const BuiltLayer& layer, const std::string& created_by);

/// Fetches (verifying size and sha256 against the lock) and installs every `deb` artifact of
/// `lock`, appending layers to `state`. A package with maintainer scripts in an image without
/// /bin/sh or dpkg is an invalid_input error naming the package and what is missing. Over a base
/// (state.base), the database layer holds the base's status plus the new packages, and whiteouts
/// for what the replaced versions had and the new ones don't (docs/debs.md, "Over a base image").
Result<void> build_deb_layers(const envspec::Lock& lock, PackageBuildState& state);

} // namespace lockstep::builder
