#include "support/python/pep508.hpp"

#include "support/base/text.hpp"

#include <algorithm>
#include <utility>

namespace lockstep {

namespace {

constexpr std::size_t k_max_requirement_length = std::size_t{64} * 1024;
constexpr int k_max_marker_depth = 32;

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

} // namespace

std::string normalize_project_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  bool in_run = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_run) {
        out += '-';
      }
      in_run = true;
      continue;
    }
    in_run = false;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

bool valid_project_name(std::string_view name) {
  if (name.empty() || !is_ascii_alnum(name.front()) || !is_ascii_alnum(name.back())) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return is_ascii_alnum(c) || c == '.' || c == '_' || c == '-'; });
}

MarkerEnv linux_cpython(std::string python_full_version, std::string machine) {
  MarkerEnv env;
  // "3.11.2" -> "3.11" (the first two components, as platform.python_version_tuple()[:2]).
  std::string short_version = python_full_version;
  if (auto dot = short_version.find('.'); dot != std::string::npos) {
    if (auto second = short_version.find('.', dot + 1); second != std::string::npos) {
      short_version.resize(second);
    }
  }
  env.python_version = std::move(short_version);
  env.implementation_version = python_full_version;
  env.python_full_version = std::move(python_full_version);
  env.platform_machine = std::move(machine);
  return env;
}

// ---- markers ------------------------------------------------------------------------------------

namespace {

enum class MarkerOp { version_eq, eq, compatible, ne, le, ge, lt, gt, in, not_in };

std::string_view op_text(MarkerOp op) {
  static constexpr std::string_view names[] = {"===", "==", "~=", "!=", "<=", ">=", "<", ">", "in", "not in"};
  return names[static_cast<int>(op)];
}

// The marker variables, by canonical name, with the spellings packaging accepts.
constexpr std::pair<std::string_view, std::string_view> k_variables[] = {
    {"python_version", "python_version"},
    {"python_full_version", "python_full_version"},
    {"os_name", "os_name"},
    {"os.name", "os_name"},
    {"sys_platform", "sys_platform"},
    {"sys.platform", "sys_platform"},
    {"platform_release", "platform_release"},
    {"platform_system", "platform_system"},
    {"platform_version", "platform_version"},
    {"platform.version", "platform_version"},
    {"platform_machine", "platform_machine"},
    {"platform.machine", "platform_machine"},
    {"platform_python_implementation", "platform_python_implementation"},
    {"platform.python_implementation", "platform_python_implementation"},
    {"python_implementation", "platform_python_implementation"},
    {"implementation_name", "implementation_name"},
    {"implementation_version", "implementation_version"},
    {"extra", "extra"},
};

Result<std::string> env_value(const MarkerEnv& env, std::string_view name) {
  auto known = [](const std::optional<std::string>& v, std::string_view n) -> Result<std::string> {
    if (!v) {
      return invalid_input("the marker variable {} is not known for the target (it describes the host that "
                           "runs the image); remove it from the requirement or pin without it",
                           n);
    }
    return *v;
  };
  if (name == "python_version") {
    return env.python_version;
  }
  if (name == "python_full_version") {
    return env.python_full_version;
  }
  if (name == "os_name") {
    return env.os_name;
  }
  if (name == "sys_platform") {
    return env.sys_platform;
  }
  if (name == "platform_release") {
    return known(env.platform_release, name);
  }
  if (name == "platform_system") {
    return env.platform_system;
  }
  if (name == "platform_version") {
    return known(env.platform_version, name);
  }
  if (name == "platform_machine") {
    return env.platform_machine;
  }
  if (name == "platform_python_implementation") {
    return env.platform_python_implementation;
  }
  if (name == "implementation_name") {
    return env.implementation_name;
  }
  if (name == "implementation_version") {
    return env.implementation_version;
  }
  if (name == "extra") {
    return env.extra;
  }
  return internal_error("unknown marker variable {}", name);
}

} // namespace

