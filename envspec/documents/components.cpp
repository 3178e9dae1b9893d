// The component model of `lockstep diff`: specs, locks and doctor snapshots as component lists,
// and the comparison of two lists. Images become component lists in runner/audit/verify.cpp.
#include "envspec/documents/components.hpp"

#include "envspec/stack/stack.hpp"
#include "support/base/text.hpp"
#include "support/debian/debian_version.hpp"
#include "support/oci/oci.hpp"
#include "support/python/pep440.hpp"
#include "support/python/pep508.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

namespace lockstep::envspec {

namespace {

using json = nlohmann::json;

constexpr std::size_t k_max_snapshot_packages = 1U << 20;
constexpr std::size_t k_max_snapshot_gpus = 4096;
constexpr std::size_t k_max_text = 4096;

// Labels that say where an image came from, not what it holds.
constexpr std::array<std::string_view, 4> k_provenance_labels = {
    "dev.lockstep.lock.digest", "dev.lockstep.spec.digest", "dev.lockstep.source.dirty",
    "dev.lockstep.impure"};

// The name a deb gets: ":ARCH" for an architecture that is neither the side's native one nor "all".
std::string deb_name(const std::string& name, const std::string& arch, const std::string& native) {
  if (arch.empty() || arch == "all" || arch == native || native.empty()) {
    return name;
  }
  return name + ":" + arch;
}

std::string native_arch_of(const std::string& platform) {
  auto p = oci::Platform::parse(platform);
  return p ? debian_arch(*p) : std::string();
}

bool components_equal(const Component& a, const Component& b) {
  const std::string_view cls = component_class(a.kind);
  if (cls == "git") {
    if (!a.version.empty() && !b.version.empty()) {
      return a.version == b.version;
    }
    return a.rev.empty() || b.rev.empty() || a.rev == b.rev;
  }
  if (a.version.empty() || b.version.empty()) {
    return true; // unpinned: any version matches
  }
  if (cls == "deb") {
    return debian_versions_equal(a.version, b.version);
  }
  if (cls == "python") {
    return python_versions_equal(a.version, b.version);
  }
  return a.version == b.version;
}

// What a table or JSON cell shows for a component present on a side.
std::string shown_version(const Component& c) {
  if (component_class(c.kind) == "git") {
    if (c.version.empty()) {
      return c.rev.empty() ? "*" : c.rev;
    }
    return c.rev.empty() ? c.version : fmt::format("{} ({})", c.version.substr(0, 12), c.rev);
  }
  return c.version.empty() ? "*" : c.version;
}

// Reads snapshot JSON leniently but type-checked: a present key of the wrong type is an error naming
// its path; a missing key or null is "unknown".
class SnapshotReader {
public:
  explicit SnapshotReader(std::string what) : m_what(std::move(what)) {}

  Result<std::string> text(const json& obj, const char* key, const std::string& path) const {
    if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) {
      return std::string();
    }
    const json& v = obj[key];
    if (!v.is_string()) {
      return invalid_input("{}: {}.{}: expected a string or null", m_what, path, key);
    }
    std::string s = v.get<std::string>();
    if (s.size() > k_max_text) {
      return invalid_input("{}: {}.{}: longer than {} bytes", m_what, path, key, k_max_text);
    }
    return s;
  }

  Result<const json*> object(const json& obj, const char* key, const std::string& path) const {
    if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) {
      return static_cast<const json*>(nullptr);
    }
    if (!obj[key].is_object()) {
      return invalid_input("{}: {}{}{}: expected an object or null", m_what, path, path.empty() ? "" : ".",
                           key);
    }
    return &obj[key];
  }

  Result<const json*> array(const json& obj, const char* key, const std::string& path,
                            std::size_t max) const {
    if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) {
      return static_cast<const json*>(nullptr);
    }
    if (!obj[key].is_array()) {
      return invalid_input("{}: {}.{}: expected an array", m_what, path, key);
    }
    if (obj[key].size() > max) {
      return invalid_input("{}: {}.{}: more than {} entries", m_what, path, key, max);
    }
    return &obj[key];
  }

private:
  std::string m_what;
};

} // namespace

