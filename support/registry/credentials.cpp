// Registry credentials from containers' auth.json and Docker's config.json (docs/registry.md,
// "Credentials").
//
// Lookup: the keys that could name `ref` are tried from the most specific (HOST/REPO) to the host
// alone; for each key the files are tried in lookup order. For the host key a file's credential
// helper (`credHelpers[HOST]`, else `credsStore`) comes before that file's `auths` entry, as Docker
// does; helpers are per host (Docker has no namespaced helper entries). An `auths` entry without a
// credential (Docker's `{}` marker beside a credsStore) is no credential.
//
// No message built here holds a secret: errors name files, keys and fields, never values, and a
// helper's output is quoted only when the helper failed (then it is its own error text).
#include "support/registry/credentials.hpp"

#include "support/base/json.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/codec/base64.hpp"
#include "support/oci/oci.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>

namespace lockstep::registry {

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t k_max_auth_file = 4ULL << 20;
constexpr std::chrono::seconds k_helper_timeout{60};
// The server name Docker's own `docker login` gives helpers (and config.json) for Docker Hub.
constexpr std::string_view k_docker_hub_server = "https://index.docker.io/v1/";

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    return std::nullopt;
  }
  return std::string(v);
}

// `path` with $HOME written as "~", for messages.
std::string display_path(const fs::path& path) {
  std::string p = path.string();
  if (auto home = env_value("HOME"); home && home->size() > 1) {
    std::string prefix = *home + (home->back() == '/' ? "" : "/");
    if (p.starts_with(prefix)) {
      return "~/" + p.substr(prefix.size());
    }
  }
  return p;
}

// A registry host as credential keys compare it: lower case, Docker Hub's aliases as docker.io.
std::string normal_host(std::string_view host) {
  std::string h = ascii_lower(host);
  if (h == "index.docker.io" || h == "registry-1.docker.io") {
    return std::string(oci::k_docker_hub);
  }
  return h;
}

// A key of an auth file as lookups compare it: "https://index.docker.io/v1/" -> "docker.io"
// (a URL key names its host only), "Quay.io/team/" -> "quay.io/team".
std::string normal_key(std::string_view key) {
  bool url = false;
  for (std::string_view scheme : {"https://", "http://"}) {
    if (key.size() >= scheme.size() && iequals(key.substr(0, scheme.size()), scheme)) {
      key.remove_prefix(scheme.size());
      url = true;
    }
  }
  std::size_t slash = key.find('/');
  std::string_view host = key.substr(0, slash);
  std::string_view path = url || slash == std::string_view::npos ? std::string_view() : key.substr(slash + 1);
  path = trim_chars(path, "/");
  std::string out = normal_host(host);
  if (!path.empty()) {
    out += "/";
    out += path;
  }
  return out;
}

// The keys that could hold `ref`'s credential, the most specific first: HOST/A/B, HOST/A, HOST.
std::vector<std::string> candidate_keys(const oci::RegistryRef& ref) {
  std::vector<std::string> keys;
  std::string host = normal_host(ref.host);
  std::string_view repo = ref.repository;
  while (!repo.empty()) {
    keys.push_back(host + "/" + std::string(repo));
    std::size_t slash = repo.rfind('/');
    repo = slash == std::string_view::npos ? std::string_view() : repo.substr(0, slash);
  }
  keys.push_back(host);
  return keys;
}

// One auth file as read.
struct AuthFile {
  fs::path path;
  nlohmann::json auths = nlohmann::json::object(); ///< normalised key -> entry
  std::map<std::string, std::string> cred_helpers; ///< normalised host -> helper name
  std::string creds_store;
};

// The file's text as a JSON object; nullopt when the file does not exist.
Result<std::optional<nlohmann::json>> read_json_object(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return std::optional<nlohmann::json>();
  }
  LS_TRY_ASSIGN(std::string text, read_file(path, k_max_auth_file));
  if (trim(text).empty()) {
    return std::optional<nlohmann::json>(nlohmann::json::object());
  }
  LS_TRY_ASSIGN(nlohmann::json doc, parse_json(text, display_path(path)));
  if (!doc.is_object()) {
    return invalid_input("{}: expected a JSON object", display_path(path));
  }
  return std::optional<nlohmann::json>(std::move(doc));
}

bool valid_helper_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return is_ascii_alnum(c) || c == '-' || c == '_' || c == '.';
  }) && name.front() != '.';
}

