#include "envspec/load/schema.hpp"

#include "envspec/load/python_inputs.hpp"
#include "envspec/load/spec_shape.hpp"
#include "envspec/spec/host_paths.hpp"
#include "envspec/stack/recipes.hpp"
#include "envspec/yaml/yaml_reader.hpp"
#include "support/net/http.hpp"
#include "support/oci/image_source.hpp"
#include "support/python/pep508.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace lockstep::envspec {

namespace fs = std::filesystem;

namespace {

constexpr const char* k_argv_hint = R"(write it as a list, e.g. ["/bin/sh", "-c", "..."])";

// Parses a decimal number that fits in 32 bits (excluding 2^32-1, which means "no id").
std::optional<std::uint32_t> parse_id(std::string_view text) {
  std::uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || v == 0xFFFFFFFFu) {
    return std::nullopt;
  }
  return v;
}

// Validates a merged spec tree into a Spec, reporting every problem.
class SchemaWalker : public YamlReader {
public:
  SchemaWalker(const fs::path& spec_file, const LoadOptions& options, Diagnostics& diags)
      : YamlReader(diags, Dialect::spec), m_spec_file(spec_file), m_options(options) {}

  void walk(const Node& root, Spec& spec) {
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
      } else if (key == "base") {
        base(v, spec.base);
      } else if (key == "repos") {
        repos(v, spec.repos);
      } else if (key == "packages") {
        packages(v, spec.packages);
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
    apply_conda_stack(spec);
    cross_checks(root, spec);
  }

private:
  // Rules that span keys: packages need a repository of their kind, a Debian base needs apt.
  void cross_checks(const Node& root, const Spec& spec) {
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
    if (spec.stack && repos_valid) {
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
    if (need_apt && debian_arch(spec.platform).empty()) {
      const MapEntry* p = root.find("platform");
      error(p != nullptr ? p->value.location : spec.base.location, "platform",
            fmt::format("Debian has no architecture for platform {}", spec.platform.str()));
    }
  }

  using YamlReader::unknown_key;

  // Reports the key of `e` as unknown in the map at `path`, whose keys the spec's shape lists.
  void unknown_key(const MapEntry& e, const std::string& path, const shape::Shape& map) {
    unknown_key(e, path, shape::key_names(map), shape::later_key_names(map));
  }

  // The location of `len` characters at `offset` into the scalar `v`, when the scalar is written on
  // one line without escapes; else the whole scalar.
  static SourceLocation sub_location(const Node& v, std::size_t offset, std::size_t len) {
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
  static fs::path resolve_host_path(const Node& v) {
    fs::path written(v.scalar);
    fs::path p =
        (written.is_absolute() ? written : v.location.file.parent_path() / written).lexically_normal();
    if (!p.has_filename() && p != p.root_path()) {
      p = p.parent_path(); // "dir/" names the same file as "dir"
    }
    return p;
  }

  // The one rule for host paths the spec makes lockstep read (envspec/spec/host_paths.hpp): `path`,
  // written as `text` at `v`, must lead inside the directory of the file that names it (extended
  // files bring their own directory) unless --allow-outside. Reports at `v`; true when allowed.
  bool confined(const Node& v, const std::string& key_path, const fs::path& path, std::string_view text,
                const ExtraRoots& extra = {}) {
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
  std::optional<std::string> image_path(const Node& v, const std::string& path) {
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

  void name(const Node& v, std::string& out) {
    const std::string* s = nonempty_string(v, "name", "the image name");
    if (s == nullptr) {
      return;
    }
    if (!oci::valid_repository_name(*s)) {
      error(v.location, "name",
            fmt::format(
                "invalid name '{}': use lowercase letters, digits and separators ('.', '_', '__', '-'), "
                "with '/' between components, e.g. 'my-app'",
                *s));
      return;
    }
    out = *s;
  }

  void platform(const Node& v, oci::Platform& out) {
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

  void base(const Node& v, BaseImage& out) {
    out.location = v.location;
    if (v.is_scalar() && v.scalar == "scratch") {
      out.kind = BaseImage::Kind::scratch;
      return;
    }
    constexpr std::string_view expected = "'scratch' or a map {image: REF}, {oci: PATH} or {debian: SUITE}";
    if (v.is_scalar()) {
      std::string hint;
      if (oci::RegistryRef::parse(v.scalar)) {
        hint = fmt::format(" (an image in a registry is {{image: docker://{}}})", v.scalar);
      }
      error(v.location, "base", fmt::format("expected {}, found '{}'{}", expected, v.scalar, hint));
      return;
    }
    if (!expect_map(v, "base", expected)) {
      return;
    }
    if (v.find("debian") != nullptr) {
      debian_base(v, out);
      return;
    }
    const MapEntry* oci = v.find("oci");
    if (oci == nullptr && v.find("image") != nullptr) {
      image_base(v, out);
      return;
    }
    if (oci == nullptr) {
      error(v.location, "base",
            "missing 'image' or 'oci' (e.g. {image: docker://debian:bookworm} or {oci: ./base}, an OCI "
            "layout directory or OCI archive)");
    }
    if (oci != nullptr) {
      out.location = oci->value.location; // later errors about the base image point at its path
    }
    for (const MapEntry& e : v.entries) {
      if (e.key == "oci") {
        base_path(e.value, out);
      } else if (e.key == "tag") {
        base_tag(e.value, out);
      } else if (e.key == "python") {
        base_python(e.value, out);
      } else if (e.key == "variant") {
        error(e.key_location, "base.variant",
              "'variant' goes with 'debian' (e.g. {debian: bookworm, variant: apt})");
      } else if (e.key == "image") {
        error(e.key_location, "base.image", "a base is either {image: REF} or {oci: PATH}, not both");
      } else {
        unknown_key(e, "base", m_shapes.base);
      }
    }
  }

  // `base: {image: REF}`: an image named by reference (base_image_ref).
  void image_base(const Node& v, BaseImage& out) {
    out.key = "base.image";
    for (const MapEntry& e : v.entries) {
      if (e.key == "image") {
        base_image_ref(e.value, out);
      } else if (e.key == "python") {
        base_python(e.value, out);
      } else if (e.key == "tag") {
        error(e.key_location, "base.tag",
              "with 'image' the tag is part of the reference (e.g. {image: docker://debian:bookworm})");
      } else if (e.key == "variant") {
        error(e.key_location, "base.variant",
              "'variant' goes with 'debian' (e.g. {debian: bookworm, variant: apt})");
      } else {
        unknown_key(e, "base", m_shapes.base);
      }
    }
  }

  // `base: {debian: SUITE, variant: essential|apt|required}`: bootstrapped from the apt repositories.
  void debian_base(const Node& v, BaseImage& out) {
    out.kind = BaseImage::Kind::debian;
    for (const MapEntry& e : v.entries) {
      const std::string path = child_path("base", e.key);
      if (e.key == "debian") {
        if (const std::string* s = nonempty_string(e.value, path, "a Debian suite or codename")) {
          static const std::regex suite_re("[a-z0-9][a-z0-9.+-]*");
          if (!std::regex_match(*s, suite_re)) {
            error(e.value.location, path,
                  fmt::format("invalid suite '{}': expected a codename or suite such as bookworm or stable",
                              *s));
          }
          out.suite = *s;
          out.location = e.value.location;
        }
      } else if (e.key == "variant") {
        const std::string* s = string(e.value, path);
        if (s != nullptr && *s == "essential") {
          out.variant = DebianVariant::essential;
        } else if (s != nullptr && *s == "apt") {
          out.variant = DebianVariant::apt;
        } else if (s != nullptr && *s == "required") {
          out.variant = DebianVariant::required;
        } else if (s != nullptr) {
          error(e.value.location, path,
                fmt::format("expected 'essential', 'apt' or 'required', found '{}'", *s));
        }
      } else if (e.key == "oci" || e.key == "tag" || e.key == "image") {
        error(e.key_location, path, "a base is either {debian: SUITE} or {oci: PATH}, not both");
      } else if (e.key == "python") {
        error(e.key_location, path,
              "a Debian base's Python is its python3 package: add python3 to packages.apt ('python' "
              "names the interpreter of an image base whose Python is not a Debian package)");
      } else {
        unknown_key(e, "base", m_shapes.base);
      }
    }
  }

  // `repos: [{apt: URL, suite | suites, components, keyring} | {apt: URL, flat: true, keyring} |
  // {pypi: URL} | {wheels: DIR}]`, in priority order.
  void repos(const Node& v, std::vector<Repo>& out) {
    if (!expect_list(v, "repos")) {
      return;
    }
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      const Node& item = v.items[i];
      const std::string path = item_path("repos", i);
      constexpr std::string_view expected = "a map {apt: URL, ...}, {pypi: URL} or {wheels: DIR}";
      if (!expect_map(item, path, expected)) {
        continue;
      }
      Repo repo;
      repo.location = item.location;
      if (item.find("apt") != nullptr) {
        repo.kind = Repo::Kind::apt;
        if (apt_repo(item, path, repo)) {
          out.push_back(std::move(repo));
        }
      } else if (const MapEntry* pypi = item.find("pypi")) {
        repo.kind = Repo::Kind::pypi;
        bool ok = repo_url(pypi->value, child_path(path, "pypi"), repo);
        for (const MapEntry& e : item.entries) {
          if (e.key != "pypi") {
            unknown_key(e, path, m_shapes.repo_pypi);
            ok = false;
          }
        }
        if (ok) {
          out.push_back(std::move(repo));
        }
      } else if (const MapEntry* wheels = item.find("wheels")) {
        repo.kind = Repo::Kind::wheels;
        bool ok = false;
        if (const std::string* s =
                nonempty_string(wheels->value, child_path(path, "wheels"), "a directory")) {
          repo.dir_text = *s;
          repo.dir = resolve_host_path(wheels->value);
          std::error_code ec;
          if (confined(wheels->value, child_path(path, "wheels"), repo.dir, *s)) {
            ok = fs::is_directory(repo.dir, ec);
            if (!ok) {
              error(wheels->value.location, child_path(path, "wheels"),
                    fmt::format("no such directory: {} (resolved to {})", *s, repo.dir.string()));
            }
          }
        }
        for (const MapEntry& e : item.entries) {
          if (e.key != "wheels") {
            unknown_key(e, path, m_shapes.repo_wheels);
            ok = false;
          }
        }
        if (ok) {
          out.push_back(std::move(repo));
        }
      } else {
        error(item.location, path,
              fmt::format("expected {}: the map has none of apt, pypi, wheels", expected));
      }
    }
  }

  // A repository URL: http://, https:// or file://; a plain path is taken relative to the spec.
  bool repo_url(const Node& v, const std::string& path, Repo& repo) {
    const std::string* s = nonempty_string(v, path, "a URL");
    if (s == nullptr) {
      return false;
    }
    repo.url_text = *s;
    static const std::regex scheme_re("([A-Za-z][A-Za-z0-9+.-]*)://.*");
    std::smatch m;
    if (std::regex_match(*s, m, scheme_re)) {
      const std::string scheme = m[1].str();
      if (scheme != "http" && scheme != "https" && scheme != "file") {
        error(v.location, path, fmt::format("unsupported URL scheme '{}': use http, https or file", scheme));
        return false;
      }
      if (scheme == "file" && !local_url_confined(v, path, *s)) {
        return false;
      }
      repo.url = *s;
    } else {
      const fs::path local = resolve_host_path(v);
      if (!confined(v, path, local, *s)) {
        return false;
      }
      repo.url = "file://" + local.string();
    }
    while (repo.url.size() > 8 && repo.url.back() == '/') {
      repo.url.pop_back();
    }
    return true;
  }

  // A file: URL (`text`, at `v`) names a local directory that must be confined like a path.
  bool local_url_confined(const Node& v, const std::string& path, const std::string& text) {
    Result<std::optional<fs::path>> local = local_url_path(text);
    if (!local) {
      error(v.location, path, local.error().message);
      return false;
    }
    return !*local || confined(v, path, **local, text);
  }

  bool apt_repo(const Node& item, const std::string& path, Repo& repo) {
    bool ok = true;
    for (const MapEntry& e : item.entries) {
      const std::string key_path = child_path(path, e.key);
      if (e.key == "apt") {
        ok = repo_url(e.value, key_path, repo) && ok;
      } else if (e.key == "suite") {
        if (const std::string* s = apt_suite(e.value, key_path)) {
          repo.suite = *s;
        } else {
          ok = false;
        }
      } else if (e.key == "suites") {
        if (!e.value.is_sequence() || e.value.items.empty()) {
          error(e.value.location, key_path,
                fmt::format("expected a non-empty list such as [jammy, jammy-updates], found {}",
                            describe(e.value)));
          ok = false;
          continue;
        }
        for (std::size_t i = 0; i < e.value.items.size(); ++i) {
          const std::string* s = apt_suite(e.value.items[i], item_path(key_path, i));
          if (s == nullptr) {
            ok = false;
          } else if (std::find(repo.suites.begin(), repo.suites.end(), *s) != repo.suites.end()) {
            error(e.value.items[i].location, item_path(key_path, i),
                  fmt::format("suite '{}' is listed twice", *s));
            ok = false;
          } else {
            repo.suites.push_back(*s);
          }
        }
      } else if (e.key == "components") {
        if (!e.value.is_sequence() || e.value.items.empty()) {
          error(e.value.location, key_path,
                fmt::format("expected a non-empty list such as [main], found {}", describe(e.value)));
          ok = false;
          continue;
        }
        for (std::size_t i = 0; i < e.value.items.size(); ++i) {
          const std::string* c = nonempty_string(e.value.items[i], item_path(key_path, i), "a component");
          static const std::regex component_re("[A-Za-z0-9][A-Za-z0-9._+/-]*");
          if (c != nullptr && std::regex_match(*c, component_re) && c->find("..") == std::string::npos) {
            repo.components.push_back(*c);
          } else {
            if (c != nullptr) {
              error(e.value.items[i].location, item_path(key_path, i),
                    fmt::format("invalid component '{}'", *c));
            }
            ok = false;
          }
        }
      } else if (e.key == "keyring") {
        if (const std::string* s = nonempty_string(e.value, key_path, "a keyring file")) {
          repo.keyring_text = *s;
          repo.keyring = resolve_host_path(e.value);
          std::error_code ec;
          if (!confined(e.value, key_path, repo.keyring, *s, system_keyring_roots())) {
            ok = false;
          } else if (!fs::is_regular_file(repo.keyring, ec)) {
            error(e.value.location, key_path,
                  fmt::format("no such file: {} (resolved to {}); give the OpenPGP keyring the repository's "
                              "Release file is signed with",
                              *s, repo.keyring.string()));
            ok = false;
          }
        } else {
          ok = false;
        }
      } else if (e.key == "flat") {
        const std::optional<bool> flat = boolean(e.value, key_path);
        repo.flat = flat.value_or(false);
        ok = flat.has_value() && ok;
      } else if (e.key == "snapshot") {
        static const std::regex stamp_re("[0-9]{8}T[0-9]{6}Z");
        const std::string* s = nonempty_string(e.value, key_path, "a timestamp");
        if (s != nullptr && std::regex_match(*s, stamp_re)) {
          repo.snapshot = *s;
        } else {
          if (s != nullptr) {
            error(e.value.location, key_path,
                  fmt::format("'{}' is not a snapshot timestamp: write it as snapshot.debian.org does, "
                              "YYYYMMDDTHHMMSSZ (e.g. 20240101T000000Z)",
                              *s));
          }
          ok = false;
        }
      } else if (e.key == "snapshot_url") {
        const std::string* s = nonempty_string(e.value, key_path, "a URL");
        if (s != nullptr && (s->starts_with("http://") || s->starts_with("https://"))) {
          repo.snapshot_url = *s;
          while (repo.snapshot_url.size() > 8 && repo.snapshot_url.back() == '/') {
            repo.snapshot_url.pop_back();
          }
        } else {
          if (s != nullptr) {
            error(e.value.location, key_path,
                  fmt::format("'{}': a snapshot service's URL of the archive, http(s)://HOST/PATH laid out "
                              "PATH/<timestamp>/ (e.g. https://snapshot.debian.org/archive/debian)",
                              *s));
          }
          ok = false;
        }
      } else {
        unknown_key(e, path, m_shapes.repo_apt);
        ok = false;
      }
    }
    if (repo.keyring.empty() && item.find("keyring") == nullptr) {
      error(item.location, path,
            "missing 'keyring' (the OpenPGP keyring that signs the repository, e.g. "
            "/usr/share/keyrings/debian-archive-keyring.gpg); lockstep never trusts an unsigned repository");
      ok = false;
    }
    if (item.find("suite") != nullptr && item.find("suites") != nullptr) {
      error(item.find("suites")->key_location, child_path(path, "suites"),
            "give 'suite' or 'suites', not both (suites: [bookworm, bookworm-updates] lists several)");
      ok = false;
    } else if (repo.flat && (!repo.suite.empty() || !repo.suites.empty() || !repo.components.empty())) {
      error(item.location, path, "a flat repository has no 'suite', 'suites' or 'components'");
      ok = false;
    } else if (!repo.flat && repo.suite.empty() && item.find("suite") == nullptr &&
               item.find("suites") == nullptr) {
      error(item.location, path,
            "missing 'suite' (e.g. suite: bookworm) or 'suites' (e.g. suites: [jammy, jammy-updates]), or "
            "'flat: true' for a flat repository");
      ok = false;
    } else if (!repo.flat && repo.components.empty() && item.find("components") == nullptr) {
      error(item.location, path, "missing 'components' (e.g. components: [main])");
      ok = false;
    }
    // A snapshot service for the archive: given, or known for Debian's and Ubuntu's; with a timestamp,
    // the repository is read from the snapshot.
    if (repo.snapshot_url.empty()) {
      repo.snapshot_url = known_snapshot_base(repo.url);
    }
    if (!repo.snapshot.empty() && ok) {
      if (repo.snapshot_url.empty()) {
        error(
            item.find("snapshot")->key_location, child_path(path, "snapshot"),
            fmt::format("no snapshot service is known for {}: give its URL with snapshot_url (laid out like "
                        "https://snapshot.debian.org/archive/debian/<timestamp>/)",
                        repo.url));
        ok = false;
      } else {
        repo.url = repo.snapshot_url + "/" + repo.snapshot;
      }
    }
    // `suite: S` and `suites: [S]` are the same repository: both set `suite` and `suites`.
    if (!repo.flat && !repo.suite.empty()) {
      repo.suites = {repo.suite};
    } else if (!repo.flat && repo.suites.size() == 1) {
      repo.suite = repo.suites.front();
    }
    return ok;
  }

  // A suite or codename (`suite: bookworm`, an item of `suites:`); null after reporting an error.
  const std::string* apt_suite(const Node& v, const std::string& path) {
    const std::string* s = nonempty_string(v, path, "a suite or codename");
    static const std::regex suite_re("[A-Za-z0-9][A-Za-z0-9._+/-]*");
    if (s != nullptr && (!std::regex_match(*s, suite_re) || s->find("..") != std::string::npos)) {
      error(v.location, path, fmt::format("invalid suite '{}'", *s));
      return nullptr;
    }
    return s;
  }

  // `packages.pip[i]` as a map: a file of requirements. {requirements: FILE}, {pyproject: FILE,
  // extras: [...]} or {conda-env: FILE}.
  void pip_file(const Node& item, const std::string& path, Packages& out) {
    if (item.find("pyproject") != nullptr) {
      pyproject_file(item, path, out.pip);
    } else if (item.find("conda-env") != nullptr) {
      conda_env_file(item, path, out);
    } else {
      requirements_file(item, path, out.pip);
    }
  }

  // Reads the host file named by `key` of `item` (confined like every host path); nullopt after reporting.
  std::optional<std::pair<std::string, std::string>>
  pip_file_text(const MapEntry& file, const std::string& key_path, std::string_view what) {
    const std::string* s = nonempty_string(file.value, key_path, what);
    if (s == nullptr) {
      return std::nullopt;
    }
    const fs::path resolved = resolve_host_path(file.value);
    if (!confined(file.value, key_path, resolved, *s)) {
      return std::nullopt;
    }
    Result<std::string> text = read_file(resolved, 4 << 20);
    if (!text) {
      error(file.value.location, key_path, fmt::format("can't read {}: {}", *s, text.error().message));
      return std::nullopt;
    }
    return std::pair{*s, std::move(*text)};
  }

  // A pip request read from a project file at `where` (the spec entry that names the file).
  static PackageRequest pip_request(const ImportedRequirement& r, const SourceLocation& where) {
    PackageRequest req;
    req.text = r.text;
    req.name = r.text;
    req.from_file = r.where;
    req.location = where;
    return req;
  }

  // `{pyproject: FILE, extras: [...]}`: [project].dependencies and the named optional dependencies.
  void pyproject_file(const Node& item, const std::string& path, std::vector<PackageRequest>& out) {
    const MapEntry* file = item.find("pyproject");
    std::vector<std::string> extras;
    for (const MapEntry& e : item.entries) {
      if (e.key == "extras") {
        if (!expect_list(e.value, child_path(path, "extras"), "a list of extra names")) {
          return;
        }
        for (std::size_t i = 0; i < e.value.items.size(); ++i) {
          if (const std::string* x = nonempty_string(
                  e.value.items[i], item_path(child_path(path, "extras"), i), "an extra name")) {
            extras.push_back(*x);
          }
        }
      } else if (e.key != "pyproject") {
        unknown_key(e, path, m_shapes.pyproject);
        return;
      }
    }
    const std::string key_path = child_path(path, "pyproject");
    auto text = pip_file_text(*file, key_path, "a pyproject.toml");
    if (!text) {
      return;
    }
    Result<std::vector<ImportedRequirement>> reqs = read_pyproject(text->second, text->first, extras);
    if (!reqs) {
      error(file->value.location, key_path, reqs.error().message);
      return;
    }
    for (const ImportedRequirement& r : *reqs) {
      out.push_back(pip_request(r, file->value.location));
    }
  }

  // `{conda-env: FILE}`: an environment.yml. Its pip: section and the conda packages PyPI has become
  // pip requests, those Debian has apt requests; its python pin and CUDA, cuDNN, NCCL and MPI
  // packages become `stack:` keys (applied in walk(), after `stack:` is read).
  void conda_env_file(const Node& item, const std::string& path, Packages& out) {
    const MapEntry* file = item.find("conda-env");
    for (const MapEntry& e : item.entries) {
      if (e.key != "conda-env") {
        unknown_key(e, path, m_shapes.conda_env);
        return;
      }
    }
    const std::string key_path = child_path(path, "conda-env");
    auto text = pip_file_text(*file, key_path, "an environment.yml");
    if (!text) {
      return;
    }
    Result<CondaEnv> env = read_conda_env(text->second, text->first);
    if (!env) {
      error(file->value.location, key_path, env.error().message);
      return;
    }
    for (const ImportedRequirement& r : env->pip) {
      out.pip.push_back(pip_request(r, file->value.location));
    }
    for (const ImportedRequirement& r : env->apt) {
      PackageRequest req;
      req.text = r.text;
      req.name = r.text;
      req.origin = r.where;
      req.location = file->value.location;
      out.apt.push_back(std::move(req));
    }
    m_conda_stack.push_back(PendingStack{std::move(*env), file->value.location, key_path});
  }

  // Applies what environment files said about the stack: each key only where `stack:` leaves it
  // unset; a different value there is an error naming both.
  void apply_conda_stack(Spec& spec) {
    for (PendingStack& p : m_conda_stack) {
      std::vector<std::pair<std::string, ImportedRequirement>> items(p.env.stack.begin(), p.env.stack.end());
      if (p.env.python) {
        items.emplace_back("python", *p.env.python);
      }
      if (items.empty()) {
        continue;
      }
      if (!spec.stack) {
        spec.stack.emplace();
        spec.stack->location = p.location;
      }
      StackRequest& st = *spec.stack;
      for (const auto& [key, r] : items) {
        StackRequest::Item* slot = key == "cuda"     ? &st.cuda
                                   : key == "cudnn"  ? &st.cudnn
                                   : key == "nccl"   ? &st.nccl
                                   : key == "python" ? &st.python
                                                     : nullptr;
        if (key == "mpi") {
          const std::string impl = r.text.substr(0, r.text.find('@'));
          const std::string version =
              r.text.find('@') == std::string::npos ? "" : r.text.substr(r.text.find('@') + 1);
          if (st.mpi.empty()) {
            st.mpi = impl;
            st.mpi_version = StackRequest::Item{version, p.location};
            st.mpi_location = p.location;
          } else if (st.mpi != impl) {
            error(p.location, p.key_path,
                  fmt::format("{} asks for {} but stack.mpi is {}", r.where, impl, st.mpi));
          }
          continue;
        }
        if (slot == nullptr) {
          continue;
        }
        if (!slot->given()) {
          *slot = StackRequest::Item{r.text, p.location};
        } else if (slot->text != r.text && !r.text.empty()) {
          error(p.location, p.key_path,
                fmt::format("{} asks for {} {} but stack.{} is \"{}\"; make them agree", r.where, key, r.text,
                            key, slot->text));
        }
      }
    }
  }

  // `packages.pip[i]: {requirements: FILE}`: a pip requirements file (e.g. `pip freeze` or
  // pip-compile --generate-hashes output) whose pins, with their hashes, become requests.
  void requirements_file(const Node& item, const std::string& path, std::vector<PackageRequest>& out) {
    const MapEntry* file = item.find("requirements");
    if (file == nullptr) {
      error(
          item.location, path,
          "expected a requirement string or a map {requirements: FILE}, {pyproject: FILE, extras: [...]} or "
          "{conda-env: FILE}");
      return;
    }
    for (const MapEntry& e : item.entries) {
      if (e.key != "requirements") {
        unknown_key(e, path, m_shapes.requirements);
        return;
      }
    }
    const std::string key_path = child_path(path, "requirements");
    const std::string* s = nonempty_string(file->value, key_path, "a requirements file");
    if (s == nullptr) {
      return;
    }
    const fs::path resolved = resolve_host_path(file->value);
    if (!confined(file->value, key_path, resolved, *s)) {
      return;
    }
    Result<std::string> text = read_file(resolved, 4 << 20);
    if (!text) {
      error(file->value.location, key_path, fmt::format("can't read {}: {}", *s, text.error().message));
      return;
    }
    Result<RequirementsFile> parsed = parse_requirements_txt(*text, *s);
    if (!parsed) {
      error(file->value.location, key_path, parsed.error().message);
      return;
    }
    const bool any_hash = std::any_of(parsed->requirements.begin(), parsed->requirements.end(),
                                      [](const PinnedRequirement& r) { return !r.hashes.empty(); });
    for (const PinnedRequirement& r : parsed->requirements) {
      if ((parsed->require_hashes || any_hash) && r.hashes.empty()) {
        error(file->value.location, key_path,
              fmt::format("{}:{}: {} has no --hash, but the file checks hashes (pip's hash-checking mode "
                          "needs one for every requirement)",
                          *s, r.line, r.requirement.str()));
        continue;
      }
      PackageRequest req;
      req.text = r.requirement.str();
      req.name = req.text;
      for (const Digest& d : r.hashes) {
        req.hashes.push_back(d.hex());
      }
      req.from_file = fmt::format("{}:{}", *s, r.line);
      req.location = file->value.location;
      out.push_back(std::move(req));
    }
  }

  // `packages: {apt: [NAME[:ARCH][=VERSION]...], pip: [REQUIREMENT... | {requirements: FILE}]}`.
  // `stack:` (docs/spec.md): version constraints per component; the solver checks them against
  // the recipes later (envspec/stack/stack.hpp), this only checks their form.
  void stack(const Node& v, StackRequest& out) {
    if (!expect_map(v, "stack", "a map, e.g. {cuda: \"12.1\", nccl: \"2.18\", framework: pytorch@2.1}")) {
      return;
    }
    const auto constraint = [this](const Node& value, const std::string& path, std::string_view text,
                                   StackRequest::Item& item, std::size_t offset) {
      if (text.empty()) {
        error(value.location, path, "expected a version after '@', e.g. openmpi@4.1");
        return;
      }
      Result<VersionConstraint> c = VersionConstraint::parse(text);
      if (!c) {
        error(sub_location(value, offset, text.size()), path, c.error().message);
        return;
      }
      item.text = std::string(text);
      item.location = sub_location(value, offset, text.size());
    };
    // `NAME[@VERSION]` for mpi and framework.
    const auto named = [&](const Node& value, const std::string& path,
                           std::initializer_list<std::string_view> names, std::string& name,
                           StackRequest::Item& version) {
      const std::string* s = nonempty_string(value, path, "NAME or NAME@VERSION");
      if (s == nullptr) {
        return;
      }
      const std::size_t at = s->find('@');
      const std::string n = s->substr(0, at);
      if (std::find(names.begin(), names.end(), n) == names.end()) {
        error(sub_location(value, 0, n.size()), path,
              fmt::format("unknown {} '{}'; expected one of: {}", path == "stack.mpi" ? "MPI" : "framework",
                          n, fmt::join(names, ", ")));
        return;
      }
      name = n;
      if (at != std::string::npos) {
        constraint(value, path, std::string_view(*s).substr(at + 1), version, at + 1);
      }
    };
    for (const MapEntry& e : v.entries) {
      const std::string path = "stack." + e.key;
      const Node& value = e.value;
      if (e.key == "cuda" || e.key == "cudnn" || e.key == "nccl" || e.key == "python") {
        StackRequest::Item& item = e.key == "cuda"    ? out.cuda
                                   : e.key == "cudnn" ? out.cudnn
                                   : e.key == "nccl"  ? out.nccl
                                                      : out.python;
        const std::string* s = nonempty_string(value, path, "a version, e.g. \"12.1\"");
        if (s != nullptr) {
          constraint(value, path, *s, item, 0);
        }
      } else if (e.key == "mpi") {
        out.mpi_location = value.location;
        named(value, path, {"openmpi", "mpich"}, out.mpi, out.mpi_version);
      } else if (e.key == "framework") {
        out.framework_location = value.location;
        named(value, path, {"pytorch", "tensorflow", "jax"}, out.framework, out.framework_version);
      } else if (e.key == "cuda_flavor") {
        const std::string* s = nonempty_string(value, path, "base, runtime or devel");
        if (s != nullptr && *s != "base" && *s != "runtime" && *s != "devel") {
          error(
              value.location, path,
              fmt::format("unknown CUDA flavor '{}'; expected base (the CUDA runtime library), runtime (all "
                          "CUDA libraries) or devel (the whole toolkit)",
                          *s));
        } else if (s != nullptr) {
          out.cuda_flavor = *s;
        }
      } else if (e.key == "recipes") {
        stack_recipes(value, out);
      } else {
        unknown_key(e, "stack", m_shapes.stack);
      }
    }
    if ((out.cudnn.given() || out.nccl.given()) && !out.cuda.given() && out.framework.empty()) {
      const StackRequest::Item& first = out.cudnn.given() ? out.cudnn : out.nccl;
      error(first.location, out.cudnn.given() ? "stack.cudnn" : "stack.nccl",
            "needs stack.cuda (or a framework): cuDNN and NCCL are built for one CUDA version; add e.g. "
            "cuda: \"12.1\"");
    }
  }

  // `stack.recipes: {git: URL, rev: REV}`.
  void stack_recipes(const Node& v, StackRequest& out) {
    out.recipes_location = v.location;
    if (!expect_map(v, "stack.recipes", "a map {git: URL, rev: COMMIT}")) {
      return;
    }
    for (const MapEntry& e : v.entries) {
      const std::string path = "stack.recipes." + e.key;
      if (e.key == "git") {
        CopyItem tmp;
        if (copy_git(e.value, path, tmp)) {
          out.recipes_git = tmp.git;
          out.recipes_git_text = tmp.git_text;
        }
      } else if (e.key == "rev") {
        const std::string* s = nonempty_string(e.value, path, "a commit id or tag");
        static const std::regex rev_re("[A-Za-z0-9._/+-]+");
        if (s != nullptr && (!std::regex_match(*s, rev_re) || s->find("..") != std::string::npos)) {
          error(e.value.location, path,
                fmt::format("invalid rev '{}': expected a commit id, tag or branch", *s));
        } else if (s != nullptr) {
          out.recipes_rev = *s;
        }
      } else {
        unknown_key(e, "stack.recipes", m_shapes.stack_recipes);
      }
    }
    if (v.find("git") == nullptr || v.find("rev") == nullptr) {
      error(v.location, "stack.recipes",
            "needs both 'git' (the recipes repository) and 'rev' (the commit to use), e.g. {git: "
            "https://git.example.org/ml/recipes, rev: 3f2a9c1...}");
    }
  }

  void packages(const Node& v, Packages& out) {
    if (!expect_map(v, "packages", "a map {apt: [...], pip: [...]}")) {
      return;
    }
    for (const MapEntry& e : v.entries) {
      const std::string path = child_path("packages", e.key);
      if (e.key != "apt" && e.key != "pip") {
        unknown_key(e, "packages", m_shapes.packages);
        continue;
      }
      if (!expect_list(e.value, path, "a list of package names")) {
        continue;
      }
      for (std::size_t i = 0; i < e.value.items.size(); ++i) {
        const Node& item = e.value.items[i];
        const std::string ipath = item_path(path, i);
        if (e.key == "pip" && item.is_map()) {
          pip_file(item, ipath, out);
          continue;
        }
        const std::string* s =
            nonempty_string(item, ipath, e.key == "apt" ? "a package name" : "a requirement");
        if (s == nullptr) {
          continue;
        }
        PackageRequest req;
        req.text = *s;
        req.location = item.location;
        if (e.key == "pip") {
          req.name = *s;
          out.pip.push_back(std::move(req));
          continue;
        }
        // Debian policy 5.6.1 (names), 5.6.12 (versions); ':ARCH' as apt-get accepts it; '*' in the
        // version is a glob (NAME=2.18.*+cuda12.1, docs/apt-resolver.md).
        static const std::regex apt_re("([a-z0-9][a-z0-9+.-]+)(:([a-z0-9-]+))?(=([0-9A-Za-z.+~:*-]+))?");
        std::smatch m;
        if (!std::regex_match(*s, m, apt_re)) {
          error(item.location, ipath,
                fmt::format(
                    "invalid package '{}': expected NAME, NAME=VERSION, NAME=VERSION-GLOB (with '*') or "
                    "NAME:ARCH (lowercase letters, digits and + - .)",
                    *s));
          continue;
        }
        req.name = m[1].str();
        req.arch = m[3].str();
        req.version = m[5].str();
        out.apt.push_back(std::move(req));
      }
    }
  }

  // `base.oci: PATH[@sha256:HEX]`.
  void base_path(const Node& v, BaseImage& out) {
    const std::string* s = nonempty_string(v, "base.oci", "a path");
    if (s == nullptr) {
      return;
    }
    std::string path_text = *s;
    const std::size_t at = s->rfind('@');
    if (at != std::string::npos && s->find(':', at) != std::string::npos) {
      path_text = s->substr(0, at);
      const std::string pin_text = s->substr(at + 1);
      Result<Digest> pin = Digest::parse(pin_text);
      if (!pin) {
        error(sub_location(v, at + 1, pin_text.size()), "base.oci", pin.error().message);
      } else {
        out.pin = *pin;
      }
    }
    if (path_text.empty()) {
      error(v.location, "base.oci", "expected a path before '@'");
      return;
    }
    Node path_node = v;
    path_node.scalar = path_text;
    const fs::path resolved = resolve_host_path(path_node);
    const SourceLocation path_location = sub_location(v, 0, path_text.size());
    std::error_code ec;
    const fs::file_status st = fs::status(resolved, ec);
    if (!fs::exists(st)) {
      error(path_location, "base.oci",
            fmt::format("no such file or directory: {} (resolved to {})", path_text, resolved.string()));
    } else if (fs::is_directory(st)) {
      if (!fs::is_regular_file(resolved / "oci-layout", ec)) {
        error(path_location, "base.oci",
              fmt::format("{} is not an OCI layout (it has no oci-layout file)", resolved.string()));
      }
    } else if (!fs::is_regular_file(st)) {
      error(path_location, "base.oci",
            fmt::format("{} is neither an OCI layout directory nor an OCI archive file", resolved.string()));
    }
    out.kind = BaseImage::Kind::oci;
    out.path = resolved;
    out.path_text = path_text;
  }

  // `base.image`: docker://[HOST[:PORT]/]REPO[:TAG][@sha256:HEX] (normalised as Docker does; nothing
  // is fetched here, `check` stays offline), or oci:DIR[:TAG] / oci-archive:FILE[:TAG], read as the
  // same base as {oci: PATH, tag: TAG}.
  void base_image_ref(const Node& v, BaseImage& out) {
    constexpr std::string_view forms =
        "docker://[HOST[:PORT]/]REPO[:TAG][@sha256:HEX], oci:DIR[:TAG] or oci-archive:FILE[:TAG]";
    const std::string* s = nonempty_string(v, "base.image", "an image reference");
    if (s == nullptr) {
      return;
    }
    out.location = v.location;
    const bool known =
        s->starts_with("docker://") || s->starts_with("oci:") || s->starts_with("oci-archive:");
    if (!known) {
      // A transport lockstep reads elsewhere (docker-archive:, oras://, sif:, dir:) or none at all.
      const std::size_t scheme = s->find("://");
      const std::size_t colon = s->find(':');
      static const std::vector<std::string_view> others = {"docker-archive", "sif", "dir", "docker-daemon",
                                                           "containers-storage"};
      std::string transport;
      if (scheme != std::string::npos) {
        transport = s->substr(0, scheme + 3);
      } else if (colon != std::string::npos &&
                 std::find(others.begin(), others.end(), s->substr(0, colon)) != others.end()) {
        transport = s->substr(0, colon + 1);
      }
      if (!transport.empty()) {
        error(v.location, "base.image",
              fmt::format("'{}' images can't be a base; expected {}", transport, forms));
      } else {
        error(v.location, "base.image",
              fmt::format("'{}' names no transport; expected {}{}", *s, forms,
                          oci::RegistryRef::parse(*s) ? fmt::format(" (e.g. docker://{})", *s) : ""));
      }
      return;
    }
    Result<oci::ImageRef> ref = oci::ImageRef::parse(*s);
    if (!ref) {
      error(v.location, "base.image", ref.error().message);
      return;
    }
    if (ref->transport == oci::ImageRef::Transport::docker) {
      out.kind = BaseImage::Kind::registry;
      out.remote = ref->remote;
      out.pin = ref->remote.digest;
      return;
    }
    // oci:DIR[:TAG] or oci-archive:FILE[:TAG]: the path checked as `base.oci` is, and of the kind named.
    const bool dir = ref->transport == oci::ImageRef::Transport::oci_dir;
    const std::size_t prefix = s->find(':') + 1;
    const std::string path_text = ref->path.string();
    Node path_node = v;
    path_node.scalar = path_text;
    const fs::path resolved = resolve_host_path(path_node);
    const SourceLocation path_location = sub_location(v, prefix, path_text.size());
    std::error_code ec;
    const fs::file_status st = fs::status(resolved, ec);
    if (!fs::exists(st)) {
      error(path_location, "base.image",
            fmt::format("no such file or directory: {} (resolved to {})", path_text, resolved.string()));
    } else if (dir && !fs::is_regular_file(resolved / "oci-layout", ec)) {
      error(path_location, "base.image",
            fmt::format("{} is not an OCI layout directory (it has no oci-layout file){}", resolved.string(),
                        fs::is_regular_file(st) ? "; an OCI archive is oci-archive:FILE" : ""));
    } else if (!dir && !fs::is_regular_file(st)) {
      error(path_location, "base.image",
            fmt::format("{} is not an OCI archive file{}", resolved.string(),
                        fs::is_directory(st) ? "; an OCI layout directory is oci:DIR" : ""));
    }
    out.kind = BaseImage::Kind::oci;
    out.path = resolved;
    out.path_text = path_text;
    out.tag = ref->tag;
  }

  // `base.tag`: selects a manifest by its org.opencontainers.image.ref.name annotation.
  void base_tag(const Node& v, BaseImage& out) {
    const std::string* s = nonempty_string(v, "base.tag", "a tag");
    if (s == nullptr) {
      return;
    }
    // image-spec annotations.md, ref.name grammar.
    static const std::regex ref(
        "[A-Za-z0-9]+(([-._:@+]|--)[A-Za-z0-9]+)*(/[A-Za-z0-9]+(([-._:@+]|--)[A-Za-z0-9]+)*)*");
    if (!std::regex_match(*s, ref)) {
      error(v.location, "base.tag",
            fmt::format(
                "invalid tag '{}': letters and digits separated by '-', '.', '_', ':', '@', '+' or '/'", *s));
      return;
    }
    out.tag = *s;
  }

  // `python: /usr/local/bin/python3.11`: an absolute path in the image, normalised.
  void base_python(const Node& v, BaseImage& out) {
    const std::string* s = nonempty_string(v, "base.python", "the interpreter's absolute path in the image");
    if (s == nullptr) {
      return;
    }
    std::string normal;
    bool ok = s->front() == '/' && s->find('\0') == std::string::npos;
    for (std::size_t i = 1; ok && i <= s->size();) {
      std::size_t j = s->find('/', i);
      j = j == std::string::npos ? s->size() : j;
      const std::string part = s->substr(i, j - i);
      ok = part != "..";
      if (!part.empty() && part != ".") {
        normal += "/" + part;
      }
      i = j + 1;
    }
    if (!ok || normal.empty() || std::any_of(normal.begin(), normal.end(), [](char c) {
          return std::isspace(static_cast<unsigned char>(c));
        })) {
      error(v.location, "base.python",
            fmt::format("invalid interpreter path '{}': expected an absolute path in the image without '..' "
                        "or spaces, e.g. /usr/local/bin/python3.11",
                        *s));
      return;
    }
    out.python = normal;
    out.python_location = v.location;
  }

  void copy(const Node& v, std::vector<CopyItem>& out) {
    if (!expect_list(v, "copy")) {
      return;
    }
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      if (std::optional<CopyItem> item = copy_item(v.items[i], item_path("copy", i))) {
        out.push_back(std::move(*item));
      }
    }
  }

  std::optional<CopyItem> copy_item(const Node& v, const std::string& path) {
    if (!expect_map(v, path, "a map {from: HOST_PATH, to: IMAGE_PATH}")) {
      return std::nullopt;
    }
    CopyItem item;
    item.location = v.location;
    bool ok = true;
    const bool is_git = v.find("git") != nullptr;
    if (is_git && v.find("from") != nullptr) {
      error(v.location, path, "an item copies either 'from' a host path or a 'git' repository, not both");
      return std::nullopt;
    }
    if (is_git && v.find("rev") == nullptr) {
      error(v.location, path, "missing 'rev' (a full commit id or a tag; the lock pins it to a commit)");
      ok = false;
    }
    for (std::string_view required : {"from", "to"}) {
      if (is_git && required == "from") {
        continue;
      }
      if (v.find(required) == nullptr) {
        error(v.location, path,
              fmt::format("missing '{}' ({})", required,
                          required == "from" ? "the file or directory to copy"
                                             : "the absolute path in the image"));
        ok = false;
      }
    }
    for (const MapEntry& e : v.entries) {
      const std::string key_path = child_path(path, e.key);
      if (e.key == "from") {
        ok = copy_from(e.value, key_path, item) && ok;
      } else if (e.key == "to") {
        ok = copy_to(e.value, key_path, item) && ok;
      } else if (e.key == "mode") {
        ok = copy_mode(e.value, key_path, item) && ok;
      } else if (e.key == "owner") {
        ok = copy_owner(e.value, key_path, item) && ok;
      } else if (e.key == "git") {
        ok = copy_git(e.value, key_path, item) && ok;
      } else if (e.key == "rev") {
        if (!is_git) {
          error(e.key_location, key_path, fmt::format("'{}' goes with 'git: URL'", e.key));
          ok = false;
          continue;
        }
        const std::string* s =
            nonempty_string(e.value, key_path, e.key == "rev" ? "a commit id or tag" : "true or false");
        static const std::regex rev_re("[A-Za-z0-9._/+-]+");
        if (s == nullptr) {
          ok = false;
        } else if (e.key == "rev" && (!std::regex_match(*s, rev_re) || s->find("..") != std::string::npos)) {
          error(e.value.location, key_path,
                fmt::format("invalid rev '{}': expected a commit id, tag or branch", *s));
          ok = false;
        } else {
          item.rev = *s;
        }
      } else {
        unknown_key(e, path, m_shapes.copy_item);
        ok = false;
      }
    }
    return ok ? std::optional<CopyItem>(std::move(item)) : std::nullopt;
  }

  // `copy[].git`: a URL (http, https, git, file) or a host path to a repository.
  bool copy_git(const Node& v, const std::string& path, CopyItem& item) {
    const std::string* s = nonempty_string(v, path, "a repository URL or path");
    if (s == nullptr) {
      return false;
    }
    item.git_text = *s;
    static const std::regex scheme_re("([A-Za-z][A-Za-z0-9+.-]*)://.*");
    std::smatch m;
    if (std::regex_match(*s, m, scheme_re)) {
      const std::string scheme = m[1].str();
      if (scheme != "http" && scheme != "https" && scheme != "git" && scheme != "file") {
        error(v.location, path,
              fmt::format("unsupported URL scheme '{}': use https, http, git or file", scheme));
        return false;
      }
      if (scheme == "file") {
        Result<std::optional<fs::path>> local = local_url_path(*s);
        if (!local) {
          error(v.location, path, local.error().message);
          return false;
        }
        if (!git_confined(v, path, **local, *s)) {
          return false;
        }
      }
      item.git = *s;
      return true;
    }
    const fs::path local = resolve_host_path(v);
    if (!git_confined(v, path, local, *s)) {
      return false;
    }
    item.git = local.string();
    return true;
  }

  // confined() for a local git repository, and every repository it makes git read (alternates...).
  bool git_confined(const Node& v, const std::string& key_path, const fs::path& repo, std::string_view text) {
    if (m_options.allow_outside) {
      return true;
    }
    if (auto problem = git_outside_problem(repo, text, v.location.file.parent_path().lexically_normal())) {
      error(v.location, key_path, *problem);
      return false;
    }
    return true;
  }

  bool copy_from(const Node& v, const std::string& path, CopyItem& item) {
    const std::string* s = nonempty_string(v, path, "a path");
    if (s == nullptr) {
      return false;
    }
    item.from_text = *s;
    item.from_location = v.location;
    item.from = resolve_host_path(v);
    if (!confined(v, path, item.from, *s)) {
      return false;
    }
    std::error_code ec;
    if (!fs::exists(item.from, ec)) {
      error(v.location, path,
            fmt::format("no such file or directory: {} (resolved to {})", *s, item.from.string()));
      return false;
    }
    return true;
  }

  bool copy_to(const Node& v, const std::string& path, CopyItem& item) {
    std::optional<std::string> to = image_path(v, path);
    if (!to) {
      return false;
    }
    item.to = *to;
    item.to_is_dir = v.scalar.back() == '/';
    return true;
  }

  bool copy_mode(const Node& v, const std::string& path, CopyItem& item) {
    const std::string* s = string(v, path);
    if (s == nullptr) {
      return false;
    }
    if (*s == "preserve") {
      item.mode_policy = ModePolicy::preserve;
      return true;
    }
    std::uint32_t mode = 0;
    auto [ptr, ec] = std::from_chars(s->data(), s->data() + s->size(), mode, 8);
    if (s->empty() || s->size() > 5 || ec != std::errc() || ptr != s->data() + s->size() || mode > 07777) {
      error(
          v.location, path,
          fmt::format("invalid mode '{}': expected octal permission bits like 0755 or 0644 (at most 07777), "
                      "or 'preserve'",
                      *s));
      return false;
    }
    item.mode_policy = ModePolicy::fixed;
    item.mode = mode;
    return true;
  }

  bool copy_owner(const Node& v, const std::string& path, CopyItem& item) {
    const std::string* s = string(v, path);
    if (s == nullptr) {
      return false;
    }
    if (*s == "preserve") {
      item.owner_policy = OwnerPolicy::preserve;
      return true;
    }
    const std::size_t colon = s->find(':');
    std::optional<std::uint32_t> uid = parse_id(std::string_view(*s).substr(0, colon));
    std::optional<std::uint32_t> gid =
        colon == std::string::npos ? uid : parse_id(std::string_view(*s).substr(colon + 1));
    if (!uid || !gid) {
      error(v.location, path, fmt::format("owner must be numeric UID[:GID] or 'preserve', found '{}'", *s));
      return false;
    }
    item.owner_policy = OwnerPolicy::fixed;
    item.uid = *uid;
    item.gid = *gid;
    return true;
  }

  // A scalar map value (env, labels); nullptr after reporting.
  const std::string* map_value(const Node& v, const std::string& path) {
    if (v.is_null()) {
      error(v.location, path, "expected a value, found nothing; write \"\" for an empty string");
      return nullptr;
    }
    return string(v, path);
  }

  void env(const Node& v, std::vector<std::pair<std::string, std::string>>& out) {
    if (!expect_map(v, "env")) {
      return;
    }
    static const std::regex name_re("[A-Za-z_][A-Za-z0-9_]*");
    for (const MapEntry& e : v.entries) {
      const std::string path = child_path("env", e.key);
      if (!std::regex_match(e.key, name_re)) {
        error(
            e.key_location, path,
            fmt::format("invalid variable name '{}': use letters, digits and '_', not starting with a digit",
                        e.key));
        continue;
      }
      if (const std::string* value = map_value(e.value, path)) {
        out.emplace_back(e.key, *value);
      }
    }
    std::sort(out.begin(), out.end());
  }

  void labels(const Node& v, std::map<std::string, std::string>& out) {
    if (!expect_map(v, "labels")) {
      return;
    }
    for (const MapEntry& e : v.entries) {
      const std::string path = child_path("labels", e.key);
      if (e.key.empty()) {
        error(e.key_location, "labels", "a label key can't be empty");
        continue;
      }
      if (const std::string* value = map_value(e.value, path)) {
        out[e.key] = *value;
      }
    }
  }

  // `entrypoint` and `cmd`: argv lists.
  void argv(const Node& v, const std::string& path, std::optional<std::vector<std::string>>& out) {
    if (v.is_scalar()) {
      error(v.location, path, fmt::format("expected a list, found {}; {}", describe(v), k_argv_hint));
      return;
    }
    if (!expect_list(v, path)) {
      return;
    }
    std::vector<std::string> args;
    bool ok = true;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      if (const std::string* s = string(v.items[i], item_path(path, i))) {
        args.push_back(*s);
      } else {
        ok = false;
      }
    }
    if (ok) {
      out = std::move(args);
    }
  }

  void workdir(const Node& v, std::optional<std::string>& out) {
    if (std::optional<std::string> dir = image_path(v, "workdir")) {
      out = *dir;
    }
  }

  void user(const Node& v, std::optional<std::string>& out) {
    const std::string* s = nonempty_string(v, "user", "a user");
    if (s == nullptr) {
      return;
    }
    static const std::regex user_re("[^:\\s]+(:[^:\\s]+)?");
    if (!std::regex_match(*s, user_re)) {
      error(v.location, "user",
            fmt::format("invalid user '{}': expected NAME or UID, optionally followed by :GROUP or :GID, "
                        "without spaces",
                        *s));
      return;
    }
    out = *s;
  }

  void outputs(const Node& v, Outputs& out) {
    if (!expect_map(v, "outputs")) {
      return;
    }
    for (const MapEntry& e : v.entries) {
      const std::string path = child_path("outputs", e.key);
      if (e.key == "oci") {
        output_path(e.value, path, out.oci);
      } else if (e.key == "oci_archive") {
        output_path(e.value, path, out.oci_archive);
      } else if (e.key == "docker_archive") {
        output_path(e.value, path, out.docker_archive);
      } else if (e.key == "sif") {
        output_path(e.value, path, out.sif);
      } else if (e.key == "sbom") {
        sbom_paths(e.value, path, out.sbom);
      } else if (e.key == "sif_compression") {
        const std::string* s = string(e.value, path);
        if (s == nullptr) {
          continue;
        }
        if (auto c = parse_squashfs_compressor(*s)) {
          out.sif_compression = *c;
        } else {
          error(e.value.location, path,
                fmt::format("expected 'gzip', 'zstd', 'xz' or 'lz4', found '{}'", *s));
        }
      } else if (e.key == "compression") {
        const std::string* s = string(e.value, path);
        if (s != nullptr && *s == "gzip") {
          out.compression = Codec::gzip;
        } else if (s != nullptr && *s == "zstd") {
          out.compression = Codec::zstd;
        } else if (s != nullptr) {
          error(e.value.location, path, fmt::format("expected 'gzip' or 'zstd', found '{}'", *s));
        }
      } else {
        unknown_key(e, "outputs", m_shapes.outputs);
      }
    }
  }

  // `run: [STEP...]`, each step "COMMAND" or {sh: COMMAND, network: BOOL}.
  void run(const Node& v, std::vector<RunStep>& out) {
    if (!expect_list(v, "run", "a list of commands")) {
      return;
    }
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      const Node& item = v.items[i];
      const std::string path = fmt::format("run[{}]", i);
      RunStep step;
      step.location = item.location;
      if (item.is_scalar()) {
        if (const std::string* s = nonempty_string(item, path, "a shell command")) {
          step.sh = *s;
          out.push_back(std::move(step));
        }
        continue;
      }
      if (!expect_map(item, path, "a shell command or a map {sh: COMMAND, network: BOOL}")) {
        continue;
      }
      if (item.find("sh") == nullptr) {
        error(item.location, path, "missing 'sh' (the shell command to run)");
      }
      bool ok = true;
      for (const MapEntry& e : item.entries) {
        const std::string key_path = child_path(path, e.key);
        if (e.key == "sh") {
          const std::string* s = nonempty_string(e.value, key_path, "a shell command");
          ok = ok && s != nullptr;
          if (s != nullptr) {
            step.sh = *s;
          }
        } else if (e.key == "network") {
          step.network = boolean(e.value, key_path).value_or(step.network);
        } else {
          unknown_key(e, path, m_shapes.run_step);
        }
      }
      if (ok && !step.sh.empty()) {
        out.push_back(std::move(step));
      }
    }
  }

  // mirrors: vendor directories (resolved against this file's directory; not confined: a mirror's files
  // are taken only when their sha256 is the lock's) and docker:// repositories.
  void mirrors(const Node& v, std::vector<std::string>& out) {
    if (!v.is_sequence()) {
      error(v.location, "mirrors", "expected a list of directories or docker://REGISTRY/REPO");
      return;
    }
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      const std::string key = item_path("mirrors", i);
      const std::string* s = nonempty_string(v.items[i], key, "a directory or docker://REGISTRY/REPO");
      if (s == nullptr) {
        continue;
      }
      if (s->starts_with("docker://")) {
        out.push_back(*s);
      } else if (s->find("://") != std::string::npos) {
        error(v.items[i].location, key,
              fmt::format("'{}': a mirror is a directory or docker://REGISTRY/REPO", *s));
      } else {
        out.push_back(resolve_host_path(v.items[i]).string());
      }
    }
  }

