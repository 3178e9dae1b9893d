// Downloads over HTTP(S) with a dlopen'ed libcurl, and reads of file:// URLs (see http.hpp).
#include "support/net/http.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/base/version.hpp"
#include "support/net/curl_lib.hpp"
#include "support/net/host_credentials.hpp"
#include "support/net/mirror.hpp"
#include "support/system/confine.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace lockstep {

namespace {

namespace fs = std::filesystem;
using curl::EasyHandle;
using curl::LibCurl;
using curl::libcurl;

constexpr long k_max_redirects = 5;
constexpr std::size_t k_max_parallel = 8;
// Bodies of redirect responses are dropped; a longer one is refused.
constexpr std::uint64_t k_max_redirect_body = 64 << 10;
// Longest wait a server's Retry-After may ask for.
constexpr long k_max_retry_after_s = 30;
constexpr std::size_t k_file_chunk = 1 << 20;
constexpr std::size_t k_max_cache_control = 4096; // bytes of Cache-Control kept from one response
constexpr std::size_t k_max_validator = 1024;     // bytes of an ETag or Last-Modified kept

// ---- URLs ----------------------------------------------------------------------------------------

// The URL without any "user:password@", for messages.
std::string display_url(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) {
    return url;
  }
  auto host_start = scheme + 3;
  auto at = url.find('@', host_start);
  auto end = url.find_first_of("/?#", host_start);
  if (at != std::string::npos && (end == std::string::npos || at < end)) {
    return url.substr(0, host_start) + url.substr(at + 1);
  }
  return url;
}

// "127.0.0.1:8000" of "http://u@127.0.0.1:8000/x" ("" when there is no host).
std::string url_host(const std::string& url) {
  const std::string shown = display_url(url);
  const auto scheme = shown.find("://");
  if (scheme == std::string::npos) {
    return {};
  }
  const auto start = scheme + 3;
  return shown.substr(start, shown.find_first_of("/?#", start) - start);
}

// What an HTTP 401 or 403 should tell: where lockstep takes credentials from.
std::string credentials_hint(long code, const std::string& url) {
  if (code != 401 && code != 403) {
    return {};
  }
  return fmt::format("; {} wants credentials: lockstep sends those of its entry in ~/.netrc (or the file "
                     "$NETRC names), as curl, pip and conda do, or in the credentials file pixi and rattler "
                     "keep ($RATTLER_AUTH_FILE, else ~/.rattler/credentials.json: a conda token, bearer "
                     "token or user and password per host; docs/conda.md, \"Channels\")",
                     url_host(url));
}

enum class Scheme { http, local };

struct ParsedUrl {
  Scheme scheme = Scheme::http;
  fs::path path; // for Scheme::local
};

Result<ParsedUrl> parse_url(const std::string& url) {
  const std::string shown = display_url(url);
  if (url.empty()) {
    return invalid_input("empty URL");
  }
  if (url.front() == '/') {
    return ParsedUrl{Scheme::local, fs::path(url)};
  }
  for (char c : url) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      return invalid_input("{}: URLs must not contain spaces or control characters (percent-encode them)",
                           shown);
    }
  }
  auto colon = url.find("://");
  std::string scheme = colon == std::string::npos ? std::string() : url.substr(0, colon);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); });
  if (scheme == "http" || scheme == "https") {
    return ParsedUrl{Scheme::http, {}};
  }
  if (scheme != "file") {
    return invalid_input("{}: unsupported URL (use http://, https://, file:// or an absolute path)", shown);
  }
  std::string rest = url.substr(colon + 3);
  auto slash = rest.find('/');
  std::string host = rest.substr(0, slash);
  if (slash == std::string::npos || (!host.empty() && host != "localhost")) {
    return invalid_input("{}: a file URL must name an absolute path on this machine (file:///PATH)", shown);
  }
  std::string path;
  for (std::size_t i = slash; i < rest.size(); ++i) {
    if (rest[i] == '?' || rest[i] == '#') {
      return invalid_input("{}: a file URL can't have a query or fragment", shown);
    }
    if (rest[i] != '%') {
      path += rest[i];
      continue;
    }
    int hi = i + 2 < rest.size() ? hex_value(rest[i + 1]) : -1;
    int lo = i + 2 < rest.size() ? hex_value(rest[i + 2]) : -1;
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
      return invalid_input("{}: bad percent-encoding in the file URL", shown);
    }
    path += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return ParsedUrl{Scheme::local, fs::path(path)};
}

