#pragma once
// Choosing Python package versions for a lock: PubGrub (support/solver/pubgrub.hpp) over the spec's
// package indexes (PEP 691 JSON, PEP 503 HTML) and wheelhouses, for one target Python. Each
// project's candidates are the versions that have a wheel installable on the target (tags for its
// Python and glibc, the index's Requires-Python), one best file per version as pip picks it; their
// metadata comes from PEP 658 files or the wheels, fetched in parallel ahead of the solver along
// the newest versions' dependencies. Extras are packages of their own ("name[extra]") tied to the
// base at the same version. See docs/python-resolver.md.
#include "builder/lock/pypi_index.hpp"
#include "builder/lock/python_target.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/python/pep508.hpp"
#include "support/python/wheel.hpp"
#include "support/solver/pubgrub.hpp"
#include "support/store/blob_store.hpp"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace lockstep::builder {

/// One top-level requirement: a packages.pip entry (or a line of a file it names, or a stack pin).
struct PyRequest {
  Requirement requirement;
  std::string where;            ///< "packages.pip[2]", "requirements.in:4", "stack.torch"
  std::string text;             ///< as written
  std::set<std::string> hashes; ///< hash-checking mode: only files with one of these sha256 (hex)
  envspec::SourceLocation location;
};

/// A wheel the lock had for a project, offered to the solver first (re-locking moves nothing
/// unasked).
struct PreviousWheel {
  PyVersion version;
  IndexFile file; ///< url, sha256, size from the lock
  int repo = -1;
};

/// What the solver works from.
struct ResolveContext {
  const envspec::Spec* spec = nullptr;
  const BlobStore* store = nullptr;
  PythonTarget target;
  std::vector<WheelTag> tags; ///< the target's tags, best first
  MarkerEnv env;
  PyVersion python;
  std::vector<std::filesystem::path> local_roots;
  /// Installed in the base image: project -> (version, path of its .dist-info).
  std::map<std::string, std::pair<PyVersion, std::string>> installed;
  /// The previous lock's wheels by project: preferred when they fit.
  std::map<std::string, PreviousWheel> previous;
  /// Projects whose only candidate is their previous wheel (the fast re-lock); others are read
  /// from the indexes.
  std::set<std::string> previous_only;
  bool prereleases = false; ///< --pre from a requirements file: pre-releases are ordinary candidates
  /// Projects some requirement names a pre-release of (their pre-releases are candidates, as in
  /// pip's merged specifiers); the solver adds those it discovers.
  std::set<std::string> prerelease_named;
  /// Projects installed by the image's own Debian packages, with the package ("python3-numpy
  /// 1:1.24.2-1"): their only candidate is that installed copy (`installed` has its version), and
  /// no index is asked about them.
  std::map<std::string, std::string> fixed;
  /// Read every index page again, even one the store's HTTP cache holds fresh (support/http_cache).
  bool refresh_pages = false;
  /// Bounds on the solver's work (`lock --resolver-steps`, `--resolver-timeout`).
  pubgrub::Limits limits;
};

/// A project the solution installs.
struct ResolvedWheel {
  std::string project;
  PyVersion version;
  IndexFile file;
  WheelName wheel;
  int repo = -1;
  /// Why it is there: the chain from a top-level requirement ("packages.pip[0] transformers>=4.40
  /// -> transformers 4.44.2: tokenizers<0.20,>=0.19").
  std::string reason;
  std::vector<std::string> extras; ///< the extras the solution asks of it
  std::optional<std::string>
      shadows;                   ///< the base image's distribution it hides ("numpy 1.21.5 (/usr/lib/...)")
  bool needed_by_wheels = false; ///< some chosen wheel's metadata requires it (not only a request)
};

/// The outcome of resolve_wheels.
struct WheelResolution {
  bool solved = false;
  std::vector<ResolvedWheel> wheels;    ///< sorted by project
  std::string explanation;              ///< when not solved: the derivation, one sentence per line
  std::vector<std::string> root_causes; ///< the PyRequest::where of the requests it rests on
  pubgrub::SolveStats stats;
  std::size_t index_pages = 0;    ///< projects whose index pages were read
  std::size_t metadata_reads = 0; ///< METADATA fetched (PEP 658 files or wheels)
  std::size_t pages_cached = 0;   ///< index pages taken from the HTTP cache without a request
};

/// Resolves `requests` for the target. Network failures, hostile index pages and metadata that
/// contradicts its wheel are errors; an unsatisfiable request is a WheelResolution with `solved`
/// false and the explanation.
Result<WheelResolution> resolve_wheels(const ResolveContext& context, const std::vector<PyRequest>& requests);

} // namespace lockstep::builder
