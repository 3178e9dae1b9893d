#include "envspec/lock/lockfile.hpp"

#include "support/conda/repodata.hpp"
#include "support/oci/oci.hpp"
#include "support/python/pep508.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <tuple>

namespace lockstep::envspec {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

namespace {

constexpr std::uint64_t k_max_lock_size = 64ULL << 20;

std::string json_line(const ordered& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::strict);
}

// The set of strings in a JSON array (missing: empty).
std::set<std::string> string_set(const json& j, const char* key) {
  std::set<std::string> out;
  if (j.contains(key) && j[key].is_array()) {
    for (const json& v : j[key]) {
      out.insert(v.is_string() ? v.get<std::string>() : v.dump());
    }
  }
  return out;
}

void diff_sets(const std::set<std::string>& before, const std::set<std::string>& after,
               const std::string& what, std::vector<std::string>& out) {
  for (const std::string& s : after) {
    if (before.count(s) == 0) {
      out.push_back(fmt::format("{}: added {}", what, s));
    }
  }
  for (const std::string& s : before) {
    if (after.count(s) == 0) {
      out.push_back(fmt::format("{}: removed {}", what, s));
    }
  }
}

// Strict field access for parse_lock: every error names the lock, the key path and what was expected.
class LockReader {
public:
  explicit LockReader(std::string_view what) : m_what(what) {}

  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    throw Failure(
        invalid_input("{}: {}: {}; run `lockstep lock` to write a new lock", m_what, path, message));
  }

  void only_keys(const json& j, const std::string& path, std::initializer_list<std::string_view> keys) const {
    if (!j.is_object()) {
      fail(path, "expected an object");
    }
    for (const auto& [k, v] : j.items()) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
        fail(path.empty() ? k : path + "." + k, "unknown key");
      }
    }
  }

  const json& field(const json& j, const std::string& path, const char* key) const {
    auto it = j.find(key);
    if (it == j.end()) {
      fail(path.empty() ? key : path + "." + key, "missing");
    }
    return *it;
  }

  std::string str(const json& j, const std::string& path, const char* key, bool optional = false) const {
    if (optional && !j.contains(key)) {
      return "";
    }
    const json& v = field(j, path, key);
    if (!v.is_string()) {
      fail(path + "." + key, "expected a string");
    }
    std::string s = v.get<std::string>();
    if (s.size() > 8192) {
      fail(path + "." + key, "longer than 8192 bytes");
    }
    return s;
  }

  std::int64_t integer(const json& j, const std::string& path, const char* key) const {
    const json& v = field(j, path, key);
    if (!v.is_number_integer()) {
      fail(path + "." + key, "expected an integer");
    }
    // nlohmann keeps 2^63 and above as unsigned: reading those as int64 would wrap to negative.
    constexpr auto k_max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > k_max) {
      fail(path + "." + key, fmt::format("{} is too large (the limit is {})", v.get<std::uint64_t>(), k_max));
    }
    return v.get<std::int64_t>();
  }

  std::vector<std::string> strings(const json& j, const std::string& path, const char* key) const {
    const json& v = field(j, path, key);
    if (!v.is_array() || v.size() > 4096) {
      fail(path + "." + key, "expected a list of strings");
    }
    std::vector<std::string> out;
    for (const json& s : v) {
      if (!s.is_string() || s.get_ref<const std::string&>().size() > 8192) {
        fail(path + "." + key, "expected a list of strings");
      }
      out.push_back(s.get<std::string>());
    }
    return out;
  }

private:
  std::string m_what;
};

// Refuses a second artifact for what one artifact already provides: a deb package name and
// architecture (one dpkg database entry each), a wheel project (one installed version), a git
// repository at one rev with another commit or tree. `lockstep lock` writes one git artifact per copy
// item, so two copies of one repository at one rev repeat an identical entry, which is allowed.
// [A-Za-z0-9][A-Za-z0-9._+:/@~-]*: a package or project name as the lock writes it.
bool valid_artifact_name(std::string_view name) {
  if (name.empty() || std::isalnum(static_cast<unsigned char>(name.front())) == 0) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0 ||
           std::string_view("._+:/@~-").find(ch) != std::string_view::npos;
  });
}

// A full commit id: 40 lowercase hex digits.
bool valid_commit(std::string_view rev) {
  return rev.size() == 40 && std::all_of(rev.begin(), rev.end(), [](char ch) {
           return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
         });
}

