#include "support/python/pep440.hpp"

#include "support/base/text.hpp"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <optional>

namespace lockstep {

namespace {

constexpr std::size_t k_max_version_length = 256;

// The parts of a version as PEP 440's Appendix B regular expression (packaging's VERSION_PATTERN)
// captures them, applied to lowercased input:
//   v? (N!)? N(.N)* ([-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?N?)?
//   (-N | [-_.]?(post|rev|r)[-_.]?N?)? ([-_.]?dev[-_.]?N?)? (+[a-z0-9]+([-_.][a-z0-9]+)*)?
// Its optional separators make a one-way parse wrong ("1.0a--post1" is valid: the first '-' ends
// the pre-release, the second starts the post-release), so this matcher backtracks exactly as the
// regular expression does: each optional part is tried present (greedy) before absent, alternatives
// in the pattern's order, and the first way that reaches the end wins. (std::regex would do, but
// GCC 12 warns inside <regex> in sanitizer builds.)
struct VersionParts {
  std::string_view epoch;
  std::string_view release;
  bool has_pre = false;
  std::string_view pre_label;
  std::string_view pre_number;
  bool has_post = false;
  std::string_view post_number;
  bool has_dev = false;
  std::string_view dev_number;
  std::string_view local;
};

class VersionMatcher {
public:
  explicit VersionMatcher(std::string_view s) : m_s(s) {}

  std::optional<VersionParts> match() {
    if (leading_v(0, VersionParts{})) {
      return m_result;
    }
    return std::nullopt;
  }

private:
  [[nodiscard]] bool is_sep(std::size_t p) const {
    return p < m_s.size() && (m_s[p] == '-' || m_s[p] == '_' || m_s[p] == '.');
  }
  [[nodiscard]] std::size_t digits_end(std::size_t p) const {
    while (p < m_s.size() && m_s[p] >= '0' && m_s[p] <= '9') {
      ++p;
    }
    return p;
  }
  [[nodiscard]] bool at(std::size_t p, std::string_view word) const {
    return m_s.substr(p, word.size()) == word;
  }
  [[nodiscard]] std::string_view sub(std::size_t from, std::size_t to) const {
    return m_s.substr(from, to - from);
  }

  bool leading_v(std::size_t p, const VersionParts& c) {
    return (at(p, "v") && epoch(p + 1, c)) || epoch(p, c);
  }

  bool epoch(std::size_t p, const VersionParts& c) {
    std::size_t e = digits_end(p);
    if (e > p && at(e, "!")) {
      VersionParts d = c;
      d.epoch = sub(p, e);
      if (release(e + 1, d)) {
        return true;
      }
    }
    return release(p, c);
  }

  // Only the longest release can succeed: a digit or ".N" left over starts no later part.
  bool release(std::size_t p, VersionParts c) {
    std::size_t e = digits_end(p);
    if (e == p) {
      return false;
    }
    while (at(e, ".") && digits_end(e + 1) > e + 1) {
      e = digits_end(e + 1);
    }
    c.release = sub(p, e);
    return pre(e, c);
  }

  // [-_.]? LABEL [-_.]? N?  for each way to write it, calling `next` with the parts filled in.
  template <typename Next>
  bool labelled(std::size_t p, std::initializer_list<std::string_view> labels, Next&& next) {
    for (bool sep : {true, false}) {
      if (sep && !is_sep(p)) {
        continue;
      }
      std::size_t q = p + (sep ? 1 : 0);
      for (std::string_view label : labels) {
        if (!at(q, label)) {
          continue;
        }
        std::size_t r = q + label.size();
        for (bool tail_sep : {true, false}) {
          if (tail_sep && !is_sep(r)) {
            continue;
          }
          std::size_t t = r + (tail_sep ? 1 : 0);
          std::size_t e = digits_end(t);
          if (e > t && next(label, sub(t, e), e)) {
            return true;
          }
          if (next(label, std::string_view(), t)) {
            return true;
          }
        }
      }
    }
    return false;
  }

  bool pre(std::size_t p, const VersionParts& c) {
    bool found = labelled(p, {"a", "b", "c", "rc", "alpha", "beta", "pre", "preview"},
                          [&](std::string_view label, std::string_view number, std::size_t end) {
                            VersionParts d = c;
                            d.has_pre = true;
                            d.pre_label = label;
                            d.pre_number = number;
                            return post(end, d);
                          });
    return found || post(p, c);
  }

