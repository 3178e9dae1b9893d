#pragma once
// Staging (docs/launch.md, "Staging"): `lockstep run` with an image that some node lacks copies it
// into each such node's store before any rank starts, and the ranks run the store's copy:
//   oci:STORE/images/sha256-HEX   an OCI layout whose blobs are hard links into STORE/blobs
//   sif:STORE/blobs/sha256/HEX    a SIF, itself one blob
// The copy travels as a bundle (the image's blobs, each named by digest and size): under mpirun
// through the rsh agent preflight uses, as a tree (each node writes its copy while it forwards the
// stream to up to `width` other nodes); under Slurm as one file sent with `sbcast`, then put into
// each node's store by one srun step. Every node checks every blob's digest before publishing it,
// so a copy damaged on the way is refused, naming the node. A store on a shared file system needs
// no copy: the nodes already see the launching node's copy (same store path, same digest).
//
// An image comes to staging as a StageImage: an OCI image whose manifest, config and layers are
// blobs in the launching node's store (oci::StoredImage, what a registry pull leaves), or a SIF
// file. stage_image_of() makes one from any local IMAGE argument.
#include "runner/launch/job.hpp"
#include "runner/launch/launch.hpp"
#include "runner/launch/preflight.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/image_arg.hpp"
#include "support/oci/image_writer.hpp"
#include "support/store/blob_store.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// An image lockstep run can copy to the nodes.
struct StageImage {
  enum class Kind { oci, sif };
  Kind kind = Kind::oci;
  oci::StoredImage oci;      ///< Kind::oci: the manifest, config and layers, all in the store
  Digest sif_digest;         ///< Kind::sif: sha256 of the file
  std::int64_t sif_size = 0; ///<
  std::filesystem::path sif; ///< Kind::sif: the file (in the store once stage_image_of() put it there)
  /// The image's digest: the manifest's (OCI) or the file's (SIF); what preflight checks.
  [[nodiscard]] const Digest& digest() const { return kind == Kind::oci ? oci.manifest.digest : sif_digest; }
  /// Every blob of the bundle, in the order they travel (OCI: manifest, config, layers).
  [[nodiscard]] std::vector<oci::Descriptor> blobs() const;
};

/// The image IMAGE names, its blobs put into `store`: an OCI layout's or archive's manifest, config
/// and layers fetched (digests verified); a SIF linked (or copied) in as one blob. A directory has no
/// digest and can't be staged (invalid_input).
Result<StageImage> stage_image_of(const ImageArg& image, const BlobStore& store);

/// An OCI image already in `store` (a registry pull): `image` as the pull describes it. Each blob
/// must be in the store (invalid_input naming the first that isn't).
Result<StageImage> stage_image_in_store(const BlobStore& store, const oci::StoredImage& image);

/// Places a staged image in `store` (the OCI layout written from the store's blobs when missing; a
/// SIF is its blob) and returns the IMAGE argument that names it there.
Result<std::string> place_staged(const BlobStore& store, const StageImage& image);

/// The bundle: "lockstep-stage 1", the image line ("image oci sha256:HEX" or "image sif sha256:HEX"),
/// then per blob a line "blob sha256:HEX SIZE" and its bytes, then "end". `sink` receives it in
/// chunks.
using ByteSink = std::function<Result<void>(const char* data, std::size_t size)>;
Result<void> write_bundle(const BlobStore& store, const StageImage& image, const ByteSink& sink);

/// Reads a bundle as it arrives: each blob written into `store` and published only when its digest
/// and size are right (invalid_input otherwise: the copy was damaged on the way).
class BundleReader {
public:
  explicit BundleReader(const BlobStore& store) : m_store(store) {}
  /// The next bytes of the bundle.
  Result<void> feed(const char* data, std::size_t size);
  /// After the last byte: the image received (an incomplete bundle is invalid_input).
  Result<StageImage> finish();

private:
  Result<void> header_line(std::string_view line);
  Result<void> commit_current();
  const BlobStore& m_store;
  std::string m_line;
  bool m_started = false;
  bool m_ended = false;
  StageImage m_image;
  bool m_have_image = false;
  std::vector<oci::Descriptor> m_blobs;
  std::optional<BlobStore::Writer> m_writer;
  oci::Descriptor m_current;
  std::int64_t m_left = 0;
};

