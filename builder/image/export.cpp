// A Dockerfile or an Apptainer definition file from a spec and its lock (`lockstep export`).
//
// Both recipes follow lockstep's build order: base, the lock's .debs (installed with dpkg in the
// lock's order), its wheels (pip, --no-deps, from the checked files), git sources at their commits,
// copy: from the host, env and workdir, run: steps, then user, labels, entrypoint and cmd. Every
// value from the spec or the lock is checked against a character set that is safe where it lands
// (a Dockerfile word, an Apptainer %files line) or quoted for it (shell words by shell_quote, the
// Dockerfile's exec form as JSON); comments escape control characters (escape_controls); what can't
// be written is an error, or a limitation when leaving it out keeps the recipe useful.
#include "builder/image/export.hpp"

#include "support/base/text.hpp"
#include "support/system/process.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <string_view>

namespace lockstep::builder {

namespace {

using envspec::LockedArtifact;
using envspec::Spec;

// one URL, path or env value written into a recipe
constexpr std::size_t k_max_value = std::size_t{64} * 1024;
constexpr std::string_view k_unpack_image = "debian:bookworm-slim"; // dpkg-deb for a scratch base

// ---- what may be written where ---------------------------------------------------------------------

bool only_chars(std::string_view s, std::string_view extra) {
  return !s.empty() && s.size() <= k_max_value && std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           extra.find(c) != std::string_view::npos;
  });
}

// URL characters (RFC 3986) less the quote, '$' (a Dockerfile expands it) and '#' (BuildKit reads
// a git ref).
bool safe_url(std::string_view s) {
  return only_chars(s, "-._~:/?[]@!&()*+,;=%");
}

// A path in the image or under the spec's directory, usable unquoted everywhere.
bool safe_path(std::string_view s) {
  return only_chars(s, "-._+@%=,:~/");
}

// A file name under /tmp/lockstep/{debs,wheels}.
bool safe_file(std::string_view s) {
  return only_chars(s, "-._+~") && s != "." && s != ".." && s.size() <= 255;
}

// A double-quoted Dockerfile word (ENV, LABEL): '\', '"' and '$' escaped. Empty when `s` has a
// newline or another control character, which no Dockerfile word can hold.
std::optional<std::string> docker_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return std::nullopt;
    }
    if (c == '\\' || c == '"' || c == '$') {
      out += '\\';
    }
    out += c;
  }
  return out + "\"";
}

