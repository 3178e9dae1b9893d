// Pushing an image to a registry (see push.hpp).
#include "support/registry/push.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/base/parallel.hpp"
#include "support/system/fs.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>
#include <sstream>

namespace lockstep::registry {

namespace {

// Blobs up to this size go in one PUT; larger ones in PATCH chunks that can be resumed.
constexpr std::uint64_t k_monolithic_max = 128ULL << 20;
constexpr std::uint64_t k_chunk = 64ULL << 20;
constexpr int k_upload_attempts = 4;
constexpr std::string_view k_records = "registry-blobs";

std::string record_key(const std::string& host, const Digest& digest) {
  std::string key = digest.hex() + "@";
  for (char c : host) {
    key += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-') ? c : '_';
  }
  return key;
}

std::vector<std::string> known_repositories(const BlobStore& store, const std::string& host,
                                            const Digest& digest) {
  std::vector<std::string> out;
  if (auto rec = store.get_record(k_records, record_key(host, digest))) {
    std::istringstream in(*rec);
    for (std::string line; std::getline(in, line);) {
      if (oci::valid_repository_name(line)) {
        out.push_back(line);
      }
    }
  }
  return out;
}

// "Range: 0-N" of an upload session: the next byte to send.
std::optional<std::uint64_t> upload_offset(const HttpResponse& r) {
  auto range = r.header("range");
  if (!range) {
    return std::uint64_t{0};
  }
  std::string_view v = *range;
  if (v.starts_with("bytes=")) {
    v.remove_prefix(6);
  }
  std::size_t dash = v.find('-');
  if (dash == std::string_view::npos) {
    return std::nullopt;
  }
  std::uint64_t end = 0;
  auto [p, ec] = std::from_chars(v.data() + dash + 1, v.data() + v.size(), end);
  if (ec != std::errc()) {
    return std::nullopt;
  }
  return end + 1;
}

class Pusher {
public:
  Pusher(Client& client, const oci::RegistryRef& target, oci::ImageSource& source, const BlobStore& store)
      : m_client(client), m_target(target), m_source(source), m_store(store) {}

  // Makes one blob present in the target repository.
  Result<void> blob(const oci::Descriptor& d, log::Progress& progress, PushStats& stats,
                    std::mutex& stats_mutex) {
    const std::string what = fmt::format("blob {} to {}", d.digest.str(), m_target.name());
    const std::string repo = m_target.repository;
    // 1. There already?
    ApiRequest head;
    head.method = "HEAD";
    head.path_or_url = "/v2/" + repo + "/blobs/" + d.digest.str();
    head.scopes = {{repo, "pull,push"}};
    head.expected = {404};
    head.what = what;
    LS_TRY_ASSIGN(HttpResponse h, m_client.request(std::move(head)));
    if (h.status == 200) {
      std::lock_guard lock(stats_mutex);
      ++stats.present;
      progress.advance(static_cast<std::uint64_t>(d.size));
      return {};
    }
    // 2. Mountable from a repository lockstep knows holds it?
    std::string location;
    for (const std::string& from : known_repositories(m_store, m_target.host, d.digest)) {
      if (from == repo) {
        continue;
      }
      ApiRequest mount;
      mount.method = "POST";
      mount.path_or_url = "/v2/" + repo + "/blobs/uploads/?mount=" + d.digest.str() + "&from=" + from;
      mount.scopes = {{repo, "pull,push"}, {from, "pull"}};
      mount.expected = {202};
      mount.what = what + " (mount from " + from + ")";
      LS_TRY_ASSIGN(HttpResponse m, m_client.request(std::move(mount)));
      if (m.status == 201) {
        std::lock_guard lock(stats_mutex);
        ++stats.mounted;
        progress.advance(static_cast<std::uint64_t>(d.size));
        return {};
      }
      location = m.header("location").value_or(""); // the registry opened an upload instead
      break;
    }
    // 3. Upload.
    LS_TRY(upload(d, location, what, progress));
    std::lock_guard lock(stats_mutex);
    ++stats.uploaded;
    stats.bytes += static_cast<std::uint64_t>(d.size);
    return {};
  }

private:
  Result<std::string> open_session(const std::string& what, std::uint64_t& min_chunk) {
    ApiRequest post;
    post.method = "POST";
    post.path_or_url = "/v2/" + m_target.repository + "/blobs/uploads/";
    post.scopes = {{m_target.repository, "pull,push"}};
    post.what = what + " (starting the upload)";
    LS_TRY_ASSIGN(HttpResponse r, m_client.request(std::move(post)));
    if (r.status != 202) {
      return external_error("{}: the registry answered {} to the upload request, expected 202", what,
                            r.status);
    }
    if (auto v = r.header("oci-chunk-min-length")) {
      std::uint64_t n = 0;
      if (std::from_chars(v->data(), v->data() + v->size(), n).ec == std::errc()) {
        min_chunk = n;
      }
    }
    return absolute(r.header("location").value_or(""), what);
  }

