// `repos:` (apt repositories, Python indexes, wheelhouses) and `mirrors:` (docs/spec.md).
#include "envspec/load/schema_walker.hpp"
#include "support/net/http.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <regex>
#include <system_error>

namespace lockstep::envspec::detail {

// `repos: [{apt: URL, suite | suites, components, keyring} | {apt: URL, flat: true, keyring} |
// {pypi: URL} | {wheels: DIR} | {conda: CHANNEL, subdirs}]`, in priority order.
void SchemaWalker::repos(const Node& v, std::vector<Repo>& out) {
  if (!expect_list(v, "repos")) {
    return;
  }
  for (std::size_t i = 0; i < v.items.size(); ++i) {
    const Node& item = v.items[i];
    const std::string path = item_path("repos", i);
    constexpr std::string_view expected =
        "a map {apt: URL, ...}, {pypi: URL}, {wheels: DIR} or {conda: CHANNEL}";
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
      if (const std::string* s = nonempty_string(wheels->value, child_path(path, "wheels"), "a directory")) {
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
    } else if (const MapEntry* channel = item.find("conda")) {
      repo.kind = Repo::Kind::conda;
      if (conda_repo(*channel, item, path, repo)) {
        out.push_back(std::move(repo));
      }
    } else {
      error(item.location, path,
            fmt::format("expected {}: the map has none of apt, pypi, wheels, conda", expected));
    }
  }
}

// `{conda: CHANNEL, subdirs: [...]}`: a URL, or a channel name on anaconda.org (`conda-forge`,
// `nvidia/label/cuda-12.1.0`). Credentials never go in the spec, whose text goes into locks and
// images: a token (`/t/TOKEN/`) or a user in the URL is refused (docs/conda.md, "Channels").
bool SchemaWalker::conda_repo(const MapEntry& channel, const Node& item, const std::string& path,
                              Repo& repo) {
  const std::string key_path = child_path(path, "conda");
  bool ok = true;
  for (const MapEntry& e : item.entries) {
    if (e.key != "conda" && e.key != "subdirs") {
      unknown_key(e, path, m_shapes.repo_conda);
      ok = false;
    }
  }
  const std::string* s = nonempty_string(channel.value, key_path, "a channel URL or name");
  ok = conda_subdirs(item, path, repo) && ok;
  if (s == nullptr) {
    return false;
  }
  static const std::regex name_re("[A-Za-z0-9][A-Za-z0-9._-]*(/label/[A-Za-z0-9._-]+)?");
  static const std::regex token_re(".*/t/[^/]+/.*");
  static const std::regex userinfo_re("[A-Za-z][A-Za-z0-9+.-]*://[^/@]*@.*");
  if (std::regex_match(*s, name_re)) {
    repo.url_text = *s;
    repo.url = "https://conda.anaconda.org/" + *s;
  } else if (std::regex_match(*s, token_re) || std::regex_match(*s, userinfo_re)) {
    error(channel.value.location, key_path,
          "a channel URL with a token or a user in it: the spec's text goes into the lock and the image, so "
          "lockstep takes no credentials from it (channels that need credentials are not supported yet: "
          "docs/conda.md, \"Channels\")");
    return false;
  } else if (!repo_url(channel.value, key_path, repo)) {
    return false;
  }
  return ok;
}

// `subdirs: [linux-64, noarch]` of a conda channel item, when given.
bool SchemaWalker::conda_subdirs(const Node& item, const std::string& path, Repo& repo) {
  bool ok = true;
  if (const MapEntry* subdirs = item.find("subdirs")) {
    const std::string spath = child_path(path, "subdirs");
    if (expect_list(subdirs->value, spath, "a list of subdirs, e.g. [linux-64, noarch]")) {
      static const std::regex subdir_re("noarch|[a-z0-9]+-[a-z0-9]+");
      for (std::size_t i = 0; i < subdirs->value.items.size(); ++i) {
        const Node& sd = subdirs->value.items[i];
        const std::string* name = nonempty_string(sd, item_path(spath, i), "a subdir");
        if (name == nullptr || name->size() > 32 || !std::regex_match(*name, subdir_re)) {
          if (name != nullptr) {
            error(sd.location, item_path(spath, i),
                  fmt::format(
                      "invalid subdir '{}': expected noarch or OS-ARCH such as linux-64 or linux-aarch64",
                      *name));
          }
          ok = false;
        } else if (std::find(repo.subdirs.begin(), repo.subdirs.end(), *name) != repo.subdirs.end()) {
          error(sd.location, item_path(spath, i), fmt::format("subdir '{}' is listed twice", *name));
          ok = false;
        } else {
          repo.subdirs.push_back(*name);
        }
      }
      if (subdirs->value.items.empty()) {
        error(subdirs->value.location, spath,
              "an empty list: leave subdirs out for the platform's and noarch");
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  return ok;
}

// A repository URL: http://, https:// or file://; a plain path is taken relative to the spec.
bool SchemaWalker::repo_url(const Node& v, const std::string& path, Repo& repo) {
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
bool SchemaWalker::local_url_confined(const Node& v, const std::string& path, const std::string& text) {
  Result<std::optional<fs::path>> local = local_url_path(text);
  if (!local) {
    error(v.location, path, local.error().message);
    return false;
  }
  return !*local || confined(v, path, **local, text);
}

// One key of an apt repository item; false after reporting a problem.
bool SchemaWalker::apt_repo_key(const MapEntry& e, const std::string& path, Repo& repo) {
  bool ok = true;
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
      return ok;
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
      return ok;
    }
    for (std::size_t i = 0; i < e.value.items.size(); ++i) {
      const std::string* c = nonempty_string(e.value.items[i], item_path(key_path, i), "a component");
      static const std::regex component_re("[A-Za-z0-9][A-Za-z0-9._+/-]*");
      if (c != nullptr && std::regex_match(*c, component_re) && c->find("..") == std::string::npos) {
        repo.components.push_back(*c);
      } else {
        if (c != nullptr) {
          error(e.value.items[i].location, item_path(key_path, i), fmt::format("invalid component '{}'", *c));
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
  } else if (e.key == "priority") {
    int value = 0;
    const std::string& text = e.value.scalar;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (!e.value.is_scalar() || e.value.quoted || ec != std::errc() || end != text.data() + text.size() ||
        value < 1 || value > 9999) {
      error(e.value.location, key_path,
            fmt::format("expected an apt pin priority from 1 to 9999 (500 is apt's default; 1001 makes "
                        "the entry win whatever the others' versions), found {}",
                        describe(e.value)));
      ok = false;
    } else {
      repo.priority = value;
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
  return ok;
}

// An apt repository item: each key (apt_repo_key), then the rules between them; false after
// reporting a problem.
bool SchemaWalker::apt_repo(const Node& item, const std::string& path, Repo& repo) {
  bool ok = true;
  for (const MapEntry& e : item.entries) {
    ok = apt_repo_key(e, path, repo) && ok;
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
      error(item.find("snapshot")->key_location, child_path(path, "snapshot"),
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
const std::string* SchemaWalker::apt_suite(const Node& v, const std::string& path) {
  const std::string* s = nonempty_string(v, path, "a suite or codename");
  static const std::regex suite_re("[A-Za-z0-9][A-Za-z0-9._+/-]*");
  if (s != nullptr && (!std::regex_match(*s, suite_re) || s->find("..") != std::string::npos)) {
    error(v.location, path, fmt::format("invalid suite '{}'", *s));
    return nullptr;
  }
  return s;
}

// mirrors: vendor directories (resolved against this file's directory; not confined: a mirror's files
// are taken only when their sha256 is the lock's) and docker:// repositories.
void SchemaWalker::mirrors(const Node& v, std::vector<std::string>& out) {
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

} // namespace lockstep::envspec::detail
