// Locking `packages.pip`: exact pins -> one wheel each for the image's Python, with the closure
// check on their dependencies. See wheel_lock.hpp and docs/wheels.md ("Locking and installing").
#include "builder/lock/wheel_lock.hpp"

#include "builder/lock/pypi_index.hpp"
#include "envspec/diagnostics.hpp"
#include "envspec/host_paths.hpp"
#include "support/debian/apt_packages.hpp"
#include "support/debian/debian_version.hpp"
#include "support/http.hpp"
#include "support/log.hpp"
#include "support/python/pep440.hpp"
#include "support/python/pep508.hpp"
#include "support/python/wheel.hpp"
#include "support/python/wheel_archive.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>

namespace lockstep::builder {

namespace {

constexpr std::uint64_t k_max_page = 64ULL << 20;
constexpr std::uint64_t k_max_metadata = 16ULL << 20;
constexpr std::uint64_t k_max_wheel = 16ULL << 30;
constexpr const char* k_metadata_ns = "wheel-metadata";
// PEP 691: ask for JSON (it carries file sizes), accept the HTML forms.
constexpr const char* k_accept = "Accept: application/vnd.pypi.simple.v1+json, "
                                 "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1";

// platform_machine (Python's os.uname().machine) for an OCI architecture.
std::string machine_of(const oci::Platform& platform) {
  static const std::map<std::string, std::string> machines = {
      {"amd64", "x86_64"}, {"arm64", "aarch64"},   {"386", "i686"},        {"ppc64le", "ppc64le"},
      {"s390x", "s390x"},  {"riscv64", "riscv64"}, {"mips64le", "mips64"}, {"loong64", "loongarch64"}};
  if (platform.architecture == "arm") {
    return platform.variant == "v6" ? "armv6l" : "armv7l";
  }
  auto it = machines.find(platform.architecture);
  return it == machines.end() ? platform.architecture : it->second;
}

// The deb `name` in the lock for `arch` (or architecture all), if any.
const envspec::LockedArtifact* find_deb(const envspec::Lock& lock, const std::string& name,
                                        const std::string& arch) {
  const envspec::LockedArtifact* found = nullptr;
  for (const envspec::LockedArtifact& a : lock.artifacts) {
    if (a.kind == "deb" && a.name == name && (a.arch == arch || a.arch == "all" || found == nullptr)) {
      found = &a;
    }
  }
  return found;
}

// The upstream part of a Debian version ("3.11.2-6+deb12u1" -> "3.11.2").
Result<std::string> upstream_of(const envspec::LockedArtifact& deb) {
  LS_TRY_ASSIGN(DebianVersion v, DebianVersion::parse(deb.version));
  return v.upstream;
}

// The tag part of a wheel file name: "demo-1.0-py3-none-any.whl" -> "py3-none-any".
std::string tag_text(const WheelName& w) {
  std::string stem = w.filename.substr(0, w.filename.size() - 4);
  std::size_t pos = stem.size();
  for (int i = 0; i < 3 && pos != std::string::npos; ++i) {
    pos = stem.rfind('-', pos - 1);
  }
  return pos == std::string::npos ? stem : stem.substr(pos + 1);
}

std::string repo_label(const envspec::Spec& spec, int i) {
  const envspec::Repo& r = spec.repos[static_cast<std::size_t>(i)];
  return fmt::format("repos[{}] ({})", i, r.kind == envspec::Repo::Kind::wheels ? r.dir_text : r.url_text);
}

// One requested project, merged over the packages.pip entries that name it.
struct Wanted {
  std::string project;
  std::size_t index = 0;           // the first packages.pip entry
  std::string text;                // its text
  SpecifierSet specifier;          // every clause of every entry
  std::set<std::string> extras;    // requested extras, then those dependencies ask for
  std::optional<PyVersion> pinned; // the == version
  std::set<std::string> hashes;    // from a requirements file: the file must have one of them
  std::string from_file;           // "requirements.txt:12" when it came from one
  // Chosen:
  int repo = -1;
  IndexFile file;
  std::optional<WheelName> wheel;
  std::optional<CoreMetadata> metadata;
  std::uint64_t size = 0;
};

// The files of `project` in repository `i`: empty when the repository does not have it.
class RepoReader {
public:
  explicit RepoReader(const envspec::Spec& spec) : m_spec(spec), m_local_roots(envspec::local_roots(spec)) {}

