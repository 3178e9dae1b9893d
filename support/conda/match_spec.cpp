#include "support/conda/match_spec.hpp"

#include "support/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

namespace lockstep::conda {

namespace {

// conda's known platforms (conda/base/constants.py PLATFORMS) and noarch.
constexpr std::array<std::string_view, 19> k_known_subdirs = {
    "noarch",        "emscripten-wasm32",
    "wasi-wasm32",   "freebsd-64",
    "linux-32",      "linux-64",
    "linux-aarch64", "linux-armv6l",
    "linux-armv7l",  "linux-ppc64",
    "linux-ppc64le", "linux-riscv64",
    "linux-s390x",   "osx-64",
    "osx-arm64",     "win-32",
    "win-64",        "win-arm64",
    "zos-z",
};

// The hosts whose paths are channel names (the default channel alias, and defaults' home).
constexpr std::array<std::string_view, 4> k_alias_prefixes = {
    "https://conda.anaconda.org/",
    "http://conda.anaconda.org/",
    "https://repo.anaconda.com/",
    "http://repo.anaconda.com/",
};

// The channels `defaults` stands for (conda.md §1.1).
constexpr std::array<std::string_view, 3> k_defaults = {"pkgs/main", "pkgs/r", "pkgs/msys2"};

// The bracket keys, in the order the canonical form prints them.
constexpr std::array<std::string_view, 15> k_keys = {
    "channel", "subdir", "name",   "version", "build",          "build_number", "track_features", "features",
    "url",     "md5",    "sha256", "license", "license_family", "fn",           "build_string",
};

bool is_operator_char(char c) {
  return c == '=' || c == '<' || c == '>' || c == '!' || c == '~' || c == ',' || c == '|' || c == '(' ||
         c == ')';
}
bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-' || c == '*';
}
bool is_build_char(char c) {
  return is_name_char(c) || c == '+';
}

// Names separated by spaces or commas, sorted and without repeats.
std::vector<std::string> split_features(std::string_view text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t end = std::min(text.find_first_of(" ,", i), text.size());
    if (end > i) {
      out.emplace_back(text.substr(i, end - i));
    }
    i = end + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string join_features(const std::vector<std::string>& features) {
  std::string out;
  for (const auto& f : features) {
    out += (out.empty() ? "" : " ") + f;
  }
  return out;
}

// A bracket value as the canonical form writes it: in single quotes when it holds a separator, an
// operator or a quote (in double quotes when it holds a single one; the parsers keep any value from
// holding both).
std::string bracket_value(std::string_view value, bool always_quote = false) {
  const bool quote = always_quote || value.empty() ||
                     value.find_first_of(" \t\n\r\f\v,=[]<>|()'\"") != std::string_view::npos;
  const char mark = value.find('\'') == std::string_view::npos ? '\'' : '"';
  return quote ? fmt::format("{}{}{}", mark, value, mark) : std::string(value);
}

// "SCHEME://...NAME.conda" (or .tar.bz2) without spaces, quotes or brackets: a package's URL.
bool is_artifact_url(std::string_view s) {
  const std::size_t scheme = s.find("://");
  if (scheme == std::string_view::npos || scheme == 0 ||
      !(s.ends_with(".conda") || s.ends_with(".tar.bz2"))) {
    return false;
  }
  const auto scheme_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '+' || c == '.' || c == '-';
  };
  return std::all_of(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(scheme), scheme_char) &&
         s.find_first_of(" \t\n\r\f\v'\"[]#") == std::string_view::npos;
}

} // namespace

bool is_known_subdir(std::string_view subdir) {
  return std::find(k_known_subdirs.begin(), k_known_subdirs.end(), subdir) != k_known_subdirs.end();
}

std::string canonical_channel(std::string_view channel) {
  while (channel.ends_with('/')) {
    channel.remove_suffix(1);
  }
  const std::size_t slash = channel.rfind('/');
  if (slash != std::string_view::npos && is_known_subdir(channel.substr(slash + 1))) {
    channel = channel.substr(0, slash);
  }
  for (std::string_view prefix : k_alias_prefixes) {
    if (channel.starts_with(prefix) && channel.size() > prefix.size()) {
      channel.remove_prefix(prefix.size());
      break;
    }
  }
  return std::string(channel);
}

