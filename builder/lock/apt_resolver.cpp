#include "builder/lock/apt_resolver.hpp"

#include "envspec/yaml/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <compare>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

namespace lockstep::builder {

// ---- the universe ----------------------------------------------------------------------------------

AptUniverse::AptUniverse(std::vector<AptPackage> packages, std::vector<InstalledPackage> installed,
                         std::vector<int> priorities)
    : m_priorities(std::move(priorities)) {
  std::set<std::pair<std::string, std::string>> held;
  for (InstalledPackage& i : installed) {
    if (!i.installed()) {
      continue;
    }
    if (i.held()) {
      held.emplace(i.package.name, i.package.architecture);
    }
    i.package.repo = k_installed_repo;
    packages.push_back(std::move(i.package));
  }
  std::vector<std::uint32_t> order(packages.size());
  std::iota(order.begin(), order.end(), 0U);
  auto key = [&](std::uint32_t i) {
    const AptPackage& p = packages[i];
    return std::tie(p.name, p.repo, p.architecture, p.sha256, p.filename, p.control);
  };
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const AptPackage& x = packages[a];
    const AptPackage& y = packages[b];
    if (x.name != y.name) {
      return x.name < y.name;
    }
    // The installed package first, then the highest priority, then the highest version.
    const auto rank = [this](const AptPackage& p) {
      return p.repo == k_installed_repo ? std::numeric_limits<int>::max() : priority(p.repo);
    };
    if (rank(x) != rank(y)) {
      return rank(x) > rank(y);
    }
    if (auto c = x.version <=> y.version; std::is_neq(c)) {
      return std::is_gt(c); // highest version first
    }
    return key(a) < key(b);
  });
  m_packages.reserve(packages.size());
  for (std::uint32_t i : order) {
    AptPackage& p = packages[i];
    if (!m_packages.empty()) {
      const AptPackage& last = m_packages.back();
      if (last.name == p.name && last.repo == p.repo && last.version == p.version &&
          last.architecture == p.architecture && last.sha256 == p.sha256) {
        continue; // the same package listed twice
      }
    }
    m_packages.push_back(std::move(p));
  }
  m_order.resize(m_packages.size());
  std::iota(m_order.begin(), m_order.end(), 0U);
  for (std::uint32_t i = 0; i < m_packages.size(); ++i) {
    const AptPackage& p = m_packages[i];
    if (p.repo == k_installed_repo) {
      m_installed.push_back(i);
      if (held.count({p.name, p.architecture}) != 0) {
        m_held.insert(i);
      }
    }
  }
  for (std::size_t i = 0; i < m_packages.size();) {
    std::size_t j = i;
    while (j < m_packages.size() && m_packages[j].name == m_packages[i].name) {
      ++j;
    }
    m_by_name.emplace(m_packages[i].name, std::span<const std::uint32_t>(m_order.data() + i, j - i));
    i = j;
  }
  for (std::uint32_t i = 0; i < m_packages.size(); ++i) {
    const auto& provides = m_packages[i].provides;
    for (std::uint32_t j = 0; j < provides.size(); ++j) {
      m_providers[provides[j].name].push_back(Provider{i, j});
    }
  }
}

std::span<const std::uint32_t> AptUniverse::versions(std::string_view name) const {
  auto it = m_by_name.find(name);
  return it == m_by_name.end() ? std::span<const std::uint32_t>() : it->second;
}

std::span<const AptUniverse::Provider> AptUniverse::providers(std::string_view name) const {
  auto it = m_providers.find(name);
  return it == m_providers.end() ? std::span<const Provider>() : std::span<const Provider>(it->second);
}

namespace {

// ---- helpers ---------------------------------------------------------------------------------------

constexpr int k_max_restarts = 1000;
constexpr std::size_t k_max_listed = 5;      // providers or versions named in one error
constexpr std::size_t k_max_glob_listed = 8; // versions named when a version glob matches none
constexpr std::size_t k_max_glob_size = 256; // characters of a version glob

enum class Field { pre_depends, depends, recommends };

std::string_view field_name(Field f) {
  switch (f) {
  case Field::pre_depends:
    return "Pre-Depends";
  case Field::depends:
    return "Depends";
  case Field::recommends:
    return "Recommends";
  }
  return "Depends";
}

std::string_view field_verb(Field f) {
  switch (f) {
  case Field::pre_depends:
    return "pre-depends on";
  case Field::depends:
    return "depends on";
  case Field::recommends:
    return "recommends";
  }
  return "depends on";
}

const DebRelationField& field_of(const AptPackage& p, Field f) {
  switch (f) {
  case Field::pre_depends:
    return p.pre_depends;
  case Field::depends:
    return p.depends;
  case Field::recommends:
    return p.recommends;
  }
  return p.depends;
}

std::string group_str(const std::vector<DebRelation>& group) {
  std::string s;
  for (const DebRelation& r : group) {
    if (!s.empty()) {
      s += " | ";
    }
    s += r.str();
  }
  return s;
}

// Priority: required first (apt's CompareProviders prefers higher priorities among providers).
int priority_rank(std::string_view priority) {
  static constexpr std::string_view order[] = {"required", "important", "standard", "optional", "extra"};
  for (std::size_t i = 0; i < std::size(order); ++i) {
    if (priority == order[i]) {
      return static_cast<int>(i);
    }
  }
  return static_cast<int>(std::size(order));
}

bool fits(const DebianVersion& v, const DebRelation& r) {
  return !r.relation || satisfies(v, *r.relation, *r.version);
}

// A provided name satisfies a versioned relation only with a versioned Provides (policy §7.5).
bool provide_fits(const DebRelation& provided, const DebRelation& r) {
  return !r.relation || (provided.version && satisfies(*provided.version, *r.relation, *r.version));
}

// "name[:arch][=version or glob]", as the spec wrote the request.
std::string asked_text(const AptRequest& r) {
  std::string s = r.name + (r.arch ? ":" + *r.arch : "");
  if (r.version_glob) {
    s += "=" + *r.version_glob;
  } else if (r.pin) {
    s += "=" + r.pin->str();
  }
  return s;
}

// A constraint on the versions of one (name, architecture), learnt when a chosen version turned out
// not to satisfy a later dependency (or given by a pin).
struct Constraint {
  DebRelation relation;
  std::string from;       // "ls-b 1.0-1 (Depends: ls-lib (<< 3.0))" or "packages.apt[0] (ls-lib=1.0-1)"
  std::string chain = {}; // how `from` came to be selected: "packages.apt[0] -> ls-b", or empty
};

struct Narrowing {
  std::vector<Constraint> constraints;
  bool any_repo = false; // a pin: the version may come from any repository
};

// Keyed by "name:arch"; std::less<> allows lookups by string_view.
using Narrowings = std::map<std::string, Narrowing, std::less<>>;

struct Node {
  std::uint32_t pkg = 0;
  int parent = -1; // the node whose dependency pulled it in, or -1 for a request
  Field field = Field::depends;
  std::string group; // the dependency of `parent` it satisfies
  std::vector<std::string> origins;
  bool expanded = false;
  bool base = false; // the base's installed package, unchanged
  std::string why;   // an upgrade of a base package: the constraints that moved it
};

// "node `from` has dependency `group` (field), satisfied by node `to`".
struct Edge {
  int from = 0;
  int to = 0;
  Field field = Field::depends;
  std::string group;
};

struct Option {
  std::uint32_t pkg = 0;
  const DebRelation* provides = nullptr; // set when `pkg` satisfies through its Provides
};

class Pass {
public:
  enum class Outcome { done, restart };