  Result<std::vector<IndexFile>> files(int i, const std::string& project) {
    const envspec::Repo& repo = m_spec.repos[static_cast<std::size_t>(i)];
    if (repo.kind == envspec::Repo::Kind::wheels) {
      auto it = m_wheelhouses.find(i);
      if (it == m_wheelhouses.end()) {
        log::info("reading wheelhouse {}", repo.dir_text);
        LS_TRY_ASSIGN(std::vector<IndexFile> all, scan_wheelhouse(repo.dir, m_local_roots));
        std::multimap<std::string, IndexFile> by_project;
        for (IndexFile& f : all) {
          auto name = WheelName::parse(f.filename);
          if (!name) {
            log::warn("{}: skipping {}: {}", repo_label(m_spec, i), f.filename, name.error().message);
            continue;
          }
          by_project.emplace(name->project, std::move(f));
        }
        it = m_wheelhouses.emplace(i, std::move(by_project)).first;
      }
      std::vector<IndexFile> out;
      for (auto [f, end] = it->second.equal_range(project); f != end; ++f) {
        out.push_back(f->second);
      }
      return out;
    }
    std::string url = repo.url + "/" + project + "/";
    if (url.rfind("file:", 0) == 0) {
      url += "index.html"; // a directory index on disk, as pip reads one
    }
    log::info("reading {}", url);
    FetchOptions fo;
    fo.max_size = k_max_page;
    fo.headers.emplace_back(k_accept);
    fo.local_roots = m_local_roots;
    Result<std::string> body = http_get(url, fo);
    if (!body) {
      if (body.error().message.find(": not found") != std::string::npos) {
        return std::vector<IndexFile>{};
      }
      return body.error().with_context(repo_label(m_spec, i));
    }
    const std::size_t first = body->find_first_not_of(" \t\r\n");
    const bool is_json = first != std::string::npos && (*body)[first] == '{';
    auto files = parse_project_page(*body, is_json ? k_simple_json_type : std::string_view("text/html"), url);
    if (!files) {
      return files.error().with_context(repo_label(m_spec, i));
    }
    return files;
  }

private:
  const envspec::Spec& m_spec;
  std::vector<std::filesystem::path> m_local_roots;
  std::map<int, std::multimap<std::string, IndexFile>> m_wheelhouses; // project -> files
};

// Why no wheel of the pinned version installs, for the error message.
struct Choice {
  std::optional<IndexFile> file;
  std::optional<WheelName> wheel;
  std::string problem; // set when `file` is not
};

// Picks the wheel of `w`'s pinned version from `files`: the newest matching version, not yanked
// (unless only yanked files match), the best tag for the target, the highest build number.
Choice choose_wheel(const Wanted& w, const std::vector<IndexFile>& files, const std::vector<WheelTag>& tags,
                    const PythonTarget& target, const PyVersion& python) {
  struct Candidate {
    const IndexFile* file;
    WheelName name;
    std::size_t rank;
  };
  std::vector<Candidate> candidates;
  std::set<PyVersion> versions_seen;
  std::vector<std::string> same_version; // files of the pinned version that don't install
  for (const IndexFile& f : files) {
    const bool is_wheel = f.filename.size() > 4 && f.filename.substr(f.filename.size() - 4) == ".whl";
    std::optional<PyVersion> version;
    std::optional<WheelName> name;
    if (is_wheel) {
      if (auto n = WheelName::parse(f.filename)) {
        name = *n;
        version = n->version;
      }
    } else {
      // An sdist "name-1.0.tar.gz" / ".zip": only for the message.
      static const std::regex sdist_re(R"(.*-([0-9][A-Za-z0-9.!+_-]*)\.(tar\.gz|zip|tar\.bz2|tgz))");
      std::smatch m;
      if (std::regex_match(f.filename, m, sdist_re)) {
        if (auto v = PyVersion::parse(m[1].str())) {
          version = *v;
        }
      }
    }
    if (!version) {
      continue;
    }
    versions_seen.insert(*version);
    if (!w.specifier.contains(*version, Prereleases::allow)) {
      continue;
    }
    if (!name) {
      same_version.push_back(f.filename + " (an sdist)");
      continue;
    }
    auto rank = best_tag_rank(*name, tags);
    if (!rank) {
      same_version.push_back(f.filename);
      continue;
    }
    if (!f.requires_python.empty()) {
      auto rp = SpecifierSet::parse(f.requires_python);
      if (rp && !rp->contains(python, Prereleases::allow)) {
        same_version.push_back(fmt::format("{} (Requires-Python {} excludes {})", f.filename,
                                           f.requires_python, target.full_version));
        continue;
      }
    }
    candidates.push_back(Candidate{&f, *name, *rank});
  }
  Choice out;
  if (candidates.empty()) {
    if (same_version.empty()) {
      const std::vector<PyVersion> all(versions_seen.begin(), versions_seen.end());
      std::vector<std::string> shown;
      for (std::size_t i = all.size() > 12 ? all.size() - 12 : 0; i < all.size(); ++i) {
        shown.push_back(all[i].str());
      }
      out.problem = fmt::format(
          "no version {} of {}; {}", w.pinned->str(), w.project,
          shown.empty() ? std::string("it lists no versions")
                        : fmt::format("it has {}{}", all.size() > 12 ? "... " : "", fmt::join(shown, ", ")));
    } else {
      std::sort(same_version.begin(), same_version.end());
      out.problem =
          fmt::format("no wheel of {} {} for {}, only {}; lockstep installs wheels only (it does not "
                      "build sdists)",
                      w.project, w.pinned->str(), target.describe(), fmt::join(same_version, ", "));
    }
    return out;
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.file->yanked != b.file->yanked) {
      return !a.file->yanked;
    }
    if (a.name.version != b.name.version) {
      return a.name.version > b.name.version;
    }
    if (a.rank != b.rank) {
      return a.rank < b.rank;
    }
    if (a.name.build_number != b.name.build_number) {
      return a.name.build_number.value_or(0) > b.name.build_number.value_or(0);
    }
    return a.file->filename < b.file->filename;
  });
  out.file = *candidates.front().file;
  out.wheel = candidates.front().name;
  return out;
}

