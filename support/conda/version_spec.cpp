#include "support/conda/version_spec.hpp"

#include "support/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

namespace lockstep::conda {

namespace {

bool is_operator_char(char c) {
  return c == '=' || c == '!' || c == '<' || c == '>' || c == '~';
}
bool ends_clause(char c) {
  return c == ',' || c == '|' || c == '(' || c == ')' || is_ascii_space(c);
}

struct Operator {
  std::string_view text;
  VersionOp op;
};
constexpr std::array<Operator, 8> k_operators = {{
    {"==", VersionOp::equal},
    {"!=", VersionOp::not_equal},
    {"<", VersionOp::less},
    {"<=", VersionOp::less_equal},
    {">", VersionOp::greater},
    {">=", VersionOp::greater_equal},
    {"=", VersionOp::starts_with},
    {"~=", VersionOp::compatible},
}};

// A version's wildcard suffix: "1.2.*" (one ".*"), "1.2*" (bare '*'), "2023.*.*" (repeated).
struct Wildcard {
  std::string_view base; // the token without the suffix
  std::size_t dot_stars = 0;
  bool bare_star = false;
  [[nodiscard]] bool any() const { return dot_stars > 0 || bare_star; }
};

Wildcard split_wildcard(std::string_view token) {
  Wildcard w{token};
  while (w.base.size() >= 2 && w.base.ends_with(".*")) {
    w.base.remove_suffix(2);
    ++w.dot_stars;
  }
  if (w.dot_stars == 0 && w.base.ends_with('*')) {
    while (w.base.ends_with('*')) {
      w.base.remove_suffix(1);
    }
    w.bare_star = true;
  }
  return w;
}

// "*", "*.*", "*.*.*": the lenient spellings of "any".
bool is_star_run(std::string_view token) {
  if (!token.starts_with('*')) {
    return false;
  }
  token.remove_prefix(1);
  while (token.starts_with(".*")) {
    token.remove_prefix(2);
  }
  return token.empty();
}

} // namespace

// Recursive descent over the grammar of conda.md §3.3, building the spec's tree.
class SpecParser {
public:
  SpecParser(std::string_view text, SpecMode mode, VersionSpec& out)
      : m_text(text), m_mode(mode), m_out(out) {}

  std::optional<ParseError> parse() {
    skip_spaces();
    if (m_pos == m_text.size()) {
      return ParseError{m_pos, "empty version spec"};
    }
    auto root = parse_or(0);
    if (!root) {
      return std::move(m_error);
    }
    if (m_pos < m_text.size()) {
      return ParseError{m_pos, m_text[m_pos] == ')' ? "')' without a matching '('"
                                                    : fmt::format("unexpected '{}'", m_text[m_pos])};
    }
    // The root goes last, where matches() and str() look for it.
    if (*root + 1 != m_out.m_nodes.size()) {
      m_out.m_nodes.push_back(m_out.m_nodes[*root]);
    }
    return std::nullopt;
  }

private:
  using Node = VersionSpec::Node;
  using Clause = VersionSpec::Clause;

  void skip_spaces() {
    while (m_pos < m_text.size() && is_ascii_space(m_text[m_pos])) {
      ++m_pos;
    }
  }
  bool at(char c) const { return m_pos < m_text.size() && m_text[m_pos] == c; }
  std::nullopt_t fail(std::size_t offset, std::string message) {
    m_error = ParseError{offset, std::move(message)};
    return std::nullopt;
  }

  std::optional<std::uint32_t> parse_or(std::size_t depth);
  std::optional<std::uint32_t> parse_and(std::size_t depth);
  std::optional<std::uint32_t> parse_term(std::size_t depth);
  std::optional<std::uint32_t> parse_clause();
  std::optional<std::uint32_t> parse_regex();
  std::optional<std::uint32_t> interpret(std::optional<VersionOp> op, std::string_view op_text,
                                         std::string_view token, std::size_t offset);
  std::optional<std::uint32_t> interpret_bare(std::string_view token, std::size_t offset);
  std::optional<std::uint32_t> clause(VersionOp op, std::string_view version, std::size_t offset);
  std::optional<std::uint32_t> pattern_clause(std::string_view pattern, std::size_t offset);
  std::uint32_t add_clause(Clause c);
  std::uint32_t add_group(Node::Kind kind, const std::vector<std::uint32_t>& children);

