// A conda solve as a PubGrub provider (see solve.hpp and docs/conda-solver.md).
#include "support/conda/solve.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>

namespace lockstep::conda {

namespace {

using pubgrub::PackageId;
using pubgrub::VersionSet;

// The root of the solve: a package whose one version's dependencies are the request.
constexpr PackageId k_root = 0;

// The most versions an explanation lists for one package before it says how many it leaves out.
constexpr std::size_t k_max_listed = 8;

std::string record_text(const IndexRecord& r) {
  return fmt::format("{} {} {}", r.record->name, r.record->version, r.record->build);
}

std::size_t feature_count(const IndexRecord& r) {
  return r.record->track_features.size();
}

// Whether `record` (from channel `channel`) satisfies `spec`.
bool spec_matches(const MatchSpec& spec, const IndexRecord& record, std::string_view channel) {
  const Record& r = *record.record;
  std::string features;
  if (spec.track_features() || spec.features()) {
    for (const auto& f : r.track_features) {
      features += features.empty() ? "" : " ";
      features += f;
    }
  }
  RecordFields fields;
  fields.name = r.name;
  fields.version = &record.version;
  fields.build = r.build;
  fields.build_number = r.build_number;
  fields.channel = channel;
  fields.subdir = r.subdir;
  fields.md5 = r.md5;
  fields.sha256 = r.sha256;
  fields.fn = r.filename;
  fields.license = r.license;
  fields.track_features = features;
  return spec.matches(fields);
}

// One package name of the solve (id 0 is the root).
struct Package {
  std::string name;
  const IndexPackage* index = nullptr;
  // The records that may be chosen, least preferred first (so the best is the highest index).
  std::vector<const IndexRecord*> candidates;
  bool ordered = false;
  std::optional<std::size_t> locked; // the previous lock's record among the candidates
  std::uint64_t depth = 0;           // from the request
  std::uint64_t request_order = 0xffff;
  // The channels a `channel::name` request restricts the name to (empty: not restricted).
  std::vector<bool> channels;
  bool restricted = false;
};

// A spec of a record's depends or constrains, parsed once per text.
struct ParsedSpec {
  std::optional<MatchSpec> spec;
  std::string error; // why it can't be used
};

class CondaProvider final : public pubgrub::Provider {
public:
  CondaProvider(const PackageIndex& index, const std::vector<MatchSpec>& request, const SolveOptions& options)
      : m_index(index), m_request(request), m_options(options) {
    m_packages.push_back(Package{"the request", nullptr, {}, true, std::nullopt, 0, 0, {}, false});
  }

  Result<void> start();

  Result<std::size_t> version_count(PackageId p) override {
    if (p == k_root) {
      return 1;
    }
    return ordered(p).candidates.size();
  }

  Result<std::optional<std::size_t>> choose(PackageId p, const VersionSet& allowed) override {
    if (p != k_root) {
      const Package& pkg = ordered(p);
      if (pkg.locked && allowed.has(*pkg.locked)) {
        return std::optional<std::size_t>(*pkg.locked);
      }
    }
    return allowed.highest();
  }

  Result<pubgrub::Dependencies> dependencies(PackageId p, std::size_t v) override;

  pubgrub::Priority priority(PackageId p, const VersionSet& allowed) override {
    // Pinned first, then by depth from the request, then the request's order, then by name: the
    // requested packages get their best records before what they need is decided.
    const std::uint64_t pinned = allowed.count() == 1 ? 0 : 1;
    const Package& pkg = m_packages[p];
    const std::uint64_t depth = std::min<std::uint64_t>(pkg.depth, 0xfffff);
    return {(pinned << 40) | (depth << 20) | std::min<std::uint64_t>(pkg.request_order, 0xfffff),
            std::string_view(pkg.name)};
  }

  std::string describe(PackageId p, const VersionSet& versions) override;