  bool post(std::size_t p, const VersionParts& c) {
    if (at(p, "-")) {
      std::size_t e = digits_end(p + 1);
      if (e > p + 1) {
        VersionParts d = c;
        d.has_post = true;
        d.post_number = sub(p + 1, e);
        if (dev(e, d)) {
          return true;
        }
      }
    }
    bool found =
        labelled(p, {"post", "rev", "r"}, [&](std::string_view, std::string_view number, std::size_t end) {
          VersionParts d = c;
          d.has_post = true;
          d.post_number = number;
          return dev(end, d);
        });
    return found || dev(p, c);
  }

  bool dev(std::size_t p, const VersionParts& c) {
    bool found = labelled(p, {"dev"}, [&](std::string_view, std::string_view number, std::size_t end) {
      VersionParts d = c;
      d.has_dev = true;
      d.dev_number = number;
      return local(end, d);
    });
    return found || local(p, c);
  }

  // "+" then alphanumeric segments separated by one of -_. up to the end.
  bool local(std::size_t p, const VersionParts& c) {
    if (at(p, "+")) {
      std::string_view rest = m_s.substr(p + 1);
      bool ok = !rest.empty() && !is_sep(p + 1) && !is_sep(m_s.size() - 1);
      for (std::size_t i = p + 1; ok && i < m_s.size(); ++i) {
        char ch = m_s[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        ok = alnum || (is_sep(i) && !is_sep(i + 1));
      }
      if (ok) {
        VersionParts d = c;
        d.local = rest;
        return finish(m_s.size(), d);
      }
    }
    return finish(p, c);
  }

  bool finish(std::size_t p, const VersionParts& c) {
    if (p != m_s.size()) {
      return false;
    }
    m_result = c;
    return true;
  }

  std::string_view m_s;
  VersionParts m_result;
};

Result<std::uint64_t> parse_number(std::string_view digits, std::string_view version) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return invalid_input("version '{}': the number {} is too large", version, digits);
  }
  return value;
}

std::string strip_leading_zeros(std::string_view digits) {
  std::size_t i = 0;
  while (i + 1 < digits.size() && digits[i] == '0') {
    ++i;
  }
  return std::string(digits.substr(i));
}

// Local segments: numeric ones above alphanumeric ones; numbers by value, the rest bytewise.
std::strong_ordering compare_local_segment(const std::string& a, const std::string& b) {
  bool an = all_digits(a);
  bool bn = all_digits(b);
  if (an != bn) {
    return an ? std::strong_ordering::greater : std::strong_ordering::less;
  }
  if (an && a.size() != b.size()) { // both without leading zeros
    return a.size() <=> b.size();
  }
  int c = a.compare(b);
  return c < 0   ? std::strong_ordering::less
         : c > 0 ? std::strong_ordering::greater
                 : std::strong_ordering::equal;
}

std::string join_release(const std::vector<std::uint64_t>& release) {
  std::string out;
  for (std::size_t i = 0; i < release.size(); ++i) {
    if (i > 0) {
      out += '.';
    }
    out += std::to_string(release[i]);
  }
  return out;
}

} // namespace

