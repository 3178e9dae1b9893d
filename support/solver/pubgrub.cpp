// PubGrub: see pubgrub.hpp. The algorithm follows pub's doc/solver.md (unit propagation, conflict
// resolution, decision making, error reporting), with version sets as bit sets over each package's
// candidate list plus an "absent" element, so that a term is just a set: positive when absent is
// not in it.
#include "support/solver/pubgrub.hpp"

#include "support/base/interrupt.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>

namespace lockstep::pubgrub {

// ---- VersionSet ------------------------------------------------------------------------------------

VersionSet VersionSet::none(std::size_t n) {
  VersionSet s;
  s.m_n = n;
  s.m_bits.assign((n + 1 + 63) / 64, 0);
  return s;
}

VersionSet VersionSet::everything(std::size_t n) {
  VersionSet s = none(n);
  std::fill(s.m_bits.begin(), s.m_bits.end(), ~std::uint64_t{0});
  s.trim();
  return s;
}

VersionSet VersionSet::any(std::size_t n) {
  VersionSet s = everything(n);
  s.m_bits[0] &= ~std::uint64_t{1};
  return s;
}

VersionSet VersionSet::only(std::size_t n, std::size_t v) {
  VersionSet s = none(n);
  s.add(v);
  return s;
}

void VersionSet::trim() {
  const std::size_t used = (m_n + 1) % 64;
  if (used != 0 && !m_bits.empty()) {
    m_bits.back() &= (std::uint64_t{1} << used) - 1;
  }
}

VersionSet VersionSet::versions() const {
  VersionSet s = *this;
  s.m_bits[0] &= ~std::uint64_t{1};
  return s;
}

VersionSet VersionSet::complement() const {
  VersionSet s = *this;
  for (std::uint64_t& w : s.m_bits) {
    w = ~w;
  }
  s.trim();
  return s;
}

VersionSet VersionSet::operator&(const VersionSet& o) const {
  VersionSet s = *this;
  for (std::size_t i = 0; i < s.m_bits.size(); ++i) {
    s.m_bits[i] &= o.m_bits[i];
  }
  return s;
}

VersionSet VersionSet::operator|(const VersionSet& o) const {
  VersionSet s = *this;
  for (std::size_t i = 0; i < s.m_bits.size(); ++i) {
    s.m_bits[i] |= o.m_bits[i];
  }
  return s;
}

bool VersionSet::subset_of(const VersionSet& o) const {
  for (std::size_t i = 0; i < m_bits.size(); ++i) {
    if ((m_bits[i] & ~o.m_bits[i]) != 0) {
      return false;
    }
  }
  return true;
}

bool VersionSet::disjoint(const VersionSet& o) const {
  for (std::size_t i = 0; i < m_bits.size(); ++i) {
    if ((m_bits[i] & o.m_bits[i]) != 0) {
      return false;
    }
  }
  return true;
}

bool VersionSet::empty() const {
  return std::all_of(m_bits.begin(), m_bits.end(), [](std::uint64_t w) { return w == 0; });
}

bool VersionSet::full() const {
  return complement().empty();
}

std::size_t VersionSet::count() const {
  std::size_t n = 0;
  for (std::uint64_t w : m_bits) {
    n += static_cast<std::size_t>(std::popcount(w));
  }
  return has_absent() ? n - 1 : n;
}

std::optional<std::size_t> VersionSet::highest() const {
  for (std::size_t i = m_bits.size(); i-- > 0;) {
    if (m_bits[i] != 0) {
      const std::size_t b = i * 64 + 63 - static_cast<std::size_t>(std::countl_zero(m_bits[i]));
      return b == 0 ? std::nullopt : std::optional<std::size_t>(b - 1);
    }
  }
  return std::nullopt;
}

// ---- the solver -------------------------------------------------------------------------------------

namespace {

/// "package is in `allowed`": positive when absent is not allowed.
struct Term {
  PackageId package = 0;
  VersionSet allowed;
  [[nodiscard]] bool positive() const { return !allowed.has_absent(); }
};

enum class Kind { root, dependency, no_versions, unusable, conflict };

/// Terms that can't all hold at once (at most one term per package).
struct Incompatibility {
  std::vector<Term> terms;
  Kind kind = Kind::conflict;
  std::size_t cause1 = 0; // conflict: the two incompatibilities it was derived from
  std::size_t cause2 = 0;
  std::string text; // dependency, unusable, no_versions: the sentence
};

struct Assignment {
  Term term;
  std::size_t level = 0;
  bool decision = false;
  std::size_t cause = 0; // derivations: the incompatibility
  std::size_t version = 0;
};

enum class Relation { satisfied, contradicted, inconclusive, almost };

class Solver {
public:
  Solver(Provider& provider, PackageId root, const Limits& limits)
      : m_provider(provider), m_root(root), m_limits(limits), m_start(std::chrono::steady_clock::now()) {}