  Result<std::string> absolute(const std::string& location, const std::string& what) {
    if (location.empty()) {
      return external_error("{}: the registry gave no upload Location", what);
    }
    if (location.find("://") != std::string::npos) {
      return location;
    }
    if (!location.starts_with("/")) {
      return external_error("{}: the upload Location '{}' is not usable", what, location.substr(0, 100));
    }
    return m_client.url(location);
  }

  static std::string with_digest(const std::string& location, const Digest& digest) {
    return location + (location.find('?') == std::string::npos ? "?" : "&") + "digest=" + digest.str();
  }

  // The blob's bytes as a file: where the source keeps it, else a copy in the store.
  Result<UniqueFd> open_bytes(const oci::Descriptor& d) {
    if (!m_store.has(d.digest, d.size)) {
      LS_TRY_ASSIGN(std::unique_ptr<oci::BlobReader> reader, m_source.open_blob(d));
      if (reader->file_descriptor() >= 0) {
        int fd = ::dup(reader->file_descriptor());
        if (fd < 0) {
          return errno_error("can't duplicate a file descriptor", errno);
        }
        return UniqueFd(fd);
      }
      LS_TRY(m_source.fetch_blob(d, m_store));
    }
    LS_TRY_ASSIGN(std::unique_ptr<oci::BlobReader> reader,
                  oci::open_file_blob(m_store.blob_path(d.digest), "blob " + d.digest.str()));
    int fd = ::dup(reader->file_descriptor());
    if (fd < 0) {
      return errno_error("can't duplicate a file descriptor", errno);
    }
    return UniqueFd(fd);
  }

  Result<void> upload(const oci::Descriptor& d, std::string location, const std::string& what,
                      log::Progress& progress) {
    LS_TRY_ASSIGN(UniqueFd fd, open_bytes(d));
    const auto size = static_cast<std::uint64_t>(d.size);
    std::uint64_t min_chunk = 0;
    std::uint64_t reported = 0;
    auto report = [&](std::uint64_t upto) {
      if (upto > reported) {
        progress.advance(upto - reported);
        reported = upto;
      }
    };
    for (int attempt = 0;; ++attempt) {
      LS_TRY(check_interrupted());
      if (location.empty()) {
        LS_TRY_ASSIGN(location, open_session(what, min_chunk));
      } else {
        LS_TRY_ASSIGN(location, absolute(location, what));
      }
      auto done = size <= std::max(k_monolithic_max, min_chunk)
                      ? monolithic(d, fd.get(), location, what)
                      : chunked(d, fd.get(), location, min_chunk, what, report);
      if (done) {
        report(size);
        return {};
      }
      if (done.error().code != ExitCode::external || attempt + 1 >= k_upload_attempts) {
        return std::move(done).error();
      }
      log::debug("{}: {}; starting the upload again", what, done.error().message);
      location.clear();
    }
  }

  Result<void> monolithic(const oci::Descriptor& d, int fd, const std::string& location,
                          const std::string& what) {
    ApiRequest put;
    put.method = "PUT";
    put.path_or_url = with_digest(location, d.digest);
    put.headers = {"Content-Type: application/octet-stream"};
    put.file_body = FileBody{fd, 0, static_cast<std::uint64_t>(d.size)};
    put.scopes = {{m_target.repository, "pull,push"}};
    put.retries = 0;
    put.what = what;
    LS_TRY_ASSIGN(HttpResponse r, m_client.request(std::move(put)));
    return check_created(r, d, what);
  }

