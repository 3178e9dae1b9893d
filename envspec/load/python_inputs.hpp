#pragma once
// The Python project files people already have, read into requirements for `packages.pip` (and for
// `lockstep init --from`): a pyproject.toml's `[project]` dependencies and optional dependencies
// (PEP 621), and a conda environment.yml, whose conda packages are mapped through
// recipes/conda/conda-names.yaml to PyPI projects, Debian packages or `stack:` components, and whose
// `pip:` section is taken as is. See docs/python-resolver.md ("Inputs").
#include "support/base/result.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

/// One requirement read from a project file, and where it was written.
struct ImportedRequirement {
  std::string text;  ///< a PEP 508 requirement ("numpy>=1.26"); for stack items the constraint ("12.1")
  std::string where; ///< "pyproject.toml:12", "environment.yml:7"
};

/// The `[project]` requirements of a pyproject.toml (`what` names it in messages): `dependencies`,
/// then `optional-dependencies` of each of `extras` in order (an extra that names the project
/// itself, `name[other]`, is expanded in place). A file without `[project]`, with dynamic
/// dependencies, with a value of the wrong type, an invalid requirement or an unknown extra is
/// invalid_input, all problems listed.
Result<std::vector<ImportedRequirement>> read_pyproject(std::string_view text, const std::string& what,
                                                        const std::vector<std::string>& extras);

/// What `lockstep init` wants to know of a pyproject.toml besides its requirements.
struct PyProjectInfo {
  std::string name;                ///< [project].name, or ""
  std::string requires_python;     ///< [project].requires-python, or ""
  std::vector<std::string> extras; ///< the [project.optional-dependencies] names, sorted
};

/// Reads those of a pyproject.toml; invalid TOML is invalid_input.
Result<PyProjectInfo> read_pyproject_info(std::string_view text, const std::string& what);

/// A conda environment.yml as lockstep requests.
struct CondaEnv {
  std::optional<ImportedRequirement> python; ///< the `python` pin as a stack.python constraint ("3.11")
  std::vector<ImportedRequirement> pip; ///< conda packages PyPI has and the `pip:` section, in file order
  std::vector<ImportedRequirement> apt; ///< conda packages Debian has (names only)
  /// Conda packages that are stack components: "cuda", "cudnn", "nccl" -> the constraint; "mpi" ->
  /// "openmpi@4.1" or "mpich".
  std::map<std::string, ImportedRequirement> stack;
  std::vector<std::string> system; ///< conda packages any Debian base provides ("libgcc-ng"), dropped
};

/// Reads an environment.yml (`what` names it in messages). The conda names table is read with
/// read_builtin_recipe("conda/conda-names.yaml"). Conda packages the table doesn't know are listed
/// together in one invalid_input error, each with its line and the suggestion to move it to `pip:`;
/// so are malformed entries.
Result<CondaEnv> read_conda_env(std::string_view text, const std::string& what);

/// What one conda package becomes, by recipes/conda/conda-names.yaml.
struct CondaMapping {
  enum class Kind { pypi, apt, stack, system, unknown };
  Kind kind = Kind::unknown;
  std::string name; ///< the PyPI project, the Debian package, or the stack key ("cuda", "mpi")
};

/// The row of `conda_name` in the table (read once per process); Kind::unknown when it has none.
/// A malformed table is invalid_input naming its file.
Result<CondaMapping> map_conda_package(const std::string& conda_name);

/// A conda match spec's version part as a PEP 440 specifier: "1.26" (conda's "=1.26") ->
/// "==1.26.*", "=1.26.4=py311h_0" -> "==1.26.4", ">=1.2,<2" as is, "" -> "".
std::string conda_version_to_pep440(std::string_view conda);

} // namespace lockstep::envspec
