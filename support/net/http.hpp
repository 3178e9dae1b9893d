#pragma once
// Downloads over HTTP(S) with libcurl, and reads of file:// URLs, bounded and verified.
//
// libcurl (and its ~20 shared objects: TLS, HTTP/2, IDN, ...) is loaded with dlopen on the first
// download, so commands that never download (`lockstep exec`) don't pay for it at start-up. Its
// SONAME is fixed at build time (LOCKSTEP_LIBCURL_SONAME, CMakeLists.txt).
//
// URLs: http://, https://, file:// (file:///abs/path or file://localhost/abs/path, percent-encoded)
// and plain absolute paths (read as local files, only inside FetchOptions::local_roots: see there).
// Redirects: at most 5, and only to http(s).
// Failures are retried (connection errors, truncated bodies, HTTP 408/429/5xx) with a short
// exponential backoff; HTTP 404 and other 4xx are not. The proxy variables (http_proxy,
// https_proxy, no_proxy, ...) work as libcurl reads them.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/store/blob_store.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lockstep {

/// Limits and retry policy of one transfer.
struct FetchOptions {
  std::uint64_t max_size = 64ULL << 20; ///< a larger body aborts the transfer
  int retries = 3;                      ///< further attempts after a retryable failure
  long connect_timeout_s = 30;          ///< to establish the connection
  long low_speed_timeout_s = 60;        ///< abort when no byte arrived for this long
  long retry_delay_ms = 500;            ///< the first backoff; doubled on each further retry
  /// Extra HTTP request headers ("Accept: application/json"); not sent for file: URLs. Each must be
  /// one "Name: value" line without CR or LF.
  std::vector<std::string> headers;
  /// Where local files (file: URLs and absolute paths) may be read from: a local URL is read only
  /// when it leads, through symlinks, inside one of these directories, and is refused before it is
  /// opened otherwise (invalid_input; nothing is read or stored, so no size or sha256 of it is ever
  /// reported). Empty: no local file is read. Callers name the directories a spec or lock may reach
  /// (envspec::local_roots, or one local repository).
  std::vector<std::filesystem::path> local_roots;
  /// A conditional request (the caller's `headers` carry If-None-Match / If-Modified-Since): an
  /// HTTP 304 answer is then a FetchedBody with `not_modified` and no body, not an error.
  bool accept_not_modified = false;
  /// HTTP 404 and 410 (a file: URL that doesn't exist) are a FetchedBody with `not_found` and no
  /// body, not an error: for a caller that tries one name and then another (repodata.json.zst, then
  /// repodata.json).
  bool accept_not_found = false;
};

/// The local file `url` names: a plain absolute path as it is, a file:// URL percent-decoded (as
/// downloads read it); nullopt for http(s) URLs. A malformed or unsupported URL is invalid_input.
Result<std::optional<std::filesystem::path>> local_url_path(const std::string& url);

/// GETs `url` into memory (indexes, small files); local files only with `options.local_roots`. Errors name
/// the URL: a missing file is "URL: not found (HTTP 404)"; network and server failures are ExitCode::external
/// with curl's message; a body larger than `max_size` is ExitCode::invalid_input ("larger than N bytes").
Result<std::string> http_get(const std::string& url, std::uint64_t max_size);
/// http_get with explicit limits, retry policy and local roots.
Result<std::string> http_get(const std::string& url, const FetchOptions& options);

/// A body with the response headers an HTTP cache needs (RFC 9111); both empty for local files.
struct FetchedBody {
  std::string body;
  std::string cache_control;        ///< Cache-Control, several lines joined with ", "
  std::optional<std::uint64_t> age; ///< Age: seconds the response already spent in caches
  std::string etag;                 ///< ETag, as sent (quotes and W/ kept), "" if none
  std::string last_modified;        ///< Last-Modified, as sent, "" if none
  bool not_modified = false;        ///< HTTP 304 to a conditional request (FetchOptions::accept_not_modified)
  bool not_found = false; ///< HTTP 404 or 410, or no such local file (FetchOptions::accept_not_found)
};

/// http_get, with the caching headers of the final response.
Result<FetchedBody> http_get_response(const std::string& url, const FetchOptions& options);

/// One file to download into the blob store.
struct Download {
  std::string url;
  std::optional<Digest> sha256;      ///< when known (from a lock): verified, and the download is
                                     ///< skipped if the store already has the blob
  std::optional<std::uint64_t> size; ///< when known: the body must have exactly this many bytes
  std::string label;                 ///< names the file in messages ("ls-lib 2.0-1"); may be empty
  /// Other URLs of the same file, tried in order when the server says `url` is not there (404/410):
  /// a snapshot archive's copy of a pool file (docs/vendor.md). Same size and sha256 checks.
  std::vector<std::string> fallback_urls = {};
};

/// Downloads every file into `store`, several at once (up to 8 transfers), with one aggregated
/// progress line. A file whose sha256 is given and already stored is not downloaded. A body whose
/// size or sha256 differs from the expected one is ExitCode::invalid_input and nothing is
/// published for it. All downloads are attempted; if any failed, the error lists every failure in
/// input order (its code is the first failure's). Returns one BlobInfo per input, in input order.
Result<std::vector<BlobInfo>> fetch_all(const BlobStore& store, const std::vector<Download>& downloads,
                                        std::uint64_t max_size_each);
/// fetch_all with explicit limits, retry policy and local roots (`options.max_size` bounds each file).
Result<std::vector<BlobInfo>> fetch_all(const BlobStore& store, const std::vector<Download>& downloads,
                                        const FetchOptions& options);

} // namespace lockstep