  Pass(const AptUniverse& u, const ResolveOptions& o, const std::vector<AptRequest>& requests,
       Narrowings& narrowings)
      : m_u(u), m_o(o), m_requests(requests), m_narrowings(narrowings), m_node_of(u.packages().size(), -1) {}

  Result<Outcome> run() {
    // apt marks every requested package first, then installs their dependencies in request order
    // (depth first), so alternatives already satisfied by a request stay satisfied by it.
    std::vector<int> roots;
    for (const AptRequest& r : m_requests) {
      LS_TRY_ASSIGN(int node, select_request(r));
      roots.push_back(node);
    }
    // Then the base's packages, as installed, except those a request or a constraint moves.
    LS_TRY(select_base(roots));
    for (int root : roots) {
      LS_TRY_ASSIGN(Outcome outcome, expand(root));
      if (outcome == Outcome::restart) {
        return outcome;
      }
    }
    LS_TRY_ASSIGN(Outcome outcome, check_base());
    if (outcome == Outcome::restart) {
      return outcome;
    }
    return check_conflicts();
  }

  std::vector<ResolvedPackage> result() const {
    std::vector<std::vector<std::string>> edge_reasons(m_nodes.size());
    for (const Edge& e : m_edges) {
      edge_reasons[e.to].push_back(fmt::format("{} ({}: {})", display(e.from), field_name(e.field), e.group));
    }
    std::vector<ResolvedPackage> out;
    out.reserve(m_nodes.size());
    for (std::size_t i = 0; i < m_nodes.size(); ++i) {
      ResolvedPackage r;
      const Node& n = m_nodes[i];
      r.package = &pkg_of(static_cast<int>(i));
      r.in_base = n.base || is_installed(*r.package);
      for (const std::string& origin : n.origins) {
        r.reasons.push_back("requested by " + origin);
      }
      auto& more = edge_reasons[i];
      std::sort(more.begin(), more.end());
      more.erase(std::unique(more.begin(), more.end()), more.end());
      r.reasons.insert(r.reasons.end(), more.begin(), more.end());
      if (!r.in_base) {
        if (std::int64_t old = installed_of(r.package->name, eff_arch(*r.package)); old >= 0) {
          r.replaces = &m_u.packages()[static_cast<std::uint32_t>(old)];
          std::string because = !n.origins.empty() ? "requested by " + n.origins.front()
                                : !more.empty()    ? "needed by " + more.front()
                                                   : "needed by " + n.why;
          r.reasons.insert(r.reasons.begin(),
                           fmt::format("{} base's {} {} -> {}, {}",
                                       r.package->version > r.replaces->version ? "upgrades" : "downgrades",
                                       display(*r.package), r.replaces->version.str(),
                                       r.package->version.str(), because));
        }
      }
      out.push_back(std::move(r));
    }
    std::sort(out.begin(), out.end(), [](const ResolvedPackage& a, const ResolvedPackage& b) {
      return std::tie(a.package->name, a.package->architecture) <
             std::tie(b.package->name, b.package->architecture);
    });
    return out;
  }

private:
  // ---- architectures ----

  std::string_view eff_arch(const AptPackage& p) const {
    return p.architecture == "all" ? std::string_view(m_o.native_arch) : std::string_view(p.architecture);
  }

  bool arch_enabled(std::string_view arch) const {
    return arch == m_o.native_arch ||
           std::find(m_o.foreign_arches.begin(), m_o.foreign_arches.end(), arch) != m_o.foreign_arches.end();
  }

  // dpkg's archsatisfied(): whether `p` can satisfy `r` written by a package of architecture `ctx`.
  bool arch_ok(const AptPackage& p, const DebRelation& r, std::string_view ctx, bool negative) const {
    if (r.arch_qualifier.empty()) {
      return p.multi_arch == "foreign" || eff_arch(p) == ctx;
    }
    if (r.arch_qualifier == "any") {
      return negative || p.multi_arch == "allowed";
    }
    if (r.arch_qualifier == "native") {
      return eff_arch(p) == m_o.native_arch;
    }
    return eff_arch(p) == r.arch_qualifier;
  }

  // A package may be chosen for a dependency of a package of architecture `ctx` when it has that
  // architecture or the native one (Multi-Arch: foreign and :any dependencies).
  bool selectable(const AptPackage& p, std::string_view ctx) const {
    std::string_view a = eff_arch(p);
    return (a == ctx || a == m_o.native_arch) && arch_enabled(a);
  }

  std::string key_of(const AptPackage& p) const { return p.name + ":" + std::string(eff_arch(p)); }

  std::string display(const AptPackage& p) const {
    return eff_arch(p) == m_o.native_arch ? p.name : p.name + ":" + std::string(eff_arch(p));
  }
  std::string display(int node) const { return display(pkg_of(node)); }
  std::string display_version(const AptPackage& p) const { return display(p) + " " + p.version.str(); }

  const AptPackage& pkg_of(int node) const { return m_u.packages()[m_nodes[node].pkg]; }

  // ---- the base image ----

  static bool is_installed(const AptPackage& p) { return p.repo == k_installed_repo; }

  // The base's installed package of (name, architecture), or -1. The universe lists a name's
  // installed package before its repositories' versions.
  std::int64_t installed_of(std::string_view name, std::string_view arch) const {
    for (std::uint32_t i : m_u.versions(name)) {
      const AptPackage& q = m_u.packages()[i];
      if (!is_installed(q)) {
        break;
      }
      if (eff_arch(q) == arch) {
        return i;
      }
    }
    return -1;
  }

