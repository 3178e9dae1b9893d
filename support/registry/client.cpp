// A client of one registry host (see client.hpp).
#include "support/registry/client.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/json.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/codec/base64.hpp"
#include "support/registry/challenge.hpp"

#include <algorithm>
#include <charconv>
#include <ctime>
#include <thread>

namespace lockstep::registry {

using nlohmann::json;

namespace {

constexpr int k_max_redirects = 5;
constexpr std::uint64_t k_max_token_body = 1 << 20;
constexpr std::size_t k_max_message = 300;

// The thread's connection: kept alive across requests and clients.
HttpSession& thread_session() {
  thread_local HttpSession session;
  return session;
}

std::string percent_encode(std::string_view s) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += k_hex[c >> 4];
      out += k_hex[c & 15];
    }
  }
  return out;
}

// "https://host:port" of an absolute URL, and its scheme.
struct Origin {
  std::string scheme;
  std::string authority;
};

std::optional<Origin> origin_of(std::string_view url) {
  std::size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return std::nullopt;
  }
  std::string scheme = ascii_lower(url.substr(0, sep));
  std::size_t end = url.find_first_of("/?#", sep + 3);
  std::string authority = ascii_lower(
      url.substr(sep + 3, end == std::string_view::npos ? std::string_view::npos : end - sep - 3));
  if (authority.find('@') != std::string::npos) {
    return std::nullopt; // userinfo in a URL from a registry is refused
  }
  return Origin{scheme, authority};
}

// A Location header resolved against the URL it came from.
std::string resolve_location(const std::string& base, const std::string& location) {
  if (location.find("://") != std::string::npos) {
    return location;
  }
  auto origin = origin_of(base);
  if (!origin) {
    return location;
  }
  if (location.starts_with("//")) {
    return origin->scheme + ":" + location;
  }
  if (location.starts_with("/")) {
    return origin->scheme + "://" + origin->authority + location;
  }
  std::string path = base.substr(0, base.find_first_of("?#"));
  return path.substr(0, path.rfind('/') + 1) + location;
}

// Printable, bounded text from a registry for a message.
std::string shown(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, k_max_message)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (text.size() > k_max_message) {
    out += "...";
  }
  return out;
}

// The registry's own words for a failed request: errors[].code/message of the distribution spec.
std::string registry_message(const HttpResponse& r) {
  auto parsed = parse_json(r.body, "error body");
  if (parsed && parsed->is_object() && parsed->contains("errors") && (*parsed)["errors"].is_array()) {
    std::string out;
    for (const auto& e : (*parsed)["errors"]) {
      if (!e.is_object()) {
        continue;
      }
      std::string code = e.contains("code") && e["code"].is_string() ? e["code"].get<std::string>() : "";
      std::string message =
          e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : "";
      out += (out.empty() ? "" : "; ") + shown(code.empty() ? message : code + ": " + message);
    }
    if (!out.empty()) {
      return out;
    }
  }
  return "HTTP " + std::to_string(r.status);
}

// Retry-After in seconds (a number or an HTTP date); 0 when absent or unreadable.
long retry_after_seconds(const HttpResponse& r) {
  auto header = r.header("retry-after");
  if (!header) {
    return 0;
  }
  const std::string& value = *header;
  long seconds = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec == std::errc() && end == value.data() + value.size()) {
    return std::max(0L, seconds);
  }
  std::tm tm{};
  if (::strptime(value.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm) != nullptr) {
    return std::max<long>(0, static_cast<long>(::timegm(&tm) - std::time(nullptr)));
  }
  return 0;
}

// Waits `ms`, waking early on an interrupt.
void backoff(long ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!interrupted() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<long>(ms, 50)));
  }
}

std::string scopes_key(const std::vector<Scope>& scopes) {
  std::vector<std::string> parts;
  parts.reserve(scopes.size());
  for (const Scope& s : scopes) {
    parts.push_back(s.str());
  }
  std::sort(parts.begin(), parts.end());
  std::string key;
  for (const auto& p : parts) {
    key += p + " ";
  }
  return key;
}