  std::string_view m_text;
  SpecMode m_mode;
  VersionSpec& m_out;
  std::size_t m_pos = 0;
  std::optional<ParseError> m_error;
};

std::uint32_t SpecParser::add_clause(Clause c) {
  m_out.m_clauses.push_back(std::move(c));
  m_out.m_nodes.push_back(
      Node{Node::Kind::clause, static_cast<std::uint32_t>(m_out.m_clauses.size() - 1), 0});
  return static_cast<std::uint32_t>(m_out.m_nodes.size() - 1);
}

// A group of `kind` over `children`; a child group of the same kind is flattened into it.
std::uint32_t SpecParser::add_group(Node::Kind kind, const std::vector<std::uint32_t>& children) {
  if (children.size() == 1) {
    return children[0];
  }
  std::vector<std::uint32_t> flat;
  for (std::uint32_t child : children) {
    const Node n = m_out.m_nodes[child];
    if (n.kind == kind) {
      flat.insert(flat.end(), m_out.m_children.begin() + n.first,
                  m_out.m_children.begin() + n.first + n.count);
    } else {
      flat.push_back(child);
    }
  }
  const auto first = static_cast<std::uint32_t>(m_out.m_children.size());
  m_out.m_children.insert(m_out.m_children.end(), flat.begin(), flat.end());
  m_out.m_nodes.push_back(Node{kind, first, static_cast<std::uint32_t>(flat.size())});
  return static_cast<std::uint32_t>(m_out.m_nodes.size() - 1);
}

std::optional<std::uint32_t> SpecParser::parse_or(std::size_t depth) {
  std::vector<std::uint32_t> children;
  while (true) {
    auto child = parse_and(depth);
    if (!child) {
      return std::nullopt;
    }
    children.push_back(*child);
    if (!at('|')) {
      break;
    }
    ++m_pos;
  }
  return add_group(Node::Kind::any, children);
}

std::optional<std::uint32_t> SpecParser::parse_and(std::size_t depth) {
  std::vector<std::uint32_t> children;
  while (true) {
    auto child = parse_term(depth);
    if (!child) {
      return std::nullopt;
    }
    children.push_back(*child);
    if (!at(',')) {
      break;
    }
    ++m_pos;
  }
  return add_group(Node::Kind::all, children);
}

std::optional<std::uint32_t> SpecParser::parse_term(std::size_t depth) {
  skip_spaces();
  if (!at('(')) {
    auto c = parse_clause();
    skip_spaces();
    return c;
  }
  const std::size_t open = m_pos++;
  if (depth + 1 > VersionSpec::k_max_depth) {
    return fail(open, fmt::format("parentheses nested deeper than {}", VersionSpec::k_max_depth));
  }
  auto inner = parse_or(depth + 1);
  if (!inner) {
    return std::nullopt;
  }
  if (!at(')')) {
    return fail(m_pos < m_text.size() ? m_pos : open,
                m_pos < m_text.size() ? fmt::format("expected ')' instead of '{}'", m_text[m_pos])
                                      : std::string("'(' without a matching ')'"));
  }
  ++m_pos;
  skip_spaces();
  return inner;
}

std::optional<std::uint32_t> SpecParser::parse_regex() {
  const std::size_t start = m_pos;
  const std::size_t dollar = m_text.find('$', start);
  if (dollar == std::string_view::npos) {
    return fail(start, "a regular expression starts with '^' and ends with '$'");
  }
  m_pos = dollar + 1;
  return pattern_clause(m_text.substr(start, dollar + 1 - start), start);
}

std::optional<std::uint32_t> SpecParser::parse_clause() {
  if (at('^')) {
    return parse_regex();
  }
  const std::size_t op_start = m_pos;
  while (m_pos < m_text.size() && is_operator_char(m_text[m_pos])) {
    ++m_pos;
  }
  const std::string_view op_text = m_text.substr(op_start, m_pos - op_start);
  std::optional<VersionOp> op;
  if (!op_text.empty()) {
    const auto* found = std::find_if(k_operators.begin(), k_operators.end(),
                                     [&](const Operator& o) { return o.text == op_text; });
    if (found == k_operators.end()) {
      return fail(op_start, fmt::format("unknown operator '{}'", op_text));
    }
    op = found->op;
    skip_spaces();
  }
  const std::size_t start = m_pos;
  while (m_pos < m_text.size() && !ends_clause(m_text[m_pos])) {
    ++m_pos;
  }
  const std::string_view token = m_text.substr(start, m_pos - start);
  if (token.empty()) {
    if (m_pos < m_text.size() && m_text[m_pos] == '|' && start > 0 && m_text[start - 1] == '|') {
      return fail(start, "'||' is not an operator: write '|'");
    }
    return fail(start, op ? fmt::format("expected a version after '{}'", op_text) : "expected a version");
  }
  return op ? interpret(op, op_text, token, start) : interpret_bare(token, start);
}

// A clause without an operator: "*", "1.2" (exact), "1.2.*" / "1.2*" (prefix), "1.*.3" (glob).
std::optional<std::uint32_t> SpecParser::interpret_bare(std::string_view token, std::size_t offset) {
  if (token == "*" || (m_mode == SpecMode::lenient && is_star_run(token))) {
    return add_clause(Clause{});
  }
  if (is_star_run(token)) {
    return fail(offset, fmt::format("'{}' is not a version spec: write '*'", token));
  }
  const Wildcard w = split_wildcard(token);
  if (w.base.find('*') != std::string_view::npos) {
    if (w.dot_stars > 1 && m_mode == SpecMode::strict) {
      return fail(offset, fmt::format("repeated '.*' in '{}'", token));
    }
    return pattern_clause(token, offset);
  }
  if (!w.any()) {
    return clause(VersionOp::equal, token, offset);
  }
  if (w.base.empty()) {
    return fail(offset, fmt::format("expected a version before '{}'", token));
  }
  if (w.dot_stars > 1 && m_mode == SpecMode::strict) {
    return fail(offset + w.base.size(), fmt::format("repeated '.*': write '{}.*'", w.base));
  }
  return clause(VersionOp::starts_with, w.base, offset);
}

// A clause with an operator, the wildcard rules of conda.md §3.3 (and rattler's lenient mode).
std::optional<std::uint32_t> SpecParser::interpret(std::optional<VersionOp> op, std::string_view op_text,
                                                   std::string_view token, std::size_t offset) {
  const bool lenient = m_mode == SpecMode::lenient;
  if (token == "*") {
    const bool means_any = *op == VersionOp::greater_equal || *op == VersionOp::less_equal ||
                           *op == VersionOp::equal || *op == VersionOp::starts_with ||
                           *op == VersionOp::compatible;
    if (lenient && means_any) {
      return add_clause(Clause{});
    }
    return fail(offset, fmt::format("'*' can't follow '{}'", op_text));
  }
  const Wildcard w = split_wildcard(token);
  if (lenient && !w.base.empty() && w.base.find_first_not_of('*') == std::string_view::npos) {
    return interpret(op, op_text, "*", offset); // "<*.*", ">=**": the operator's '*' rule, not a version
  }
  if (!w.any()) {
    if (token.find('*') != std::string_view::npos && !lenient) {
      return fail(offset + token.find('*'), fmt::format("'*' in the version after '{}'", op_text));
    }
    return clause(*op, token, offset);
  }
  if (w.base.empty()) {
    return fail(offset, fmt::format("expected a version before '{}'", token));
  }
  if (w.dot_stars > 1 && !lenient) {
    return fail(offset + w.base.size(), fmt::format("repeated '.*': write '{}.*'", w.base));
  }
  if (w.base.find('*') != std::string_view::npos && !lenient) {
    return fail(offset + w.base.find('*'), fmt::format("'*' in the version after '{}'", op_text));
  }
  switch (*op) {
  case VersionOp::starts_with:
    return clause(VersionOp::starts_with, w.base, offset);
  case VersionOp::not_equal:
    return clause(VersionOp::not_starts_with, w.base, offset);
  case VersionOp::greater_equal: // conda reads ">=1.2.*" as ">=1.2", silently
    return clause(VersionOp::greater_equal, w.bare_star && lenient ? token : w.base, offset);
  case VersionOp::compatible:
    return fail(offset + w.base.size(), "'~=' can't take a '.*'");
  default:
    if (!lenient) {
      return fail(offset + w.base.size(), fmt::format("'{}' after '{}' means nothing: write '{}{}'",
                                                      token.substr(w.base.size()), op_text, op_text, w.base));
    }
    // conda drops a ".*" after <, <=, >, == (with a warning) and keeps a bare '*' in the version.
    return clause(*op, w.bare_star ? token : w.base, offset);
  }
}

std::optional<std::uint32_t> SpecParser::clause(VersionOp op, std::string_view version, std::size_t offset) {
  auto v = Version::parse(version);
  if (!v) {
    return fail(offset + v.error().offset, v.error().message);
  }
  Clause c;
  c.op = op;
  c.version = std::move(*v);
  if (op == VersionOp::compatible) {
    const std::size_t dot = version.rfind('.');
    auto prefix = dot == std::string_view::npos ? ParseResult<Version>(ParseError{version.size(), ""})
                                                : Version::parse(version.substr(0, dot));
    if (!prefix) {
      return fail(offset, "'~=' needs a version of two or more components");
    }
    c.prefix = std::move(*prefix);
  }
  return add_clause(std::move(c));
}

std::optional<std::uint32_t> SpecParser::pattern_clause(std::string_view pattern, std::size_t offset) {
  const bool regex = pattern.starts_with('^');
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    const bool version_char = std::isalnum(static_cast<unsigned char>(c)) != 0 ||
                              std::string_view("._+!*-").find(c) != std::string_view::npos;
    if (regex ? (c == '\'' || c == '"') : !version_char) {
      return fail(offset + i, fmt::format("invalid character '{}' in a version pattern", c));
    }
  }
  auto m = StringMatcher::parse(pattern);
  if (!m) {
    return fail(offset + m.error().offset, m.error().message);
  }
  Clause c;
  c.op = VersionOp::pattern;
  c.pattern = std::move(*m);
  c.pattern_text = std::string(pattern);
  return add_clause(std::move(c));
}

