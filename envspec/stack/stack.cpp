#include "envspec/stack/stack.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <set>
#include <string_view>

namespace lockstep::envspec {

namespace {

// ---- small helpers -----------------------------------------------------------------------------

std::string major_of(std::string_view version) {
  return std::string(version.substr(0, version.find('.')));
}

std::string minor_of(std::string_view version) {
  const std::size_t dot = version.find('.');
  if (dot == std::string_view::npos) {
    return "0";
  }
  const std::string_view rest = version.substr(dot + 1);
  return std::string(rest.substr(0, rest.find('.')));
}

// "12.1.105" -> "12.1"
std::string major_minor(std::string_view version) {
  return major_of(version) + "." + minor_of(version);
}

std::string describe_why(const Provenance& why) {
  std::string out = why.where;
  if (!why.sources.empty()) {
    out += fmt::format("; {}", fmt::join(why.sources, ", "));
  }
  if (why.confidence != Confidence::primary) {
    out += fmt::format("; {}", to_string(why.confidence));
  }
  return out;
}

// A constraint as the spec wrote it; an absent one matches everything.
struct Want {
  std::optional<VersionConstraint> c;
  std::string text;
  [[nodiscard]] bool given() const { return c.has_value(); }
  [[nodiscard]] bool matches(std::string_view v) const { return !c || c->matches(v); }
  // A series ("8.9") is acceptable when the constraint matches it, or when a bare constraint is more
  // specific than the series ("8.9.2" within "8.9").
  [[nodiscard]] bool matches_series(std::string_view series) const {
    return !c || c->matches(series) || (c->is_prefix() && dotted_prefix(series, c->clauses[0].version));
  }
};

// A constraint text as a Want ("" = none; the spec and the recipes were validated when loaded).
Want want(const std::string& text) {
  Want w;
  if (!text.empty()) {
    if (Result<VersionConstraint> c = VersionConstraint::parse(text)) {
      w.c = *c;
      w.text = text;
    }
  }
  return w;
}

Want want(const StackRequest::Item& item) {
  return want(item.text);
}

// The version text a package pattern's {version} takes: what the spec asked for when it is a plain
// version (the repository picks the newest patch), else the chosen version.
std::string pattern_version(const Want& w, const std::string& chosen) {
  if (w.given() && w.c->is_prefix()) {
    return w.c->clauses[0].version;
  }
  return chosen;
}

std::string fill_pattern(std::string_view pattern, const std::string& version, const std::string& cuda) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size();) {
    if (pattern[i] == '{') {
      const std::size_t close = pattern.find('}', i);
      const std::string_view key = pattern.substr(i + 1, close - i - 1);
      if (key == "version") {
        out += version;
      } else if (key == "major") {
        out += major_of(version);
      } else if (key == "minor") {
        out += minor_of(version);
      } else if (key == "cuda") {
        out += cuda;
      } else if (key == "cuda_major") {
        out += major_of(cuda);
      } else if (key == "cuda_minor") {
        out += minor_of(cuda);
      }
      i = close + 1;
      continue;
    }
    out += pattern[i++];
  }
  return out;
}

// Where the image's Python comes from: "Debian bookworm's python3" or "python3.10 of the base image
// docker://…".
std::string python_source(const StackContext& context, const std::string& version) {
  if (!context.base_python_path.empty()) {
    return fmt::format("{} (Python {}) of the base image {}", context.base_python_path, version,
                       context.base_name);
  }
  if (!context.base_python.empty()) {
    return fmt::format("python{} of the base image {}", version, context.base_name);
  }
  return fmt::format("Debian {}'s python3", context.debian_suite);
}

// NVIDIA_REQUIRE_CUDA for a stack's CUDA, driver floor and lowest compute capability; "" without CUDA.
std::string nvidia_require_cuda(const LockedStack& st) {
  if (st.cuda.empty()) {
    return "";
  }
  std::string out = "cuda>=" + st.cuda;
  if (!st.driver_floor.empty()) {
    out += ",driver>=" + st.driver_floor;
  }
  if (!st.min_cc.empty()) {
    out += ",arch>=" + st.min_cc;
  }
  return out;
}

// ---- one candidate combination -------------------------------------------------------------------

struct Pick {
  const FrameworkRecipe* fw = nullptr;
  const FrameworkRelease* release = nullptr;
  std::string fw_version;
  const FrameworkVariant* variant = nullptr;
  std::string cuda; // X.Y, "" without CUDA
  bool cuda_wheels = false;
  const CudaLine* cuda_line = nullptr;
  const CudnnSeries* cudnn = nullptr; // system cuDNN
  std::string cudnn_wheels;           // cuDNN version the wheels carry
  const NcclRelease* nccl = nullptr;  // system NCCL
  std::string nccl_wheels;            // NCCL version the wheels carry
  const PythonVersion* python = nullptr;
};

bool has_system(const FrameworkVariant* v, std::string_view component) {
  return v != nullptr && std::find(v->system.begin(), v->system.end(), component) != v->system.end();
}

// Which request keys take part in a search; a relaxed search leaves one out.
struct Request {
  Want cuda, cudnn, nccl, python, fw_version;
  std::string framework;
  bool python_needed = false;
  bool ignore_suite = false; ///< don't hold the framework to the Debian base's Python
  bool need_cudnn = false;   ///< enumerate cuDNN even when no constraint asks for it (explaining)
  bool need_nccl = false;    ///< the same for NCCL
};

class Solver {
public:
  Solver(const RecipeSet& recipes, const StackContext& context)
      : m_r(recipes), m_platform(context.conda ? std::string() : context.platform),
        m_suite_python(context.base_python.empty() ? find_suite_python(recipes, context.debian_suite)
                                                   : find_python(recipes, context.base_python)) {}

  // Every combination satisfying `q`, in preference order (at most `limit`).
  std::vector<Pick> search(const Request& q, std::size_t limit) const {
    std::vector<Pick> out;
    if (!q.framework.empty()) {
      const FrameworkRecipe* fw = m_r.framework(q.framework);
      if (fw == nullptr) {
        return out;
      }
      for (const FrameworkRelease& rel : fw->releases) {
        if (!rel.why.usable()) {
          continue;
        }
        for (const std::string& version : release_versions(rel, q.fw_version)) {
          for (const FrameworkVariant* v : ordered_variants(rel)) {
            Pick p;
            p.fw = fw;
            p.release = &rel;
            p.fw_version = version;
            p.variant = v;
            extend_python(q, p, out, limit);
            if (out.size() >= limit) {
              return out;
            }
          }
        }
      }
      return out;
    }
    Pick p;
    extend_python(q, p, out, limit);
    return out;
  }

  const RecipeSet& recipes() const { return m_r; }