Result<PyVersion> PyVersion::parse(std::string_view text) {
  std::string_view trimmed = trim(text);
  if (trimmed.empty()) {
    return invalid_input("empty version");
  }
  if (trimmed.size() > k_max_version_length) {
    return invalid_input("version '{}...' is longer than {} characters", trimmed.substr(0, 40),
                         k_max_version_length);
  }
  std::string lower = ascii_lower(trimmed);
  auto parts = VersionMatcher(lower).match();
  if (!parts) {
    return invalid_input(
        "'{}' is not a valid version (PEP 440: [N!]N(.N)*[{{a|b|rc}}N][.postN][.devN][+local])", trimmed);
  }
  PyVersion v;
  if (!parts->epoch.empty()) {
    LS_TRY_ASSIGN(v.epoch, parse_number(parts->epoch, trimmed));
  }
  std::string_view release = parts->release;
  std::size_t start = 0;
  while (start <= release.size()) {
    std::size_t dot = release.find('.', start);
    if (dot == std::string_view::npos) {
      dot = release.size();
    }
    LS_TRY_ASSIGN(auto n, parse_number(release.substr(start, dot - start), trimmed));
    v.release.push_back(n);
    start = dot + 1;
  }
  if (parts->has_pre) {
    std::string_view label = parts->pre_label;
    Pre pre;
    pre.phase = (label == "a" || label == "alpha")  ? Phase::alpha
                : (label == "b" || label == "beta") ? Phase::beta
                                                    : Phase::rc;
    if (!parts->pre_number.empty()) {
      LS_TRY_ASSIGN(pre.number, parse_number(parts->pre_number, trimmed));
    }
    v.pre = pre;
  }
  if (parts->has_post) {
    std::uint64_t n = 0;
    if (!parts->post_number.empty()) {
      LS_TRY_ASSIGN(n, parse_number(parts->post_number, trimmed));
    }
    v.post = n;
  }
  if (parts->has_dev) {
    std::uint64_t n = 0;
    if (!parts->dev_number.empty()) {
      LS_TRY_ASSIGN(n, parse_number(parts->dev_number, trimmed));
    }
    v.dev = n;
  }
  if (!parts->local.empty()) {
    std::string_view local = parts->local;
    std::size_t i = 0;
    while (i <= local.size()) {
      std::size_t j = local.find_first_of("-_.", i);
      if (j == std::string_view::npos) {
        j = local.size();
      }
      std::string_view seg = local.substr(i, j - i);
      v.local.push_back(all_digits(seg) ? strip_leading_zeros(seg) : std::string(seg));
      i = j + 1;
    }
  }
  return v;
}

std::string PyVersion::public_str() const {
  std::string out;
  if (epoch != 0) {
    out += std::to_string(epoch) + "!";
  }
  out += join_release(release);
  if (pre) {
    out += pre->phase == Phase::alpha ? "a" : pre->phase == Phase::beta ? "b" : "rc";
    out += std::to_string(pre->number);
  }
  if (post) {
    out += ".post" + std::to_string(*post);
  }
  if (dev) {
    out += ".dev" + std::to_string(*dev);
  }
  return out;
}

std::string PyVersion::str() const {
  std::string out = public_str();
  for (std::size_t i = 0; i < local.size(); ++i) {
    out += i == 0 ? '+' : '.';
    out += local[i];
  }
  return out;
}

PyVersion PyVersion::public_version() const {
  PyVersion v = *this;
  v.local.clear();
  return v;
}

PyVersion PyVersion::base_version() const {
  PyVersion v;
  v.epoch = epoch;
  v.release = release;
  return v;
}

std::strong_ordering operator<=>(const PyVersion& a, const PyVersion& b) {
  if (auto c = a.epoch <=> b.epoch; std::is_neq(c)) {
    return c;
  }
  // Release, trailing zeros ignored.
  std::size_t n = std::max(a.release.size(), b.release.size());
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t x = i < a.release.size() ? a.release[i] : 0;
    std::uint64_t y = i < b.release.size() ? b.release[i] : 0;
    if (auto c = x <=> y; std::is_neq(c)) {
      return c;
    }
  }
  // Pre-release key: a dev release of a final version ("1.0.dev1", no pre, no post) sorts before
  // all its pre-releases; a version without a pre-release after them. (packaging's _cmpkey.)
  auto pre_key = [](const PyVersion& v) -> std::pair<int, std::pair<int, std::uint64_t>> {
    if (!v.pre && !v.post && v.dev) {
      return {-1, {0, 0}};
    }
    if (!v.pre) {
      return {1, {0, 0}};
    }
    return {0, {static_cast<int>(v.pre->phase), v.pre->number}};
  };
  if (auto c = pre_key(a) <=> pre_key(b); std::is_neq(c)) {
    return c;
  }
  // Post: none sorts first. Dev: none sorts last.
  auto post_key = [](const PyVersion& v) {
    return std::pair<int, std::uint64_t>{v.post ? 1 : 0, v.post.value_or(0)};
  };
  if (auto c = post_key(a) <=> post_key(b); std::is_neq(c)) {
    return c;
  }
  auto dev_key = [](const PyVersion& v) {
    return std::pair<int, std::uint64_t>{v.dev ? 0 : 1, v.dev.value_or(0)};
  };
  if (auto c = dev_key(a) <=> dev_key(b); std::is_neq(c)) {
    return c;
  }
  // Local: none sorts first; then segment by segment, a shorter label first on a tie.
  for (std::size_t i = 0; i < std::min(a.local.size(), b.local.size()); ++i) {
    if (auto c = compare_local_segment(a.local[i], b.local[i]); std::is_neq(c)) {
      return c;
    }
  }
  return a.local.size() <=> b.local.size();
}