// ---- build_number ------------------------------------------------------------------------------

ParseResult<BuildNumberSpec> BuildNumberSpec::parse(std::string_view text) {
  BuildNumberSpec spec;
  if (text == "*") {
    return spec;
  }
  if (text.starts_with('^')) {
    auto m = StringMatcher::parse(text);
    if (!m || m->kind() != StringMatcher::Kind::regex) {
      return m ? ParseError{0, "a regular expression starts with '^' and ends with '$'"} : m.error();
    }
    spec.m_op = VersionOp::pattern;
    spec.m_pattern = std::move(*m);
    return spec;
  }
  const std::size_t digits = std::min(text.find_first_not_of("=!<>"), text.size());
  const std::string_view op = text.substr(0, digits);
  static constexpr std::array<std::pair<std::string_view, VersionOp>, 8> k_ops = {{
      {"", VersionOp::equal},
      {"==", VersionOp::equal},
      {"=", VersionOp::equal},
      {"!=", VersionOp::not_equal},
      {"<", VersionOp::less},
      {"<=", VersionOp::less_equal},
      {">", VersionOp::greater},
      {">=", VersionOp::greater_equal},
  }};
  const auto* found = std::find_if(k_ops.begin(), k_ops.end(), [&](const auto& o) { return o.first == op; });
  if (found == k_ops.end()) {
    return ParseError{0, fmt::format("a build number is an integer, '*', an operator and an integer, or "
                                     "'^regex$', not '{}'",
                                     text)};
  }
  spec.m_op = found->second;
  const std::string_view number = text.substr(digits);
  if (number.empty() || number.size() > 18 ||
      number.find_first_not_of("0123456789") != std::string_view::npos) {
    return ParseError{digits, fmt::format("expected an integer (at most 18 digits) instead of '{}'", number)};
  }
  for (char c : number) {
    spec.m_value = spec.m_value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return spec;
}

bool BuildNumberSpec::matches(std::uint64_t n) const {
  switch (m_op) {
  case VersionOp::equal:
    return n == m_value;
  case VersionOp::not_equal:
    return n != m_value;
  case VersionOp::less:
    return n < m_value;
  case VersionOp::less_equal:
    return n <= m_value;
  case VersionOp::greater:
    return n > m_value;
  case VersionOp::greater_equal:
    return n >= m_value;
  case VersionOp::pattern:
    return m_pattern.matches(std::to_string(n));
  default:
    return true;
  }
}

std::string BuildNumberSpec::str() const {
  switch (m_op) {
  case VersionOp::equal:
    return std::to_string(m_value);
  case VersionOp::not_equal:
    return "!=" + std::to_string(m_value);
  case VersionOp::less:
    return "<" + std::to_string(m_value);
  case VersionOp::less_equal:
    return "<=" + std::to_string(m_value);
  case VersionOp::greater:
    return ">" + std::to_string(m_value);
  case VersionOp::greater_equal:
    return ">=" + std::to_string(m_value);
  case VersionOp::pattern:
    return m_pattern.str();
  default:
    return "*";
  }
}

// ---- parsing -----------------------------------------------------------------------------------

// One `key=value` of the bracket section, with where each part starts in the spec.
struct BracketPair {
  std::string_view key;
  std::string_view value;
  std::size_t key_offset = 0;
  std::size_t value_offset = 0;
};

// Reads a spec text into a MatchSpec in the order conda's _parse_spec_str does (conda.md §4.1).
class MatchSpecParser {
public:
  MatchSpecParser(std::string_view text, SpecMode mode, MatchSpec& out)
      : m_text(text), m_mode(mode), m_out(out) {}
  std::optional<ParseError> parse();

private:
  bool strict() const { return m_mode == SpecMode::strict; }
  std::optional<ParseError> parse_artifact_url(std::size_t begin, std::size_t end);
  std::optional<ParseError> read_brackets(std::size_t open, std::size_t close,
                                          std::vector<BracketPair>& pairs);
  std::optional<ParseError> parse_positional(std::size_t begin, std::size_t end);
  std::optional<ParseError> parse_channel(std::string_view text, std::size_t offset);
  std::optional<ParseError> parse_name(std::string_view text, std::size_t offset);
  std::optional<ParseError> parse_version_build(std::size_t begin, std::size_t end);
  std::optional<ParseError> set_version(std::string_view text, const std::vector<std::uint32_t>& where);
  std::optional<ParseError> set_build(std::string_view text, std::size_t offset);
  std::optional<ParseError> apply(const BracketPair& pair);

  std::string_view m_text;
  SpecMode m_mode;
  MatchSpec& m_out;
};

std::optional<ParseError> MatchSpecParser::parse() {
  std::size_t end = std::min(m_text.find('#'), m_text.size()); // a comment runs to the end
  std::size_t begin = 0;
  while (begin < end && is_ascii_space(m_text[begin])) {
    ++begin;
  }
  while (end > begin && is_ascii_space(m_text[end - 1])) {
    --end;
  }
  if (begin == end) {
    return ParseError{begin, "empty package spec"};
  }
  const std::string_view body = m_text.substr(begin, end - begin);
  if (is_artifact_url(body)) {
    return parse_artifact_url(begin, end);
  }
  if (body.size() > 1 && body.ends_with('@') && std::all_of(body.begin(), body.end() - 1, is_name_char)) {
    m_out.m_track_features = split_features(body.substr(0, body.size() - 1)); // legacy "mkl@"
    return std::nullopt;
  }
  // The bracket section: from the first '[' to the ']' that ends the spec.
  std::vector<BracketPair> pairs;
  std::size_t positional_end = end;
  if (const std::size_t open = m_text.find('[', begin); open < end) {
    if (auto e = read_brackets(open, end, pairs)) {
      return e;
    }
    positional_end = open;
  } else if (const std::size_t close = m_text.find(']', begin); close < end) {
    return ParseError{close, "']' without a matching '['"};
  }
  while (positional_end > begin && is_ascii_space(m_text[positional_end - 1])) {
    --positional_end;
  }
  if (auto e = parse_positional(begin, positional_end)) {
    return e;
  }
  // Bracket values override positional ones; a bracket subdir also overrides a bracket channel's.
  std::stable_partition(pairs.begin(), pairs.end(), [](const BracketPair& p) { return p.key != "subdir"; });
  for (const auto& pair : pairs) {
    if (auto e = apply(pair)) {
      return e;
    }
  }
  return std::nullopt;
}

// "https://host/channel/linux-64/name-1.0-build_0.conda": everything from the URL.
std::optional<ParseError> MatchSpecParser::parse_artifact_url(std::size_t begin, std::size_t end) {
  const std::string_view url = m_text.substr(begin, end - begin);
  const std::size_t slash = url.rfind('/');
  const std::string fn = percent_decode(url.substr(slash + 1));
  const std::string_view stem(fn.data(), fn.size() - (fn.ends_with(".conda") ? 6 : 8));
  const std::size_t dash2 = stem.rfind('-');
  const std::size_t dash1 =
      dash2 == std::string_view::npos || dash2 == 0 ? dash2 : stem.rfind('-', dash2 - 1);
  if (dash1 == std::string_view::npos || dash1 == 0 || dash2 == dash1 + 1 || dash2 + 1 == stem.size()) {
    return ParseError{begin + slash + 1, "a package file name is NAME-VERSION-BUILD.conda or .tar.bz2"};
  }
  // The name as a package's: the characters of a name, no glob (the fuzzer found a URL whose
  // file name put '!' in it, which no spec could print back).
  const std::string_view name = stem.substr(0, dash1);
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!is_name_char(name[i]) || name[i] == '*') {
      return ParseError{begin + slash + 1,
                        fmt::format("invalid character '{}' in the package name of {}", name[i], fn)};
    }
  }
  m_out.m_name = *StringMatcher::parse(name, LetterCase::insensitive);
  // The version a file name holds is one version, never a pattern ("1.*" would print back as a glob).
  const std::string_view file_version = stem.substr(dash1 + 1, dash2 - dash1 - 1);
  if (const std::size_t bad = file_version.find_first_of("*=<>~,|()"); bad != std::string_view::npos) {
    return ParseError{begin + slash + 1 + dash1 + 1 + bad,
                      fmt::format("invalid character '{}' in the version of {}", file_version[bad], fn)};
  }
  const std::string version = "==" + std::string(file_version);
  auto spec = VersionSpec::parse(version, SpecMode::lenient);
  if (!spec) {
    return ParseError{begin + slash + 1 + dash1 + 1, spec.error().message};
  }
  m_out.m_version = std::move(*spec);
  if (auto e = set_build(stem.substr(dash2 + 1), begin + slash + 1 + dash2 + 1)) {
    return e;
  }
  const std::string_view dir = url.substr(0, slash);
  const std::size_t dir_slash = dir.rfind('/');
  if (dir_slash != std::string_view::npos && is_known_subdir(dir.substr(dir_slash + 1))) {
    m_out.m_subdir = std::string(dir.substr(dir_slash + 1));
    m_out.m_channel = *StringMatcher::parse(canonical_channel(dir.substr(0, dir_slash)));
  }
  m_out.m_fn = fn;
  m_out.m_url = std::string(url);
  return std::nullopt;
}