bool debian_versions_equal(const std::string& a, const std::string& b) {
  auto va = DebianVersion::parse(a);
  auto vb = DebianVersion::parse(b);
  return va && vb ? *va == *vb : a == b;
}

bool python_versions_equal(const std::string& a, const std::string& b) {
  auto va = PyVersion::parse(a);
  auto vb = PyVersion::parse(b);
  return va && vb ? *va == *vb : a == b;
}

std::string_view component_class(std::string_view kind) {
  if (kind == "wheel" || kind == "python-package") {
    return "python";
  }
  return kind;
}

Result<void> ComponentSet::finish() {
  auto key = [](const Component& c) {
    return std::make_tuple(component_class(c.kind), c.name, c.kind, c.version, c.rev);
  };
  std::sort(components.begin(), components.end(),
            [&](const Component& x, const Component& y) { return key(x) < key(y); });
  // One name per class: a name listed twice (a distribution found in two places, a package in two
  // states) keeps one entry whose version lists both.
  std::vector<Component> out;
  for (Component& c : components) {
    if (!out.empty() && component_class(out.back().kind) == component_class(c.kind) &&
        out.back().name == c.name) {
      if (out.back().version != c.version || out.back().rev != c.rev) {
        out.back().version += ", " + c.version;
      }
      continue;
    }
    out.push_back(std::move(c));
  }
  components = std::move(out);
  return {};
}

ComponentSet spec_components(const Spec& spec, std::string what) {
  ComponentSet set;
  set.kind = "spec";
  set.what = std::move(what);
  const std::string native = debian_arch(spec.platform);
  for (const PackageRequest& r : spec.packages.apt) {
    set.components.push_back({"deb", deb_name(r.name, r.arch, native), r.version, ""});
  }
  for (const PackageRequest& r : spec.packages.pip) {
    auto req = Requirement::parse(r.name);
    if (!req) {
      continue; // load_spec validated it; nothing to compare otherwise
    }
    std::string version;
    const auto& clauses = req->specifier.clauses();
    if (req->url.empty() && clauses.size() == 1 && clauses[0].op == VersionSpecifier::Op::equal &&
        !clauses[0].wildcard) {
      version = clauses[0].text;
    }
    set.components.push_back({"wheel", req->project, version, ""});
  }
  for (const CopyItem& c : spec.copy) {
    if (!c.git.empty()) {
      set.components.push_back({"git", c.git_text.empty() ? c.git : c.git_text, "", c.rev});
    }
  }
  set.coverage["deb"] = Coverage::partial;
  set.coverage["python"] = Coverage::partial;
  set.coverage["git"] = Coverage::complete;
  // HOOK(stack): the spec's `stack:` constraints ("cuda: 12", "framework: pytorch@2.1") are ranges,
  // not versions; they are compared once solved, through the lock's choices (lock_stack_labels).
  (void)set.finish();
  return set;
}

std::map<std::string, std::string> lock_stack_labels(const Lock& lock, const ImageFacts& facts) {
  std::map<std::string, std::string> labels = facts_labels(facts);
  if (lock.stack) {
    // HOOK(stack): the solver's choices, as the build labels the image (envspec/stack/stack.hpp).
    for (auto& [k, v] : stack_image_config(*lock.stack).labels) {
      labels[k] = v;
    }
  }
  return labels;
}

std::vector<Component> stack_components(const std::map<std::string, std::string>& labels) {
  std::vector<Component> out;
  for (const auto& [k, v] : labels) {
    if (k.rfind(k_reserved_label_prefix, 0) != 0 ||
        std::find(k_provenance_labels.begin(), k_provenance_labels.end(), k) != k_provenance_labels.end()) {
      continue;
    }
    out.push_back({"stack", k.substr(k_reserved_label_prefix.size()), v, ""});
  }
  return out;
}