  std::string no_versions(PackageId p, const VersionSet& versions) override {
    return fmt::format("nothing provides {}", describe(p, versions));
  }

  /// The solution's records, dependencies first, with their reasons.
  Result<std::vector<SolvedRecord>> records(const pubgrub::Outcome& outcome);

  /// The request's index of a root dependency's text (pubgrub::Outcome::root_causes).
  [[nodiscard]] std::optional<std::size_t> request_of(const std::string& text) const {
    auto it = m_root_text.find(text);
    return it == m_root_text.end() ? std::nullopt : std::optional<std::size_t>(it->second);
  }

private:
  PackageId package_id(std::string_view name, std::uint64_t depth);
  // The package with its candidates listed (not yet ordered).
  Package& visible(PackageId p);
  // The package with its candidates in preference order.
  Package& ordered(PackageId p);
  void order_candidates(Package& pkg);
  void break_ties(Package& pkg, std::size_t begin, std::size_t end);
  const ParsedSpec& parse_dependency(const std::string& text);
  // The candidates of `q` that `spec` accepts.
  VersionSet matching(PackageId q, const MatchSpec& spec);
  // Why no candidate of `q` fits `spec`, for the dependency's sentence.
  std::string why_none(PackageId q);
  Result<pubgrub::Dependencies> root_dependencies();
  std::string_view channel_name(const IndexRecord& r) const {
    return r.is_virtual() ? std::string_view() : std::string_view(m_index.channels()[r.channel]);
  }
  // A dependency of `p` (depth `depth`) on the spec `text`; constrains when `constraint`.
  void add_spec(const std::string& who, const std::string& text, const MatchSpec& spec, bool constraint,
                std::uint64_t depth, std::vector<pubgrub::Dependency>& out);

