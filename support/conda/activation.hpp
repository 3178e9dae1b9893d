#pragma once
// The variables a conda environment's activation sets, read without running anything: conda
// (conda/activate.py) merges every `etc/conda/env_vars.d/*.json` in file-name order, then sources
// `etc/conda/activate.d/*.sh` in file-name order. An image can't source scripts before `lockstep exec
// IMAGE python` runs, so lockstep evaluates what can be known statically and puts it in the image's
// Env (docs/conda.md, "The image's environment"):
//   - env_vars.d files: every string value (a file that is not a JSON object of strings is left
//     out, and said so);
//   - activate.d scripts: each top-level `export NAME=VALUE` (and `unset NAME`), where VALUE is
//     literal text, 'single-quoted' or "double-quoted" with `$CONDA_PREFIX` / `${CONDA_PREFIX}`
//     and variables set before it in the activation. A statement inside a conditional, loop or
//     function, a command substitution, or a reference to any other variable is not evaluated: the
//     script is then listed as partly evaluated (its top-level exports still count).
// Names starting with `_CONDA_` (conda's own bookkeeping of the previous values) are not set.
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::conda {

struct Activation {
  std::vector<std::pair<std::string, std::string>> env; ///< in the order first set; later values replace
  std::vector<std::string> partly_evaluated;            ///< prefix paths of scripts and files not wholly read
};

/// True for the paths activation reads: etc/conda/env_vars.d/*.json and etc/conda/activate.d/*.sh.
bool is_activation_path(const std::string& path);

/// Evaluates `files` (prefix path -> bytes as installed, only activation paths) for a prefix at
/// `prefix`. Bounded: at most 4,096 statements per script and 64 KiB per value.
Activation evaluate_activation(const std::map<std::string, std::string>& files, const std::string& prefix);

} // namespace lockstep::conda
