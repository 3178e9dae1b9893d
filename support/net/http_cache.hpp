#pragma once
// A private HTTP cache (RFC 9111) for small documents such as package index pages, kept as records
// in the blob store: a response is reused without a request while it is fresh, that is while its
// age (its Age header plus the time since it was fetched) is below the Cache-Control max-age the
// server sent. Responses without max-age, or with no-store or no-cache, are not reused. PyPI sends
// `max-age=600` on its simple pages; pip and uv reuse them the same way.
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
enum class CacheUse { fetched, reused };

/// A body from `url`: the store's fresh copy when there is one (and `refresh` is false), else
/// fetched and, when the response may be reused, recorded with the time it was fetched.
/// `options.headers` (Accept) are part of the cache key. Local files are read, never cached.
/// A response worth keeping is handed to `writes` when given (else written at once).
Result<std::string> cached_get(const BlobStore& store, const std::string& url, const FetchOptions& options,
                               bool refresh, CacheUse* use = nullptr,
                               BlobStore::RecordQueue* writes = nullptr);

} // namespace lockstep
