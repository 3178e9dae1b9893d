// One HTTP exchange at a time over a kept-alive libcurl handle (see http_session.hpp).
#include "support/net/http_session.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/text.hpp"
#include "support/base/version.hpp"
#include "support/net/curl_lib.hpp"
#include "support/system/fs.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>

namespace lockstep {

namespace {

// Bodies kept for error answers (4xx/5xx) are cut here: only the start is ever shown.
constexpr std::uint64_t k_max_error_body = 64 << 10;
// Uploads are read in pieces this large (libcurl's default, 64 KiB, costs many small reads).
constexpr long k_upload_buffer = 2L << 20;
constexpr std::string_view k_system_bundle = "/etc/ssl/certs/ca-certificates.crt";

bool tls_code(CURLcode rc) {
  switch (rc) {
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_SSL_INVALIDCERTSTATUS:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_SSL_ENGINE_INITFAILED:
  case CURLE_SSL_ENGINE_NOTFOUND:
  case CURLE_SSL_ENGINE_SETFAILED:
  case CURLE_SSL_SHUTDOWN_FAILED:
  case CURLE_USE_SSL_FAILED:
    return true;
  default:
    return false;
  }
}

// The state of one exchange, seen by libcurl's callbacks.
struct Exchange {
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  std::optional<Error> error;    // a sink's or the size check's, stops the transfer
  std::uint64_t read_offset = 0; // of the request body
  bool body_started = false;
  std::optional<curl::StallWatch> stall;
};

long status_of(const curl::LibCurl& c, CURL* h) {
  long code = 0;
  c.curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  return code;
}

std::size_t on_header(char* data, std::size_t size, std::size_t nmemb, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const std::size_t n = size * nmemb;
  std::string_view line(data, n);
  if (line.starts_with("HTTP/")) {
    // A new response (after 100 Continue): only the last one's headers count. Its status is needed
    // by on_write before libcurl reports it.
    x->response->headers.clear();
    std::size_t sp = line.find(' ');
    x->response->status = sp == std::string_view::npos
                              ? 0
                              : std::strtol(std::string(line.substr(sp + 1, 3)).c_str(), nullptr, 10);
    return n;
  }
  std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) {
    return n;
  }
  x->response->headers.emplace_back(ascii_lower(trim(line.substr(0, colon))),
                                    std::string(trim(line.substr(colon + 1))));
  return n;
}

// Body bytes: into the sink for a 2xx answer that has one, else into memory, bounded.
std::size_t on_write(char* data, std::size_t size, std::size_t nmemb, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const std::size_t n = size * nmemb;
  HttpResponse& r = *x->response;
  const HttpRequest& q = *x->request;
  long status = r.status;
  if (status == 0) {
    return CURL_WRITEFUNC_ERROR;
  }
  r.received += n;
  if (q.sink && status >= 200 && status < 300) {
    if (!x->body_started) {
      x->body_started = true;
      if (q.on_body_start) {
        if (auto ok = q.on_body_start(r); !ok) {
          x->error = std::move(ok).error();
          return CURL_WRITEFUNC_ERROR;
        }
      }
    }
    if (auto ok = q.sink(std::span<const char>(data, n)); !ok) {
      x->error = std::move(ok).error();
      return CURL_WRITEFUNC_ERROR;
    }
    return n;
  }
  const std::uint64_t cap = status >= 400 ? k_max_error_body : q.max_body;
  if (r.body.size() + n > cap) {
    if (status >= 400) {
      return n; // the start of an error body is enough to show
    }
    x->error = invalid_input("{}: the response is larger than the {} bytes allowed", redact_url(q.url), cap);
    return CURL_WRITEFUNC_ERROR;
  }
  r.body.append(data, n);
  return n;
}

std::size_t on_read(char* buffer, std::size_t size, std::size_t nitems, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const HttpRequest& q = *x->request;
  const std::size_t room = size * nitems;
  if (q.file_body) {
    const FileBody& f = *q.file_body;
    std::uint64_t left = f.length - x->read_offset;
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, room));
    if (want == 0) {
      return 0;
    }
    ssize_t got = ::pread(f.fd, buffer, want, static_cast<off_t>(f.offset + x->read_offset));
    if (got <= 0) {
      x->error = errno_error("can't read the body of " + redact_url(q.url), got < 0 ? errno : EIO);
      return CURL_READFUNC_ABORT;
    }
    x->read_offset += static_cast<std::uint64_t>(got);
    return static_cast<std::size_t>(got);
  }
  std::size_t want = std::min<std::size_t>(q.body.size() - x->read_offset, room);
  std::copy_n(q.body.data() + x->read_offset, want, buffer);
  x->read_offset += want;
  return want;
}