ComponentSet lock_components(const Lock& lock, const ImageFacts& facts, std::string what) {
  ComponentSet set;
  set.kind = "lock";
  set.what = std::move(what);
  const std::string native = native_arch_of(lock.platform);
  for (const LockedArtifact& a : lock.artifacts) {
    if (a.kind == "deb") {
      set.components.push_back({"deb", deb_name(a.name, a.arch, native), a.version, ""});
    } else if (a.kind == "wheel") {
      set.components.push_back({"wheel", normalize_project_name(a.name), a.version, ""});
    } else if (a.kind == "git") {
      set.components.push_back({"git", a.name, a.version, a.rev});
    } else if (a.kind == "conda" && a.conda) {
      set.components.push_back({"conda", a.name, a.version + "=" + a.conda->build, ""});
    }
  }
  for (Component& c : stack_components(lock_stack_labels(lock, facts))) {
    set.components.push_back(std::move(c));
  }
  set.coverage["deb"] = Coverage::complete;
  set.coverage["python"] = Coverage::complete;
  set.coverage["git"] = Coverage::complete;
  if (std::any_of(lock.artifacts.begin(), lock.artifacts.end(),
                  [](const LockedArtifact& a) { return a.kind == "conda"; })) {
    set.coverage["conda"] = Coverage::complete; // a lock without conda packages says nothing of conda
  }
  set.coverage["stack"] = Coverage::complete;
  if (const Result<oci::Platform> platform = oci::Platform::parse(lock.platform);
      platform && lock.platforms.empty()) {
    set.architecture = platform->architecture;
  }
  (void)set.finish();
  return set;
}

ComponentSet merge_platform_components(const std::vector<std::pair<std::string, ComponentSet>>& shares,
                                       std::string what) {
  ComponentSet set;
  set.kind = "lock";
  set.what = std::move(what);
  // How many platforms list each component exactly so.
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::size_t> count;
  for (const auto& [platform, share] : shares) {
    for (const Component& c : share.components) {
      ++count[{c.kind, c.name, c.version, c.rev}];
    }
    for (const auto& [cls, coverage] : share.coverage) {
      set.coverage[cls] = std::max(set.coverage[cls], coverage);
    }
  }
  std::set<std::tuple<std::string, std::string, std::string, std::string>> common;
  for (const auto& [platform, share] : shares) {
    for (const Component& c : share.components) {
      const auto key = std::make_tuple(c.kind, c.name, c.version, c.rev);
      if (count[key] == shares.size()) {
        if (common.insert(key).second) {
          set.components.push_back(c);
        }
        continue;
      }
      Component own = c;
      own.name += " (" + platform + ")";
      set.components.push_back(std::move(own));
    }
  }
  (void)set.finish();
  return set;
}