class ArtifactKeys {
public:
  void check(const LockReader& r, const std::string& path, const LockedArtifact& a,
             const std::vector<LockedArtifact>& earlier, const std::vector<std::string>& lock_platforms) {
    // One artifact for each name per platform: a multi-platform lock has one per platform.
    const std::vector<std::string>& platforms = a.platforms.empty() ? lock_platforms : a.platforms;
    for (const std::string& platform : platforms) {
      check_one(r, path, a, earlier, platform);
    }
  }

private:
  void check_one(const LockReader& r, const std::string& path, const LockedArtifact& a,
                 const std::vector<LockedArtifact>& earlier, const std::string& platform) {
    std::string key = platform + "\n";
    if (a.kind == "deb") {
      key += "deb\n" + a.name + "\n" + a.arch;
    } else if (a.kind == "wheel") {
      key += "wheel\n" + normalize_project_name(a.name);
    } else if (a.kind == "conda") {
      key += "conda\n" + a.name;
    } else {
      key += "git\n" + a.name + "\n" + a.rev;
    }
    const auto [it, inserted] = m_first.emplace(std::move(key), earlier.size());
    if (inserted) {
      return;
    }
    const LockedArtifact& first = earlier[it->second];
    if (a.kind == "git" && first.version == a.version && first.sha256 == a.sha256 && first.size == a.size) {
      return;
    }
    const std::string shown = a.kind == "deb"     ? fmt::format("deb package '{}' ({})", a.name, a.arch)
                              : a.kind == "wheel" ? fmt::format("wheel project '{}'", a.name)
                              : a.kind == "conda" ? fmt::format("conda package '{}'", a.name)
                                                  : fmt::format("git repository '{}' at '{}'", a.name, a.rev);
    r.fail(path, fmt::format("duplicate {}{}, first at artifacts[{}]; a lock holds one artifact for each",
                             shown, platform.empty() ? "" : " for " + platform, it->second));
  }

  std::map<std::string, std::size_t> m_first; // key -> index of its first artifact
};

// The rest of a conda artifact's record (its build, subdir and md5 are written before it).
void conda_record_json(const LockedCondaRecord& c, ordered& j) {
  j["depends"] = c.depends;
  if (!c.constrains.empty()) {
    j["constrains"] = c.constrains;
  }
  if (!c.track_features.empty()) {
    j["track-features"] = c.track_features;
  }
  if (!c.noarch.empty()) {
    j["noarch"] = c.noarch;
  }
  if (c.timestamp != 0) {
    j["timestamp"] = c.timestamp;
  }
  if (!c.license.empty()) {
    j["license"] = c.license;
  }
  if (!c.python_site_packages_path.empty()) {
    j["python-site-packages-path"] = c.python_site_packages_path;
  }
}

bool is_lower_hex(std::string_view s, std::size_t len) {
  return s.size() == len && std::all_of(s.begin(), s.end(), [](char ch) {
           return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
         });
}

LockedCondaRecord read_conda_record(const LockReader& r, const json& j, const std::string& path) {
  LockedCondaRecord c;
  c.build = r.str(j, path, "build");
  const std::int64_t build_number = r.integer(j, path, "build-number");
  if (build_number < 0) {
    r.fail(path + ".build-number", "negative");
  }
  c.build_number = static_cast<std::uint64_t>(build_number);
  c.subdir = r.str(j, path, "subdir");
  c.md5 = r.str(j, path, "md5");
  if (!c.md5.empty() && !is_lower_hex(c.md5, 32)) {
    r.fail(path + ".md5", "expected 32 lowercase hex digits");
  }
  if (c.build.empty() || c.subdir.empty()) {
    r.fail(path, "a conda package needs build and subdir");
  }
  c.depends = r.strings(j, path, "depends");
  if (j.contains("constrains")) {
    c.constrains = r.strings(j, path, "constrains");
  }
  if (j.contains("track-features")) {
    c.track_features = r.strings(j, path, "track-features");
  }
  c.noarch = r.str(j, path, "noarch", true);
  if (!conda::noarch_from_name(c.noarch)) {
    r.fail(path + ".noarch", fmt::format("expected generic or python, found '{}'", c.noarch));
  }
  if (j.contains("timestamp")) {
    const std::int64_t ts = r.integer(j, path, "timestamp");
    if (ts < 0) {
      r.fail(path + ".timestamp", "negative");
    }
    c.timestamp = static_cast<std::uint64_t>(ts);
  }
  c.license = r.str(j, path, "license", true);
  c.python_site_packages_path = r.str(j, path, "python-site-packages-path", true);
  return c;
}