// ---- Where a body goes ---------------------------------------------------------------------------

class Sink {
public:
  Sink() = default;
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;
  virtual ~Sink() = default;
  /// Drops what was written (before an attempt).
  virtual Result<void> reset() = 0;
  virtual Result<void> write(const char* data, std::size_t size) = 0;
};

class StringBodySink final : public Sink {
public:
  Result<void> reset() override {
    body.clear();
    return {};
  }
  Result<void> write(const char* data, std::size_t size) override {
    body.append(data, size);
    return {};
  }
  std::string body;
};

class BlobSink final : public Sink {
public:
  explicit BlobSink(const BlobStore& store) : m_store(store) {}
  Result<void> reset() override {
    m_writer.reset();
    LS_TRY_ASSIGN(auto w, m_store.begin_write());
    m_writer.emplace(std::move(w));
    m_hash = Sha256();
    return {};
  }
  Result<void> write(const char* data, std::size_t size) override {
    m_hash.update(data, size);
    return m_writer->write(data, size);
  }
  /// Checks the sha256 (when known) and publishes the blob.
  Result<BlobInfo> commit(const std::string& what, const std::optional<Digest>& expected) {
    Digest got = m_hash.finish();
    if (expected && got != *expected) {
      m_writer.reset(); // removes the temporary file
      return invalid_input("{} has {}, the lock says {}: the file was changed on the server or in transit; "
                           "nothing was stored. Lock again if the change is expected",
                           what, got.str(), expected->str());
    }
    auto info = m_writer->commit(got);
    m_writer.reset();
    return info;
  }

private:
  const BlobStore& m_store;
  std::optional<BlobStore::Writer> m_writer;
  Sha256 m_hash;
};

// ---- One transfer --------------------------------------------------------------------------------

struct Transfer {
  std::string url;
  std::string what; // "LABEL (URL)" or the URL, credentials removed
  std::uint64_t max_size = 0;
  std::optional<std::uint64_t> expected_size;
  Sink* sink = nullptr;
  log::Progress* progress = nullptr;

  // Per attempt:
  const LibCurl* curl = nullptr;
  CURL* handle = nullptr;
  std::uint64_t received = 0;
  std::uint64_t redirect_body = 0;
  std::optional<Error> write_error;
  std::optional<std::uint64_t> announced; // the response's Content-Length
  std::string cache_control;              // the response's Cache-Control ("" if none)
  std::optional<std::uint64_t> age;       // the response's Age, in seconds
  std::string etag;                       // the response's ETag ("" if none)
  std::string last_modified;              // the response's Last-Modified ("" if none)
  bool accept_not_modified = false;       // a 304 ends the transfer well (a conditional request)
  bool not_modified = false;              // ... and it came
  bool accept_not_found = false;          // a 404 or 410 (a missing local file) ends it well, not_found set
  std::optional<curl::StallWatch> stall;  // per attempt
  // Across attempts: bytes already counted in the progress line.
  std::uint64_t reported = 0;
  bool not_found = false; // the server answered 404 or 410

  // The most bytes the body may have.
  [[nodiscard]] std::uint64_t limit() const { return expected_size ? *expected_size : max_size; }

  Error too_large(std::optional<std::uint64_t> size) const {
    if (expected_size) {
      return invalid_input("{} has more than {} bytes, the lock says {}: the file was changed on the server "
                           "or in transit; nothing was stored",
                           what, *expected_size, *expected_size);
    }
    if (size) {
      return invalid_input("{} has {} bytes, larger than the {} bytes allowed; not downloaded", what, *size,
                           max_size);
    }
    return invalid_input("{} is larger than the {} bytes allowed; the download was stopped", what, max_size);
  }