  const PackageIndex& m_index;
  const std::vector<MatchSpec>& m_request;
  const SolveOptions& m_options;
  std::deque<Package> m_packages;
  std::unordered_map<std::string, PackageId> m_ids;
  std::unordered_map<std::string, ParsedSpec> m_specs;
  std::map<std::string, std::size_t> m_root_text; // root dependency text -> request index
  std::map<std::pair<PackageId, std::size_t>, pubgrub::Dependencies> m_deps;
};

Result<void> CondaProvider::start() {
  for (std::size_t i = 0; i < m_request.size(); ++i) {
    const MatchSpec& spec = m_request[i];
    if (spec.name().kind() != StringMatcher::Kind::exact) {
      return invalid_input("the request's spec '{}' names no single package (a conda request names one)",
                           space_form(spec));
    }
    const PackageId p = package_id(spec.name().str(), 1);
    Package& pkg = m_packages[p];
    pkg.request_order = std::min<std::uint64_t>(pkg.request_order, i);
    if (spec.channel()) {
      // `channel::name`: only that channel's records of the name, whatever the channel priority.
      std::vector<bool> allowed(m_index.channels().size(), false);
      for (std::size_t c = 0; c < allowed.size(); ++c) {
        allowed[c] = spec.channel()->matches(m_index.channels()[c]);
      }
      if (pkg.restricted) {
        for (std::size_t c = 0; c < allowed.size(); ++c) {
          allowed[c] = allowed[c] && pkg.channels[c];
        }
      }
      pkg.channels = std::move(allowed);
      pkg.restricted = true;
    }
  }
  for (const MatchSpec& pin : m_options.pins) {
    if (pin.name().kind() != StringMatcher::Kind::exact) {
      return invalid_input("the pin '{}' names no single package", space_form(pin));
    }
  }
  return {};
}

PackageId CondaProvider::package_id(std::string_view name, std::uint64_t depth) {
  auto [it, fresh] = m_ids.try_emplace(std::string(name), static_cast<PackageId>(m_packages.size()));
  if (fresh) {
    Package pkg;
    pkg.name = std::string(name);
    pkg.index = m_index.find(name);
    pkg.depth = depth;
    m_packages.push_back(std::move(pkg));
  } else {
    m_packages[it->second].depth = std::min(m_packages[it->second].depth, depth);
  }
  return it->second;
}

Package& CondaProvider::visible(PackageId p) {
  Package& pkg = m_packages[p];
  if (pkg.ordered || !pkg.candidates.empty() || pkg.index == nullptr) {
    return pkg;
  }
  const auto& all = pkg.index->records;
  std::uint32_t best_channel = IndexRecord::k_virtual;
  for (const IndexRecord& r : all) {
    if (!pkg.restricted || (!r.is_virtual() && pkg.channels[r.channel])) {
      best_channel = std::min(best_channel, r.channel);
    }
  }
  for (const IndexRecord& r : all) {
    if (pkg.restricted && (r.is_virtual() || !pkg.channels[r.channel])) {
      continue;
    }
    // Strict priority: a name the best channel has comes from that channel only.
    if (m_options.channel_priority == ChannelPriority::strict && !pkg.restricted &&
        r.channel != best_channel) {
      continue;
    }
    pkg.candidates.push_back(&r);
  }
  return pkg;
}

Package& CondaProvider::ordered(PackageId p) {
  Package& pkg = visible(p);
  if (!pkg.ordered && p != k_root) {
    order_candidates(pkg);
    pkg.ordered = true;
    for (const LockedRecord& l : m_options.locked) {
      for (std::size_t i = 0; i < pkg.candidates.size(); ++i) {
        const IndexRecord& r = *pkg.candidates[i];
        if (r.record->filename == l.filename && r.record->subdir == l.subdir &&
            channel_name(r) == canonical_channel(l.channel)) {
          pkg.locked = i;
        }
      }
    }
  }
  return pkg;
}

// The candidates from best to worst (conda.md §5.2): fewer track_features; (flexible) the higher
// channel; the higher version; the higher build_number; the record whose dependencies allow higher
// versions (break_ties); the newer timestamp; then channel, subdir and filename, for determinism.
// Stored reversed, so that the best is the highest index (VersionSet::highest).
void CondaProvider::order_candidates(Package& pkg) {
  auto& cs = pkg.candidates;
  const bool flexible = m_options.channel_priority == ChannelPriority::flexible;
  const auto primary = [flexible](const IndexRecord* a, const IndexRecord* b) -> int {
    if (feature_count(*a) != feature_count(*b)) {
      return feature_count(*a) < feature_count(*b) ? -1 : 1;
    }
    if (flexible && a->channel != b->channel) {
      return a->channel < b->channel ? -1 : 1;
    }
    if (const auto c = a->version <=> b->version; std::is_neq(c)) {
      return std::is_gt(c) ? -1 : 1;
    }
    if (a->record->build_number != b->record->build_number) {
      return a->record->build_number > b->record->build_number ? -1 : 1;
    }
    return 0;
  };
  std::sort(cs.begin(), cs.end(), [&primary](const IndexRecord* a, const IndexRecord* b) {
    if (const int c = primary(a, b); c != 0) {
      return c < 0;
    }
    const Record& x = *a->record;
    const Record& y = *b->record;
    if (x.timestamp_ms != y.timestamp_ms) {
      return x.timestamp_ms > y.timestamp_ms;
    }
    return std::tie(a->channel, x.subdir, x.filename) < std::tie(b->channel, y.subdir, y.filename);
  });
  for (std::size_t i = 0; i < cs.size();) {
    std::size_t j = i + 1;
    while (j < cs.size() && primary(cs[i], cs[j]) == 0) {
      ++j;
    }
    if (j - i > 1) {
      break_ties(pkg, i, j);
    }
    i = j;
  }
  std::reverse(cs.begin(), cs.end());
}

// Among records equal up to build_number (the variants of one version: py311 and py312 builds,
// cuda and cpu builds), prefer the one whose dependencies allow higher versions, as libsolv and
// rattler do. lockstep's version of the rule: for each name every variant depends on, the highest
// version in the index that the variant's specs on it accept; the variants compare by these
// versions, the names in byte order (a total order, unlike a vote). A stable sort keeps the
// timestamp order within what stays tied.
void CondaProvider::break_ties(Package& pkg, std::size_t begin, std::size_t end) {
  auto& cs = pkg.candidates;
  // The specs of each variant by dependency name.
  std::vector<std::map<std::string, std::vector<const MatchSpec*>>> specs(end - begin);
  for (std::size_t i = begin; i < end; ++i) {
    for (const auto& text : cs[i]->record->depends) {
      const ParsedSpec& parsed = parse_dependency(std::string(text));
      if (parsed.spec && parsed.spec->name().kind() == StringMatcher::Kind::exact) {
        specs[i - begin][parsed.spec->name().str()].push_back(&*parsed.spec);
      }
    }
  }
  std::vector<std::string> shared;
  for (const auto& entry : specs[0]) {
    const std::string& name = entry.first;
    if (std::all_of(specs.begin(), specs.end(), [&name](const auto& m) { return m.count(name) != 0; })) {
      shared.push_back(name);
    }
  }
  if (shared.empty()) {
    return;
  }
  // Each variant's highest allowed version per shared name (nullptr: none).
  std::vector<std::vector<const Version*>> best(end - begin);
  for (const std::string& name : shared) {
    const PackageId q = package_id(name, pkg.depth + 1);
    const Package& dep = visible(q);
    for (std::size_t i = 0; i < end - begin; ++i) {
      const Version* top = nullptr;
      for (const IndexRecord* r : dep.candidates) {
        const auto& list = specs[i].at(name);
        if ((top == nullptr || r->version > *top) &&
            std::all_of(list.begin(), list.end(),
                        [&](const MatchSpec* s) { return spec_matches(*s, *r, channel_name(*r)); })) {
          top = &r->version;
        }
      }
      best[i].push_back(top);
    }
  }
  std::vector<std::size_t> order(end - begin);
  for (std::size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&best](std::size_t a, std::size_t b) {
    for (std::size_t k = 0; k < best[a].size(); ++k) {
      const Version* x = best[a][k];
      const Version* y = best[b][k];
      if (x == nullptr || y == nullptr) {
        if ((x == nullptr) != (y == nullptr)) {
          return y == nullptr;
        }
        continue;
      }
      if (const auto c = *x <=> *y; std::is_neq(c)) {
        return std::is_gt(c);
      }
    }
    return false;
  });
  std::vector<const IndexRecord*> sorted;
  sorted.reserve(order.size());
  for (std::size_t i : order) {
    sorted.push_back(cs[begin + i]);
  }
  std::copy(sorted.begin(), sorted.end(), cs.begin() + static_cast<std::ptrdiff_t>(begin));
}

const ParsedSpec& CondaProvider::parse_dependency(const std::string& text) {
  auto [it, fresh] = m_specs.try_emplace(text);
  if (fresh) {
    ParseResult<MatchSpec> spec = MatchSpec::parse(text, SpecMode::lenient);
    if (!spec) {
      it->second.error = spec.error().message;
    } else if (spec->name().kind() != StringMatcher::Kind::exact) {
      it->second.error = "it names no single package";
    } else {
      it->second.spec = std::move(spec).value();
    }
  }
  return it->second;
}

VersionSet CondaProvider::matching(PackageId q, const MatchSpec& spec) {
  const Package& pkg = ordered(q);
  VersionSet set = VersionSet::none(pkg.candidates.size());
  for (std::size_t i = 0; i < pkg.candidates.size(); ++i) {
    if (spec_matches(spec, *pkg.candidates[i], channel_name(*pkg.candidates[i]))) {
      set.add(i);
    }
  }
  return set;
}

std::string CondaProvider::why_none(PackageId q) {
  const Package& pkg = ordered(q);
  if (pkg.candidates.empty()) {
    if (pkg.restricted && pkg.index != nullptr) {
      return fmt::format("nothing provides {} in the channels the request names", pkg.name);
    }
    return pkg.name.starts_with("__")
               ? fmt::format("nothing provides {}: the target has no such virtual package", pkg.name)
               : fmt::format("nothing provides {}", pkg.name);
  }
  std::vector<std::string> versions;
  for (auto it = pkg.candidates.rbegin(); it != pkg.candidates.rend(); ++it) {
    const std::string_view v = (*it)->record->version;
    if (std::find(versions.begin(), versions.end(), v) == versions.end()) {
      versions.emplace_back(v);
    }
  }
  const std::size_t more = versions.size() > k_max_listed ? versions.size() - k_max_listed : 0;
  versions.resize(versions.size() - more);
  return fmt::format("no record of {} matches; there are {}{}", pkg.name, fmt::join(versions, ", "),
                     more > 0 ? fmt::format(" and {} more versions", more) : "");
}

void CondaProvider::add_spec(const std::string& who, const std::string& text, const MatchSpec& spec,
                             bool constraint, std::uint64_t depth, std::vector<pubgrub::Dependency>& out) {
  const PackageId q = package_id(spec.name().str(), depth);
  VersionSet set = matching(q, spec);
  const std::string verb = constraint ? "constrains" : "needs";
  std::string sentence = who.empty() ? text : fmt::format("{} {} {}", who, verb, text);
  if (constraint) {
    // Only what is present is constrained: a constraint every candidate meets says nothing, and
    // one on a name nothing provides can't bind.
    if (set.count() == set.universe()) {
      return;
    }
    set.add_absent();
  } else if (set.empty()) {
    sentence += fmt::format(" ({})", why_none(q));
  }
  out.push_back(pubgrub::Dependency{q, std::move(set), std::move(sentence)});
}

Result<pubgrub::Dependencies> CondaProvider::root_dependencies() {
  pubgrub::Dependencies out;
  for (std::size_t i = 0; i < m_request.size(); ++i) {
    const std::string text = "the request asks for " + space_form(m_request[i]);
    add_spec("", text, m_request[i], false, 1, out.needs);
    m_root_text.emplace(out.needs.back().text, i);
  }
  // Every virtual package is required, so that a constraint on one binds (conda.md §5.3).
  for (const IndexPackage& p : m_index.packages()) {
    if (p.records.size() == 1 && p.records[0].is_virtual()) {
      const PackageId q = package_id(p.name, 1);
      out.needs.push_back(pubgrub::Dependency{q, VersionSet::any(ordered(q).candidates.size()),
                                              "the target provides " + record_text(p.records[0])});
    }
  }
  for (const MatchSpec& pin : m_options.pins) {
    if (m_index.find(pin.name().str()) != nullptr) { // a pin on a name nothing provides is moot
      add_spec("", "the pin " + space_form(pin) + " holds", pin, true, 1, out.needs);
    }
  }
  return out;
}

Result<pubgrub::Dependencies> CondaProvider::dependencies(PackageId p, std::size_t v) {
  if (p == k_root) {
    return root_dependencies();
  }
  if (auto it = m_deps.find({p, v}); it != m_deps.end()) {
    return it->second;
  }
  const IndexRecord& rec = *ordered(p).candidates[v];
  const std::string who = record_text(rec);
  const std::uint64_t depth = m_packages[p].depth + 1;
  pubgrub::Dependencies out;
  for (bool constraint : {false, true}) {
    const auto& list = constraint ? rec.record->constrains : rec.record->depends;
    for (const auto& entry : list) {
      const std::string text(entry);
      const ParsedSpec& parsed = parse_dependency(text);
      if (!parsed.spec) {
        out.needs.clear();
        out.unusable = fmt::format("{} can't be used: its {} '{}' doesn't parse ({})", who,
                                   constraint ? "constraint" : "dependency", text, parsed.error);
        m_deps.emplace(std::make_pair(p, v), out);
        return out;
      }
      add_spec(who, text, *parsed.spec, constraint, depth, out.needs);
    }
  }
  m_deps.emplace(std::make_pair(p, v), out);
  return out;
}

// "numpy" (every candidate), "numpy 1.26.4 py311h_0" (one), "numpy 1.26.3|1.26.4" (whole
// versions), "numpy (1.26.4 py311h_0 or 1.26.3)" (some builds of a version).
std::string CondaProvider::describe(PackageId p, const VersionSet& versions) {
  if (p == k_root) {
    return "the request";
  }
  const Package& pkg = ordered(p);
  const auto& cs = pkg.candidates;
  const std::size_t count = versions.count();
  if (count == cs.size() || count == 0) {
    return pkg.name;
  }
  if (count == 1) {
    return record_text(*cs[*versions.highest()]);
  }
  // By version text, best first: which records of it are in the set, and how many it has.
  std::vector<std::string_view> order;
  std::map<std::string_view, std::pair<std::vector<std::string_view>, std::size_t>> by_version;
  for (std::size_t i = cs.size(); i-- > 0;) {
    auto& [builds, total] = by_version[cs[i]->record->version];
    if (total++ == 0) {
      order.push_back(cs[i]->record->version);
    }
    if (versions.has(i)) {
      builds.push_back(cs[i]->record->build);
    }
  }
  std::vector<std::string> parts;
  bool whole = true;
  for (const std::string_view v : order) {
    const auto& [builds, total] = by_version[v];
    if (builds.empty()) {
      continue;
    }
    whole = whole && builds.size() == total;
    parts.push_back(builds.size() == total ? std::string(v)
                                           : fmt::format("{} {}", v, fmt::join(builds, "|")));
  }
  const std::size_t more = parts.size() > k_max_listed ? parts.size() - k_max_listed : 0;
  parts.resize(parts.size() - more);
  const std::string tail = more > 0 ? fmt::format(" or {} more", more) : "";
  if (whole) {
    return fmt::format("{} {}{}", pkg.name, fmt::join(parts, "|"), tail);
  }
  return fmt::format("{} ({}{})", pkg.name, fmt::join(parts, " or "), tail);
}

Result<std::vector<SolvedRecord>> CondaProvider::records(const pubgrub::Outcome& outcome) {
  std::map<PackageId, std::size_t> chosen;
  for (const pubgrub::Selection& s : outcome.selection) {
    chosen[s.package] = s.version;
  }
  // Reasons: breadth first from the request, the first path to each package.
  std::map<PackageId, std::pair<std::string, std::optional<std::size_t>>> reason;
  std::deque<PackageId> queue;
  for (std::size_t i = 0; i < m_request.size(); ++i) {
    const PackageId q = m_ids.at(m_request[i].name().str());
    if (chosen.count(q) != 0 && reason.count(q) == 0) {
      reason[q] = {"requested as " + space_form(m_request[i]), i};
      queue.push_back(q);
    }
  }
  // Edges for the order: each chosen record's dependencies on chosen names.
  std::map<PackageId, std::set<PackageId>> needs;
  while (!queue.empty()) {
    const PackageId p = queue.front();
    queue.pop_front();
    LS_TRY_ASSIGN(const pubgrub::Dependencies deps, dependencies(p, chosen.at(p)));
    const std::string who = record_text(*m_packages[p].candidates[chosen.at(p)]);
    for (const pubgrub::Dependency& d : deps.needs) {
      if (d.versions.has_absent() || chosen.count(d.package) == 0 || d.package == p) {
        continue;
      }
      needs[p].insert(d.package);
      if (reason.count(d.package) == 0) {
        reason[d.package] = {fmt::format("needed by {}: {}", who, d.text.substr(who.size() + 7)),
                             std::nullopt};
        queue.push_back(d.package);
      }
    }
  }
  // Dependencies first (Kahn's algorithm, the smallest name first); a cycle is broken at the
  // smallest name left.
  std::map<std::string_view, PackageId> left;
  for (const auto& [p, v] : chosen) {
    if (!m_packages[p].candidates[v]->is_virtual()) {
      left.emplace(m_packages[p].name, p);
    }
  }
  std::vector<SolvedRecord> out;
  std::set<PackageId> done;
  while (!left.empty()) {
    auto next = std::find_if(left.begin(), left.end(), [&](const auto& entry) {
      const auto& deps = needs[entry.second];
      return std::all_of(deps.begin(), deps.end(), [&](PackageId d) {
        return done.count(d) != 0 || m_packages[d].candidates[chosen.at(d)]->is_virtual();
      });
    });
    if (next == left.end()) {
      next = left.begin();
    }
    const PackageId p = next->second;
    const IndexRecord* rec = m_packages[p].candidates[chosen.at(p)];
    auto why = reason.find(p);
    out.push_back(SolvedRecord{rec, std::string(channel_name(*rec)),
                               why == reason.end() ? "needed by the solution" : why->second.first,
                               why == reason.end() ? std::nullopt : why->second.second});
    done.insert(p);
    left.erase(next);
  }
  return out;
}

} // namespace