  // The Python of the Debian suite, if the recipes know it.
  const PythonVersion* suite_python() const { return m_suite_python; }

private:
  static std::vector<std::string> release_versions(const FrameworkRelease& rel, const Want& w) {
    std::vector<std::string> out;
    if (rel.series == "*") {
      // Any release the spec pins exactly (JAX): the version must be given in full.
      if (w.given() && w.c->is_prefix() && std::count(w.text.begin(), w.text.end(), '.') >= 2) {
        out.push_back(w.c->clauses[0].version);
      }
      return out;
    }
    for (const std::string& v : rel.versions) {
      if (w.matches(v)) {
        out.push_back(v);
      }
    }
    return out;
  }

  std::vector<const FrameworkVariant*> ordered_variants(const FrameworkRelease& rel) const {
    std::vector<const FrameworkVariant*> vs;
    for (const FrameworkVariant& v : rel.variants) {
      if (v.why.usable() && (m_platform.empty() || std::find(v.platforms.begin(), v.platforms.end(),
                                                             m_platform) != v.platforms.end())) {
        vs.push_back(&v);
      }
    }
    std::stable_sort(vs.begin(), vs.end(), [](const FrameworkVariant* a, const FrameworkVariant* b) {
      if (a->pypi_default != b->pypi_default) {
        return a->pypi_default;
      }
      const bool sa = a->status == "stable";
      const bool sb = b->status == "stable";
      if (sa != sb) {
        return sa;
      }
      return compare_dotted(a->cuda, b->cuda) > 0;
    });
    return vs;
  }

  void extend_python(const Request& q, Pick p, std::vector<Pick>& out, std::size_t limit) const {
    const Want need = p.release != nullptr ? want(p.release->python) : Want{};
    if (q.python.given()) {
      for (const PythonVersion& py : m_r.python.versions) {
        if (py.why.usable() && q.python.matches(py.version) && need.matches(py.version) && suite_allows(py)) {
          p.python = &py;
          extend_cuda(q, p, out, limit);
          if (out.size() >= limit) {
            return;
          }
        }
      }
      return;
    }
    if ((q.python_needed || p.fw != nullptr) && !q.ignore_suite) {
      const PythonVersion* py = suite_python();
      if (py != nullptr) {
        if (!need.matches(py->version)) {
          return;
        }
        p.python = py;
      }
    }
    extend_cuda(q, p, out, limit);
  }

  bool suite_allows(const PythonVersion& py) const {
    const PythonVersion* suite = suite_python();
    return suite == nullptr || suite == &py;
  }

  void extend_cuda(const Request& q, Pick p, std::vector<Pick>& out, std::size_t limit) const {
    const FrameworkVariant* v = p.variant;
    if (v != nullptr && !v->cuda.empty() && !has_system(v, "cuda")) {
      // The wheels carry CUDA: exactly the variant's.
      if (!q.cuda.matches(v->cuda)) {
        return;
      }
      p.cuda = major_minor(v->cuda);
      p.cuda_wheels = true;
      extend_cudnn(q, p, out, limit);
      return;
    }
    const bool need = q.cuda.given() || has_system(v, "cuda") || q.cudnn.given() || q.nccl.given();
    if (!need) {
      extend_cudnn(q, p, out, limit);
      return;
    }
    const Want vneed = v != nullptr ? want(v->cuda) : Want{};
    for (const CudaLine& line : m_r.cuda.lines) {
      if (!line.why.usable() || !q.cuda.matches(line.version) || !vneed.matches(line.version)) {
        continue;
      }
      p.cuda = line.version;
      p.cuda_line = &line;
      extend_cudnn(q, p, out, limit);
      if (out.size() >= limit) {
        return;
      }
    }
  }

  void extend_cudnn(const Request& q, Pick p, std::vector<Pick>& out, std::size_t limit) const {
    const FrameworkVariant* v = p.variant;
    if (v != nullptr && !v->cudnn.empty() && !has_system(v, "cudnn") && p.cuda_wheels) {
      if (!q.cudnn.matches(v->cudnn)) {
        return;
      }
      p.cudnn_wheels = v->cudnn;
      extend_nccl(q, p, out, limit);
      return;
    }
    if (!q.cudnn.given() && !q.need_cudnn && !has_system(v, "cudnn")) {
      extend_nccl(q, p, out, limit);
      return;
    }
    const Want vneed = v != nullptr ? want(v->cudnn) : Want{};
    for (const CudnnSeries& s : m_r.cudnn.series) {
      if (!s.why.usable() || !q.cudnn.matches_series(s.series) || !vneed.matches_series(s.series) ||
          !cudnn_supports(s, p.cuda)) {
        continue;
      }
      p.cudnn = &s;
      extend_nccl(q, p, out, limit);
      if (out.size() >= limit) {
        return;
      }
    }
  }

  static bool cudnn_supports(const CudnnSeries& s, const std::string& cuda) {
    const auto it = s.cuda.find(major_of(cuda));
    if (it == s.cuda.end()) {
      return false;
    }
    const std::string& range = it->second;
    const std::size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    return compare_dotted(cuda, lo) >= 0 && (compare_dotted(cuda, hi) <= 0 || dotted_prefix(hi, cuda));
  }

  void extend_nccl(const Request& q, Pick p, std::vector<Pick>& out, std::size_t limit) const {
    const FrameworkVariant* v = p.variant;
    if (v != nullptr && !v->nccl.empty() && !has_system(v, "nccl") && p.cuda_wheels) {
      if (!q.nccl.matches(v->nccl)) {
        return;
      }
      p.nccl_wheels = v->nccl;
      out.push_back(p);
      return;
    }
    if (!q.nccl.given() && !q.need_nccl && !has_system(v, "nccl")) {
      out.push_back(p);
      return;
    }
    const Want vneed = v != nullptr ? want(v->nccl) : Want{};
    // Releases with a build for exactly this CUDA X.Y first (the apt request asks for that build),
    // then those known only for its major.
    for (const bool exact : {true, false}) {
      for (const NcclRelease& r : m_r.nccl.releases) {
        if (!r.why.usable() || !q.nccl.matches(r.version) || !vneed.matches(r.version) ||
            nccl_exact(r, p.cuda) != exact || !nccl_supports(r, p.cuda)) {
          continue;
        }
        p.nccl = &r;
        out.push_back(p);
        if (out.size() >= limit) {
          return;
        }
      }
    }
  }

public:
  // NCCL is published per CUDA build; any build of the same CUDA major is taken as known for that
  // major (the apt request then asks for the build of the exact X.Y).
  static bool nccl_supports(const NcclRelease& r, const std::string& cuda) {
    return std::any_of(r.cuda_builds.begin(), r.cuda_builds.end(),
                       [&](const std::string& b) { return major_of(b) == major_of(cuda); });
  }

  static bool nccl_exact(const NcclRelease& r, const std::string& cuda) {
    return std::find(r.cuda_builds.begin(), r.cuda_builds.end(), cuda) != r.cuda_builds.end();
  }

private:
  static const PythonVersion* find_python(const RecipeSet& r, const std::string& version) {
    for (const PythonVersion& py : r.python.versions) {
      if (py.why.usable() && py.version == version) {
        return &py;
      }
    }
    return nullptr;
  }

