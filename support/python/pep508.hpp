#pragma once
// Python dependency specifiers (PEP 508, the "Dependency specifiers" page of the Python packaging
// specifications): requirements ("requests[socks]>=2.31; python_version >= '3.8'"), environment
// markers and their evaluation, PEP 503 name normalisation, and pip's requirements.txt format
// (pins, --hash options, markers, comments, line continuations) as input to a lock.
//
// Behaviour follows the reference implementation, `packaging.requirements` and `packaging.markers`,
// with one stricter rule: a marker comparison needs exactly one environment variable.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/python/pep440.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

/// PEP 503's normalised project name: lowercase, each run of '-', '_' and '.' replaced by one '-'
/// ("Foo.Bar__baz" -> "foo-bar-baz"). Also PEP 685's normalised extra name.
std::string normalize_project_name(std::string_view name);

/// True for a valid PEP 508 name: ASCII letters and digits, with '.', '_' or '-' inside.
bool valid_project_name(std::string_view name);

/// The values of the marker variables for one target interpreter and platform.
struct MarkerEnv {
  std::string python_version;      ///< "3.11"
  std::string python_full_version; ///< "3.11.2"
  std::string os_name = "posix";
  std::string sys_platform = "linux";
  std::string platform_machine; ///< "x86_64"
  std::string platform_system = "Linux";
  /// The kernel release and version: not a property of an image (they belong to whichever host
  /// runs it), so unset by default; a marker that uses an unset variable fails to evaluate.
  std::optional<std::string> platform_release;
  std::optional<std::string> platform_version;
  std::string implementation_name = "cpython";
  std::string implementation_version; ///< "3.11.2"
  std::string platform_python_implementation = "CPython";
  std::string extra; ///< the extra being evaluated; "" outside extras
};

/// The environment of CPython `python_full_version` ("3.11.2") on Linux for `machine` ("x86_64").
MarkerEnv linux_cpython(std::string python_full_version, std::string machine);

/// A parsed environment marker ("python_version < '3.11' and sys_platform == 'linux'").
class Marker {
public:
  /// Parses marker text; errors are invalid_input with the column and what was expected.
  static Result<Marker> parse(std::string_view text);

  /// Evaluates against `env`. Comparisons use PEP 440 (pre-releases allowed) where the operator
  /// and right-hand side form a valid specifier and the left-hand side is a valid version, else
  /// Python's string operators; `~=` between non-versions, or an unset variable, is an error.
  /// `extra` values are compared normalised (PEP 685).
  [[nodiscard]] Result<bool> evaluate(const MarkerEnv& env) const;
  /// The normalised text: variables by their canonical names, values double-quoted, parentheses
  /// where the source had them (`python_version >= "3.8" and (os_name == "nt" or extra == "x")`).
  [[nodiscard]] std::string str() const;
  /// True if the marker refers to `extra` anywhere.
  [[nodiscard]] bool uses_extra() const;

  struct Node;

private:
  std::shared_ptr<const Node> m_root;
};

/// One PEP 508 requirement: `name [extras] (specifier | @ url) [; marker]`.
struct Requirement {
  std::string name;                ///< as written
  std::string project;             ///< normalised (normalize_project_name)
  std::vector<std::string> extras; ///< normalised, sorted, without duplicates
  SpecifierSet specifier;
  std::string url; ///< after '@'; empty for a specifier requirement
  std::optional<Marker> marker;

  /// Parses a requirement (at most 64 KiB); errors are invalid_input naming the text and column.
  static Result<Requirement> parse(std::string_view text);
  /// packaging's canonical text ("name[a,b]>=1.0,<2; python_version >= \"3.8\"").
  [[nodiscard]] std::string str() const;
  /// Whether the requirement applies in `env` when the requiring distribution was asked for
  /// `extras`: no marker, or the marker is true with `extra` = "" or any of `extras`.
  [[nodiscard]] Result<bool> applies(const MarkerEnv& env, const std::vector<std::string>& extras = {}) const;
};

/// One requirement line of a requirements file, with its `--hash=sha256:...` options.
struct PinnedRequirement {
  Requirement requirement;
  std::vector<Digest> hashes; ///< sha256 digests, in the order given, without duplicates
  int line = 0;               ///< 1-based line where the requirement starts
};

/// A requirements.txt, as pip reads it, restricted to what a lock can use.
struct RequirementsFile {
  std::vector<PinnedRequirement> requirements;
  std::vector<std::string> index_urls;       ///< -i / --index-url (the last one wins in pip)
  std::vector<std::string> extra_index_urls; ///< --extra-index-url
  std::vector<std::string> find_links;       ///< -f / --find-links
  bool no_index = false;                     ///< --no-index
  bool pre = false;                          ///< --pre
  bool require_hashes = false;               ///< --require-hashes (lockstep always checks hashes)
};

/// Parses a requirements file (pip's format): '\' line continuations, '#' comments (at the start
/// or after whitespace), global option lines, and requirement lines with per-requirement
/// `--hash=sha256:HEX` options. Includes (-r, -c), editables (-e), bare paths or URLs without a
/// name, hashes other than sha256, and unknown options are invalid_input. All errors are reported
/// together, each as "WHAT:LINE: message".
Result<RequirementsFile> parse_requirements_txt(std::string_view text, std::string_view what);

} // namespace lockstep