  // Whether the base's own packages satisfy one of `group`'s alternatives (for a package of
  // architecture `ctx`): a dependency broken in the base already is not lockstep's to fix.
  bool installed_satisfies(const std::vector<DebRelation>& group, std::string_view ctx) const {
    return std::any_of(group.begin(), group.end(), [&](const DebRelation& r) {
      for (std::uint32_t i : m_u.versions(r.name)) {
        const AptPackage& q = m_u.packages()[i];
        if (is_installed(q) && arch_ok(q, r, ctx, false) && fits(q.version, r)) {
          return true;
        }
      }
      for (const AptUniverse::Provider& prov : m_u.providers(r.name)) {
        const AptPackage& q = m_u.packages()[prov.package];
        if (is_installed(q) && q.name != r.name && arch_ok(q, r, ctx, false) &&
            provide_fits(q.provides[prov.provides], r)) {
          return true;
        }
      }
      return false;
    });
  }

  // The constraints on `p`'s (name, architecture) that `p` fails, joined for a message.
  std::string failed_constraints(const AptPackage& p, bool with_chain) const {
    std::vector<std::string> parts;
    if (const Narrowing* n = narrowing(p)) {
      for (const Constraint& c : n->constraints) {
        if (!fits(p.version, c.relation)) {
          std::string part = c.from;
          if (with_chain && !c.chain.empty()) {
            part += "\n  chain: " + c.chain;
          }
          parts.push_back(std::move(part));
        }
      }
    }
    return fmt::format("{}", fmt::join(parts, with_chain ? "\n" : "; "));
  }

  // Selects the base's packages: each as installed, unless a request chose another version of it
  // (then it is replaced) or a constraint rules the installed version out (then it is upgraded to
  // the best candidate that fits, and that node becomes a root). A held package that must change
  // is refused.
  Result<void> select_base(std::vector<int>& roots) {
    std::vector<std::uint32_t> moving;
    for (std::uint32_t i : m_u.installed()) {
      const AptPackage& p = m_u.packages()[i];
      if (m_node_of[i] >= 0 || selected_sibling(p) >= 0) {
        continue;
      }
      if (narrowing_ok(p)) {
        const int node = select(i, -1, Field::depends, {});
        m_nodes[node].base = true;
        m_nodes[node].expanded = true; // its dependencies were the base's business
      } else {
        moving.push_back(i);
      }
    }
    for (std::uint32_t i : moving) {
      const AptPackage& p = m_u.packages()[i];
      if (m_u.held(i)) {
        return invalid_input(
            "the base image holds {} at {} (apt-mark hold), but\n  {}\nneeds another version; "
            "lockstep never changes a held package: change the request, or build on a base "
            "whose {} fits",
            display(p), p.version.str(), failed_constraints(p, true), p.name);
      }
      std::optional<std::uint32_t> best;
      for (std::uint32_t j : m_u.versions(p.name)) {
        const AptPackage& q = m_u.packages()[j];
        if (!is_installed(q) && eff_arch(q) == eff_arch(p) && candidate(q) &&
            (!best || (is_preferred(q) && !is_preferred(m_u.packages()[*best])))) {
          best = j;
        }
      }
      if (!best) {
        return invalid_input("{} needs a version of the base's {} other than {}, but {}",
                             failed_constraints(p, false), display(p), p.version.str(),
                             describe(DebRelation{p.name, {}, {}, {}, {}}, eff_arch(p)));
      }
      const int node = select(*best, -1, Field::depends, {});
      m_nodes[node].why = failed_constraints(p, false);
      roots.push_back(node);
    }
    return {};
  }

  // After the new packages are in: every base package whose Depends or Pre-Depends an upgrade
  // broke is upgraded too (a constraint, then a restart), or refused when it is held.
  Result<Outcome> check_base() {
    for (std::size_t n = 0; n < m_nodes.size(); ++n) {
      if (!m_nodes[n].base) {
        continue;
      }
      const AptPackage& p = pkg_of(static_cast<int>(n));
      for (Field field : {Field::pre_depends, Field::depends}) {
        for (const auto& group : field_of(p, field)) {
          const bool ok = std::any_of(group.begin(), group.end(), [&](const DebRelation& r) {
            return satisfier(r, eff_arch(p), false) >= 0;
          });
          if (ok || !installed_satisfies(group, eff_arch(p))) {
            continue;
          }
          const std::string what =
              fmt::format("the base's {} ({}: {})", display_version(p), field_name(field), group_str(group));
          if (m_u.held(m_nodes[n].pkg)) {
            return invalid_input("the base image holds {} at {} (apt-mark hold), and {} would no longer be "
                                 "satisfied by{}\nlockstep never changes a held package: change the request, "
                                 "or build on a base whose {} fits",
                                 display(p), p.version.str(), what, replacements(group), p.name);
          }
          m_narrowings[key_of(p)].constraints.push_back(
              Constraint{DebRelation{p.name, {}, VersionRelation::later, p.version, {}},
                         what + ", which the new packages no longer satisfy", ""});
          return Outcome::restart;
        }
      }
    }
    return Outcome::done;
  }

  // "\n  ls-lib 2.0-1: requested by packages.apt[0]" for each selected package named in `group`.
  std::string replacements(const std::vector<DebRelation>& group) const {
    std::string s;
    for (const DebRelation& r : group) {
      if (auto it = m_by_name.find(r.name); it != m_by_name.end()) {
        for (int node : it->second) {
          s += fmt::format("\n  {}: {}", display_version(pkg_of(node)), long_chain(node));
        }
      }
    }
    return s;
  }

  // ---- candidates ----

  const Narrowing* narrowing(const AptPackage& p) const {
    if (m_narrowings.empty()) {
      return nullptr;
    }
    auto it = m_narrowings.find(key_of(p));
    return it == m_narrowings.end() ? nullptr : &it->second;
  }

  bool narrowing_ok(const AptPackage& p) const {
    const Narrowing* n = narrowing(p);
    return n == nullptr || std::all_of(n->constraints.begin(), n->constraints.end(),
                                       [&](const Constraint& c) { return fits(p.version, c.relation); });
  }

  // The highest pin priority among the repositories with a version of `name` for architecture
  // `arch` (versions() lists the highest first); nullopt when none has one.
  std::optional<int> best_priority(std::string_view name, std::string_view arch) const {
    for (std::uint32_t i : m_u.versions(name)) {
      const AptPackage& p = m_u.packages()[i];
      if (!is_installed(p) && eff_arch(p) == arch) {
        return m_u.priority(p.repo);
      }
    }
    return std::nullopt;
  }