LockedStack read_stack(const LockReader& r, const json& j) {
  r.only_keys(j, "stack",
              {"recipes", "recipes-commit", "recipes-digest", "cuda", "driver-floor", "min-cc", "archs",
               "nvidia-require-cuda", "choices"});
  LockedStack st;
  st.recipes = r.str(j, "stack", "recipes");
  st.recipes_commit = r.str(j, "stack", "recipes-commit", true);
  Result<Digest> digest = Digest::parse(r.str(j, "stack", "recipes-digest"));
  if (!digest) {
    r.fail("stack.recipes-digest", digest.error().message);
  }
  st.recipes_digest = *digest;
  st.cuda = r.str(j, "stack", "cuda");
  st.driver_floor = r.str(j, "stack", "driver-floor");
  st.min_cc = r.str(j, "stack", "min-cc");
  st.archs = r.strings(j, "stack", "archs");
  st.nvidia_require_cuda = r.str(j, "stack", "nvidia-require-cuda");
  static const std::regex version_re("([0-9]+(\\.[0-9]+)*)?");
  for (const auto* v : {&st.cuda, &st.driver_floor, &st.min_cc}) {
    if (!std::regex_match(*v, version_re)) {
      r.fail("stack", fmt::format("invalid version '{}'", *v));
    }
  }
  const json& choices = r.field(j, "stack", "choices");
  if (!choices.is_array() || choices.size() > 64) {
    r.fail("stack.choices", "expected a list");
  }
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const std::string path = fmt::format("stack.choices[{}]", i);
    const json& c = choices[i];
    r.only_keys(c, path, {"component", "name", "version", "variant", "via", "packages", "facts"});
    LockedStackChoice choice;
    choice.component = r.str(c, path, "component");
    choice.name = r.str(c, path, "name");
    choice.version = r.str(c, path, "version");
    choice.variant = r.str(c, path, "variant", true);
    choice.via = r.str(c, path, "via");
    if (choice.via != "apt" && choice.via != "wheels" && choice.via != "conda" && choice.via != "base") {
      r.fail(path + ".via", fmt::format("expected apt, wheels, conda or base, found '{}'", choice.via));
    }
    choice.packages = r.strings(c, path, "packages");
    choice.facts = r.strings(c, path, "facts");
    st.choices.push_back(std::move(choice));
  }
  return st;
}

LockedBase read_base(const LockReader& r, const json& j) {
  r.only_keys(j, "base", {"image", "manifest", "config", "platform"});
  LockedBase b;
  b.image = r.str(j, "base", "image");
  if (b.image.rfind("docker://", 0) != 0 && b.image.rfind("oci:", 0) != 0) {
    r.fail("base.image", fmt::format("expected docker://REF or oci:PATH, found '{}'", b.image));
  }
  for (auto [key, out] : {std::pair{"manifest", &b.manifest}, std::pair{"config", &b.config}}) {
    Result<Digest> d = Digest::parse(r.str(j, "base", key));
    if (!d || d->algorithm() != "sha256") {
      r.fail(std::string("base.") + key, "expected sha256:<64 hex digits>");
    }
    *out = *d;
  }
  b.platform = r.str(j, "base", "platform");
  if (!oci::Platform::parse(b.platform)) {
    r.fail("base.platform", fmt::format("invalid platform '{}'", b.platform));
  }
  return b;
}

} // namespace

json lock_inputs(const Spec& spec) {
  json in = json::object();
  if (spec.platforms.size() > 1) {
    in["platforms"] = spec.canonical["platforms"];
  } else {
    in["platform"] = spec.platform.str();
  }
  if (spec.base.kind != BaseImage::Kind::scratch) { // scratch stays out: older locks keep their inputs
    in["base"] = spec.canonical["base"];
  }
  if (spec.canonical.contains("repos")) {
    in["repos"] = spec.canonical["repos"];
  }
  if (spec.canonical.contains("packages")) {
    in["packages"] = spec.canonical["packages"];
  }
  if (spec.canonical.contains("stack")) {
    in["stack"] = spec.canonical["stack"];
  }
  if (spec.canonical.contains("conda") && !spec.packages.conda.empty()) { // the prefix is in the records
    in["conda"] = spec.canonical["conda"];
  }
  json git = json::array();
  for (const json& c : spec.canonical["copy"]) {
    if (c.contains("git")) {
      git.push_back(json{{"git", c["git"]}, {"rev", c["rev"]}});
    }
  }
  if (!git.empty()) {
    in["git"] = std::move(git);
  }
  return in;
}

std::vector<std::string> describe_input_changes(const json& locked, const json& now) {
  std::vector<std::string> out;
  if (locked == now) {
    return out;
  }
  const auto value = [](const json& j, const char* key) { return j.contains(key) ? j[key].dump() : "none"; };
  for (const char* key : {"platform", "platforms"}) {
    if (value(locked, key) != value(now, key)) {
      out.push_back(fmt::format("{}: {} -> {}", key, value(locked, key), value(now, key)));
    }
  }
  if (value(locked, "base") != value(now, "base")) {
    out.push_back(fmt::format("base: {} -> {}", value(locked, "base"), value(now, "base")));
  }
  diff_sets(string_set(locked, "repos"), string_set(now, "repos"), "repos", out);
  if (out.empty() && value(locked, "repos") != value(now, "repos")) {
    out.emplace_back("repos: the order changed (it sets their priority)");
  }
  const json empty = json::object();
  const json& lp = locked.contains("packages") ? locked["packages"] : empty;
  const json& np = now.contains("packages") ? now["packages"] : empty;
  diff_sets(string_set(lp, "apt"), string_set(np, "apt"), "packages.apt", out);
  diff_sets(string_set(lp, "pip"), string_set(np, "pip"), "packages.pip", out);
  diff_sets(string_set(lp, "conda"), string_set(np, "conda"), "packages.conda", out);
  if (value(locked, "conda") != value(now, "conda")) {
    out.push_back(fmt::format("conda: {} -> {}", value(locked, "conda"), value(now, "conda")));
  }
  diff_sets(string_set(locked, "git"), string_set(now, "git"), "copy (git)", out);
  if (value(locked, "stack") != value(now, "stack")) {
    out.push_back(fmt::format("stack: {} -> {}", value(locked, "stack"), value(now, "stack")));
  }
  if (out.empty()) {
    out.emplace_back("the locked inputs differ in order only");
  }
  return out;
}