  Result<Outcome> run(std::size_t root_version);

private:
  Result<void> know(PackageId p);
  std::size_t add_incompatibility(Incompatibility inc);
  // The relation of `inc` to the partial solution; for `almost`, `unsatisfied` is its open term.
  Relation relation(const Incompatibility& inc, std::size_t& unsatisfied) const;
  void assign(Term term, bool decision, std::size_t cause, std::size_t version);
  void backtrack(std::size_t level);
  // Propagates from `start`; nullopt on success, else the root-failure incompatibility.
  Result<std::optional<std::size_t>> propagate(PackageId start);
  Result<std::optional<std::size_t>> resolve_conflict(std::size_t inc, bool& failed);
  [[nodiscard]] bool is_failure(const Incompatibility& inc) const;
  Result<std::optional<PackageId>> next_package();
  Result<bool> decide(PackageId p);
  // An interrupt, or a bound of m_limits reached: the error that stops the solve.
  Result<void> check_limits() const;

  // Explanations.
  std::string term_text(const Term& t);
  std::string inc_text(std::size_t i);
  void explain(std::size_t i, std::vector<std::string>& lines, std::size_t depth);
  template <typename Visit> void walk_derivation(std::size_t failure, Visit&& visit);
  void count_uses(std::size_t failure);
  void collect_root_causes(std::size_t failure, std::vector<std::string>& out);