  template <typename Report>
  Result<void> chunked(const oci::Descriptor& d, int fd, std::string location, std::uint64_t min_chunk,
                       const std::string& what, Report& report) {
    const auto size = static_cast<std::uint64_t>(d.size);
    const std::uint64_t chunk = std::max(k_chunk, min_chunk);
    std::uint64_t offset = 0;
    int resumes = 0;
    while (offset < size) {
      LS_TRY(check_interrupted());
      std::uint64_t n = std::min(chunk, size - offset);
      ApiRequest patch;
      patch.method = "PATCH";
      patch.path_or_url = location;
      patch.headers = {"Content-Type: application/octet-stream",
                       fmt::format("Content-Range: {}-{}", offset, offset + n - 1)};
      patch.file_body = FileBody{fd, offset, n};
      patch.scopes = {{m_target.repository, "pull,push"}};
      patch.retries = 0;
      patch.what = what;
      auto r = m_client.request(std::move(patch));
      if (!r || r->status != 202) {
        // Ask the registry how much it has, and go on from there.
        if (++resumes > k_upload_attempts) {
          return r ? external_error("{}: the registry answered {} to a chunk", what, r->status)
                   : std::move(r).error();
        }
        ApiRequest status;
        status.path_or_url = location;
        status.scopes = {{m_target.repository, "pull,push"}};
        status.what = what + " (upload status)";
        LS_TRY_ASSIGN(HttpResponse s, m_client.request(std::move(status)));
        auto next = upload_offset(s);
        if (!next || *next > size) {
          return external_error("{}: the registry reports an unusable upload Range", what);
        }
        log::debug("{}: resuming the upload at byte {}", what, *next);
        offset = *next;
        if (auto loc = s.header("location")) {
          LS_TRY_ASSIGN(location, absolute(*loc, what));
        }
        continue;
      }
      offset += n;
      report(offset);
      LS_TRY_ASSIGN(location, absolute(r->header("location").value_or(location), what));
    }
    ApiRequest put;
    put.method = "PUT";
    put.path_or_url = with_digest(location, d.digest);
    put.scopes = {{m_target.repository, "pull,push"}};
    put.what = what;
    LS_TRY_ASSIGN(HttpResponse r, m_client.request(std::move(put)));
    return check_created(r, d, what);
  }

  static Result<void> check_created(const HttpResponse& r, const oci::Descriptor& d,
                                    const std::string& what) {
    if (r.status != 201) {
      return external_error("{}: the registry answered {} to the upload, expected 201", what, r.status);
    }
    if (auto stated = r.header("docker-content-digest"); stated && *stated != d.digest.str()) {
      return invalid_input("{}: the registry stored it as {}, not {}", what, stated->substr(0, 80),
                           d.digest.str());
    }
    return {};
  }

