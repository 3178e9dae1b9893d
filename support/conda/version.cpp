#include "support/conda/version.hpp"

#include "support/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <span>

namespace lockstep::conda {

namespace detail {

Atom Atom::make(Kind kind, std::uint64_t payload, bool starts_segment, bool local) {
  Atom a{};
  a.m_bits = payload | (static_cast<std::uint64_t>(kind) << 56) | (std::uint64_t{starts_segment} << 58) |
             (std::uint64_t{local} << 59);
  return a;
}

Atom Atom::number(std::uint64_t value, bool starts_segment, bool local) {
  return make(Kind::number, value, starts_segment, local);
}

Atom Atom::string(std::size_t offset, std::size_t length, bool starts_segment, bool local) {
  return make(Kind::string, offset | (length << 16), starts_segment, local);
}

Atom Atom::special(Kind kind, bool starts_segment, bool local) {
  return make(kind, 0, starts_segment, local);
}

AtomList::AtomList(const Atom* atoms, std::size_t count) : m_size(static_cast<std::uint16_t>(count)) {
  Atom* out = m_inline.data();
  if (count > k_inline) {
    m_heap = std::make_unique<Atom[]>(count); // NOLINT(modernize-avoid-c-arrays)
    out = m_heap.get();
  }
  std::copy(atoms, atoms + count, out);
}

AtomList& AtomList::operator=(const AtomList& other) {
  if (this != &other) {
    *this = AtomList(other.data(), other.size());
  }
  return *this;
}

} // namespace detail

namespace {

using detail::Atom;
using Kind = detail::Atom::Kind;
using Atoms = std::span<const Atom>;

// ---- parsing -----------------------------------------------------------------------------------

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
// Whether `s` lowered is `lower`.
bool equals_lower(std::string_view s, std::string_view lower) {
  return s.size() == lower.size() &&
         std::equal(s.begin(), s.end(), lower.begin(), [](char a, char b) { return ascii_lower(a) == b; });
}

// A byte as an error message shows it: itself when printable, \xNN otherwise.
std::string shown(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x20 && u < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", u);
}

// The largest number of atoms a k_max_length text yields (an implicit 0 and a run per byte, the epoch).
constexpr std::size_t k_max_atoms = 2 * Version::k_max_length + 2;

// One pass over a trimmed version text, building its atoms.
class VersionScanner {
public:
  explicit VersionScanner(std::string_view t)
      : m_t(t), m_dash_separates(t.find('_') == std::string_view::npos),
        m_main_end(std::min(t.find('+'), t.size())) {}

  std::optional<ParseError> scan();
  [[nodiscard]] Atoms atoms() const { return {m_atoms.data(), m_n}; }
  [[nodiscard]] std::size_t local_begin() const { return m_local ? m_local_begin : m_n; }

private:
  bool is_separator(char c) const { return c == '.' || c == '_' || (c == '-' && m_dash_separates); }
  // The single '_' (or '-') that ends the main part stays attached to its segment (openssl's "1.0.1_").
  bool is_trailing_underscore(std::size_t i) const {
    return !m_local && i + 1 == m_main_end && (m_t[i] == '_' || (m_t[i] == '-' && m_dash_separates));
  }
  void push(Atom a) { m_atoms[m_n++] = a; }
  std::optional<ParseError> scan_number(std::size_t& i);
  void scan_string(std::size_t& i);
  std::optional<ParseError> take_epoch(std::size_t i);