/// A marker is a flat list of atoms joined by `and`/`or` (`and` binds tighter, as in packaging's
/// evaluation); an atom is a comparison or a parenthesised list.
struct Marker::Node {
  // Comparison (when `atoms` is empty and `is_group` is false).
  bool is_group = false;
  bool lhs_is_variable = false;
  std::string lhs;
  MarkerOp op = MarkerOp::eq;
  std::string rhs;
  // Group.
  std::vector<std::shared_ptr<const Node>> atoms;
  std::vector<bool> or_before; ///< or_before[i]: the connector before atoms[i + 1] is `or`
};

namespace {

using Node = Marker::Node;

class MarkerParser {
public:
  explicit MarkerParser(std::string_view text) : m_text(text) {}

  Result<std::shared_ptr<const Node>> parse() {
    LS_TRY_ASSIGN(auto root, parse_list(0));
    skip_space();
    if (m_pos != m_text.size()) {
      return fail("'and', 'or' or the end of the marker");
    }
    return root;
  }

private:
  Error fail(std::string_view expected) const {
    return invalid_input("invalid marker '{}': expected {} at column {}", m_text, expected, m_pos + 1);
  }

  void skip_space() {
    while (m_pos < m_text.size() && is_space(m_text[m_pos])) {
      ++m_pos;
    }
  }

  // A word ("and", "or", "in", "not") that is not the start of a longer identifier.
  bool take_word(std::string_view word) {
    if (m_text.substr(m_pos, word.size()) != word) {
      return false;
    }
    std::size_t end = m_pos + word.size();
    if (end < m_text.size() && (is_ascii_alnum(m_text[end]) || m_text[end] == '_' || m_text[end] == '.')) {
      return false;
    }
    m_pos = end;
    return true;
  }

  Result<std::shared_ptr<const Node>> parse_list(int depth) {
    if (depth > k_max_marker_depth) {
      return invalid_input("invalid marker '{}': parentheses nested deeper than {}", m_text,
                           k_max_marker_depth);
    }
    auto group = std::make_shared<Node>();
    group->is_group = true;
    LS_TRY_ASSIGN(auto first, parse_atom(depth));
    group->atoms.push_back(std::move(first));
    for (;;) {
      std::size_t save = m_pos;
      skip_space();
      bool is_or = false;
      if (take_word("and")) {
        is_or = false;
      } else if (take_word("or")) {
        is_or = true;
      } else {
        m_pos = save;
        break;
      }
      LS_TRY_ASSIGN(auto next, parse_atom(depth));
      group->or_before.push_back(is_or);
      group->atoms.push_back(std::move(next));
    }
    return std::shared_ptr<const Node>(std::move(group));
  }

  Result<std::shared_ptr<const Node>> parse_atom(int depth) {
    skip_space();
    if (m_pos < m_text.size() && m_text[m_pos] == '(') {
      ++m_pos;
      LS_TRY_ASSIGN(auto inner, parse_list(depth + 1));
      skip_space();
      if (m_pos >= m_text.size() || m_text[m_pos] != ')') {
        return fail("')'");
      }
      ++m_pos;
      return inner;
    }
    auto cmp = std::make_shared<Node>();
    LS_TRY_ASSIGN(bool lhs_var, parse_operand(cmp->lhs));
    skip_space();
    LS_TRY_ASSIGN(cmp->op, parse_op());
    skip_space();
    std::size_t rhs_column = m_pos;
    LS_TRY_ASSIGN(bool rhs_var, parse_operand(cmp->rhs));
    if (lhs_var == rhs_var) {
      m_pos = rhs_column;
      return fail(lhs_var ? "a quoted string (one side of a comparison must be a string)"
                          : "a marker variable (one side of a comparison must be a variable)");
    }
    cmp->lhs_is_variable = lhs_var;
    return std::shared_ptr<const Node>(std::move(cmp));
  }