bool has_control(std::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// Whether a run: step must be written in the exec form (JSON) rather than as a shell-form line,
// which BuildKit would read differently from `sh -c STEP`: a newline or other control character
// (the line ends), a trailing backslash (the line continues), "<<" (a heredoc reads the lines after
// it), a leading '[' (read as JSON).
bool needs_exec_form(std::string_view step) {
  const std::size_t last = step.find_last_not_of(" \t");
  const std::size_t first = step.find_first_not_of(" \t");
  return has_control(step) || (last != std::string_view::npos && step[last] == '\\') ||
         step.find("<<") != std::string_view::npos || (first != std::string_view::npos && step[first] == '[');
}

// Apptainer splits a definition file into sections at every line whose first word starts with '%',
// and into stages at every line starting with "bootstrap:" (any case), inside quotes or not (its
// parser knows no shell). A value written on several lines must not hold such a line. Refused:
// after a newline, '%' behind blanks or non-ASCII bytes (Unicode spaces count as blanks there), or
// "bootstrap:" with the long s (U+017F) Go's case folding also matches.
Result<void> check_def_lines(std::string_view value, const std::string& what) {
  std::size_t nl = value.find('\n');
  while (nl != std::string_view::npos) {
    const std::string_view line = value.substr(nl + 1, value.find('\n', nl + 1) - nl - 1);
    const std::size_t first = line.find_first_not_of(std::string_view(" \t\v\f\r"));
    std::size_t i = 0;
    while (i < line.size() && (std::string_view(" \t\v\f\r").find(line[i]) != std::string_view::npos ||
                               static_cast<unsigned char>(line[i]) >= 0x80)) {
      ++i;
    }
    std::string folded;
    for (std::size_t j = 0; j < line.size() && folded.size() < 10; ++j) {
      if (line.substr(j, 2) == "\xc5\xbf") { // U+017F, folds to 's'
        folded += 's';
        ++j;
      } else {
        folded += ascii_lower(line.substr(j, 1));
      }
    }
    if ((i < line.size() && line[i] == '%') || folded == "bootstrap:") {
      return invalid_input("{}: the line '{}' would start a new {} of the Apptainer definition file; "
                           "reword it (or export --dockerfile)",
                           what, escape_controls(line.substr(first == std::string_view::npos ? 0 : first)),
                           folded == "bootstrap:" ? "stage" : "section");
    }
    nl = value.find('\n', nl + 1);
  }
  return {};
}

// %XX-decodes the last path segment of a URL (no query or fragment): the wheel's file name.
std::string url_file_name(std::string_view url) {
  url = url.substr(0, url.find_first_of("?#"));
  url = url.substr(url.rfind('/') + 1);
  std::string out;
  for (std::size_t i = 0; i < url.size(); ++i) {
    auto hex = [](char c) {
      return c >= '0' && c <= '9'   ? c - '0'
             : c >= 'a' && c <= 'f' ? c - 'a' + 10
             : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                    : -1;
    };
    if (url[i] == '%' && i + 2 < url.size() && hex(url[i + 1]) >= 0 && hex(url[i + 2]) >= 0) {
      out += static_cast<char>(hex(url[i + 1]) * 16 + hex(url[i + 2]));
      i += 2;
    } else {
      out += url[i];
    }
  }
  return out;
}

// ---- the plan: what the recipe holds, checked once for both formats ---------------------------------

// Where an artifact comes from.
enum class Where {
  remote,  ///< http(s): fetched by URL
  context, ///< a path relative to the spec's directory (the lock records local files so)
  host,    ///< an absolute path or file:// URL outside the spec's directory
};

// A .deb or wheel of the lock.
struct File {
  const LockedArtifact* artifact = nullptr;
  std::string name; // under debs/ or wheels/
  Where where = Where::remote;
  std::string source; // URL, relative path or absolute path
};

// A git source of the lock with the copy item that asked for it.
struct GitSource {
  const LockedArtifact* artifact = nullptr;
  std::string to;
  bool remote = false; // fetched by URL; else a repository on the build host
  std::string source;  // the URL, or the path (relative to the spec's directory when inside it)
};

// A copy: item from the host.
struct HostCopy {
  std::string from; // relative to the spec's directory
  std::string to;
  bool directory = false; // its contents go into `to` (COPY's rule; %files gets "DIR/.")
  const envspec::CopyItem* item = nullptr;
};

struct Plan {
  std::vector<File> debs;
  std::vector<File> wheels;
  std::vector<GitSource> git;
  std::vector<HostCopy> copies;
  std::vector<std::pair<std::string, std::string>> env; // sorted by name
  std::vector<std::string> limitations;
  bool has_pip = false; // the lock installs python3-pip
};

Result<std::pair<Where, std::string>> locate(const std::string& url, std::string_view what) {
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) {
    // A fragment (an index's "#sha256=...") is not part of what is fetched, and BuildKit would read
    // one as a git ref.
    const std::string fetched = url.substr(0, url.find('#'));
    if (!safe_url(fetched)) {
      return invalid_input("{}: URL '{}' has characters a recipe can't hold safely (quotes, '$', spaces or "
                           "control characters)",
                           what, url);
    }
    return std::pair{Where::remote, fetched};
  }
  std::string path = url.rfind("file://", 0) == 0 ? url.substr(7) : url;
  if (!safe_path(path) || path.find("..") != std::string::npos) {
    return invalid_input(
        "{}: '{}' is not a path a recipe can hold safely (letters, digits and - . _ + @ % = , : ~ "
        "/; no '..')",
        what, url);
  }
  return std::pair{path.front() == '/' ? Where::host : Where::context, path};
}

Result<File> deb_file(const LockedArtifact& a) {
  const std::string what = fmt::format("lock: deb {} {}", a.name, a.version);
  // The pool's name: the epoch dropped.
  const std::string version = a.version.substr(a.version.find(':') + 1);
  File f;
  f.artifact = &a;
  f.name = fmt::format("{}_{}_{}.deb", a.name, version, a.arch);
  if (!safe_file(f.name) || f.name.find('_') != a.name.size()) {
    return invalid_input("{}: name, version or architecture has characters a file name can't hold", what);
  }
  LS_TRY_ASSIGN(auto located, locate(a.url, what));
  std::tie(f.where, f.source) = located;
  return f;
}

Result<File> wheel_file(const LockedArtifact& a) {
  const std::string what = fmt::format("lock: wheel {} {}", a.name, a.version);
  File f;
  f.artifact = &a;
  f.name = url_file_name(a.url);
  if (!safe_file(f.name) || f.name.size() < 5 || f.name.substr(f.name.size() - 4) != ".whl") {
    return invalid_input("{}: the URL '{}' does not end in a wheel's file name", what, a.url);
  }
  LS_TRY_ASSIGN(auto located, locate(a.url, what));
  std::tie(f.where, f.source) = located;
  return f;
}