// The pairs of "[key=value, key='v a l', key=\"v\"]" from `open` ('[') to `end` (just past ']').
std::optional<ParseError> MatchSpecParser::read_brackets(std::size_t open, std::size_t end,
                                                         std::vector<BracketPair>& pairs) {
  std::size_t i = open + 1;
  auto skip_separators = [&] {
    while (i < end && (is_ascii_space(m_text[i]) || m_text[i] == ',')) {
      ++i;
    }
  };
  skip_separators();
  while (i < end && m_text[i] != ']') {
    BracketPair pair;
    pair.key_offset = i;
    while (i < end && (std::isalnum(static_cast<unsigned char>(m_text[i])) != 0 || m_text[i] == '_')) {
      ++i;
    }
    pair.key = m_text.substr(pair.key_offset, i - pair.key_offset);
    if (pair.key.empty()) {
      return ParseError{i, fmt::format("expected key=value in '[...]', not '{}'", m_text[i])};
    }
    if (i >= end || m_text[i] != '=') {
      return ParseError{i, fmt::format("expected '=' after '{}'", pair.key)};
    }
    ++i;
    if (i < end && (m_text[i] == '\'' || m_text[i] == '"')) {
      const char quote = m_text[i++];
      const std::size_t close = m_text.find(quote, i);
      if (close >= end) {
        return ParseError{i - 1, fmt::format("unterminated {} in '[...]'", quote)};
      }
      pair.value_offset = i;
      pair.value = m_text.substr(i, close - i);
      i = close + 1;
    } else {
      pair.value_offset = i;
      while (i < end && !is_ascii_space(m_text[i]) && m_text[i] != ',' && m_text[i] != ']' &&
             m_text[i] != '[' && m_text[i] != '\'' && m_text[i] != '"') {
        ++i;
      }
      pair.value = m_text.substr(pair.value_offset, i - pair.value_offset);
    }
    // An empty set of features is a value ("no features"); any other key needs one.
    const bool features = pair.key == "track_features" || pair.key == "features";
    if (pair.value.empty() && !(features && i > pair.value_offset)) {
      return ParseError{pair.value_offset, fmt::format("missing value for '{}'", pair.key)};
    }
    for (const auto& other : pairs) {
      if (other.key == pair.key) {
        return ParseError{pair.key_offset, fmt::format("'{}' is given twice in '[...]'", pair.key)};
      }
    }
    pairs.push_back(pair);
    if (i < end && m_text[i] != ']' && m_text[i] != ',' && !is_ascii_space(m_text[i])) {
      return ParseError{i, fmt::format("unexpected '{}' in '[...]'", m_text[i])};
    }
    skip_separators();
  }
  if (i >= end) {
    return ParseError{open, "'[' without a matching ']'"};
  }
  if (i + 1 != end) {
    return ParseError{i + 1, "nothing may follow the '[...]' section"};
  }
  return std::nullopt;
}