  // Whether `p`'s repository has the best priority for its name: apt only takes a version from
  // the sources of the highest pin priority that have the name (among equal ones, the highest
  // version wins).
  bool best_source(const AptPackage& p) const {
    return !is_installed(p) && m_u.priority(p.repo) == best_priority(p.name, eff_arch(p));
  }

  // Whether `p` is a candidate at all: its repository is of the best priority for its name (unless
  // pinned) and it satisfies the constraints learnt so far.
  // Over a base: its installed version is a candidate while the constraints allow it; another
  // version of a held package never is, nor a lower version than the installed one unless pinned.
  bool candidate(const AptPackage& p) const {
    if (is_installed(p)) {
      return narrowing_ok(p);
    }
    const Narrowing* n = narrowing(p);
    const bool pinned = n != nullptr && n->any_repo;
    if (!pinned && !best_source(p)) {
      return false;
    }
    if (std::int64_t i = installed_of(p.name, eff_arch(p)); i >= 0) {
      const auto installed = static_cast<std::uint32_t>(i);
      if (m_u.held(installed) || (!pinned && p.version < m_u.packages()[installed].version)) {
        return false;
      }
    }
    return narrowing_ok(p);
  }

  bool is_preferred(const AptPackage& p) const {
    auto it = m_o.preferred.find(p.name);
    return it != m_o.preferred.end() && it->second == p.version;
  }

  // Moves the versions the previous lock chose to the front (real packages stay before providers).
  void prefer_locked(std::vector<Option>& opts) const {
    if (m_o.preferred.empty()) {
      return;
    }
    std::stable_sort(opts.begin(), opts.end(), [&](const Option& a, const Option& b) {
      return std::make_tuple(a.provides != nullptr, !is_preferred(m_u.packages()[a.pkg])) <
             std::make_tuple(b.provides != nullptr, !is_preferred(m_u.packages()[b.pkg]));
    });
  }

  // Every package that could satisfy `r` for a package of architecture `ctx`, best first: the real
  // package (same architecture first, highest version first), then providers (Essential first, then
  // by Priority, then by name, highest version first). `stop_at_first` returns at most one.
  std::vector<Option> options(const DebRelation& r, std::string_view ctx, bool stop_at_first = false) const {
    std::vector<Option> out;
    // Native first (like apt's CompareProviders): for a foreign package that is a Multi-Arch:
    // foreign or allowed package; its own architecture only where the native one can't serve.
    const std::string_view arches[] = {m_o.native_arch, ctx};
    for (std::size_t a = 0; a < (ctx == m_o.native_arch ? 1U : 2U); ++a) {
      for (std::uint32_t i : m_u.versions(r.name)) {
        const AptPackage& p = m_u.packages()[i];
        if (eff_arch(p) != arches[a] || !selectable(p, ctx) || !arch_ok(p, r, ctx, false) ||
            !fits(p.version, r) || !candidate(p)) {
          continue;
        }
        out.push_back(Option{i, nullptr});
        if (stop_at_first) {
          return out;
        }
      }
    }
    std::vector<Option> provided;
    for (const AptUniverse::Provider& prov : m_u.providers(r.name)) {
      const AptPackage& p = m_u.packages()[prov.package];
      const DebRelation& what = p.provides[prov.provides];
      if (p.name == r.name || !selectable(p, ctx) || !arch_ok(p, r, ctx, false) || !provide_fits(what, r) ||
          !candidate(p)) {
        continue;
      }
      provided.push_back(Option{prov.package, &what});
      if (stop_at_first) {
        out.push_back(provided.back());
        return out;
      }
    }
    std::stable_sort(provided.begin(), provided.end(), [&](const Option& a, const Option& b) {
      const AptPackage& x = m_u.packages()[a.pkg];
      const AptPackage& y = m_u.packages()[b.pkg];
      return std::make_tuple(eff_arch(x) != m_o.native_arch, !x.essential, priority_rank(x.priority)) <
             std::make_tuple(eff_arch(y) != m_o.native_arch, !y.essential, priority_rank(y.priority));
    });
    out.insert(out.end(), provided.begin(), provided.end());
    prefer_locked(out);
    return out;
  }

  // ---- the selection ----

  // The first selected node that satisfies `r` (written by a package of architecture `ctx`), or -1.
  // `except` names a package whose own nodes don't count (a package never conflicts with itself).
  int satisfier(const DebRelation& r, std::string_view ctx, bool negative,
                std::string_view except = {}) const {
    if (auto it = m_by_name.find(r.name); it != m_by_name.end()) {
      for (int node : it->second) {
        const AptPackage& p = pkg_of(node);
        if (p.name != except && arch_ok(p, r, ctx, negative) && fits(p.version, r)) {
          return node;
        }
      }
    }
    if (auto it = m_provided.find(r.name); it != m_provided.end()) {
      for (auto [node, provides] : it->second) {
        const AptPackage& p = pkg_of(node);
        if (p.name != except && arch_ok(p, r, ctx, negative) && provide_fits(*provides, r)) {
          return node;
        }
      }
    }
    return -1;
  }

  int select(std::uint32_t pkg, int parent, Field field, std::string group) {
    const int node = static_cast<int>(m_nodes.size());
    m_nodes.push_back(Node{pkg, parent, field, std::move(group), {}, false, false, {}});
    m_node_of[pkg] = node;
    const AptPackage& p = m_u.packages()[pkg];
    m_by_name[p.name].push_back(node);
    for (const DebRelation& prov : p.provides) {
      m_provided[prov.name].emplace_back(node, &prov);
    }
    for (const DebRelationField* f : {&p.conflicts, &p.breaks}) {
      for (const auto& g : *f) {
        for (const DebRelation& r : g) {
          m_negative[r.name].emplace_back(node, &r);
        }
      }
    }
    return node;
  }

  // The node of another version of `p`'s (name, architecture), or -1.
  int selected_sibling(const AptPackage& p) const {
    auto it = m_by_name.find(p.name);
    if (it == m_by_name.end()) {
      return -1;
    }
    for (int node : it->second) {
      if (eff_arch(pkg_of(node)) == eff_arch(p)) {
        return node;
      }
    }
    return -1;
  }