Result<std::optional<AuthFile>> load_auth_file(const fs::path& path) {
  LS_TRY_ASSIGN(std::optional<nlohmann::json> doc, read_json_object(path));
  if (!doc) {
    return std::optional<AuthFile>();
  }
  AuthFile file;
  file.path = path;
  const std::string where = display_path(path);
  // ~/.dockercfg, Docker's old format, is the `auths` object itself.
  const bool legacy = path.filename() == ".dockercfg";
  const nlohmann::json* auths = legacy ? &*doc : nullptr;
  if (!legacy && doc->contains("auths")) {
    auths = &(*doc)["auths"];
    if (!auths->is_object()) {
      return invalid_input("{}: \"auths\" must be an object", where);
    }
  }
  if (auths != nullptr) {
    // An exact key wins over one that only normalises to the same ("quay.io" over "https://quay.io").
    for (const bool exact_pass : {true, false}) {
      for (const auto& [key, entry] : auths->items()) {
        std::string normal = normal_key(key);
        if ((normal == key) != exact_pass || file.auths.contains(normal)) {
          continue;
        }
        if (!entry.is_object()) {
          return invalid_input("{}: auths entry \"{}\" must be an object", where, escape_controls(key));
        }
        file.auths[normal] = entry;
      }
    }
  }
  if (!legacy && doc->contains("credHelpers")) {
    const nlohmann::json& helpers = (*doc)["credHelpers"];
    if (!helpers.is_object()) {
      return invalid_input("{}: \"credHelpers\" must be an object", where);
    }
    for (const auto& [host, name] : helpers.items()) {
      if (!name.is_string() || !valid_helper_name(name.get_ref<const std::string&>())) {
        return invalid_input("{}: credHelpers entry \"{}\" must name a helper (docker-credential-NAME)",
                             where, escape_controls(host));
      }
      file.cred_helpers.emplace(normal_key(host), name.get<std::string>());
    }
  }
  if (!legacy && doc->contains("credsStore")) {
    const nlohmann::json& store = (*doc)["credsStore"];
    if (!store.is_string() || (!store.get_ref<const std::string&>().empty() &&
                               !valid_helper_name(store.get_ref<const std::string&>()))) {
      return invalid_input("{}: \"credsStore\" must name a helper (docker-credential-NAME)", where);
    }
    file.creds_store = store.get<std::string>();
  }
  return std::optional<AuthFile>(std::move(file));
}

// A string field of an auths entry ("" when absent).
Result<std::string> string_field(const nlohmann::json& entry, const char* field, const std::string& what) {
  auto it = entry.find(field);
  if (it == entry.end() || it->is_null()) {
    return std::string();
  }
  if (!it->is_string()) {
    return invalid_input("{}: \"{}\" must be a string", what, field);
  }
  return it->get<std::string>();
}

// The credential an auths entry holds; nullopt for an entry without one (Docker's {} marker).
Result<std::optional<Credential>> entry_credential(const AuthFile& file, const std::string& key,
                                                   const nlohmann::json& entry) {
  const std::string what =
      fmt::format("{}: auths entry \"{}\"", display_path(file.path), escape_controls(key));
  Credential c;
  c.source = fmt::format("{} (auths \"{}\")", display_path(file.path), escape_controls(key));
  LS_TRY_ASSIGN(std::string auth, string_field(entry, "auth", what));
  LS_TRY_ASSIGN(std::string username, string_field(entry, "username", what));
  LS_TRY_ASSIGN(std::string password, string_field(entry, "password", what));
  LS_TRY_ASSIGN(std::string identity_token, string_field(entry, "identitytoken", what));
  if (!auth.empty()) {
    LS_TRY_ASSIGN(std::string decoded, base64_decode(trim(auth), what + ": \"auth\""));
    std::size_t colon = decoded.find(':');
    if (colon == std::string::npos) {
      return invalid_input("{}: \"auth\" is not base64 of USER:PASSWORD", what);
    }
    username = decoded.substr(0, colon);
    password = decoded.substr(colon + 1);
  }
  if (!identity_token.empty()) {
    c.username = username;
    c.secret = identity_token;
    c.identity_token = true;
    return std::optional<Credential>(std::move(c));
  }
  if (username.empty() && password.empty()) {
    return std::optional<Credential>();
  }
  c.username = std::move(username);
  c.secret = std::move(password);
  return std::optional<Credential>(std::move(c));
}