// ---- specifiers ---------------------------------------------------------------------------------

Result<VersionSpecifier> VersionSpecifier::parse(std::string_view text) {
  std::string_view s = trim(text);
  static constexpr std::pair<std::string_view, Op> ops[] = {
      {"===", Op::arbitrary}, {"~=", Op::compatible},    {"==", Op::equal}, {"!=", Op::not_equal},
      {"<=", Op::less_equal}, {">=", Op::greater_equal}, {"<", Op::less},   {">", Op::greater},
  };
  VersionSpecifier spec;
  bool found = false;
  for (const auto& [name, op] : ops) {
    if (s.substr(0, name.size()) == name) {
      spec.op = op;
      s.remove_prefix(name.size());
      found = true;
      break;
    }
  }
  if (!found) {
    return invalid_input("'{}' is not a version specifier (expected an operator: ~= == != <= >= < > ===)",
                         trim(text));
  }
  s = trim(s);
  spec.text = std::string(s);
  auto bad = [&](std::string_view why) {
    return invalid_input("version specifier '{}': {}", trim(text), why);
  };
  if (s.empty()) {
    return bad("no version after the operator");
  }
  if (spec.op == Op::arbitrary) {
    if (s.find_first_of(" \t;)") != std::string_view::npos) {
      return bad("=== takes a string without spaces, ';' or ')'");
    }
    return spec;
  }
  std::string_view version_text = s;
  if (s.size() >= 2 && s.substr(s.size() - 2) == ".*") {
    if (spec.op != Op::equal && spec.op != Op::not_equal) {
      return bad("a '.*' suffix is only allowed with == and !=");
    }
    spec.wildcard = true;
    version_text = s.substr(0, s.size() - 2);
  }
  auto parsed = PyVersion::parse(version_text);
  if (!parsed) {
    return bad(parsed.error().message);
  }
  spec.version = std::move(*parsed);
  const PyVersion& v = spec.version;
  if (spec.wildcard && (v.pre || v.post || v.dev || !v.local.empty())) {
    return bad("'.*' must follow a plain release number (like ==1.2.*)");
  }
  bool ordered = spec.op == Op::compatible || spec.op == Op::less || spec.op == Op::less_equal ||
                 spec.op == Op::greater || spec.op == Op::greater_equal;
  if (ordered && !v.local.empty()) {
    return bad("a local version label ('+...') is only allowed with == and !=");
  }
  if (spec.op == Op::compatible && v.release.size() < 2) {
    return bad("~= needs at least two release components (like ~=2.2)");
  }
  return spec;
}

std::string VersionSpecifier::str() const {
  static constexpr std::string_view names[] = {"~=", "==", "!=", "<=", ">=", "<", ">", "==="};
  return std::string(names[static_cast<int>(op)]) + text;
}

bool VersionSpecifier::mentions_prerelease() const {
  switch (op) {
  case Op::equal:
  case Op::greater_equal:
  case Op::less_equal:
  case Op::compatible:
    return version.is_prerelease();
  case Op::arbitrary: {
    auto v = PyVersion::parse(text);
    return v && v->is_prerelease();
  }
  default:
    return false;
  }
}

namespace {

// "==V.*": the epoch equal, and the candidate's release (zero-padded) starting with V's.
bool prefix_match(const PyVersion& candidate, const PyVersion& prefix) {
  if (candidate.epoch != prefix.epoch) {
    return false;
  }
  for (std::size_t i = 0; i < prefix.release.size(); ++i) {
    std::uint64_t c = i < candidate.release.size() ? candidate.release[i] : 0;
    if (c != prefix.release[i]) {
      return false;
    }
  }
  return true;
}

bool equal_match(const PyVersion& candidate, const VersionSpecifier& spec) {
  if (spec.wildcard) {
    return prefix_match(candidate, spec.version);
  }
  // Without a local label in the specifier, the candidate's local label is ignored.
  if (spec.version.local.empty()) {
    return candidate.public_version() == spec.version;
  }
  return candidate == spec.version;
}

} // namespace

