#pragma once
// One HTTP(S) exchange at a time over a kept-alive connection: the transport under the registry
// client (support/registry). Unlike http.hpp's downloads it neither follows redirects nor retries:
// the caller decides (a registry must not forward credentials to a redirect's host, and resumes a
// blob with Range). libcurl is loaded on first use (curl_lib.hpp).
#include "support/base/result.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep {

/// How a TLS peer is checked, and what this side presents.
struct TlsSettings {
  bool verify = true;                          ///< false: any certificate (and plain HTTP) is accepted
  std::vector<std::filesystem::path> ca_files; ///< trusted in addition to the system CAs
  std::filesystem::path client_cert;           ///< PEM; empty: none
  std::filesystem::path client_key;            ///< PEM, with client_cert
  friend bool operator==(const TlsSettings&, const TlsSettings&) = default;
};

/// A request body read from a file range (uploads of blobs stream from the store).
struct FileBody {
  int fd = -1;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct HttpResponse;

/// One request.
struct HttpRequest {
  std::string method = "GET"; ///< GET, HEAD, PUT, POST, PATCH, DELETE
  std::string url;
  /// "Name: value" lines without CR/LF. Sensitive ones (Authorization) are never logged.
  std::vector<std::string> headers;
  std::string body;                     ///< the body when `file_body` is not set
  std::optional<FileBody> file_body;    ///< the body, read from a file
  std::uint64_t max_body = 16ULL << 20; ///< a longer response body (kept in memory) fails the exchange
  /// When set, response bodies of 2xx answers go here instead of memory, in order; returning an
  /// error stops the transfer, and perform() returns that error.
  std::function<Result<void>(std::span<const char>)> sink;
  /// Called once a 2xx answer's headers are in, before its first body byte reaches `sink` (a
  /// resumed download checks the answer is the 206 it asked for); an error stops the transfer.
  std::function<Result<void>(const HttpResponse&)> on_body_start;
  long connect_timeout_s = 30;
  long low_speed_timeout_s = 60; ///< a response that sends nothing for this long fails (stalled)
  TlsSettings tls;
};

/// What came back. A transport failure (refused, reset, timed out, TLS) is not an error of perform():
/// `status` is 0 and `transport_error` says why, so the caller can retry or resume.
struct HttpResponse {
  long status = 0;
  std::vector<std::pair<std::string, std::string>> headers; ///< names lower-cased, in order
  std::string body;                                         ///< unless a sink took it
  std::uint64_t received = 0;                               ///< body bytes received (memory or sink)
  std::string transport_error;                              ///< empty when a response arrived whole
  bool tls_failure = false;                                 ///< the failure was a certificate or TLS one

  /// The first header `name` (lower case), if present.
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
  /// Every value of header `name` (lower case), in order.
  [[nodiscard]] std::vector<std::string> header_values(std::string_view name) const;
};

/// A connection (libcurl easy handle) reused across requests; not shared between threads.
class HttpSession {
public:
  HttpSession();
  ~HttpSession();
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  /// Performs `request`. Errors: a sink's error, a body over `max_body` (invalid_input), an
  /// interrupt, or a request lockstep could not set up (bad header, libcurl missing).
  Result<HttpResponse> perform(const HttpRequest& request);

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// `url` without userinfo and without the query string, for messages and logs.
std::string redact_url(std::string_view url);

} // namespace lockstep
