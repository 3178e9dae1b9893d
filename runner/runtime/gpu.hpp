#pragma once
// GPU passthrough for `lockstep exec --gpus` (Apptainer's `--nv`): which host files and device
// nodes a container needs to use the host's NVIDIA driver. This module only plans; the runtime
// (runner/runtime/sandbox) performs the binds. docs/gpu.md describes the rules; the file list is data in
// recipes/gpu/nvidia.yaml.
#include "support/base/result.hpp"

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::runner {

/// The host whose driver is passed through. Tests point `root` at a fake tree; every host path
/// (/proc/driver/nvidia, /dev, /etc/ld.so.cache, the paths inside the cache) is read under it.
struct GpuHost {
  std::filesystem::path root = "/";
};

/// One bind mount: a host file (already under GpuHost::root, symlinks resolved) at a container path.
struct GpuBind {
  std::filesystem::path source;
  std::string target;
  bool read_only = true;
};

/// What the runtime must do for `--gpus`.
struct GpuPlan {
  /// Host driver libraries -> /.singularity.d/libs/<name in the ld.so cache>, binaries ->
  /// /usr/bin/<name>, config files at their own path, daemon sockets (read-write) if present.
  /// Order: libraries sorted by target, then binaries, files and sockets in recipe order.
  std::vector<GpuBind> binds;
  /// Host paths (under GpuHost::root) of the device nodes to expose: the control nodes, then
  /// /dev/nvidia<minor> of each selected GPU. Each is bound at /dev/<file name> in the container.
  std::vector<std::string> device_nodes;
  /// False when only some GPUs were selected: the runtime must then hide the others, which are
  /// listed in `hidden_device_nodes` (container paths such as "/dev/nvidia1").
  bool all_devices = true;
  std::vector<std::string> hidden_device_nodes;
  /// Variables for the container, in this order: NVIDIA_VISIBLE_DEVICES (set, overriding the
  /// image), then LD_LIBRARY_PATH = "/.singularity.d/libs", which is appended to the container's
  /// final LD_LIBRARY_PATH (see merge_gpu_env) rather than replacing it.
  std::vector<std::pair<std::string, std::string>> env;
  /// The running driver's version, from /proc/driver/nvidia/version ("535.104.05").
  std::string driver_version;
};

/// Plans passthrough of the GPUs named by `visible_devices`: "all" or "" (every GPU), "none"
/// (the driver without any GPU), "void" (nothing at all: an empty plan), or a comma-separated
/// list of indices ("0,1"), UUIDs ("GPU-<uuid>") and PCI addresses ("0000:3b:00.0").
/// Errors: no driver on the host -> external (exit 3); a GPU that does not exist -> invalid_input.
Result<GpuPlan> plan_gpu_passthrough(std::string_view visible_devices, const GpuHost& host);

/// The selection `--gpus` stands for: the flag's value when given; otherwise the host's
/// NVIDIA_VISIBLE_DEVICES when set and not empty (`host_env`, nullptr when unset); otherwise "all".
std::string effective_gpu_selection(const std::optional<std::string>& flag_value, const char* host_env);

/// The host to plan for: `/`, or $LOCKSTEP_GPU_HOST_ROOT when set (a test hook for fake trees).
GpuHost gpu_host_from_env();

/// Applies plan.env to a container environment given as NAME=VALUE strings: NVIDIA_VISIBLE_DEVICES
/// replaces any value; "/.singularity.d/libs" is appended to LD_LIBRARY_PATH (added when absent or
/// empty), as Apptainer's env scripts do. Call after the image and --env values are in place.
void merge_gpu_env(const GpuPlan& plan, std::vector<std::string>& environment);

/// One GPU as /proc/driver/nvidia/gpus/<PCI address>/information describes it.
struct InventoryGpu {
  std::string bus_id; ///< "0000:3b:00.0"; "" for a /dev/nvidiaN stand-in
  std::string model;  ///< the "Model:" line ("NVIDIA H100 80GB HBM3"); "" when unknown
  std::string uuid;   ///< "GPU-..."; "" when unknown
  int minor = -1;     ///< N of /dev/nvidiaN
};

/// The host's driver and GPU count, as `lockstep preflight` reports them.
struct GpuInventory {
  std::string driver_version; ///< "535.104.05"; "" when no NVIDIA driver is loaded
  std::size_t gpu_count = 0;
  std::vector<InventoryGpu> gpus; ///< in PCI bus order (NVML's numbering); gpu_count entries
};

/// Reads the driver version and counts the GPUs from the same sources as plan_gpu_passthrough. No
/// driver is not an error (an empty inventory); an unreadable version or GPU list is (external).
Result<GpuInventory> gpu_inventory(const GpuHost& host);

/// What recipes/gpu/nvidia.yaml says (see that file for the meaning of each field).
struct GpuRecipe {
  struct Library {
    std::string name;       ///< file-name prefix matched against ld.so.cache names
    std::string capability; ///< utility, compute, video, graphics or ngx
    bool driver_versioned = true;
  };
  struct Item {
    std::string name; ///< binary name or relative/absolute path
    std::string capability;
  };
  struct ControlDevice {
    std::string name; ///< file name under /dev
    bool required = false;
  };
  std::vector<std::string> config_dirs;
  std::vector<Library> libraries;
  std::vector<Item> binaries;
  std::vector<Item> files; ///< relative to each of config_dirs
  std::vector<Item> ipc;   ///< absolute host paths
  std::vector<ControlDevice> control_devices;
  std::string gpu_device_prefix = "nvidia";
};

/// Parses a GPU recipe; `origin` is the file name used in located diagnostics.
Result<GpuRecipe> parse_gpu_recipe(std::string_view text, const std::filesystem::path& origin);

/// The NVIDIA recipe: $LOCKSTEP_RECIPES_DIR/gpu/nvidia.yaml when that variable is set, otherwise
/// the copy embedded in the binary at build time.
Result<GpuRecipe> load_gpu_recipe();

/// plan_gpu_passthrough with an explicit recipe (tests).
Result<GpuPlan> plan_gpu_passthrough(std::string_view visible_devices, const GpuHost& host,
                                     const GpuRecipe& recipe);

} // namespace lockstep::runner