  static const PythonVersion* find_suite_python(const RecipeSet& r, const std::string& suite) {
    if (suite.empty()) {
      return nullptr;
    }
    for (const PythonVersion& py : r.python.versions) {
      if (py.why.usable() && std::find(py.debian.begin(), py.debian.end(), suite) != py.debian.end()) {
        return &py;
      }
    }
    return nullptr;
  }

  const RecipeSet& m_r;
  std::string m_platform;              ///< only variants with wheels for it; "" any
  const PythonVersion* m_suite_python; ///< the Debian base suite's python3, computed once
};

// ---- explaining an impossible request ----------------------------------------------------------

std::string quoted_list(std::vector<std::string> values, std::string_view last_sep = " or ") {
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (values.size() > 6) {
    values.resize(5);
    return fmt::format("{}, ...", fmt::join(values, ", "));
  }
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) {
      out += i + 1 == values.size() ? std::string(last_sep) : ", ";
    }
    out += values[i];
  }
  return out;
}

// Distinct values of one component over `picks`, in order of first appearance.
std::vector<std::string> distinct(const std::vector<Pick>& picks,
                                  const std::function<std::string(const Pick&)>& f) {
  std::vector<std::string> out;
  for (const Pick& p : picks) {
    std::string v = f(p);
    if (!v.empty() && std::find(out.begin(), out.end(), v) == out.end()) {
      out.push_back(std::move(v));
    }
  }
  return out;
}

std::string cudnn_of(const Pick& p) {
  return p.cudnn != nullptr ? p.cudnn->series : p.cudnn_wheels;
}
std::string nccl_of(const Pick& p) {
  return p.nccl != nullptr ? p.nccl->version : p.nccl_wheels;
}
std::string python_of(const Pick& p) {
  return p.python != nullptr ? p.python->version : "";
}
std::string fw_of(const Pick& p) {
  return p.release != nullptr ? p.release->series : "";
}

std::string q(const std::string& s) {
  return "\"" + s + "\"";
}

// Why the framework request alone can't meet `key`: the framework's own builds.
std::string framework_builds(const Solver& solver, const Request& base, std::string_view key) {
  Request only;
  only.framework = base.framework;
  only.fw_version = base.fw_version;
  only.ignore_suite = true;
  const std::vector<Pick> picks = solver.search(only, 200);
  std::vector<std::string> parts;
  for (const Pick& p : picks) {
    std::string v;
    if (key == "cuda") {
      v = p.variant->tag + (p.cuda.empty() ? "" : " = CUDA " + p.cuda);
      if (!p.cuda_wheels) {
        v = p.variant->tag + " = system CUDA " + p.variant->cuda;
      }
    } else if (key == "cudnn") {
      v = p.variant->tag + " = cuDNN " + (p.cudnn_wheels.empty() ? p.variant->cudnn : p.cudnn_wheels);
    } else if (key == "nccl") {
      v = p.variant->tag + " = NCCL " + (p.nccl_wheels.empty() ? p.variant->nccl : p.nccl_wheels);
    } else if (key == "python") {
      v = "Python " + p.release->python;
    }
    if (std::find(parts.begin(), parts.end(), v) == parts.end()) {
      parts.push_back(v);
    }
  }
  return quoted_list(parts, ", ");
}

// What the recipes know of a component matching `text`, for messages.
std::string known_nccl(const RecipeSet& r, const Want& w) {
  std::vector<std::string> parts;
  for (const NcclRelease& n : r.nccl.releases) {
    if (n.why.usable() && w.matches(n.version)) {
      parts.push_back(fmt::format("{} for CUDA {}", n.version, fmt::join(n.cuda_builds, ", ")));
    }
  }
  return parts.empty() ? fmt::format("no NCCL matching \"{}\"", w.text)
                       : fmt::format("NCCL {}", quoted_list(parts, "; "));
}

std::string known_cudnn(const RecipeSet& r, const Want& w) {
  std::vector<std::string> parts;
  for (const CudnnSeries& s : r.cudnn.series) {
    if (s.why.usable() && w.matches_series(s.series)) {
      std::vector<std::string> ranges;
      for (const auto& [major, range] : s.cuda) {
        ranges.push_back(range);
      }
      parts.push_back(fmt::format("{} for CUDA {}", s.series, fmt::join(ranges, ", ")));
    }
  }
  return parts.empty() ? fmt::format("no cuDNN matching \"{}\"", w.text)
                       : fmt::format("cuDNN {}", quoted_list(parts, "; "));
}