int on_progress(void* user, curl_off_t, curl_off_t down, curl_off_t, curl_off_t up) {
  auto* x = static_cast<Exchange*>(user);
  return interrupted() || x->stall->stalled(down, up) ? 1 : 0;
}

// The system CA bundle followed by `extra`, as PEM, for CURLOPT_CAINFO_BLOB (libcurl's CAINFO would
// replace the system CAs; certs.d adds to them).
Result<std::string> ca_bundle(const std::vector<std::filesystem::path>& extra) {
  std::string pem;
  const char* env = std::getenv("SSL_CERT_FILE");
  std::filesystem::path system = env != nullptr && *env != '\0' ? env : std::string(k_system_bundle);
  if (auto bytes = read_file(system); bytes) {
    pem = std::move(*bytes);
  }
  for (const auto& file : extra) {
    LS_TRY_ASSIGN(std::string bytes, read_file(file));
    pem += "\n" + bytes;
  }
  return pem;
}

} // namespace

std::optional<std::string> HttpResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) {
      return value;
    }
  }
  return std::nullopt;
}

std::vector<std::string> HttpResponse::header_values(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [key, value] : headers) {
    if (key == name) {
      out.push_back(value);
    }
  }
  return out;
}

std::string redact_url(std::string_view url) {
  std::string out(url.substr(0, url.find_first_of("?#")));
  auto scheme = out.find("://");
  if (scheme == std::string::npos) {
    return out;
  }
  auto host_start = scheme + 3;
  auto at = out.find('@', host_start);
  auto end = out.find('/', host_start);
  if (at != std::string::npos && (end == std::string::npos || at < end)) {
    out.erase(host_start, at + 1 - host_start);
  }
  return out;
}

struct HttpSession::Impl {
  curl::EasyHandle easy;
  std::map<std::vector<std::filesystem::path>, std::string> bundles; // CA bundles by extra CA files
};

HttpSession::HttpSession() : m_impl(std::make_unique<Impl>()) {
}
HttpSession::~HttpSession() = default;