// `[channel[/subdir]:[namespace]:]name[ version[ build]]` between `begin` and `end`.
std::optional<ParseError> MatchSpecParser::parse_positional(std::size_t begin, std::size_t end) {
  std::size_t name_begin = begin;
  const std::size_t colon = m_text.rfind(':', end == 0 ? 0 : end - 1);
  if (colon != std::string_view::npos && colon >= begin) {
    const std::size_t colon2 = colon > begin ? m_text.rfind(':', colon - 1) : std::string_view::npos;
    const bool has_channel = colon2 != std::string_view::npos && colon2 >= begin;
    const std::size_t ns_begin = has_channel ? colon2 + 1 : begin;
    if (!has_channel && strict()) {
      return ParseError{colon, "a channel is followed by '::' (\"conda-forge::numpy\")"};
    }
    if (colon > ns_begin && strict()) {
      return ParseError{ns_begin, fmt::format("namespaces are not supported ('{}')",
                                              m_text.substr(ns_begin, colon - ns_begin))};
    }
    if (has_channel) {
      if (auto e = parse_channel(m_text.substr(begin, colon2 - begin), begin)) {
        return e;
      }
    }
    name_begin = colon + 1;
  }
  std::size_t name_end = name_begin;
  while (name_end < end && !is_ascii_space(m_text[name_end]) && !is_operator_char(m_text[name_end])) {
    ++name_end;
  }
  if (auto e = parse_name(m_text.substr(name_begin, name_end - name_begin), name_begin)) {
    return e;
  }
  return parse_version_build(name_end, end);
}