bool VersionSpecifier::contains(const PyVersion& candidate, Prereleases policy) const {
  bool allow_pre =
      policy == Prereleases::allow || (policy == Prereleases::if_mentioned && mentions_prerelease());
  if (candidate.is_prerelease() && !allow_pre) {
    return false;
  }
  switch (op) {
  case Op::compatible: {
    // ~=V.N means >=V.N, ==V.* (the last release component and any suffix dropped).
    PyVersion prefix;
    prefix.epoch = version.epoch;
    prefix.release.assign(version.release.begin(), version.release.end() - 1);
    return candidate.public_version() >= version && prefix_match(candidate, prefix);
  }
  case Op::equal:
    return equal_match(candidate, *this);
  case Op::not_equal:
    return !equal_match(candidate, *this);
  case Op::less_equal:
    return candidate.public_version() <= version;
  case Op::greater_equal:
    return candidate.public_version() >= version;
  case Op::less:
    // <V excludes V's own pre-releases unless V is one.
    if (!(candidate < version)) {
      return false;
    }
    return version.is_prerelease() || !candidate.is_prerelease() ||
           candidate.base_version() != version.base_version();
  case Op::greater:
    // >V excludes V's post-releases unless V is one, and V with a local label.
    if (!(candidate > version)) {
      return false;
    }
    if (!version.is_postrelease() && candidate.is_postrelease() &&
        candidate.base_version() == version.base_version()) {
      return false;
    }
    return candidate.local.empty() || candidate.base_version() != version.base_version();
  case Op::arbitrary:
    return ascii_lower(candidate.str()) == ascii_lower(text);
  }
  return false;
}

Result<SpecifierSet> SpecifierSet::parse(std::string_view text) {
  SpecifierSet set;
  std::size_t i = 0;
  while (i <= text.size()) {
    std::size_t j = text.find(',', i);
    if (j == std::string_view::npos) {
      j = text.size();
    }
    std::string_view clause = trim(text.substr(i, j - i));
    if (!clause.empty()) {
      LS_TRY_ASSIGN(auto spec, VersionSpecifier::parse(clause));
      set.m_clauses.push_back(std::move(spec));
    }
    i = j + 1;
  }
  return set;
}

std::string SpecifierSet::str() const {
  std::vector<std::string> parts;
  parts.reserve(m_clauses.size());
  for (const auto& c : m_clauses) {
    parts.push_back(c.str());
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) {
      out += ',';
    }
    out += p;
  }
  return out;
}

bool SpecifierSet::mentions_prerelease() const {
  return std::any_of(m_clauses.begin(), m_clauses.end(),
                     [](const VersionSpecifier& c) { return c.mentions_prerelease(); });
}

bool SpecifierSet::contains(const PyVersion& candidate, Prereleases policy) const {
  // The set decides the pre-release question once for all its clauses.
  bool allow_pre =
      policy == Prereleases::allow || (policy == Prereleases::if_mentioned && mentions_prerelease());
  if (candidate.is_prerelease() && !allow_pre) {
    return false;
  }
  Prereleases clause_policy = allow_pre ? Prereleases::allow : Prereleases::deny;
  return std::all_of(m_clauses.begin(), m_clauses.end(),
                     [&](const VersionSpecifier& c) { return c.contains(candidate, clause_policy); });
}

std::vector<PyVersion> SpecifierSet::filter(const std::vector<PyVersion>& candidates,
                                            Prereleases policy) const {
  std::vector<PyVersion> out;
  std::vector<PyVersion> prereleases;
  for (const auto& c : candidates) {
    if (contains(c, policy)) {
      out.push_back(c);
    } else if (m_clauses.empty() && policy == Prereleases::if_mentioned && c.is_prerelease()) {
      prereleases.push_back(c);
    }
  }
  if (out.empty()) {
    return prereleases;
  }
  return out;
}

} // namespace lockstep