  Provider& m_provider;
  PackageId m_root;
  const Limits& m_limits;
  std::chrono::steady_clock::time_point m_start;
  std::vector<std::size_t> m_sizes;           // by package: its universe size (known when > 0 or known flag)
  std::vector<bool> m_known;                  // by package
  std::vector<VersionSet> m_current;          // by package: the intersection of its assignments
  std::vector<bool> m_decided;                // by package
  std::vector<std::vector<std::size_t>> m_of; // by package: incompatibilities that mention it
  std::vector<Incompatibility> m_incompatibilities;
  std::vector<Assignment> m_assignments;
  std::size_t m_level = 0;
  SolveStats m_stats;
  // explanation state
  std::map<std::size_t, int> m_uses;
  std::map<std::size_t, int> m_line_of;
  int m_next_line = 1;
  std::size_t m_explained_bytes = 0;
  std::size_t m_left_out = 0; // sentences the explanation's bound left out
};

// Deeper derivations are cut (explain() recurses once per level).
constexpr std::size_t k_max_explain_depth = 256;

// The lines joined by newlines, at most about `max` bytes: a longer text keeps its first lines and
// its last five (the conclusion) and says how many it leaves out between them.
std::string bounded_join(const std::vector<std::string>& lines, std::size_t max) {
  std::size_t total = 0;
  for (const std::string& l : lines) {
    total += l.size() + 1;
  }
  if (total <= max + max / 4 || lines.size() <= 5) {
    return fmt::format("{}", fmt::join(lines, "\n"));
  }
  const std::size_t tail = 5;
  std::string out;
  std::size_t kept = 0;
  while (kept < lines.size() - tail && out.size() + lines[kept].size() < max) {
    out += lines[kept++] + "\n";
  }
  out += fmt::format("[... {} lines of the derivation left out ...]", lines.size() - tail - kept);
  for (std::size_t i = lines.size() - tail; i < lines.size(); ++i) {
    out += "\n" + lines[i].substr(0, max / 8);
  }
  return out;
}

Result<void> Solver::check_limits() const {
  LS_TRY(check_interrupted());
  const std::size_t steps = m_stats.decisions + m_stats.conflicts;
  const auto elapsed = std::chrono::steady_clock::now() - m_start;
  const double seconds = std::chrono::duration<double>(elapsed).count();
  const std::string hint = m_limits.how_to_raise.empty() ? std::string() : "; " + m_limits.how_to_raise;
  if (steps > m_limits.max_steps) {
    return invalid_input("version solving gave up after {} steps ({} decisions, {} conflicts, {:.1f} s), "
                         "the bound on steps: the package metadata is too tangled to search{}",
                         m_limits.max_steps, m_stats.decisions, m_stats.conflicts, seconds, hint);
  }
  if (elapsed > m_limits.max_time) {
    return invalid_input("version solving gave up after {} s ({} decisions, {} conflicts), the bound on "
                         "time: the package metadata is too tangled to search{}",
                         std::chrono::duration_cast<std::chrono::seconds>(m_limits.max_time).count(),
                         m_stats.decisions, m_stats.conflicts, hint);
  }
  return {};
}

Result<void> Solver::know(PackageId p) {
  if (p >= m_known.size()) {
    m_known.resize(p + 1, false);
    m_sizes.resize(p + 1, 0);
    m_current.resize(p + 1);
    m_decided.resize(p + 1, false);
    m_of.resize(p + 1);
  }
  if (!m_known[p]) {
    LS_TRY_ASSIGN(std::size_t n, m_provider.version_count(p));
    m_sizes[p] = n;
    m_current[p] = VersionSet::everything(n);
    m_known[p] = true;
  }
  return {};
}

std::size_t Solver::add_incompatibility(Incompatibility inc) {
  // A term every state satisfies says nothing ("not b in {}" of a dependency nothing fits).
  std::erase_if(inc.terms, [](const Term& t) { return t.allowed.full(); });
  const std::size_t id = m_incompatibilities.size();
  for (const Term& t : inc.terms) {
    m_of[t.package].push_back(id);
  }
  m_incompatibilities.push_back(std::move(inc));
  ++m_stats.incompatibilities;
  return id;
}

Relation Solver::relation(const Incompatibility& inc, std::size_t& unsatisfied) const {
  std::optional<std::size_t> open;
  for (std::size_t i = 0; i < inc.terms.size(); ++i) {
    const Term& t = inc.terms[i];
    const VersionSet& current = m_current[t.package];
    if (current.subset_of(t.allowed)) {
      continue;
    }
    if (current.disjoint(t.allowed)) {
      return Relation::contradicted;
    }
    if (open) {
      return Relation::inconclusive;
    }
    open = i;
  }
  if (!open) {
    return Relation::satisfied;
  }
  unsatisfied = *open;
  return Relation::almost;
}

void Solver::assign(Term term, bool decision, std::size_t cause, std::size_t version) {
  m_current[term.package] = m_current[term.package] & term.allowed;
  if (decision) {
    m_decided[term.package] = true;
  }
  m_assignments.push_back(Assignment{std::move(term), m_level, decision, cause, version});
}

void Solver::backtrack(std::size_t level) {
  std::set<PackageId> touched;
  while (!m_assignments.empty() && m_assignments.back().level > level) {
    const Assignment& a = m_assignments.back();
    touched.insert(a.term.package);
    if (a.decision) {
      m_decided[a.term.package] = false;
    }
    m_assignments.pop_back();
  }
  for (PackageId p : touched) {
    m_current[p] = VersionSet::everything(m_sizes[p]);
  }
  for (const Assignment& a : m_assignments) {
    if (touched.count(a.term.package) != 0) {
      m_current[a.term.package] = m_current[a.term.package] & a.term.allowed;
    }
  }
  m_level = level;
}

bool Solver::is_failure(const Incompatibility& inc) const {
  return inc.terms.empty() ||
         (inc.terms.size() == 1 && inc.terms[0].package == m_root && inc.terms[0].positive());
}

Result<std::optional<std::size_t>> Solver::propagate(PackageId start) {
  std::vector<PackageId> changed{start};
  std::set<PackageId> queued{start};
  while (!changed.empty()) {
    LS_TRY(check_limits());
    const PackageId p = changed.back();
    changed.pop_back();
    queued.erase(p);
    // Newest first: learned incompatibilities are the most useful.
    const std::vector<std::size_t> list = m_of[p];
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
      std::size_t open = 0;
      const Relation rel = relation(m_incompatibilities[*it], open);
      if (rel == Relation::satisfied) {
        bool failed = false;
        LS_TRY_ASSIGN(std::optional<std::size_t> learned, resolve_conflict(*it, failed));
        if (failed) {
          return learned;
        }
        const Incompatibility& inc = m_incompatibilities[*learned];
        if (relation(inc, open) != Relation::almost) {
          return internal_error("pubgrub: a learned incompatibility is not almost satisfied");
        }
        Term t{inc.terms[open].package, inc.terms[open].allowed.complement()};
        const PackageId q = t.package;
        assign(std::move(t), false, *learned, 0);
        changed.assign(1, q);
        queued = {q};
        break;
      }
      if (rel == Relation::almost) {
        const Incompatibility& inc = m_incompatibilities[*it];
        Term t{inc.terms[open].package, inc.terms[open].allowed.complement()};
        const PackageId q = t.package;
        assign(std::move(t), false, *it, 0);
        if (queued.insert(q).second) {
          changed.push_back(q);
        }
      }
    }
  }
  return std::optional<std::size_t>();
}

Result<std::optional<std::size_t>> Solver::resolve_conflict(std::size_t inc_id, bool& failed) {
  ++m_stats.conflicts;
  while (!is_failure(m_incompatibilities[inc_id])) {
    LS_TRY(check_limits());
    const Incompatibility inc = m_incompatibilities[inc_id];
    // The earliest assignment that satisfies each term, with the running intersections.
    std::map<PackageId, VersionSet> running;
    std::map<PackageId, std::size_t> term_of;
    for (std::size_t i = 0; i < inc.terms.size(); ++i) {
      running.emplace(inc.terms[i].package, VersionSet::everything(m_sizes[inc.terms[i].package]));
      term_of.emplace(inc.terms[i].package, i);
    }
    std::map<PackageId, std::size_t> satisfied_at;
    std::size_t satisfier = 0;
    for (std::size_t a = 0; a < m_assignments.size() && satisfied_at.size() < inc.terms.size(); ++a) {
      const PackageId p = m_assignments[a].term.package;
      auto t = term_of.find(p);
      if (t == term_of.end() || satisfied_at.count(p) != 0) {
        continue;
      }
      VersionSet& r = running.at(p);
      r = r & m_assignments[a].term.allowed;
      if (r.subset_of(inc.terms[t->second].allowed)) {
        satisfied_at[p] = a;
        satisfier = std::max(satisfier, a);
      }
    }
    if (satisfied_at.size() < inc.terms.size()) {
      return internal_error("pubgrub: conflict resolution on an incompatibility that is not satisfied");
    }
    const Assignment& sat = m_assignments[satisfier];
    const PackageId sp = sat.term.package;
    const Term& sat_term = inc.terms[term_of.at(sp)];
    // The previous satisfier: the other terms' satisfiers, and the earliest assignment of sp that,
    // with the satisfier, satisfies sp's term.
    std::optional<std::size_t> previous;
    for (const auto& [p, a] : satisfied_at) {
      if (p != sp) {
        previous = std::max(previous.value_or(0), a);
      }
    }
    VersionSet r = VersionSet::everything(m_sizes[sp]);
    for (std::size_t a = 0; a < satisfier; ++a) {
      if (m_assignments[a].term.package != sp) {
        continue;
      }
      r = r & m_assignments[a].term.allowed;
      if ((r & sat.term.allowed).subset_of(sat_term.allowed)) {
        previous = std::max(previous.value_or(0), a);
        break;
      }
    }
    const std::size_t previous_level =
        previous ? std::max<std::size_t>(m_assignments[*previous].level, 1) : 1;
    if (sat.decision || previous_level != sat.level) {
      backtrack(previous_level);
      return std::optional<std::size_t>(inc_id);
    }
    // The prior cause: this incompatibility and the satisfier's cause, without sp's terms, plus
    // "not (satisfier \ term)" when the satisfier alone doesn't satisfy the term.
    const Incompatibility& cause = m_incompatibilities[sat.cause];
    std::map<PackageId, VersionSet> merged;
    for (const Incompatibility* source : {&inc, &cause}) {
      for (const Term& t : source->terms) {
        if (t.package == sp) {
          continue;
        }
        auto [it, fresh] = merged.try_emplace(t.package, t.allowed);
        if (!fresh) {
          it->second = it->second & t.allowed;
        }
      }
    }
    if (!sat.term.allowed.subset_of(sat_term.allowed)) {
      merged[sp] = sat.term.allowed.complement() | sat_term.allowed;
    }
    Incompatibility prior;
    prior.kind = Kind::conflict;
    prior.cause1 = inc_id;
    prior.cause2 = sat.cause;
    for (auto& [p, allowed] : merged) {
      if (!allowed.full()) {
        prior.terms.push_back(Term{p, std::move(allowed)});
      }
    }
    inc_id = add_incompatibility(std::move(prior));
  }
  failed = true;
  return std::optional<std::size_t>(inc_id);
}

Result<std::optional<PackageId>> Solver::next_package() {
  std::optional<PackageId> best;
  Priority best_key;
  for (PackageId p = 0; p < m_known.size(); ++p) {
    if (!m_known[p] || m_decided[p] || m_current[p].has_absent()) {
      continue; // unknown, decided, or not required
    }
    Priority key = m_provider.priority(p, m_current[p]);
    if (!best || key < best_key) {
      best = p;
      best_key = std::move(key);
    }
  }
  return best;
}

// Tries a version of `p`; false when no version could be chosen (an incompatibility says why).
Result<bool> Solver::decide(PackageId p) {
  const VersionSet allowed = m_current[p].versions();
  LS_TRY_ASSIGN(std::optional<std::size_t> chosen, m_provider.choose(p, allowed));
  if (!chosen) {
    Incompatibility inc;
    inc.kind = Kind::no_versions;
    inc.terms.push_back(Term{p, allowed});
    inc.text = m_provider.no_versions(p, allowed);
    add_incompatibility(std::move(inc));
    return false;
  }
  const std::size_t v = *chosen;
  if (!allowed.has(v)) {
    return internal_error("pubgrub: the provider chose a version outside the allowed set");
  }
  LS_TRY_ASSIGN(Dependencies deps, m_provider.dependencies(p, v));
  const VersionSet self = VersionSet::only(m_sizes[p], v);
  if (deps.unusable) {
    Incompatibility inc;
    inc.kind = Kind::unusable;
    inc.terms.push_back(Term{p, self});
    inc.text = *deps.unusable;
    add_incompatibility(std::move(inc));
    return false;
  }
  bool conflicting = false;
  for (Dependency& d : deps.needs) {
    LS_TRY(know(d.package));
    if (d.versions.universe() != m_sizes[d.package]) {
      return internal_error("pubgrub: a dependency's version set has the wrong universe");
    }
    Incompatibility inc;
    inc.kind = Kind::dependency;
    inc.text = std::move(d.text);
    if (d.package == p) {
      if (d.versions.has(v)) {
        continue; // needs itself at its own version
      }
      inc.terms.push_back(Term{p, self});
    } else {
      // "not (q in versions)": absent included for a dependency, left out for a constraint (a set
      // with absent in it: "q, if selected, is one of these").
      VersionSet q = d.versions.complement();
      inc.terms.push_back(Term{p, self});
      inc.terms.push_back(Term{d.package, std::move(q)});
    }
    const std::size_t id = add_incompatibility(std::move(inc));
    // Would it be satisfied by choosing v (every other term satisfied already)?
    const Incompatibility& added = m_incompatibilities[id];
    bool others = true;
    for (const Term& t : added.terms) {
      if (t.package != p && !m_current[t.package].subset_of(t.allowed)) {
        others = false;
      }
    }
    conflicting = conflicting || others;
  }
  if (conflicting) {
    return false;
  }
  ++m_level;
  ++m_stats.decisions;
  assign(Term{p, self}, true, 0, v);
  return true;
}

Result<Outcome> Solver::run(std::size_t root_version) {
  LS_TRY(know(m_root));
  Incompatibility root;
  root.kind = Kind::root;
  VersionSet not_root = VersionSet::only(m_sizes[m_root], root_version).complement();
  root.terms.push_back(Term{m_root, std::move(not_root)});
  add_incompatibility(std::move(root));
  Outcome out;
  PackageId next = m_root;
  while (true) {
    LS_TRY(check_limits());
    LS_TRY_ASSIGN(std::optional<std::size_t> failure, propagate(next));
    if (failure) {
      std::vector<std::string> lines;
      count_uses(*failure);
      if (m_incompatibilities[*failure].kind == Kind::conflict) {
        explain(*failure, lines, 0);
      } else {
        lines.push_back(fmt::format("Because {}, version solving failed.", inc_text(*failure)));
      }
      if (m_left_out > 0) {
        // The conclusion (the last sentence) stays; the cut is said where it is.
        lines.insert(lines.end() - 1,
                     fmt::format("[... {} branches of the derivation left out: it is longer than {} "
                                 "bytes or {} levels deep ...]",
                                 m_left_out, m_limits.max_explanation, k_max_explain_depth));
      }
      out.explanation = bounded_join(lines, m_limits.max_explanation);
      collect_root_causes(*failure, out.root_causes);
      out.stats = m_stats;
      return out;
    }
    LS_TRY_ASSIGN(std::optional<PackageId> p, next_package());
    if (!p) {
      break;
    }
    LS_TRY_ASSIGN(bool decided, decide(*p));
    (void)decided;
    next = *p;
  }
  for (const Assignment& a : m_assignments) {
    if (a.decision && a.term.package != m_root) {
      out.selection.push_back(Selection{a.term.package, a.version});
    }
  }
  out.solved = true;
  out.stats = m_stats;
  return out;
}

// ---- explanations (pub's doc/solver.md, "Error Reporting") ---------------------------------------

std::string Solver::term_text(const Term& t) {
  if (t.positive()) {
    return m_provider.describe(t.package, t.allowed);
  }
  return m_provider.describe(t.package, t.allowed.complement().versions());
}

std::string Solver::inc_text(std::size_t i) {
  const Incompatibility& inc = m_incompatibilities[i];
  if (inc.kind == Kind::dependency || inc.kind == Kind::unusable || inc.kind == Kind::no_versions) {
    return inc.text;
  }
  std::vector<const Term*> positive;
  std::vector<const Term*> negative;
  for (const Term& t : inc.terms) {
    if (t.package == m_root && t.positive()) {
      continue; // "the request" is always there
    }
    (t.positive() ? positive : negative).push_back(&t);
  }
  const bool has_root = std::any_of(inc.terms.begin(), inc.terms.end(),
                                    [this](const Term& t) { return t.package == m_root && t.positive(); });
  if (positive.empty() && negative.empty()) {
    return "version solving failed";
  }
  if (positive.empty() && negative.size() == 1) {
    return fmt::format("{} is required", term_text(*negative[0]));
  }
  if (positive.size() == 1 && negative.empty()) {
    return has_root ? fmt::format("the request can't use {}", term_text(*positive[0]))
                    : fmt::format("{} can't be used", term_text(*positive[0]));
  }
  if (positive.size() == 1 && negative.size() == 1) {
    return fmt::format("{} needs {}", term_text(*positive[0]), term_text(*negative[0]));
  }
  if (positive.size() == 2 && negative.empty()) {
    return fmt::format("{} is incompatible with {}", term_text(*positive[0]), term_text(*positive[1]));
  }
  std::vector<std::string> parts;
  parts.reserve(positive.size() + negative.size());
  for (const Term* t : positive) {
    parts.push_back(term_text(*t));
  }
  for (const Term* t : negative) {
    parts.push_back("not " + term_text(*t));
  }
  return fmt::format("{} can't all hold", fmt::join(parts, " and "));
}

// Calls `visit(i, first)` for each arrival at an incompatibility of the derivation of `failure`,
// depth first with causes in order (`first`: not met before); only a first arrival goes on to the
// causes. Iterative: a derivation can be as deep as the solve had conflicts.
template <typename Visit> void Solver::walk_derivation(std::size_t failure, Visit&& visit) {
  std::set<std::size_t> seen;
  std::vector<std::size_t> todo{failure};
  while (!todo.empty()) {
    const std::size_t i = todo.back();
    todo.pop_back();
    const bool first = seen.insert(i).second;
    visit(i, first);
    const Incompatibility& inc = m_incompatibilities[i];
    if (first && inc.kind == Kind::conflict) {
      todo.push_back(inc.cause2);
      todo.push_back(inc.cause1);
    }
  }
}

// How often each incompatibility of the derivation is used (a sentence used twice is numbered).
void Solver::count_uses(std::size_t failure) {
  walk_derivation(failure, [this](std::size_t i, bool) { ++m_uses[i]; });
}

// The root's dependencies the derivation rests on, in the order a depth-first walk meets them.
void Solver::collect_root_causes(std::size_t failure, std::vector<std::string>& out) {
  walk_derivation(failure, [&](std::size_t i, bool first) {
    const Incompatibility& inc = m_incompatibilities[i];
    if (first && inc.kind == Kind::dependency &&
        std::any_of(inc.terms.begin(), inc.terms.end(),
                    [this](const Term& t) { return t.package == m_root; }) &&
        std::find(out.begin(), out.end(), inc.text) == out.end()) {
      out.push_back(inc.text);
    }
  });
}

void Solver::explain(std::size_t i, std::vector<std::string>& lines, std::size_t depth) {
  const Incompatibility& inc = m_incompatibilities[i];
  if (depth > 0 && (m_explained_bytes > m_limits.max_explanation || depth > k_max_explain_depth)) {
    ++m_left_out;
    return;
  }
  const auto derived = [this](std::size_t c) { return m_incompatibilities[c].kind == Kind::conflict; };
  const auto line_ref = [this](std::size_t c) {
    auto it = m_line_of.find(c);
    return it == m_line_of.end() ? std::string() : fmt::format(" ({})", it->second);
  };
  // Writes the sentence for `i`, numbering it when later sentences refer back to it.
  const auto write = [&](std::string sentence) {
    if (m_uses[i] > 1) {
      m_line_of[i] = m_next_line++;
      sentence += fmt::format(" ({})", m_line_of[i]);
    }
    m_explained_bytes += sentence.size() + 1;
    lines.push_back(std::move(sentence));
  };
  const std::size_t c1 = inc.cause1;
  const std::size_t c2 = inc.cause2;
  if (derived(c1) && derived(c2)) {
    const bool l1 = m_line_of.count(c1) != 0;
    const bool l2 = m_line_of.count(c2) != 0;
    if (l1 && l2) {
      write(fmt::format("Because {}{} and {}{}, {}.", inc_text(c1), line_ref(c1), inc_text(c2), line_ref(c2),
                        inc_text(i)));
    } else if (l1 || l2) {
      const std::size_t with = l1 ? c1 : c2;
      const std::size_t without = l1 ? c2 : c1;
      explain(without, lines, depth + 1);
      write(fmt::format("And because {}{}, {}.", inc_text(with), line_ref(with), inc_text(i)));
    } else {
      const std::size_t before = lines.size();
      explain(c1, lines, depth + 1);
      if (m_line_of.count(c1) == 0 && lines.size() > before) {
        m_line_of[c1] = m_next_line++;
        lines.back() += fmt::format(" ({})", m_line_of[c1]);
      }
      lines.emplace_back();
      explain(c2, lines, depth + 1);
      write(fmt::format("And because {}{}, {}.", inc_text(c1), line_ref(c1), inc_text(i)));
    }
    return;
  }
  if (derived(c1) || derived(c2)) {
    const std::size_t d = derived(c1) ? c1 : c2;
    const std::size_t e = derived(c1) ? c2 : c1;
    if (m_line_of.count(d) != 0) {
      write(fmt::format("Because {} and {}{}, {}.", inc_text(e), inc_text(d), line_ref(d), inc_text(i)));
      return;
    }
    const Incompatibility& dinc = m_incompatibilities[d];
    const bool d1 = derived(dinc.cause1);
    const bool d2 = derived(dinc.cause2);
    if (d1 != d2 && m_uses[d] <= 1) {
      const std::size_t dd = d1 ? dinc.cause1 : dinc.cause2;
      const std::size_t de = d1 ? dinc.cause2 : dinc.cause1;
      if (m_line_of.count(dd) == 0) {
        explain(dd, lines, depth + 1);
        write(fmt::format("And because {} and {}, {}.", inc_text(de), inc_text(e), inc_text(i)));
        return;
      }
    }
    explain(d, lines, depth + 1);
    write(fmt::format("And because {}, {}.", inc_text(e), inc_text(i)));
    return;
  }
  write(fmt::format("Because {} and {}, {}.", inc_text(c1), inc_text(c2), inc_text(i)));
}

} // namespace

Result<Outcome> solve(Provider& provider, PackageId root, std::size_t root_version, const Limits& limits) {
  Solver solver(provider, root, limits);
  return solver.run(root_version);
}

} // namespace lockstep::pubgrub