ParseResult<VersionSpec> VersionSpec::parse(std::string_view text, SpecMode mode) {
  if (text.size() > k_max_length) {
    return ParseError{k_max_length, fmt::format("a version spec is at most {} characters", k_max_length)};
  }
  VersionSpec spec;
  SpecParser parser(text, mode, spec);
  if (auto e = parser.parse()) {
    return std::move(*e);
  }
  return spec;
}

bool VersionSpec::matches_clause(const Clause& c, const Version& v) {
  switch (c.op) {
  case VersionOp::any:
    return true;
  case VersionOp::equal:
    return v == c.version;
  case VersionOp::not_equal:
    return v != c.version;
  case VersionOp::less:
    return v < c.version;
  case VersionOp::less_equal:
    return v <= c.version;
  case VersionOp::greater:
    return v > c.version;
  case VersionOp::greater_equal:
    return v >= c.version;
  case VersionOp::starts_with:
    return v.starts_with(c.version);
  case VersionOp::not_starts_with:
    return !v.starts_with(c.version);
  case VersionOp::compatible:
    return v >= c.version && v.starts_with(c.prefix);
  case VersionOp::pattern:
    return c.pattern.matches(v.str());
  }
  return false;
}

bool VersionSpec::matches_node(std::uint32_t index, const Version& v) const {
  const Node& n = m_nodes[index];
  if (n.kind == Node::Kind::clause) {
    return matches_clause(m_clauses[n.first], v);
  }
  const auto* begin = m_children.data() + n.first;
  const auto* end = begin + n.count;
  if (n.kind == Node::Kind::all) {
    return std::all_of(begin, end, [&](std::uint32_t child) { return matches_node(child, v); });
  }
  return std::any_of(begin, end, [&](std::uint32_t child) { return matches_node(child, v); });
}