// A git URL fetched over the network: a scheme lockstep fetches from, or scp-like `user@host:path`
// (a local path in the lock is absolute or relative to the spec's directory, and has no ':').
bool git_url(std::string_view url) {
  for (std::string_view scheme : {"http://", "https://", "git://", "ssh://"}) {
    if (url.rfind(scheme, 0) == 0) {
      return true;
    }
  }
  const std::size_t colon = url.find(':');
  return url.find("://") == std::string_view::npos && colon != std::string_view::npos &&
         url.find('@') < colon && url.find('/') > colon;
}

Result<Plan> make_plan(const Spec& spec, const envspec::Lock& lock, ExportFormat format) {
  Plan plan;
  const bool docker = format == ExportFormat::dockerfile;
  for (const LockedArtifact& a : lock.artifacts) {
    if (a.kind == "deb") {
      LS_TRY_ASSIGN(File f, deb_file(a));
      plan.has_pip = plan.has_pip || a.name == "python3-pip";
      plan.debs.push_back(std::move(f));
    } else if (a.kind == "wheel") {
      LS_TRY_ASSIGN(File f, wheel_file(a));
      plan.wheels.push_back(std::move(f));
    }
  }
  for (const std::vector<File>* files : {&plan.debs, &plan.wheels}) {
    for (const File& f : *files) {
      if (f.where == Where::host) {
        plan.limitations.push_back(fmt::format(
            "{} is a file on the build host outside the spec directory ({}): {}", f.name, f.source,
            docker ? "copy it into the build context and re-lock" : "%setup copies it from there"));
      }
    }
  }

  // Git sources: the lock's artifact for each copy item with git.
  for (const envspec::CopyItem& item : spec.copy) {
    if (item.git.empty()) {
      if (!safe_path(item.to)) {
        return invalid_input("copy: to '{}' has characters a recipe can't hold safely",
                             escape_controls(item.to));
      }
      std::string from = item.from.lexically_relative(spec.dir).generic_string();
      if (from.empty() || from.rfind("..", 0) == 0) {
        return invalid_input("copy: from {} is outside the spec directory {}: a recipe can only copy from "
                             "the build context",
                             item.from_text, spec.dir.string());
      }
      if (!safe_path(from)) {
        return invalid_input("copy: from '{}' has characters a recipe can't hold safely",
                             escape_controls(item.from_text));
      }
      std::error_code ec;
      plan.copies.push_back(HostCopy{from, item.to + (item.to_is_dir && item.to != "/" ? "/" : ""),
                                     std::filesystem::is_directory(item.from, ec), &item});
      continue;
    }
    auto it = std::find_if(lock.artifacts.begin(), lock.artifacts.end(), [&](const LockedArtifact& a) {
      return a.kind == "git" && a.name == item.git_text && a.rev == item.rev;
    });
    if (it == lock.artifacts.end()) {
      return invalid_input("the lock has no commit for the git source {} (rev {}); run `lockstep lock`",
                           item.git_text, item.rev);
    }
    if (it->version.size() != 40 || !std::all_of(it->version.begin(), it->version.end(), [](char c) {
          return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        })) {
      return invalid_input("lock: git {}: '{}' is not a full commit id", it->name, it->version);
    }
    if (!safe_path(item.to)) {
      return invalid_input("copy: to '{}' has characters a recipe can't hold safely",
                           escape_controls(item.to));
    }
    GitSource g;
    g.artifact = &*it;
    g.to = item.to;
    g.remote = git_url(it->url);
    if (g.remote) {
      if (!safe_url(it->url)) {
        return invalid_input("lock: git {}: URL has characters a recipe can't hold safely", it->name);
      }
      g.source = it->url;
    } else {
      LS_TRY_ASSIGN(auto located, locate(it->url, "lock: git " + it->name));
      g.source = located.second;
      if (docker) {
        plan.limitations.push_back(fmt::format("git source {} is a repository on the build host: a "
                                               "Dockerfile can't fetch commit {} from it; copy "
                                               "that commit's tree into the build context instead",
                                               it->name, it->version));
      }
    }
    if (docker && g.remote && g.source.find(".git") == std::string::npos &&
        g.source.rfind("git://", 0) != 0) {
      plan.limitations.push_back(
          fmt::format("git source {} does not end in .git: BuildKit's ADD takes such an "
                      "http(s) URL for a plain file; write the URL with .git in the spec",
                      it->name));
    }
    plan.git.push_back(std::move(g));
  }

  // Environment: the spec's, plus NVIDIA_REQUIRE_CUDA from the stack solver unless the spec sets it.
  std::map<std::string, std::string> env(spec.env.begin(), spec.env.end());
  if (lock.stack && !lock.stack->nvidia_require_cuda.empty()) {
    env.emplace("NVIDIA_REQUIRE_CUDA", lock.stack->nvidia_require_cuda);
  }
  for (const auto& [name, value] : env) {
    if (docker && has_control(value)) {
      plan.limitations.push_back(fmt::format(
          "env {} has a newline or control character, which a Dockerfile ENV can't hold: left out", name));
      continue;
    }
    plan.env.emplace_back(name, value);
  }
  return plan;
}

