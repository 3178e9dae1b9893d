#pragma once
// Located diagnostics for spec files: "FILE:LINE:COL: error: KEY.PATH: MESSAGE", then the source
// line and a caret under the offending text. All errors of a run are collected and printed together.
#include "support/result.hpp"

#include <filesystem>
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
  void error(SourceLocation location, std::string key_path, std::string message);
  [[nodiscard]] bool empty() const { return m_items.empty(); }
  [[nodiscard]] const std::vector<Diagnostic>& items() const { return m_items; }

  /// Renders every diagnostic, in the order they were added, e.g.
  ///   lockstep.yaml:3:1: error: labls: unknown key; did you mean 'labels'?
  ///       3 | labls: {a: b}
  ///         | ^~~~~
  /// The source line is read from the file (a missing file just omits it).
  [[nodiscard]] std::string render() const;
  /// An invalid_input Error whose message is render() (marked as pre-rendered).
  [[nodiscard]] Error to_error() const;

private:
  std::vector<Diagnostic> m_items;
};

/// Renders one diagnostic (see Diagnostics::render).
std::string render_diagnostic(const Diagnostic& d);

} // namespace lockstep::envspec
