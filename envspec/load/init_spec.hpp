#pragma once
// `lockstep init`: the text of a starting lockstep.yaml, commented, from what a project already has
// (a requirements file, a pyproject.toml, an environment.yml, or the packages of an installed
// environment). The base is a Debian suite whose python3 is the project's Python (from the recipes'
// python.yaml), else the official python:X.Y image; a `stack:` with the framework is added when
// torch, tensorflow or jax is among the requirements. See docs/python-resolver.md ("lockstep init").
#include "envspec/stack/recipes.hpp"
#include "support/base/result.hpp"

#include <string>
#include <vector>

namespace lockstep::envspec {

/// What the spec starts from.
struct InitRequest {
  /// conda_env: an environment.yml translated to PyPI and Debian (`--translate`); conda: one kept as
  /// conda packages over a Debian base.
  enum class From { none, requirements, pyproject, conda_env, conda, environment };
  From from = From::none;
  std::string name;                ///< the image name
  std::string file;                ///< requirements/pyproject/conda_env: the file as the spec names it
  std::string python;              ///< "3.11" when the source tells (else the default suite's)
  std::string python_source;       ///< where `python` came from, for a comment ("environment.yml:3")
  std::vector<std::string> pip;    ///< environment: the pins ("numpy==1.26.4"); others: the requirements read
  std::vector<std::string> apt;    ///< Debian packages the source maps to (conda's)
  std::vector<std::string> extras; ///< pyproject: its optional-dependencies names (for a comment)
  std::vector<std::string> notes;  ///< lines for the header comment ("not mapped: foo 1.0 (conda)")
  std::string environment;         ///< environment: "venv /path" / "conda /path", for the header
  std::vector<std::string> conda_channels; ///< conda: the channels, in order
  std::vector<std::string> conda;          ///< conda: the MatchSpecs
  std::string conda_cuda; ///< conda: the CUDA X.Y the environment pins, for conda.virtual_packages
  /// conda: exact builds of an installed environment, each naming its channel: flexible priority
  bool conda_exact = false;
};

/// The spec text for `request`. Deterministic.
Result<std::string> init_spec_text(const InitRequest& request, const RecipeSet& recipes);

} // namespace lockstep::envspec
