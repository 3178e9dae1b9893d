#pragma once
// A client of one registry host (the OCI distribution spec, docs/registry.md): authentication
// (anonymous, Basic, and the bearer-token flow from WWW-Authenticate with scope merging, expiry and
// refresh), retries of 429/5xx with backoff that honours Retry-After, redirects followed by hand
// (a redirect to another host never receives the registry's Authorization; https never downgrades
// to http), and the scheme: https, or http only where the host is configured insecure.
//
// Thread-safe: blob transfers run on several threads, each with its own connection; tokens are
// shared.
#include "support/base/result.hpp"
#include "support/net/http_session.hpp"
#include "support/oci/registry_ref.hpp"
#include "support/registry/credentials.hpp"
#include "support/registry/host_config.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::registry {

/// What every registry command shares (CLI flags, environment).
struct ClientOptions {
  std::optional<bool> tls_verify; ///< --tls-verify; unset: registries.conf decides (default true)
  std::size_t connections = 8;    ///< parallel blob transfers (--connections)
  int retries = 4;                ///< further attempts after a retryable failure
  long retry_delay_ms = 500;      ///< first backoff, doubled each time
  long max_retry_after_s = 60;    ///< a longer Retry-After is capped here
  long connect_timeout_s = 30;
  long stall_timeout_s = 60; ///< a transfer that receives nothing for this long fails
  AuthFiles auth = AuthFiles::from_environment();
  HostConfigFiles config = HostConfigFiles::from_environment();
  /// Credentials that win over every file (`--creds`); never printed.
  std::optional<Credential> credential;
};

/// The process-wide options every image read uses unless told otherwise: the CLI sets them from
/// its flags (--tls-verify, --connections) once, before a command runs.
ClientOptions& default_client_options();

/// Checks `credential` against the registry of `ref` (its host; the repository when set scopes the
/// token): GET /v2/ with it, through the registry's Basic or bearer flow. Refused credentials are
/// ExitCode::external saying so; nothing is stored by this.
Result<void> check_login(const oci::RegistryRef& ref, const Credential& credential,
                         const ClientOptions& options);

/// Access a request needs: "pull" or "pull,push" on a repository.
struct Scope {
  std::string repository;
  std::string actions; ///< "pull", "push,pull"
  [[nodiscard]] std::string str() const { return "repository:" + repository + ":" + actions; }
};

/// One request to the registry API (a path under /v2/ or an absolute upload URL it returned).
struct ApiRequest {
  std::string method = "GET";
  std::string path_or_url; ///< "/v2/NAME/manifests/REF", or an absolute URL from a Location header
  std::vector<std::string> headers;
  std::string body;
  std::optional<FileBody> file_body;
  std::uint64_t max_body = 4ULL << 20;
  std::function<Result<void>(std::span<const char>)> sink; ///< body of a 2xx answer
  std::vector<Scope> scopes;                               ///< what the token must grant
  /// Follow 3xx redirects (blob downloads); otherwise a 3xx is returned as it is.
  bool follow_redirects = false;
  /// Statuses returned to the caller instead of being retried or turned into errors (404 for
  /// "not there", 202 for uploads...). 2xx always are.
  std::vector<long> expected;
  /// The first attempt asks for the body from this byte on (`Range`), a download a killed process
  /// left behind being continued; 0: the whole body.
  std::uint64_t start_at = 0;
  /// Called before each new attempt of a request with a sink (the body starts over or resumes).
  /// Returns the Range start to ask for (0: the whole body again).
  std::function<std::uint64_t()> on_retry;
  /// Called when a resumed request is answered with the whole body (200 instead of 206): the
  /// caller drops what it had, the body starts over.
  std::function<Result<void>()> on_restart;
  std::string what; ///< names the request in messages: "manifest of HOST/REPO:TAG"
  /// Further attempts after a retryable failure; -1: ClientOptions::retries. Uploads that stream a
  /// body handle their own resumption and use 0.
  int retries = -1;
};

/// A registry host.
class Client {
public:
  /// Prepares a client for `host` (HOST[:PORT], as in a RegistryRef); reads certs.d and
  /// registries.conf, and finds credentials lazily per repository.
  static Result<std::shared_ptr<Client>> open(const oci::RegistryRef& ref, const ClientOptions& options);

  /// Performs one API request with authentication, retries and redirects. Errors: a registry that
  /// can't be reached or keeps failing is ExitCode::external; a 4xx other than those expected is
  /// external with the registry's error message (and what to do for 401/403).
  Result<HttpResponse> request(ApiRequest request);

  /// The absolute URL of an API path.
  [[nodiscard]] std::string url(const std::string& path) const;
  [[nodiscard]] const std::string& host() const { return m_host; }
  [[nodiscard]] const ClientOptions& options() const { return m_options; }
  [[nodiscard]] const TlsSettings& tls() const { return m_settings.tls; }

  Client(std::string host, std::string api_host, ClientOptions options, HostSettings settings);

private:
  struct Token {
    std::string value;
    std::chrono::steady_clock::time_point expires;
  };
  enum class AuthKind { unknown, none, basic, bearer };

  Result<void> ensure_scheme(HttpSession& session);
  Result<std::optional<std::string>> authorization(const std::vector<Scope>& scopes, bool renew);
  Result<void> learn_challenge(const HttpResponse& response);
  Result<Token> fetch_token(const std::vector<Scope>& scopes);
  Result<std::optional<Credential>> credential_for(const std::vector<Scope>& scopes);
  /// The TLS settings for a request to `authority` (HOST[:PORT] of a URL): the registry's own for
  /// its API host. Any other host (a token realm, a redirect's storage) is verified as itself, by
  /// its own certs.d and registries.conf and the registry's CAs, never by the registry's
  /// --tls-verify=false or `insecure`.
  Result<TlsSettings> tls_for(const std::string& authority);
  [[nodiscard]] bool is_api_host(const std::string& authority) const;
  HttpSession& session();

  std::string m_host;     // as named: "docker.io", "127.0.0.1:5000"
  std::string m_api_host; // where the API is served: "registry-1.docker.io"
  ClientOptions m_options;
  HostSettings m_settings;
  std::mutex m_contact_mutex; // held through the first contact (ensure_scheme)
  std::mutex m_mutex;         // guards everything below
  std::string m_scheme;       // "https" or "http", decided by the first request
  AuthKind m_auth = AuthKind::unknown;
  std::string m_realm, m_service;
  std::map<std::string, Token> m_tokens;                          // by the joined scopes
  std::map<std::string, std::optional<Credential>> m_credentials; // by repository
  std::map<std::string, TlsSettings> m_other_tls;                 // by authority, other hosts
};

} // namespace lockstep::registry