  // A quoted string (false) or a variable (true, canonical name in `out`).
  Result<bool> parse_operand(std::string& out) {
    if (m_pos < m_text.size() && (m_text[m_pos] == '"' || m_text[m_pos] == '\'')) {
      char quote = m_text[m_pos];
      std::size_t end = m_text.find(quote, m_pos + 1);
      if (end == std::string_view::npos) {
        return fail(fmt::format("a closing {}", quote));
      }
      out = std::string(m_text.substr(m_pos + 1, end - m_pos - 1));
      m_pos = end + 1;
      return false;
    }
    std::size_t end = m_pos;
    while (end < m_text.size() && (is_ascii_alnum(m_text[end]) || m_text[end] == '_' || m_text[end] == '.')) {
      ++end;
    }
    std::string_view word = m_text.substr(m_pos, end - m_pos);
    for (const auto& [spelling, canonical] : k_variables) {
      if (word == spelling) {
        out = std::string(canonical);
        m_pos = end;
        return true;
      }
    }
    return fail("a marker variable (python_version, sys_platform, platform_machine, extra, ...) or a quoted "
                "string");
  }

  Result<MarkerOp> parse_op() {
    static constexpr std::pair<std::string_view, MarkerOp> symbols[] = {
        {"===", MarkerOp::version_eq}, {"==", MarkerOp::eq}, {"~=", MarkerOp::compatible},
        {"!=", MarkerOp::ne},          {"<=", MarkerOp::le}, {">=", MarkerOp::ge},
        {"<", MarkerOp::lt},           {">", MarkerOp::gt},
    };
    for (const auto& [sym, op] : symbols) {
      if (m_text.substr(m_pos, sym.size()) == sym) {
        m_pos += sym.size();
        return op;
      }
    }
    if (take_word("in")) {
      return MarkerOp::in;
    }
    std::size_t save = m_pos;
    if (take_word("not")) {
      std::size_t before = m_pos;
      skip_space();
      if (m_pos > before && take_word("in")) {
        return MarkerOp::not_in;
      }
    }
    m_pos = save;
    return fail("a comparison operator (== != < <= > >= ~= === in, not in)");
  }

  std::string_view m_text;
  std::size_t m_pos = 0;
};

std::string quote_value(const std::string& value) {
  return value.find('"') == std::string::npos ? "\"" + value + "\"" : "'" + value + "'";
}

std::string format_node(const Node& node, bool top) {
  if (!node.is_group) {
    std::string lhs = node.lhs_is_variable ? node.lhs : quote_value(node.lhs);
    std::string rhs = node.lhs_is_variable ? quote_value(node.rhs) : node.rhs;
    return lhs + " " + std::string(op_text(node.op)) + " " + rhs;
  }
  if (node.atoms.size() == 1) {
    return format_node(*node.atoms.front(), top);
  }
  std::string out;
  for (std::size_t i = 0; i < node.atoms.size(); ++i) {
    if (i > 0) {
      out += node.or_before[i - 1] ? " or " : " and ";
    }
    out += format_node(*node.atoms[i], false);
  }
  return top ? out : "(" + out + ")";
}

// Python's string operators.
Result<bool> string_compare(const std::string& lhs, MarkerOp op, const std::string& rhs) {
  switch (op) {
  case MarkerOp::eq:
    return lhs == rhs;
  case MarkerOp::ne:
    return lhs != rhs;
  case MarkerOp::lt:
    return lhs < rhs;
  case MarkerOp::le:
    return lhs <= rhs;
  case MarkerOp::gt:
    return lhs > rhs;
  case MarkerOp::ge:
    return lhs >= rhs;
  case MarkerOp::in:
    return rhs.find(lhs) != std::string::npos;
  case MarkerOp::not_in:
    return rhs.find(lhs) == std::string::npos;
  case MarkerOp::version_eq:
    return ascii_lower(lhs) == ascii_lower(rhs);
  case MarkerOp::compatible:
    break;
  }
  return invalid_input("marker comparison '{}' ~= '{}' is undefined: both sides must be valid versions", lhs,
                       rhs);
}

Result<bool> compare(std::string lhs, MarkerOp op, std::string rhs, std::string_view variable) {
  if (variable == "extra") {
    lhs = normalize_project_name(lhs);
    rhs = normalize_project_name(rhs);
  }
  if (op != MarkerOp::in && op != MarkerOp::not_in) {
    auto spec = VersionSpecifier::parse(std::string(op_text(op)) + rhs);
    if (spec) {
      if (spec->op == VersionSpecifier::Op::arbitrary) {
        return string_compare(lhs, op, rhs);
      }
      if (auto version = PyVersion::parse(lhs)) {
        return spec->contains(*version, Prereleases::allow);
      }
    }
  }
  return string_compare(lhs, op, rhs);
}

Result<bool> evaluate_node(const Node& node, const MarkerEnv& env) {
  if (!node.is_group) {
    const std::string& variable = node.lhs_is_variable ? node.lhs : node.rhs;
    LS_TRY_ASSIGN(std::string value, env_value(env, variable));
    if (node.lhs_is_variable) {
      return compare(value, node.op, node.rhs, variable);
    }
    return compare(node.lhs, node.op, value, variable);
  }
  // any(all(group) for groups split at `or`); every comparison is evaluated so errors surface.
  bool any = false;
  bool all = true;
  for (std::size_t i = 0; i < node.atoms.size(); ++i) {
    if (i > 0 && node.or_before[i - 1]) {
      any = any || all;
      all = true;
    }
    LS_TRY_ASSIGN(bool value, evaluate_node(*node.atoms[i], env));
    all = all && value;
  }
  return any || all;
}

bool node_uses_extra(const Node& node) {
  if (!node.is_group) {
    return (node.lhs_is_variable ? node.lhs : node.rhs) == "extra";
  }
  return std::any_of(node.atoms.begin(), node.atoms.end(), [](const auto& a) { return node_uses_extra(*a); });
}

} // namespace

