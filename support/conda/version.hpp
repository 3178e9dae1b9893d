#pragma once
// conda package versions (CEP 33; docs: ../shared/reference/conda.md §3.1-3.2): parsing, the total
// order conda sorts candidates by, equality after normalisation (1.1 == 1.1.0) with a hash that
// agrees, and the prefix test behind `=1.2` and `1.2.*`. The text is kept as given for printing.
// Repodata holds millions of these, so a Version is one pass to parse and compact: its runs are
// 8-byte atoms (strings are slices of the kept text), the first few stored inline.
#include "support/conda/parse_error.hpp"

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace lockstep::conda {

namespace detail {

/// One run of a version segment packed in 8 bytes: a number, a string (a slice of the version's text),
/// or the special strings `dev` and `post`; with flags saying whether it begins a segment and whether it
/// belongs to the local part (after '+').
class Atom {
public:
  /// The kinds, in the order conda ranks them: strings (`dev` lowest among them) < numbers < `post`.
  enum class Kind : std::uint8_t { string = 0, dev = 1, number = 2, post = 3 };
  /// The largest number a run of digits may spell (CEP 33 says 2^31-1; dates as numbers need more).
  static constexpr std::uint64_t k_max_number = (std::uint64_t{1} << 56) - 1;

  Atom() = default;
  static Atom number(std::uint64_t value, bool starts_segment, bool local);
  static Atom string(std::size_t offset, std::size_t length, bool starts_segment, bool local);
  static Atom special(Kind kind, bool starts_segment, bool local);

  [[nodiscard]] Kind kind() const { return static_cast<Kind>((m_bits >> 56) & 3); }
  [[nodiscard]] std::uint64_t value() const { return m_bits & k_max_number; }
  [[nodiscard]] std::size_t offset() const { return value() & 0xffff; }
  [[nodiscard]] std::size_t length() const { return (value() >> 16) & 0xffff; }
  [[nodiscard]] bool starts_segment() const { return ((m_bits >> 58) & 1) != 0; }
  [[nodiscard]] bool local() const { return ((m_bits >> 59) & 1) != 0; }

private:
  static Atom make(Kind kind, std::uint64_t payload, bool starts_segment, bool local);
  std::uint64_t m_bits; // left uninitialised by default: the parser's scratch array is 2 KiB
};

/// A version's atoms: up to k_inline of them inside the object, more on the heap.
class AtomList {
public:
  static constexpr std::size_t k_inline = 6;

  AtomList() = default;
  AtomList(const Atom* atoms, std::size_t count);
  AtomList(const AtomList& other) : AtomList(other.data(), other.size()) {}
  AtomList(AtomList&& other) noexcept = default;
  AtomList& operator=(const AtomList& other);
  AtomList& operator=(AtomList&& other) noexcept = default;
  ~AtomList() = default;

  [[nodiscard]] std::size_t size() const { return m_size; }
  [[nodiscard]] const Atom* data() const { return m_heap ? m_heap.get() : m_inline.data(); }

private:
  std::array<Atom, k_inline> m_inline{};
  std::unique_ptr<Atom[]> m_heap; // NOLINT(modernize-avoid-c-arrays): one allocation, exact size
  std::uint16_t m_size = 0;
};

} // namespace detail

/// A conda version: `[EPOCH!]SEGMENTS[+LOCAL]`, segments split at '.' and '_' (or '-' when the text
/// has no '_'), each segment runs of digits and of letters ("1.2g.beta15.rc"). A default Version
/// is "0".
class Version {
public:
  /// The longest version text accepted, in bytes after trimming (CEP 26 says 64; some repodata has
  /// longer ones, and the cap bounds the work a hostile record can cause).
  static constexpr std::size_t k_max_length = 128;

  Version() = default;

  /// Parses `text` (surrounding whitespace ignored, letters in any case). Errors carry the offset
  /// in `text` of the offending byte: an invalid character, an empty segment ("1..2"), a second '!'
  /// or '+', a non-numeric epoch, a number over 2^56-1, a text over k_max_length.
  static ParseResult<Version> parse(std::string_view text);

  /// The text as given, trimmed ("1.0RC1" stays "1.0RC1").
  [[nodiscard]] const std::string& str() const { return m_text; }
  /// The epoch (the number before '!'; 0 when there is none).
  [[nodiscard]] std::uint64_t epoch() const;
  /// Whether the version has a local part ("+cuda").
  [[nodiscard]] bool has_local() const { return m_local_begin < m_atoms.size(); }

  /// conda's prefix test (`=1.2`, `1.2.*`): every segment of `prefix` but the last equals this
  /// version's, and in the last one every run but the last equals too while the last run is equal
  /// (numbers) or a string prefix (strings): 1.2.7 and 1.2rc1 start with 1.2, 1.20 does not; 1.0ab
  /// starts with 1.0a. A `prefix` with a local part compares the local parts after equal main parts.
  [[nodiscard]] bool starts_with(const Version& prefix) const;

  /// A hash that agrees with ==: equal versions (1.1, 1.1.0, 1.1.0.0) hash alike.
  [[nodiscard]] std::size_t hash() const;

  /// conda's order: epoch, then the segments run by run (a missing run or segment counts as the
  /// number 0), then, only between equal main parts, the local parts. Strings rank below numbers,
  /// `dev` below every other string and `post` above everything: 1.1dev1 < 1.1a1 < 1.1 < 1.1post1.
  friend std::weak_ordering operator<=>(const Version& a, const Version& b);
  /// Equal under that order (1.1 == 1.1.0; 0.4.1.rc == 0.4.1.RC), whatever the texts.
  friend bool operator==(const Version& a, const Version& b) { return std::is_eq(a <=> b); }

private:
  std::string m_text = "0";
  detail::AtomList m_atoms;        // the epoch first (its own segment), then main, then local atoms
  std::uint16_t m_local_begin = 0; // index of the first local atom (== size when there is none)
};

} // namespace lockstep::conda

template <> struct std::hash<lockstep::conda::Version> {
  std::size_t operator()(const lockstep::conda::Version& v) const noexcept { return v.hash(); }
};
