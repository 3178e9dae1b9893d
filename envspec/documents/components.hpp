#pragma once
// The component model `lockstep diff` compares: every side (a spec, a lock, an image or a doctor
// snapshot) becomes a list of components, each a kind, a name and a version, and two lists are
// compared component by component. Kinds:
//   deb             a Debian package (name, ":ARCH" added for a foreign architecture)
//   wheel           a Python distribution installed from a wheel (PEP 503 normalised name)
//   python-package  a Python distribution of a captured environment (dist-info, egg-info, conda)
//   git             a git source (the URL; version the commit, rev what was asked for)
//   conda           a conda package of the image's environment (version "VERSION=BUILD")
//   stack           what an image records about its stack (the dev.lockstep.* labels: MPI, CUDA,
//                   the stack solver's choices), named by the label without the prefix
//   host            a fact of a captured host (kernel, glibc, driver, GPUs, MPI, ...)
// Wheels and Python packages are one comparison class ("python"): a lock's wheels compare with a
// snapshot's packages by name. A side covers each class completely, partially (a spec names only
// the packages it asks for, not their dependencies) or not at all; classes one side doesn't cover
// are not compared. docs/verify-diff.md.
#include "envspec/lock/image_facts.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

/// One component of an environment.
struct Component {
  std::string kind;    ///< deb, wheel, python-package, git, conda, stack, host
  std::string name;    ///< see the file comment
  std::string version; ///< "" when the side doesn't pin one (an unpinned spec request)
  std::string rev;     ///< git: the rev asked for ("v1.2"); else ""
  bool operator==(const Component&) const = default;
};

/// How much of one comparison class a side describes.
enum class Coverage {
  none,     ///< nothing: the class is not compared
  partial,  ///< only the names listed (a spec's requests): others on the other side are not drift
  complete, ///< everything: a name only on the other side is drift
};

/// The comparison class of a kind: "python" for wheel and python-package, else the kind itself.
std::string_view component_class(std::string_view kind);

/// Whether two Debian versions are the same by Debian's ordering ("1.0" and "0:1.0"), or, when
/// either does not parse, the same text.
bool debian_versions_equal(const std::string& a, const std::string& b);

/// Whether two Python versions are the same by PEP 440 ("1.0" and "1.0.0"), or, when either does
/// not parse, the same text.
bool python_versions_equal(const std::string& a, const std::string& b);

/// One side of a diff.
struct ComponentSet {
  std::string kind;                         ///< "spec", "lock", "image" or "snapshot"
  std::string what;                         ///< the file or image as named on the command line
  std::vector<Component> components;        ///< sorted by class, then name
  std::map<std::string, Coverage> coverage; ///< by class; a class not listed is Coverage::none
  /// The OCI architecture the side is of ("arm64": an image, a lock of one platform); "" when it
  /// has none or several (a spec, a multi-platform lock).
  std::string architecture;
  /// Sorts `components` and refuses a name listed twice in one class (internal_error).
  Result<void> finish();
};

/// The spec's requests: apt names (version when pinned `name=VERSION`), pip pins (`name==VERSION`;
/// other specifiers give no version), git sources by rev. Debs and Python packages are partial.
ComponentSet spec_components(const Spec& spec, std::string what);

/// A lock's artifacts (debs, wheels, git sources: complete) and the "stack" components an image
/// built from it records: `facts` (as builder::image_facts_for derives them) and the stack solver's
/// choices (lock_stack_labels).
ComponentSet lock_components(const Lock& lock, const ImageFacts& facts, std::string what);

/// A multi-platform lock's components from each platform's share (lock_components of
/// lock_for_platform, in the lock's platform order): a component every platform has alike is
/// listed once; one that differs, or that only some platforms have, is listed per platform with
/// the platform after its name ("libc6:arm64 (linux/arm64)").
ComponentSet merge_platform_components(const std::vector<std::pair<std::string, ComponentSet>>& shares,
                                       std::string what);

/// The dev.lockstep.* labels an image built from `lock` carries for `facts` and the lock's stack
/// choices, by label name. This is the hook where what the build records about the stack meets
/// diff: a new label the build writes belongs here too, so lock and image sides stay comparable.
std::map<std::string, std::string> lock_stack_labels(const Lock& lock, const ImageFacts& facts);

/// The "stack" components of a set of image labels: every dev.lockstep.* label except the lock,
/// spec and provenance digests, named without the prefix ("mpi.version", "stack.cuda").
std::vector<Component> stack_components(const std::map<std::string, std::string>& labels);

/// A `lockstep doctor` snapshot ("lockstep-snapshot": 1): its Python packages (python-package,
/// complete) and host facts (host, complete: arch, os, kernel, glibc, driver, one "gpu NAME" per GPU
/// model with its compute capability and count, mpi, pmix, ucx, libfabric, slurm, python). A
/// snapshot whose keys have the wrong types is invalid_input naming `what` and the key.
Result<ComponentSet> snapshot_components(const nlohmann::json& snapshot, std::string what);

/// One difference.
struct ComponentChange {
  enum class Status { added, removed, changed };
  Status status = Status::changed;
  std::string kind;
  std::string name;
  std::optional<std::string> a; ///< the version on side A; nullopt when absent there, "*" unpinned
  std::optional<std::string> b; ///< the version on side B
  bool operator==(const ComponentChange&) const = default;
};

/// "added", "removed", "changed".
std::string_view change_status_name(ComponentChange::Status status);

/// What diff_components found.
struct ComponentDiff {
  std::vector<ComponentChange> changes; ///< sorted by class, kind, name
  std::size_t same = 0;                 ///< components compared and equal
  std::vector<std::string> compared;    ///< the classes both sides cover
  std::vector<std::string> skipped;     ///< classes only one side covers (not compared)
  /// True when nothing differs.
  [[nodiscard]] bool empty() const { return changes.empty(); }
};

/// Compares A with B: a name in both with different versions is "changed" (debs by dpkg's version
/// equality, Python packages by PEP 440's, git by commit, or by rev when a side has no commit); a
/// name only in B is "added" and one only in A "removed", unless the side it is missing from covers
/// the class partially; a side's unpinned version matches any. Pure and deterministic.
ComponentDiff diff_components(const ComponentSet& a, const ComponentSet& b);

/// The table: a header, one row per change (STATUS KIND NAME A B, "-" for an absent version, "*"
/// for an unpinned one), then
/// a summary line ("1 changed, 0 added, 0 removed, 12 the same (deb, python); not compared: git").
std::string render_diff_text(const ComponentSet& a, const ComponentSet& b, const ComponentDiff& diff);

/// The JSON form, keys in this order:
///   {"a":{"kind":"lock","what":"a.lock"},"b":{...},
///    "changes":[{"change":"changed","kind":"deb","name":"ls-lib","a":"1.0-1","b":"2.0-1"}],
///    "same":12,"compared":["deb","python"],"skipped":["git"]}
/// An absent version is null, an unpinned one "*".
nlohmann::ordered_json diff_json(const ComponentSet& a, const ComponentSet& b, const ComponentDiff& diff);

/// What a file given to diff holds, by its content.
enum class DocumentKind { spec, lock, snapshot, unknown };

/// Looks at a file's text: a JSON object with a top-level "lockstep-lock" key is a lock, one with
/// "lockstep-snapshot" a snapshot; YAML with a top-level `lockstep:` key is a spec. Anything else
/// (images included: tar, SIF and directories are the runner's to recognise) is unknown.
DocumentKind detect_document(std::string_view text);

} // namespace lockstep::envspec