  std::string_view m_t;
  bool m_dash_separates;
  std::size_t m_main_end;
  std::array<Atom, k_max_atoms> m_atoms; // only the first m_n are written and read
  std::size_t m_n = 0;
  bool m_local = false;
  std::size_t m_local_begin = 0;
  bool m_segment_open = false; // the current segment has a run
  bool m_separated = false;    // a separator was seen (so what came before can't be an epoch)
  bool m_epoch = false;        // an epoch was taken
};

std::optional<ParseError> VersionScanner::scan_number(std::size_t& i) {
  const std::size_t start = i;
  std::uint64_t value = 0;
  for (; i < m_t.size() && is_digit(m_t[i]); ++i) {
    value = value * 10 + static_cast<std::uint64_t>(m_t[i] - '0');
    if (value > Atom::k_max_number) {
      return ParseError{start,
                        fmt::format("the number '{}' is too large (at most 2^56-1)",
                                    m_t.substr(start, m_t.find_first_not_of("0123456789", start) - start))};
    }
  }
  push(Atom::number(value, !m_segment_open, m_local));
  m_segment_open = true;
  return std::nullopt;
}

void VersionScanner::scan_string(std::size_t& i) {
  const std::size_t start = i;
  if (!m_segment_open) {
    push(Atom::number(0, true, m_local)); // a segment starting with a letter: conda's implicit 0
    m_segment_open = true;
  }
  if (m_t[i] == '*') {
    while (i < m_t.size() && m_t[i] == '*') {
      ++i;
    }
  } else {
    while (i < m_t.size() && (is_letter(m_t[i]) || is_trailing_underscore(i))) {
      ++i;
    }
  }
  const std::string_view run = m_t.substr(start, i - start);
  if (equals_lower(run, "dev")) {
    push(Atom::special(Kind::dev, false, m_local));
  } else if (equals_lower(run, "post")) {
    push(Atom::special(Kind::post, false, m_local));
  } else {
    push(Atom::string(start, run.size(), false, m_local));
  }
}

// At a '!': what came before must be one number, which becomes the epoch.
std::optional<ParseError> VersionScanner::take_epoch(std::size_t i) {
  if (m_epoch) {
    return ParseError{i, "a version has at most one '!' (the epoch separator)"};
  }
  if (m_local || m_separated || m_n != 2 || m_atoms[1].kind() != Kind::number) {
    return ParseError{0, "the epoch before '!' must be a number"};
  }
  m_atoms[0] = Atom::number(m_atoms[1].value(), true, false);
  m_n = 1;
  m_epoch = true;
  m_segment_open = false;
  return std::nullopt;
}

std::optional<ParseError> VersionScanner::scan() {
  push(Atom::number(0, true, false)); // the epoch, replaced when a '!' follows
  for (std::size_t i = 0; i < m_t.size();) {
    const char c = m_t[i];
    if (is_digit(c)) {
      if (auto e = scan_number(i)) {
        return e;
      }
    } else if (is_letter(c) || c == '*' || is_trailing_underscore(i)) {
      scan_string(i);
    } else if (is_separator(c)) {
      if (!m_segment_open) {
        return ParseError{i, fmt::format("empty segment before '{}'", c)};
      }
      m_segment_open = false;
      m_separated = true;
      ++i;
    } else if (c == '!') {
      if (auto e = take_epoch(i)) {
        return e;
      }
      ++i;
    } else if (c == '+') {
      if (m_local) {
        return ParseError{i, "a version has at most one '+' (the local version separator)"};
      }
      if (!m_segment_open) {
        return ParseError{i, m_n == 1 ? "missing version before '+'" : "empty segment before '+'"};
      }
      m_local = true;
      m_local_begin = m_n;
      m_segment_open = false;
      ++i;
    } else if (c == '-') {
      return ParseError{i, "a version can't have both '-' and '_'"};
    } else {
      return ParseError{i, fmt::format("invalid character '{}' in a version", shown(c))};
    }
  }
  if (!m_segment_open) {
    const char last = m_t.back();
    return ParseError{m_t.size(), last == '+'   ? "missing local version after '+'"
                                  : last == '!' ? "missing version after '!'"
                                                : "empty segment at the end"};
  }
  return std::nullopt;
}

// ---- comparing ---------------------------------------------------------------------------------

// The atoms of one segment, from `begin` to the next segment start.
std::size_t segment_end(Atoms atoms, std::size_t begin) {
  std::size_t end = begin + 1;
  while (end < atoms.size() && !atoms[end].starts_segment()) {
    ++end;
  }
  return end;
}

// The i-th byte of a string atom as conda compares it: lowercase, '-' as '_'.
char string_byte(const std::string& text, const Atom& a, std::size_t i) {
  const char c = ascii_lower(text[a.offset() + i]);
  return c == '-' ? '_' : c;
}

// conda spells `dev` "DEV" so that it sorts below the other strings.
constexpr std::string_view k_dev = "DEV";

std::size_t string_length(const Atom& a) {
  return a.kind() == Kind::dev ? k_dev.size() : a.length();
}

char string_at(const std::string& text, const Atom& a, std::size_t i) {
  return a.kind() == Kind::dev ? k_dev[i] : string_byte(text, a, i);
}

int compare_strings(const std::string& ta, const Atom& a, const std::string& tb, const Atom& b) {
  const std::size_t na = string_length(a);
  const std::size_t nb = string_length(b);
  for (std::size_t i = 0; i < na && i < nb; ++i) {
    const char ca = string_at(ta, a, i);
    const char cb = string_at(tb, b, i);
    if (ca != cb) {
      return ca < cb ? -1 : 1;
    }
  }
  return na == nb ? 0 : (na < nb ? -1 : 1);
}

int rank(Kind k) {
  return k == Kind::dev ? 0 : static_cast<int>(k) - (k == Kind::string ? 0 : 1);
}

int compare_atoms(const std::string& ta, const Atom& a, const std::string& tb, const Atom& b) {
  const int ra = rank(a.kind());
  const int rb = rank(b.kind());
  if (ra != rb) {
    return ra < rb ? -1 : 1;
  }
  if (a.kind() == Kind::number) {
    return a.value() == b.value() ? 0 : (a.value() < b.value() ? -1 : 1);
  }
  if (a.kind() == Kind::post) {
    return 0;
  }
  return compare_strings(ta, a, tb, b);
}

const Atom k_zero = Atom::number(0, false, false);

// Compares two segments run by run, a missing run counting as the number 0.
int compare_segments(const std::string& ta, Atoms a, const std::string& tb, Atoms b) {
  for (std::size_t i = 0; i < a.size() || i < b.size(); ++i) {
    const int c = compare_atoms(ta, i < a.size() ? a[i] : k_zero, tb, i < b.size() ? b[i] : k_zero);
    if (c != 0) {
      return c;
    }
  }
  return 0;
}

// Compares the first `limit` segments of two parts (all when limit is npos), a missing segment
// counting as empty.
int compare_parts(const std::string& ta, Atoms a, const std::string& tb, Atoms b,
                  std::size_t limit = std::string::npos) {
  std::size_t ia = 0;
  std::size_t ib = 0;
  for (std::size_t n = 0; n < limit && (ia < a.size() || ib < b.size()); ++n) {
    const std::size_t ea = ia < a.size() ? segment_end(a, ia) : ia;
    const std::size_t eb = ib < b.size() ? segment_end(b, ib) : ib;
    const int c = compare_segments(ta, a.subspan(ia, ea - ia), tb, b.subspan(ib, eb - ib));
    if (c != 0) {
      return c;
    }
    ia = ea;
    ib = eb;
  }
  return 0;
}

// The segments of a part, as (begin, end) atom indices.
std::size_t count_segments(Atoms atoms) {
  return static_cast<std::size_t>(
      std::count_if(atoms.begin(), atoms.end(), [](const Atom& a) { return a.starts_segment(); }));
}

// The index of the n-th segment's first atom (atoms.size() when there are fewer).
std::size_t segment_begin(Atoms atoms, std::size_t n) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < atoms.size(); ++i) {
    if (atoms[i].starts_segment() && seen++ == n) {
      return i;
    }
  }
  return atoms.size();
}