// The error for a request no combination satisfies: located at the first constraint whose removal
// leaves solutions, saying why and listing what would work (each constraint relaxed in turn).
Error explain_failure(const Solver& solver, const Request& rq, const StackRequest& request,
                      const StackContext& context) {
  Diagnostics diags;
  const RecipeSet& recipes = solver.recipes();
  struct Key {
    const char* name;
    Want Request::*member;
    const StackRequest::Item* item;
    std::function<std::string(const Pick&)> value;
    const char* label;
  };
  const std::vector<Key> keys = {
      {"cuda", &Request::cuda, &request.cuda, [](const Pick& p) { return p.cuda; }, "CUDA"},
      {"cudnn", &Request::cudnn, &request.cudnn, cudnn_of, "cuDNN"},
      {"nccl", &Request::nccl, &request.nccl, nccl_of, "NCCL"},
      {"python", &Request::python, &request.python, python_of, "Python"},
  };
  const std::string fw =
      request.framework.empty()
          ? std::string()
          : request.framework +
                (request.framework_version.given() ? " " + request.framework_version.text : std::string());
  const Key* blame = nullptr;
  std::vector<std::string> alternatives;
  for (const Key& k : keys) {
    if (!k.item->given()) {
      continue;
    }
    Request relaxed = rq;
    relaxed.*(k.member) = Want{};
    relaxed.need_cudnn = request.cudnn.given();
    relaxed.need_nccl = request.nccl.given();
    const std::vector<Pick> alt = solver.search(relaxed, 400);
    std::vector<std::string> values;
    for (const std::string& v : distinct(alt, k.value)) {
      values.push_back(q(v));
    }
    if (values.empty()) {
      continue;
    }
    if (blame == nullptr) {
      blame = &k;
    }
    std::vector<std::string> rest;
    for (const Key& o : keys) {
      if (&o != &k && o.item->given()) {
        rest.push_back(fmt::format("{} {}", o.name, q(o.item->text)));
      }
    }
    if (!fw.empty()) {
      rest.insert(rest.begin(), fw);
    }
    alternatives.push_back(fmt::format("{}: {}{}", k.name, quoted_list(values),
                                       rest.empty() ? std::string() : " with " + quoted_list(rest, " and ")));
  }
  if (!request.framework.empty() && request.framework_version.given()) {
    Request other = rq;
    other.fw_version = Want{};
    const std::vector<std::string> series = distinct(solver.search(other, 400), fw_of);
    if (!series.empty()) {
      std::vector<std::string> given;
      for (const Key& o : keys) {
        if (o.item->given()) {
          given.push_back(fmt::format("{} {}", o.name, q(o.item->text)));
        }
      }
      alternatives.push_back(
          fmt::format("{}@{}{}", request.framework, quoted_list(series),
                      given.empty() ? std::string() : " with " + quoted_list(given, " and ")));
    }
  }

  std::string reason;
  std::string key_path = "stack";
  SourceLocation at = request.location;
  if (blame != nullptr) {
    key_path = std::string("stack.") + blame->name;
    at = blame->item->location;
    if (!fw.empty()) {
      reason = fmt::format("{} has no build for {} {} (its builds: {})", fw, blame->label, blame->item->text,
                           framework_builds(solver, rq, blame->name));
    } else if (std::string_view(blame->name) == "python") {
      const PythonVersion* py = solver.suite_python();
      reason = py != nullptr ? fmt::format("Python {} is not {} ({})", request.python.text,
                                           python_source(context, py->version), py->version)
                             : fmt::format("the recipes know no Python {}", request.python.text);
    } else {
      std::vector<std::string> parts;
      if (request.cudnn.given() && std::string_view(blame->name) != "cudnn") {
        parts.push_back(fmt::format("the recipes know {}", known_cudnn(recipes, want(request.cudnn))));
      }
      if (request.nccl.given() && std::string_view(blame->name) != "nccl") {
        parts.push_back(fmt::format("the recipes know {}", known_nccl(recipes, want(request.nccl))));
      }
      if (std::string_view(blame->name) == "cudnn") {
        parts.push_back(fmt::format("the recipes know {}", known_cudnn(recipes, want(request.cudnn))));
      }
      if (std::string_view(blame->name) == "nccl") {
        parts.push_back(fmt::format("the recipes know {}", known_nccl(recipes, want(request.nccl))));
      }
      reason = fmt::format("{} {} does not fit the rest of the stack ({})", blame->label, blame->item->text,
                           fmt::join(parts, "; "));
    }
  } else if (!request.framework.empty() && solver.suite_python() != nullptr && !request.python.given()) {
    key_path = "stack.framework";
    at = request.framework_location;
    reason = fmt::format("{} supports {}, but the image's Python is {} ({})", fw,
                         framework_builds(solver, rq, "python"), solver.suite_python()->version,
                         python_source(context, solver.suite_python()->version));
  } else if (!request.framework.empty()) {
    key_path = "stack.framework";
    at = request.framework_location;
    reason = fmt::format("no build of {} satisfies the other constraints together", fw);
  } else {
    reason = "no combination in the recipes satisfies every constraint together";
  }
  std::string message = reason;
  if (!alternatives.empty()) {
    message += "; what would work: " + fmt::format("{}", fmt::join(alternatives, "; or "));
  } else {
    message += "; relax one of the constraints";
  }
  diags.error(at, key_path, message);
  return diags.to_error();
}

// ---- solving -------------------------------------------------------------------------------------

// The spec's constraints as the solver's request.
Request request_of(const StackRequest& request) {
  Request rq;
  rq.cuda = want(request.cuda);
  rq.cudnn = want(request.cudnn);
  rq.nccl = want(request.nccl);
  rq.python = want(request.python);
  rq.fw_version = want(request.framework_version);
  rq.framework = request.framework;
  rq.python_needed = request.python.given();
  return rq;
}

// The framework must be in the recipes, with a usable release matching the requested version.
Result<void> check_framework_known(const Solver& solver, const StackRequest& request, const Request& rq,
                                   const StackContext& context) {
  if (request.framework.empty()) {
    return {};
  }
  Diagnostics diags;
  const FrameworkRecipe* fw = solver.recipes().framework(request.framework);
  if (fw == nullptr) {
    diags.error(request.framework_location, "stack.framework",
                fmt::format("the recipes have no framework '{}'", request.framework));
    return diags.to_error();
  }
  Request only;
  only.framework = rq.framework;
  only.fw_version = rq.fw_version;
  only.ignore_suite = true;
  if (!solver.search(only, 1).empty()) {
    return {};
  }
  if (!context.conda && context.platform != "linux/amd64") {
    // Builds exist, but none with wheels for this platform: name it, and what it has.
    StackContext any = context;
    any.platform.clear();
    const Solver everywhere(solver.recipes(), any);
    if (!everywhere.search(only, 1).empty()) {
      std::vector<std::string> builds;
      for (const FrameworkRelease& rel : fw->releases) {
        for (const FrameworkVariant& v : rel.variants) {
          if (rel.why.usable() && v.why.usable() &&
              std::find(v.platforms.begin(), v.platforms.end(), context.platform) != v.platforms.end()) {
            builds.push_back(fmt::format("{} {}", rel.series, v.tag));
          }
        }
      }
      diags.error(
          request.framework_version.given() ? request.framework_version.location : request.framework_location,
          "stack.framework",
          fmt::format("{} {} has no wheels for {} in the recipes (its builds for {}: {}); pick one of "
                      "those",
                      request.framework,
                      request.framework_version.given() ? request.framework_version.text : "",
                      context.platform, context.platform,
                      builds.empty() ? std::string("none") : fmt::format("{}", fmt::join(builds, ", "))));
      return diags.to_error();
    }
  }
  std::vector<std::string> known;
  bool any_series = false;
  for (const FrameworkRelease& rel : fw->releases) {
    if (rel.why.usable()) {
      any_series = any_series || rel.series == "*";
      if (rel.series != "*") {
        known.push_back(rel.series);
      }
    }
  }
  diags.error(
      request.framework_version.given() ? request.framework_version.location : request.framework_location,
      "stack.framework",
      any_series ? fmt::format("{} needs an exact release, e.g. {}@0.4.30 (the recipes don't list "
                               "{} releases; they pin the version you give)",
                               request.framework, request.framework, request.framework)
                 : fmt::format("the recipes know no {} release matching '{}'; known: {}", request.framework,
                               request.framework_version.text, quoted_list(known)));
  return diags.to_error();
}

// The MPI implementation must be in the recipes, with a usable series matching the requested version.
Result<void> check_mpi_known(const RecipeSet& recipes, const StackRequest& request) {
  if (request.mpi.empty()) {
    return {};
  }
  const MpiRecipe* mpi = recipes.mpi(request.mpi);
  const Want mw = want(request.mpi_version);
  const bool found =
      mpi != nullptr && std::any_of(mpi->series.begin(), mpi->series.end(), [&](const MpiSeries& s) {
        return s.why.usable() && mw.matches_series(s.series);
      });
  if (found) {
    return {};
  }
  std::vector<std::string> known;
  if (mpi != nullptr) {
    for (const MpiSeries& s : mpi->series) {
      if (s.why.usable()) {
        known.push_back(s.series);
      }
    }
  }
  Diagnostics diags;
  diags.error(request.mpi_version.given() ? request.mpi_version.location : request.mpi_location, "stack.mpi",
              fmt::format("the recipes know no {} series matching '{}'; known: {}", request.mpi,
                          request.mpi_version.text, quoted_list(known)));
  return diags.to_error();
}