// Runs `docker-credential-HELPER get` for `host`. nullopt: the helper has no credential for it.
Result<std::optional<Credential>> helper_credential(const std::string& helper, const std::string& named_by,
                                                    const std::string& host) {
  const std::string program = "docker-credential-" + helper;
  const std::string what = fmt::format("credential helper {} ({})", program, named_by);
  std::optional<fs::path> exe = find_program(program);
  if (!exe) {
    return external_error("{} is not on PATH: install it, or remove it from that file", what);
  }
  // Docker's own `docker login` stores Docker Hub under its v1 URL; helpers know it by that name.
  const std::string server = host == oci::k_docker_hub ? std::string(k_docker_hub_server) : host;
  CaptureOptions options;
  options.timeout = k_helper_timeout;
  options.max_output = 1U << 20;
  log::debug("credentials for {}: asking {}", host, what);
  LS_TRY_ASSIGN(CaptureResult run, run_capture_with_input({exe->string(), "get"}, server, options));
  if (run.timed_out) {
    return external_error("{} did not answer for {} within {} s", what, host, k_helper_timeout.count());
  }
  if (run.status != 0) {
    // Helpers print their error on stdout (docker-credential-helpers) or stderr.
    std::string said =
        std::string(trim(run.out)) + (trim(run.out).empty() ? "" : " ") + std::string(trim(run.err));
    if (said.find("credentials not found") != std::string::npos) {
      return std::optional<Credential>();
    }
    return external_error("{} failed for {} (exit status {}): {}", what, host, run.status,
                          printable_ascii(trim(said), 300));
  }
  // The output holds the secret: nothing of it goes into a message.
  auto doc = parse_json(run.out, what + " output");
  if (!doc || !doc->is_object()) {
    return external_error("{} printed something other than a JSON object for {}", what, host);
  }
  auto field = [&](const char* name) -> Result<std::string> {
    auto it = doc->find(name);
    if (it == doc->end() || !it->is_string()) {
      return external_error("{} printed no string \"{}\" for {}", what, name, host);
    }
    return it->get<std::string>();
  };
  LS_TRY_ASSIGN(std::string username, field("Username"));
  LS_TRY_ASSIGN(std::string secret, field("Secret"));
  if (secret.empty()) {
    return std::optional<Credential>();
  }
  Credential c;
  c.source = what;
  // Docker's helpers store an identity token under the user name "<token>".
  if (username == "<token>") {
    c.identity_token = true;
  } else {
    c.username = std::move(username);
  }
  c.secret = std::move(secret);
  return std::optional<Credential>(std::move(c));
}

// A host's helper in `file`: credHelpers[host], else credsStore; with what named it.
std::optional<std::pair<std::string, std::string>> helper_for(const AuthFile& file, const std::string& host) {
  if (auto it = file.cred_helpers.find(host); it != file.cred_helpers.end()) {
    return std::pair{it->second, fmt::format("credHelpers \"{}\" in {}", host, display_path(file.path))};
  }
  if (!file.creds_store.empty()) {
    return std::pair{file.creds_store, fmt::format("credsStore in {}", display_path(file.path))};
  }
  return std::nullopt;
}

// Creates the missing directories of `dir` with mode 0700, as podman does for its auth file.
Result<void> make_private_dirs(const fs::path& dir) {
  fs::path at;
  for (const fs::path& part : dir) {
    at /= part;
    if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST) {
      return errno_error("can't create " + at.string(), errno);
    }
  }
  return {};
}

// `key` as login/logout take it: HOST[:PORT] or HOST[:PORT]/NAMESPACE..., normalised.
Result<std::string> login_key(std::string_view key) {
  std::string normal = normal_key(trim(key));
  std::size_t slash = normal.find('/');
  std::string_view host = std::string_view(normal).substr(0, slash);
  if (!oci::valid_registry_host(host)) {
    return invalid_input("'{}' is not a registry (HOST[:PORT] or HOST[:PORT]/NAMESPACE)",
                         escape_controls(key));
  }
  if (slash != std::string::npos && !oci::valid_repository_name(std::string_view(normal).substr(slash + 1))) {
    return invalid_input("'{}' is not a registry namespace (HOST[:PORT]/NAMESPACE, lower case)",
                         escape_controls(key));
  }
  return normal;
}

// The login file as JSON (an empty object when it does not exist) and its `auths` object.
Result<nlohmann::json> read_login_file(const AuthFiles& files) {
  if (files.login_file.empty()) {
    return invalid_input(
        "no file to keep registry logins in: set $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR or $HOME");
  }
  LS_TRY_ASSIGN(std::optional<nlohmann::json> doc, read_json_object(files.login_file));
  nlohmann::json out = doc ? std::move(*doc) : nlohmann::json::object();
  if (out.contains("auths") && !out["auths"].is_object()) {
    return invalid_input("{}: \"auths\" must be an object", display_path(files.login_file));
  }
  return out;
}

