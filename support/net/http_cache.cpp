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
constexpr std::string_view k_magic = "lockstep-http-cache 1";

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

// The record: "lockstep-http-cache 1\n<fetched, Unix seconds>\n<lifetime left then, seconds>\n" and
// the body. nullopt when it is malformed or no longer fresh.
std::optional<std::string> fresh_body(std::string record) {
  std::size_t pos = 0;
  std::string_view fields[3];
  for (std::string_view& f : fields) {
    const std::size_t end = record.find('\n', pos);
    if (end == std::string::npos) {
      return std::nullopt;
    }
    f = std::string_view(record).substr(pos, end - pos);
    pos = end + 1;
  }
  if (fields[0] != k_magic) {
    return std::nullopt;
  }
  const auto fetched = parse_number(fields[1]);
  const auto lifetime = parse_number(fields[2]);
  const std::int64_t now = now_seconds();
  if (!fetched || !lifetime || now < *fetched || now - *fetched >= *lifetime) {
    return std::nullopt; // stale, or the clock went back
  }
  record.erase(0, pos);
  return record;
}

} // namespace

std::optional<std::uint64_t> cache_lifetime(std::string_view cache_control) {
  std::optional<std::uint64_t> max_age;
  for (std::size_t start = 0; start <= cache_control.size();) {
    std::size_t comma = cache_control.find(',', start);
    comma = comma == std::string_view::npos ? cache_control.size() : comma;
    const std::string_view directive = trim(cache_control.substr(start, comma - start));
    start = comma + 1;
    const std::size_t eq = directive.find('=');
    const std::string name = ascii_lower(trim(directive.substr(0, eq)));
    if (name == "no-store" || name == "no-cache") {
      return std::nullopt;
    }
    if (name == "max-age" && eq != std::string_view::npos) {
      std::string_view value = trim(directive.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        value = value.substr(1, value.size() - 2);
      }
      auto v = parse_number(value);
      if (!v) {
        return std::nullopt; // an invalid max-age makes the response stale (RFC 9111 4.2.1)
      }
      max_age = static_cast<std::uint64_t>(*v);
    }
  }
  if (!max_age || *max_age == 0) {
    return std::nullopt;
  }
  return max_age;
}

Result<std::string> cached_get(const BlobStore& store, const std::string& url, const FetchOptions& options,
                               bool refresh, CacheUse* use, BlobStore::RecordQueue* writes) {
  if (use != nullptr) {
    *use = CacheUse::fetched;
  }
  LS_TRY_ASSIGN(std::optional<std::filesystem::path> local, local_url_path(url));
  if (local) {
    return http_get(url, options);
  }
  const std::string key = cache_key(url, options);
  if (!refresh) {
    if (auto record = store.get_record(k_namespace, key, options.max_size + 256)) {
      if (auto body = fresh_body(std::move(*record)); body && body->size() <= options.max_size) {
        if (use != nullptr) {
          *use = CacheUse::reused;
        }
        log::debug("{}: fresh in the cache", url);
        return std::move(*body);
      }
    }
  }
  LS_TRY_ASSIGN(FetchedBody response, http_get_response(url, options));
  const std::optional<std::uint64_t> lifetime = cache_lifetime(response.cache_control);
  const std::uint64_t age = response.age.value_or(0);
  if (lifetime && age < *lifetime) {
    std::string record = fmt::format("{}\n{}\n{}\n", k_magic, now_seconds(), *lifetime - age);
    record += response.body;
    if (writes != nullptr) {
      writes->put(std::string(k_namespace), key, std::move(record));
    } else if (auto r = store.put_record(k_namespace, key, record, false); !r) {
      log::debug("can't cache {}: {}", url, r.error().message);
    }
  }
  return std::move(response.body);
}

} // namespace lockstep