// FNV-1a over bytes.
void mix(std::uint64_t& h, std::uint64_t byte) {
  h ^= byte;
  h *= 1099511628211ULL;
}

void hash_part(std::uint64_t& h, const std::string& text, Atoms atoms) {
  // Trailing zero runs and trailing empty segments don't change equality, so they don't count.
  std::uint64_t pending_segments = 0;
  for (std::size_t i = 0; i < atoms.size();) {
    const std::size_t end = segment_end(atoms, i);
    std::size_t last = end;
    while (last > i && atoms[last - 1].kind() == Kind::number && atoms[last - 1].value() == 0) {
      --last;
    }
    if (last == i) {
      ++pending_segments;
    } else {
      for (; pending_segments > 0; --pending_segments) {
        mix(h, 0x100);
      }
      mix(h, 0x100);
      for (std::size_t k = i; k < last; ++k) {
        const Atom& a = atoms[k];
        mix(h, 0x200 + static_cast<std::uint64_t>(a.kind()));
        if (a.kind() == Kind::number) {
          mix(h, a.value());
        } else if (a.kind() == Kind::string) {
          for (std::size_t j = 0; j < a.length(); ++j) {
            mix(h, static_cast<unsigned char>(string_byte(text, a, j)));
          }
        }
      }
    }
    i = end;
  }
}

} // namespace