Result<Marker> Marker::parse(std::string_view text) {
  if (text.size() > k_max_requirement_length) {
    return invalid_input("marker is longer than {} bytes", k_max_requirement_length);
  }
  MarkerParser parser(text);
  LS_TRY_ASSIGN(auto root, parser.parse());
  Marker m;
  m.m_root = std::move(root);
  return m;
}

Result<bool> Marker::evaluate(const MarkerEnv& env) const {
  auto r = evaluate_node(*m_root, env);
  if (!r) {
    return r.error().with_context(fmt::format("can't evaluate the marker '{}'", str()));
  }
  return r;
}

std::string Marker::str() const {
  return format_node(*m_root, true);
}

bool Marker::uses_extra() const {
  return node_uses_extra(*m_root);
}

// ---- requirements -------------------------------------------------------------------------------

Result<Requirement> Requirement::parse(std::string_view text) {
  if (text.size() > k_max_requirement_length) {
    return invalid_input("requirement is longer than {} bytes", k_max_requirement_length);
  }
  std::string_view s = text;
  std::size_t pos = 0;
  auto fail = [&](std::string_view expected) {
    return invalid_input("invalid requirement '{}': expected {} at column {}", trim(text), expected, pos + 1);
  };
  auto skip_space = [&] {
    while (pos < s.size() && is_space(s[pos])) {
      ++pos;
    }
  };
  auto take_name = [&]() -> std::string_view {
    std::size_t start = pos;
    while (pos < s.size() && (is_ascii_alnum(s[pos]) || s[pos] == '.' || s[pos] == '_' || s[pos] == '-')) {
      ++pos;
    }
    return s.substr(start, pos - start);
  };

  Requirement req;
  skip_space();
  std::size_t name_start = pos;
  std::string_view name = take_name();
  if (!valid_project_name(name)) {
    pos = name_start;
    return fail("a project name (letters and digits, with '.', '_' or '-' inside)");
  }
  req.name = std::string(name);
  req.project = normalize_project_name(name);
  skip_space();
  if (pos < s.size() && s[pos] == '[') {
    ++pos;
    skip_space();
    while (pos < s.size() && s[pos] != ']') {
      std::size_t extra_start = pos;
      std::string_view extra = take_name();
      if (!valid_project_name(extra)) {
        pos = extra_start;
        return fail("an extra name");
      }
      req.extras.push_back(normalize_project_name(extra));
      skip_space();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        skip_space();
        if (pos < s.size() && s[pos] == ']') {
          return fail("an extra name after ','");
        }
      } else if (pos < s.size() && s[pos] != ']') {
        return fail("',' or ']'");
      }
    }
    if (pos >= s.size()) {
      return fail("']'");
    }
    ++pos;
    std::sort(req.extras.begin(), req.extras.end());
    req.extras.erase(std::unique(req.extras.begin(), req.extras.end()), req.extras.end());
  }
  skip_space();
  std::string_view marker_text;
  bool has_marker = false;
  if (pos < s.size() && s[pos] == '@') {
    ++pos;
    skip_space();
    std::size_t url_start = pos;
    while (pos < s.size() && !is_space(s[pos]) && s[pos] != '\n' && s[pos] != '\r') {
      ++pos;
    }
    req.url = std::string(s.substr(url_start, pos - url_start));
    if (req.url.empty()) {
      return fail("a URL after '@'");
    }
    std::size_t after_url = pos;
    skip_space();
    if (pos < s.size() && s[pos] == ';' && pos > after_url) {
      has_marker = true;
      marker_text = s.substr(pos + 1);
    } else if (!trim(s.substr(pos)).empty()) {
      return fail("the end of the requirement, or whitespace and ';' before a marker");
    }
  } else {
    std::string_view spec_text;
    if (pos < s.size() && s[pos] == '(') {
      std::size_t close = s.find(')', pos);
      if (close == std::string_view::npos) {
        return fail("')' closing the version specifier");
      }
      spec_text = s.substr(pos + 1, close - pos - 1);
      pos = close + 1;
      skip_space();
    } else {
      std::size_t end = s.find(';', pos);
      if (end == std::string_view::npos) {
        end = s.size();
      }
      spec_text = s.substr(pos, end - pos);
      pos = end;
    }
    auto spec = SpecifierSet::parse(spec_text);
    if (!spec) {
      return invalid_input("invalid requirement '{}': {}", trim(text), spec.error().message);
    }
    req.specifier = std::move(*spec);
    if (pos < s.size() && s[pos] == ';') {
      has_marker = true;
      marker_text = s.substr(pos + 1);
    } else if (!trim(s.substr(pos)).empty()) {
      return fail("';' before a marker, or the end of the requirement");
    }
  }
  if (has_marker) {
    auto marker = Marker::parse(trim(marker_text));
    if (!marker) {
      return invalid_input("invalid requirement '{}': {}", trim(text), marker.error().message);
    }
    req.marker = std::move(*marker);
  }
  return req;
}

