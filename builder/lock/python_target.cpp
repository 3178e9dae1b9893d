// The Python an image targets: its Debian python3.X and libc6, or a base image's interpreter.
// See python_target.hpp.
#include "builder/lock/python_target.hpp"

#include "envspec/spec/host_paths.hpp"
#include "envspec/yaml/diagnostics.hpp"
#include "support/base/log.hpp"
#include "support/debian/apt_packages.hpp"
#include "support/debian/deb_archive.hpp"
#include "support/debian/debian_version.hpp"
#include "support/net/http.hpp"
#include "support/python/pep440.hpp"
#include "support/python/pep508.hpp"
#include "support/python/wheel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>

namespace lockstep::builder {

namespace {

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

// The lock's conda python, when it has one, into `t` (prefix: the conda environment's, absolute):
// wheels then go into the environment's site-packages, as pip run there would put them. Returns
// that python's artifact, or null.
const envspec::LockedArtifact* conda_python(const envspec::Lock& lock, std::string_view prefix,
                                            PythonTarget& t) {
  const auto python =
      std::find_if(lock.artifacts.begin(), lock.artifacts.end(), [](const envspec::LockedArtifact& a) {
        return a.kind == "conda" && a.name == "python" && a.conda;
      });
  if (python == lock.artifacts.end() || prefix.empty()) {
    return nullptr;
  }
  const std::string& v = python->version;
  const std::size_t dot = v.find('.');
  const std::size_t dot2 = dot == std::string::npos ? std::string::npos : v.find('.', dot + 1);
  t.full_version = v;
  t.version = v.substr(0, dot2);
  const std::string root(prefix.substr(1));
  t.interpreter = fmt::format("{}/bin/python{}", prefix, t.version);
  t.package = fmt::format("conda python {} {}", v, python->conda->build);
  t.data_dir = root;
  t.scripts_dir = root + "/bin";
  t.site = python->conda->python_site_packages_path.empty()
               ? fmt::format("{}/lib/python{}/site-packages", root, t.version)
               : root + "/" + python->conda->python_site_packages_path;
  t.debian = false;
  t.conda = true;
  return &*python;
}

// The glibc floor a conda python states ("__glibc >=2.17,<3.0.a0" -> "2.17"), "" when none.
std::string conda_glibc_floor(const envspec::LockedArtifact& python) {
  static const std::regex floor_re(R"(__glibc\s*>=\s*([0-9]+)\.([0-9]+).*)");
  for (const std::string& d : python.conda->depends) {
    std::smatch m;
    if (std::regex_match(d, m, floor_re)) {
      return m[1].str() + "." + m[2].str();
    }
  }
  return {};
}

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
                                   const BaseMetadata* base, std::string_view interpreter,
                                   std::string_view conda_prefix) {
  const std::string arch = envspec::debian_arch(platform);
  // Over a base, its installed packages join the lock's where the lock doesn't replace them.
  envspec::Lock merged;
  if (base != nullptr) {
    LS_TRY_ASSIGN(merged, lock_with_base_packages(locked, *base));
  }
  const envspec::Lock& lock = base != nullptr ? merged : locked;
  PythonTarget t;
  const envspec::LockedArtifact* conda = nullptr; // the lock's conda python, when it is the target
  if (!interpreter.empty()) {
    if (base == nullptr) {
      return internal_error("base.python without the base image's metadata");
    }
    LS_TRY(base_python(*base, std::string(interpreter), t));
  } else {
    conda = conda_python(lock, conda_prefix, t);
    if (conda == nullptr) {
      LS_TRY(debian_python(lock, arch, t));
    }
  }
  const envspec::LockedArtifact* libc = find_deb(lock, "libc6", arch);
  if (libc == nullptr && conda != nullptr) {
    t.glibc = conda_glibc_floor(*conda); // no libc6 to ask: the floor conda's python itself states
    if (t.glibc.empty()) {
      return invalid_input(
          "the image has {} but no libc6 in the lock and the python record states no __glibc "
          "floor, so its glibc version (for manylinux wheels) is unknown: add libc6 to "
          "packages.apt",
          t.package);
    }
    t.machine = machine_of(platform);
    return t;
  }
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

} // namespace lockstep::builder