// "conda-forge", "conda-forge/linux-64", "*/linux-64", "https://host/path[/subdir]".
std::optional<ParseError> MatchSpecParser::parse_channel(std::string_view text, std::size_t offset) {
  if (text.empty()) {
    return strict() ? std::optional<ParseError>(ParseError{offset, "empty channel before '::'"})
                    : std::nullopt;
  }
  std::string_view channel = text;
  const std::size_t slash = channel.rfind('/');
  if (slash != std::string_view::npos && is_known_subdir(channel.substr(slash + 1))) {
    m_out.m_subdir = std::string(channel.substr(slash + 1));
    channel = channel.substr(0, slash);
  }
  if (const std::size_t bad = channel.find_first_of(" \t\n\r\f\v[]'\""); bad != std::string_view::npos) {
    return ParseError{offset + bad, "invalid character in a channel"};
  }
  const std::string canonical = canonical_channel(channel);
  if (canonical.empty()) {
    return strict()
               ? std::optional<ParseError>(ParseError{offset, fmt::format("'{}' is not a channel", text)})
               : std::nullopt;
  }
  auto m = StringMatcher::parse(canonical);
  if (!m) {
    return ParseError{offset + m.error().offset, m.error().message};
  }
  m_out.m_channel = m->matches_all() ? std::nullopt : std::optional<StringMatcher>(std::move(*m));
  return std::nullopt;
}

std::optional<ParseError> MatchSpecParser::parse_name(std::string_view text, std::size_t offset) {
  if (text.empty()) {
    return ParseError{offset, "expected a package name"};
  }
  const bool regex = text.size() >= 2 && text.front() == '^' && text.back() == '$';
  if (!regex) {
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (!is_name_char(text[i])) {
        return ParseError{offset + i, fmt::format("invalid character '{}' in a package name", text[i])};
      }
    }
  }
  auto m = StringMatcher::parse(text, LetterCase::insensitive);
  if (!m) {
    return ParseError{offset + m.error().offset, m.error().message};
  }
  m_out.m_name = std::move(*m);
  return std::nullopt;
}

