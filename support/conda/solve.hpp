#pragma once
// Solving a conda request with conda's semantics (docs: ../shared/reference/conda.md §5) on lockstep's
// PubGrub engine (support/solver/pubgrub.hpp): each package name is one PubGrub package whose
// candidates are its records, ordered as mamba (libsolv) and rattler order them; `depends` are
// dependencies, `constrains` and pins are dependencies that allow "absent", and every virtual
// package of the index is required so that constraints on it bind (conda.md §5.3). `python` gets no
// automatic dependency on `pip` (rattler's and pixi's behaviour; conda adds one). The outcome is the
// chosen records, dependencies first, each with the reason it is there, or PubGrub's explanation.
// See docs/conda-solver.md.
#include "support/base/result.hpp"
#include "support/conda/index.hpp"
#include "support/conda/match_spec.hpp"
#include "support/solver/pubgrub.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::conda {

/// How channels combine (conda.md §5.1).
enum class ChannelPriority {
  /// A name any higher-priority channel has is taken from that channel only (rattler's default).
  strict,
  /// Every channel's records are candidates; a higher channel's come first, before version (conda's
  /// and mamba's default).
  flexible,
};

/// A record the previous lock chose: preferred while it still fits (re-locking moves nothing unasked).
struct LockedRecord {
  std::string channel; ///< as the index names channels (canonical_channel is applied)
  std::string subdir;
  std::string filename;
};

/// What a solve may do.
struct SolveOptions {
  ChannelPriority channel_priority = ChannelPriority::strict;
  /// Specs that constrain a name if it is in the solution and never pull it in (conda-meta/pinned).
  std::vector<MatchSpec> pins;
  /// The previous lock's records, tried first for their names.
  std::vector<LockedRecord> locked;
  /// Bounds on the search (steps, time, size of an explanation). 5,000 steps by default, not the
  /// Python resolver's 25,000: PubGrub's steps grow dearer as it learns, and a pigeonhole family of
  /// a dozen names must stop at the bound within seconds, not minutes (docs/conda-solver.md).
  pubgrub::Limits limits = default_limits();

  static pubgrub::Limits default_limits() {
    pubgrub::Limits l;
    l.max_steps = 5'000;
    return l;
  }
};

/// One record of the solution.
struct SolvedRecord {
  const IndexRecord* record = nullptr;
  /// The channel it comes from (canonical name).
  std::string channel;
  /// Why it is there: "requested as numpy >=1.26" or "needed by pandas 2.2.2 py311h_0: numpy >=1.22.4".
  std::string reason;
  /// The index in the request of the spec that asks for it, when one does.
  std::optional<std::size_t> requested;
};

/// The outcome of solve().
struct Solution {
  bool solved = false;
  /// The records to install, dependencies before what needs them (a cycle is broken at the name
  /// first in byte order), ties by name. Virtual packages are not in it: nothing installs them.
  std::vector<SolvedRecord> records;
  /// When not solved: PubGrub's derivation, one sentence per line, specs in conda's space form.
  std::string explanation;
  /// When not solved: the request's specs the explanation rests on (indices into the request).
  std::vector<std::size_t> root_causes;
  pubgrub::SolveStats stats;
};

/// "numpy >=1.26,<2 py312*": a spec in conda's space form (`[channel::]name[ version[ build]]`, then
/// any other field in brackets), as repodata's `depends` write them.
std::string space_form(const MatchSpec& spec);

/// Solves `request` (specs a person wrote, parsed strictly) over `index`. A spec whose name is not a
/// plain name ("*", a glob) is an invalid_input error, as is a pin's; a bound of the limits reached
/// is invalid_input naming it. An unsatisfiable request is a Solution with `solved` false.
Result<Solution> solve(const PackageIndex& index, const std::vector<MatchSpec>& request,
                       const SolveOptions& options = {});

} // namespace lockstep::conda