bool retryable_status(long status) {
  return status == 408 || status == 429 || (status >= 500 && status <= 599);
}

// One request without authentication or redirects (the first contact, token endpoints), retried
// like any other: transport failures other than TLS ones, 408, 429 and 5xx, with backoff that
// honours Retry-After.
Result<HttpResponse> perform_retrying(HttpSession& session, const HttpRequest& request,
                                      const ClientOptions& options) {
  for (int attempt = 0;; ++attempt) {
    LS_TRY_ASSIGN(HttpResponse r, session.perform(request));
    bool again = (r.status == 0 && !r.tls_failure) || retryable_status(r.status);
    if (!again || attempt >= options.retries) {
      return r;
    }
    backoff(std::max(options.retry_delay_ms << attempt,
                     std::min(retry_after_seconds(r), options.max_retry_after_s) * 1000));
  }
}

} // namespace

ClientOptions& default_client_options() {
  static ClientOptions options;
  return options;
}

Result<void> check_login(const oci::RegistryRef& ref, const Credential& credential,
                         const ClientOptions& options) {
  ClientOptions with = options;
  with.credential = credential;
  LS_TRY_ASSIGN(std::shared_ptr<Client> client, Client::open(ref, with));
  ApiRequest r;
  r.path_or_url = "/v2/";
  if (!ref.repository.empty()) {
    r.scopes = {{ref.repository, "pull"}};
  }
  r.what = "login to " + ref.host;
  LS_TRY(client->request(std::move(r)));
  return {};
}

Client::Client(std::string host, std::string api_host, ClientOptions options, HostSettings settings)
    : m_host(std::move(host)), m_api_host(std::move(api_host)), m_options(std::move(options)),
      m_settings(std::move(settings)) {
}

Result<std::shared_ptr<Client>> Client::open(const oci::RegistryRef& ref, const ClientOptions& options) {
  LS_TRY_ASSIGN(HostSettings settings, host_settings(options.config, ref.host, options.tls_verify));
  if (settings.insecure) {
    settings.tls.verify = false;
  }
  return std::make_shared<Client>(ref.host, ref.api_host(), options, std::move(settings));
}

std::string Client::url(const std::string& path) const {
  return m_scheme + "://" + m_api_host + path;
}

HttpSession& Client::session() {
  return thread_session();
}

// The first contact: GET /v2/ over https (and, for a host configured insecure only, over http when
// https can't be spoken), which also tells how the registry authenticates.
Result<void> Client::ensure_scheme(HttpSession& session) {
  // One first contact, however many transfer threads start at once.
  std::lock_guard contact(m_contact_mutex);
  {
    std::lock_guard lock(m_mutex);
    if (!m_scheme.empty()) {
      return {};
    }
  }
  std::vector<std::string> schemes = {"https"};
  if (m_settings.insecure) {
    schemes.emplace_back("http");
  }
  std::string failures;
  for (const std::string& scheme : schemes) {
    HttpRequest ping;
    ping.url = scheme + "://" + m_api_host + "/v2/";
    ping.tls = m_settings.tls;
    ping.connect_timeout_s = m_options.connect_timeout_s;
    ping.low_speed_timeout_s = m_options.stall_timeout_s;
    ping.max_body = 64 << 10;
    LS_TRY_ASSIGN(HttpResponse r, perform_retrying(session, ping, m_options));
    if (r.status == 0) {
      failures +=
          fmt::format("{}{}: {}", failures.empty() ? "" : "; ", redact_url(ping.url), r.transport_error);
      if (r.tls_failure && !m_settings.insecure) {
        return external_error(
            "can't reach registry {}: {}. If it uses a private CA, put the CA certificate in "
            "/etc/containers/certs.d/{}/ca.crt; for a test registry, --tls-verify=false",
            m_host, failures, m_host);
      }
      continue;
    }
    if (r.status == 401) {
      LS_TRY(learn_challenge(r));
    } else if (r.status >= 200 && r.status < 300) {
      std::lock_guard lock(m_mutex);
      m_auth = AuthKind::none;
    } else if (r.status == 404) {
      return external_error("{} is not a registry: {} answered 404 (no /v2/ API)", m_host,
                            redact_url(ping.url));
    } else {
      return external_error("registry {} failed: GET /v2/ answered {}", m_host, registry_message(r));
    }
    std::lock_guard lock(m_mutex);
    m_scheme = scheme;
    if (scheme == "http") {
      log::debug("registry {}: plain HTTP ({})", m_host, m_settings.insecure_source);
    }
    return {};
  }
  std::string hint =
      m_settings.insecure ? "" : "; if it is a plain-HTTP test registry, pass --tls-verify=false";
  return external_error("can't reach registry {}: {}{}", m_host, failures, hint);
}