// The version and build after the name (conda.md §4.2): spaces around operators go, then one word is
// "version[=build]" and two words are "version build".
std::optional<ParseError> MatchSpecParser::parse_version_build(std::size_t begin, std::size_t end) {
  std::string compact;
  std::vector<std::uint32_t> where; // compact[i] came from m_text[where[i]]
  for (std::size_t i = begin; i < end; ++i) {
    if (is_ascii_space(m_text[i])) {
      std::size_t next = i;
      while (next < end && is_ascii_space(m_text[next])) {
        ++next;
      }
      // Spaces around operators go: ">=1.0 , < 2.0 py34_0" is ">=1.0,<2.0" and "py34_0".
      const bool drop = compact.empty() || next == end ||
                        std::string_view("=<>!~,|(").find(compact.back()) != std::string_view::npos ||
                        std::string_view("=<>!~,|)").find(m_text[next]) != std::string_view::npos;
      if (!drop) {
        compact += ' ';
        where.push_back(static_cast<std::uint32_t>(i));
      }
      i = next - 1;
      continue;
    }
    compact += m_text[i];
    where.push_back(static_cast<std::uint32_t>(i));
  }
  where.push_back(static_cast<std::uint32_t>(end));
  if (compact.empty()) {
    return std::nullopt;
  }
  const std::size_t space = compact.find(' ');
  if (space != std::string::npos) {
    const std::size_t space2 = compact.find(' ', space + 1);
    if (space2 != std::string::npos) {
      return ParseError{where[space2 + 1], fmt::format("unexpected '{}' after the build string",
                                                       std::string_view(compact).substr(space2 + 1))};
    }
    if (auto e = set_build(std::string_view(compact).substr(space + 1), where[space + 1])) {
      return e;
    }
    return set_version(std::string_view(compact).substr(0, space), where);
  }
  // One word: "=1.8=py27_0" splits at its last '=' unless that '=' belongs to an operator.
  std::string_view version(compact);
  const std::size_t eq = compact.rfind('=');
  if (eq != std::string::npos && eq > 0 &&
      std::string_view("=!|,<>~").find(compact[eq - 1]) == std::string_view::npos &&
      compact.find_first_of(",|<>~-", eq + 1) == std::string::npos) {
    const std::string_view build = std::string_view(compact).substr(eq + 1);
    if (build.empty()) {
      if (strict()) {
        return ParseError{where[eq + 1], "expected a build string after '='"};
      }
    } else if (auto e = set_build(build, where[eq + 1])) {
      return e;
    }
    version = version.substr(0, eq);
    // name=1.8=build means exactly 1.8 (conda's _sanitize_version_str): drop the single '='.
    const std::string_view rest = version.substr(1);
    if (!build.empty() && version.starts_with('=') && !rest.starts_with('=') &&
        rest.find_first_of("=,|") == std::string_view::npos) {
      std::vector<std::uint32_t> shifted(where.begin() + 1, where.end());
      return set_version(rest, shifted);
    }
  }
  return set_version(version, where);
}

std::optional<ParseError> MatchSpecParser::set_version(std::string_view text,
                                                       const std::vector<std::uint32_t>& where) {
  if (text == "=" && !strict()) {
    return std::nullopt; // conda reads "numpy=" as "numpy"
  }
  if (text == "=*") {
    m_out.m_version = VersionSpec(); // conda reads "python=*" as "python *"
    return std::nullopt;
  }
  auto spec = VersionSpec::parse(text, m_mode);
  if (!spec) {
    const std::size_t at = std::min(spec.error().offset, where.size() - 1);
    return ParseError{where[at], spec.error().message};
  }
  m_out.m_version = std::move(*spec);
  return std::nullopt;
}