Result<HttpResponse> HttpSession::perform(const HttpRequest& request) {
  LS_TRY_ASSIGN(const curl::LibCurl* lib, curl::libcurl());
  curl::EasyHandle& easy = m_impl->easy;
  if (easy.handle == nullptr) {
    easy.curl = lib;
    easy.handle = lib->curl_easy_init();
    if (easy.handle == nullptr) {
      return external_error("can't start an HTTP transfer: curl_easy_init failed");
    }
  } else {
    lib->curl_easy_reset(easy.handle); // keeps the connection cache
  }
  easy.free_headers();
  CURL* h = easy.handle;
  const std::string shown = redact_url(request.url);

  HttpResponse response;
  Exchange x;
  x.request = &request;
  x.response = &response;
  x.stall.emplace(request.low_speed_timeout_s);

  static const std::string user_agent = std::string("lockstep/") + k_version;
  std::vector<std::pair<CURLoption, CURLcode>> results;
  auto set = [&](CURLoption option, auto value) {
    results.emplace_back(option, lib->curl_easy_setopt(h, option, value));
  };
  set(CURLOPT_URL, request.url.c_str());
  set(CURLOPT_PROTOCOLS_STR, "http,https");
  set(CURLOPT_FOLLOWLOCATION, 0L);
  set(CURLOPT_USERAGENT, user_agent.c_str());
  set(CURLOPT_NOSIGNAL, 1L);
  set(CURLOPT_TCP_KEEPALIVE, 1L);
  set(CURLOPT_CONNECTTIMEOUT, request.connect_timeout_s);
  set(CURLOPT_LOW_SPEED_LIMIT, 1L);
  set(CURLOPT_LOW_SPEED_TIME, request.low_speed_timeout_s);
  set(CURLOPT_ERRORBUFFER, easy.error);
  set(CURLOPT_HEADERFUNCTION, &on_header);
  set(CURLOPT_HEADERDATA, static_cast<void*>(&x));
  set(CURLOPT_WRITEFUNCTION, &on_write);
  set(CURLOPT_WRITEDATA, static_cast<void*>(&x));
  set(CURLOPT_XFERINFOFUNCTION, &on_progress);
  set(CURLOPT_XFERINFODATA, static_cast<void*>(&x));
  set(CURLOPT_NOPROGRESS, 0L);
  if (request.method == "HEAD") {
    set(CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT" || request.method == "POST" || request.method == "PATCH") {
    const std::uint64_t length = request.file_body ? request.file_body->length : request.body.size();
    set(CURLOPT_UPLOAD, 1L);
    set(CURLOPT_READFUNCTION, &on_read);
    set(CURLOPT_READDATA, static_cast<void*>(&x));
    set(CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(length));
    set(CURLOPT_UPLOAD_BUFFERSIZE, k_upload_buffer);
    set(CURLOPT_CUSTOMREQUEST, request.method.c_str());
  } else if (request.method != "GET") {
    set(CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  if (!request.tls.verify) {
    set(CURLOPT_SSL_VERIFYPEER, 0L);
    set(CURLOPT_SSL_VERIFYHOST, 0L);
  } else if (!request.tls.ca_files.empty()) {
    auto it = m_impl->bundles.find(request.tls.ca_files);
    if (it == m_impl->bundles.end()) {
      LS_TRY_ASSIGN(std::string pem, ca_bundle(request.tls.ca_files));
      it = m_impl->bundles.emplace(request.tls.ca_files, std::move(pem)).first;
    }
    curl_blob blob{it->second.data(), it->second.size(), CURL_BLOB_NOCOPY};
    set(CURLOPT_CAINFO_BLOB, &blob);
  }
  if (!request.tls.client_cert.empty()) {
    set(CURLOPT_SSLCERT, request.tls.client_cert.c_str());
    set(CURLOPT_SSLKEY, request.tls.client_key.c_str());
  }
  // No "Expect: 100-continue" round trip before uploads.
  std::vector<std::string> headers = request.headers;
  headers.emplace_back("Expect:");
  for (const std::string& header : headers) {
    if (header.find_first_of("\r\n") != std::string::npos || header.find(':') == std::string::npos) {
      return internal_error("bad request header for {}", shown);
    }
    curl_slist* more = lib->curl_slist_append(easy.headers, header.c_str());
    if (more == nullptr) {
      return external_error("can't set up the request to {}: curl_slist_append failed", shown);
    }
    easy.headers = more;
  }
  set(CURLOPT_HTTPHEADER, easy.headers);
  for (const auto& [option, rc] : results) {
    if (rc != CURLE_OK) {
      return external_error("can't set up the request to {}: libcurl refused option {} ({}); lockstep needs "
                            "libcurl 7.85 or later",
                            shown, static_cast<int>(option), lib->curl_easy_strerror(rc));
    }
  }
  easy.error[0] = '\0';
  CURLcode rc = lib->curl_easy_perform(h);
  if (x.error) {
    return std::move(*x.error);
  }
  if (interrupted()) {
    return Error{ExitCode::interrupted, "interrupted; nothing was published"};
  }
  if (rc != CURLE_OK) {
    response.transport_error = rc == CURLE_ABORTED_BY_CALLBACK && x.stall->fired() ? x.stall->message()
                               : easy.error[0] != '\0'                             ? std::string(easy.error)
                                                       : lib->curl_easy_strerror(rc);
    response.tls_failure = tls_code(rc);
    response.status = 0;
    return response;
  }
  response.status = status_of(*lib, h);
  return response;
}

} // namespace lockstep