// The chosen combination turned into the lock's choices (with the facts behind them) and the
// package requests that deliver them, one component at a time.
class SolutionWriter {
public:
  SolutionWriter(const StackRequest& request, const RecipeSet& recipes, const StackContext& context,
                 const Request& rq, const Pick& p)
      : m_request(request), m_recipes(recipes), m_context(context), m_rq(rq), m_p(p), m_v(p.variant),
        m_fw_at(request.framework_location) {
    LockedStack& st = m_sol.locked;
    st.recipes =
        recipes.origin.kind == "builtin" ? "builtin" : recipes.origin.kind + " " + recipes.origin.url;
    st.recipes_commit = recipes.origin.commit;
    st.recipes_digest = recipes.origin.digest;
  }

  StackSolution take() { return std::move(m_sol); }

  void add_python() {
    const Pick& p = m_p;
    if (p.python == nullptr) {
      return;
    }
    LockedStackChoice c{"python", "python", p.python->version, "", "apt", {}, {}};
    if (!m_context.base_python_path.empty()) {
      // The base's own interpreter: nothing to install.
      c.via = "base";
      c.facts.push_back(fmt::format("the base image {} has Python {} ({}, not a Debian package)",
                                    m_context.base_name, p.python->version, m_context.base_python_path));
    } else {
      for (const AptPattern& pat : m_recipes.python.apt) {
        add_apt(c, pat, p.python->version, p.cuda, at(m_request.python));
      }
    }
    const std::string& suite = m_context.debian_suite;
    if (m_context.base_python_path.empty() && !m_context.base_python.empty() &&
        m_context.base_python == p.python->version) {
      c.facts.push_back(fmt::format("the base image {} has Python {} (python{} installed)",
                                    m_context.base_name, p.python->version, p.python->version));
    }
    if (!suite.empty() &&
        std::find(p.python->debian.begin(), p.python->debian.end(), suite) != p.python->debian.end()) {
      c.facts.push_back(fmt::format("Debian {}'s python3 is Python {} ({})", suite, p.python->version,
                                    describe_why(p.python->why)));
    }
    if (p.release != nullptr) {
      c.facts.push_back(fmt::format("{} {} supports Python {} ({})", p.fw->name, p.release->series,
                                    p.release->python, describe_why(p.release->why)));
    }
    m_sol.locked.choices.push_back(std::move(c));
  }

  void add_cuda() {
    const Pick& p = m_p;
    const FrameworkVariant* v = m_v;
    if (p.cuda.empty()) {
      return;
    }
    LockedStack& st = m_sol.locked;
    st.cuda = p.cuda;
    LockedStackChoice c{"cuda", "cuda", p.cuda, "", p.cuda_wheels ? "wheels" : "apt", {}, {}};
    if (p.cuda_wheels) {
      c.facts.push_back(fmt::format("{} {} {} wheels carry CUDA {} ({})", p.fw->name, p.fw_version, v->tag,
                                    v->cuda, describe_why(v->why)));
    } else {
      const auto flavor = m_recipes.cuda.apt.find(m_request.cuda_flavor);
      if (flavor != m_recipes.cuda.apt.end()) {
        for (const AptPattern& pat : flavor->second) {
          add_apt(c, pat, p.cuda, p.cuda, at(m_request.cuda));
        }
      }
      if (p.cuda_line != nullptr) {
        c.facts.push_back(
            fmt::format("CUDA {} is a known CUDA release ({})", p.cuda, describe_why(p.cuda_line->why)));
      }
      if (m_context.base_cuda == p.cuda) {
        c.facts.push_back(fmt::format("the base image {} has CUDA {} ({} installed)", m_context.base_name,
                                      p.cuda, m_context.base_cuda_package));
      }
      if (v != nullptr && !v->cuda.empty()) {
        c.facts.push_back(fmt::format("{} {} {} needs system CUDA {} ({})", p.fw->name, p.fw_version, v->tag,
                                      v->cuda, describe_why(v->why)));
      }
    }
    st.driver_floor = m_recipes.cuda.driver_floor_for(p.cuda);
    if (v != nullptr && !v->driver_min.empty() &&
        (st.driver_floor.empty() || compare_dotted(v->driver_min, st.driver_floor) > 0)) {
      st.driver_floor = v->driver_min;
    }
    if (!st.driver_floor.empty()) {
      c.facts.push_back(
          fmt::format("CUDA {} needs Linux driver >= {} (recipes/cuda/drivers.yaml, the driver its GA "
                      "release shipped with; else the major's minor-version-compatibility floor)",
                      p.cuda, st.driver_floor));
    }
    st.choices.push_back(std::move(c));
  }

  void add_cudnn() {
    const Pick& p = m_p;
    if (p.cudnn != nullptr) {
      const std::string version = pattern_version(m_rq.cudnn, p.cudnn->series);
      LockedStackChoice c{"cudnn", "cudnn", version, "", "apt", {}, {}};
      const auto apt = m_recipes.cudnn.apt.find(major_of(p.cudnn->series));
      if (apt != m_recipes.cudnn.apt.end()) {
        for (const AptPattern& pat : apt->second) {
          add_apt(c, pat, version, p.cuda, at(m_request.cudnn));
        }
      }
      const auto range = p.cudnn->cuda.find(major_of(p.cuda));
      c.facts.push_back(fmt::format("cuDNN {} builds for CUDA {} support CUDA {} ({})", p.cudnn->series,
                                    major_of(p.cuda), range->second, describe_why(p.cudnn->why)));
      m_sol.locked.choices.push_back(std::move(c));
    } else if (!p.cudnn_wheels.empty()) {
      LockedStackChoice c{"cudnn", "cudnn", p.cudnn_wheels, "", "wheels", {}, {}};
      c.facts.push_back(fmt::format("{} {} {} pins cuDNN {} ({})", p.fw->name, p.fw_version, m_v->tag,
                                    p.cudnn_wheels, describe_why(m_v->why)));
      m_sol.locked.choices.push_back(std::move(c));
    }
  }