// The core metadata of a chosen wheel: the cached METADATA, the index's PEP 658 file, or the wheel
// itself (downloaded into the store by the caller).
Result<std::optional<CoreMetadata>>
metadata_without_wheel(const Wanted& w, const BlobStore& store,
                       const std::vector<std::filesystem::path>& local_roots) {
  const std::string what = fmt::format("{} (METADATA)", w.file.filename);
  if (auto cached = store.get_record(k_metadata_ns, w.file.sha256)) {
    if (auto m = parse_core_metadata(*cached, what)) {
      return std::optional<CoreMetadata>(std::move(*m));
    }
  }
  if (!w.file.has_metadata || w.file.size == std::nullopt) {
    return std::optional<CoreMetadata>();
  }
  FetchOptions fetch;
  fetch.max_size = k_max_metadata;
  fetch.local_roots = local_roots;
  LS_TRY_ASSIGN(std::string text, http_get(w.file.url + ".metadata", fetch));
  if (!w.file.metadata_sha256.empty()) {
    const std::string got = sha256_of(text).hex();
    if (got != w.file.metadata_sha256) {
      return invalid_input("{}.metadata has sha256 {}, the index says {}; refusing it", w.file.url, got,
                           w.file.metadata_sha256);
    }
  }
  LS_TRY_ASSIGN(CoreMetadata m, parse_core_metadata(text, what));
  if (auto r = store.put_record(k_metadata_ns, w.file.sha256, text); !r) {
    log::debug("can't record the metadata of {}: {}", w.file.filename, r.error().message);
  }
  return std::optional<CoreMetadata>(std::move(m));
}

// A previously locked wheel that can stand for `w` without asking the index.
std::optional<Wanted> reuse_previous(const Wanted& w, const envspec::Lock& lock, const envspec::Spec& spec,
                                     const LockOptions& options, const std::vector<WheelTag>& tags) {
  if (!options.previous || options.update_all || options.update.count(w.project) != 0) {
    return std::nullopt;
  }
  const envspec::Lock& previous = *options.previous;
  if (previous.inputs.value("repos", nlohmann::json()) != lock.inputs.value("repos", nlohmann::json())) {
    return std::nullopt; // priorities may have changed
  }
  for (const envspec::LockedArtifact& a : previous.artifacts) {
    if (a.kind != "wheel" || a.name != w.project || a.repo < 0 ||
        static_cast<std::size_t>(a.repo) >= spec.repos.size() ||
        spec.repos[static_cast<std::size_t>(a.repo)].kind != envspec::Repo::Kind::pypi) {
      continue;
    }
    auto version = PyVersion::parse(a.version);
    auto name = WheelName::parse(url_filename(a.url));
    if (!version || !name || name->project != w.project || !(name->version == *version) ||
        !w.specifier.contains(*version, Prereleases::allow) || !best_tag_rank(*name, tags) ||
        (!w.hashes.empty() && w.hashes.count(a.sha256.hex()) == 0)) {
      continue;
    }
    Wanted out = w;
    out.repo = a.repo;
    out.file.filename = name->filename;
    out.file.url = a.url;
    out.file.sha256 = a.sha256.hex();
    out.file.size = a.size;
    out.wheel = *name;
    out.size = a.size;
    return out;
  }
  return std::nullopt;
}

} // namespace