  // Whether installing `p` next to the selection would break a Conflicts or Breaks (either way), or
  // put two architectures of a package that is not Multi-Arch: same side by side.
  bool clashes(const AptPackage& p) const {
    if (auto it = m_by_name.find(p.name); it != m_by_name.end()) {
      for (int node : it->second) {
        const AptPackage& q = pkg_of(node);
        if (eff_arch(q) != eff_arch(p) && (q.multi_arch != "same" || p.multi_arch != "same")) {
          return true;
        }
      }
    }
    for (const DebRelationField* f : {&p.conflicts, &p.breaks}) {
      for (const auto& g : *f) {
        for (const DebRelation& r : g) {
          if (satisfier(r, eff_arch(p), true, p.name) >= 0) {
            return true;
          }
        }
      }
    }
    auto hit = [&](std::string_view name, const DebRelation* provided) {
      auto it = m_negative.find(name);
      if (it == m_negative.end()) {
        return false;
      }
      for (auto [node, r] : it->second) {
        const AptPackage& q = pkg_of(node);
        if (q.name != p.name && arch_ok(p, *r, eff_arch(q), true) &&
            (provided == nullptr ? fits(p.version, *r) : provide_fits(*provided, *r))) {
          return true;
        }
      }
      return false;
    };
    if (hit(p.name, nullptr)) {
      return true;
    }
    return std::any_of(p.provides.begin(), p.provides.end(),
                       [&](const DebRelation& prov) { return hit(prov.name, &prov); });
  }

  // apt's IsInstallOkDependenciesSatisfiableByCandidates: a package one of whose (Pre-)Depends no
  // candidate can satisfy is not chosen for an alternative while another alternative works.
  bool installable(const AptPackage& p) const {
    for (const DebRelationField* f : {&p.pre_depends, &p.depends}) {
      for (const auto& g : *f) {
        bool ok = std::any_of(g.begin(), g.end(), [&](const DebRelation& r) {
          return satisfier(r, eff_arch(p), false) >= 0 || !options(r, eff_arch(p), true).empty();
        });
        if (!ok) {
          return false;
        }
      }
    }
    return true;
  }

  // ---- requests ----

  Result<int> select_request(const AptRequest& req) {
    const std::string ctx = req.arch.value_or(m_o.native_arch);
    const std::string asked = asked_text(req);
    DebRelation r;
    r.name = req.name;
    r.arch_qualifier = req.arch.value_or("");
    if (req.arch && *req.arch == m_o.native_arch) {
      r.arch_qualifier.clear();
    }
    if (req.pin) {
      r.relation = VersionRelation::equal;
      r.version = *req.pin;
    }
    std::vector<Option> opts;
    for (std::uint32_t i : m_u.versions(req.name)) {
      const AptPackage& p = m_u.packages()[i];
      if (eff_arch(p) == ctx && arch_enabled(ctx) && candidate(p)) {
        opts.push_back(Option{i, nullptr});
      }
    }
    // apt's candidate: the highest version, the installed one when it is that high.
    std::stable_sort(opts.begin(), opts.end(), [&](const Option& a, const Option& b) {
      const AptPackage& x = m_u.packages()[a.pkg];
      const AptPackage& y = m_u.packages()[b.pkg];
      if (x.version != y.version) {
        return x.version > y.version;
      }
      return is_installed(x) && !is_installed(y);
    });
    LS_TRY(check_held_request(req, ctx, asked));
    prefer_locked(opts);
    if (opts.empty()) {
      if (!m_u.versions(req.name).empty()) {
        return invalid_input("{} asks for {}, but {}", req.origin, asked, describe(r, ctx));
      }
      // A virtual name: fine when a single package provides it.
      std::set<std::string> names;
      DebRelation unversioned = r;
      unversioned.relation.reset();
      unversioned.version.reset();
      for (const Option& o : options(unversioned, ctx)) {
        names.insert(m_u.packages()[o.pkg].name);
        if (opts.empty()) {
          opts.push_back(o);
        }
      }
      if (names.size() > 1) {
        return invalid_input("{} asks for {}, a virtual package provided by {}; ask for one of them",
                             req.origin, req.name, fmt::join(names, ", "));
      }
      if ((req.pin || req.version_glob) && !names.empty()) {
        return invalid_input("{} asks for {}, but {} is a virtual package (provided by {}); pin that instead",
                             req.origin, asked, req.name, *names.begin());
      }
      if (opts.empty()) {
        return invalid_input("{} asks for {}, which none of the repositories has{}", req.origin, asked,
                             suggestions(req.name));
      }
    }
    const std::uint32_t chosen = opts.front().pkg;
    int node = m_node_of[chosen];
    if (node < 0) {
      node = select(chosen, -1, Field::depends, {});
    }
    m_nodes[node].origins.push_back(req.origin);
    return node;
  }

  // apt would move a held package a request names to its newer candidate; lockstep refuses instead
  // (a pin to the held version is fine).
  Result<void> check_held_request(const AptRequest& req, std::string_view ctx,
                                  const std::string& asked) const {
    const std::int64_t i = installed_of(req.name, ctx);
    if (i < 0 || !m_u.held(static_cast<std::uint32_t>(i)) || req.pin) {
      return {};
    }
    const AptPackage& held = m_u.packages()[static_cast<std::uint32_t>(i)];
    const std::optional<int> best = best_priority(req.name, ctx);
    for (std::uint32_t j : m_u.versions(req.name)) {
      const AptPackage& q = m_u.packages()[j];
      if (!is_installed(q) && m_u.priority(q.repo) == best && eff_arch(q) == ctx &&
          q.version > held.version) {
        return invalid_input(
            "{} asks for {}, which the base image holds at {} (apt-mark hold); apt would move "
            "it to {}, and lockstep never changes a held package: ask for {}={} or drop "
            "the request",
            req.origin, asked, held.version.str(), q.version.str(), req.name, held.version.str());
      }
    }
    return {};
  }

  std::string suggestions(std::string_view name) const {
    const std::size_t limit = std::max<std::size_t>(1, name.size() / 3);
    std::vector<std::pair<std::size_t, std::string_view>> close;
    const auto& all = m_u.packages();
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (i > 0 && all[i].name == all[i - 1].name) {
        continue;
      }
      std::string_view other = all[i].name;
      if ((other.size() > name.size() ? other.size() - name.size() : name.size() - other.size()) > limit) {
        continue;
      }
      if (std::size_t d = envspec::edit_distance(name, other); d <= limit) {
        close.emplace_back(d, other);
      }
    }
    std::sort(close.begin(), close.end());
    std::vector<std::string> names;
    for (std::size_t i = 0; i < close.size() && i < 3; ++i) {
      names.emplace_back(close[i].second);
    }
    return names.empty() ? std::string()
                         : " (did you mean " + fmt::format("{}", fmt::join(names, ", ")) + "?)";
  }

  // ---- dependencies ----