  void add_nccl() {
    const Pick& p = m_p;
    if (p.nccl != nullptr) {
      const std::string version = pattern_version(m_rq.nccl, major_minor(p.nccl->version));
      LockedStackChoice c{"nccl", "nccl", version, "", "apt", {}, {}};
      for (const AptPattern& pat : m_recipes.nccl.apt) {
        add_apt(c, pat, version, p.cuda, at(m_request.nccl));
      }
      c.facts.push_back(fmt::format("NCCL {} is published for CUDA {} ({})", p.nccl->version,
                                    fmt::join(p.nccl->cuda_builds, ", "), describe_why(p.nccl->why)));
      m_sol.locked.choices.push_back(std::move(c));
    } else if (!p.nccl_wheels.empty()) {
      LockedStackChoice c{"nccl", "nccl", p.nccl_wheels, "", "wheels", {}, {}};
      c.facts.push_back(fmt::format("{} {} {} pins NCCL {} ({})", p.fw->name, p.fw_version, m_v->tag,
                                    p.nccl_wheels, describe_why(m_v->why)));
      m_sol.locked.choices.push_back(std::move(c));
    }
  }

  void add_mpi() {
    if (m_request.mpi.empty()) {
      return;
    }
    const MpiRecipe* mpi = m_recipes.mpi(m_request.mpi);
    const Want mw = want(m_request.mpi_version);
    const MpiSeries* series = nullptr;
    for (const MpiSeries& s : mpi->series) {
      if (s.why.usable() && mw.matches_series(s.series)) {
        series = &s;
        break;
      }
    }
    const std::string version = mw.given() ? pattern_version(mw, series->series) : std::string();
    LockedStackChoice c{"mpi", mpi->impl, version.empty() ? "*" : version, "", "apt", {}, {}};
    for (const AptPattern& pat : mpi->apt) {
      AptPattern use = pat;
      if (version.empty()) {
        use.version.clear(); // no version asked: the repository's newest
      }
      add_apt(c, use, version, m_p.cuda,
              m_request.mpi_version.given() ? m_request.mpi_version.location : m_request.mpi_location);
    }
    if (series != nullptr) {
      std::string fact = fmt::format("{} {}", mpi->impl == "openmpi" ? "Open MPI" : "MPICH", series->series);
      if (!series->soname.empty()) {
        fact += fmt::format(" provides {}", series->soname);
      }
      if (!series->pmix.empty()) {
        fact += fmt::format(", PMIx {}", series->pmix);
      }
      c.facts.push_back(fmt::format("{} ({})", fact, describe_why(series->why)));
    }
    m_sol.locked.choices.push_back(std::move(c));
  }

  void add_framework() {
    const Pick& p = m_p;
    const FrameworkVariant* v = m_v;
    if (p.fw == nullptr) {
      return;
    }
    LockedStackChoice c{"framework", p.fw->name, p.fw_version, v->tag, "wheels", {}, {}};
    for (const std::string& w : v->wheels) {
      add_pip(c, fill_pattern(w, p.fw_version, p.cuda));
    }
    if (m_context.platform == "linux/amd64") { // the pins are the x86_64 wheels' Requires-Dist
      for (const WheelPin& pin : v->pins) {
        add_pip(c, pin.name + "==" + pin.version);
      }
    } else {
      c.facts.push_back(
          fmt::format("{} wheels of {} {} for {} (manylinux aarch64, sbsa): their own Requires-Dist "
                      "decides the NVIDIA wheels (the recipes' pins are the x86_64 wheels')",
                      v->tag, p.fw->name, p.fw_version, m_context.platform));
    }
    c.facts.push_back(fmt::format("{} {} {} ({}{}){} ({})", p.fw->name, p.fw_version, v->tag,
                                  v->status.empty() ? "" : v->status,
                                  v->pypi_default ? ", PyPI's default build" : "",
                                  v->index.empty() ? "" : " from " + v->index, describe_why(v->why)));
    m_sol.locked.choices.push_back(std::move(c));
  }

  // The lowest compute capability every chosen part supports, the framework's GPU architectures,
  // and NVIDIA_REQUIRE_CUDA from them.
  void set_gpu_requirements() {
    const Pick& p = m_p;
    const FrameworkVariant* v = m_v;
    LockedStack& st = m_sol.locked;
    std::string min_cc = p.cuda.empty() ? std::string() : m_recipes.cuda.min_cc_for(p.cuda);
    const auto raise = [&min_cc](const std::string& cc) {
      if (!cc.empty() && (min_cc.empty() || compare_dotted(cc, min_cc) > 0)) {
        min_cc = cc;
      }
    };
    if (p.cudnn != nullptr) {
      raise(p.cudnn->min_cc);
    }
    if (v != nullptr) {
      raise(v->min_cc);
      const std::vector<std::string>& archs = m_context.platform == "linux/arm64" ? v->arm64_archs : v->archs;
      st.archs = archs;
      if (!archs.empty()) {
        raise(*std::min_element(archs.begin(), archs.end(), [](const std::string& a, const std::string& b) {
          return compare_dotted(a, b) < 0;
        }));
      }
    }
    st.min_cc = min_cc;
    st.nvidia_require_cuda = nvidia_require_cuda(st);
  }

private:
  // Where a component's requests point: its own constraint, else the framework that implied it.
  const SourceLocation& at(const StackRequest::Item& item) const {
    return item.given() ? item.location : m_fw_at;
  }

  void add_apt(LockedStackChoice& choice, const AptPattern& pattern, const std::string& version,
               const std::string& cuda, const SourceLocation& location) {
    PackageRequest r;
    r.name = fill_pattern(pattern.name, version, cuda);
    r.version = fill_pattern(pattern.version, version, cuda);
    r.text = r.version.empty() ? r.name : r.name + "=" + r.version;
    r.origin = "stack." + choice.component;
    r.location = location;
    choice.packages.push_back(r.text);
    m_sol.apt.push_back(std::move(r));
  }

  void add_pip(LockedStackChoice& choice, const std::string& text) {
    PackageRequest r;
    r.text = text;
    r.name = text;
    r.origin = "stack." + choice.component;
    r.location = m_fw_at;
    choice.packages.push_back(text);
    m_sol.pip.push_back(std::move(r));
  }

  const StackRequest& m_request;
  const RecipeSet& m_recipes;
  const StackContext& m_context;
  const Request& m_rq;
  const Pick& m_p;
  const FrameworkVariant* m_v; ///< the framework's build, or nullptr
  const SourceLocation m_fw_at;
  StackSolution m_sol;
};

// ---- over conda ------------------------------------------------------------------------------

// A stack constraint as a conda version spec: a bare version is a series ("2.3" -> "2.3.*", which
// conda matches against 2.3 and 2.3.x), the operators carry over; "*" for none.
std::string conda_version(const Want& w) {
  if (!w.given()) {
    return "*";
  }
  std::string out;
  for (const VersionConstraint::Clause& c : w.c->clauses) {
    out += out.empty() ? "" : ",";
    out += c.op.empty() ? c.version + ".*" : c.op + c.version;
  }
  return out;
}

// The conda packages a framework is: the package whose version is the framework's, and the one
// whose build says CPU or CUDA (the same for pytorch and tensorflow; jax's GPU code is jaxlib).
struct CondaFramework {
  std::string_view name;
  std::string_view package;       ///< carries the framework's version
  std::string_view build_package; ///< its build string says cuda or cpu
};
constexpr std::array k_conda_frameworks = {CondaFramework{"pytorch", "pytorch", "pytorch"},
                                           CondaFramework{"tensorflow", "tensorflow", "tensorflow"},
                                           CondaFramework{"jax", "jax", "jaxlib"}};