// Whether an Apptainer %labels line can hold `key` (its first word; '%' would start a section).
bool def_label_key(std::string_view key) {
  return !key.empty() && key.find(' ') == std::string_view::npos && key.front() != '%';
}

// The limitations every export has, in a fixed order around the plan's own.
std::vector<std::string> limitations(const Spec& spec, const Plan& plan, ExportFormat format) {
  const bool docker = format == ExportFormat::dockerfile;
  std::vector<std::string> out;
  switch (spec.base.kind) {
  case envspec::BaseImage::Kind::debian:
    out.push_back(
        fmt::format("the base image is not pinned by digest: debian:{} is a moving tag (lockstep "
                    "bootstraps the base from the lock's packages; here they are installed over it)",
                    spec.base.suite));
    break;
  case envspec::BaseImage::Kind::oci:
    if (spec.base.pin) {
      out.push_back(
          fmt::format("the base is the OCI image {}@{} on the build host: the builder needs the same "
                      "image{}",
                      spec.base.path_text, spec.base.pin->str(),
                      docker ? ", as LOCKSTEP_BASE_IMAGE" : "; Apptainer does not check its digest"));
    } else {
      out.push_back(fmt::format("the base image is not pinned by digest: the spec names {} without @sha256:",
                                spec.base.path_text));
    }
    break;
  case envspec::BaseImage::Kind::registry:
    if (!spec.base.pin) {
      out.push_back(
          fmt::format("the base image is not pinned by digest: the spec names docker://{} without @sha256:",
                      spec.base.remote.str()));
    }
    break;
  case envspec::BaseImage::Kind::scratch:
    if (!plan.debs.empty()) {
      out.push_back(docker
                        ? fmt::format("a scratch base has no shell or dpkg: the packages are unpacked with "
                                      "dpkg-deb in a helper stage ({}, a moving tag) without maintainer "
                                      "scripts or a dpkg database",
                                      k_unpack_image)
                        : std::string("a scratch base has no shell or dpkg: %setup unpacks the packages "
                                      "with the host's dpkg-deb, without maintainer scripts or a dpkg "
                                      "database"));
    }
    break;
  }
  if (!docker) {
    out.emplace_back("Apptainer builds for the machine it runs on: the base is pulled for that architecture, "
                     "the lock's packages are for " +
                     spec.platform.str());
  }
  out.emplace_back(
      "lockstep's deterministic layer tars and epoch normalisation are not reproduced: the image "
      "digest will differ from lockstep build's");
  out.emplace_back("lockstep's own labels and annotations (dev.lockstep.*: lock digest, image facts) are not "
                   "written");
  if (!plan.wheels.empty() && !plan.has_pip) {
    out.emplace_back(
        "wheels are installed with pip, which the lock does not install (lockstep needs no pip): "
        "add python3-pip to packages.apt");
  }
  if (!plan.git.empty()) {
    out.emplace_back("git sources are pinned by commit (SHA-1) only: lockstep's sha256 of the tree is not "
                     "checked");
  }
  if (!plan.copies.empty()) {
    out.emplace_back(docker
                         ? "copy: from host paths become COPY lines relative to the spec directory (build "
                           "with it as the context); lockstep's mode and owner normalisation is not applied"
                         : "copy: from host paths become %files lines relative to the spec directory (build "
                           "there); they are copied before %post installs the packages, and lockstep's mode "
                           "and owner normalisation is not applied");
  }
  if (!spec.run.empty()) {
    out.emplace_back("`run:` steps are copied as-is; their outputs are not pinned");
    if (!docker &&
        std::any_of(spec.run.begin(), spec.run.end(), [](const envspec::RunStep& s) { return !s.network; })) {
      out.emplace_back(
          "`run:` steps get the network in %post (lockstep gives a step none unless network: true)");
    }
  }
  if (!docker && spec.user) {
    out.push_back(
        fmt::format("user: Apptainer runs as the calling user; `user: {}` is not applied", *spec.user));
  }
  if (!docker && spec.workdir) {
    out.emplace_back("workdir applies to `apptainer run` (the %runscript) only");
  }
  out.insert(out.end(), plan.limitations.begin(), plan.limitations.end());
  for (const auto& [key, value] : spec.labels) {
    if (has_control(key) || has_control(value) || (!docker && !def_label_key(key))) {
      out.push_back(fmt::format("label {} has a newline{}: left out", key,
                                docker
                                    ? " or control character"
                                    : ", control character, a space in its key or a key starting with '%'"));
    }
  }
  // Each is a comment line of the recipe and a warning on the terminal.
  for (std::string& line : out) {
    line = escape_controls(line);
  }
  return out;
}