bool VersionSpec::matches(const Version& version) const {
  return m_nodes.empty() || matches_node(static_cast<std::uint32_t>(m_nodes.size() - 1), version);
}

std::string VersionSpec::clause_str(const Clause& c) {
  const std::string& v = c.version.str();
  switch (c.op) {
  case VersionOp::any:
    return "*";
  case VersionOp::equal:
    return "==" + v;
  case VersionOp::not_equal:
    return "!=" + v;
  case VersionOp::less:
    return "<" + v;
  case VersionOp::less_equal:
    return "<=" + v;
  case VersionOp::greater:
    return ">" + v;
  case VersionOp::greater_equal:
    return ">=" + v;
  case VersionOp::starts_with: // a version ending in '*' (lenient) keeps it only before a ".*"
    return "=" + v + (v.ends_with('*') ? ".*" : "");
  case VersionOp::not_starts_with:
    return "!=" + v + ".*";
  case VersionOp::compatible:
    return "~=" + v;
  case VersionOp::pattern:
    return c.pattern_text;
  }
  return "*";
}

void VersionSpec::render(std::uint32_t index, Node::Kind parent, std::string& out) const {
  const Node& n = m_nodes[index];
  if (n.kind == Node::Kind::clause) {
    out += clause_str(m_clauses[n.first]);
    return;
  }
  const bool parens = n.kind == Node::Kind::any && parent == Node::Kind::all;
  if (parens) {
    out += '(';
  }
  for (std::uint32_t i = 0; i < n.count; ++i) {
    if (i > 0) {
      out += n.kind == Node::Kind::all ? ',' : '|';
    }
    render(m_children[n.first + i], n.kind, out);
  }
  if (parens) {
    out += ')';
  }
}

std::string VersionSpec::str() const {
  if (m_nodes.empty()) {
    return "*";
  }
  std::string out;
  render(static_cast<std::uint32_t>(m_nodes.size() - 1), Node::Kind::any, out);
  return out;
}

std::optional<VersionOp> VersionSpec::single_op() const {
  if (m_nodes.empty()) {
    return VersionOp::any;
  }
  const Node& root = m_nodes.back();
  if (root.kind != Node::Kind::clause) {
    return std::nullopt;
  }
  return m_clauses[root.first].op;
}

const Version* VersionSpec::single_version() const {
  const auto op = single_op();
  if (!op || *op == VersionOp::any || *op == VersionOp::pattern) {
    return nullptr;
  }
  return &m_clauses[m_nodes.back().first].version;
}

bool VersionSpec::has_pattern() const {
  return std::any_of(m_clauses.begin(), m_clauses.end(),
                     [](const Clause& c) { return c.op == VersionOp::pattern; });
}

} // namespace lockstep::conda
