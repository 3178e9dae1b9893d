#pragma once
// `lockstep build`: from a validated spec to image outputs, as a list of passes (build.cpp).
#include "builder/image/layer_builder.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "runner/runtime/subids.hpp"
#include "support/base/result.hpp"
#include "support/git/git_info.hpp"
#include "support/oci/image_writer.hpp"
#include "support/oci/oci.hpp"
#include "support/oci/squashfs.hpp"
#include "support/registry/client.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::builder {

/// Command-line choices that override or complete the spec.
struct BuildOptions {
  /// Output paths given on the command line; when any is set, the spec's `outputs` paths are ignored.
  std::optional<std::filesystem::path> oci;
  std::optional<std::filesystem::path> oci_archive;
  std::optional<std::filesystem::path> docker_archive;
  std::optional<std::filesystem::path> sif;
  /// SBOM files (`--sbom`): *.spdx.json or *.cdx.json; with the other output paths, replaces the
  /// spec's `outputs.sbom`.
  std::vector<std::filesystem::path> sbom;
  /// `--provenance FILE`: also write the build's SLSA provenance statement there (it is always kept
  /// in the store, by manifest digest, for push to attach: provenance_record()).
  std::optional<std::filesystem::path> provenance;
  /// `--sif-compression`, overriding `outputs.sif_compression`.
  std::optional<SquashfsCompressor> sif_compression;
  /// `--tag`: "TAG" or "NAME:TAG"; default "latest" with the spec's name.
  std::string tag;
  /// `--compression`, overriding `outputs.compression`.
  std::optional<Codec> compression;
  /// Record the spec's git revision in the manifest (off with --no-vcs).
  bool vcs_annotations = true;
  /// The lock a spec with packages, a Debian base or git sources is built from (cli::lock_for_build).
  /// Its epoch is the image's; nothing it does not name is fetched.
  std::optional<envspec::Lock> lock;
  /// The blob store root (default settings::store_root()).
  std::optional<std::filesystem::path> store_root;
  /// How a base image in a registry (`base: {image: docker://...}`) is reached: TLS, connections,
  /// timeouts (the CLI's registry flags).
  registry::ClientOptions registry;
  /// Unprivileged: the subordinate ids the build sandbox maps (`--userns`), or nullopt for a single
  /// id (runner/runtime/subids.hpp). Either gives the same image.
  std::optional<runner::SubordinateIds> subids;
};

/// One written output.
struct WrittenOutput {
  std::string kind; ///< "oci", "oci-archive", "docker-archive", "sif", "sbom"
  std::filesystem::path path;
  [[nodiscard]] std::string reference() const; ///< e.g. "oci:build/hello:latest"
};

/// What a build produced.
struct BuildResult {
  oci::Descriptor manifest;            ///< the manifest blob
  oci::Descriptor config;              ///< the config blob
  std::vector<oci::Descriptor> layers; ///< all layers, base first
  std::vector<Digest> diff_ids;
  std::size_t base_layer_count = 0;
  std::vector<bool> layer_cached; ///< for the layers lockstep built (after the base layers)
  std::vector<WrittenOutput> outputs;
  std::int64_t epoch = 0;
  std::string ref_name; ///< tag recorded in index.json
  std::string repo_tag; ///< "name:tag"
  std::optional<GitInfo> git;
  bool impure = false; ///< a `run:` step had the network (annotated dev.lockstep.impure)
  /// A multi-platform build (`platforms:`): each platform's result, in the spec's order; then
  /// `manifest` is their image index and the layers are each platform's own.
  std::vector<BuildResult> platforms;
};

/// True when the command line names an output (--oci, --oci-archive, --docker-archive, --sif,
/// --sbom): then they replace all of the spec's `outputs` paths.
bool cli_outputs(const BuildOptions& options);

/// The image as the output writers take it (oci::StoredImage): the manifest and every blob it names.
oci::StoredImage stored_image(const BuildResult& result);

/// The SLSA provenance statement a build of the image `manifest` kept in `store`, if any.
std::optional<std::string> provenance_record(const BlobStore& store, const Digest& manifest);

/// Builds the image the spec describes and writes its outputs. A spec of several platforms
/// (`platforms:`) is built by build_platforms (platforms_build.hpp), which calls this per platform.
Result<BuildResult> build_image(const envspec::Spec& spec, const BuildOptions& options);

} // namespace lockstep::builder