  // Counts `n` more body bytes; returns an error when the body is too large.
  Result<void> count(std::size_t n) {
    if (n > limit() - received) {
      return too_large(std::nullopt);
    }
    received += n;
    if (progress != nullptr && received > reported) {
      progress->advance(received - reported);
      reported = received;
    }
    return {};
  }
};

std::size_t on_curl_write(char* data, std::size_t size, std::size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t n = size * nmemb;
  long code = 0;
  t->curl->curl_easy_getinfo(t->handle, CURLINFO_RESPONSE_CODE, &code);
  if (code >= 300 && code < 400) {
    // The body of a redirect that libcurl follows: not part of the file.
    t->redirect_body += n;
    if (t->redirect_body > k_max_redirect_body) {
      t->write_error = external_error("{}: the server sent a redirect with a body over {} bytes", t->what,
                                      k_max_redirect_body);
      return CURL_WRITEFUNC_ERROR;
    }
    return n;
  }
  if (auto r = t->count(n); !r) {
    const bool announced_too_large = t->announced && *t->announced > t->limit();
    t->write_error = announced_too_large ? t->too_large(t->announced) : std::move(r).error();
    return CURL_WRITEFUNC_ERROR;
  }
  if (auto r = t->sink->write(data, n); !r) {
    t->write_error = std::move(r).error();
    return CURL_WRITEFUNC_ERROR;
  }
  return n;
}

// The value of header `name` (lower case) in a header line, trimmed; nullopt if the line is another
// header.
std::optional<std::string_view> header_value(std::string_view line, std::string_view name) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || ascii_lower(trim(line.substr(0, colon))) != name) {
    return std::nullopt;
  }
  return trim(line.substr(colon + 1));
}

std::optional<std::uint64_t> header_number(std::string_view digits) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc() && end != digits.data()) {
    return value;
  }
  return std::nullopt;
}

// Notes the headers of the response being received: its Content-Length (libcurl does not report
// it when the length alone exceeds CURLOPT_MAXFILESIZE), Cache-Control and Age.
std::size_t on_curl_header(char* data, std::size_t size, std::size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t n = size * nmemb;
  std::string_view line(data, n);
  if (line.substr(0, 5) == "HTTP/") {
    t->announced.reset(); // a new response (after a redirect or a 100 Continue)
    t->cache_control.clear();
    t->age.reset();
    t->etag.clear();
    t->last_modified.clear();
    return n;
  }
  if (auto v = header_value(line, "content-length")) {
    t->announced = header_number(*v);
  } else if (auto cc = header_value(line, "cache-control")) {
    // Several Cache-Control lines form one list (bounded: a hostile server may send many).
    if (t->cache_control.size() + cc->size() <= k_max_cache_control) {
      t->cache_control += (t->cache_control.empty() ? "" : ", ") + std::string(*cc);
    }
  } else if (auto age = header_value(line, "age")) {
    t->age = header_number(*age);
  } else if (auto etag = header_value(line, "etag"); etag && etag->size() <= k_max_validator) {
    t->etag = std::string(*etag);
  } else if (auto lm = header_value(line, "last-modified"); lm && lm->size() <= k_max_validator) {
    t->last_modified = std::string(*lm);
  }
  return n;
}

int on_curl_progress(void* user, curl_off_t, curl_off_t down, curl_off_t, curl_off_t up) {
  auto* t = static_cast<Transfer*>(user);
  return interrupted() || t->stall->stalled(down, up) ? 1 : 0;
}

// What one attempt came to.
struct Attempt {
  enum class Outcome { ok, retry, fail } outcome = Outcome::ok;
  Error error;
  long retry_after_s = 0;
};

Attempt retry(Error e, long retry_after_s = 0) {
  return Attempt{Attempt::Outcome::retry, std::move(e), retry_after_s};
}
Attempt fail(Error e) {
  return Attempt{Attempt::Outcome::fail, std::move(e), 0};
}

