#pragma once
// Preflight: the node-local checks `lockstep run` makes on every node before any rank starts, and
// what `lockstep preflight` prints. A node's checks, in a fixed order:
//   image   the image is there, with the expected digest
//   driver  the NVIDIA driver is at least the image's CUDA floor      (GPUs requested)
//   gpus    the node has as many GPUs as requested per node           (GPUs requested)
//   mpi     the host's mpirun is the image's MPI, same major.minor    (hybrid model)
//   pmix    the host's PMIx and the image's have the same major       (hybrid model)
//   userns  user namespaces work (not needed as root)
//   space   the cache's file system can hold the unpacked image
// Every check is in every report (skipped when it doesn't apply), so reports of several nodes
// form one table. Evaluation is a pure function of the request and the probes. docs/launch.md.
#include "envspec/lock/image_facts.hpp"
#include "runner/launch/host_probe.hpp"
#include "runner/runtime/exec.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/oci.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// What a launch needs from each node.
struct PreflightRequest {
  std::string image;               ///< the IMAGE argument as `lockstep exec` takes it
  std::string image_digest;        ///< "sha256:..." expected; "" = any
  std::string model = "hybrid";    ///< hybrid | container
  std::string launcher = "mpirun"; ///< local | mpirun | slurm
  int gpus_per_node = 0;
  envspec::ImageFacts facts;      ///< what the image records (its labels, or given by the caller)
  std::uint64_t unpack_bytes = 0; ///< the unpacked image's size; 0 = nothing to unpack
  bool prepare_store = false;     ///< create the node's store if missing (staging sends files into its tmp/)
  /// When the node passes, hold the ranks' container there (runner/runtime/hold.hpp) for the ranks
  /// of this `lockstep exec` line, started in `hold_cwd` (mpirun's, which the ranks inherit).
  std::vector<std::string> hold_exec;
  std::string hold_cwd;
  /// The ranks' report directory: the node keeps their gate (lockstep _rank --gate) from before its
  /// checks, prints its report, then waits for the launching node's word (`go` or `stop`) on stdin
  /// and answers the ranks with it until stdin ends. "": no gate.
  std::string gate;
};

/// One check's outcome; `detail` is one line a user understands (what was found, what to do).
struct Check {
  enum class Status { ok, warn, fail, skipped };
  std::string name;
  Status status = Status::ok;
  std::string detail;
  bool operator==(const Check&) const = default;
};

/// "ok", "warn", "fail", "skipped" (the JSON form).
std::string_view status_name(Check::Status status);

/// What a node has, for the run record; "" / 0 when absent.
struct HostFacts {
  std::string mpi_impl; ///< "openmpi", "mpich", "unknown", ""
  std::string mpi_version;
  std::string pmix;
  std::string ucx;
  std::string driver;
  int gpus = 0;
  bool operator==(const HostFacts&) const = default;
};

/// One node's preflight.
struct NodeReport {
  std::string node;
  std::vector<Check> checks;
  HostFacts host;
  /// True when no check failed (warnings and skipped checks pass).
  [[nodiscard]] bool ok() const;
  /// The check named `name`, or nullptr.
  [[nodiscard]] const Check* find(std::string_view name) const;
  bool operator==(const NodeReport&) const = default;
};

/// The image as this node sees it.
struct ImageProbe {
  enum class State { present, missing, unreadable };
  State state = State::missing;
  std::string path; ///< the file or directory named, for messages
  ImageArg::Kind kind = ImageArg::Kind::oci;
  std::optional<Digest> digest; ///< see image_digest(); nullopt for a directory
  std::string error;            ///< unreadable: why
  /// The image's platform, as this node would run it ("linux/arm64": the config's, a SIF's
  /// header's; of an index, the entry for this node's platform); "" for a directory.
  std::string platform;
};

/// The digest that identifies an image: for oci:/oci-archive:/docker-archive: the manifest digest
/// of the selected image, or of the image index it was picked from by this node's platform (every
/// node of a job over a multi-platform image has the same index, each its own manifest); for a SIF, sha256 of
/// the whole file (remembered in the cache by the file's device, inode, size and times, see sif_content_key,
/// so an unchanged file is hashed once); nullopt for a directory, which has no digest.
Result<std::optional<Digest>> image_digest(const ImageArg& image);

/// Looks at IMAGE (`lockstep exec`'s forms): missing when its file or directory doesn't exist,
/// unreadable when it can't be parsed or hashed, else present with its digest. Never fails.
ImageProbe probe_image(std::string_view image);

/// The facts in an image's dev.lockstep.* config labels (a SIF's oci-config.json object); empty
/// facts for a directory or an image without them. A malformed label is invalid_input.
Result<envspec::ImageFacts> image_facts(const ImageArg& image);

/// The lock digest annotation or label (oci::k_annotation_lock_digest), by the name runner/ uses.
inline constexpr std::string_view k_lock_digest_key = oci::k_annotation_lock_digest;

/// What `lockstep run` needs to know of an image before anything starts.
struct ImageDescription {
  std::optional<Digest>
      digest;                ///< as image_digest(): manifest digest, or sha256 of a SIF; none for a directory
  std::string lock_digest;   ///< k_lock_digest_key, "" when the image doesn't carry it
  envspec::ImageFacts facts; ///< as image_facts()
  std::string gpu_min_cc;    ///< label dev.lockstep.gpu.min-cc (the stack's lowest compute capability), or ""
  /// Room the unpacked image needs: an estimate of 3x the compressed layers for OCI images; 0 for a
  /// SIF (mounted in place) and a directory.
  std::uint64_t unpack_bytes = 0;
};

/// Reads the image's digest, lock digest, facts and unpack estimate (the manifest and config once).
Result<ImageDescription> describe_image(const ImageArg& image);

/// The checks for `request` on a host and image probed as given (pure).
NodeReport evaluate_preflight(const PreflightRequest& request, const HostProbe& host,
                              const ImageProbe& image);

/// Probes this host and the image, then evaluates. Errors only for a malformed request (model,
/// launcher, digest): invalid_input.
Result<NodeReport> preflight_node(const PreflightRequest& request);
/// Same with the image already probed (a caller that reads the image's facts first).
Result<NodeReport> preflight_node(const PreflightRequest& request, const ImageProbe& image);

/// The report as one JSON object, keys in this order:
///   {"preflight":1,"node":"n1","ok":false,
///    "checks":[{"name":"image","status":"ok","detail":"..."}, ...],
///    "host":{"mpi_impl":"openmpi","mpi_version":"4.1.4","pmix":"4.2.2rc2","ucx":"1.13.1",
///            "driver":"","gpus":0}}
nlohmann::ordered_json to_json(const NodeReport& report);

/// Parses one line of to_json() output from another node, strictly: at most 64 KiB, every key
/// required and no others, known statuses, unique check names, printable text of bounded length,
/// and "ok" consistent with the checks. Anything else is invalid_input saying what.
Result<NodeReport> node_report_from_json(std::string_view line);

/// One table: a row per node (natural order: n2 before n10), a column per check, cells "ok",
/// "WARN", "FAIL", "-" (skipped or absent); then, for each warning and failure, a line
/// "NODE  CHECK: DETAIL". Plain text, deterministic.
std::string render_preflight_table(const std::vector<NodeReport>& reports);

} // namespace lockstep::runner