ParseResult<Version> Version::parse(std::string_view text) {
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (begin < end && is_ascii_space(text[begin])) {
    ++begin;
  }
  while (end > begin && is_ascii_space(text[end - 1])) {
    --end;
  }
  const std::string_view t = text.substr(begin, end - begin);
  if (t.empty()) {
    return ParseError{begin, "empty version"};
  }
  if (t.size() > k_max_length) {
    return ParseError{begin + k_max_length, fmt::format("a version is at most {} characters", k_max_length)};
  }
  VersionScanner scanner(t);
  if (auto e = scanner.scan()) {
    e->offset += begin;
    return std::move(*e);
  }
  Version v;
  v.m_text = std::string(t);
  v.m_atoms = detail::AtomList(scanner.atoms().data(), scanner.atoms().size());
  v.m_local_begin = static_cast<std::uint16_t>(scanner.local_begin());
  return v;
}

std::uint64_t Version::epoch() const {
  return m_atoms.size() == 0 ? 0 : m_atoms.data()[0].value();
}

std::weak_ordering operator<=>(const Version& a, const Version& b) {
  const Atoms aa(a.m_atoms.data(), a.m_atoms.size());
  const Atoms bb(b.m_atoms.data(), b.m_atoms.size());
  int c = compare_parts(a.m_text, aa.first(a.m_local_begin), b.m_text, bb.first(b.m_local_begin));
  if (c == 0) {
    c = compare_parts(a.m_text, aa.subspan(a.m_local_begin), b.m_text, bb.subspan(b.m_local_begin));
  }
  return c < 0 ? std::weak_ordering::less
               : (c > 0 ? std::weak_ordering::greater : std::weak_ordering::equivalent);
}

bool Version::starts_with(const Version& prefix) const {
  const Atoms mine(m_atoms.data(), m_atoms.size());
  const Atoms theirs(prefix.m_atoms.data(), prefix.m_atoms.size());
  Atoms t1 = mine.first(m_local_begin);
  Atoms t2 = theirs.first(prefix.m_local_begin);
  if (prefix.has_local()) {
    if (compare_parts(m_text, t1, prefix.m_text, t2) != 0) {
      return false;
    }
    t1 = mine.subspan(m_local_begin);
    t2 = theirs.subspan(prefix.m_local_begin);
  }
  const std::size_t n = count_segments(t2);
  if (n == 0) {
    return true;
  }
  if (compare_parts(m_text, t1, prefix.m_text, t2, n - 1) != 0) {
    return false;
  }
  const std::size_t b1 = segment_begin(t1, n - 1);
  const std::size_t b2 = segment_begin(t2, n - 1);
  const Atoms v1 = b1 < t1.size() ? t1.subspan(b1, segment_end(t1, b1) - b1) : Atoms{};
  const Atoms v2 = t2.subspan(b2, segment_end(t2, b2) - b2);
  const std::size_t last = v2.size() - 1;
  if (compare_segments(m_text, v1.first(std::min(last, v1.size())), prefix.m_text, v2.first(last)) != 0) {
    return false;
  }
  // compare_segments padded v1 with zeros up to `last`; the run at `last` decides.
  const Atom& c1 = last < v1.size() ? v1[last] : k_zero;
  const Atom& c2 = v2[last];
  if (c2.kind() == Kind::string || c2.kind() == Kind::dev) {
    if (c1.kind() != Kind::string && c1.kind() != Kind::dev) {
      return false;
    }
    const std::size_t n2 = string_length(c2);
    if (string_length(c1) < n2) {
      return false;
    }
    for (std::size_t i = 0; i < n2; ++i) {
      if (string_at(m_text, c1, i) != string_at(prefix.m_text, c2, i)) {
        return false;
      }
    }
    return true;
  }
  return compare_atoms(m_text, c1, prefix.m_text, c2) == 0;
}

std::size_t Version::hash() const {
  std::uint64_t h = 14695981039346656037ULL;
  const Atoms atoms(m_atoms.data(), m_atoms.size());
  hash_part(h, m_text, atoms.first(m_local_begin));
  mix(h, 0x300);
  hash_part(h, m_text, atoms.subspan(m_local_begin));
  return static_cast<std::size_t>(h);
}

} // namespace lockstep::conda