std::string Requirement::str() const {
  std::string out = name;
  if (!extras.empty()) {
    out += '[';
    for (std::size_t i = 0; i < extras.size(); ++i) {
      out += (i > 0 ? "," : "") + extras[i];
    }
    out += ']';
  }
  out += specifier.str();
  if (!url.empty()) {
    out += "@ " + url;
    if (marker) {
      out += ' ';
    }
  }
  if (marker) {
    out += "; " + marker->str();
  }
  return out;
}

Result<bool> Requirement::applies(const MarkerEnv& env, const std::vector<std::string>& requested) const {
  if (!marker) {
    return true;
  }
  MarkerEnv e = env;
  e.extra.clear();
  LS_TRY_ASSIGN(bool base, marker->evaluate(e));
  if (base) {
    return true;
  }
  if (!marker->uses_extra()) {
    return false;
  }
  for (const auto& extra : requested) {
    e.extra = extra;
    LS_TRY_ASSIGN(bool with_extra, marker->evaluate(e));
    if (with_extra) {
      return true;
    }
  }
  return false;
}

// ---- requirements.txt ---------------------------------------------------------------------------

namespace {

constexpr std::size_t k_max_requirements_file = 16U << 20;

struct LogicalLine {
  int number = 0;
  std::string text;
};

// pip's COMMENT_RE: "(^|\s+)#.*$".
std::string strip_comment(std::string_view line) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '#' && (i == 0 || is_space(line[i - 1]))) {
      std::size_t end = i;
      while (end > 0 && is_space(line[end - 1])) {
        --end;
      }
      return std::string(line.substr(0, end));
    }
  }
  return std::string(line);
}

bool is_comment_line(std::string_view line) {
  std::string_view t = trim(line);
  return !t.empty() && t.front() == '#';
}