Result<void> Client::learn_challenge(const HttpResponse& response) {
  std::vector<std::string> values = response.header_values("www-authenticate");
  std::vector<Challenge> challenges;
  for (const auto& v : values) {
    LS_TRY_ASSIGN(auto more, parse_challenges(v));
    challenges.insert(challenges.end(), more.begin(), more.end());
  }
  std::lock_guard lock(m_mutex);
  for (const Challenge& c : challenges) {
    if (c.scheme == "bearer") {
      std::string realm = c.param("realm");
      auto origin = origin_of(realm);
      if (!origin || (origin->scheme != "https" && origin->scheme != "http")) {
        return external_error("registry {} sent a token realm that is not an http(s) URL: {}", m_host,
                              shown(realm));
      }
      m_auth = AuthKind::bearer;
      m_realm = realm;
      m_service = c.param("service");
      return {};
    }
  }
  for (const Challenge& c : challenges) {
    if (c.scheme == "basic") {
      m_auth = AuthKind::basic;
      return {};
    }
  }
  return external_error("registry {} asks for authentication without a Bearer or Basic challenge", m_host);
}

bool Client::is_api_host(const std::string& authority) const {
  return authority == ascii_lower(m_api_host); // origin_of() lowers the authority it gives
}

Result<TlsSettings> Client::tls_for(const std::string& authority) {
  if (is_api_host(authority)) {
    return m_settings.tls;
  }
  {
    std::lock_guard lock(m_mutex);
    if (auto it = m_other_tls.find(authority); it != m_other_tls.end()) {
      return it->second;
    }
  }
  // The command line's --tls-verify names the registry, not the hosts it sends us to.
  auto other = host_settings(m_options.config, authority, std::nullopt);
  if (!other) {
    return external_error("registry {} sent a request to {}, which is not HOST[:PORT]", m_host,
                          shown(authority));
  }
  TlsSettings tls = other->tls;
  tls.verify = !other->insecure;
  // A CA trusted for the registry is trusted for the hosts it names (its token service, its
  // storage), as those usually share its certificate authority.
  for (const auto& ca : m_settings.tls.ca_files) {
    if (std::find(tls.ca_files.begin(), tls.ca_files.end(), ca) == tls.ca_files.end()) {
      tls.ca_files.push_back(ca);
    }
  }
  std::lock_guard lock(m_mutex);
  m_other_tls.emplace(authority, tls);
  return tls;
}

Result<std::optional<Credential>> Client::credential_for(const std::vector<Scope>& scopes) {
  if (m_options.credential) {
    return m_options.credential;
  }
  std::string repository = scopes.empty() ? std::string() : scopes.front().repository;
  {
    std::lock_guard lock(m_mutex);
    if (auto it = m_credentials.find(repository); it != m_credentials.end()) {
      return it->second;
    }
  }
  oci::RegistryRef ref;
  ref.host = m_host;
  ref.repository = repository;
  LS_TRY_ASSIGN(std::optional<Credential> found, find_credential(m_options.auth, ref));
  std::lock_guard lock(m_mutex);
  m_credentials[repository] = found;
  return found;
}

