// Blob downloads into the content store (see transfer.hpp).
#include "support/registry/transfer.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/base/parallel.hpp"
#include "support/net/mirror.hpp"

#include <optional>

namespace lockstep::registry {

Result<std::uint64_t> BlobFetch::one(const oci::Descriptor& blob, log::Progress* progress) const {
  const std::string what = fmt::format("blob {} of {}", blob.digest.str(), location);
  if (blob.digest.algorithm() != "sha256") {
    return invalid_input("{}: only sha256 digests can be verified", what);
  }
  if (blob.size < 0) {
    return invalid_input("{}: negative size", what);
  }
  if (store.has(blob.digest, blob.size)) {
    return std::uint64_t{0};
  }
  const auto expected = static_cast<std::uint64_t>(blob.size);
  // A download a killed process left in the store's tmp/ is continued with Range; one whose bytes
  // don't verify is fetched once more from the start.
  for (int pass = 0;; ++pass) {
    LS_TRY_ASSIGN(BlobStore::Writer writer,
                  pass == 0 ? store.resume_write(blob.digest, blob.size) : store.begin_write());
    std::uint64_t got = static_cast<std::uint64_t>(writer.resumed());
    if (got > 0) {
      log::debug("{}: continuing a download left at byte {}", what, got);
      if (progress != nullptr) {
        progress->advance(got);
      }
    }
    std::uint64_t counted = got; // bytes already shown in the progress line
    ApiRequest r;
    r.path_or_url = "/v2/" + repository + "/blobs/" + blob.digest.str();
    r.scopes = {{repository, "pull"}};
    r.follow_redirects = true;
    r.what = what;
    r.start_at = got < expected ? got : 0;
    if (got >= expected) {
      LS_TRY(writer.restart()); // all there yet not stored: it did not verify
      got = 0;
    }
    r.sink = [&](std::span<const char> data) -> Result<void> {
      if (data.size() > expected - got) {
        return invalid_input(
            "{}: the registry sent more than the {} bytes the manifest states; nothing was stored", what,
            expected);
      }
      LS_TRY(writer.write(data.data(), data.size()));
      got += data.size();
      if (progress != nullptr && got > counted) {
        progress->advance(got - counted);
        counted = got;
      }
      return {};
    };
    r.on_retry = [&]() -> std::uint64_t {
      if (got > 0) {
        log::debug("{}: resuming at byte {}", what, got);
      }
      return got;
    };
    r.on_restart = [&]() -> Result<void> {
      LS_TRY(writer.restart());
      got = 0;
      return {};
    };
    LS_TRY(client.request(std::move(r)));
    if (got != expected) {
      return invalid_input("{}: the registry sent {} bytes, the manifest states {}; nothing was stored", what,
                           got, expected);
    }
    const bool resumed = writer.resumed() > 0;
    auto info = writer.commit(blob.digest, blob.size);
    if (!info && resumed && pass == 0) {
      log::info("{}: the download a killed process left did not verify; fetching the blob again", what);
      continue;
    }
    if (!info) {
      return std::move(info).error().with_context(what +
                                                  " (the registry sent other bytes than the digest names)");
    }
    return got;
  }
}

Result<FetchTotals> BlobFetch::run(const std::vector<oci::Descriptor>& blobs,
                                   const std::string& label) const {
  std::vector<const oci::Descriptor*> todo;
  std::uint64_t total = 0;
  for (const auto& b : blobs) {
    bool dup = false;
    for (const auto* t : todo) {
      dup = dup || t->digest == b.digest;
    }
    if (!dup && !store.has(b.digest, b.size)) {
      // A mirror (a vendor directory or registry) first; offline, nothing else.
      const MirrorSet& mirrors = default_mirrors();
      if (!mirrors.mirrors.empty()) {
        LS_TRY_ASSIGN(bool mirrored,
                      mirrors.fetch(b.digest,
                                    b.size >= 0 ? std::optional<std::uint64_t>(b.size) : std::nullopt,
                                    store));
        if (mirrored) {
          continue;
        }
      }
      if (mirrors.offline) {
        return Error{ExitCode::check_failed,
                     fmt::format("offline: blob {} of {} is in no mirror ({}); vendor the lock into one "
                                 "(`lockstep vendor`) or build online",
                                 b.digest.str(), repository, mirrors.names())};
      }
      todo.push_back(&b);
      total += b.size > 0 ? static_cast<std::uint64_t>(b.size) : 0;
    }
  }
  FetchTotals totals;
  if (todo.empty()) {
    return totals;
  }
  log::Progress progress(label, total);
  std::vector<std::optional<Error>> errors(todo.size());
  std::vector<std::uint64_t> bytes(todo.size(), 0);
  for_each_index(todo.size(), client.options().connections, [&](std::size_t i) {
    if (interrupted()) {
      errors[i] = Error{ExitCode::interrupted, "interrupted; nothing was published"};
      return;
    }
    auto r = one(*todo[i], &progress);
    if (!r) {
      errors[i] = std::move(r).error();
      return;
    }
    bytes[i] = *r;
    progress.note(fmt::format("  {}  {}", todo[i]->digest.str().substr(0, 19), log::human_size(*r)));
  });
  progress.done();
  if (auto failed = combine_errors(errors, "blob downloads")) {
    return *failed;
  }
  for (std::uint64_t b : bytes) {
    if (b > 0) {
      ++totals.downloaded;
      totals.bytes += b;
    }
  }
  return totals;
}

} // namespace lockstep::registry