std::string header(const Spec& spec, const envspec::Lock& lock, const ExportOptions& o,
                   const std::vector<std::string>& limits) {
  const bool docker = o.format == ExportFormat::dockerfile;
  std::string s;
  s += fmt::format("# Generated by `lockstep export {}` from {} ({}) and {} (spec {}).\n",
                   docker ? "--dockerfile" : "--apptainer-def", escape_controls(o.lock_name),
                   envspec::lock_digest(lock).str(), escape_controls(o.spec_name), spec.digest.str());
  s += fmt::format(
      "# Platform {}, epoch {}. Every .deb and wheel is fetched from its exact lock URL and\n"
      "# checked by sha256{}; git sources are pinned by commit. Build from the spec's directory:\n",
      lock.platform, lock.epoch, docker ? " (ADD --checksum)" : " (sha256sum -c)");
  s += docker ? fmt::format("#   docker buildx build --build-arg SOURCE_DATE_EPOCH={} -f Dockerfile .\n",
                            lock.epoch)
              : std::string("#   apptainer build IMAGE.sif lockstep.def\n");
  s += fmt::format("#\n# What this {} cannot express:\n", docker ? "Dockerfile" : "definition file");
  for (const std::string& l : limits) {
    s += "#   - " + l + "\n";
  }
  return s;
}

// ---- Dockerfile ------------------------------------------------------------------------------------

void docker_fetch_stage(const Plan& plan, std::string& s) {
  if (plan.debs.empty() && plan.wheels.empty()) {
    return;
  }
  s += "\n# The lock's .debs and wheels, fetched and checked by BuildKit; the install steps mount them.\n";
  s += "FROM scratch AS lockstep-artifacts\n";
  for (const auto& [files, dir] : {std::pair{&plan.debs, "debs"}, std::pair{&plan.wheels, "wheels"}}) {
    for (const File& f : *files) {
      if (f.where == Where::remote) {
        s += fmt::format("ADD --checksum={} {} /{}/{}\n", f.artifact->sha256.str(), f.source, dir, f.name);
      } else {
        s += fmt::format("COPY {} /{}/{}\n", f.source, dir, f.name);
      }
    }
  }
}

// "    echo 'HEX  DIR/FILE' | sha256sum -c --quiet - && \" for the files COPY brought in (ADD checked the
// rest).
std::string docker_local_checks(const std::vector<File>& files, std::string_view dir) {
  std::string s;
  for (const File& f : files) {
    if (f.where != Where::remote) {
      s += fmt::format("    echo '{}  {}/{}' | sha256sum -c --quiet - && \\\n", f.artifact->sha256.hex(), dir,
                       f.name);
    }
  }
  return s;
}

void docker_packages(const Spec& spec, const Plan& plan, std::string& s) {
  // On a scratch base the helper stage unpacked the packages.
  if (!plan.debs.empty() && spec.base.kind != envspec::BaseImage::Kind::scratch) {
    s += "\n# The lock's packages, in the lock's order.\n";
    s += "RUN --mount=type=bind,from=lockstep-artifacts,source=/debs,target=/tmp/lockstep/debs \\\n";
    s += docker_local_checks(plan.debs, "/tmp/lockstep/debs");
    s += "    dpkg -i";
    for (const File& f : plan.debs) {
      s += " \\\n      /tmp/lockstep/debs/" + f.name;
    }
    s += "\n";
  }
  if (!plan.wheels.empty()) {
    s += "\n# The lock's wheels, without their dependencies (the lock has them all).\n";
    s += "RUN --mount=type=bind,from=lockstep-artifacts,source=/wheels,target=/tmp/lockstep/wheels \\\n";
    s += docker_local_checks(plan.wheels, "/tmp/lockstep/wheels");
    s += "    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-deps --no-index --no-cache-dir";
    for (const File& f : plan.wheels) {
      s += " \\\n      /tmp/lockstep/wheels/" + f.name;
    }
    s += "\n";
  }
}