  // outputs.sbom: one path or a list; the name says the format (.spdx.json or .cdx.json).
  void sbom_paths(const Node& v, const std::string& path, std::vector<fs::path>& out) {
    auto one = [&](const Node& item, const std::string& item_key) {
      const std::string* s = nonempty_string(item, item_key, "a path");
      if (s == nullptr) {
        return;
      }
      if (!s->ends_with(".spdx.json") && !s->ends_with(".cdx.json")) {
        error(item.location, item_key,
              fmt::format(
                  "'{}': an SBOM's file name says its format: NAME.spdx.json (SPDX 2.3) or NAME.cdx.json "
                  "(CycloneDX 1.6)",
                  *s));
        return;
      }
      out.push_back(resolve_host_path(item));
    };
    if (v.is_sequence()) {
      for (std::size_t i = 0; i < v.items.size(); ++i) {
        one(v.items[i], item_path(path, i));
      }
    } else {
      one(v, path);
    }
  }

  void output_path(const Node& v, const std::string& path, std::optional<fs::path>& out) {
    if (nonempty_string(v, path, "a path") != nullptr) {
      out = resolve_host_path(v);
    }
  }

  fs::path m_spec_file;
  const LoadOptions& m_options;
  /// What environment files said about `stack:` (apply_conda_stack).
  struct PendingStack {
    CondaEnv env;
    SourceLocation location;
    std::string key_path;
  };
  std::vector<PendingStack> m_conda_stack;
  const shape::Shapes& m_shapes = shape::shapes();
};

} // namespace

void validate_spec(const Node& root, const fs::path& spec_file, const LoadOptions& options, Spec& spec,
                   Diagnostics& diags) {
  SchemaWalker(spec_file, options, diags).walk(root, spec);
}

bool is_top_level_key(std::string_view key) {
  return shape::find_key(shape::spec(), key) != nullptr;
}

} // namespace lockstep::envspec
