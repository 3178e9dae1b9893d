#pragma once
// What an image carries for its launchers: the MPI implementation and version, PMIx, UCX,
// libfabric, and the CUDA version with its driver floor. The build derives them from the lock
// (facts_from_lock) and records them twice: as config labels (dev.lockstep.*) and as the JSON file
// /.lockstep/facts.json inside the image. `lockstep run` reads them back from the labels to choose
// `srun --mpi=`, mpirun flags and the preflight checks. docs/spec.md ("What the image records"),
// docs/launch.md.
#include "envspec/lock/lockfile.hpp"
#include "support/base/result.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

/// One recorded component: its upstream version ("4.1.4", no epoch or Debian revision) and the
/// locked artifact it came from ("openmpi-bin 4.1.4-3+b1").
struct FactSource {
  std::string version;
  std::string from;
  bool operator==(const FactSource&) const = default;
};

/// The facts of one image. Empty strings mean "not in the image".
struct ImageFacts {
  std::string mpi_impl;          ///< "openmpi", "mpich" or ""
  FactSource mpi;                ///< the MPI library (libopenmpi3 / libmpich12, else the launcher package)
  FactSource pmix;               ///< libpmix2
  FactSource ucx;                ///< libucx0
  FactSource libfabric;          ///< libfabric1
  FactSource cuda;               ///< "12.1" (major.minor), from cuda-cudart-X-Y / cuda-toolkit-X-Y
  std::string cuda_driver_floor; ///< the lowest Linux driver for that CUDA ("530.30.02"), "" if unknown
  bool operator==(const ImageFacts&) const = default;
  /// True when nothing is recorded.
  [[nodiscard]] bool empty() const { return *this == ImageFacts{}; }
};

/// The path of the JSON file inside the image.
inline constexpr std::string_view k_facts_path = "/.lockstep/facts.json";

/// Labels and annotations under this prefix are lockstep's own; a spec may not set them (the build
/// refuses such a label), so that what `lockstep run` reads from them is what the build recorded.
inline constexpr std::string_view k_reserved_label_prefix = "dev.lockstep.";

/// One row of NVIDIA's "CUDA Toolkit and Corresponding Driver Versions" table (Table 3 of the CUDA
/// release notes), as recipes/cuda/drivers.yaml holds it.
struct CudaDriverRow {
  std::string cuda;         ///< the toolkit release, "12.1.0"
  std::string release;      ///< NVIDIA's name for it: "GA", "Update 1", "RC"
  std::string linux_driver; ///< the Linux x86_64 driver that release shipped with, "530.30.02"
};

/// The CUDA toolkit -> driver table (recipes/cuda/drivers.yaml).
struct CudaDriverTable {
  std::vector<CudaDriverRow> rows;
  /// The Linux driver of the GA row of `major_minor` ("12.1" -> "530.30.02"); "" when the table
  /// has no GA row for it.
  [[nodiscard]] std::string floor_for(std::string_view major_minor) const;
};

/// Parses recipes/cuda/drivers.yaml (`text`, read from `origin`). Unknown keys, rows without a
/// known `source:`, malformed versions or drivers and two GA rows for one X.Y are invalid_input,
/// all reported together with their file:line:column.
Result<CudaDriverTable> parse_cuda_driver_table(std::string_view text, const std::filesystem::path& origin);

/// The upstream part of a Debian version: without the epoch and the last "-revision"
/// ("1:2.3-4" -> "2.3", "4.1.4-3+b1" -> "4.1.4", "1.14" -> "1.14"); "" when `debian_version`
/// is not a valid Debian version.
std::string upstream_version(std::string_view debian_version);

/// Derives the facts from a lock's apt and conda artifacts (package names are matched, versions
/// reduced to upstream; docs/spec.md lists the names: conda's openmpi, mpich, ucx, libfabric, and
/// cuda-version, else cudatoolkit or cuda-cudart, for CUDA). Deterministic; the CUDA driver floor comes from
/// `drivers`, so without a table, or for a CUDA version it lacks, cuda_driver_floor stays empty.
/// The build passes the embedded recipe (builder::image_facts_for).
ImageFacts facts_from_lock(const Lock& lock, const CudaDriverTable& drivers = {});

/// The labels (dev.lockstep.mpi.impl, dev.lockstep.mpi.version, dev.lockstep.pmix.version,
/// dev.lockstep.ucx.version, dev.lockstep.libfabric.version, dev.lockstep.cuda.version,
/// dev.lockstep.cuda.driver-floor); only the non-empty ones.
std::map<std::string, std::string> facts_labels(const ImageFacts& facts);

/// Reads facts back from an image config's labels (other labels are ignored; the `from` fields
/// stay empty, labels hold versions only). A malformed value (not a version, an unknown MPI
/// implementation) or an inconsistent set (a version without its implementation, a driver floor
/// without a CUDA version) is invalid_input naming the label.
Result<ImageFacts> facts_from_labels(const std::map<std::string, std::string>& labels);

/// The JSON document written to /.lockstep/facts.json (fixed key order, sources included).
nlohmann::ordered_json facts_json(const ImageFacts& facts);

/// The bytes of /.lockstep/facts.json: facts_json() indented by two spaces, with a final newline.
std::string render_facts_file(const ImageFacts& facts);

} // namespace lockstep::envspec