std::optional<ParseError> MatchSpecParser::set_build(std::string_view text, std::size_t offset) {
  const bool regex = text.size() >= 2 && text.front() == '^' && text.back() == '$';
  if (const std::size_t quote = text.find_first_of("'\""); quote != std::string_view::npos) {
    return ParseError{offset + quote, fmt::format("invalid character '{}' in a build string", text[quote])};
  }
  if (!regex) {
    // Strict: CEP 26's build characters and '*'. Lenient: anything that can't be read as a separator.
    for (std::size_t i = 0; i < text.size(); ++i) {
      const bool separator = is_ascii_space(text[i]) ||
                             std::string_view("=<>!~,|()[]#:").find(text[i]) != std::string_view::npos;
      if (strict() ? !is_build_char(text[i]) : separator) {
        return ParseError{offset + i, fmt::format("invalid character '{}' in a build string", text[i])};
      }
    }
  }
  auto m = StringMatcher::parse(text);
  if (!m) {
    return ParseError{offset + m.error().offset, m.error().message};
  }
  m_out.m_build = std::move(*m);
  return std::nullopt;
}

std::optional<ParseError> MatchSpecParser::apply(const BracketPair& p) {
  const std::string_view key = p.key;
  const std::string_view v = p.value;
  auto matcher = [&](std::optional<StringMatcher>& slot,
                     LetterCase letter_case) -> std::optional<ParseError> {
    auto m = StringMatcher::parse(v, letter_case);
    if (!m) {
      return ParseError{p.value_offset + m.error().offset, m.error().message};
    }
    slot = std::move(*m);
    return std::nullopt;
  };
  if (key == "name") {
    return std::nullopt; // never overrides the name outside (conda: stops `tensorflow[name=*, md5=<torch>]`)
  }
  if (key == "version") {
    std::vector<std::uint32_t> where(v.size() + 1);
    for (std::size_t i = 0; i <= v.size(); ++i) {
      where[i] = static_cast<std::uint32_t>(p.value_offset + i);
    }
    return set_version(v, where);
  }
  if (key == "build" || key == "build_string") {
    return set_build(v, p.value_offset);
  }
  if (key == "build_number") {
    auto b = BuildNumberSpec::parse(v);
    if (!b) {
      return ParseError{p.value_offset + b.error().offset, b.error().message};
    }
    m_out.m_build_number = std::move(*b);
    return std::nullopt;
  }
  if (key == "channel") {
    const auto subdir = m_out.m_subdir;
    auto e = parse_channel(v, p.value_offset);
    if (!m_out.m_subdir) {
      m_out.m_subdir = subdir;
    }
    return e;
  }
  if (key == "subdir") {
    const std::size_t bad = v.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_");
    if (bad != std::string_view::npos) {
      return ParseError{p.value_offset + bad, fmt::format("invalid character '{}' in a subdir", v[bad])};
    }
    m_out.m_subdir = std::string(v);
    return std::nullopt;
  }
  if (key == "md5" || key == "sha256" || key == "fn" || key == "url") {
    auto& slot = key == "md5"      ? m_out.m_md5
                 : key == "sha256" ? m_out.m_sha256
                 : key == "fn"     ? m_out.m_fn
                                   : m_out.m_url;
    slot = key == "md5" || key == "sha256" ? ascii_lower(v) : std::string(v);
    return std::nullopt;
  }
  if (key == "license" || key == "license_family") {
    return matcher(key == "license" ? m_out.m_license : m_out.m_license_family, LetterCase::insensitive);
  }
  if (key == "track_features" || key == "features") {
    (key == "features" ? m_out.m_features : m_out.m_track_features) = split_features(v);
    return std::nullopt;
  }
  std::string known;
  for (std::string_view k : k_keys) {
    known += (known.empty() ? "" : ", ") + std::string(k);
  }
  return ParseError{p.key_offset, fmt::format("unknown key '{}' (known: {})", key, known)};
}

// ---- MatchSpec ---------------------------------------------------------------------------------

ParseResult<MatchSpec> MatchSpec::parse(std::string_view text, SpecMode mode) {
  if (text.size() > k_max_length) {
    return ParseError{k_max_length, fmt::format("a package spec is at most {} characters", k_max_length)};
  }
  MatchSpec spec;
  MatchSpecParser parser(text, mode, spec);
  if (auto e = parser.parse()) {
    return std::move(*e);
  }
  return spec;
}