std::string space_form(const MatchSpec& spec) {
  std::string out;
  std::vector<std::string> brackets;
  if (spec.channel()) {
    out = spec.channel()->str() + (spec.subdir() ? "/" + *spec.subdir() : "") + "::";
  } else if (spec.subdir()) {
    brackets.push_back("subdir=" + *spec.subdir());
  }
  out += spec.name().str();
  const bool version = spec.version() && !spec.version()->is_any();
  if (version) {
    std::string v = spec.version()->str();
    if (spec.version()->single_op() == VersionOp::starts_with && v.starts_with('=') && !v.ends_with('*')) {
      v = v.substr(1) + ".*"; // "=1.2" reads "1.2.*" in the space form
    }
    out += " " + v;
  }
  if (spec.build()) {
    out += (version ? " " : " * ") + spec.build()->str();
  }
  if (spec.build_number()) {
    brackets.push_back("build_number=" + spec.build_number()->str());
  }
  for (const auto& [key, value] : {std::pair{"md5", spec.md5()}, std::pair{"sha256", spec.sha256()},
                                   std::pair{"fn", spec.fn()}, std::pair{"url", spec.url()}}) {
    if (value) {
      brackets.push_back(fmt::format("{}={}", key, *value));
    }
  }
  if (spec.track_features()) {
    brackets.push_back(fmt::format("track_features='{}'", fmt::join(*spec.track_features(), " ")));
  }
  if (!brackets.empty()) {
    out += fmt::format("[{}]", fmt::join(brackets, ","));
  }
  return out;
}

Result<Solution> solve(const PackageIndex& index, const std::vector<MatchSpec>& request,
                       const SolveOptions& options) {
  CondaProvider provider(index, request, options);
  LS_TRY(provider.start());
  LS_TRY_ASSIGN(pubgrub::Outcome outcome, pubgrub::solve(provider, k_root, 0, options.limits));
  Solution out;
  out.stats = outcome.stats;
  out.solved = outcome.solved;
  if (!outcome.solved) {
    out.explanation = std::move(outcome.explanation);
    for (const std::string& text : outcome.root_causes) {
      if (auto i = provider.request_of(text);
          i && std::find(out.root_causes.begin(), out.root_causes.end(), *i) == out.root_causes.end()) {
        out.root_causes.push_back(*i);
      }
    }
    return out;
  }
  LS_TRY_ASSIGN(out.records, provider.records(outcome));
  return out;
}

} // namespace lockstep::conda