// pip's join_lines + ignore_comments: a line ending in '\' continues on the next one (unless it is
// a comment), comments are removed, blank lines dropped.
std::vector<LogicalLine> logical_lines(std::string_view text) {
  std::vector<LogicalLine> out;
  std::string pending;
  int pending_start = 0;
  bool continuing = false;
  int number = 0;
  auto emit = [&](int line_number, const std::string& joined) {
    std::string stripped(trim(strip_comment(joined)));
    if (!stripped.empty()) {
      out.push_back({line_number, std::move(stripped)});
    }
  };
  for (std::string_view line : text_lines(text)) {
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    ++number;
    bool continues = !line.empty() && line.back() == '\\' && !is_comment_line(line);
    if (continues) {
      if (!continuing) {
        pending_start = number;
        pending.clear();
      }
      continuing = true;
      pending += std::string(line.substr(0, line.size() - 1));
      continue;
    }
    if (continuing) {
      // A comment line ends a continuation: pip prefixes it with ' ' so it is stripped as a comment.
      pending += is_comment_line(line) ? " " + std::string(line) : std::string(line);
      emit(pending_start, pending);
      continuing = false;
    } else {
      emit(number, std::string(line));
    }
  }
  if (continuing) {
    emit(pending_start, pending);
  }
  return out;
}

std::vector<std::string> split_space(std::string_view s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) {
      ++i;
    }
    std::size_t start = i;
    while (i < s.size() && !is_space(s[i])) {
      ++i;
    }
    if (i > start) {
      out.emplace_back(s.substr(start, i - start));
    }
  }
  return out;
}

// "--opt=value" or "--opt value" / "-o value" / "-ovalue". Returns the value or an error.
struct OptionToken {
  std::string name;
  std::optional<std::string> value;
};

std::vector<OptionToken> option_tokens(const std::vector<std::string>& words,
                                       std::vector<std::string>& errors, const std::string& where) {
  static constexpr std::string_view takes_value[] = {"-i",
                                                     "--index-url",
                                                     "--extra-index-url",
                                                     "-f",
                                                     "--find-links",
                                                     "--hash",
                                                     "-r",
                                                     "--requirement",
                                                     "-c",
                                                     "--constraint",
                                                     "-e",
                                                     "--editable",
                                                     "--trusted-host",
                                                     "--no-binary",
                                                     "--only-binary",
                                                     "--use-feature",
                                                     "--config-settings",
                                                     "--global-option"};
  static constexpr std::string_view flags[] = {"--pre", "--no-index", "--require-hashes", "--prefer-binary"};
  std::vector<OptionToken> out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    OptionToken t;
    if (auto eq = w.find('='); w.rfind("--", 0) == 0 && eq != std::string::npos) {
      t.name = w.substr(0, eq);
      t.value = w.substr(eq + 1);
    } else if (w.size() > 2 && w[0] == '-' && w[1] != '-') {
      t.name = w.substr(0, 2);
      t.value = w.substr(2);
    } else {
      t.name = w;
    }
    bool needs_value =
        std::find(std::begin(takes_value), std::end(takes_value), t.name) != std::end(takes_value);
    bool is_flag = std::find(std::begin(flags), std::end(flags), t.name) != std::end(flags);
    if (!needs_value && !is_flag) {
      errors.push_back(fmt::format("{}: unknown or unsupported option '{}'", where, w));
      continue;
    }
    if (is_flag && t.value) {
      errors.push_back(fmt::format("{}: option {} takes no value", where, t.name));
      continue;
    }
    if (needs_value && !t.value) {
      if (i + 1 >= words.size()) {
        errors.push_back(fmt::format("{}: option {} needs a value", where, t.name));
        continue;
      }
      t.value = words[++i];
    }
    out.push_back(std::move(t));
  }
  return out;
}

} // namespace