  // Installs the dependencies of `root` depth first, like apt's MarkInstall.
  Result<Outcome> expand(int root) {
    struct Frame {
      int node;
      int field;
      std::size_t group;
    };
    if (m_nodes[root].expanded) {
      return Outcome::done;
    }
    m_nodes[root].expanded = true;
    std::vector<Frame> stack{{root, 0, 0}};
    const int fields = m_o.with_recommends ? 3 : 2;
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.field >= fields) {
        stack.pop_back();
        continue;
      }
      const Field field = static_cast<Field>(f.field);
      const DebRelationField& groups = field_of(pkg_of(f.node), field);
      if (f.group >= groups.size()) {
        ++f.field;
        f.group = 0;
        continue;
      }
      const int node = f.node;
      const auto& group = groups[f.group++];
      LS_TRY_ASSIGN(int chosen, satisfy(node, field, group));
      if (chosen == k_restart) {
        return Outcome::restart;
      }
      if (chosen >= 0 && !m_nodes[chosen].expanded) {
        m_nodes[chosen].expanded = true;
        stack.push_back(Frame{chosen, 0, 0});
      }
    }
    return Outcome::done;
  }

  static constexpr int k_restart = -2;
  static constexpr int k_skipped = -1;

  // Satisfies one dependency group of `node`: the node that satisfies it, k_skipped (an unsatisfiable
  // Recommends) or k_restart (a constraint was learnt).
  Result<int> satisfy(int node, Field field, const std::vector<DebRelation>& group) {
    const AptPackage& p = pkg_of(node);
    const std::string_view ctx = eff_arch(p);
    for (const DebRelation& r : group) {
      if (int s = satisfier(r, ctx, false); s >= 0) {
        m_edges.push_back(Edge{node, s, field, group_str(group)});
        return s;
      }
    }
    std::optional<std::pair<std::string, Constraint>> narrow;
    std::optional<std::uint32_t> fallback;
    for (const DebRelation& r : group) {
      for (const Option& o : options(r, ctx)) {
        const AptPackage& q = m_u.packages()[o.pkg];
        if (m_node_of[o.pkg] >= 0) {
          continue;
        }
        if (selected_sibling(q) >= 0) {
          // Another version is selected: this one needs a constraint that rules that one out.
          if (!narrow && field != Field::recommends) {
            DebRelation c = r;
            if (o.provides != nullptr) {
              c = DebRelation{q.name, {}, VersionRelation::equal, q.version, {}};
            }
            c.arch_qualifier.clear();
            narrow.emplace(key_of(q), Constraint{std::move(c),
                                                 fmt::format("{} ({}: {})", display_version(p),
                                                             field_name(field), group_str(group)),
                                                 short_chain(node)});
          }
          continue;
        }
        if (clashes(q) || !installable(q)) {
          if (!fallback) {
            fallback = o.pkg;
          }
          continue;
        }
        return take(node, field, group, o.pkg);
      }
    }
    if (narrow) {
      m_narrowings[narrow->first].constraints.push_back(std::move(narrow->second));
      return k_restart;
    }
    if (field == Field::recommends) {
      return k_skipped; // apt drops a Recommends it can't satisfy
    }
    if (fallback) {
      return take(node, field, group, *fallback); // its own failure says more
    }
    std::vector<std::string> parts;
    std::set<std::string> seen;
    for (const DebRelation& r : group) {
      if (seen.insert(r.name + ":" + r.arch_qualifier).second) {
        parts.push_back(describe(r, ctx));
      }
    }
    return invalid_input("{} {} {}, but {}\n  chain: {}", display_version(p), field_verb(field),
                         group_str(group), fmt::format("{}", fmt::join(parts, "; ")), short_chain(node));
  }

  int take(int node, Field field, const std::vector<DebRelation>& group, std::uint32_t pkg) {
    const int chosen = select(pkg, node, field, group_str(group));
    m_edges.push_back(Edge{node, chosen, field, group_str(group)});
    return chosen;
  }

  // What the repositories offer for `r` (for errors): "the repositories have ls-lib 1.0-1, 2.0-1".
  std::string describe(const DebRelation& r, std::string_view ctx) const {
    std::vector<std::string> versions;
    std::vector<std::string> hidden;
    std::set<std::string> other_arches;
    std::vector<const Constraint*> blocking;
    bool any_allowed = false;
    for (std::uint32_t i : m_u.versions(r.name)) {
      const AptPackage& p = m_u.packages()[i];
      if (!selectable(p, ctx) || (eff_arch(p) != ctx && !arch_ok(p, r, ctx, false))) {
        other_arches.insert(p.architecture);
        continue;
      }
      any_allowed = any_allowed || p.multi_arch == "allowed";
      const Narrowing* n = narrowing(p);
      if ((n == nullptr || !n->any_repo) && !best_source(p)) {
        if (fits(p.version, r)) {
          hidden.push_back(p.version.str());
        }
        continue;
      }
      versions.push_back(p.version.str());
      if (n != nullptr && fits(p.version, r)) {
        for (const Constraint& c : n->constraints) {
          if (!fits(p.version, c.relation) &&
              std::find(blocking.begin(), blocking.end(), &c) == blocking.end()) {
            blocking.push_back(&c);
          }
        }
      }
    }
    std::vector<std::string> providers;
    for (const AptUniverse::Provider& prov : m_u.providers(r.name)) {
      const AptPackage& p = m_u.packages()[prov.package];
      if (p.name == r.name || !selectable(p, ctx) || !arch_ok(p, r, ctx, false) || !candidate(p)) {
        continue;
      }
      const DebRelation& what = p.provides[prov.provides];
      providers.push_back(display_version(p) +
                          (what.version ? " (= " + what.version->str() + ")" : std::string(" (no version)")));
    }
    std::string s;
    if (!versions.empty()) {
      std::reverse(versions.begin(), versions.end()); // lowest first
      versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
      s = "the repositories have " + r.name + " " + fmt::format("{}", fmt::join(versions, ", "));
      if (r.arch_qualifier == "any" && !any_allowed) {
        s += " (not Multi-Arch: allowed, so " + r.name + ":any can't use it)";
      }
      for (const Constraint* c : blocking) {
        s += fmt::format(" and {} must also satisfy {}, for {}", r.name, c->relation.str(), c->from);
      }
    } else if (!other_arches.empty() && providers.empty()) {
      s = fmt::format("the repositories have {} only for {}", r.name, fmt::join(other_arches, ", "));
    } else if (providers.empty()) {
      s = "the repositories have no " + r.name;
    }
    if (!providers.empty()) {
      std::string list;
      for (std::size_t i = 0; i < providers.size() && i < k_max_listed; ++i) {
        list += (i > 0 ? ", " : "") + providers[i];
      }
      if (providers.size() > k_max_listed) {
        list += fmt::format(" and {} more", providers.size() - k_max_listed);
      }
      s += (s.empty() ? "" : ", ") + fmt::format("{} is provided by {}", r.name, list);
      if (r.relation) {
        s += " (a versioned dependency needs a matching versioned Provides)";
      }
    }
    if (std::int64_t i = installed_of(r.name, ctx); i >= 0) {
      const AptPackage& inst = m_u.packages()[static_cast<std::uint32_t>(i)];
      s += m_u.held(static_cast<std::uint32_t>(i))
               ? fmt::format(" (the base image holds {} at {} (apt-mark hold), and lockstep never changes a "
                             "held package)",
                             r.name, inst.version.str())
               : fmt::format(" (the base image has {} {})", r.name, inst.version.str());
    }
    if (!hidden.empty()) {
      std::reverse(hidden.begin(), hidden.end());
      hidden.erase(std::unique(hidden.begin(), hidden.end()), hidden.end());
      s += fmt::format(" (a lower-priority repository has {} {}; pin {}={} to use it)", r.name,
                       fmt::format("{}", fmt::join(hidden, ", ")), r.name, hidden.back());
    }
    return s;
  }

  // ---- chains ----

  std::vector<int> path_to(int node) const {
    std::vector<int> path;
    for (int n = node; n >= 0; n = m_nodes[n].parent) {
      path.push_back(n);
    }
    std::reverse(path.begin(), path.end());
    return path;
  }

  // What put a root node there: "requested by packages.apt[0]", "installed in the base image" or
  // "upgraded because WHY".
  std::string root_text(int node) const {
    const Node& n = m_nodes[node];
    if (!n.origins.empty()) {
      return "requested by " + n.origins.front();
    }
    if (n.base) {
      return "installed in the base image";
    }
    return n.why.empty() ? std::string("?") : "upgraded from the base's version for " + n.why;
  }

  // "packages.apt[3] -> ls-app -> ls-needs-new"
  std::string short_chain(int node) const {
    std::vector<int> path = path_to(node);
    const Node& root = m_nodes[path.front()];
    std::string s = !root.origins.empty() ? root.origins.front()
                    : root.base           ? std::string("the base image")
                                          : std::string("an upgrade of the base");
    for (int n : path) {
      s += " -> " + display(n);
    }
    return s;
  }

  // "requested by packages.apt[0] -> ls-app (Depends: ls-lib (>= 1.0))"
  std::string long_chain(int node) const {
    std::vector<int> path = path_to(node);
    std::string s = root_text(path.front());
    for (std::size_t i = 1; i < path.size(); ++i) {
      const Node& n = m_nodes[path[i]];
      s += fmt::format(" -> {} ({}: {})", display(n.parent), field_name(n.field), n.group);
    }
    return s;
  }

  // ---- the final check ----

  // When `a` conflicts with the base's unchanged, unheld package `b` and a newer candidate of `b`
  // exists, `b` must move (apt upgrades it): a constraint, then a restart.
  bool move_base_package(int b, const std::string& because) {
    if (!m_nodes[b].base || m_u.held(m_nodes[b].pkg)) {
      return false;
    }
    const AptPackage& p = pkg_of(b);
    const bool newer =
        std::any_of(m_u.versions(p.name).begin(), m_u.versions(p.name).end(), [&](std::uint32_t j) {
          const AptPackage& q = m_u.packages()[j];
          return !is_installed(q) && eff_arch(q) == eff_arch(p) && q.version > p.version && candidate(q);
        });
    if (!newer) {
      return false;
    }
    m_narrowings[key_of(p)].constraints.push_back(
        Constraint{DebRelation{p.name, {}, VersionRelation::later, p.version, {}}, because, ""});
    return true;
  }

  Result<Outcome> check_conflicts() {
    std::vector<int> nodes(m_nodes.size());
    std::iota(nodes.begin(), nodes.end(), 0);
    std::sort(nodes.begin(), nodes.end(), [&](int a, int b) {
      return std::tie(pkg_of(a).name, pkg_of(a).architecture) <
             std::tie(pkg_of(b).name, pkg_of(b).architecture);
    });
    auto both = [&](int a, int b) {
      return fmt::format("\n  {}: {}\n  {}: {}", display_version(pkg_of(a)), long_chain(a),
                         display_version(pkg_of(b)), long_chain(b));
    };
    for (int a : nodes) {
      const AptPackage& p = pkg_of(a);
      for (int b : m_by_name.at(p.name)) {
        const AptPackage& q = pkg_of(b);
        if (b != a && !(m_nodes[a].base && m_nodes[b].base) &&
            (p.multi_arch != "same" || q.multi_arch != "same")) {
          return invalid_input("{} and {} can't be installed together ({} is not Multi-Arch: same):{}",
                               display(a), display(b), p.name, both(a, b));
        }
      }
      for (auto [f, verb] : {std::pair{&p.conflicts, "conflicts with"}, std::pair{&p.breaks, "breaks"}}) {
        for (const auto& g : *f) {
          for (const DebRelation& r : g) {
            int b = satisfier(r, eff_arch(p), true, p.name);
            if (b < 0 || (m_nodes[a].base && m_nodes[b].base)) {
              continue; // the base's own conflicts are the base's business
            }
            std::string what = r.relation ? r.str() : r.str() + " (any version)";
            std::string via = pkg_of(b).name == r.name ? "" : ", which " + display(b) + " provides";
            const std::string because = fmt::format("{} ({} {})", display_version(p), verb, what);
            if (move_base_package(b, because) || move_base_package(a, because)) {
              return Outcome::restart;
            }
            std::string held;
            for (int x : {a, b}) {
              if (m_nodes[x].base && m_u.held(m_nodes[x].pkg)) {
                held +=
                    fmt::format("; the base image holds {} at {} (apt-mark hold), and lockstep never changes "
                                "a held package",
                                display(x), pkg_of(x).version.str());
              }
            }
            return invalid_input("{} {} {}{}{}:{}", display(a), verb, what, via, held, both(a, b));
          }
        }
      }
    }
    return Outcome::done;
  }

  const AptUniverse& m_u;
  const ResolveOptions& m_o;
  const std::vector<AptRequest>& m_requests;
  Narrowings& m_narrowings;
  std::vector<int> m_node_of; // by package index; -1 when not selected
  std::vector<Node> m_nodes;  // in selection order
  std::vector<Edge> m_edges;
  // Keys point into the universe's packages.
  std::unordered_map<std::string_view, std::vector<int>> m_by_name;
  std::unordered_map<std::string_view, std::vector<std::pair<int, const DebRelation*>>> m_provided;
  std::unordered_map<std::string_view, std::vector<std::pair<int, const DebRelation*>>> m_negative;
};