// The conda package names each component may be delivered by, the first the one the stack asks for.
std::vector<std::string> conda_names_of(const LockedStackChoice& c) {
  if (c.component == "python") {
    return {"python"};
  }
  if (c.component == "cuda") {
    return {"cuda-version", "cudatoolkit", "cuda-cudart"};
  }
  if (c.component == "cudnn") {
    return {"cudnn"};
  }
  if (c.component == "nccl") {
    return {"nccl"};
  }
  if (c.component == "mpi") {
    return {c.name};
  }
  if (c.name == "pytorch") {
    return {"pytorch", "pytorch-cuda"};
  }
  if (c.name == "jax") {
    return {"jax", "jaxlib"};
  }
  return {c.name};
}

// The stack over a conda environment: the combination the recipes chose sets the CUDA (when the
// spec leaves it open) and its driver floor; each part becomes a conda request the environment's
// solve satisfies from the spec's channels, with the spec's own constraints (not the recipes'
// wheel pins) as the versions.
StackSolution conda_solution(const StackRequest& request, const RecipeSet& recipes, const Pick& p) {
  StackSolution sol;
  LockedStack& st = sol.locked;
  st.recipes = recipes.origin.kind == "builtin" ? "builtin" : recipes.origin.kind + " " + recipes.origin.url;
  st.recipes_commit = recipes.origin.commit;
  st.recipes_digest = recipes.origin.digest;
  const auto add = [&](LockedStackChoice& c, const std::string& spec, const SourceLocation& at,
                       bool if_offered = false) {
    PackageRequest r;
    r.text = spec;
    r.name = spec.substr(0, spec.find(' '));
    r.origin = "stack." + c.component;
    r.location = at;
    r.if_offered = if_offered;
    c.packages.push_back(spec + (if_offered ? " (if a channel has it)" : ""));
    sol.conda.push_back(std::move(r));
  };
  const SourceLocation& fw_at = request.framework_location;
  if (request.python.given()) {
    LockedStackChoice c{"python", "python", request.python.text, "", "conda", {}, {}};
    add(c, "python " + conda_version(want(request.python)), request.python.location);
    c.facts.emplace_back("the spec's Python comes from conda (packages.conda)");
    st.choices.push_back(std::move(c));
  }
  if (!p.cuda.empty()) {
    st.cuda = p.cuda;
    LockedStackChoice c{"cuda", "cuda", p.cuda, "", "conda", {}, {}};
    const SourceLocation& at = request.cuda.given() ? request.cuda.location : fw_at;
    add(c, "cuda-version " + p.cuda + ".*", at);
    c.facts.push_back(
        fmt::format("conda's cuda-version {} selects the CUDA {} packages; the solve has __cuda={} "
                    "so GPU builds can be chosen on a machine without a GPU",
                    p.cuda, p.cuda, p.cuda));
    if (!request.cuda.given() && p.variant != nullptr) {
      c.facts.push_back(fmt::format("{} {} {} is the build the recipes prefer ({})", p.fw->name, p.fw_version,
                                    p.variant->tag, describe_why(p.variant->why)));
    }
    st.driver_floor = recipes.cuda.driver_floor_for(p.cuda);
    if (!st.driver_floor.empty()) {
      c.facts.push_back(fmt::format("CUDA {} needs Linux driver >= {} (recipes/cuda/drivers.yaml)", p.cuda,
                                    st.driver_floor));
    }
    st.min_cc = recipes.cuda.min_cc_for(p.cuda);
    st.choices.push_back(std::move(c));
  }
  for (const auto& [component, item] :
       {std::pair<const char*, const StackRequest::Item*>{"cudnn", &request.cudnn},
        std::pair<const char*, const StackRequest::Item*>{"nccl", &request.nccl}}) {
    if (item->given()) {
      LockedStackChoice c{component, component, item->text, "", "conda", {}, {}};
      add(c, fmt::format("{} {}", component, conda_version(want(*item))), item->location);
      st.choices.push_back(std::move(c));
    }
  }
  if (!request.mpi.empty()) {
    LockedStackChoice c{"mpi", request.mpi, request.mpi_version.given() ? request.mpi_version.text : "*",
                        "",    "conda",     {},
                        {}};
    add(c, request.mpi + " " + conda_version(want(request.mpi_version)),
        request.mpi_version.given() ? request.mpi_version.location : request.mpi_location);
    st.choices.push_back(std::move(c));
  }
  if (!request.framework.empty()) {
    const std::string version = request.framework_version.given() ? request.framework_version.text : "*";
    const std::string build = p.cuda.empty() ? "*cpu*" : "*cuda*";
    LockedStackChoice c{"framework", request.framework, version, p.cuda.empty() ? "cpu" : "cuda", "conda", {},
                        {}};
    for (const CondaFramework& f : k_conda_frameworks) {
      if (f.name != request.framework) {
        continue;
      }
      const std::string v = conda_version(want(request.framework_version));
      if (f.package == f.build_package) {
        add(c, fmt::format("{} {} {}", f.package, v, build), fw_at);
      } else {
        add(c, fmt::format("{} {}", f.package, v), fw_at);
        add(c, fmt::format("{} * {}", f.build_package, build), fw_at);
      }
    }
    if (request.framework == "pytorch" && !p.cuda.empty()) {
      add(c, fmt::format("pytorch-cuda {}.*", p.cuda), fw_at, true);
    }
    c.facts.push_back(fmt::format("{}: {} build from the conda channels (build {}{})", request.framework,
                                  p.cuda.empty() ? "the CPU" : "a CUDA " + p.cuda, build,
                                  request.framework == "pytorch" && !p.cuda.empty()
                                      ? "; the pytorch channel's pytorch-cuda selects its CUDA"
                                      : ""));
    st.choices.push_back(std::move(c));
  }
  st.nvidia_require_cuda = nvidia_require_cuda(st);
  return sol;
}

} // namespace

StackContext stack_context(const Spec& spec) {
  StackContext ctx;
  if (spec.base.kind == BaseImage::Kind::debian) {
    ctx.debian_suite = spec.base.suite;
  }
  ctx.conda = !spec.packages.conda.empty();
  ctx.platform = spec.platform.str();
  return ctx;
}