bool retryable(CURLcode rc) {
  switch (rc) {
  case CURLE_COULDNT_RESOLVE_PROXY:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_CONNECT:
  case CURLE_OPERATION_TIMEDOUT:
  case CURLE_PARTIAL_FILE:
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
  case CURLE_HTTP3:
  case CURLE_QUIC_CONNECT_ERROR:
    return true;
  default:
    return false;
  }
}

// Sets the options of one transfer on a fresh (or reset) handle.
Result<void> configure(const LibCurl& curl, CURL* h, Transfer& t, const FetchOptions& options,
                       char* error_buffer, curl_slist*& headers) {
  static const std::string user_agent = std::string("lockstep/") + k_version;
  struct Option {
    CURLoption option;
    CURLcode rc;
  };
  std::vector<Option> results;
  auto set = [&](CURLoption option, auto value) {
    results.push_back({option, curl.curl_easy_setopt(h, option, value)});
  };
  // The credentials file's entry for the host (support/net/host_credentials.hpp): a conda token
  // goes into the request's path, a bearer token into a header, a user and password to curl.
  LS_TRY_ASSIGN(const std::optional<HostCredential> credential, credential_for_host(url_host(t.url)));
  if (credential && credential->kind == HostCredential::Kind::conda_token) {
    set(CURLOPT_URL, with_conda_token(t.url, credential->token).c_str());
  } else {
    set(CURLOPT_URL, t.url.c_str());
  }
  std::vector<std::string> extra_headers = options.headers;
  if (credential && credential->kind == HostCredential::Kind::bearer) {
    extra_headers.push_back("Authorization: Bearer " + credential->token);
  }
  if (credential && credential->kind == HostCredential::Kind::basic) {
    set(CURLOPT_USERNAME, credential->username.c_str());
    set(CURLOPT_PASSWORD, credential->password.c_str());
  }
  set(CURLOPT_PROTOCOLS_STR, "http,https");
  set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  set(CURLOPT_FOLLOWLOCATION, 1L);
  set(CURLOPT_MAXREDIRS, k_max_redirects);
  set(CURLOPT_FAILONERROR, 1L);
  set(CURLOPT_USERAGENT, user_agent.c_str());
  // Credentials as curl --netrc-optional, pip and conda take them: the entry of $NETRC (else
  // ~/.netrc) for the host of each request, redirects included, and for no other host.
  set(CURLOPT_NETRC, static_cast<long>(CURL_NETRC_OPTIONAL));
  if (const char* netrc = std::getenv("NETRC"); netrc != nullptr && *netrc != '\0') {
    set(CURLOPT_NETRC_FILE, netrc);
  }
  set(CURLOPT_NOSIGNAL, 1L);
  set(CURLOPT_TCP_KEEPALIVE, 1L);
  set(CURLOPT_CONNECTTIMEOUT, options.connect_timeout_s);
  set(CURLOPT_LOW_SPEED_LIMIT, 1L);
  set(CURLOPT_LOW_SPEED_TIME, options.low_speed_timeout_s);
  set(CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(std::min<std::uint64_t>(t.limit(), INT64_MAX)));
  set(CURLOPT_ERRORBUFFER, error_buffer);
  set(CURLOPT_WRITEFUNCTION, &on_curl_write);
  set(CURLOPT_WRITEDATA, static_cast<void*>(&t));
  set(CURLOPT_HEADERFUNCTION, &on_curl_header);
  set(CURLOPT_HEADERDATA, static_cast<void*>(&t));
  t.stall.emplace(options.low_speed_timeout_s);
  set(CURLOPT_XFERINFOFUNCTION, &on_curl_progress);
  set(CURLOPT_XFERINFODATA, static_cast<void*>(&t));
  set(CURLOPT_NOPROGRESS, 0L);
  for (const std::string& header : extra_headers) {
    if (header.find_first_of("\r\n") != std::string::npos || header.find(':') == std::string::npos) {
      return internal_error("bad request header for {}", t.what);
    }
    curl_slist* more = curl.curl_slist_append(headers, header.c_str());
    if (more == nullptr) {
      return external_error("can't set up the download of {}: curl_slist_append failed", t.what);
    }
    headers = more;
  }
  if (headers != nullptr) {
    set(CURLOPT_HTTPHEADER, headers);
  }
  for (const Option& o : results) {
    if (o.rc != CURLE_OK) {
      return external_error("can't set up the download of {}: libcurl refused option {} ({}); lockstep needs "
                            "libcurl 7.85 or later",
                            t.what, static_cast<int>(o.option), curl.curl_easy_strerror(o.rc));
    }
  }
  return {};
}