fs::path default_lock_path(const fs::path& spec_file) {
  fs::path p = spec_file;
  if (p.extension() == ".yaml" || p.extension() == ".yml") {
    return p.replace_extension(".lock");
  }
  return fs::path(p.string() + ".lock");
}

void sort_artifacts(std::vector<LockedArtifact>& artifacts) {
  static const std::vector<std::string> kinds = {"deb", "wheel", "conda", "git"};
  static const std::vector<std::string> groups = {"base", "mpi", "cuda", "python", "app"};
  const auto rank = [](const std::vector<std::string>& order, const std::string& s) {
    return static_cast<std::size_t>(std::find(order.begin(), order.end(), s) - order.begin());
  };
  std::sort(artifacts.begin(), artifacts.end(), [&](const LockedArtifact& a, const LockedArtifact& b) {
    return std::make_tuple(rank(kinds, a.kind), rank(groups, a.group), a.name, a.arch, a.version, a.url) <
           std::make_tuple(rank(kinds, b.kind), rank(groups, b.group), b.name, b.arch, b.version, b.url);
  });
}

nlohmann::ordered_json locked_stack_json(const LockedStack& stack) {
  nlohmann::ordered_json j;
  j["recipes"] = stack.recipes;
  if (!stack.recipes_commit.empty()) {
    j["recipes-commit"] = stack.recipes_commit;
  }
  j["recipes-digest"] = stack.recipes_digest.str();
  j["cuda"] = stack.cuda;
  j["driver-floor"] = stack.driver_floor;
  j["min-cc"] = stack.min_cc;
  j["archs"] = stack.archs;
  j["nvidia-require-cuda"] = stack.nvidia_require_cuda;
  j["choices"] = nlohmann::ordered_json::array();
  for (const LockedStackChoice& c : stack.choices) {
    nlohmann::ordered_json cj;
    cj["component"] = c.component;
    cj["name"] = c.name;
    cj["version"] = c.version;
    if (!c.variant.empty()) {
      cj["variant"] = c.variant;
    }
    cj["via"] = c.via;
    cj["packages"] = c.packages;
    cj["facts"] = c.facts;
    j["choices"].push_back(std::move(cj));
  }
  return j;
}

namespace {

// A stack as the lock writes it: its head on one line (`"platform"` first for one platform's of
// `stacks`), then its choices one per line, the closing bracket at `indent`.
std::string stack_text(const LockedStack& stack, const std::string& platform, const std::string& indent) {
  ordered head;
  if (!platform.empty()) {
    head["platform"] = platform;
  }
  ordered rest = locked_stack_json(stack);
  const ordered choices = std::move(rest["choices"]);
  rest.erase("choices");
  head.update(rest);
  std::string out = json_line(head);
  out.pop_back(); // the closing brace: the choices follow, one per line
  out += ", \"choices\": [";
  for (std::size_t i = 0; i < choices.size(); ++i) {
    out += (i == 0 ? "\n  " : ",\n  ") + indent + json_line(choices[i]);
  }
  out += choices.empty() ? "]}" : "\n" + indent + "]}";
  return out;
}

// `"platform": …` of a lock of one platform, else `"platforms"` and `"platform-spec-digests"`.
std::string platform_lines(const Lock& lock) {
  if (lock.platforms.size() <= 1) {
    return fmt::format("  \"platform\": {},\n", json(lock.platform).dump());
  }
  json digests = json::array();
  for (const Digest& d : lock.platform_spec_digests) {
    digests.push_back(d.str());
  }
  return fmt::format("  \"platforms\": {},\n  \"platform-spec-digests\": {},\n", json(lock.platforms).dump(),
                     digests.dump());
}

} // namespace