// The version a glob request stands for: the previous lock's version when it still matches, else
// the highest matching version of the highest-priority repository that has one (the universe lists
// a name's versions by repository, then highest first). nullopt when no repository has the name for
// the request's architecture: the pass then explains the request like any other.
Result<std::optional<DebianVersion>> glob_version(const AptUniverse& u, const ResolveOptions& o,
                                                  const AptRequest& r) {
  const std::string_view ctx = r.arch ? std::string_view(*r.arch) : std::string_view(o.native_arch);
  const auto preferred = o.preferred.find(r.name);
  std::vector<DebianVersion> all;
  std::optional<DebianVersion> best;
  for (std::uint32_t i : u.versions(r.name)) {
    const AptPackage& p = u.packages()[i];
    if ((p.architecture == "all" ? std::string_view(o.native_arch) : std::string_view(p.architecture)) !=
        ctx) {
      continue;
    }
    all.push_back(p.version);
    if (!version_glob_matches(*r.version_glob, p.version.str())) {
      continue;
    }
    if (preferred != o.preferred.end() && preferred->second == p.version) {
      return std::optional<DebianVersion>(p.version);
    }
    if (!best) {
      best = p.version;
    }
  }
  if (best || all.empty()) {
    return best;
  }
  std::sort(all.begin(), all.end(), std::greater<>());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  std::vector<std::string> listed;
  for (std::size_t i = 0; i < all.size() && i < k_max_glob_listed; ++i) {
    listed.push_back(all[i].str());
  }
  const std::string more =
      all.size() > k_max_glob_listed ? fmt::format(" and {} older", all.size() - k_max_glob_listed) : "";
  return invalid_input("{} asks for {}, but no version of {} matches '{}'; the repositories have {} {}{}",
                       r.origin, asked_text(r), r.name, *r.version_glob, r.name,
                       fmt::format("{}", fmt::join(listed, ", ")), more);
}

