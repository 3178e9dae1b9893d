#include "envspec/yaml/diagnostics.hpp"

#include "support/base/text.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

namespace lockstep::envspec {

namespace {

// Line `line` (1-based) of `text`, without its newline.
std::optional<std::string> text_line(const std::string& text, int line) {
  std::size_t begin = 0;
  for (int i = 1; i < line; ++i) {
    begin = text.find('\n', begin);
    if (begin == std::string::npos) {
      return std::nullopt;
    }
    ++begin;
  }
  if (begin >= text.size()) {
    return std::nullopt;
  }
  std::size_t end = text.find('\n', begin);
  std::string out = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  if (!out.empty() && out.back() == '\r') {
    out.pop_back();
  }
  return out;
}

// Line `line` (1-based) of `file`, without its newline; nullopt if unreadable. Read as any input
// file is (support/system/fs.hpp read_file: never blocking on a FIFO, bounded like a spec).
std::optional<std::string> source_line(const std::filesystem::path& file, int line) {
  Result<std::string> text = read_file(file, 4ULL << 20);
  if (!text) {
    return std::nullopt;
  }
  return text_line(*text, line);
}

// At most this much of a source line is quoted: a window around the column.
constexpr std::size_t k_quote_width = 160;

struct QuotedLine {
  std::string text;   // the line, or a window of it with "..." at a cut end; controls escaped
  std::string pad;    // what goes before the caret: spaces, and tabs under tabs
  std::size_t length; // the caret and its tildes, within the quote
};

// `line` quoted for a diagnostic: a long line (a 200,000-deep flow sequence is one) shows only a
// window around `column` (0-based), and control characters are escaped (tabs kept, so the caret
// lines up under tab-indented text).
QuotedLine quote_line(const std::string& line, std::size_t column, std::size_t length) {
  std::size_t start = 0;
  std::size_t end = line.size();
  if (line.size() > k_quote_width) {
    start = column > k_quote_width / 2 ? column - k_quote_width / 2 : 0;
    start = std::min(start, line.size() - k_quote_width);
    end = start + k_quote_width;
  }
  column = std::clamp(column, start, end);
  const std::string before =
      (start > 0 ? "..." : "") + escape_controls(line.substr(start, column - start), "\t");
  const std::string from = escape_controls(line.substr(column, end - column), "\t");
  QuotedLine q;
  q.text = before + from + (end < line.size() ? "..." : "");
  q.pad = before;
  for (char& c : q.pad) {
    c = c == '\t' ? '\t' : ' ';
  }
  q.length = std::clamp<std::size_t>(length, 1, std::max<std::size_t>(from.size(), 1));
  return q;
}

// Renders `d`; `source` is the text of its file when known (else the file is read).
std::string render_one(const Diagnostic& d, const std::string* source) {
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
    if (auto text = source != nullptr ? text_line(*source, loc.line) : source_line(loc.file, loc.line)) {
      const std::string gutter = fmt::format("{:>5} | ", loc.line);
      const auto column = static_cast<std::size_t>(loc.column > 0 ? loc.column - 1 : 0);
      const auto length = static_cast<std::size_t>(loc.length > 1 ? loc.length : 1);
      const QuotedLine q = quote_line(*text, column, length);
      out += gutter + q.text + '\n';
      out += std::string(gutter.size() - 2, ' ') + "| " + q.pad + "^" + std::string(q.length - 1, '~') + '\n';
    }
  }
  return out;
}

} // namespace

void Diagnostics::error(SourceLocation location, std::string key_path, std::string message) {
  m_items.push_back(Diagnostic{std::move(location), std::move(key_path), std::move(message)});
}

void Diagnostics::set_source(const std::filesystem::path& file, std::string text) {
  m_sources[file] = std::move(text);
}

void Diagnostics::withhold_source(const std::filesystem::path& file) {
  m_sources[file] = std::string(); // an empty text has no lines to quote, and the file is not read
}

void Diagnostics::sort_by_location(const std::vector<std::filesystem::path>& files) {
  auto rank = [&](const Diagnostic& d) {
    auto it = std::find(files.begin(), files.end(), d.location.file);
    return static_cast<std::size_t>(it - files.begin());
  };
  std::stable_sort(m_items.begin(), m_items.end(), [&](const Diagnostic& a, const Diagnostic& b) {
    const std::size_t ra = rank(a);
    const std::size_t rb = rank(b);
    if (ra != rb) {
      return ra < rb;
    }
    if (a.location.line != b.location.line) {
      return a.location.line < b.location.line;
    }
    return a.location.column < b.location.column;
  });
}

std::string Diagnostics::render() const {
  std::string out;
  for (const auto& d : m_items) {
    auto it = m_sources.find(d.location.file);
    out += render_one(d, it == m_sources.end() ? nullptr : &it->second);
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
