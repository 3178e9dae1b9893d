// The schema of spec version 1 (schema.hpp): validate_spec runs the walker (schema_walker.hpp);
// here are the walk over the top-level keys, `name` and `platform`, the rules that span keys, and
// the helpers every section uses (host paths and their confinement, image paths, locations inside
// a scalar). Each other section of the spec is read in its own schema_*.cpp.
#include "envspec/load/schema.hpp"

#include "envspec/load/schema_walker.hpp"
#include "support/oci/oci.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace lockstep::envspec {

namespace fs = std::filesystem;

namespace detail {

void SchemaWalker::walk(const Node& root, Spec& spec) {
  spec.platform = oci::Platform{"linux", "amd64", ""};
  if (root.find("name") == nullptr) {
    error(SourceLocation{m_spec_file, 1, 1, 1}, "name",
          "missing 'name' (the image name, e.g. 'name: my-app')");
  }
  for (const MapEntry& e : root.entries) {
    const std::string& key = e.key;
    const Node& v = e.value;
    if (key == "name") {
      name(v, spec.name);
    } else if (key == "platform") {
      platform(v, spec.platform);
    } else if (key == "platforms") {
      platforms(root, e, spec);
    } else if (key == "base") {
      base(v, spec.base);
    } else if (key == "repos") {
      repos(v, spec.repos);
    } else if (key == "packages") {
      packages(v, spec.packages);
    } else if (key == "conda") {
      spec.conda.location = e.key_location;
      conda(v, spec.conda);
    } else if (key == "stack") {
      spec.stack.emplace();
      spec.stack->location = e.key_location;
      stack(v, *spec.stack);
    } else if (key == "copy") {
      copy(v, spec.copy);
    } else if (key == "run") {
      run(v, spec.run);
    } else if (key == "env") {
      env(v, spec.env);
    } else if (key == "labels") {
      labels(v, spec.labels);
    } else if (key == "entrypoint") {
      argv(v, key, spec.entrypoint);
    } else if (key == "cmd") {
      argv(v, key, spec.cmd);
    } else if (key == "workdir") {
      workdir(v, spec.workdir);
    } else if (key == "user") {
      user(v, spec.user);
    } else if (key == "outputs") {
      this->outputs(v, spec.outputs);
    } else if (key == "mirrors") {
      mirrors(v, spec.mirrors);
    } else {
      unknown_key(e, "", m_shapes.spec);
    }
  }
  if (spec.platforms.empty()) {
    spec.platforms.push_back(spec.platform);
  }
  apply_conda_stack(spec);
  cross_checks(root, spec);
}

namespace {

// The last path segment of a repository URL ("sbsa" of …/cuda/repos/debian12/sbsa/).
std::string_view last_segment(std::string_view url) {
  while (url.ends_with('/')) {
    url.remove_suffix(1);
  }
  const std::size_t slash = url.rfind('/');
  return slash == std::string_view::npos ? url : url.substr(slash + 1);
}

// The URL up to and with the slash before its last segment (…/cuda/repos/debian12/ of …/sbsa/).
std::string_view parent_url(std::string_view url) {
  const std::string_view last = last_segment(url);
  return url.substr(0, static_cast<std::size_t>(last.data() - url.data()));
}

} // namespace

// A stack's CUDA, cuDNN and NCCL debs for linux/arm64 come from NVIDIA's sbsa repository (Grace and
// other Arm servers with discrete GPUs); its `arm64` directory is the Jetson line, and `x86_64` has
// no arm64 packages.
void SchemaWalker::check_cuda_repos(const Spec& spec) {
  const bool arm64 = std::any_of(spec.platforms.begin(), spec.platforms.end(),
                                 [](const oci::Platform& p) { return p.architecture == "arm64"; });
  if (!spec.stack || !arm64 || !spec.packages.conda.empty()) {
    return;
  }
  bool sbsa = false;
  const Repo* x86 = nullptr;
  for (const Repo& r : spec.repos) {
    if (r.kind != Repo::Kind::apt || r.url.find("/cuda/repos/") == std::string::npos) {
      continue;
    }
    const std::string_view dir = last_segment(r.url);
    if (dir == "arm64") {
      error(r.location, "repos",
            fmt::format("{} is NVIDIA's Jetson (L4T) line; a Grace or other Arm server with a discrete GPU "
                        "takes CUDA from the sbsa directory beside it ({}sbsa/)",
                        r.url_text, parent_url(r.url)));
    }
    sbsa = sbsa || dir == "sbsa";
    x86 = dir == "x86_64" && x86 == nullptr ? &r : x86;
  }
  if (x86 != nullptr && !sbsa) {
    error(
        x86->location, "repos",
        fmt::format("linux/arm64 takes CUDA from NVIDIA's sbsa repository, and {} has x86_64 packages only: "
                    "add {{apt: {}sbsa/, flat: true, keyring: …}}",
                    x86->url_text, parent_url(x86->url)));
  }
}

// Rules that span keys: packages need a repository of their kind, a Debian base needs apt.
void SchemaWalker::cross_checks(const Node& root, const Spec& spec) {
  const auto has_repo = [&spec](Repo::Kind kind) {
    return std::any_of(spec.repos.begin(), spec.repos.end(),
                       [kind](const Repo& r) { return r.kind == kind; });
  };
  const bool repos_valid =
      std::none_of(m_diags.items().begin(), m_diags.items().end(),
                   [](const Diagnostic& d) { return d.key_path.rfind("repos", 0) == 0; });
  const bool need_apt = spec.base.kind == BaseImage::Kind::debian || !spec.packages.apt.empty();
  if (need_apt && repos_valid && !has_repo(Repo::Kind::apt)) {
    const SourceLocation& at =
        spec.base.kind == BaseImage::Kind::debian ? spec.base.location : spec.packages.apt.front().location;
    error(at, spec.base.kind == BaseImage::Kind::debian ? "base.debian" : "packages.apt",
          "needs an apt repository in 'repos', e.g. {apt: http://deb.debian.org/debian, suite: bookworm, "
          "components: [main], keyring: /usr/share/keyrings/debian-archive-keyring.gpg}");
  }
  if (!spec.packages.pip.empty() && repos_valid && !has_repo(Repo::Kind::pypi) &&
      !has_repo(Repo::Kind::wheels)) {
    error(spec.packages.pip.front().location, "packages.pip",
          "needs a Python package index or wheelhouse in 'repos', e.g. {pypi: https://pypi.org/simple} or "
          "{wheels: ./wheelhouse}");
  }
  if (!spec.packages.conda.empty() && repos_valid && !has_repo(Repo::Kind::conda)) {
    error(spec.packages.conda.front().location, "packages.conda",
          "needs a conda channel in 'repos', e.g. {conda: https://conda.anaconda.org/conda-forge}");
  }
  // Over a conda environment the stack's parts are conda packages (envspec/stack/stack.hpp): its
  // channels, which packages.conda already needs, are all it needs.
  if (spec.stack && repos_valid && spec.packages.conda.empty()) {
    const StackRequest& st = *spec.stack;
    if (!st.framework.empty() && !has_repo(Repo::Kind::pypi) && !has_repo(Repo::Kind::wheels)) {
      error(st.framework_location, "stack.framework",
            fmt::format("needs a Python package index or wheelhouse in 'repos' for the {} wheels, e.g. "
                        "{{pypi: https://pypi.org/simple}}",
                        st.framework));
    }
    const bool apt_parts =
        st.cuda.given() || st.cudnn.given() || st.nccl.given() || st.python.given() || !st.mpi.empty();
    if (apt_parts && st.framework.empty() && !has_repo(Repo::Kind::apt)) {
      error(st.location, "stack",
            "needs an apt repository in 'repos' (CUDA, cuDNN and NCCL come from NVIDIA's CUDA repository, "
            "MPI and "
            "Python from Debian), e.g. {apt: "
            "https://developer.download.nvidia.com/compute/cuda/repos/debian12/"
            "x86_64/, flat: true, keyring: keys/cuda.gpg}");
    }
  }
  if (spec.platforms.size() > 1) {
    // Each platform reads its own conda subdir and noarch; the lock's share of one platform is then
    // exactly what a spec of that platform alone locks (docs/multi-platform.md).
    for (const Repo& r : spec.repos) {
      if (r.kind == Repo::Kind::conda && !r.subdirs.empty()) {
        error(r.location, "repos",
              "a spec of several platforms reads each platform's conda subdir (linux-64, linux-aarch64) and "
              "noarch: drop 'subdirs' from this channel");
      }
    }
  }
  check_cuda_repos(spec);
  for (const oci::Platform& each : spec.platforms) {
    if (spec.stack && each.architecture != "amd64" && each.architecture != "arm64") {
      error(spec.stack->location, "stack",
            fmt::format(
                "the recipes cover linux/amd64 and linux/arm64 (Grace, from NVIDIA's sbsa builds), not {}: "
                "name the packages in packages.apt and packages.pip for {} instead",
                each.str(), each.str()));
    }
    if (need_apt && debian_arch(each).empty()) {
      const MapEntry* p = root.find("platform");
      p = p != nullptr ? p : root.find("platforms");
      error(p != nullptr ? p->value.location : spec.base.location, p != nullptr ? p->key : "platform",
            fmt::format("Debian has no architecture for platform {}", each.str()));
    }
  }
}

void SchemaWalker::platforms(const Node& root, const MapEntry& e, Spec& spec) {
  if (const MapEntry* one = root.find("platform"); one != nullptr) {
    error(e.key_location, "platforms",
          fmt::format("give 'platform: {}' or 'platforms: [...]', not both", one->value.scalar));
    return;
  }
  if (!e.value.is_sequence() || e.value.items.empty()) {
    error(e.value.location, "platforms", "a list of platforms, e.g. [linux/amd64, linux/arm64]");
    return;
  }
  // linux/arm64 and linux/arm64/v8 are one platform (clients normalise them alike).
  auto same = [](const oci::Platform& a, const oci::Platform& b) {
    auto variant = [](const oci::Platform& p) {
      return p.architecture == "arm64" && (p.variant == "v8" || p.variant == "8") ? std::string() : p.variant;
    };
    return a.os == b.os && a.architecture == b.architecture && variant(a) == variant(b);
  };
  for (const Node& item : e.value.items) {
    const std::string* s = string(item, "platforms");
    if (s == nullptr) {
      continue;
    }
    Result<oci::Platform> p = oci::Platform::parse(*s);
    if (!p) {
      error(item.location, "platforms", p.error().message);
      continue;
    }
    if (std::any_of(spec.platforms.begin(), spec.platforms.end(),
                    [&](const oci::Platform& q) { return same(q, *p); })) {
      error(item.location, "platforms", fmt::format("{} is listed twice", p->str()));
      continue;
    }
    spec.platforms.push_back(*p);
  }
  if (!spec.platforms.empty()) {
    spec.platform = spec.platforms.front();
  }
}

// Reports the key of `e` as unknown in the map at `path`, whose keys the spec's shape lists.
void SchemaWalker::unknown_key(const MapEntry& e, const std::string& path, const shape::Shape& map) {
  unknown_key(e, path, shape::key_names(map), shape::later_key_names(map));
}

// The location of `len` characters at `offset` into the scalar `v`, when the scalar is written on
// one line without escapes; else the whole scalar.
SourceLocation SchemaWalker::sub_location(const Node& v, std::size_t offset, std::size_t len) {
  SourceLocation loc = v.location;
  const auto size = static_cast<int>(v.scalar.size());
  const int quote = v.quoted ? 1 : 0;
  if (loc.length == size + 2 * quote && loc.line > 0) {
    loc.column += quote + static_cast<int>(offset);
    loc.length = std::max(1, static_cast<int>(len));
  }
  return loc;
}

// A host path written in the spec, resolved against the directory of the file it is written in.
fs::path SchemaWalker::resolve_host_path(const Node& v) {
  fs::path written(v.scalar);
  fs::path p = (written.is_absolute() ? written : v.location.file.parent_path() / written).lexically_normal();
  if (!p.has_filename() && p != p.root_path()) {
    p = p.parent_path(); // "dir/" names the same file as "dir"
  }
  return p;
}

// The one rule for host paths the spec makes lockstep read (envspec/spec/host_paths.hpp): `path`,
// written as `text` at `v`, must lead inside the directory of the file that names it (extended
// files bring their own directory) unless --allow-outside. Reports at `v`; true when allowed.
bool SchemaWalker::confined(const Node& v, const std::string& key_path, const fs::path& path,
                            std::string_view text, const ExtraRoots& extra) {
  if (m_options.allow_outside) {
    return true;
  }
  if (auto problem = outside_problem(path, text, v.location.file.parent_path().lexically_normal(), extra)) {
    error(v.location, key_path, *problem);
    return false;
  }
  return true;
}

// An absolute path inside the image, normalised; nullopt after reporting.
std::optional<std::string> SchemaWalker::image_path(const Node& v, const std::string& path) {
  const std::string* s = string(v, path);
  if (s == nullptr) {
    return std::nullopt;
  }
  if (s->empty() || s->front() != '/') {
    error(v.location, path,
          fmt::format("must be an absolute path in the image (e.g. /opt/app), found '{}'", *s));
    return std::nullopt;
  }
  Result<std::string> normal = normalize_image_path(*s);
  if (!normal) {
    error(v.location, path, normal.error().message + "; paths in the image can't leave its root");
    return std::nullopt;
  }
  return *normal;
}

void SchemaWalker::name(const Node& v, std::string& out) {
  const std::string* s = nonempty_string(v, "name", "the image name");
  if (s == nullptr) {
    return;
  }
  if (!oci::valid_repository_name(*s)) {
    error(
        v.location, "name",
        fmt::format("invalid name '{}': use lowercase letters, digits and separators ('.', '_', '__', '-'), "
                    "with '/' between components, e.g. 'my-app'",
                    *s));
    return;
  }
  out = *s;
}

void SchemaWalker::platform(const Node& v, oci::Platform& out) {
  const std::string* s = string(v, "platform");
  if (s == nullptr) {
    return;
  }
  Result<oci::Platform> p = oci::Platform::parse(*s);
  if (!p) {
    error(v.location, "platform", p.error().message);
    return;
  }
  out = *p;
}

} // namespace detail

void validate_spec(const Node& root, const fs::path& spec_file, const LoadOptions& options, Spec& spec,
                   Diagnostics& diags) {
  detail::SchemaWalker(spec_file, options, diags).walk(root, spec);
}

bool is_top_level_key(std::string_view key) {
  return shape::find_key(shape::spec(), key) != nullptr;
}

} // namespace lockstep::envspec
