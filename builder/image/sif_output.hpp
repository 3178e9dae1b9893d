#pragma once
// The SIF output (`outputs.sif`, `lockstep build --sif FILE`): an image from the store written as
// a Singularity Image Format file that Apptainer and SingularityCE run. docs/sif.md describes the
// objects, the /.singularity.d layout, determinism and the cache.
//
// Objects, all in group 1:  1 Def.FILE      the spec file as written
//                           2 JSON.Labels   labels.json (also at /.singularity.d/labels.json)
//                           3 JSON.Generic  lockstep.json: manifest, config and spec digests
//                           4 JSON.Generic  oci-config.json: the OCI config's `config` member
//                           5 FS            the root file system: squashfs, PrimSys, the arch
// Cache: ROOT/records/sif/<fingerprint> names the finished SIF blob in the store; the fingerprint
// covers every byte that goes in (layers, config, objects, epoch, squashfs settings, libraries).
#include "support/base/result.hpp"
#include "support/oci/image_writer.hpp"
#include "support/oci/squashfs.hpp"
#include "support/store/blob_store.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace lockstep::builder {

/// What a SIF carries besides the image in the store.
struct SifSettings {
  std::string deffile; ///< the Def.FILE object: the spec file's bytes
  Digest spec_digest;  ///< the canonical spec digest (recorded in lockstep.json)
  std::string arch;    ///< OCI architecture ("amd64"); SIF needs a code for it
  SquashfsCompressor compression = SquashfsCompressor::gzip;
};

/// The SIF that was written.
struct SifResult {
  Digest digest; ///< sha256 of the whole file (its blob in the store)
  std::int64_t size = 0;
  bool cached = false; ///< copied from the SIF cache, nothing rebuilt
};

/// Writes `image` (its blobs in `store`) as a SIF at `path`, atomically (temp, fsync, rename), mode
/// 0755 like Apptainer's. A SIF with the same fingerprint in the store is copied instead of rebuilt.
Result<SifResult> write_sif(const BlobStore& store, const oci::StoredImage& image,
                            const SifSettings& settings, const std::filesystem::path& path);

/// labels.json: Apptainer's build labels (schema version, build date and arch, created), the
/// manifest's org.opencontainers.image.* annotations, then the image config's Labels (which win);
/// tab-indented like Apptainer's.
std::string sif_labels(const nlohmann::json& config, const std::map<std::string, std::string>& annotations,
                       std::int64_t epoch, const std::string& arch);
/// /.singularity.d/runscript for an image config's Entrypoint and Cmd, as Apptainer's OCI conveyor
/// writes it (OCI_ENTRYPOINT / OCI_CMD, shell-evaluated by default, exact with SINGULARITY_NO_EVAL).
std::string sif_runscript(const nlohmann::json& config);
/// /.singularity.d/env/10-docker2singularity.sh for the config's Env: PATH exported as is, other
/// variables only when the host did not set them; names that are not shell names are skipped.
std::string sif_env_script(const nlohmann::json& config);
/// One entry of the Apptainer layout added over the image's root file system.
struct LayoutEntry {
  /// `always`: lockstep's file replaces the image's; `if_absent`: an existing path is kept (the
  /// mount points, /etc/hosts, the root symlinks).
  enum class When { always, if_absent };
  SquashfsEntry entry;
  When when = When::always;
};
/// The /.singularity.d files and directories, the root symlinks (`singularity`, `.run`, ...), the
/// mount points and empty /etc/hosts and /etc/resolv.conf (docs/sif.md, "Inside the image").
std::vector<LayoutEntry> singularity_layout(const nlohmann::json& config, const std::string& labels);

} // namespace lockstep::builder
