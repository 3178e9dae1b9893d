#pragma once
// A conda environment.yml (CEP 24) read as conda reads it, for `lockstep init --from environment.yml`:
// its channels in order and its dependencies as conda MatchSpecs, kept as conda packages (the
// issue-36 way; `init --translate` maps them to PyPI and Debian instead, python_inputs.hpp). Every
// MatchSpec is parsed (leniently, as conda reads environment files), and one that can't be is an
// error at its line with a caret under the byte.
#include "envspec/yaml/node.hpp"
#include "support/base/result.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

/// What an environment.yml asks for.
struct CondaEnvFile {
  std::string name;                  ///< `name:`, "" when absent
  std::vector<std::string> channels; ///< `channels:` in order, without `nodefaults`
  bool nodefaults = false;           ///< `nodefaults` listed: conda adds no default channels
  std::vector<std::string> specs;    ///< the conda dependencies, as written (trimmed)
  std::vector<std::string> pip;      ///< the `pip:` section's requirements
  std::string python;                ///< "3.11" when a dependency pins python's X.Y, else ""
  int python_line = 0;               ///< its line
  /// "12.1" when pytorch-cuda, cuda-version or cudatoolkit is pinned to an X.Y: the CUDA the
  /// environment is for, which a lock on a machine without a GPU must be told (__cuda).
  std::string cuda;
  std::vector<std::string> notes; ///< what the spec can't say ("variables: ...")
};

/// One package of an installed conda environment, from its conda-meta record.
struct CondaPrefixPackage {
  std::string name;
  std::string version;
  std::string build;
  std::string channel; ///< the channel's URL: the record's url without "/SUBDIR/FILE"
  std::string sha256;  ///< "" when the record has none (conda before 4.7 wrote only md5)
  std::string md5;
};

/// An installed conda environment (`lockstep init --from env` / `--from PREFIX`): its conda-meta
/// records, sorted by name. Records without a URL (installed from a local file) are listed in
/// `unpinnable`. The records are hostile input: bounded JSON, at most 64 MiB each.
struct CondaPrefix {
  std::vector<CondaPrefixPackage> packages;
  std::vector<std::string> unpinnable; ///< "name version build: why"
};

/// Reads PREFIX/conda-meta/*.json. invalid_input naming the file for a record that is not JSON or
/// lacks name, version or build; io errors as they come.
Result<CondaPrefix> read_conda_prefix(const std::string& prefix);

/// The MatchSpec that pins `p` exactly: "CHANNEL::NAME==VERSION=BUILD[sha256=HEX]" (md5 when the
/// record has no sha256), the channel by its canonical name ("conda-forge").
std::string exact_match_spec(const CondaPrefixPackage& p);

/// The root of an environment.yml: a map with a `dependencies:` list (the shape both readers of
/// the file need); invalid_input naming `what` otherwise.
Result<Node> environment_root(std::string_view text, const std::string& what);

/// Reads an environment.yml (`what` names it in messages). invalid_input, located: a file that is
/// not a map with `dependencies:`, an entry that is neither a string nor `{pip: [...]}`, a MatchSpec
/// conda can't read, a channel that is not a string.
Result<CondaEnvFile> read_conda_env_file(std::string_view text, const std::string& what);

} // namespace lockstep::envspec
