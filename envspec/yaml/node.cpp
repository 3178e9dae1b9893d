#include "envspec/yaml/node.hpp"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>

namespace lockstep::envspec {

namespace fs = std::filesystem;

const MapEntry* Node::find(std::string_view key) const {
  for (const MapEntry& e : entries) {
    if (e.key == key) {
      return &e;
    }
  }
  return nullptr;
}

bool Node::erase(std::string_view key) {
  auto it = std::find_if(entries.begin(), entries.end(), [&](const MapEntry& e) { return e.key == key; });
  if (it == entries.end()) {
    return false;
  }
  entries.erase(it);
  return true;
}

std::string describe(const Node& node) {
  switch (node.kind) {
  case NodeKind::null:
    return "nothing";
  case NodeKind::map:
    return "a map";
  case NodeKind::sequence:
    return "a list";
  case NodeKind::scalar:
    break;
  }
  if (node.quoted) {
    return "a string";
  }
  static const std::regex boolean("true|True|TRUE|false|False|FALSE");
  static const std::regex number("[-+]?([0-9]+|[0-9]*\\.[0-9]+([eE][-+]?[0-9]+)?|0x[0-9a-fA-F]+|0o[0-7]+)|"
                                 "[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)");
  if (std::regex_match(node.scalar, boolean)) {
    return "a boolean";
  }
  if (std::regex_match(node.scalar, number)) {
    return "a number";
  }
  return "a string";
}

std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string item_path(const std::string& parent, std::size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

namespace {

// More nodes than this (after expanding aliases) is refused: "billion laughs" protection.
constexpr std::size_t k_max_nodes = 100000;

struct TooManyNodes {};

// Sequences and maps nested deeper than this are refused. yaml-cpp's parser recurses once per level
// (it stops itself at 2,000), and so do the walks over the tree; no spec, recipe or fact file needs
// more than a dozen levels.
constexpr std::size_t k_max_depth = 128;

struct TooDeep {
  YAML::Mark mark;
};

// How many levels of sequences and maps `n` holds (0 for a scalar); bounded by k_max_depth.
std::size_t collection_height(const Node& n) {
  std::size_t below = 0;
  for (const Node& item : n.items) {
    below = std::max(below, collection_height(item));
  }
  for (const MapEntry& e : n.entries) {
    below = std::max(below, collection_height(e.value));
  }
  return n.is_map() || n.is_sequence() ? below + 1 : 0;
}

std::size_t count_nodes(const Node& n) {
  std::size_t count = 1;
  for (const Node& item : n.items) {
    count += count_nodes(item);
  }
  for (const MapEntry& e : n.entries) {
    count += 1 + count_nodes(e.value);
  }
  return count;
}

// Receives yaml-cpp's parse events and builds the located Node tree.
class TreeBuilder : public YAML::EventHandler {
public:
  TreeBuilder(std::string_view text, fs::path file, Diagnostics& diags)
      : m_text(text), m_file(std::move(file)), m_diags(diags) {
    m_line_starts.push_back(0);
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') {
        m_line_starts.push_back(i + 1);
      }
    }
  }

  std::optional<Node>& root() { return m_root; }

  void OnDocumentStart(const YAML::Mark& /*mark*/) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Node n;
    n.location = location(mark, 1);
    finish(std::move(n), anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = m_anchors.find(anchor);
    if (it == m_anchors.end()) {
      // yaml-cpp registers an anchor when its node starts: this alias is inside the node it names.
      m_diags.error(location(mark, 1), current_path(), "an alias can't refer to the node that contains it");
      finish(Node{}, YAML::NullAnchor);
      return;
    }
    // An alias copies its node here: its levels count from here on.
    if (m_stack.size() + collection_height(it->second.first) > k_max_depth) {
      throw TooDeep{mark};
    }
    charge(it->second.second);
    finish(it->second.first, YAML::NullAnchor);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    Node n;
    n.kind = NodeKind::scalar;
    n.scalar = value;
    n.quoted = tag != "?";
    n.location = location(mark, span(mark, value, n.quoted));
    finish(std::move(n), anchor);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value /*style*/) override {
    start(NodeKind::sequence, mark, anchor);
  }
  void OnSequenceEnd() override { end(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value /*style*/) override {
    start(NodeKind::map, mark, anchor);
  }
  void OnMapEnd() override { end(); }

  // A location for yaml-cpp's 0-based mark.
  SourceLocation location(const YAML::Mark& mark, int length) const {
    if (mark.is_null() || mark.line < 0) {
      return SourceLocation{m_file, 0, 0, 1};
    }
    return SourceLocation{m_file, mark.line + 1, mark.column + 1, std::max(1, length)};
  }

private:
  // A collection being built.
  struct Frame {
    Node node;
    YAML::anchor_t anchor = YAML::NullAnchor;
    std::string path;
    bool have_key = false; // maps: a key was read, its value comes next
    bool bad_key = false;  // maps: the pending key was not a string (already reported)
    std::string key;       // maps: the pending key
    SourceLocation key_location;
  };

  // How many characters the scalar at `mark` spans on its line (for the caret underline).
  int span(const YAML::Mark& mark, const std::string& value, bool quoted) const {
    if (mark.is_null() || mark.line < 0 || static_cast<std::size_t>(mark.line) >= m_line_starts.size()) {
      return 1;
    }
    const std::size_t begin = m_line_starts[static_cast<std::size_t>(mark.line)];
    std::size_t end = m_text.find('\n', begin);
    if (end == std::string_view::npos) {
      end = m_text.size();
    }
    const std::string_view line = m_text.substr(begin, end - begin);
    const std::size_t col = static_cast<std::size_t>(mark.column);
    if (col >= line.size()) {
      return 1;
    }
    const char open = line[col];
    if (quoted && (open == '"' || open == '\'')) {
      for (std::size_t i = col + 1; i < line.size(); ++i) {
        // NOLINTNEXTLINE(bugprone-branch-clone): the escape of each quoting style, one a branch
        if (open == '"' && line[i] == '\\') {
          ++i;
        } else if (open == '\'' && line[i] == '\'' && i + 1 < line.size() && line[i + 1] == '\'') {
          ++i;
        } else if (line[i] == open) {
          return static_cast<int>(i - col + 1);
        }
      }
      return static_cast<int>(line.size() - col);
    }
    if (!quoted && line.substr(col, value.size()) == value) {
      return static_cast<int>(value.size());
    }
    return 1;
  }

  // Counts `n` more nodes against the budget.
  void charge(std::size_t n) {
    m_nodes += n;
    if (m_nodes > k_max_nodes) {
      throw TooManyNodes{};
    }
  }

  // The key path of the node that starts next.
  std::string current_path() const {
    if (m_stack.empty()) {
      return {};
    }
    const Frame& top = m_stack.back();
    if (top.node.is_sequence()) {
      return item_path(top.path, top.node.items.size());
    }
    if (top.have_key && !top.bad_key) {
      return child_path(top.path, top.key);
    }
    return top.path;
  }

  void start(NodeKind kind, const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (m_stack.size() >= k_max_depth) {
      throw TooDeep{mark};
    }
    Frame f;
    f.node.kind = kind;
    f.node.location = location(mark, 1);
    f.anchor = anchor;
    f.path = current_path();
    m_stack.push_back(std::move(f));
  }

  void end() {
    Frame f = std::move(m_stack.back());
    m_stack.pop_back();
    finish(std::move(f.node), f.anchor);
  }

  // Places a completed node: as the root, a list item, a map key or a map value.
  void finish(Node n, YAML::anchor_t anchor) {
    charge(1);
    if (anchor != YAML::NullAnchor) {
      m_anchors[anchor] = {n, count_nodes(n)};
    }
    if (m_stack.empty()) {
      m_root = std::move(n);
      return;
    }
    Frame& top = m_stack.back();
    if (top.node.is_sequence()) {
      top.node.items.push_back(std::move(n));
      return;
    }
    if (!top.have_key) {
      top.have_key = true;
      top.bad_key = !n.is_scalar();
      if (top.bad_key) {
        m_diags.error(n.location, top.path, fmt::format("map keys must be strings, found {}", describe(n)));
      } else {
        top.key = std::move(n.scalar);
        top.key_location = n.location;
      }
      return;
    }
    top.have_key = false;
    if (top.bad_key) {
      return;
    }
    if (n.is_null()) {
      n.location = top.key_location;
    }
    if (const MapEntry* first = top.node.find(top.key)) {
      m_diags.error(top.key_location, child_path(top.path, top.key),
                    fmt::format("duplicate key '{}' (first at line {})", top.key, first->key_location.line));
      return;
    }
    top.node.entries.push_back(MapEntry{std::move(top.key), top.key_location, std::move(n)});
  }

  std::string_view m_text;
  fs::path m_file;
  Diagnostics& m_diags;
  std::vector<std::size_t> m_line_starts;
  std::vector<Frame> m_stack;
  std::map<YAML::anchor_t, std::pair<Node, std::size_t>> m_anchors;
  std::size_t m_nodes = 0;
  std::optional<Node> m_root;
};

// Notes where a second document starts (and swallows its events).
class SecondDocument : public YAML::EventHandler {
public:
  void OnDocumentStart(const YAML::Mark& mark) override { m_mark = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override {}
  void OnAlias(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override {}
  void OnScalar(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                const std::string& /*value*/) override {}
  void OnSequenceStart(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                       YAML::EmitterStyle::value /*style*/) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                  YAML::EmitterStyle::value /*style*/) override {}
  void OnMapEnd() override {}

  YAML::Mark m_mark;
};

} // namespace

std::optional<Node> parse_yaml(std::string_view text, const fs::path& file, Diagnostics& diags) {
  std::istringstream in{std::string(text)};
  TreeBuilder builder(text, file, diags);
  try {
    YAML::Parser parser(in);
    if (!parser.HandleNextDocument(builder)) {
      Node empty;
      empty.location = SourceLocation{file, 1, 1, 1};
      return empty;
    }
    SecondDocument second;
    if (parser.HandleNextDocument(second)) {
      diags.error(builder.location(second.m_mark, 1), "",
                  "a spec file holds one YAML document; a second one starts here");
    }
  } catch (const YAML::Exception& e) {
    diags.error(builder.location(e.mark, 1), "", "invalid YAML: " + e.msg);
    return std::nullopt;
  } catch (const TooDeep& e) {
    diags.error(builder.location(e.mark, 1), "",
                fmt::format("nested more than {} levels deep; refusing to read further", k_max_depth));
    return std::nullopt;
  } catch (const TooManyNodes&) {
    diags.error(
        SourceLocation{file, 0, 0, 1}, "",
        fmt::format("more than {} nodes after expanding aliases; refusing to read further", k_max_nodes));
    return std::nullopt;
  } catch (const std::exception& e) {
    diags.error(SourceLocation{file, 0, 0, 1}, "", std::string("can't parse YAML: ") + e.what());
    return std::nullopt;
  }
  if (!builder.root()) {
    Node empty;
    empty.location = SourceLocation{file, 1, 1, 1};
    return empty;
  }
  return std::move(builder.root());
}

} // namespace lockstep::envspec