Result<ComponentSet> snapshot_components(const json& snapshot, std::string what) {
  ComponentSet set;
  set.kind = "snapshot";
  set.what = what;
  SnapshotReader r(std::move(what));
  if (!snapshot.is_object()) {
    return invalid_input("{}: a snapshot is a JSON object", set.what);
  }
  auto host_fact = [&](const std::string& name, std::string value) {
    if (!value.empty()) {
      set.components.push_back({"host", name, std::move(value), ""});
    }
  };
  LS_TRY_ASSIGN(const json* host, r.object(snapshot, "host", ""));
  if (host != nullptr) {
    for (const char* key : {"arch", "os", "kernel", "glibc", "pmix", "ucx", "libfabric", "slurm"}) {
      LS_TRY_ASSIGN(std::string v, r.text(*host, key, "host"));
      host_fact(key, std::move(v));
    }
    LS_TRY_ASSIGN(const json* driver, r.object(*host, "driver", "host"));
    if (driver != nullptr) {
      LS_TRY_ASSIGN(std::string v, r.text(*driver, "version", "host.driver"));
      host_fact("driver", std::move(v));
    }
    LS_TRY_ASSIGN(const json* mpi, r.object(*host, "mpi", "host"));
    if (mpi != nullptr) {
      LS_TRY_ASSIGN(std::string impl, r.text(*mpi, "impl", "host.mpi"));
      LS_TRY_ASSIGN(std::string version, r.text(*mpi, "version", "host.mpi"));
      host_fact("mpi", version.empty() ? impl : impl + " " + version);
    }
    LS_TRY_ASSIGN(const json* gpus, r.array(*host, "gpus", "host", k_max_snapshot_gpus));
    if (gpus != nullptr) {
      // One component per GPU model: "gpu NAME" = "CC" (with "xN" for N of them).
      std::map<std::pair<std::string, std::string>, int> models;
      for (std::size_t i = 0; i < gpus->size(); ++i) {
        const std::string path = fmt::format("host.gpus[{}]", i);
        if (!(*gpus)[i].is_object()) {
          return invalid_input("{}: {}: expected an object", set.what, path);
        }
        LS_TRY_ASSIGN(std::string name, r.text((*gpus)[i], "name", path));
        LS_TRY_ASSIGN(std::string cc, r.text((*gpus)[i], "compute_capability", path));
        ++models[{name.empty() ? "unknown" : name, cc}];
      }
      for (const auto& [model, count] : models) {
        const std::string cc = model.second.empty() ? "unknown" : model.second;
        host_fact("gpu " + model.first, count > 1 ? fmt::format("{} x{}", cc, count) : cc);
      }
    }
  }
  LS_TRY_ASSIGN(const json* python, r.object(snapshot, "python", ""));
  if (python != nullptr) {
    LS_TRY_ASSIGN(std::string kind, r.text(*python, "kind", "python"));
    LS_TRY_ASSIGN(std::string version, r.text(*python, "version", "python"));
    host_fact("python", version);
    host_fact("python.kind", kind);
    LS_TRY_ASSIGN(const json* packages, r.array(*python, "packages", "python", k_max_snapshot_packages));
    if (packages != nullptr) {
      for (std::size_t i = 0; i < packages->size(); ++i) {
        const std::string path = fmt::format("python.packages[{}]", i);
        if (!(*packages)[i].is_object()) {
          return invalid_input("{}: {}: expected an object", set.what, path);
        }
        LS_TRY_ASSIGN(std::string name, r.text((*packages)[i], "name", path));
        LS_TRY_ASSIGN(std::string pv, r.text((*packages)[i], "version", path));
        if (name.empty()) {
          return invalid_input("{}: {}.name: a package needs a name", set.what, path);
        }
        set.components.push_back({"python-package", normalize_project_name(name), pv, ""});
      }
    }
    set.coverage["python"] = Coverage::complete;
  }
  set.coverage["host"] = Coverage::complete;
  LS_TRY(set.finish());
  return set;
}

std::string_view change_status_name(ComponentChange::Status status) {
  switch (status) {
  case ComponentChange::Status::added:
    return "added";
  case ComponentChange::Status::removed:
    return "removed";
  case ComponentChange::Status::changed:
    return "changed";
  }
  return "changed";
}

ComponentDiff diff_components(const ComponentSet& a, const ComponentSet& b) {
  ComponentDiff diff;
  auto coverage = [](const ComponentSet& s, const std::string& cls) {
    auto it = s.coverage.find(cls);
    return it == s.coverage.end() ? Coverage::none : it->second;
  };
  std::set<std::string> classes;
  for (const auto& [cls, cov] : a.coverage) {
    classes.insert(cls);
  }
  for (const auto& [cls, cov] : b.coverage) {
    classes.insert(cls);
  }
  for (const std::string& cls : classes) {
    const Coverage ca = coverage(a, cls);
    const Coverage cb = coverage(b, cls);
    if (ca == Coverage::none || cb == Coverage::none) {
      if (ca != cb) {
        diff.skipped.push_back(cls);
      }
      continue;
    }
    diff.compared.push_back(cls);
    // Each name of this class: its component in a, in b (the first of a name; null where absent).
    std::map<std::string, std::pair<const Component*, const Component*>> by_name;
    for (const Component& c : a.components) {
      if (component_class(c.kind) == cls && by_name[c.name].first == nullptr) {
        by_name[c.name].first = &c;
      }
    }
    for (const Component& c : b.components) {
      if (component_class(c.kind) == cls && by_name[c.name].second == nullptr) {
        by_name[c.name].second = &c;
      }
    }
    for (const auto& [name, in] : by_name) {
      const Component* in_a = in.first;
      const Component* in_b = in.second;
      if (in_a != nullptr && in_b != nullptr) {
        if (components_equal(*in_a, *in_b)) {
          ++diff.same;
        } else {
          diff.changes.push_back({ComponentChange::Status::changed, in_a->kind, name, shown_version(*in_a),
                                  shown_version(*in_b)});
        }
      } else if (in_a != nullptr) {
        if (cb == Coverage::complete) {
          diff.changes.push_back(
              {ComponentChange::Status::removed, in_a->kind, name, shown_version(*in_a), std::nullopt});
        }
      } else if (ca == Coverage::complete) {
        diff.changes.push_back(
            {ComponentChange::Status::added, in_b->kind, name, std::nullopt, shown_version(*in_b)});
      }
    }
  }
  std::stable_sort(diff.changes.begin(), diff.changes.end(),
                   [](const ComponentChange& x, const ComponentChange& y) {
                     return std::make_tuple(component_class(x.kind), x.name) <
                            std::make_tuple(component_class(y.kind), y.name);
                   });
  return diff;
}