/// Makes the staged image a StageImage again after a BundleReader wrote its blobs: OCI's manifest
/// read from the store for its config and layers.
Result<StageImage> staged_from_blobs(const BlobStore& store, const StageImage& received);

/// One node's outcome: `lockstep stage-receive` prints it as one JSON line,
/// {"stage":1,"node":"n1","ok":true,"image":"oci:/...","detail":"..."}.
struct StagedNode {
  std::string node;
  bool ok = false;
  std::string image;  ///< the IMAGE argument of the copy on that node ("" when it failed)
  std::string detail; ///< what was copied, or why it failed
  bool operator==(const StagedNode&) const = default;
};
std::string to_json_line(const StagedNode& node);
/// Parses one such line strictly (keys, types, bounded printable strings); invalid_input otherwise.
Result<StagedNode> staged_node_from_json(std::string_view line);

/// How staging reaches the nodes.
struct StageFanout {
  std::string lockstep;           ///< lockstep's path on the nodes
  std::vector<std::string> agent; ///< the rsh agent as argv words (rsh_agent())
  int width = 2;                  ///< nodes each node forwards the stream to
  std::chrono::seconds timeout{600};
};

/// The hosts `sender` forwards to in a tree of width `width` over `hosts`: `hosts` cut into up to
/// `width` contiguous groups; each group's first host is a child, the rest its own subtree.
std::vector<std::pair<std::string, std::vector<std::string>>>
tree_children(const std::vector<std::string>& hosts, int width);

/// Copies `image` (its blobs in `store`) into the stores of `nodes`, each node checking every digest
/// and placing the image as place_staged() does: under Slurm (plan.launcher) sbcast of the bundle
/// (a SIF: the file itself) to the allocation's nodes, then one `srun --nodelist=NODES lockstep
/// stage-receive` step; otherwise a tree through the rsh agent. Every command is appended to
/// `commands`. A node that doesn't answer is a failed StagedNode saying why.
Result<std::vector<StagedNode>> stage_to_nodes(const LaunchPlan& plan, const BlobStore& store,
                                               const StageImage& image, const std::vector<std::string>& nodes,
                                               const StageFanout& how,
                                               std::vector<std::vector<std::string>>& commands);

/// What staging did for a launch.
struct StageOutcome {
  std::string image; ///< the staged IMAGE argument every rank runs
  std::string how;   ///< "already there" (a shared store, an earlier staging), "sbcast", "rsh agent tree"
  std::vector<StagedNode> copied;  ///< the nodes copied to, with their outcomes
  std::vector<NodeReport> reports; ///< the preflight of every node with the staged image
};

/// Whether a failed preflight is one staging can mend: some node's `image` check failed, and no
/// other check failed anywhere.
bool only_image_missing(const std::vector<NodeReport>& reports);

/// Staging for a launch whose preflight found the image missing on some nodes: places `image` in
/// this node's store (place_staged), runs the preflight with that IMAGE on every node (`request`'s
/// other checks as before; each node's store created if missing), copies the image to the nodes
/// whose `image` check still fails (stage_to_nodes; a store every node shares needs no copy), and
/// runs the preflight once more on every node. Every command is appended to `commands`. The caller
/// runs the ranks with the outcome's `image` when its reports pass.
Result<StageOutcome> stage_for_launch(const LaunchPlan& plan, const PreflightRequest& request,
                                      const PreflightFanout& fanout, const BlobStore& store,
                                      const StageImage& image,
                                      std::vector<std::vector<std::string>>& commands);

/// What `lockstep stage-receive` does on a node.
struct ReceiveOptions {
  int in_fd = 0;                    ///< the bundle stream (stdin), unless `file` is given
  std::filesystem::path file;       ///< a bundle sent with sbcast (removed afterwards)
  std::filesystem::path sif_file;   ///< a SIF sent with sbcast (moved into the store)
  std::string sif_digest;           ///< its expected "sha256:..."
  std::vector<std::string> forward; ///< the subtree this node forwards the stream to
  StageFanout how;                  ///< how to reach it
};
/// Receives the image into this node's store (settings::store_root()), forwards the stream to
/// the subtree, and returns the outcome of this node followed by those of the subtree.
std::vector<StagedNode> receive_stage(const ReceiveOptions& options);

} // namespace lockstep::runner
