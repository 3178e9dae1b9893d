#pragma once
// Located diagnostics for spec files: "FILE:LINE:COL: error: KEY.PATH: MESSAGE", then the source
// line and a caret under the offending text. All errors of a run are collected and printed together.
#include "support/base/result.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace lockstep::envspec {

/// A position in a spec file; line and column are 1-based. An empty file means "no location".
struct SourceLocation {
  std::filesystem::path file;
  int line = 0;
  int column = 0;
  /// How many characters the caret line underlines (at least 1).
  int length = 1;
};

struct Diagnostic {
  SourceLocation location;
  std::string key_path; ///< e.g. "copy[0].to"; empty for syntax errors
  std::string message;
};

/// Collects diagnostics and renders them.
class Diagnostics {
public:
  /// Records an error at `location` about the key `key_path`.
  void error(SourceLocation location, std::string key_path, std::string message);
  /// Remembers the text of `file` as it was parsed: render() quotes source lines from it instead of
  /// re-reading the file (which may have changed, or never existed for load_spec_from_string).
  void set_source(const std::filesystem::path& file, std::string text);
  /// Renders diagnostics in `file` with their location only, never a line of it (a file named in
  /// `extends` that turned out not to be a spec: its text may be anything, secrets included).
  void withhold_source(const std::filesystem::path& file);
  /// Orders the diagnostics by file (in the order of `files`; others last), then line and column.
  /// Diagnostics at the same place keep the order they were added in.
  void sort_by_location(const std::vector<std::filesystem::path>& files);
  [[nodiscard]] bool empty() const { return m_items.empty(); }
  [[nodiscard]] const std::vector<Diagnostic>& items() const { return m_items; }

  /// Renders every diagnostic, in the order they were added, e.g.
  ///   lockstep.yaml:3:1: error: labls: unknown key; did you mean 'labels'?
  ///       3 | labls: {a: b}
  ///         | ^~~~~
  /// The source line comes from set_source() text, else from the file (a missing file omits it);
  /// none for a file given to withhold_source().
  [[nodiscard]] std::string render() const;
  /// An invalid_input Error whose message is render() (marked as pre-rendered).
  [[nodiscard]] Error to_error() const;

private:
  std::vector<Diagnostic> m_items;
  std::map<std::filesystem::path, std::string> m_sources;
};

} // namespace lockstep::envspec