Result<void> write_login_file(const AuthFiles& files, const nlohmann::json& doc) {
  LS_TRY(make_private_dirs(files.login_file.parent_path()));
  return write_file_atomic(files.login_file, doc.dump(1, '\t') + "\n", 0600);
}

} // namespace

AuthFiles AuthFiles::from_environment() {
  AuthFiles out;
  if (auto file = env_value("REGISTRY_AUTH_FILE")) {
    out.files.emplace_back(*file);
    out.login_file = *file;
    return out;
  }
  std::optional<std::string> home = env_value("HOME");
  std::optional<std::string> runtime = env_value("XDG_RUNTIME_DIR");
  if (runtime) {
    out.files.push_back(fs::path(*runtime) / "containers/auth.json");
  }
  if (home) {
    out.files.push_back(fs::path(*home) / ".config/containers/auth.json");
  }
  if (auto docker = env_value("DOCKER_CONFIG")) {
    out.files.push_back(fs::path(*docker) / "config.json");
  } else if (home) {
    out.files.push_back(fs::path(*home) / ".docker/config.json");
  }
  if (home) {
    out.files.push_back(fs::path(*home) / ".dockercfg");
  }
  std::error_code ec;
  if (runtime && fs::is_directory(*runtime, ec)) {
    out.login_file = fs::path(*runtime) / "containers/auth.json";
  } else if (home) {
    out.login_file = fs::path(*home) / ".config/containers/auth.json";
  }
  return out;
}

Result<std::optional<Credential>> find_credential(const AuthFiles& files, const oci::RegistryRef& ref) {
  std::vector<AuthFile> loaded;
  for (const fs::path& path : files.files) {
    LS_TRY_ASSIGN(std::optional<AuthFile> file, load_auth_file(path));
    if (file) {
      loaded.push_back(std::move(*file));
    }
  }
  const std::string host = normal_host(ref.host);
  for (const std::string& key : candidate_keys(ref)) {
    for (const AuthFile& file : loaded) {
      if (key == host) {
        if (auto helper = helper_for(file, host)) {
          LS_TRY_ASSIGN(std::optional<Credential> c, helper_credential(helper->first, helper->second, host));
          if (c) {
            log::debug("credentials for {}: from {}", ref.name(), c->source);
            return c;
          }
        }
      }
      auto it = file.auths.find(key);
      if (it == file.auths.end()) {
        continue;
      }
      LS_TRY_ASSIGN(std::optional<Credential> c, entry_credential(file, key, *it));
      if (c) {
        log::debug("credentials for {}: from {}", ref.name(), c->source);
        return c;
      }
    }
  }
  log::debug("credentials for {}: none (anonymous)", ref.name());
  return std::optional<Credential>();
}

Result<void> store_credential(const AuthFiles& files, std::string_view key, const Credential& credential) {
  LS_TRY_ASSIGN(std::string normal, login_key(key));
  if (credential.username.find(':') != std::string::npos) {
    return invalid_input("a registry user name can't contain ':' (it is stored as USER:PASSWORD)");
  }
  if (credential.secret.empty()) {
    return invalid_input("{}: refusing to store an empty password", normal);
  }
  if (credential.identity_token) {
    return invalid_input("{}: an identity token can't be stored as a login", normal);
  }
  LS_TRY_ASSIGN(nlohmann::json doc, read_login_file(files));
  nlohmann::json& auths = doc["auths"];
  if (auths.is_null()) {
    auths = nlohmann::json::object();
  }
  auths[normal] = nlohmann::json{{"auth", base64_encode(credential.username + ":" + credential.secret)}};
  return write_login_file(files, doc);
}

Result<bool> remove_credential(const AuthFiles& files, std::string_view key) {
  LS_TRY_ASSIGN(std::string normal, login_key(key));
  LS_TRY_ASSIGN(nlohmann::json doc, read_login_file(files));
  if (!doc.contains("auths")) {
    return false;
  }
  nlohmann::json& auths = doc["auths"];
  std::vector<std::string> gone;
  for (const auto& [k, entry] : auths.items()) {
    if (normal_key(k) == normal) {
      gone.push_back(k);
    }
  }
  if (gone.empty()) {
    return false;
  }
  for (const std::string& k : gone) {
    auths.erase(k);
  }
  LS_TRY(write_login_file(files, doc));
  return true;
}

} // namespace lockstep::registry