std::string render_diff_text(const ComponentSet& a, const ComponentSet& b, const ComponentDiff& diff) {
  std::string out = fmt::format("A: {} {}\nB: {} {}\n", a.kind, a.what, b.kind, b.what);
  if (!diff.changes.empty()) {
    std::vector<std::array<std::string, 5>> rows;
    rows.push_back({"STATUS", "KIND", "NAME", "A", "B"});
    for (const ComponentChange& c : diff.changes) {
      rows.push_back(
          {std::string(change_status_name(c.status)), c.kind, c.name, c.a.value_or("-"), c.b.value_or("-")});
    }
    std::array<std::size_t, 5> width{};
    for (const auto& row : rows) {
      for (std::size_t i = 0; i < row.size(); ++i) {
        width[i] = std::max(width[i], row[i].size());
      }
    }
    for (const auto& row : rows) {
      std::string line;
      for (std::size_t i = 0; i < row.size(); ++i) {
        line += i + 1 == row.size() ? row[i] : fmt::format("{:<{}}  ", row[i], width[i]);
      }
      out += line + "\n";
    }
  }
  std::size_t counts[3] = {0, 0, 0};
  for (const ComponentChange& c : diff.changes) {
    ++counts[static_cast<int>(c.status)];
  }
  out += fmt::format("{} changed, {} added, {} removed, {} the same", counts[2], counts[0], counts[1],
                     diff.same);
  if (!diff.compared.empty()) {
    out += fmt::format(" ({})", fmt::join(diff.compared, ", "));
  } else {
    out += " (the two sides have no kind of component in common)";
  }
  if (!diff.skipped.empty()) {
    out += fmt::format("; not compared: {}", fmt::join(diff.skipped, ", "));
  }
  out += "\n";
  return out;
}

nlohmann::ordered_json diff_json(const ComponentSet& a, const ComponentSet& b, const ComponentDiff& diff) {
  using ordered = nlohmann::ordered_json;
  auto side = [](const ComponentSet& s) { return ordered{{"kind", s.kind}, {"what", s.what}}; };
  auto version = [](const std::optional<std::string>& v) { return v ? ordered(*v) : ordered(nullptr); };
  ordered changes = ordered::array();
  for (const ComponentChange& c : diff.changes) {
    changes.push_back(ordered{{"change", change_status_name(c.status)},
                              {"kind", c.kind},
                              {"name", c.name},
                              {"a", version(c.a)},
                              {"b", version(c.b)}});
  }
  return ordered{{"a", side(a)},
                 {"b", side(b)},
                 {"changes", changes},
                 {"same", diff.same},
                 {"compared", diff.compared},
                 {"skipped", diff.skipped}};
}

DocumentKind detect_document(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return DocumentKind::unknown;
  }
  if (text[first] == '{') {
    auto parsed = oci::parse_json(text, "diff input");
    if (!parsed || !parsed->is_object()) {
      return DocumentKind::unknown;
    }
    const json& j = *parsed;
    if (j.contains("lockstep-lock")) {
      return DocumentKind::lock;
    }
    if (j.contains("lockstep-snapshot")) {
      return DocumentKind::snapshot;
    }
    return DocumentKind::unknown;
  }
  // YAML: a top-level `lockstep:` key at the start of a line (a spec's schema version).
  for (std::string_view line : text_lines(text)) {
    if (line.rfind("lockstep:", 0) == 0) {
      return DocumentKind::spec;
    }
    if (line.find('\0') != std::string_view::npos) {
      return DocumentKind::unknown; // binary
    }
  }
  return DocumentKind::unknown;
}

} // namespace lockstep::envspec