Result<Client::Token> Client::fetch_token(const std::vector<Scope>& scopes) {
  std::string realm, service;
  {
    std::lock_guard lock(m_mutex);
    realm = m_realm;
    service = m_service;
  }
  LS_TRY_ASSIGN(std::optional<Credential> credential, credential_for(scopes));
  auto origin = origin_of(realm);
  if (!origin) {
    return external_error("registry {} sent a token realm that is not an http(s) URL: {}", m_host,
                          shown(realm));
  }
  // Credentials go over plain HTTP only to the registry itself, and only when it is configured
  // insecure; never to another host (or another port of the same one).
  if (credential && origin->scheme == "http" && !(m_settings.insecure && is_api_host(origin->authority))) {
    return external_error(
        "registry {} asks for credentials over plain HTTP ({}); refusing to send them{}", m_host,
        redact_url(realm),
        is_api_host(origin->authority)
            ? ". Mark the registry insecure in registries.conf if that is intended"
            : ": its token service is another host, and credentials go to other hosts over https only");
  }
  HttpRequest q;
  LS_TRY_ASSIGN(q.tls, tls_for(origin->authority));
  q.connect_timeout_s = m_options.connect_timeout_s;
  q.low_speed_timeout_s = m_options.stall_timeout_s;
  q.max_body = k_max_token_body;
  if (credential && credential->identity_token) {
    // OAuth2 refresh token (docs/auth/oauth.md of the distribution project).
    q.method = "POST";
    q.url = realm;
    q.headers.emplace_back("Content-Type: application/x-www-form-urlencoded");
    std::string scope_list;
    for (const Scope& s : scopes) {
      scope_list += (scope_list.empty() ? "" : " ") + s.str();
    }
    q.body = "grant_type=refresh_token&client_id=lockstep&service=" + percent_encode(service) +
             "&scope=" + percent_encode(scope_list) + "&refresh_token=" + percent_encode(credential->secret);
  } else {
    q.url = realm + (realm.find('?') == std::string::npos ? "?" : "&") + "service=" + percent_encode(service);
    for (const Scope& s : scopes) {
      q.url += "&scope=" + percent_encode(s.str());
    }
    if (credential) {
      q.headers.push_back("Authorization: Basic " +
                          base64_encode(credential->username + ":" + credential->secret));
    }
  }
  HttpSession& s = session();
  LS_TRY_ASSIGN(HttpResponse r, perform_retrying(s, q, m_options));
  if (r.status == 0) {
    return external_error("can't get a token for registry {} from {}: {}", m_host, redact_url(realm),
                          r.transport_error);
  }
  if (r.status == 401 || r.status == 403) {
    if (credential) {
      return external_error("registry {} refused the credentials from {}: run `lockstep login {}` with valid "
                            "ones",
                            m_host, credential->source, m_host);
    }
    return external_error("registry {} needs credentials for {}: run `lockstep login {}`", m_host,
                          scopes.empty() ? m_host : scopes.front().repository, m_host);
  }
  if (r.status < 200 || r.status >= 300) {
    return external_error("can't get a token for registry {} from {}: {}", m_host, redact_url(realm),
                          registry_message(r));
  }
  LS_TRY_ASSIGN(json body, parse_json(r.body, "the token answer of " + redact_url(realm)));
  Token token;
  for (const char* key : {"token", "access_token"}) {
    if (body.is_object() && body.contains(key) && body[key].is_string() &&
        !body[key].get<std::string>().empty()) {
      token.value = body[key].get<std::string>();
      break;
    }
  }
  if (token.value.empty() || token.value.find_first_of("\r\n ") != std::string::npos) {
    return external_error("registry {}: the token answer of {} holds no usable token", m_host,
                          redact_url(realm));
  }
  long expires_in = 60;
  if (body.contains("expires_in") && body["expires_in"].is_number_integer()) {
    expires_in = std::max<long>(1, body["expires_in"].get<long>());
  }
  // Renew a little early, so a token does not expire in flight.
  long margin = std::min<long>(10, expires_in / 2);
  token.expires = std::chrono::steady_clock::now() + std::chrono::seconds(expires_in - margin);
  return token;
}