Result<RequirementsFile> parse_requirements_txt(std::string_view text, std::string_view what) {
  if (text.size() > k_max_requirements_file) {
    return invalid_input("{}: requirements file is larger than {} bytes", what, k_max_requirements_file);
  }
  RequirementsFile file;
  std::vector<std::string> errors;
  for (const LogicalLine& line : logical_lines(text)) {
    std::string where = fmt::format("{}:{}", what, line.number);
    if (line.text.front() == '-') {
      for (const OptionToken& t : option_tokens(split_space(line.text), errors, where)) {
        if (t.name == "-i" || t.name == "--index-url") {
          file.index_urls.push_back(*t.value);
        } else if (t.name == "--extra-index-url") {
          file.extra_index_urls.push_back(*t.value);
        } else if (t.name == "-f" || t.name == "--find-links") {
          file.find_links.push_back(*t.value);
        } else if (t.name == "--no-index") {
          file.no_index = true;
        } else if (t.name == "--pre") {
          file.pre = true;
        } else if (t.name == "--require-hashes") {
          file.require_hashes = true;
        } else if (t.name == "-r" || t.name == "--requirement" || t.name == "-c" ||
                   t.name == "--constraint") {
          errors.push_back(
              fmt::format("{}: {} {}: included files are not supported; list their requirements in "
                          "this file",
                          where, t.name, *t.value));
        } else if (t.name == "-e" || t.name == "--editable") {
          errors.push_back(
              fmt::format("{}: editable requirement {}: not supported in a lock; build a wheel and "
                          "pin it",
                          where, *t.value));
        } else if (t.name == "--hash") {
          errors.push_back(fmt::format("{}: --hash must follow a requirement on the same line", where));
        }
        // --trusted-host, --no-binary, --only-binary, --prefer-binary, --use-feature: pip's download
        // policy, which a lock of wheels pinned by hash does not need.
      }
      continue;
    }
    // pip's break_args_options: the requirement runs until the first word starting with '-'.
    std::vector<std::string> words;
    {
      std::size_t i = 0;
      std::string_view s = line.text;
      while (i <= s.size()) {
        std::size_t j = s.find(' ', i);
        if (j == std::string_view::npos) {
          j = s.size();
        }
        words.emplace_back(s.substr(i, j - i));
        i = j + 1;
      }
    }
    std::string req_text;
    std::size_t k = 0;
    for (; k < words.size() && words[k].rfind('-', 0) != 0; ++k) {
      req_text += (k > 0 ? " " : "") + words[k];
    }
    std::vector<std::string> option_words;
    for (; k < words.size(); ++k) {
      if (!words[k].empty()) {
        option_words.push_back(words[k]);
      }
    }
    auto req = Requirement::parse(req_text);
    if (!req) {
      std::string_view t = trim(req_text);
      bool looks_like_path = t.find('/') != std::string_view::npos && t.find('@') == std::string_view::npos;
      if (looks_like_path || t.rfind('.', 0) == 0) {
        errors.push_back(fmt::format("{}: '{}' has no project name; write it as NAME @ URL", where, t));
      } else {
        errors.push_back(fmt::format("{}: {}", where, req.error().message));
      }
      continue;
    }
    PinnedRequirement pinned{std::move(*req), {}, line.number};
    for (const OptionToken& t : option_tokens(option_words, errors, where)) {
      if (t.name != "--hash") {
        errors.push_back(fmt::format("{}: option {} is not supported after a requirement", where, t.name));
        continue;
      }
      std::string_view value = *t.value;
      auto colon = value.find(':');
      std::string algorithm(value.substr(0, colon == std::string_view::npos ? 0 : colon));
      if (colon == std::string_view::npos || algorithm != "sha256") {
        errors.push_back(fmt::format(
            "{}: --hash={}: only sha256 hashes are supported (sha256:<64 hex digits>)", where, value));
        continue;
      }
      std::string hex = ascii_lower(value.substr(colon + 1));
      if (hex.size() != 64 || !is_lower_hex(hex)) {
        errors.push_back(fmt::format("{}: --hash={}: expected 64 hex digits after 'sha256:'", where, value));
        continue;
      }
      auto digest = Digest::parse("sha256:" + hex);
      if (!digest) {
        errors.push_back(fmt::format("{}: --hash={}: {}", where, value, digest.error().message));
        continue;
      }
      if (std::find(pinned.hashes.begin(), pinned.hashes.end(), *digest) == pinned.hashes.end()) {
        pinned.hashes.push_back(*digest);
      }
    }
    file.requirements.push_back(std::move(pinned));
  }
  if (!errors.empty()) {
    std::string message;
    for (const auto& e : errors) {
      message += (message.empty() ? "" : "\n") + e;
    }
    return Error{ExitCode::invalid_input, message};
  }
  return file;
}

} // namespace lockstep