Attempt attempt_http(EasyHandle& easy, Transfer& t, const FetchOptions& options) {
  auto loaded = libcurl();
  if (!loaded) {
    return fail(std::move(loaded).error());
  }
  const LibCurl& curl = **loaded;
  if (easy.handle == nullptr) {
    easy.curl = &curl;
    easy.handle = curl.curl_easy_init();
    if (easy.handle == nullptr) {
      return fail(external_error("can't download {}: curl_easy_init failed", t.what));
    }
  } else {
    curl.curl_easy_reset(easy.handle);
    easy.free_headers();
  }
  t.curl = &curl;
  t.handle = easy.handle;
  easy.error[0] = '\0';
  if (auto r = configure(curl, easy.handle, t, options, easy.error, easy.headers); !r) {
    return fail(std::move(r).error());
  }
  const CURLcode rc = curl.curl_easy_perform(easy.handle);
  long code = 0;
  curl.curl_easy_getinfo(easy.handle, CURLINFO_RESPONSE_CODE, &code);
  long redirects = 0;
  curl.curl_easy_getinfo(easy.handle, CURLINFO_REDIRECT_COUNT, &redirects);
  if (rc == CURLE_OK) {
    if (code == 304 && t.accept_not_modified) {
      t.not_modified = true;
      return {};
    }
    if (code < 200 || code >= 300) {
      return fail(external_error("can't download {}: the server answered HTTP {}{}", t.what, code,
                                 credentials_hint(code, t.url)));
    }
    if (redirects > 0) {
      char* final_url = nullptr;
      curl.curl_easy_getinfo(easy.handle, CURLINFO_EFFECTIVE_URL, &final_url);
      log::debug("{} was redirected to {}", t.what, final_url != nullptr ? display_url(final_url) : "?");
    }
    return {};
  }
  if (t.write_error) {
    return fail(std::move(*t.write_error));
  }
  if (rc == CURLE_ABORTED_BY_CALLBACK && interrupted()) {
    return fail(Error{ExitCode::interrupted, "interrupted; nothing was published"});
  }
  if (rc == CURLE_HTTP_RETURNED_ERROR) {
    if (code == 404 || code == 410) {
      t.not_found = true;
      if (t.accept_not_found) {
        return {};
      }
      return fail(external_error("can't download {}: not found (HTTP {})", t.what, code));
    }
    Error e = external_error("can't download {}: the server answered HTTP {}{}", t.what, code,
                             credentials_hint(code, t.url));
    if (code == 408 || code == 429 || code >= 500) {
      curl_off_t after = 0;
      curl.curl_easy_getinfo(easy.handle, CURLINFO_RETRY_AFTER, &after);
      return retry(std::move(e), static_cast<long>(std::clamp<curl_off_t>(after, 0, k_max_retry_after_s)));
    }
    return fail(std::move(e));
  }
  if (rc == CURLE_FILESIZE_EXCEEDED) {
    return fail(t.too_large(t.announced));
  }
  const bool stalled = rc == CURLE_ABORTED_BY_CALLBACK && t.stall->fired();
  std::string message = stalled                 ? t.stall->message()
                        : easy.error[0] != '\0' ? easy.error
                                                : curl.curl_easy_strerror(rc);
  if (rc == CURLE_UNSUPPORTED_PROTOCOL && redirects > 0) {
    return fail(external_error("can't download {}: the server redirected to a URL that is not http or https, "
                               "which lockstep does not follow ({})",
                               t.what, message));
  }
  if (rc == CURLE_TOO_MANY_REDIRECTS) {
    return fail(external_error("can't download {}: more than {} redirects", t.what, k_max_redirects));
  }
  Error e = stalled ? external_error("can't download {}: {}", t.what, message)
                    : external_error("can't download {}: {} (curl error {})", t.what, message,
                                     static_cast<int>(rc));
  return stalled || retryable(rc) ? retry(std::move(e)) : fail(std::move(e));
}

