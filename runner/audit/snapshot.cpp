// Snapshots as JSON (snapshot.hpp): written with a fixed key order, read back strictly, the first
// problem reported with its key path.
#include "runner/audit/snapshot.hpp"

#include "runner/audit/doctor_text.hpp"
#include "support/base/json.hpp"
#include "support/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace lockstep::runner {

using namespace doctor_detail; // doctor's shared bounds and text rules (doctor_text.hpp)

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using Status = Check::Status;

constexpr std::size_t k_max_snapshot = 64ULL << 20;
constexpr int k_max_snapshot_depth = 16;
constexpr std::size_t k_max_checks = 32;

// ---------------------------------------------------------------------------------------------
// JSON out

ojson nullable(const std::string& s) {
  return s.empty() ? ojson(nullptr) : ojson(s);
}

ojson facts_object(const envspec::ImageFacts& f) {
  ojson mpi =
      f.mpi_impl.empty() ? ojson(nullptr) : ojson{{"impl", f.mpi_impl}, {"version", nullable(f.mpi.version)}};
  return {{"mpi", std::move(mpi)},
          {"pmix", nullable(f.pmix.version)},
          {"ucx", nullable(f.ucx.version)},
          {"libfabric", nullable(f.libfabric.version)},
          {"cuda", nullable(f.cuda.version)},
          {"cuda_driver_floor", nullable(f.cuda_driver_floor)}};
}

// ---------------------------------------------------------------------------------------------
// JSON in (strict)

// Reads one snapshot document; the first problem is kept and reported with its key path.
class SnapshotReader {
public:
  explicit SnapshotReader(std::string_view what) : m_what(what) {}

  Error fail(const std::string& path, std::string_view message) const {
    return invalid_input("{}: {}: {}", m_what, path.empty() ? "(top level)" : path, message);
  }

  Result<void> keys(const json& j, const std::string& path, std::initializer_list<std::string_view> required,
                    std::initializer_list<std::string_view> optional = {}) const {
    if (!j.is_object()) {
      return fail(path, "expected an object");
    }
    for (const auto& [key, value] : j.items()) {
      if (std::find(required.begin(), required.end(), key) == required.end() &&
          std::find(optional.begin(), optional.end(), key) == optional.end()) {
        return fail(path, fmt::format("unknown key '{}'", printable_ascii(key, 64)));
      }
    }
    for (std::string_view key : required) {
      if (!j.contains(key)) {
        return fail(path, fmt::format("missing key '{}'", key));
      }
    }
    return {};
  }

  // A string member: printable, at most `max` bytes; null allowed (as "") with `nullable`.
  Result<std::string> str(const json& j, const std::string& path, std::string_view key, std::size_t max,
                          bool is_nullable) const {
    const json& v = j.at(key);
    const std::string where = sub(path, key);
    if (v.is_null() && is_nullable) {
      return std::string();
    }
    if (!v.is_string()) {
      return fail(where, is_nullable ? "expected a string or null" : "expected a string");
    }
    std::string s = v.get<std::string>();
    if (s.empty() && is_nullable) {
      return fail(where, "expected a non-empty string or null");
    }
    if (s.empty()) {
      return fail(where, "expected a non-empty string");
    }
    if (s.size() > max) {
      return fail(where, fmt::format("longer than {} bytes", max));
    }
    if (has_controls(s)) {
      return fail(where, "contains control characters");
    }
    return s;
  }

  // A version member (see version_token), or null with `nullable`.
  Result<std::string> version(const json& j, const std::string& path, std::string_view key,
                              bool is_nullable) const {
    LS_TRY_ASSIGN(std::string s, str(j, path, key, k_max_version, is_nullable));
    if (!s.empty() && version_token(s).empty()) {
      return fail(sub(path, key), fmt::format("'{}' is not a version", s));
    }
    return s;
  }

  Result<std::string> one_of(const json& j, const std::string& path, std::string_view key,
                             std::initializer_list<std::string_view> values) const {
    LS_TRY_ASSIGN(std::string s, str(j, path, key, 64, false));
    if (std::find(values.begin(), values.end(), s) == values.end()) {
      std::string list;
      for (std::string_view v : values) {
        list += (list.empty() ? "" : ", ") + std::string(v);
      }
      return fail(sub(path, key), fmt::format("'{}' is not one of {}", s, list));
    }
    return s;
  }