bool MatchSpec::matches(const RecordFields& r) const {
  if (!m_name.matches(r.name)) {
    return false;
  }
  if (m_version && !m_version->is_any() && (r.version == nullptr || !m_version->matches(*r.version))) {
    return false;
  }
  if ((m_build && !m_build->matches(r.build)) ||
      (m_build_number && !m_build_number->matches(r.build_number))) {
    return false;
  }
  if (m_channel) {
    const std::string channel = canonical_channel(r.channel);
    const bool in_defaults = m_channel->str() == "defaults" &&
                             std::find(k_defaults.begin(), k_defaults.end(), channel) != k_defaults.end();
    if (!in_defaults && !m_channel->matches(channel)) {
      return false;
    }
  }
  if ((m_subdir && *m_subdir != r.subdir) || (m_fn && *m_fn != r.fn) || (m_url && *m_url != r.url)) {
    return false;
  }
  if ((m_md5 && *m_md5 != ascii_lower(r.md5)) || (m_sha256 && *m_sha256 != ascii_lower(r.sha256))) {
    return false;
  }
  if ((m_license && !m_license->matches(r.license)) ||
      (m_license_family && !m_license_family->matches(r.license_family))) {
    return false;
  }
  return (!m_track_features || *m_track_features == split_features(r.track_features)) &&
         (!m_features || *m_features == split_features(r.features));
}

std::string MatchSpec::str() const {
  std::string out;
  std::vector<std::string> brackets;
  const bool channel_outside = m_channel && m_channel->kind() == StringMatcher::Kind::exact;
  if (channel_outside) {
    out = m_channel->str() + (m_subdir ? "/" + *m_subdir : "") + "::";
  } else if (m_channel) {
    brackets.push_back("channel=" + bracket_value(m_channel->str()));
  }
  if (m_subdir && !channel_outside) {
    brackets.push_back("subdir=" + bracket_value(*m_subdir));
  }
  out += m_name.str();
  const auto op = m_version ? m_version->single_op() : std::optional<VersionOp>(VersionOp::any);
  const bool exact_version = op == VersionOp::equal;
  if (exact_version || op == VersionOp::starts_with) {
    out += m_version->str();
  } else if (m_version && !m_version->is_any()) {
    const bool inline_op =
        op == VersionOp::not_equal || op == VersionOp::not_starts_with || op == VersionOp::compatible;
    if (inline_op && !m_build) {
      out += m_version->str();
    } else {
      brackets.push_back("version=" + bracket_value(m_version->str(), true));
    }
  }
  // "name==1.0=build" reparses only where parse_version_build splits one word at its last '='.
  if (m_build && exact_version && m_build->kind() == StringMatcher::Kind::exact &&
      m_build->str().find_first_of(",|<>~-") == std::string::npos) {
    out += "=" + m_build->str();
  } else if (m_build) {
    brackets.push_back("build=" + bracket_value(m_build->str()));
  }
  auto add = [&](std::string_view key, const std::optional<std::string>& value) {
    if (value) {
      brackets.push_back(std::string(key) + "=" + bracket_value(*value));
    }
  };
  add("build_number", m_build_number ? std::optional<std::string>(m_build_number->str()) : std::nullopt);
  add("track_features",
      m_track_features ? std::optional<std::string>(join_features(*m_track_features)) : std::nullopt);
  add("features", m_features ? std::optional<std::string>(join_features(*m_features)) : std::nullopt);
  add("url", m_url);
  add("md5", m_md5);
  add("sha256", m_sha256);
  add("license", m_license ? std::optional<std::string>(m_license->str()) : std::nullopt);
  add("license_family",
      m_license_family ? std::optional<std::string>(m_license_family->str()) : std::nullopt);
  // A file name the URL already ends with says nothing more.
  add("fn", m_fn && !(m_url && m_url->ends_with("/" + *m_fn)) ? m_fn : std::nullopt);
  if (!brackets.empty()) {
    out += "[";
    for (std::size_t i = 0; i < brackets.size(); ++i) {
      out += (i > 0 ? "," : "") + brackets[i];
    }
    out += "]";
  }
  return out;
}

} // namespace lockstep::conda
