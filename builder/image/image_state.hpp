#pragma once
// The image being built: its layers so far, base first, and what every layer builder needs to add
// one (the store, the codec, the epoch, the image's Env, what the base has installed). The Debian
// packages, the image facts, the wheels, the git sources, the copy layer and the `run:` steps each
// append to this one state (build.cpp runs them in that order).
#include "builder/image/layer_builder.hpp"
#include "builder/lock/base_contents.hpp"
#include "runner/runtime/emulation.hpp"
#include "runner/runtime/subids.hpp"
#include "support/codec/compress.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/oci.hpp"
#include "support/store/blob_store.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::builder {

/// The image built so far, which every layer builder extends.
struct ImageState {
  const BlobStore* store = nullptr;
  Codec codec = Codec::gzip;
  std::int64_t epoch = 0;
  std::vector<oci::Descriptor> layers; ///< base first, then each appended layer
  std::vector<Digest> diff_ids;        ///< one per layer
  std::vector<bool> cached;            ///< one per appended layer (after the base image's)
  std::vector<std::string> history;    ///< created_by of each appended layer
  std::vector<std::string> env;        ///< the image's Env ("K=V"), which steps run with
  /// The variables the conda environment's activation sets (support/conda/activation.hpp), set by
  /// the conda layer; the image's Env has them after conda's own.
  std::vector<std::pair<std::string, std::string>> conda_activation;
  /// The image base's installed state, when the packages or wheels go over an image base: its
  /// dpkg database is extended, its links and directories are respected, a locked package it has
  /// at another version replaces that one.
  std::optional<BaseMetadata> base_metadata;
  /// Where the lock's local files may be read from (envspec::local_roots; support/net/http.hpp).
  std::vector<std::filesystem::path> local_roots;
  /// Unprivileged: subordinate ids for the steps run in the build sandbox (BuildOptions::subids).
  std::optional<runner::SubordinateIds> subids;
  /// An image of another architecture: its maintainer scripts and `run:` steps run under
  /// qemu-user, through the build sandbox's own binfmt_misc (runner/runtime/emulation.hpp).
  std::optional<runner::Emulation> emulation;
  /// Why another architecture's programs can't run here (no qemu-user-static): the error of the
  /// first step that needs them, not of a build without any.
  std::optional<Error> emulation_error;
  /// A step of the image ran under emulation (or its layer came from the cache of one): the
  /// provenance names the qemu-user interpreter among the builder's dependencies.
  bool emulated = false;

  /// The base's installed state, or null when the image has no image base.
  [[nodiscard]] const BaseMetadata* base() const { return base_metadata ? &*base_metadata : nullptr; }
};

/// Appends a built layer to `image` and logs it ("layer sha256:0123… 3.8 MiB CREATED_BY (cached)"),
/// or, given `shown_as`, under that name instead of its history entry (a `run:` step: "run[0]").
void append_layer(ImageState& image, const BuiltLayer& layer, const std::string& created_by,
                  const std::string& shown_as = {});

} // namespace lockstep::builder
