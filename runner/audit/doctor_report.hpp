#pragma once
// What `lockstep doctor` says about a captured host: the verdict for a target (an image or a lock)
// by preflight's rules, and the human report of the host, its Python environment and that verdict.
#include "envspec/lock/image_facts.hpp"
#include "runner/audit/capture.hpp"
#include "runner/audit/snapshot.hpp"
#include "runner/launch/preflight.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep::runner {

/// The preflight checks for a target with `facts` on the captured host, as `lockstep run` would
/// make them with its defaults: the hybrid MPI model, started by the host's mpirun when there is
/// one, else by Slurm when `sinfo`/`srun` answered, else locally; GPUs requested when the target
/// records CUDA. `image` is the probed image (its check is kept) or nullptr for a lock (no image,
/// space checks). Skipped checks are dropped. With `gpu_min_cc` (the target's lowest GPU compute
/// capability: dev.lockstep.gpu.min-cc, or the lock's stack) a "gpu-arch" check follows: every GPU
/// whose compute capability nvidia-smi reported must be at least that. Pure.
TargetReport evaluate_target(std::string kind, const std::string& ref, const envspec::ImageFacts& facts,
                             const Capture& host, const ImageProbe* image, std::uint64_t unpack_bytes,
                             std::string_view gpu_min_cc = {});

/// The human report: an aligned table of the host, its GPUs, the MPI stack and the Python
/// environment, then the target's verdict with one line per check. Deterministic.
std::string render_doctor_report(const Capture& capture, const std::optional<TargetReport>& target);

} // namespace lockstep::runner
