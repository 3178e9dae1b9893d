#pragma once
// The `stack:` solver: from version constraints on CUDA, cuDNN, NCCL, MPI, Python and a framework
// (`stack: {framework: pytorch@2.1, cuda: "12"}`) to concrete, compatible choices and the package
// requests that deliver them (NVIDIA CUDA repository names, Debian packages, pinned wheels). It
// works from the recipes alone (envspec/stack/recipes.hpp), so `lockstep check` runs it offline; `lockstep
// lock` adds its requests to the spec's own and records its choices, with the facts behind them, in
// the lock. docs/spec.md (`stack:`) and docs/recipes.md.
//
// Only usable recipe rows (not `confidence: unverified`) take part. Among the combinations that
// satisfy every constraint the solver prefers, in order: the newest framework release and version;
// the variant PyPI's plain wheel is, then stable before experimental; the newest CUDA; the newest
// cuDNN and NCCL. An impossible stack is an error located at the constraint to change, listing what
// would work instead.
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "envspec/stack/recipes.hpp"
#include "support/base/result.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::envspec {

/// What the solver needs to know of the rest of the spec.
struct StackContext {
  std::string debian_suite; ///< `base: {debian: SUITE}`, "" for other bases
  /// Over an image base, what its dpkg database says it has (builder::stack_context_over_base):
  std::string base_name;         ///< the base as the lock names it, for messages
  std::string base_cuda;         ///< "12.4" when cuda-cudart-12-4 is installed, else ""
  std::string base_cuda_package; ///< "cuda-cudart-12-4 12.4.127-1"
  std::string base_python;       ///< "3.10" when python3.10 is installed, else ""
  /// `base.python`: the base's own interpreter (not a Debian package), whose X.Y is base_python;
  /// the stack installs no Python then.
  std::string base_python_path;
  /// The spec installs a conda environment (`packages.conda`): the stack's parts are conda packages
  /// from its channels (`cuda-version`, `pytorch-cuda`, `nccl`, ...), not Debian packages or wheels,
  /// and the base's CUDA and Python play no part.
  bool conda = false;
  /// The image's platform ("linux/arm64"): a framework's wheels come from the variants published
  /// for it (FrameworkVariant::platforms), and only linux/amd64 requests the recipes' Requires-Dist
  /// pins (they are read from the x86_64 wheels). "" takes every variant (explaining).
  std::string platform = "linux/amd64";
};

/// The solver's answer.
struct StackSolution {
  LockedStack locked;                ///< what the lock records (choices, facts, driver floor, ...)
  std::vector<PackageRequest> apt;   ///< apt requests, `origin` "stack.<component>"; versions may be globs
  std::vector<PackageRequest> pip;   ///< pinned wheel requirements ("torch==2.1.2"), same origins
  std::vector<PackageRequest> conda; ///< conda MatchSpecs ("pytorch 2.3.1.* *cuda*"), same origins
};

/// The context of `spec` (its Debian suite).
StackContext stack_context(const Spec& spec);

/// Solves `request` against `recipes`. An impossible request is invalid_input whose message is a
/// rendered diagnostic at the offending `stack` key (Error::rendered), listing what would work.
/// Over a base with CUDA the stack's CUDA is the base's (another `stack.cuda` is refused there, naming
/// the base); over a base with a Debian python3.X (or `base.python`), that is the stack's Python.
Result<StackSolution> solve_stack(const StackRequest& request, const RecipeSet& recipes,
                                  const StackContext& context);

/// Over conda (StackContext::conda), what the conda solve chose completes the stack: each choice
/// takes the version of the conda package that delivers it, with the record it came from as a fact;
/// a component the stack didn't ask for but the environment has (cuDNN and NCCL that pytorch pulls
/// in, the Python) joins as a choice saying why it is there; a CUDA the stack left open becomes the
/// solved `cuda-version`'s, with its driver floor. `conda` is the lock's conda artifacts.
void complete_conda_stack(LockedStack& stack, const RecipeSet& recipes,
                          const std::vector<LockedArtifact>& conda);

/// Human-readable lines describing a solution ("cuda       12.1      apt     cuda-cudart-12-1"),
/// then the driver floor and NVIDIA_REQUIRE_CUDA, for `lockstep check` and `lockstep lock`.
std::vector<std::string> describe_stack(const LockedStack& stack);

/// The image config additions a locked stack implies: env NVIDIA_REQUIRE_CUDA (when CUDA is in
/// the stack) and the dev.lockstep.* labels of the choices (dev.lockstep.stack.<component> =
/// "<name> <version>[ <variant>]", dev.lockstep.gpu.min-cc, dev.lockstep.gpu.archs).
struct StackImageConfig {
  std::vector<std::pair<std::string, std::string>> env;
  std::map<std::string, std::string> labels;
};
StackImageConfig stack_image_config(const LockedStack& stack);

} // namespace lockstep::envspec