void docker_from(const Spec& spec, const envspec::Lock& lock, const Plan& plan, std::string& s) {
  const std::string platform = "--platform=" + lock.platform + " ";
  switch (spec.base.kind) {
  case envspec::BaseImage::Kind::debian:
    s += fmt::format("\nFROM {}debian:{}\n", platform, spec.base.suite);
    break;
  case envspec::BaseImage::Kind::oci:
    s += fmt::format("\n# base: {}{}: load that image into the builder as lockstep-base (or pass\n"
                     "# --build-arg LOCKSTEP_BASE_IMAGE=REF).\n",
                     escape_controls(spec.base.path_text),
                     spec.base.pin ? "@" + spec.base.pin->str() : std::string());
    s += fmt::format("ARG LOCKSTEP_BASE_IMAGE=lockstep-base{}\n",
                     spec.base.pin ? "@" + spec.base.pin->str() : std::string());
    s += fmt::format("FROM {}${{LOCKSTEP_BASE_IMAGE}}\n", platform);
    break;
  case envspec::BaseImage::Kind::registry: // the reference's characters are the registry grammar's
    s += fmt::format("\nFROM {}{}\n", platform, spec.base.remote.str());
    break;
  case envspec::BaseImage::Kind::scratch:
    if (!plan.debs.empty()) {
      s += fmt::format("\n# A scratch base has no dpkg: the packages are unpacked here and copied in.\n"
                       "FROM {}{} AS lockstep-unpack\n",
                       platform, k_unpack_image);
      s += "RUN --mount=type=bind,from=lockstep-artifacts,source=/debs,target=/tmp/lockstep/debs \\\n";
      s += docker_local_checks(plan.debs, "/tmp/lockstep/debs");
      s += "    mkdir /rootfs";
      for (const File& f : plan.debs) {
        s += " && \\\n    dpkg-deb -x /tmp/lockstep/debs/" + f.name + " /rootfs";
      }
      s += "\n";
      s += fmt::format("\nFROM {}scratch\nCOPY --from=lockstep-unpack /rootfs/ /\n", platform);
    } else {
      s += fmt::format("\nFROM {}scratch\n", platform);
    }
    break;
  }
  s += fmt::format("ARG SOURCE_DATE_EPOCH={}\n", lock.epoch);
}

std::string copy_flags(const envspec::CopyItem& item) {
  std::string flags;
  if (item.owner_policy == envspec::OwnerPolicy::fixed && (item.uid != 0 || item.gid != 0)) {
    flags += fmt::format("--chown={}:{} ", item.uid, item.gid);
  }
  if (item.mode_policy == envspec::ModePolicy::fixed) {
    flags += fmt::format("--chmod={:04o} ", item.mode);
  }
  return flags;
}

Result<std::string> dockerfile(const Spec& spec, const envspec::Lock& lock, const Plan& plan) {
  std::string s;
  docker_fetch_stage(plan, s);
  docker_from(spec, lock, plan, s);
  docker_packages(spec, plan, s);
  for (const GitSource& g : plan.git) {
    if (g.remote) {
      s += fmt::format("\n# git {} (rev {})\nADD {}#{} {}/\n", escape_controls(g.artifact->name),
                       escape_controls(g.artifact->rev), g.source, g.artifact->version,
                       g.to == "/" ? "" : g.to);
    } else {
      s += fmt::format("\n# git {} (rev {}) at commit {}: a repository on the build host, not expressible\n",
                       escape_controls(g.artifact->name), escape_controls(g.artifact->rev),
                       g.artifact->version);
    }
  }
  if (!plan.copies.empty()) {
    s += "\n";
    for (const HostCopy& c : plan.copies) {
      s += fmt::format("COPY {}{} {}\n", copy_flags(*c.item), c.from, c.to);
    }
  }
  if (!plan.env.empty()) {
    s += "\n";
    for (const auto& [name, value] : plan.env) {
      s += fmt::format("ENV {}={}\n", name, *docker_quote(value));
    }
  }
  if (spec.workdir) {
    if (!safe_path(*spec.workdir)) {
      return invalid_input("workdir '{}' has characters a Dockerfile can't hold safely",
                           escape_controls(*spec.workdir));
    }
    s += fmt::format("WORKDIR {}\n", *spec.workdir);
  }
  if (!spec.run.empty()) {
    s += "\n";
    for (const envspec::RunStep& step : spec.run) {
      const std::string flags = step.network ? "" : "--network=none ";
      if (needs_exec_form(step.sh)) {
        s += fmt::format("RUN {}{}\n", flags, nlohmann::json::array({"/bin/sh", "-c", step.sh}).dump());
      } else {
        s += fmt::format("RUN {}{}\n", flags, step.sh);
      }
    }
  }
  if (spec.user) {
    if (!only_chars(*spec.user, "-._:")) {
      return invalid_input("user '{}' has characters a Dockerfile can't hold safely",
                           escape_controls(*spec.user));
    }
    s += fmt::format("\nUSER {}\n", *spec.user);
  }
  bool first_label = true;
  for (const auto& [key, value] : spec.labels) {
    auto k = docker_quote(key);
    auto v = docker_quote(value);
    if (k && v) {
      s += fmt::format("{}LABEL {}={}\n", first_label ? "\n" : "", *k, *v);
      first_label = false;
    }
  }
  if (spec.entrypoint || spec.cmd) {
    s += "\n";
  }
  if (spec.entrypoint) {
    s += "ENTRYPOINT " + nlohmann::json(*spec.entrypoint).dump() + "\n";
  }
  if (spec.cmd) {
    s += "CMD " + nlohmann::json(*spec.cmd).dump() + "\n";
  }
  return s;
}

