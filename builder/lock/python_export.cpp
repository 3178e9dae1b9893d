// A lock's wheels as a pip requirements file or a PEP 751 pylock.toml: see python_export.hpp.
#include "builder/lock/python_export.hpp"

#include "builder/lock/wheel_lock.hpp"
#include "support/base/version.hpp"

#include <fmt/format.h>

// As in support/registry/host_config.cpp: header-only, errors as values.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <algorithm>
#include <set>
#include <sstream>
#include <toml++/toml.h>

namespace lockstep::builder {

namespace {

namespace fs = std::filesystem;

bool is_remote(const std::string& url) {
  return url.starts_with("http://") || url.starts_with("https://");
}

// A local lock URL (relative to the spec, or file:) as a path relative to the output's directory.
std::string local_path(const std::string& url, const PythonExportOptions& o) {
  fs::path p = url.starts_with("file://") ? fs::path(url.substr(7)) : o.spec_dir / url;
  p = p.lexically_normal();
  fs::path rel = p.lexically_relative(o.output_dir.lexically_normal());
  return rel.empty() ? p.string() : rel.generic_string();
}

Result<void> check_text(const std::string& what, const std::string& value) {
  if (std::any_of(value.begin(), value.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    return invalid_input("export: {} '{}' has whitespace or control characters; it can't be written safely",
                         what, value);
  }
  return {};
}

// "CPython 3.11.2 on x86_64 (glibc 2.36)", when the lock tells.
std::string target_text(const envspec::Spec& spec, const envspec::Lock& lock) {
  auto t = python_target(lock, spec.platform, nullptr, {}, spec.conda.prefix);
  if (!t) {
    return fmt::format("the image's Python on {}", spec.platform.str());
  }
  return fmt::format("CPython {} on {} (glibc {})", t->full_version, t->machine, t->glibc);
}

std::vector<const envspec::LockedArtifact*> wheels_of(const envspec::Lock& lock) {
  std::vector<const envspec::LockedArtifact*> out;
  for (const envspec::LockedArtifact& a : lock.artifacts) {
    if (a.kind == "wheel") {
      out.push_back(&a);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  return out;
}

Result<std::string> requirements_txt(const envspec::Spec& spec, const envspec::Lock& lock,
                                     const PythonExportOptions& o) {
  const auto wheels = wheels_of(lock);
  std::string out = fmt::format(
      "# Written by lockstep {} from {}: the image's Python packages, each pinned with its sha256,\n"
      "# for {}. Install them elsewhere with\n"
      "#   pip install --require-hashes --no-deps -r FILE\n",
      k_version, o.lock_name, target_text(spec, lock));
  // The repositories the wheels came from, in the spec's order: the first index as --index-url.
  std::set<int> used;
  for (const auto* a : wheels) {
    used.insert(a->repo);
  }
  bool first_index = true;
  for (int r : used) {
    if (r < 0 || static_cast<std::size_t>(r) >= lock.repos.size()) {
      continue;
    }
    const envspec::LockedRepo& repo = lock.repos[static_cast<std::size_t>(r)];
    if (repo.kind == "pypi") {
      const std::string url = is_remote(repo.url) ? repo.url : local_path(repo.url, o);
      LS_TRY(check_text("index URL", url));
      out += fmt::format("{} {}\n", first_index ? "--index-url" : "--extra-index-url", url);
      first_index = false;
    } else if (repo.kind == "wheels") {
      const std::string dir = local_path(repo.url, o);
      LS_TRY(check_text("wheelhouse", dir));
      out += fmt::format("--find-links {}\n", dir);
    }
  }
  if (first_index) {
    out += "--no-index\n";
  }
  out += "--only-binary :all:\n";
  for (const auto* a : wheels) {
    LS_TRY(check_text("version of " + a->name, a->version));
    out += fmt::format("\n# {}\n{}=={} \\\n    --hash=sha256:{}\n", a->reason, a->name, a->version,
                       a->sha256.hex());
  }
  return out;
}

Result<std::string> pylock_toml(const envspec::Spec& spec, const envspec::Lock& lock,
                                const PythonExportOptions& o) {
  const auto wheels = wheels_of(lock);
  toml::table root;
  root.insert("lock-version", "1.0");
  root.insert("created-by", "lockstep");
  auto t = python_target(lock, spec.platform, nullptr, {}, spec.conda.prefix);
  if (t) {
    root.insert("requires-python", fmt::format("=={}.*", t->version));
    toml::array envs;
    envs.push_back(
        fmt::format("sys_platform == \"linux\" and platform_machine == \"{}\" and python_version == \"{}\"",
                    t->machine, t->version));
    root.insert("environments", std::move(envs));
  }
  toml::array packages;
  for (const auto* a : wheels) {
    toml::table pkg;
    pkg.insert("name", a->name);
    pkg.insert("version", a->version);
    toml::table wheel;
    const std::string filename = url_filename(a->url);
    LS_TRY(check_text("wheel file name", filename));
    wheel.insert("name", filename);
    if (is_remote(a->url)) {
      wheel.insert("url", a->url);
      if (a->repo >= 0 && static_cast<std::size_t>(a->repo) < lock.repos.size() &&
          lock.repos[static_cast<std::size_t>(a->repo)].kind == "pypi" &&
          is_remote(lock.repos[static_cast<std::size_t>(a->repo)].url)) {
        pkg.insert("index", lock.repos[static_cast<std::size_t>(a->repo)].url);
      }
    } else {
      wheel.insert("path", local_path(a->url, o));
    }
    wheel.insert("size", static_cast<std::int64_t>(a->size));
    toml::table hashes;
    hashes.insert("sha256", a->sha256.hex());
    wheel.insert("hashes", std::move(hashes));
    toml::array wheel_list;
    wheel_list.push_back(std::move(wheel));
    pkg.insert("wheels", std::move(wheel_list));
    toml::table tool;
    toml::table ours;
    ours.insert("reason", a->reason);
    tool.insert("lockstep", std::move(ours));
    pkg.insert("tool", std::move(tool));
    packages.push_back(std::move(pkg));
  }
  root.insert("packages", std::move(packages));
  std::ostringstream text;
  text << fmt::format("# Written by lockstep {} from {}: the image's Python packages (PEP 751), for {}.\n",
                      k_version, o.lock_name, target_text(spec, lock));
  text << root << "\n";
  return text.str();
}

} // namespace

Result<std::string> export_python(const envspec::Spec& spec, const envspec::Lock& lock,
                                  const PythonExportOptions& options) {
  if (wheels_of(lock).empty()) {
    return invalid_input("export: the lock has no Python packages (packages.pip is empty)");
  }
  return options.format == PythonExportFormat::requirements ? requirements_txt(spec, lock, options)
                                                            : pylock_toml(spec, lock, options);
}

} // namespace lockstep::builder