Result<std::optional<std::string>> Client::authorization(const std::vector<Scope>& scopes, bool renew) {
  AuthKind kind;
  {
    std::lock_guard lock(m_mutex);
    kind = m_auth;
  }
  if (kind == AuthKind::basic) {
    LS_TRY_ASSIGN(std::optional<Credential> credential, credential_for(scopes));
    if (!credential) {
      return std::optional<std::string>();
    }
    return std::optional<std::string>("Basic " +
                                      base64_encode(credential->username + ":" + credential->secret));
  }
  if (kind != AuthKind::bearer) {
    return std::optional<std::string>();
  }
  const std::string key = scopes_key(scopes);
  {
    std::lock_guard lock(m_mutex);
    auto it = m_tokens.find(key);
    if (!renew && it != m_tokens.end() && std::chrono::steady_clock::now() < it->second.expires) {
      return std::optional<std::string>("Bearer " + it->second.value);
    }
  }
  LS_TRY_ASSIGN(Token token, fetch_token(scopes));
  std::lock_guard lock(m_mutex);
  m_tokens[key] = token;
  return std::optional<std::string>("Bearer " + token.value);
}

Result<HttpResponse> Client::request(ApiRequest req) {
  HttpSession& s = session();
  LS_TRY(ensure_scheme(s));
  const std::string start_url =
      req.path_or_url.find("://") == std::string::npos ? url(req.path_or_url) : req.path_or_url;
  const std::string what = req.what.empty() ? redact_url(start_url) : req.what;
  // The registry's own origin: its credentials go there and nowhere else, whatever URL a Location
  // (an upload session, a redirect) names.
  const auto api_origin = origin_of(url("/"));
  if (auto start = origin_of(start_url);
      start && api_origin && api_origin->scheme == "https" && start->scheme == "http") {
    return external_error("{}: registry {} sent the request to plain http ({}); refused", what, m_host,
                          shown(redact_url(start_url)));
  }
  bool renewed = false;
  long delay_ms = m_options.retry_delay_ms;
  const int retries = req.retries >= 0 ? req.retries : m_options.retries;
  for (int attempt = 0;; ++attempt) {
    LS_TRY(check_interrupted());
    LS_TRY_ASSIGN(std::optional<std::string> auth, authorization(req.scopes, false));
    if (renewed) {
      LS_TRY_ASSIGN(auth, authorization(req.scopes, true));
    }
    std::string target = start_url;
    std::uint64_t resume = attempt == 0 ? req.start_at : req.on_retry ? req.on_retry() : 0;
    HttpResponse response;
    bool failed_transport = false;
    for (int hop = 0;; ++hop) {
      auto origin = origin_of(target);
      if (!origin || (origin->scheme != "https" && origin->scheme != "http")) {
        return external_error("{}: the registry redirected to an unusable URL {}", what,
                              shown(redact_url(target)));
      }
      HttpRequest q;
      q.method = req.method;
      q.url = target;
      q.headers = req.headers;
      // Credentials go only to the registry's own origin, never to a redirect's other host.
      if (auth && api_origin && origin->authority == api_origin->authority &&
          origin->scheme == api_origin->scheme) {
        q.headers.push_back("Authorization: " + *auth);
      }
      if (resume > 0) {
        q.headers.push_back(fmt::format("Range: bytes={}-", resume));
      }
      q.body = req.body;
      q.file_body = req.file_body;
      q.max_body = req.max_body;
      q.sink = req.sink;
      if (resume > 0) {
        q.on_body_start = [&req, resume, &what](const HttpResponse& r) -> Result<void> {
          if (r.status == 200) {
            return req.on_restart ? req.on_restart() : Result<void>{};
          }
          std::string range = r.header("content-range").value_or("");
          if (r.status != 206 || !range.starts_with(fmt::format("bytes {}-", resume))) {
            return external_error("{}: asked to resume at byte {}, the registry answered {} {}", what, resume,
                                  r.status, shown(range));
          }
          return {};
        };
      }
      LS_TRY_ASSIGN(q.tls, tls_for(origin->authority));
      q.connect_timeout_s = m_options.connect_timeout_s;
      q.low_speed_timeout_s = m_options.stall_timeout_s;
      LS_TRY_ASSIGN(response, s.perform(q));
      if (response.status == 0) {
        failed_transport = true;
        break;
      }
      bool redirect = response.status == 301 || response.status == 302 || response.status == 303 ||
                      response.status == 307 || response.status == 308;
      if (!redirect || !req.follow_redirects) {
        break;
      }
      auto location = response.header("location");
      if (!location || location->empty()) {
        return external_error("{}: the registry answered {} without a Location", what, response.status);
      }
      if (hop + 1 >= k_max_redirects) {
        return external_error("{}: more than {} redirects (a redirect loop?)", what, k_max_redirects);
      }
      std::string next = resolve_location(target, *location);
      auto next_origin = origin_of(next);
      if (next_origin && origin->scheme == "https" && next_origin->scheme == "http") {
        return external_error("{}: the registry redirected from https to plain http ({}); refused", what,
                              shown(redact_url(next)));
      }
      log::debug("{}: redirected to {}", what, redact_url(next));
      target = next;
    }
    if (failed_transport) {
      if (response.tls_failure || attempt >= retries) {
        return external_error("{}: {}{}", what, response.transport_error,
                              attempt > 0 ? fmt::format(" (gave up after {} attempts)", attempt + 1) : "");
      }
      log::debug("{}: {}; trying again in {} ms", what, response.transport_error, delay_ms);
      backoff(delay_ms);
      delay_ms *= 2;
      continue;
    }
    const long status = response.status;
    if (status == 401 && std::find(req.expected.begin(), req.expected.end(), 401L) == req.expected.end()) {
      if (!renewed) {
        LS_TRY(learn_challenge(response));
        renewed = true;
        continue;
      }
      LS_TRY_ASSIGN(std::optional<Credential> credential, credential_for(req.scopes));
      std::string repo = req.scopes.empty() ? m_host : req.scopes.front().repository;
      if (credential) {
        return external_error("{}: registry {} refused access to {} with the credentials from {} ({}); check "
                              "them with `lockstep login {}`",
                              what, m_host, repo, credential->source, registry_message(response), m_host);
      }
      return external_error("{}: registry {} needs credentials for {} ({}): run `lockstep login {}`", what,
                            m_host, repo, registry_message(response), m_host);
    }
    if (retryable_status(status) &&
        std::find(req.expected.begin(), req.expected.end(), status) == req.expected.end()) {
      if (attempt >= retries) {
        return external_error("{}: registry {} answered {} (gave up after {} attempts)", what, m_host,
                              registry_message(response), attempt + 1);
      }
      long wait =
          std::max(delay_ms, std::min(retry_after_seconds(response), m_options.max_retry_after_s) * 1000);
      log::debug("{}: HTTP {}; trying again in {} ms", what, status, wait);
      backoff(wait);
      delay_ms *= 2;
      continue;
    }
    if ((status >= 200 && status < 300) ||
        std::find(req.expected.begin(), req.expected.end(), status) != req.expected.end()) {
      return response;
    }
    if (status == 403) {
      return external_error(
          "{}: registry {} denied access ({}); check your credentials with `lockstep login {}`", what, m_host,
          registry_message(response), m_host);
    }
    return external_error("{}: registry {} answered {}", what, m_host, registry_message(response));
  }
}

} // namespace lockstep::registry