  Client& m_client;
  const oci::RegistryRef& m_target;
  oci::ImageSource& m_source;
  const BlobStore& m_store;
};

// Blobs in files and in the store (a build's output, a SIF).
class LocalBlobs final : public oci::ImageSource {
public:
  LocalBlobs(std::map<Digest, std::filesystem::path> files, BlobStore store)
      : m_files(std::move(files)), m_store(std::move(store)) {}
  Result<oci::OpenedImage> resolve(const oci::SelectOptions&) override {
    return internal_error("local blobs are not an image to resolve");
  }
  Result<std::string> read_blob(const oci::Descriptor& desc, std::uint64_t max_size) override {
    if (auto it = m_files.find(desc.digest); it != m_files.end()) {
      LS_TRY_ASSIGN(std::string bytes, read_file(it->second, max_size));
      if (sha256_of(bytes) != desc.digest) {
        return invalid_input("{} changed: it no longer has digest {}", it->second.string(),
                             desc.digest.str());
      }
      return bytes;
    }
    return m_store.read(desc.digest, max_size);
  }
  Result<void> fetch_blob(const oci::Descriptor& desc, const BlobStore& store) override {
    if (store.has(desc.digest, desc.size)) {
      return {};
    }
    LS_TRY_ASSIGN(std::string bytes, read_blob(desc, UINT64_MAX));
    LS_TRY(store.put(bytes));
    return {};
  }
  Result<std::unique_ptr<oci::BlobReader>> open_blob(const oci::Descriptor& desc) override {
    auto it = m_files.find(desc.digest);
    const std::filesystem::path path = it != m_files.end() ? it->second : m_store.blob_path(desc.digest);
    return oci::open_file_blob(path, "blob " + desc.digest.str());
  }

private:
  std::map<Digest, std::filesystem::path> m_files;
  BlobStore m_store;
};

} // namespace

std::unique_ptr<oci::ImageSource> local_blobs(std::map<Digest, std::filesystem::path> files,
                                              const BlobStore& store) {
  return std::make_unique<LocalBlobs>(std::move(files), store);
}

std::string push_reference(const oci::RegistryRef& target) {
  return target.tag.empty() && target.digest ? target.digest->str() : target.tag;
}

Result<std::pair<oci::RegistryRef, PushStats>>
push_by_digest(oci::ImageSource& source, const PushContent& content, const oci::RegistryRef& target,
               const BlobStore& store, const ClientOptions& options) {
  oci::RegistryRef by_digest = target;
  by_digest.tag.clear();
  by_digest.digest = sha256_of(content.manifest_bytes);
  LS_TRY_ASSIGN(auto pushed, push(source, content, by_digest, {push_reference(by_digest)}, store, options));
  return std::pair{std::move(by_digest), pushed.second};
}

void remember_blob(const BlobStore& store, const std::string& host, const std::string& repository,
                   const Digest& digest) {
  std::vector<std::string> repos = known_repositories(store, host, digest);
  if (std::find(repos.begin(), repos.end(), repository) != repos.end()) {
    return;
  }
  repos.insert(repos.begin(), repository);
  constexpr std::size_t k_kept = 8;
  repos.resize(std::min(repos.size(), k_kept));
  std::string text;
  for (const auto& r : repos) {
    text += r + "\n";
  }
  (void)store.put_record(k_records, record_key(host, digest), text); // a hint only
}

namespace {

// The manifest under each of `refs`, byte for byte; the registry must keep its digest.
Result<void> put_manifests(Client& client, const PushContent& content, const oci::RegistryRef& target,
                           const std::vector<std::string>& refs, const Digest& digest, PushStats& stats) {
  for (const std::string& ref : refs) {
    ApiRequest put;
    put.method = "PUT";
    put.path_or_url = "/v2/" + target.repository + "/manifests/" + ref;
    put.headers = {"Content-Type: " + content.media_type};
    put.body = content.manifest_bytes;
    put.scopes = {{target.repository, "pull,push"}};
    const std::string what = fmt::format("manifest of {}:{}", target.name(), ref);
    put.what = what;
    LS_TRY_ASSIGN(HttpResponse r, client.request(std::move(put)));
    if (r.status != 201) {
      return external_error("{}: the registry answered {}, expected 201", what, r.status);
    }
    if (auto stated = r.header("docker-content-digest"); stated && *stated != digest.str()) {
      return invalid_input("manifest of {}:{}: the registry stored it as {}, not {} (it changed the bytes)",
                           target.name(), ref, stated->substr(0, 80), digest.str());
    }
    stats.oci_subject = r.header("oci-subject").value_or("");
  }
  return {};
}

} // namespace

Result<std::pair<Digest, PushStats>> push(oci::ImageSource& source, const PushContent& content,
                                          const oci::RegistryRef& target,
                                          const std::vector<std::string>& tags, const BlobStore& store,
                                          const ClientOptions& options) {
  LS_TRY_ASSIGN(std::shared_ptr<Client> client, Client::open(target, options));
  std::vector<oci::Descriptor> blobs;
  std::uint64_t total = 0;
  for (const auto& b : content.blobs) {
    if (std::none_of(blobs.begin(), blobs.end(), [&](const auto& x) { return x.digest == b.digest; })) {
      blobs.push_back(b);
      total += static_cast<std::uint64_t>(std::max<std::int64_t>(b.size, 0));
    }
  }
  PushStats stats;
  stats.blobs = blobs.size();
  const Digest digest = sha256_of(content.manifest_bytes);
  std::vector<std::string> refs;
  for (const auto& t : tags) {
    if (std::find(refs.begin(), refs.end(), t) == refs.end()) {
      refs.push_back(t);
    }
  }
  if (refs.empty()) {
    refs.push_back(push_reference(target));
  }
  // A reference that already names this manifest needs nothing; and a registry accepts a manifest
  // only once it holds every blob the manifest names, so then none of them needs asking about.
  std::vector<std::string> stale;
  for (const std::string& ref : refs) {
    ApiRequest head;
    head.method = "HEAD";
    head.path_or_url = "/v2/" + target.repository + "/manifests/" + ref;
    head.headers = {"Accept: " + content.media_type};
    head.scopes = {{target.repository, "pull,push"}};
    head.expected = {404};
    head.what = fmt::format("manifest of {}:{}", target.name(), ref);
    LS_TRY_ASSIGN(HttpResponse h, client->request(std::move(head)));
    const auto stated = h.header("docker-content-digest");
    if (h.status != 200 || !stated || *stated != digest.str()) {
      stale.push_back(ref);
    }
  }
  if (stale.size() < refs.size()) {
    stats.present = blobs.size();
    LS_TRY(put_manifests(*client, content, target, stale, digest, stats));
    return std::pair{digest, stats};
  }
  Pusher pusher(*client, target, source, store);
  std::vector<std::optional<Error>> errors(blobs.size());
  {
    log::Progress progress("pushing " + target.name(), total);
    std::mutex stats_mutex;
    for_each_index(blobs.size(), options.connections, [&](std::size_t i) {
      if (auto r = pusher.blob(blobs[i], progress, stats, stats_mutex); !r) {
        errors[i] = std::move(r).error();
      }
    });
  }
  if (auto failed = combine_errors(errors, "blob uploads")) {
    failed->message += "\nNo manifest was pushed: the registry shows nothing new under " + target.name();
    return *failed;
  }
  for (const auto& b : blobs) {
    remember_blob(store, target.host, target.repository, b.digest);
  }
  // Only now the manifest, under every tag.
  LS_TRY(put_manifests(*client, content, target, refs, digest, stats));
  return std::pair{digest, stats};
}

} // namespace lockstep::registry