Attempt attempt_local(const fs::path& path, Transfer& t) {
  // O_NONBLOCK: opening a FIFO must not hang; regular files ignore it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) {
      t.not_found = true;
      if (t.accept_not_found) {
        return {};
      }
      return fail(io_error("can't read {}: not found", t.what));
    }
    return fail(errno_error("can't read " + t.what, errno));
  }
  UniqueFd file(fd);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) {
    return fail(errno_error("can't stat " + t.what, errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(invalid_input("{} is not a regular file", t.what));
  }
  if (static_cast<std::uint64_t>(st.st_size) > t.limit()) {
    return fail(t.too_large(static_cast<std::uint64_t>(st.st_size)));
  }
  std::vector<char> buf(k_file_chunk);
  while (true) {
    if (interrupted()) {
      return fail(Error{ExitCode::interrupted, "interrupted; nothing was published"});
    }
    auto n = read_some(file.get(), buf.data(), buf.size(), t.what);
    if (!n) {
      return fail(std::move(n).error());
    }
    if (*n == 0) {
      return {};
    }
    if (auto r = t.count(*n); !r) {
      return fail(std::move(r).error());
    }
    if (auto r = t.sink->write(buf.data(), *n); !r) {
      return fail(std::move(r).error());
    }
  }
}

// The path to read for a local URL: where `path` leads through symlinks, when that is inside one of
// the caller's roots. Judged before anything is opened (support/system/confine.hpp).
Result<fs::path> confined_local_path(const fs::path& path, const Transfer& t, const FetchOptions& options) {
  if (options.local_roots.empty()) {
    return invalid_input("{}: local files are not read here; nothing was read", t.what);
  }
  LS_TRY_ASSIGN(Confinement c, confine_path(path, options.local_roots));
  if (!c.inside()) {
    std::string roots;
    for (const fs::path& r : options.local_roots) {
      roots += (roots.empty() ? "" : ", ") + r.string();
    }
    return invalid_input("{}: {} leads outside the directories local files may be read from ({}); nothing "
                         "was read",
                         t.what, path.string(), roots);
  }
  return c.real;
}

// Waits `ms` milliseconds, waking early on an interrupt.
void backoff(long ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!interrupted() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<long>(ms, 50)));
  }
}

// Runs one transfer with retries; the body ends up in t.sink.
Result<void> run_transfer(EasyHandle& easy, Transfer& t, const FetchOptions& options) {
  LS_TRY_ASSIGN(ParsedUrl parsed, parse_url(t.url));
  if (parsed.scheme == Scheme::local) {
    LS_TRY_ASSIGN(parsed.path, confined_local_path(parsed.path, t, options));
  }
  if (t.expected_size && *t.expected_size > t.max_size) {
    return invalid_input(
        "{}: the lock says it has {} bytes, more than the limit of {} bytes for one download", t.what,
        *t.expected_size, t.max_size);
  }
  long delay_ms = options.retry_delay_ms;
  const int attempts = 1 + std::max(options.retries, 0);
  for (int i = 1;; ++i) {
    LS_TRY(check_interrupted());
    LS_TRY(t.sink->reset());
    t.received = 0;
    t.redirect_body = 0;
    t.write_error.reset();
    t.announced.reset();
    Attempt a =
        parsed.scheme == Scheme::local ? attempt_local(parsed.path, t) : attempt_http(easy, t, options);
    if (a.outcome == Attempt::Outcome::ok) {
      if (t.expected_size && t.received != *t.expected_size) {
        return invalid_input("{} has {} bytes, the lock says {}: the file was changed on the server or in "
                             "transit; nothing was stored",
                             t.what, t.received, *t.expected_size);
      }
      return {};
    }
    if (a.outcome == Attempt::Outcome::fail) {
      return std::move(a.error);
    }
    if (i >= attempts) {
      Error e = std::move(a.error);
      if (attempts > 1) {
        e.message += fmt::format(" (gave up after {} attempts)", attempts);
      }
      return e;
    }
    long wait_ms = std::max(delay_ms, a.retry_after_s * 1000);
    log::debug("{}; trying again in {} ms", a.error.message, wait_ms);
    backoff(wait_ms);
    delay_ms *= 2;
  }
}