// ---- Apptainer ---------------------------------------------------------------------------------------

// The words, shell-quoted, for the %runscript; `what` names them in errors.
Result<std::string> words(const std::vector<std::string>& args, std::string_view what) {
  std::string s;
  for (std::size_t i = 0; i < args.size(); ++i) {
    LS_TRY(check_def_lines(args[i], fmt::format("{}[{}]", what, i)));
    s += (s.empty() ? "" : " ") + shell_quote(args[i]);
  }
  return s;
}

Result<std::string> apptainer_def(const Spec& spec, const envspec::Lock& lock, const Plan& plan) {
  if (spec.workdir && !safe_path(*spec.workdir)) { // %post and %runscript cd there
    return invalid_input("workdir '{}' has characters a definition file can't hold safely",
                         escape_controls(*spec.workdir));
  }
  std::string s;
  switch (spec.base.kind) {
  case envspec::BaseImage::Kind::debian:
    s += fmt::format("Bootstrap: docker\nFrom: debian:{}\n", spec.base.suite);
    break;
  case envspec::BaseImage::Kind::oci: {
    std::error_code ec;
    const bool dir = std::filesystem::is_directory(spec.base.path, ec);
    if (!safe_path(spec.base.path_text)) {
      return invalid_input("base.oci '{}' has characters a definition file can't hold safely",
                           escape_controls(spec.base.path_text));
    }
    s += fmt::format("Bootstrap: {}\nFrom: {}{}\n", dir ? "oci" : "oci-archive", spec.base.path_text,
                     spec.base.tag.empty() ? "" : ":" + spec.base.tag);
    break;
  }
  case envspec::BaseImage::Kind::registry:
    s += fmt::format("Bootstrap: docker\nFrom: {}\n", spec.base.remote.str());
    break;
  case envspec::BaseImage::Kind::scratch:
    s += "Bootstrap: scratch\n";
    break;
  }
  const bool scratch = spec.base.kind == envspec::BaseImage::Kind::scratch;
  const std::string epoch = fmt::format("    export SOURCE_DATE_EPOCH={}\n", lock.epoch);

  // %setup runs on the host: downloads (the base may have no curl), checks, git checkouts.
  if (!plan.debs.empty() || !plan.wheels.empty() || !plan.git.empty()) {
    s += "\n%setup\n    set -eu\n" + epoch;
    if (!plan.debs.empty() || !plan.wheels.empty()) {
      s += "    d=\"$APPTAINER_ROOTFS/tmp/lockstep\"\n    mkdir -p \"$d/debs\" \"$d/wheels\"\n";
      s += "    # fetch URL|PATH SHA256 FILE: download (curl or wget) or copy, then check the sha256.\n";
      s += "    fetch() {\n";
      s += "        case \"$1\" in\n";
      s += "        http://* | https://*)\n";
      s += "            if command -v curl >/dev/null 2>&1; then curl -fsSL -o \"$3\" \"$1\"; else wget -q "
           "-O \"$3\" "
           "\"$1\"; fi ;;\n";
      s += "        *) cp \"$1\" \"$3\" ;;\n";
      s += "        esac\n";
      s += "        echo \"$2  $3\" | sha256sum -c --quiet -\n";
      s += "    }\n";
      for (const auto& [files, dir] : {std::pair{&plan.debs, "debs"}, std::pair{&plan.wheels, "wheels"}}) {
        for (const File& f : *files) {
          s += fmt::format("    fetch {} {} \"$d/{}/{}\"\n", shell_quote(f.source), f.artifact->sha256.hex(),
                           dir, f.name);
        }
      }
      if (scratch && !plan.debs.empty()) {
        for (const File& f : plan.debs) {
          s += fmt::format("    dpkg-deb -x \"$d/debs/{}\" \"$APPTAINER_ROOTFS\"\n", f.name);
        }
        s += plan.wheels.empty() ? "    rm -rf \"$d\"\n" : "    rm -rf \"$d/debs\"\n";
      }
    }
    for (const GitSource& g : plan.git) {
      const std::string to = fmt::format("\"$APPTAINER_ROOTFS\"{}", g.to == "/" ? "" : g.to);
      s += fmt::format("    # git {} (rev {})\n", escape_controls(g.artifact->name),
                       escape_controls(g.artifact->rev));
      s +=
          fmt::format("    rm -rf {0}.lockstep-git && git clone --quiet --no-checkout {1} {0}.lockstep-git\n",
                      to, shell_quote(g.source));
      s +=
          fmt::format("    git -C {0}.lockstep-git checkout --quiet --detach {1}\n", to, g.artifact->version);
      s += fmt::format(
          "    rm -rf {0}.lockstep-git/.git && mkdir -p {0} && cp -a {0}.lockstep-git/. {0}/ && rm -rf "
          "{0}.lockstep-git\n",
          to);
    }
  }

  if (!plan.copies.empty()) {
    s += "\n%files\n";
    for (const HostCopy& c : plan.copies) {
      s += fmt::format("    {}{} {}\n", c.from, c.directory ? "/." : "", c.to);
    }
  }

  if (!plan.env.empty()) {
    s += "\n%environment\n";
    for (const auto& [name, value] : plan.env) {
      LS_TRY(check_def_lines(value, "env " + name));
      s += fmt::format("    export {}={}\n", name, shell_quote(value));
    }
  }

  const bool install = (!plan.debs.empty() && !scratch) || !plan.wheels.empty();
  if (install || !spec.run.empty() || !plan.env.empty()) {
    s += "\n%post\n    set -eu\n" + epoch;
    for (const auto& [name, value] : plan.env) {
      s += fmt::format("    export {}={}\n", name, shell_quote(value));
    }
    if (!plan.debs.empty() && !scratch) {
      s += "    # The lock's packages, in the lock's order.\n    dpkg -i";
      for (const File& f : plan.debs) {
        s += " \\\n        /tmp/lockstep/debs/" + f.name;
      }
      s += "\n";
    }
    if (!plan.wheels.empty()) {
      s += "    # The lock's wheels, without their dependencies (the lock has them all).\n";
      s += "    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-deps --no-index --no-cache-dir";
      for (const File& f : plan.wheels) {
        s += " \\\n        /tmp/lockstep/wheels/" + f.name;
      }
      s += "\n";
    }
    if (!plan.debs.empty() || !plan.wheels.empty()) {
      s += "    rm -rf /tmp/lockstep\n";
    }
    if (spec.workdir) {
      s += fmt::format("    mkdir -p {0}\n    cd {0}\n", *spec.workdir);
    }
    for (std::size_t i = 0; i < spec.run.size(); ++i) {
      const envspec::RunStep& step = spec.run[i];
      LS_TRY(check_def_lines(
          step.sh, fmt::format("run[{}] ({}:{})", i, step.location.file.string(), step.location.line)));
      s += fmt::format("    /bin/sh -c {}\n", shell_quote(step.sh));
    }
  }

  bool labels = false;
  for (const auto& [key, value] : spec.labels) {
    if (has_control(key) || has_control(value) || !def_label_key(key)) {
      continue;
    }
    s += fmt::format("{}    {} {}\n", labels ? "" : "\n%labels\n", key, value);
    labels = true;
  }

  if (spec.entrypoint || spec.cmd) {
    s += "\n%runscript\n";
    if (spec.workdir) {
      s += fmt::format("    cd {}\n", *spec.workdir);
    }
    if (spec.cmd && !spec.cmd->empty()) {
      LS_TRY_ASSIGN(std::string cmd, words(*spec.cmd, "cmd"));
      s += fmt::format("    if [ \"$#\" -eq 0 ]; then set -- {}; fi\n", cmd);
    }
    if (spec.entrypoint && !spec.entrypoint->empty()) {
      LS_TRY_ASSIGN(std::string entrypoint, words(*spec.entrypoint, "entrypoint"));
      s += fmt::format("    exec {} \"$@\"\n", entrypoint);
    } else {
      s += "    exec \"$@\"\n";
    }
  }
  return s;
}

} // namespace

Result<ExportResult> export_recipe(const envspec::Spec& spec, const envspec::Lock& lock,
                                   const ExportOptions& options) {
  LS_TRY_ASSIGN(Plan plan, make_plan(spec, lock, options.format));
  ExportResult out;
  out.limitations = limitations(spec, plan, options.format);
  std::string body;
  if (options.format == ExportFormat::dockerfile) {
    LS_TRY_ASSIGN(body, dockerfile(spec, lock, plan));
    out.text = "# syntax=docker/dockerfile:1.6\n" + header(spec, lock, options, out.limitations) + body;
  } else {
    LS_TRY_ASSIGN(body, apptainer_def(spec, lock, plan));
    out.text = header(spec, lock, options, out.limitations) + "\n" + body;
  }
  return out;
}

} // namespace lockstep::builder