std::string render_lock(const Lock& lock) {
  std::string out = "{\n";
  out += fmt::format("  \"lockstep-lock\": {},\n", lock.schema);
  out += fmt::format("  \"tool\": {},\n", json(lock.tool).dump());
  out += fmt::format("  \"spec-digest\": {},\n", json(lock.spec_digest.str()).dump());
  out += fmt::format("  \"epoch\": {},\n", lock.epoch);
  out += platform_lines(lock);
  out += fmt::format("  \"inputs\": {},\n", lock.inputs.dump());
  const auto base_line = [](const LockedBase& base) {
    ordered b;
    b["image"] = base.image;
    b["manifest"] = base.manifest.str();
    b["config"] = base.config.str();
    b["platform"] = base.platform;
    return json_line(b);
  };
  if (lock.base) {
    out += "  \"base\": " + base_line(*lock.base) + ",\n";
  } else if (!lock.bases.empty()) {
    out += "  \"bases\": [";
    for (std::size_t i = 0; i < lock.bases.size(); ++i) {
      out += (i == 0 ? "\n    " : ",\n    ") + base_line(lock.bases[i]);
    }
    out += "\n  ],\n";
  }
  if (lock.stack) {
    out += "  \"stack\": " + stack_text(*lock.stack, "", "  ") + ",\n";
  } else if (!lock.stacks.empty()) {
    out += "  \"stacks\": [";
    for (std::size_t i = 0; i < lock.stacks.size(); ++i) {
      out +=
          (i == 0 ? "\n    " : ",\n    ") + stack_text(lock.stacks[i].second, lock.stacks[i].first, "    ");
    }
    out += "\n  ],\n";
  }
  out += "  \"repos\": [";
  for (std::size_t i = 0; i < lock.repos.size(); ++i) {
    const LockedRepo& r = lock.repos[i];
    ordered j;
    j["kind"] = r.kind;
    j["url"] = r.url;
    if (r.kind == "apt" && !r.suites.empty()) {
      ordered suites = ordered::array();
      for (const LockedRepo::SuiteRelease& s : r.suites) {
        ordered one;
        one["suite"] = s.suite;
        one["release-date"] = s.release_date;
        one["release-sha256"] = s.release_sha256;
        suites.push_back(std::move(one));
      }
      j["suites"] = std::move(suites);
      j["components"] = r.components;
    } else if (r.kind == "apt") {
      j["suite"] = r.suite;
      j["components"] = r.components;
      j["release-date"] = r.release_date;
      j["release-sha256"] = r.release_sha256;
    } else if (r.kind == "conda") {
      j["subdirs"] = r.subdirs;
    }
    out += (i == 0 ? "\n    " : ",\n    ") + json_line(j);
  }
  out += lock.repos.empty() ? "],\n" : "\n  ],\n";
  out += "  \"artifacts\": [";
  for (std::size_t i = 0; i < lock.artifacts.size(); ++i) {
    const LockedArtifact& a = lock.artifacts[i];
    ordered j;
    j["kind"] = a.kind;
    j["name"] = a.name;
    j["version"] = a.version;
    if (a.conda) {
      j["build"] = a.conda->build;
      j["build-number"] = a.conda->build_number;
      j["subdir"] = a.conda->subdir;
    }
    if (!a.arch.empty()) {
      j["arch"] = a.arch;
    }
    if (!a.group.empty()) {
      j["group"] = a.group;
    }
    if (!a.rev.empty()) {
      j["rev"] = a.rev;
    }
    if (!a.suite.empty()) {
      j["suite"] = a.suite;
    }
    j["size"] = a.size;
    j["sha256"] = a.sha256.hex();
    if (a.conda) {
      j["md5"] = a.conda->md5;
    }
    j["url"] = a.url;
    if (a.repo >= 0) {
      j["repo"] = a.repo;
    }
    if (!a.reason.empty()) {
      j["reason"] = a.reason;
    }
    if (a.conda) {
      conda_record_json(*a.conda, j);
    }
    if (!a.platforms.empty()) {
      j["platforms"] = a.platforms;
    }
    out += (i == 0 ? "\n    " : ",\n    ") + json_line(j);
  }
  out += lock.artifacts.empty() ? "]\n" : "\n  ]\n";
  out += "}\n";
  return out;
}