std::string describe(const Download& d) {
  std::string url = display_url(d.url);
  return d.label.empty() ? url : d.label + " (" + url + ")";
}

} // namespace

Result<std::optional<fs::path>> local_url_path(const std::string& url) {
  LS_TRY_ASSIGN(ParsedUrl parsed, parse_url(url));
  if (parsed.scheme == Scheme::local) {
    return std::optional<fs::path>(parsed.path);
  }
  return std::optional<fs::path>();
}

Result<std::string> http_get(const std::string& url, std::uint64_t max_size) {
  FetchOptions options;
  options.max_size = max_size;
  return http_get(url, options);
}

Result<std::string> http_get(const std::string& url, const FetchOptions& options) {
  LS_TRY_ASSIGN(FetchedBody response, http_get_response(url, options));
  return std::move(response.body);
}

Result<FetchedBody> http_get_response(const std::string& url, const FetchOptions& options) {
  StringBodySink sink;
  Transfer t;
  t.url = url;
  t.what = display_url(url);
  t.max_size = options.max_size;
  t.sink = &sink;
  t.accept_not_modified = options.accept_not_modified;
  t.accept_not_found = options.accept_not_found;
  EasyHandle easy;
  LS_TRY(run_transfer(easy, t, options));
  FetchedBody out;
  out.body = std::move(sink.body);
  out.cache_control = std::move(t.cache_control);
  out.age = t.age;
  out.etag = std::move(t.etag);
  out.last_modified = std::move(t.last_modified);
  out.not_modified = t.not_modified;
  out.not_found = t.not_found;
  if (out.not_found) {
    out.body.clear(); // the server's error page
  }
  return out;
}

Result<std::vector<BlobInfo>> fetch_all(const BlobStore& store, const std::vector<Download>& downloads,
                                        std::uint64_t max_size_each) {
  FetchOptions options;
  options.max_size = max_size_each;
  return fetch_all(store, downloads, options);
}

