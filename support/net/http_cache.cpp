#include "support/net/http_cache.hpp"

#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/codec/digest.hpp"

#include <fmt/format.h>

#include <charconv>
#include <chrono>

namespace lockstep {

namespace {

constexpr std::string_view k_namespace = "http-cache";
// Version 2 adds the validators; a version 1 record reads as a miss.
constexpr std::string_view k_magic = "lockstep-http-cache 2";

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<std::int64_t> parse_number(std::string_view s) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) {
    return std::nullopt;
  }
  return v;
}

std::string cache_key(const std::string& url, const FetchOptions& options) {
  std::string what = url;
  for (const std::string& h : options.headers) {
    what += "\n" + h;
  }
  return sha256_of(what).hex();
}

// A kept response: "lockstep-http-cache 2\n<fetched, Unix seconds>\n<lifetime left then, seconds;
// 0: ask the server first>\n<ETag>\n<Last-Modified>\n" and the body.
struct Kept {
  std::int64_t fetched = 0;
  std::int64_t lifetime = 0;
  std::string etag;
  std::string last_modified;
  std::string body;

  [[nodiscard]] bool fresh() const {
    const std::int64_t now = now_seconds();
    return now >= fetched && now - fetched < lifetime; // not when the clock went back
  }
  [[nodiscard]] bool has_validator() const { return !etag.empty() || !last_modified.empty(); }
  [[nodiscard]] std::string record() const {
    return fmt::format("{}\n{}\n{}\n{}\n{}\n", k_magic, fetched, lifetime, etag, last_modified) + body;
  }
};

std::optional<Kept> read_kept(std::string record) {
  std::size_t pos = 0;
  std::string_view fields[5];
  for (std::string_view& f : fields) {
    const std::size_t end = record.find('\n', pos);
    if (end == std::string::npos) {
      return std::nullopt;
    }
    f = std::string_view(record).substr(pos, end - pos);
    pos = end + 1;
  }
  const auto fetched = parse_number(fields[1]);
  const auto lifetime = parse_number(fields[2]);
  if (fields[0] != k_magic || !fetched || !lifetime) {
    return std::nullopt;
  }
  Kept k{*fetched, *lifetime, std::string(fields[3]), std::string(fields[4]), {}};
  record.erase(0, pos);
  k.body = std::move(record);
  return k;
}

// Validators that can't be written on one line of the record (or of a request) are not kept.
bool one_line(std::string_view v) {
  return v.find_first_of("\r\n") == std::string_view::npos;
}

} // namespace

namespace {

// Calls `each(name, value)` for every directive of a Cache-Control list, the name lower-cased and a
// quoted value unquoted; stops when `each` returns false.
template <typename Each> void for_each_directive(std::string_view cache_control, Each each) {
  for (std::size_t start = 0; start <= cache_control.size();) {
    std::size_t comma = cache_control.find(',', start);
    comma = comma == std::string_view::npos ? cache_control.size() : comma;
    const std::string_view directive = trim(cache_control.substr(start, comma - start));
    start = comma + 1;
    const std::size_t eq = directive.find('=');
    std::string_view value =
        eq == std::string_view::npos ? std::string_view() : trim(directive.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (!each(ascii_lower(trim(directive.substr(0, eq))), value, eq != std::string_view::npos)) {
      return;
    }
  }
}

bool forbids_storing(std::string_view cache_control) {
  bool no_store = false;
  for_each_directive(cache_control, [&](const std::string& name, std::string_view, bool) {
    no_store = name == "no-store";
    return !no_store;
  });
  return no_store;
}

} // namespace

std::optional<std::uint64_t> cache_lifetime(std::string_view cache_control) {
  std::optional<std::uint64_t> max_age;
  bool reusable = true;
  for_each_directive(cache_control, [&](const std::string& name, std::string_view value, bool has_value) {
    if (name == "no-store" || name == "no-cache") {
      reusable = false;
    } else if (name == "max-age" && has_value) {
      auto v = parse_number(value);
      reusable = v.has_value(); // an invalid max-age makes the response stale (RFC 9111 4.2.1)
      max_age = v ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(*v)) : std::nullopt;
    }
    return reusable;
  });
  if (!reusable || !max_age || *max_age == 0) {
    return std::nullopt;
  }
  return max_age;
}

Result<std::string> cached_get(const BlobStore& store, const std::string& url, const FetchOptions& options,
                               bool refresh, CacheUse* use, BlobStore::RecordQueue* writes) {
  const auto used = [&](CacheUse u) {
    if (use != nullptr) {
      *use = u;
    }
  };
  used(CacheUse::fetched);
  LS_TRY_ASSIGN(std::optional<std::filesystem::path> local, local_url_path(url));
  if (local) {
    LS_TRY_ASSIGN(FetchedBody file, http_get_response(url, options));
    used(file.not_found ? CacheUse::not_found : CacheUse::fetched);
    return std::move(file.body);
  }
  const std::string key = cache_key(url, options);
  std::optional<Kept> kept;
  if (auto record = store.get_record(k_namespace, key, options.max_size + 4096)) {
    kept = read_kept(std::move(*record));
  }
  if (kept && !refresh && kept->fresh() && kept->body.size() <= options.max_size) {
    used(CacheUse::reused);
    log::debug("{}: fresh in the cache", url);
    return std::move(kept->body);
  }
  // A stale copy with a validator: ask the server whether it changed (RFC 9111 4.3).
  FetchOptions ask = options;
  if (kept && kept->has_validator()) {
    if (!kept->etag.empty()) {
      ask.headers.push_back("If-None-Match: " + kept->etag);
    }
    if (!kept->last_modified.empty()) {
      ask.headers.push_back("If-Modified-Since: " + kept->last_modified);
    }
    ask.accept_not_modified = true;
  }
  LS_TRY_ASSIGN(FetchedBody response, http_get_response(url, ask));
  if (response.not_found) {
    used(CacheUse::not_found);
    return std::string();
  }
  const std::uint64_t age = response.age.value_or(0);
  const std::optional<std::uint64_t> lifetime = cache_lifetime(response.cache_control);
  const std::int64_t fresh_for =
      lifetime && age < *lifetime ? static_cast<std::int64_t>(*lifetime - age) : std::int64_t{0};
  Kept now;
  if (response.not_modified && kept) {
    // The 304's headers update the kept response's (RFC 9111 4.3.4); the body is the one kept.
    used(CacheUse::revalidated);
    log::debug("{}: not modified since it was cached", url);
    now = std::move(*kept);
    now.etag = one_line(response.etag) && !response.etag.empty() ? response.etag : now.etag;
    now.last_modified = one_line(response.last_modified) && !response.last_modified.empty()
                            ? response.last_modified
                            : now.last_modified;
  } else if (response.not_modified) {
    return external_error("{}: the server answered 304 Not Modified to a request that had no validator", url);
  } else {
    now.body = std::move(response.body);
    now.etag = one_line(response.etag) ? response.etag : "";
    now.last_modified = one_line(response.last_modified) ? response.last_modified : "";
  }
  now.fetched = now_seconds();
  now.lifetime = fresh_for;
  if (!forbids_storing(response.cache_control) && (fresh_for > 0 || now.has_validator())) {
    if (writes != nullptr) {
      writes->put(std::string(k_namespace), key, now.record());
    } else if (auto r = store.put_record(k_namespace, key, now.record(), false); !r) {
      log::debug("can't cache {}: {}", url, r.error().message);
    }
  }
  return std::move(now.body);
}

} // namespace lockstep