Result<StackSolution> solve_stack(const StackRequest& request, const RecipeSet& recipes,
                                  const StackContext& given) {
  // Over conda the environment brings its own Python and CUDA: the base's play no part, and the
  // conda solve (not the wheels' pins) decides cuDNN and NCCL.
  StackContext context = given;
  if (context.conda) {
    context = StackContext{};
    context.conda = true;
    context.platform = given.platform;
  }
  const Solver solver(recipes, context);
  Request rq = request_of(request);
  if (context.conda) {
    rq.cudnn = Want{};
    rq.nccl = Want{};
  }
  // Over a base with CUDA, the stack uses the base's.
  if (!context.base_cuda.empty()) {
    if (request.cuda.given() && !rq.cuda.matches(context.base_cuda)) {
      Diagnostics diags;
      diags.error(request.cuda.location, "stack.cuda",
                  fmt::format("the base image {} has CUDA {} ({} installed), and a stack over it uses that "
                              "CUDA; ask for cuda: \"{}\", or build on a base with CUDA {}",
                              context.base_name, context.base_cuda, context.base_cuda_package,
                              context.base_cuda, request.cuda.text));
      return diags.to_error();
    }
    rq.cuda = want(context.base_cuda);
  }
  // Unknown recipes first: nothing else can be said about them.
  LS_TRY(check_framework_known(solver, request, rq, context));
  LS_TRY(check_mpi_known(recipes, request));
  // The preferred combination; when there is none, an error at the constraint to change.
  const std::vector<Pick> picks = solver.search(rq, 1);
  if (picks.empty()) {
    return explain_failure(solver, rq, request, context);
  }
  if (context.conda) {
    return conda_solution(request, recipes, picks.front());
  }
  // The chosen combination -> choices, requests and facts, in the lock's order.
  SolutionWriter out(request, recipes, context, rq, picks.front());
  out.add_python();
  out.add_cuda();
  out.add_cudnn();
  out.add_nccl();
  out.add_mpi();
  out.add_framework();
  out.set_gpu_requirements();
  return out.take();
}

void complete_conda_stack(LockedStack& stack, const RecipeSet& recipes,
                          const std::vector<LockedArtifact>& conda) {
  const auto solved = [&conda](const std::string& name) -> const LockedArtifact* {
    for (const LockedArtifact& a : conda) {
      if (a.kind == "conda" && a.name == name) {
        return &a;
      }
    }
    return nullptr;
  };
  // Where a record came from: "pytorch 2.3.1 py3.11_cuda12.1_0 from https://…/pytorch/linux-64".
  const auto record = [](const LockedArtifact& a) {
    const std::size_t slash = a.url.rfind('/');
    return fmt::format("{} {} {} from {}", a.name, a.version, a.conda ? a.conda->build : "",
                       slash == std::string::npos ? a.url : a.url.substr(0, slash));
  };
  for (LockedStackChoice& c : stack.choices) {
    for (const std::string& name : conda_names_of(c)) {
      if (const LockedArtifact* a = solved(name)) {
        if (name == conda_names_of(c).front()) {
          c.version = c.component == "cuda" ? major_minor(a->version) : a->version;
        }
        c.facts.push_back("conda solved " + record(*a));
      }
    }
  }
  // The parts the environment has without the stack asking: the stack report shows them too.
  const std::array<std::pair<const char*, std::vector<std::string>>, 5> parts = {{
      {"python", {"python"}},
      {"cuda", {"cuda-version", "cudatoolkit"}},
      {"cudnn", {"cudnn"}},
      {"nccl", {"nccl"}},
      {"mpi", {"openmpi", "mpich"}},
  }};
  for (const auto& part : parts) {
    const std::string component = part.first;
    const std::vector<std::string>& names = part.second;
    if (std::any_of(stack.choices.begin(), stack.choices.end(),
                    [&](const LockedStackChoice& c) { return c.component == component; })) {
      continue;
    }
    for (const std::string& name : names) {
      if (const LockedArtifact* a = solved(name)) {
        const std::string component_name = std::string(component) == "mpi" ? name : component;
        LockedStackChoice c{component,
                            component_name,
                            std::string(component) == "cuda" ? major_minor(a->version) : a->version,
                            "",
                            "conda",
                            {},
                            {}};
        c.facts.push_back(
            fmt::format("not asked for by the stack: conda solved {} ({})", record(*a), a->reason));
        stack.choices.push_back(std::move(c));
        break;
      }
    }
  }
  const std::array<std::string_view, 6> order = {"python", "cuda", "cudnn", "nccl", "mpi", "framework"};
  std::stable_sort(stack.choices.begin(), stack.choices.end(), [&order](const auto& a, const auto& b) {
    return std::find(order.begin(), order.end(), a.component) <
           std::find(order.begin(), order.end(), b.component);
  });
  // A CUDA the stack left open is the environment's.
  if (stack.cuda.empty()) {
    for (const LockedStackChoice& c : stack.choices) {
      if (c.component == "cuda") {
        stack.cuda = c.version;
        stack.driver_floor = recipes.cuda.driver_floor_for(c.version);
        stack.min_cc = recipes.cuda.min_cc_for(c.version);
        stack.nvidia_require_cuda = nvidia_require_cuda(stack);
      }
    }
  }
}

std::vector<std::string> describe_stack(const LockedStack& stack) {
  std::vector<std::string> out;
  for (const LockedStackChoice& c : stack.choices) {
    std::string what = c.name == c.component ? c.version : c.name + " " + c.version;
    if (!c.variant.empty()) {
      what += " (" + c.variant + ")";
    }
    out.push_back(
        fmt::format("{:<10} {:<22} {:<7} {}", c.component, what, c.via,
                    c.packages.empty() ? std::string("-") : fmt::format("{}", fmt::join(c.packages, " "))));
  }
  if (!stack.driver_floor.empty()) {
    out.push_back(fmt::format("driver     >= {}", stack.driver_floor));
  }
  if (!stack.min_cc.empty()) {
    out.push_back(fmt::format("gpu        compute capability >= {}{}", stack.min_cc,
                              stack.archs.empty()
                                  ? std::string()
                                  : fmt::format(" (binaries for {})", fmt::join(stack.archs, ", "))));
  }
  if (!stack.nvidia_require_cuda.empty()) {
    out.push_back(fmt::format("env        NVIDIA_REQUIRE_CUDA={}", stack.nvidia_require_cuda));
  }
  return out;
}

StackImageConfig stack_image_config(const LockedStack& stack) {
  StackImageConfig cfg;
  if (!stack.nvidia_require_cuda.empty()) {
    cfg.env.emplace_back("NVIDIA_REQUIRE_CUDA", stack.nvidia_require_cuda);
  }
  for (const LockedStackChoice& c : stack.choices) {
    std::string value = c.name == c.component ? c.version : c.name + " " + c.version;
    if (!c.variant.empty()) {
      value += " " + c.variant;
    }
    cfg.labels["dev.lockstep.stack." + c.component] = value;
  }
  if (!stack.min_cc.empty()) {
    cfg.labels["dev.lockstep.gpu.min-cc"] = stack.min_cc;
  }
  if (!stack.archs.empty()) {
    cfg.labels["dev.lockstep.gpu.archs"] = fmt::format("{}", fmt::join(stack.archs, ","));
  }
  return cfg;
}

} // namespace lockstep::envspec
