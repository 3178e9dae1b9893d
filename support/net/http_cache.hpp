#pragma once
// A private HTTP cache (RFC 9111) for documents such as package index pages and conda repodata, kept
// as records in the blob store: a response is reused without a request while it is fresh, that is
// while its age (its Age header plus the time since it was fetched) is below the Cache-Control
// max-age the server sent; once stale, or when the caller refreshes, a response that came with an
// ETag or Last-Modified is revalidated with a conditional request (If-None-Match,
// If-Modified-Since), and a 304 answer reuses it without sending the body again. A response with
// neither max-age nor a validator (or with no-store) is not kept. PyPI sends `max-age=600` on its
// simple pages, conda channels an ETag on repodata.json; pip, uv and conda reuse them the same way.
#include "support/base/result.hpp"
#include "support/net/http.hpp"
#include "support/store/blob_store.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep {

/// How long a response with `cache_control` stays fresh, in seconds; nullopt when it must not be
/// reused without asking the server (no max-age, max-age=0, no-cache, no-store).
std::optional<std::uint64_t> cache_lifetime(std::string_view cache_control);

/// How a cached read went.
enum class CacheUse {
  fetched,     ///< the body came from the server
  reused,      ///< a fresh copy, no request
  revalidated, ///< a kept copy the server confirmed (HTTP 304)
  not_found,   ///< HTTP 404/410 with FetchOptions::accept_not_found: the body is empty, nothing kept
};

/// A body from `url`: the store's fresh copy when there is one (and `refresh` is false), else the
/// kept copy when the server confirms it is current, else fetched; a response that may be reused
/// or revalidated is recorded with the time it was fetched.
/// `options.headers` (Accept) are part of the cache key. Local files are read, never cached.
/// A response worth keeping is handed to `writes` when given (else written at once).
Result<std::string> cached_get(const BlobStore& store, const std::string& url, const FetchOptions& options,
                               bool refresh, CacheUse* use = nullptr,
                               BlobStore::RecordQueue* writes = nullptr);

} // namespace lockstep