  static std::string sub(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  static std::string item(const std::string& path, std::size_t i) { return fmt::format("{}[{}]", path, i); }

private:
  std::string m_what;
};

Result<SnapshotHost> read_host(const SnapshotReader& r, const json& j) {
  const std::string p = "host";
  LS_TRY(r.keys(j, p,
                {"arch", "os", "kernel", "glibc", "user_namespaces", "driver", "gpus", "mpi", "pmix", "ucx",
                 "libfabric", "slurm"}));
  SnapshotHost h;
  LS_TRY_ASSIGN(h.arch, r.str(j, p, "arch", k_max_name, true));
  LS_TRY_ASSIGN(h.os, r.str(j, p, "os", k_max_text, true));
  LS_TRY_ASSIGN(h.kernel, r.str(j, p, "kernel", k_max_name, true));
  LS_TRY_ASSIGN(h.glibc, r.version(j, p, "glibc", true));
  if (!j["user_namespaces"].is_boolean()) {
    return r.fail("host.user_namespaces", "expected true or false");
  }
  h.user_namespaces = j["user_namespaces"].get<bool>();
  if (const json& d = j["driver"]; !d.is_null()) {
    LS_TRY(r.keys(d, "host.driver", {"version", "from"}));
    SnapshotDriver driver;
    LS_TRY_ASSIGN(driver.version, r.version(d, "host.driver", "version", false));
    LS_TRY_ASSIGN(driver.from, r.str(d, "host.driver", "from", k_max_path, false));
    h.driver = std::move(driver);
  }
  const json& gpus = j["gpus"];
  if (!gpus.is_array() || gpus.size() > k_max_gpus) {
    return r.fail("host.gpus", fmt::format("expected an array of at most {} GPUs", k_max_gpus));
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const std::string gp = SnapshotReader::item("host.gpus", i);
    const json& g = gpus[i];
    LS_TRY(r.keys(g, gp, {"index", "name", "uuid", "compute_capability", "memory_mib"}));
    SnapshotGpu gpu;
    if (!g["index"].is_number_unsigned() || g["index"].get<std::uint64_t>() >= k_max_gpus) {
      return r.fail(gp + ".index", fmt::format("expected an integer from 0 to {}", k_max_gpus - 1));
    }
    gpu.index = g["index"].get<int>();
    LS_TRY_ASSIGN(gpu.name, r.str(g, gp, "name", k_max_name, true));
    LS_TRY_ASSIGN(gpu.uuid, r.str(g, gp, "uuid", k_max_name, true));
    LS_TRY_ASSIGN(gpu.compute_capability, r.version(g, gp, "compute_capability", true));
    if (const json& m = g["memory_mib"]; !m.is_null()) {
      if (!m.is_number_unsigned()) {
        return r.fail(gp + ".memory_mib", "expected an integer or null");
      }
      gpu.memory_mib = m.get<std::uint64_t>();
    }
    h.gpus.push_back(std::move(gpu));
  }
  if (const json& m = j["mpi"]; !m.is_null()) {
    LS_TRY(r.keys(m, "host.mpi", {"impl", "version", "path"}));
    SnapshotMpi mpi;
    LS_TRY_ASSIGN(mpi.impl, r.one_of(m, "host.mpi", "impl", {"openmpi", "mpich", "unknown"}));
    LS_TRY_ASSIGN(mpi.version, r.version(m, "host.mpi", "version", true));
    LS_TRY_ASSIGN(mpi.path, r.str(m, "host.mpi", "path", k_max_path, false));
    h.mpi = std::move(mpi);
  }
  LS_TRY_ASSIGN(h.pmix, r.version(j, p, "pmix", true));
  LS_TRY_ASSIGN(h.ucx, r.version(j, p, "ucx", true));
  LS_TRY_ASSIGN(h.libfabric, r.version(j, p, "libfabric", true));
  LS_TRY_ASSIGN(h.slurm, r.version(j, p, "slurm", true));
  return h;
}

Result<std::optional<PythonEnv>> read_python_json(const SnapshotReader& r, const json& j) {
  if (j.is_null()) {
    return std::optional<PythonEnv>();
  }
  const std::string p = "python";
  LS_TRY(r.keys(j, p, {"kind", "prefix", "version", "packages"}));
  PythonEnv env;
  LS_TRY_ASSIGN(env.kind, r.one_of(j, p, "kind", {"venv", "conda", "prefix"}));
  LS_TRY_ASSIGN(env.prefix, r.str(j, p, "prefix", k_max_path, false));
  if (!env.prefix.starts_with('/')) {
    return r.fail("python.prefix", "expected an absolute path");
  }
  LS_TRY_ASSIGN(env.version, r.version(j, p, "version", true));
  const json& packages = j["packages"];
  if (!packages.is_array() || packages.size() > k_max_packages) {
    return r.fail("python.packages", fmt::format("expected an array of at most {} packages", k_max_packages));
  }
  for (std::size_t i = 0; i < packages.size(); ++i) {
    const std::string pp = SnapshotReader::item("python.packages", i);
    const json& pj = packages[i];
    LS_TRY(r.keys(pj, pp, {"name", "version", "from", "installer", "build", "channel"}));
    PythonPackage pkg;
    LS_TRY_ASSIGN(pkg.name, r.str(pj, pp, "name", k_max_name, false));
    if (!valid_package_name(pkg.name)) {
      return r.fail(pp + ".name", fmt::format("'{}' is not a package name", pkg.name));
    }
    LS_TRY_ASSIGN(pkg.version, r.version(pj, pp, "version", false));
    LS_TRY_ASSIGN(pkg.from, r.one_of(pj, pp, "from", {"dist-info", "egg-info", "conda"}));
    LS_TRY_ASSIGN(pkg.installer, r.str(pj, pp, "installer", k_max_name, true));
    LS_TRY_ASSIGN(pkg.build, r.str(pj, pp, "build", k_max_name, true));
    LS_TRY_ASSIGN(pkg.channel, r.str(pj, pp, "channel", k_max_path, true));
    env.packages.push_back(std::move(pkg));
  }
  return std::optional<PythonEnv>(std::move(env));
}

Result<TargetReport> read_target(const SnapshotReader& r, const json& j) {
  const std::string p = "target";
  LS_TRY(r.keys(j, p, {"kind", "ref", "facts", "can_run", "checks"}));
  TargetReport t;
  LS_TRY_ASSIGN(t.kind, r.one_of(j, p, "kind", {"image", "lock"}));
  LS_TRY_ASSIGN(t.ref, r.str(j, p, "ref", k_max_path, false));
  const json& f = j["facts"];
  const std::string fp = "target.facts";
  LS_TRY(r.keys(f, fp, {"mpi", "pmix", "ucx", "libfabric", "cuda", "cuda_driver_floor"}));
  envspec::ImageFacts& facts = t.facts;
  if (const json& m = f["mpi"]; !m.is_null()) {
    LS_TRY(r.keys(m, fp + ".mpi", {"impl", "version"}));
    LS_TRY_ASSIGN(facts.mpi_impl, r.one_of(m, fp + ".mpi", "impl", {"openmpi", "mpich"}));
    LS_TRY_ASSIGN(facts.mpi.version, r.version(m, fp + ".mpi", "version", true));
  }
  LS_TRY_ASSIGN(facts.pmix.version, r.version(f, fp, "pmix", true));
  LS_TRY_ASSIGN(facts.ucx.version, r.version(f, fp, "ucx", true));
  LS_TRY_ASSIGN(facts.libfabric.version, r.version(f, fp, "libfabric", true));
  LS_TRY_ASSIGN(facts.cuda.version, r.version(f, fp, "cuda", true));
  LS_TRY_ASSIGN(facts.cuda_driver_floor, r.version(f, fp, "cuda_driver_floor", true));
  const json& checks = j["checks"];
  if (!checks.is_array() || checks.size() > k_max_checks) {
    return r.fail("target.checks", fmt::format("expected an array of at most {} checks", k_max_checks));
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const std::string cp = SnapshotReader::item("target.checks", i);
    LS_TRY(r.keys(checks[i], cp, {"name", "status", "detail"}));
    Check c;
    LS_TRY_ASSIGN(c.name, r.one_of(checks[i], cp, "name",
                                   {"image", "driver", "gpus", "mpi", "pmix", "userns", "space"}));
    if (!names.insert(c.name).second) {
      return r.fail(cp + ".name", fmt::format("check '{}' appears twice", c.name));
    }
    LS_TRY_ASSIGN(const std::string status,
                  r.one_of(checks[i], cp, "status", {"ok", "warn", "fail", "skipped"}));
    for (Status s : {Status::ok, Status::warn, Status::fail, Status::skipped}) {
      if (status_name(s) == status) {
        c.status = s;
      }
    }
    LS_TRY_ASSIGN(c.detail, r.str(checks[i], cp, "detail", k_max_text, false));
    t.checks.push_back(std::move(c));
  }
  if (!j["can_run"].is_boolean()) {
    return r.fail("target.can_run", "expected true or false");
  }
  if (j["can_run"].get<bool>() != t.can_run()) {
    return r.fail("target.can_run", "does not agree with the checks (a failed check means false)");
  }
  return t;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Snapshots

bool TargetReport::can_run() const {
  return std::none_of(checks.begin(), checks.end(), [](const Check& c) { return c.status == Status::fail; });
}

ojson snapshot_json(const Snapshot& s) {
  const SnapshotHost& h = s.host;
  ojson gpus = ojson::array();
  for (const SnapshotGpu& g : h.gpus) {
    gpus.push_back({{"index", g.index},
                    {"name", nullable(g.name)},
                    {"uuid", nullable(g.uuid)},
                    {"compute_capability", nullable(g.compute_capability)},
                    {"memory_mib", g.memory_mib ? ojson(*g.memory_mib) : ojson(nullptr)}});
  }
  ojson host = {
      {"arch", nullable(h.arch)},
      {"os", nullable(h.os)},
      {"kernel", nullable(h.kernel)},
      {"glibc", nullable(h.glibc)},
      {"user_namespaces", h.user_namespaces},
      {"driver", h.driver ? ojson{{"version", h.driver->version}, {"from", h.driver->from}} : ojson(nullptr)},
      {"gpus", std::move(gpus)},
      {"mpi", h.mpi
                  ? ojson{{"impl", h.mpi->impl}, {"version", nullable(h.mpi->version)}, {"path", h.mpi->path}}
                  : ojson(nullptr)},
      {"pmix", nullable(h.pmix)},
      {"ucx", nullable(h.ucx)},
      {"libfabric", nullable(h.libfabric)},
      {"slurm", nullable(h.slurm)},
  };
  ojson python = nullptr;
  if (s.python) {
    ojson packages = ojson::array();
    for (const PythonPackage& p : s.python->packages) {
      packages.push_back({{"name", p.name},
                          {"version", p.version},
                          {"from", p.from},
                          {"installer", nullable(p.installer)},
                          {"build", nullable(p.build)},
                          {"channel", nullable(p.channel)}});
    }
    python = {{"kind", s.python->kind},
              {"prefix", s.python->prefix},
              {"version", nullable(s.python->version)},
              {"packages", std::move(packages)}};
  }
  ojson out = {{"lockstep-snapshot", k_snapshot_schema},
               {"tool", s.tool},
               {"host", std::move(host)},
               {"python", std::move(python)}};
  if (s.target) {
    ojson checks = ojson::array();
    for (const Check& c : s.target->checks) {
      checks.push_back({{"name", c.name}, {"status", status_name(c.status)}, {"detail", c.detail}});
    }
    out["target"] = {{"kind", s.target->kind},
                     {"ref", s.target->ref},
                     {"facts", facts_object(s.target->facts)},
                     {"can_run", s.target->can_run()},
                     {"checks", std::move(checks)}};
  }
  return out;
}

std::string render_snapshot(const Snapshot& snapshot) {
  return snapshot_json(snapshot).dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

Result<Snapshot> parse_snapshot(std::string_view text, std::string_view what) {
  const SnapshotReader r(what);
  if (text.size() > k_max_snapshot) {
    return r.fail("", fmt::format("larger than {} bytes", k_max_snapshot));
  }
  if (find_json_depth_excess(text, k_max_snapshot_depth)) {
    return r.fail("", fmt::format("nested more than {} levels deep", k_max_snapshot_depth));
  }
  Result<json> parsed = parse_json(text, std::string(what), k_max_snapshot_depth);
  if (!parsed) {
    return r.fail("", "not valid JSON");
  }
  const json j = std::move(*parsed);
  LS_TRY(r.keys(j, "", {"lockstep-snapshot", "tool", "host", "python"}, {"target"}));
  if (!j["lockstep-snapshot"].is_number_integer() ||
      j["lockstep-snapshot"].get<std::int64_t>() != k_snapshot_schema) {
    return r.fail("lockstep-snapshot",
                  fmt::format("expected {} (a snapshot from another lockstep version?)", k_snapshot_schema));
  }
  Snapshot s;
  LS_TRY_ASSIGN(s.tool, r.str(j, "", "tool", k_max_name, false));
  LS_TRY_ASSIGN(s.host, read_host(r, j["host"]));
  LS_TRY_ASSIGN(s.python, read_python_json(r, j["python"]));
  if (j.contains("target")) {
    LS_TRY_ASSIGN(s.target, read_target(r, j["target"]));
  }
  return s;
}

} // namespace lockstep::runner
