// Blob downloads into the content store (see transfer.hpp).
#include "support/registry/transfer.hpp"

#include "support/interrupt.hpp"
#include "support/log.hpp"
#include "support/mirror.hpp"
#include "support/parallel.hpp"

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
  LS_TRY_ASSIGN(BlobStore::Writer first, store.begin_write());
  std::optional<BlobStore::Writer> writer;
  writer.emplace(std::move(first));
  std::uint64_t got = 0;
  std::uint64_t counted = 0; // bytes already shown in the progress line
  ApiRequest r;
  r.path_or_url = "/v2/" + repository + "/blobs/" + blob.digest.str();
  r.scopes = {{repository, "pull"}};
  r.follow_redirects = true;
  r.what = what;
  r.sink = [&](std::span<const char> data) -> Result<void> {
    if (data.size() > expected - got) {
      return invalid_input(
          "{}: the registry sent more than the {} bytes the manifest states; nothing was stored", what,
          expected);
    }
    LS_TRY(writer->write(data.data(), data.size()));
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
    writer.reset();
    LS_TRY_ASSIGN(BlobStore::Writer fresh, store.begin_write());
    writer.emplace(std::move(fresh));
    got = 0;
    return {};
  };
  LS_TRY(client.request(std::move(r)));
  if (got != expected) {
    return invalid_input("{}: the registry sent {} bytes, the manifest states {}; nothing was stored", what,
                         got, expected);
  }
  auto info = writer->commit(blob.digest, blob.size);
  if (!info) {
    return std::move(info).error().with_context(what +
                                                " (the registry sent other bytes than the digest names)");
  }
  return got;
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
