#pragma once
// Registry credentials where users already keep them (docs/registry.md, "Credentials"):
// containers' auth.json (containers-auth.json(5)) and Docker's config.json, with Docker's credential
// helpers (`credHelpers`, `credsStore`: `docker-credential-NAME get`, the server on stdin, JSON out).
// Keys may be a host ("quay.io", "127.0.0.1:5000"), a namespace or a repository
// ("quay.io/team", "quay.io/team/app"), or a URL ("https://index.docker.io/v1/"); the most specific
// key that matches the repository wins. Secrets never appear in messages or logs.
#include "support/base/result.hpp"
#include "support/oci/registry_ref.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::registry {

/// One set of credentials for a registry.
struct Credential {
  std::string username;
  std::string secret;          ///< password, or an identity (refresh) token when identity_token
  bool identity_token = false; ///< Docker's "identitytoken" / a helper's "<token>" user name
  std::string source;          ///< where it was found, for messages: "~/.docker/config.json (auths)"
};

/// The files credentials are read from, and the one `lockstep login` writes.
struct AuthFiles {
  /// In lookup order: $REGISTRY_AUTH_FILE alone when set; else $XDG_RUNTIME_DIR/containers/auth.json,
  /// ~/.config/containers/auth.json, then $DOCKER_CONFIG/config.json (or ~/.docker/config.json)
  /// and ~/.dockercfg. Missing files are skipped.
  std::vector<std::filesystem::path> files;
  /// Written by login/logout: $REGISTRY_AUTH_FILE, else $XDG_RUNTIME_DIR/containers/auth.json when
  /// that directory exists, else ~/.config/containers/auth.json (as podman does).
  std::filesystem::path login_file;

  /// The files named by the environment ($HOME, $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR, $DOCKER_CONFIG).
  static AuthFiles from_environment();
};

/// The credential for `ref`'s repository, the most specific key winning; within one key the first
/// file in lookup order wins. nullopt: anonymous. A malformed file or a failing credential helper
/// is an error naming the file or helper (never the secret).
Result<std::optional<Credential>> find_credential(const AuthFiles& files, const oci::RegistryRef& ref);

/// Stores `credential` for `key` (a host, or HOST/NAMESPACE) in files.login_file, as podman login
/// does (`auths.KEY.auth` = base64(user:password)), keeping every other entry; the file is written
/// atomically with mode 0600 and its directory created 0700.
Result<void> store_credential(const AuthFiles& files, std::string_view key, const Credential& credential);

/// Removes `key` from files.login_file; false when it was not there.
Result<bool> remove_credential(const AuthFiles& files, std::string_view key);

} // namespace lockstep::registry