Result<std::vector<BlobInfo>> fetch_all(const BlobStore& store, const std::vector<Download>& downloads,
                                        const FetchOptions& options) {
  const std::size_t n = downloads.size();
  std::vector<std::optional<BlobInfo>> results(n);
  std::vector<std::optional<Error>> errors(n);

  // What is already stored needs no download; a digest listed twice is downloaded once.
  std::vector<std::size_t> todo;
  std::map<Digest, std::size_t> first_with_digest;
  std::vector<std::pair<std::size_t, std::size_t>> duplicates; // (index, index it copies)
  std::uint64_t total = 0;
  bool total_known = true;
  for (std::size_t i = 0; i < n; ++i) {
    const Download& d = downloads[i];
    if (d.sha256) {
      auto size = d.size ? std::optional<std::int64_t>(static_cast<std::int64_t>(*d.size)) : std::nullopt;
      if (store.has(*d.sha256, size)) {
        std::error_code ec;
        auto stored = fs::file_size(store.blob_path(*d.sha256), ec);
        if (!ec) {
          results[i] = BlobInfo{*d.sha256, static_cast<std::int64_t>(stored)};
          continue;
        }
      }
      auto [it, inserted] = first_with_digest.emplace(*d.sha256, i);
      if (!inserted) {
        duplicates.emplace_back(i, it->second);
        continue;
      }
    }
    todo.push_back(i);
    total += d.size.value_or(0);
    total_known = total_known && d.size.has_value();
  }

  if (!todo.empty()) {
    log::Progress progress(todo.size() == 1 ? "downloading " + describe(downloads[todo[0]])
                                            : fmt::format("downloading {} files", todo.size()),
                           total_known ? total : 0);
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      EasyHandle easy;
      for (std::size_t k = next++; k < todo.size(); k = next++) {
        const std::size_t i = todo[k];
        const Download& d = downloads[i];
        try {
          // The mirrors first (a vendor directory, a registry), upstream only for what none holds.
          const MirrorSet& mirrors = default_mirrors();
          if (d.sha256 && !mirrors.mirrors.empty()) {
            auto mirrored = mirrors.fetch(*d.sha256, d.size, store);
            if (!mirrored) {
              errors[i] = std::move(mirrored).error();
              continue;
            }
            if (*mirrored) {
              std::error_code ec;
              const auto stored = fs::file_size(store.blob_path(*d.sha256), ec);
              results[i] = BlobInfo{*d.sha256, ec ? static_cast<std::int64_t>(d.size.value_or(0))
                                                  : static_cast<std::int64_t>(stored)};
              continue;
            }
          }
          if (mirrors.offline) {
            errors[i] = Error{ExitCode::check_failed,
                              fmt::format("offline: {} ({}) is in no mirror ({}); vendor the lock into one "
                                          "(`lockstep vendor`) or build online",
                                          describe(d), d.sha256 ? d.sha256->str() : std::string("no sha256"),
                                          mirrors.names())};
            continue;
          }
          // The file's URL, then each fallback in turn while the server says it has no such file
          // (a pool file a mirror dropped, found in a snapshot archive).
          std::optional<BlobSink> sink;
          Result<void> fetched = internal_error("no download attempted");
          std::string what;
          for (std::size_t u = 0; u <= d.fallback_urls.size(); ++u) {
            Transfer t;
            t.url = u == 0 ? d.url : d.fallback_urls[u - 1];
            t.what = u == 0 ? describe(d) : describe(Download{t.url, d.sha256, d.size, d.label, {}});
            t.max_size = options.max_size;
            t.expected_size = d.size;
            sink.emplace(store);
            t.sink = &*sink;
            t.progress = &progress;
            auto attempt = run_transfer(easy, t, options);
            what = t.what;
            if (attempt || !t.not_found || u == d.fallback_urls.size()) {
              if (!attempt && u > 0) {
                Error e = std::move(attempt).error();
                e.message = fmt::format("{} (and not at {})", e.message, display_url(d.url));
                attempt = e;
              }
              fetched = std::move(attempt);
              break;
            }
            log::info("{} is gone from {}; trying {}", d.label.empty() ? display_url(d.url) : d.label,
                      display_url(d.url), display_url(d.fallback_urls[u]));
          }
          if (!fetched) {
            errors[i] = std::move(fetched).error();
            continue;
          }
          auto info = sink->commit(what, d.sha256);
          if (!info) {
            errors[i] = std::move(info).error();
            continue;
          }
          log::debug("downloaded {}: {} ({} bytes)", what, info->digest.str(), info->size);
          results[i] = *info;
        } catch (const std::exception& e) {
          errors[i] = internal_error("downloading {}: {}", describe(d), e.what());
        }
      }
    };
    const std::size_t threads = std::min(todo.size(), k_max_parallel);
    std::vector<std::thread> pool;
    for (std::size_t k = 1; k < threads; ++k) {
      pool.emplace_back(worker);
    }
    worker();
    for (std::thread& th : pool) {
      th.join();
    }
    progress.done();
  }
  LS_TRY(check_interrupted());

  // Every failure, in input order.
  if (auto failed = combine_errors(errors, "downloads")) {
    return *failed;
  }
  for (auto [i, source] : duplicates) {
    results[i] = results[source];
  }
  std::vector<BlobInfo> out;
  out.reserve(n);
  for (auto& r : results) {
    out.push_back(*r);
  }
  return out;
}

} // namespace lockstep