Result<Lock> parse_lock(std::string_view text, std::string_view what) {
  if (text.size() > k_max_lock_size) {
    return invalid_input("{}: larger than {} bytes; this is not a lockstep lock", what, k_max_lock_size);
  }
  LS_TRY_ASSIGN(json root, oci::parse_json(text, std::string(what)));
  LockReader r(what);
  Lock lock;
  try {
    r.only_keys(root, "",
                {"lockstep-lock", "tool", "spec-digest", "epoch", "platform", "platforms",
                 "platform-spec-digests", "inputs", "base", "bases", "stack", "stacks", "repos",
                 "artifacts"});
    const json& schema = r.field(root, "", "lockstep-lock");
    if (!schema.is_number_integer() || schema.get<std::int64_t>() != k_lock_schema) {
      r.fail("lockstep-lock", fmt::format("unsupported lock schema {}; this lockstep reads schema {}",
                                          schema.dump(), k_lock_schema));
    }
    lock.tool = r.str(root, "", "tool");
    Result<Digest> spec_digest = Digest::parse(r.str(root, "", "spec-digest"));
    if (!spec_digest) {
      r.fail("spec-digest", spec_digest.error().message);
    }
    lock.spec_digest = *spec_digest;
    lock.epoch = r.integer(root, "", "epoch");
    if (lock.epoch < 0 || lock.epoch > 253402300799) {
      r.fail("epoch", "out of range");
    }
    if (root.contains("platforms")) { // a multi-platform lock
      if (root.contains("platform")) {
        r.fail("platforms", "a lock has 'platform' (one) or 'platforms' (several), not both");
      }
      lock.platforms = r.strings(root, "", "platforms");
      if (lock.platforms.size() < 2) {
        r.fail("platforms", "expected two or more platforms (one is written as 'platform')");
      }
      for (std::size_t i = 0; i < lock.platforms.size(); ++i) {
        if (!oci::Platform::parse(lock.platforms[i])) {
          r.fail(fmt::format("platforms[{}]", i), fmt::format("invalid platform '{}'", lock.platforms[i]));
        }
        if (std::find(lock.platforms.begin(), lock.platforms.begin() + static_cast<std::ptrdiff_t>(i),
                      lock.platforms[i]) != lock.platforms.begin() + static_cast<std::ptrdiff_t>(i)) {
          r.fail(fmt::format("platforms[{}]", i), fmt::format("'{}' is listed twice", lock.platforms[i]));
        }
      }
      lock.platform = lock.platforms.front();
      const std::vector<std::string> digests = r.strings(root, "", "platform-spec-digests");
      if (digests.size() != lock.platforms.size()) {
        r.fail("platform-spec-digests", "expected one spec digest per platform, in the order of 'platforms'");
      }
      for (std::size_t i = 0; i < digests.size(); ++i) {
        Result<Digest> d = Digest::parse(digests[i]);
        if (!d) {
          r.fail(fmt::format("platform-spec-digests[{}]", i), d.error().message);
        }
        lock.platform_spec_digests.push_back(*d);
      }
    } else {
      if (root.contains("platform-spec-digests")) {
        r.fail("platform-spec-digests", "only a multi-platform lock ('platforms') has these");
      }
      lock.platform = r.str(root, "", "platform");
      if (!oci::Platform::parse(lock.platform)) {
        r.fail("platform", fmt::format("invalid platform '{}'", lock.platform));
      }
    }
    lock.inputs = r.field(root, "", "inputs");
    if (!lock.inputs.is_object()) {
      r.fail("inputs", "expected an object");
    }
    if (root.contains("base")) {
      lock.base = read_base(r, root["base"]);
    }
    if (root.contains("bases")) {
      const json& bases = root["bases"];
      if (lock.platforms.empty() || lock.base || !bases.is_array()) {
        r.fail("bases",
               "only a multi-platform lock has 'bases' (a list, one per platform) instead of 'base'");
      }
      for (const json& b : bases) {
        lock.bases.push_back(read_base(r, b));
        if (std::find(lock.platforms.begin(), lock.platforms.end(), lock.bases.back().platform) ==
            lock.platforms.end()) {
          r.fail("bases", fmt::format("a base for {}, which is not one of the lock's platforms",
                                      lock.bases.back().platform));
        }
      }
    }
    if (root.contains("stack")) {
      lock.stack = read_stack(r, root["stack"]);
    }
    if (root.contains("stacks")) {
      const json& stacks = root["stacks"];
      if (lock.platforms.empty() || lock.stack || !stacks.is_array()) {
        r.fail("stacks",
               "only a multi-platform lock has 'stacks' (a list, one per platform) instead of 'stack'");
      }
      for (std::size_t i = 0; i < stacks.size(); ++i) {
        json one = stacks[i];
        const std::string platform = r.str(one, fmt::format("stacks[{}]", i), "platform");
        if (std::find(lock.platforms.begin(), lock.platforms.end(), platform) == lock.platforms.end() ||
            (i < lock.platforms.size() && lock.platforms[i] != platform) ||
            stacks.size() != lock.platforms.size()) {
          r.fail(fmt::format("stacks[{}].platform", i),
                 "expected one stack per platform, in the order of 'platforms'");
        }
        one.erase("platform");
        lock.stacks.emplace_back(platform, read_stack(r, one));
      }
    }
    const json& repos = r.field(root, "", "repos");
    if (!repos.is_array()) {
      r.fail("repos", "expected a list");
    }
    for (std::size_t i = 0; i < repos.size(); ++i) {
      const std::string path = fmt::format("repos[{}]", i);
      const json& j = repos[i];
      r.only_keys(
          j, path,
          {"kind", "url", "suite", "suites", "components", "release-date", "release-sha256", "subdirs"});
      LockedRepo repo;
      repo.kind = r.str(j, path, "kind");
      if (repo.kind != "apt" && repo.kind != "pypi" && repo.kind != "wheels" && repo.kind != "conda") {
        r.fail(path + ".kind", fmt::format("expected apt, pypi, wheels or conda, found '{}'", repo.kind));
      }
      if (repo.kind == "conda") {
        r.only_keys(j, path, {"kind", "url", "subdirs"});
        repo.subdirs = r.strings(j, path, "subdirs");
      } else if (repo.kind != "apt") {
        r.only_keys(j, path, {"kind", "url"}); // suites, components and Release files are apt's
      } else if (j.contains("subdirs")) {
        r.fail(path + ".subdirs", "only a conda channel has subdirs");
      }
      repo.url = r.str(j, path, "url");
      repo.suite = r.str(j, path, "suite", true);
      repo.release_date = r.str(j, path, "release-date", true);
      repo.release_sha256 = r.str(j, path, "release-sha256", true);
      if (j.contains("suites")) { // several suites: each one's Release (a single suite is written flat)
        const json& suites = j["suites"];
        if (!suites.is_array() || suites.size() < 2) {
          r.fail(path + ".suites",
                 "expected a list of two or more suites (one suite is written as suite, release-date, "
                 "release-sha256)");
        }
        if (j.contains("suite") || j.contains("release-date") || j.contains("release-sha256")) {
          r.fail(path, "has both 'suites' and 'suite' or 'release-*': each suite's Release goes in 'suites'");
        }
        for (std::size_t k = 0; k < suites.size(); ++k) {
          const std::string sp = fmt::format("{}.suites[{}]", path, k);
          r.only_keys(suites[k], sp, {"suite", "release-date", "release-sha256"});
          LockedRepo::SuiteRelease one{r.str(suites[k], sp, "suite"), r.str(suites[k], sp, "release-date"),
                                       r.str(suites[k], sp, "release-sha256")};
          for (const LockedRepo::SuiteRelease& before : repo.suites) {
            if (before.suite == one.suite) {
              r.fail(sp + ".suite", fmt::format("suite '{}' is listed twice", one.suite));
            }
          }
          repo.suites.push_back(std::move(one));
        }
      }
      if (j.contains("components")) {
        if (!j["components"].is_array()) {
          r.fail(path + ".components", "expected a list");
        }
        for (const json& c : j["components"]) {
          if (!c.is_string()) {
            r.fail(path + ".components", "expected strings");
          }
          repo.components.push_back(c.get<std::string>());
        }
      }
      lock.repos.push_back(std::move(repo));
    }
    const json& artifacts = r.field(root, "", "artifacts");
    if (!artifacts.is_array()) {
      r.fail("artifacts", "expected a list");
    }
    ArtifactKeys seen;
    for (std::size_t i = 0; i < artifacts.size(); ++i) {
      const std::string path = fmt::format("artifacts[{}]", i);
      const json& j = artifacts[i];
      LockedArtifact a;
      a.kind = r.str(j, path, "kind");
      if (a.kind == "conda") {
        r.only_keys(j, path,
                    {"kind",
                     "name",
                     "version",
                     "build",
                     "build-number",
                     "subdir",
                     "size",
                     "sha256",
                     "md5",
                     "url",
                     "repo",
                     "reason",
                     "depends",
                     "constrains",
                     "track-features",
                     "noarch",
                     "timestamp",
                     "license",
                     "python-site-packages-path",
                     "platforms"});
        a.conda = read_conda_record(r, j, path);
      } else {
        r.only_keys(j, path,
                    {"kind", "name", "version", "arch", "group", "rev", "suite", "size", "sha256", "url",
                     "repo", "reason", "platforms"});
      }
      if (j.contains("platforms")) {
        a.platforms = r.strings(j, path, "platforms");
        for (const std::string& p : a.platforms) {
          if (std::find(lock.platforms.begin(), lock.platforms.end(), p) == lock.platforms.end()) {
            r.fail(path + ".platforms",
                   lock.platforms.empty()
                       ? std::string("only an artifact of a multi-platform lock names platforms")
                       : fmt::format("'{}' is not one of the lock's platforms", p));
          }
        }
        if (a.platforms.empty()) {
          r.fail(path + ".platforms", "empty: leave it out for an artifact of every platform");
        }
      }
      if (a.kind != "deb" && a.kind != "wheel" && a.kind != "git" && a.kind != "conda") {
        r.fail(path + ".kind", fmt::format("expected deb, wheel, conda or git, found '{}'", a.kind));
      }
      a.name = r.str(j, path, "name");
      a.version = r.str(j, path, "version");
      if (a.name.empty() || a.version.empty() || (a.kind != "git" && !valid_artifact_name(a.name))) {
        r.fail(path + ".name", fmt::format("invalid name '{}' or version '{}'", a.name, a.version));
      }
      a.arch = r.str(j, path, "arch", true);
      a.group = r.str(j, path, "group", true);
      a.rev = r.str(j, path, "rev", true);
      a.suite = r.str(j, path, "suite", true);
      a.reason = r.str(j, path, "reason", true);
      const std::int64_t size = r.integer(j, path, "size");
      if (size < 0) {
        r.fail(path + ".size", "negative");
      }
      a.size = static_cast<std::uint64_t>(size);
      Result<Digest> d = Digest::parse("sha256:" + r.str(j, path, "sha256"));
      if (!d) {
        r.fail(path + ".sha256", "expected 64 lowercase hex digits");
      }
      a.sha256 = *d;
      a.url = r.str(j, path, "url");
      if (j.contains("repo")) {
        const std::int64_t repo = r.integer(j, path, "repo");
        if (repo < 0 || static_cast<std::size_t>(repo) >= lock.repos.size()) {
          r.fail(path + ".repo", fmt::format("no repository {} (the lock has {})", repo, lock.repos.size()));
        }
        a.repo = static_cast<int>(repo);
      }
      if (a.kind == "deb" && (a.arch.empty() || a.group.empty() || a.repo < 0)) {
        r.fail(path, "a deb needs arch, group and repo");
      }
      if (a.kind == "conda" && (a.repo < 0 || lock.repos[static_cast<std::size_t>(a.repo)].kind != "conda")) {
        r.fail(path + ".repo", "a conda package needs repo, the index of a conda channel in repos");
      }
      if (a.kind == "git" && !valid_commit(a.version)) {
        r.fail(path + ".version", "a git artifact's version is a full 40-hex commit id");
      }
      seen.check(r, path, a, lock.artifacts,
                 lock.platforms.empty() ? std::vector<std::string>{""} : lock.platforms);
      lock.artifacts.push_back(std::move(a));
    }
  } catch (const Failure& f) {
    return f.error();
  } catch (const json::exception& e) {
    return invalid_input("{}: {}", what, e.what());
  }
  return lock;
}