// The base set: every name whose best native candidate is Essential (or Priority: required).
std::vector<AptRequest> base_requests(const AptUniverse& u, const ResolveOptions& o) {
  std::vector<AptRequest> out;
  if (!o.with_essential && !o.with_required) {
    return out;
  }
  const auto& all = u.packages();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i > 0 && all[i].name == all[i - 1].name) {
      continue;
    }
    for (std::uint32_t j : u.versions(all[i].name)) {
      const AptPackage& p = all[j];
      if (p.architecture != o.native_arch && p.architecture != "all") {
        continue;
      }
      if (o.with_essential && p.essential) {
        out.push_back(AptRequest{p.name, std::nullopt, std::nullopt, "base (Essential)"});
      } else if (o.with_required && p.priority == "required") {
        out.push_back(AptRequest{p.name, std::nullopt, std::nullopt, "base (required)"});
      }
      break; // only the best candidate counts
    }
  }
  return out;
}

} // namespace

bool version_glob_matches(std::string_view glob, std::string_view version) {
  // Greedy, going back to the last '*' on a mismatch: each '*' only ever extends, so this is
  // O(glob x version) at worst (both are short and bounded).
  std::size_t g = 0;
  std::size_t v = 0;
  std::size_t star = std::string_view::npos;
  std::size_t resume = 0;
  while (v < version.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star = g++;
      resume = v;
    } else if (g < glob.size() && glob[g] == version[v]) {
      ++g;
      ++v;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      v = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') {
    ++g;
  }
  return g == glob.size();
}

Result<AptRequest> make_apt_request(std::string name, std::string_view arch, std::string_view version,
                                    std::string origin) {
  AptRequest r;
  r.name = std::move(name);
  r.origin = std::move(origin);
  if (!arch.empty()) {
    r.arch = std::string(arch);
  }
  if (version.find('*') != std::string_view::npos) {
    const bool valid_chars = std::all_of(version.begin(), version.end(), [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
             std::string_view(".+~-:*").find(c) != std::string_view::npos;
    });
    if (version.size() > k_max_glob_size || !valid_chars) {
      return invalid_input("{} asks for {}={}: a version glob is at most {} characters of a Debian version "
                           "(letters, digits and . + ~ - :) and '*'",
                           r.origin, r.name, version, k_max_glob_size);
    }
    r.version_glob = std::string(version);
  } else if (!version.empty()) {
    auto v = DebianVersion::parse(version);
    if (!v) {
      return invalid_input("{} asks for {}={}: {}", r.origin, r.name, version, v.error().message);
    }
    r.pin = std::move(*v);
  }
  return r;
}

Result<std::vector<ResolvedPackage>> resolve(const AptUniverse& universe, const ResolveOptions& options) {
  std::vector<AptRequest> requests = base_requests(universe, options);
  Narrowings narrowings;
  for (const AptRequest& r : options.requests) {
    if (!valid_debian_package_name(r.name)) {
      return invalid_input("{} asks for '{}', which is not a valid package name", r.origin, r.name);
    }
    if (r.arch && *r.arch != options.native_arch &&
        std::find(options.foreign_arches.begin(), options.foreign_arches.end(), *r.arch) ==
            options.foreign_arches.end()) {
      return invalid_input("{} asks for {}:{}, but {} is neither the native architecture ({}) nor a foreign "
                           "architecture of the image",
                           r.origin, r.name, *r.arch, *r.arch, options.native_arch);
    }
    AptRequest req = r;
    if (req.version_glob) {
      if (req.pin) {
        return invalid_input("{} asks for {} with both a version and a version glob", req.origin, req.name);
      }
      LS_TRY_ASSIGN(req.pin, glob_version(universe, options, req));
    }
    if (req.pin) {
      Narrowing& n = narrowings[req.name + ":" + req.arch.value_or(options.native_arch)];
      n.any_repo = true;
      n.constraints.push_back(Constraint{DebRelation{req.name, {}, VersionRelation::equal, *req.pin, {}},
                                         fmt::format("{} ({})", req.origin, asked_text(req))});
    }
    requests.push_back(std::move(req));
  }
  for (int attempt = 0;; ++attempt) {
    Pass pass(universe, options, requests, narrowings);
    LS_TRY_ASSIGN(Pass::Outcome outcome, pass.run());
    if (outcome == Pass::Outcome::done) {
      return pass.result();
    }
    if (attempt == k_max_restarts) {
      return invalid_input("the apt dependencies could not be resolved after {} attempts to change versions; "
                           "pin the packages whose versions matter (name=version)",
                           k_max_restarts);
    }
  }
}

} // namespace lockstep::builder
