#include "envspec/diagnostics.hpp"

#include <fmt/format.h>

#include <fstream>
#include <optional>
#include <string>

namespace lockstep::envspec {

namespace {

// Line `line` (1-based) of `file`, without its newline; nullopt if unreadable.
std::optional<std::string> source_line(const std::filesystem::path& file, int line) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::string text;
  for (int i = 1; std::getline(in, text); ++i) {
    if (i == line) {
      if (!text.empty() && text.back() == '\r') {
        text.pop_back();
      }
      return text;
    }
  }
  return std::nullopt;
}

} // namespace

void Diagnostics::error(SourceLocation location, std::string key_path, std::string message) {
  m_items.push_back(Diagnostic{std::move(location), std::move(key_path), std::move(message)});
}

std::string render_diagnostic(const Diagnostic& d) {
  const SourceLocation& loc = d.location;
  std::string out;
  if (!loc.file.empty()) {
    out += loc.file.string();
    if (loc.line > 0) {
      out += fmt::format(":{}:{}", loc.line, loc.column > 0 ? loc.column : 1);
    }
    out += ": ";
  }
  out += "error: ";
  if (!d.key_path.empty()) {
    out += d.key_path + ": ";
  }
  out += d.message;
  out += '\n';
  if (loc.line > 0) {
    if (auto text = source_line(loc.file, loc.line)) {
      std::string gutter = fmt::format("{:>5} | ", loc.line);
      out += gutter + *text + '\n';
      std::string pad(static_cast<std::size_t>(loc.column > 0 ? loc.column - 1 : 0), ' ');
      // Keep tabs so the caret lines up under tab-indented text.
      for (std::size_t i = 0; i < pad.size() && i < text->size(); ++i) {
        if ((*text)[i] == '\t') {
          pad[i] = '\t';
        }
      }
      int len = loc.length > 1 ? loc.length : 1;
      out += std::string(gutter.size() - 2, ' ') + "| " + pad + "^" + std::string(static_cast<std::size_t>(len - 1), '~') +
             '\n';
    }
  }
  return out;
}

std::string Diagnostics::render() const {
  std::string out;
  for (const auto& d : m_items) {
    out += render_diagnostic(d);
  }
  if (m_items.size() > 1) {
    out += fmt::format("{} errors\n", m_items.size());
  }
  return out;
}

Error Diagnostics::to_error() const {
  return Error{ExitCode::invalid_input, render(), true};
}

} // namespace lockstep::envspec