Result<Lock> read_lock(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return Error{ExitCode::check_failed,
                 fmt::format("no lock at {}; run `lockstep lock` to resolve the spec's packages into it",
                             path.string())};
  }
  LS_TRY_ASSIGN(std::string text, read_file(path, k_max_lock_size));
  return parse_lock(text, path.string());
}

const LockedStack* lock_recipes_stack(const Lock& lock) {
  if (lock.stack) {
    return &*lock.stack;
  }
  return lock.stacks.empty() ? nullptr : &lock.stacks.front().second;
}

std::vector<std::string> lock_platforms(const Lock& lock) {
  return lock.platforms.empty() ? std::vector<std::string>{lock.platform} : lock.platforms;
}

Lock lock_for_platform(const Lock& lock, const std::string& platform) {
  Lock one = lock;
  if (lock.platforms.empty()) {
    return one;
  }
  one.platform = platform;
  one.platforms.clear();
  one.platform_spec_digests.clear();
  for (std::size_t i = 0; i < lock.platforms.size() && i < lock.platform_spec_digests.size(); ++i) {
    if (lock.platforms[i] == platform) {
      one.spec_digest = lock.platform_spec_digests[i];
    }
  }
  if (one.inputs.is_object() && one.inputs.contains("platforms")) {
    one.inputs.erase("platforms");
    one.inputs["platform"] = platform;
  }
  if (const Result<oci::Platform> parsed = oci::Platform::parse(platform)) {
    const std::string subdir = conda_subdir(*parsed);
    for (LockedRepo& repo : one.repos) {
      if (repo.kind == "conda") { // in the order a single-platform lock reads them: its own, then noarch
        std::vector<std::string> own;
        for (const std::string& s : {subdir, std::string("noarch")}) {
          if (std::find(repo.subdirs.begin(), repo.subdirs.end(), s) != repo.subdirs.end()) {
            own.push_back(s);
          }
        }
        repo.subdirs = std::move(own);
      }
    }
  }
  one.bases.clear();
  for (const auto& [p, stack] : lock.stacks) {
    if (p == platform) {
      one.stack = stack;
    }
  }
  one.stacks.clear();
  for (const LockedBase& b : lock.bases) {
    if (b.platform == platform) {
      one.base = b;
    }
  }
  std::erase_if(one.artifacts, [&](const LockedArtifact& a) {
    return !a.platforms.empty() &&
           std::find(a.platforms.begin(), a.platforms.end(), platform) == a.platforms.end();
  });
  for (LockedArtifact& a : one.artifacts) {
    a.platforms.clear();
  }
  return one;
}

std::optional<Lock> lock_share_with_digest(const Lock& lock, const Digest& digest) {
  for (const std::string& p : lock_platforms(lock)) {
    Lock share = lock_for_platform(lock, p);
    if (lock_digest(share) == digest) {
      return share;
    }
  }
  return std::nullopt;
}

std::optional<Lock> lock_share_for_arch(const Lock& lock, std::string_view architecture) {
  for (const std::string& p : lock_platforms(lock)) {
    if (const Result<oci::Platform> parsed = oci::Platform::parse(p);
        parsed && parsed->architecture == architecture) {
      return lock_for_platform(lock, p);
    }
  }
  return std::nullopt;
}

Digest lock_digest(const Lock& lock) {
  return sha256_of(render_lock(lock));
}

} // namespace lockstep::envspec