std::string url_filename(const std::string& url) {
  std::string path = url.substr(0, url.find_first_of("?#"));
  std::string last = path.substr(path.rfind('/') + 1);
  std::string out;
  for (std::size_t i = 0; i < last.size(); ++i) {
    if (last[i] == '%' && i + 2 < last.size() && std::isxdigit(static_cast<unsigned char>(last[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(last[i + 2]))) {
      out += static_cast<char>(std::stoi(last.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += last[i];
    }
  }
  return out;
}

std::string PythonTarget::describe() const {
  std::string cp = "cp" + version;
  cp.erase(std::remove(cp.begin(), cp.end(), '.'), cp.end());
  return fmt::format("{} manylinux {} (CPython {}, glibc {})", cp, machine, full_version, glibc);
}

namespace {

// The image's Debian python3.X (the one python3 selects when several are locked) into `t`.
Result<void> debian_python(const envspec::Lock& lock, const std::string& arch, PythonTarget& t) {
  static const std::regex python_re(R"(python3\.([0-9]+))");
  std::map<std::string, const envspec::LockedArtifact*> pythons; // "3.11" -> deb
  for (const envspec::LockedArtifact& a : lock.artifacts) {
    std::smatch m;
    if (a.kind == "deb" && std::regex_match(a.name, m, python_re)) {
      pythons["3." + m[1].str()] = find_deb(lock, a.name, arch);
    }
  }
  if (pythons.empty()) {
    return invalid_input(
        "the image has no Python from apt (no python3.X package in the lock): add python3 to "
        "packages.apt; wheels are installed for the image's Debian Python (or, over an image base "
        "whose Python is not a Debian package, name its interpreter in base.python)");
  }
  const envspec::LockedArtifact* deb = nullptr;
  std::string version;
  if (pythons.size() == 1) {
    version = pythons.begin()->first;
    deb = pythons.begin()->second;
  } else {
    // Debian's python3 depends on its default python3.X.
    const envspec::LockedArtifact* python3 = find_deb(lock, "python3", arch);
    if (python3 != nullptr) {
      LS_TRY_ASSIGN(std::string up, upstream_of(*python3));
      for (const auto& [v, d] : pythons) {
        if (up.rfind(v + ".", 0) == 0 || up == v) {
          version = v;
          deb = d;
        }
      }
    }
    if (deb == nullptr) {
      std::vector<std::string> names;
      names.reserve(pythons.size());
      for (const auto& [v, d] : pythons) {
        names.push_back(d->name);
      }
      return invalid_input("the image has several Pythons ({}) and no python3 package saying which is the "
                           "default: add python3 to packages.apt",
                           fmt::join(names, ", "));
    }
  }
  t.version = version;
  t.package =
      deb->name + " " + deb->version + (deb->reason == "installed in the base image" ? " (base image)" : "");
  LS_TRY_ASSIGN(std::string upstream, upstream_of(*deb));
  std::optional<std::string> full = python_full_version(upstream, version);
  if (!full) {
    return invalid_input("can't tell the Python version of {}: its upstream version {} is not {}.N",
                         t.package, upstream, version);
  }
  t.full_version = *full;
  const bool has_python3 =
      find_deb(lock, "python3-minimal", arch) != nullptr || find_deb(lock, "python3", arch) != nullptr;
  t.interpreter = has_python3 ? "/usr/bin/python3" : "/usr/bin/python" + version;
  t.site = "usr/local/lib/python" + version + "/dist-packages";
  return {};
}

// The base's own interpreter `interpreter` (`base.python`) into `t`.
Result<void> base_python(const BaseMetadata& base, const std::string& interpreter, PythonTarget& t) {
  LS_TRY_ASSIGN(BasePython py, find_base_python(base, interpreter));
  t.version = py.version;
  t.full_version = py.full_version;
  t.interpreter = interpreter;
  t.package = fmt::format("{} (base image, {})", interpreter, py.from);
  t.data_dir = py.prefix;
  t.scripts_dir = py.bin;
  t.site = py.site;
  t.debian = false;
  return {};
}

} // namespace

Result<PythonTarget> python_target(const envspec::Lock& locked, const oci::Platform& platform,
                                   const BaseMetadata* base, std::string_view interpreter) {
  const std::string arch = envspec::debian_arch(platform);
  // Over a base, its installed packages join the lock's where the lock doesn't replace them.
  envspec::Lock merged;
  if (base != nullptr) {
    LS_TRY_ASSIGN(merged, lock_with_base_packages(locked, *base));
  }
  const envspec::Lock& lock = base != nullptr ? merged : locked;
  PythonTarget t;
  if (!interpreter.empty()) {
    if (base == nullptr) {
      return internal_error("base.python without the base image's metadata");
    }
    LS_TRY(base_python(*base, std::string(interpreter), t));
  } else {
    LS_TRY(debian_python(lock, arch, t));
  }
  const envspec::LockedArtifact* libc = find_deb(lock, "libc6", arch);
  if (libc == nullptr) {
    return invalid_input("the image has {} but no libc6 in the lock{}, so its glibc version (for manylinux "
                         "wheels) is unknown: add libc6 to packages.apt",
                         t.package, base != nullptr ? " or the base image's dpkg database" : "");
  }
  LS_TRY_ASSIGN(std::string libc_upstream, upstream_of(*libc));
  static const std::regex glibc_re(R"(([0-9]+)\.([0-9]+).*)");
  std::smatch m;
  if (!std::regex_match(libc_upstream, m, glibc_re)) {
    return invalid_input("can't tell the glibc version of libc6 {}", libc->version);
  }
  t.glibc = m[1].str() + "." + m[2].str();
  t.machine = machine_of(platform);
  return t;
}

namespace {

// ---- the passes of lock_wheels ---------------------------------------------------------------------

/// Locking packages.pip: what each pass of lock_wheels learns, for the passes after it.
struct PipLock {
  PipLock(const envspec::Spec& spec_, envspec::Lock& lock_, const BlobStore& store_,
          const LockOptions& options_, const BaseMetadata* base_)
      : spec(spec_), lock(lock_), store(store_), options(options_), base(base_),
        local_roots(envspec::local_roots(spec_)) {}

  const envspec::Spec& spec;
  envspec::Lock& lock;
  const BlobStore& store;
  const LockOptions& options;
  const BaseMetadata* base; ///< the base image's metadata, or null
  /// Local files (wheelhouses, file: indexes and the wheels they list) are read only inside these.
  const std::vector<std::filesystem::path> local_roots;
  // find_target
  PythonTarget target;
  std::vector<WheelTag> tags; ///< the target's wheel tags, best first
  MarkerEnv env;              ///< for markers
  PyVersion python;           ///< the target's full version
  // collect_pins and the passes after it
  std::map<std::string, Wanted> wanted; ///< by project
  /// Over a base image: the distributions its target Python sees, by project ("version (path)").
  std::map<std::string, std::pair<PyVersion, std::string>> base_dists;

  /// "packages.pip[I]", or where a requirements file put the entry.
  [[nodiscard]] std::string item_path(std::size_t i) const {
    const std::string& origin = spec.packages.pip[i].origin;
    return origin.empty() ? fmt::format("packages.pip[{}]", i) : origin;
  }
};

// The distributions a base image's target Python sees: the .dist-info directories in Debian's
// site directories for that Python (METADATA's Name and Version; unreadable ones are skipped).
std::map<std::string, std::pair<PyVersion, std::string>> base_distributions(const BaseMetadata& base,
                                                                            const PythonTarget& target) {
  const std::string v = target.version;
  // A Python that is not Debian's sees its own site-packages only.
  const std::set<std::string> sites =
      target.debian
          ? std::set<std::string>{"usr/lib/python3/dist-packages", "usr/lib/python" + v + "/dist-packages",
                                  "usr/local/lib/python" + v + "/dist-packages",
                                  "usr/lib/python" + v + "/site-packages",
                                  "usr/local/lib/python" + v + "/site-packages"}
          : std::set<std::string>{target.site};
  std::map<std::string, std::pair<PyVersion, std::string>> out;
  for (const auto& [dir, text] : base.dist_info) {
    const std::size_t slash = dir.rfind('/');
    if (slash == std::string::npos || sites.count(dir.substr(0, slash)) == 0) {
      continue;
    }
    auto md = parse_core_metadata(text, dir + "/METADATA");
    if (!md) {
      log::debug("base image: {}", md.error().message);
      continue;
    }
    out.emplace(md->project, std::pair{md->version, "/" + dir});
  }
  return out;
}

// Pass 1: the target: the image's Python and glibc, from its Debian packages (or base.python).
Result<void> find_target(PipLock& l) {
  Result<PythonTarget> target = python_target(l.lock, l.spec.platform, l.base, l.spec.base.python);
  if (!target) {
    envspec::Diagnostics diagnostics;
    if (l.spec.base.python.empty()) {
      diagnostics.error(l.spec.packages.pip.front().location, "packages.pip", target.error().message);
    } else {
      diagnostics.error(l.spec.base.python_location, "base.python", target.error().message);
    }
    return diagnostics.to_error();
  }
  l.target = *target;
  LS_TRY_ASSIGN(l.tags, supported_tags(l.target.version, l.target.glibc, l.target.machine));
  l.env = linux_cpython(l.target.full_version, l.target.machine);
  LS_TRY_ASSIGN(l.python, PyVersion::parse(l.target.full_version));
  log::info("locking Python packages for {} from {}", l.target.describe(), l.target.package);
  if (l.base != nullptr) {
    l.base_dists = base_distributions(*l.base, l.target);
  }
  return {};
}

/// A packages.pip entry as an exact pin.
struct Pin {
  Requirement req;
  PyVersion version;
};

// packages.pip[i] as an exact pin that applies to the target; nullopt when it does not apply or is
// not a pin (with a diagnostic).
std::optional<Pin> pin_of(const PipLock& l, std::size_t i, envspec::Diagnostics& diagnostics) {
  const envspec::PackageRequest& p = l.spec.packages.pip[i];
  Result<Requirement> req = Requirement::parse(p.text);
  if (!req) {
    diagnostics.error(p.location, l.item_path(i), req.error().message);
    return std::nullopt;
  }
  if (!req->url.empty()) {
    diagnostics.error(p.location, l.item_path(i),
                      fmt::format("{}: direct URL requirements are not supported; pin a version from a "
                                  "repository ({}==X.Y.Z)",
                                  p.text, req->name));
    return std::nullopt;
  }
  std::optional<PyVersion> pinned;
  for (const VersionSpecifier& c : req->specifier.clauses()) {
    if (c.op == VersionSpecifier::Op::equal && !c.wildcard) {
      pinned = c.version;
    }
  }
  if (!pinned) {
    diagnostics.error(p.location, l.item_path(i),
                      fmt::format("{} is not pinned; write {}==X.Y.Z (lockstep installs exact versions only)",
                                  p.text, req->name));
    return std::nullopt;
  }
  Result<bool> applies = req->applies(l.env);
  if (!applies) {
    diagnostics.error(p.location, l.item_path(i), applies.error().message);
    return std::nullopt;
  }
  if (!*applies) {
    log::info("{}: skipped, its marker is false for {}", p.text, l.target.describe());
    return std::nullopt;
  }
  return Pin{std::move(*req), *pinned};
}

// Adds the pin of packages.pip[i] to the wanted set, merged with earlier entries for its project.
void add_pin(PipLock& l, std::size_t i, const Pin& pin, envspec::Diagnostics& diagnostics) {
  const envspec::PackageRequest& p = l.spec.packages.pip[i];
  const Requirement& req = pin.req;
  auto [it, fresh] = l.wanted.try_emplace(req.project);
  Wanted& w = it->second;
  if (fresh) {
    w.project = req.project;
    w.index = i;
    w.text = p.text;
    w.specifier = req.specifier;
    w.pinned = pin.version;
  } else if (!(*w.pinned == pin.version)) {
    diagnostics.error(p.location, l.item_path(i),
                      fmt::format("{} conflicts with packages.pip[{}]: {}", p.text, w.index, w.text));
    return;
  } else {
    std::string merged = w.specifier.str() + "," + req.specifier.str();
    w.specifier = unwrap(SpecifierSet::parse(merged));
  }
  w.extras.insert(req.extras.begin(), req.extras.end());
  w.hashes.insert(p.hashes.begin(), p.hashes.end());
  if (w.from_file.empty()) {
    w.from_file = p.from_file;
  }
}

// Pass 2: every requirement must be an exact pin; those whose marker is false here are skipped.
Result<void> collect_pins(PipLock& l) {
  envspec::Diagnostics diagnostics;
  for (std::size_t i = 0; i < l.spec.packages.pip.size(); ++i) {
    if (std::optional<Pin> pin = pin_of(l, i, diagnostics)) {
      add_pin(l, i, *pin, diagnostics);
    }
  }
  if (!diagnostics.empty()) {
    return diagnostics.to_error();
  }
  return {};
}

// The files of `w`'s project in the first repository (in the spec's order) that has it, which
// becomes w.repo; none: a problem.
Result<std::vector<IndexFile>> find_project(const PipLock& l, RepoReader& reader, Wanted& w,
                                            std::vector<std::string>& problems) {
  std::vector<IndexFile> files;
  std::vector<std::string> looked;
  for (std::size_t r = 0; r < l.spec.repos.size() && w.repo < 0; ++r) {
    if (l.spec.repos[r].kind == envspec::Repo::Kind::apt) {
      continue;
    }
    LS_TRY_ASSIGN(files, reader.files(static_cast<int>(r), w.project));
    looked.push_back(repo_label(l.spec, static_cast<int>(r)));
    if (!files.empty()) {
      w.repo = static_cast<int>(r);
    }
  }
  if (w.repo < 0) {
    problems.push_back(fmt::format("{}: {}: no repository has {} (looked in {})", l.item_path(w.index),
                                   w.text, w.project, fmt::join(looked, ", ")));
  }
  return files;
}

// Chooses w.file among its repository's `files`, or says why none will do.
void pick_file(const PipLock& l, Wanted& w, std::vector<IndexFile> files,
               std::vector<std::string>& problems) {
  if (!w.hashes.empty()) {
    // Hash-checking mode (a requirements file with --hash): only files with a listed hash.
    const std::size_t all = files.size();
    files.erase(std::remove_if(files.begin(), files.end(),
                               [&w](const IndexFile& f) { return w.hashes.count(f.sha256) == 0; }),
                files.end());
    if (files.empty()) {
      problems.push_back(fmt::format("{}: {}: none of the {} files {} has for {} has a sha256 that {} lists",
                                     l.item_path(w.index), w.text, all, repo_label(l.spec, w.repo), w.project,
                                     w.from_file));
      return;
    }
  }
  Choice choice = choose_wheel(w, files, l.tags, l.target, l.python);
  if (!choice.file) {
    problems.push_back(fmt::format("{}: {}: {} has {}", l.item_path(w.index), w.text,
                                   repo_label(l.spec, w.repo), choice.problem));
    return;
  }
  if (choice.file->sha256.empty()) {
    problems.push_back(fmt::format("{}: {}: the index gives no sha256 for {} ({}); lockstep pins every file "
                                   "by sha256: use an index that lists #sha256= hashes",
                                   l.item_path(w.index), w.text, choice.file->filename, choice.file->url));
    return;
  }
  if (choice.file->yanked) {
    log::warn("{}: {} is yanked{}{}; using it because the pinned version has no other wheel", w.text,
              choice.file->filename, choice.file->yanked_reason.empty() ? "" : ": ",
              choice.file->yanked_reason);
  }
  w.file = *choice.file;
  w.wheel = choice.wheel;
}

// Pass 3: the wheel of each pin: kept from the previous lock, else from the first repository that
// has the project.
Result<void> choose_wheels(PipLock& l) {
  RepoReader reader(l.spec);
  std::vector<std::string> problems;
  for (auto& [project, w] : l.wanted) {
    if (auto reused = reuse_previous(w, l.lock, l.spec, l.options, l.tags)) {
      log::debug("{}: keeping {} from the previous lock", w.text, reused->file.filename);
      w = std::move(*reused);
      continue;
    }
    LS_TRY_ASSIGN(std::vector<IndexFile> files, find_project(l, reader, w, problems));
    if (w.repo >= 0) {
      pick_file(l, w, std::move(files), problems);
    }
  }
  if (!problems.empty()) {
    return invalid_input("can't lock packages.pip:\n  {}", fmt::join(problems, "\n  "));
  }
  return {};
}

// Pass 4: their metadata: cached, PEP 658 files, or the wheels themselves (into the store, verified).
Result<void> read_metadata(PipLock& l) {
  std::vector<Download> downloads;
  std::vector<Wanted*> downloaded;
  for (auto& [project, w] : l.wanted) {
    LS_TRY_ASSIGN(Digest sha, Digest::parse("sha256:" + w.file.sha256));
    if (!l.store.has(sha)) {
      LS_TRY_ASSIGN(w.metadata, metadata_without_wheel(w, l.store, l.local_roots));
      if (w.metadata) {
        w.size = *w.file.size;
        continue;
      }
    }
    downloads.push_back(Download{w.file.url, sha, w.file.size, w.file.filename});
    downloaded.push_back(&w);
  }
  if (downloads.empty()) {
    return {};
  }
  log::Timer t("fetch wheels");
  FetchOptions fetch;
  fetch.max_size = k_max_wheel;
  fetch.local_roots = l.local_roots;
  LS_TRY_ASSIGN(std::vector<BlobInfo> blobs, fetch_all(l.store, downloads, fetch));
  for (std::size_t i = 0; i < downloaded.size(); ++i) {
    Wanted& w = *downloaded[i];
    w.size = static_cast<std::uint64_t>(blobs[i].size);
    LS_TRY_ASSIGN(CoreMetadata m, read_wheel_metadata(l.store.blob_path(blobs[i].digest), w.file.filename));
    w.metadata = std::move(m);
  }
  return {};
}

// Each wheel's METADATA names its project and version, and its Requires-Python admits the target.
Result<void> check_metadata(const PipLock& l) {
  std::vector<std::string> problems;
  for (const auto& [project, w] : l.wanted) {
    const CoreMetadata& m = *w.metadata;
    if (m.project != project || !(m.version == w.wheel->version)) {
      problems.push_back(fmt::format("{}: the METADATA of {} names {} {}", w.text, w.file.filename, m.name,
                                     m.version.str()));
    } else if (m.requires_python && !m.requires_python->contains(l.python, Prereleases::allow)) {
      problems.push_back(fmt::format("{} {} requires Python {}; the image has {} ({})", project,
                                     m.version.str(), m.requires_python->str(), l.target.full_version,
                                     l.target.package));
    }
  }
  if (!problems.empty()) {
    return invalid_input("can't lock packages.pip:\n  {}", fmt::join(problems, "\n  "));
  }
  return {};
}

// One round of the closure check: the dependencies of every wanted wheel that apply here, each
// pinned at a version it accepts (else a line in `missing`); extras they ask for are added to the
// wanted wheels. True when that added an extra.
Result<bool> check_dependencies(PipLock& l, std::set<std::string>& missing) {
  bool changed = false;
  for (auto& [project, w] : l.wanted) {
    const std::vector<std::string> extras(w.extras.begin(), w.extras.end());
    for (const Requirement& dep : w.metadata->requires_dist) {
      Result<bool> applies = dep.applies(l.env, extras);
      if (!applies) {
        return applies.error().with_context(
            fmt::format("{} {}: Requires-Dist {}", project, w.wheel->version.str(), dep.str()));
      }
      if (!*applies) {
        continue;
      }
      const std::string needs = fmt::format("{}=={} needs {}", project, w.wheel->version.str(), dep.str());
      auto it = l.wanted.find(dep.project);
      if (it == l.wanted.end()) {
        auto in_base = l.base_dists.find(dep.project);
        if (in_base == l.base_dists.end()) {
          missing.insert(needs + " (not pinned)");
        } else if (!dep.url.empty() || !dep.specifier.contains(in_base->second.first, Prereleases::allow)) {
          missing.insert(fmt::format("{} (not pinned; the base image has {} {} in {})", needs, dep.project,
                                     in_base->second.first.str(), in_base->second.second));
        }
        continue; // installed in the base, at a version it accepts
      }
      Wanted& d = it->second;
      if (!dep.url.empty() || !dep.specifier.contains(d.wheel->version, Prereleases::allow)) {
        missing.insert(fmt::format("{} ({}=={} is pinned)", needs, dep.project, d.wheel->version.str()));
        continue;
      }
      for (const std::string& e : dep.extras) {
        if (d.extras.insert(e).second) {
          changed = true;
        }
      }
    }
  }
  return changed;
}

// Pass 5: the closure: every dependency that applies here (with the extras asked for) must be
// pinned in the set, at a version it accepts. Extras dependencies ask for widen the set until stable.
Result<void> check_closure(PipLock& l) {
  std::set<std::string> missing;
  for (bool changed = true; changed;) {
    missing.clear();
    LS_TRY_ASSIGN(changed, check_dependencies(l, missing));
  }
  if (!missing.empty()) {
    return invalid_input("packages.pip is not closed: lockstep does not choose versions for unpinned "
                         "dependencies:\n  {}\npin them in packages.pip, e.g. from `pip freeze` of a working "
                         "environment",
                         fmt::join(missing, "\n  "));
  }
  for (const auto& [project, w] : l.wanted) {
    for (const std::string& e : w.extras) {
      const auto& provided = w.metadata->provides_extra;
      if (!provided.empty() && std::find(provided.begin(), provided.end(), e) == provided.end()) {
        log::warn("{} {} has no extra '{}'", project, w.wheel->version.str(), e);
      }
    }
  }
  return {};
}

// Pass 6: one artifact per wheel.
void add_artifacts(PipLock& l) {
  for (const auto& [project, w] : l.wanted) {
    envspec::LockedArtifact a;
    a.kind = "wheel";
    a.name = project;
    a.version = w.wheel->version.str();
    a.arch = tag_text(*w.wheel);
    a.group = "python";
    a.size = w.size;
    a.sha256 = unwrap(Digest::parse("sha256:" + w.file.sha256));
    a.url = w.file.url;
    a.repo = w.repo;
    a.reason = fmt::format("requested by {}", l.item_path(w.index));
    if (auto in_base = l.base_dists.find(project); in_base != l.base_dists.end()) {
      a.reason += fmt::format("; shadows the base image's {} {} ({})", project, in_base->second.first.str(),
                              in_base->second.second);
      log::info("{} {} shadows the base image's {} {} ({})", project, a.version, project,
                in_base->second.first.str(), in_base->second.second);
    }
    l.lock.artifacts.push_back(std::move(a));
  }
}

} // namespace

Result<void> lock_wheels(const envspec::Spec& spec, envspec::Lock& lock, const BlobStore& store,
                         const LockOptions& options, const BaseMetadata* base) {
  if (spec.packages.pip.empty()) {
    return {};
  }
  PipLock l(spec, lock, store, options, base);
  // 1. The target: the image's Python and glibc, from its Debian packages.
  LS_TRY(find_target(l));
  // 2. Every requirement an exact pin (those whose marker is false here skipped), merged by project.
  LS_TRY(collect_pins(l));
  // 3. The wheel of each pin: the first repository that has the project decides.
  LS_TRY(choose_wheels(l));
  // 4. Their metadata, checked against the pins and the target's Python.
  LS_TRY(read_metadata(l));
  LS_TRY(check_metadata(l));
  // 5. The closure: every dependency that applies here is pinned in the set.
  LS_TRY(check_closure(l));
  // 6. One artifact per wheel.
  add_artifacts(l);
  return {};
}

} // namespace lockstep::builder
