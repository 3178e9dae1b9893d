#include "support/store/blob_store.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

namespace lockstep {

namespace fs = std::filesystem;

namespace {

// Removes temporary files that a killed process left behind more than a day ago.
void sweep_stale_temp_files(const fs::path& tmp) {
  std::error_code ec;
  auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(tmp, ec)) {
    auto t = e.last_write_time(ec);
    if (!ec && now - t > std::chrono::hours(24)) {
      fs::remove(e.path(), ec);
    }
  }
}

} // namespace

Result<BlobStore> BlobStore::open(const fs::path& root) {
  LS_TRY(make_dirs(root / "blobs" / "sha256"));
  LS_TRY(make_dirs(root / "records"));
  LS_TRY(make_dirs(root / "tmp"));
  sweep_stale_temp_files(root / "tmp");
  return BlobStore(root);
}

fs::path BlobStore::blob_path(const Digest& digest) const {
  return m_root / "blobs" / digest.algorithm() / digest.hex();
}

bool BlobStore::has(const Digest& digest, std::optional<std::int64_t> size) const {
  struct stat st {};
  if (::stat(blob_path(digest).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return false;
  }
  return !size || st.st_size == *size;
}

Result<BlobInfo> BlobStore::put_file(int fd, const Digest& expected,
                                     std::optional<std::int64_t> expected_size,
                                     const std::string& what) const {
  LS_TRY_ASSIGN(Writer writer, begin_write());
  std::vector<char> buf(1 << 20);
  while (true) {
    LS_TRY(check_interrupted());
    LS_TRY_ASSIGN(std::size_t n, read_some(fd, buf.data(), buf.size(), what));
    if (n == 0) {
      break;
    }
    LS_TRY(writer.write(buf.data(), n));
    if (expected_size && writer.size() > *expected_size) {
      break; // grew while reading: commit() reports the size mismatch
    }
  }
  return writer.commit(expected, expected_size);
}

Result<BlobStore::Writer> BlobStore::begin_write() const {
  LS_TRY_ASSIGN(AtomicFile f, AtomicFile::create(m_root / "tmp" / "blob", 0444));
  return Writer(this, std::move(f));
}

namespace {

fs::path partial_path(const fs::path& root, const Digest& digest) {
  return root / "tmp" / ("partial-" + digest.algorithm() + "-" + digest.hex());
}

} // namespace

Result<BlobStore::Writer> BlobStore::resume_write(const Digest& digest, std::int64_t size) const {
  const fs::path partial = partial_path(m_root, digest);
  LS_TRY_ASSIGN(std::optional<AtomicFile> f, AtomicFile::resume(partial, blob_path(digest), 0444));
  if (!f) {
    return begin_write(); // another process is downloading it
  }
  Writer w(this, std::move(*f));
  const std::uint64_t keep = w.m_file.size();
  if (size < 0 || keep > static_cast<std::uint64_t>(size)) {
    LS_TRY(w.restart());
    return w;
  }
  // The bytes there are hashed again: the digest covers the whole blob.
  std::vector<char> buf(1 << 20);
  std::uint64_t done = 0;
  while (done < keep) {
    LS_TRY(check_interrupted());
    const ssize_t n = ::pread(w.m_file.fd(), buf.data(), std::min<std::uint64_t>(buf.size(), keep - done),
                              static_cast<off_t>(done));
    if (n <= 0) {
      return errno_error("can't read " + partial.string(), n < 0 ? errno : EIO);
    }
    w.m_hash.update(buf.data(), static_cast<std::size_t>(n));
    done += static_cast<std::uint64_t>(n);
  }
  w.m_size = static_cast<std::int64_t>(keep);
  w.m_resumed = w.m_size;
  return w;
}

void BlobStore::drop_partial(const Digest& digest) const {
  const fs::path partial = partial_path(m_root, digest);
  const int fd = ::open(partial.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return;
  }
  UniqueFd owned(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    ::unlink(partial.c_str()); // nobody is writing it, and the blob is stored
  }
}

Result<void> BlobStore::Writer::restart() {
  LS_TRY(m_file.truncate());
  m_hash = Sha256();
  m_size = 0;
  m_resumed = 0;
  return {};
}

Result<void> BlobStore::Writer::write(const void* data, std::size_t size) {
  m_hash.update(data, size);
  m_size += static_cast<std::int64_t>(size);
  return m_file.write(data, size);
}

Result<BlobInfo> BlobStore::Writer::commit(const std::optional<Digest>& expected,
                                           std::optional<std::int64_t> expected_size) {
  Digest got = m_hash.finish();
  if (expected && *expected != got) {
    m_file.discard();
    return invalid_input("digest mismatch: expected {}, got {} ({} bytes)", expected->str(), got.str(),
                         m_size);
  }
  if (expected_size && *expected_size != m_size) {
    m_file.discard();
    return invalid_input("size mismatch for {}: expected {} bytes, got {}", got.str(), *expected_size,
                         m_size);
  }
  fs::path final = m_store->blob_path(got);
  if (m_store->has(got, m_size)) {
    // Someone (maybe a concurrent build) already published these bytes; drop ours.
    m_file.discard();
    m_store->drop_partial(got);
    return BlobInfo{got, m_size};
  }
  LS_TRY(m_file.commit_as(final));
  m_store->drop_partial(got);
  return BlobInfo{got, m_size};
}

Result<BlobInfo> BlobStore::put(std::string_view bytes) const {
  Digest d = sha256_of(bytes);
  if (has(d, static_cast<std::int64_t>(bytes.size()))) {
    return BlobInfo{d, static_cast<std::int64_t>(bytes.size())};
  }
  LS_TRY_ASSIGN(Writer w, begin_write());
  LS_TRY(w.write(bytes));
  return w.commit(d);
}

Result<std::string> BlobStore::read(const Digest& digest, std::uint64_t max_size) const {
  fs::path p = blob_path(digest);
  auto data = read_file(p, max_size);
  if (!data) {
    return std::move(data).error().with_context("blob " + digest.str() + " in the store");
  }
  if (digest.algorithm() == "sha256" && sha256_of(*data) != digest) {
    std::error_code ec;
    fs::remove(p, ec);
    return io_error("blob {} in the store at {} is corrupt (its content has another digest); it was removed, "
                    "run the command again to fetch or rebuild it",
                    digest.str(), p.string());
  }
  return data;
}

Result<void> BlobStore::verify(const Digest& digest) const {
  fs::path p = blob_path(digest);
  LS_TRY_ASSIGN(Digest got, sha256_of_file(p));
  if (got != digest) {
    std::error_code ec;
    fs::remove(p, ec);
    return io_error("blob {} in the store is corrupt (content hashes to {}); it was removed", digest.str(),
                    got.str());
  }
  return {};
}

Result<void> BlobStore::export_to(const Digest& digest, std::int64_t size, const fs::path& dest) const {
  fs::path p = blob_path(digest);
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    return errno_error("blob " + digest.str() + " is missing from the store at " + p.string(), errno);
  }
  if (st.st_size != size) {
    std::error_code ec;
    fs::remove(p, ec);
    return io_error("blob {} in the store has {} bytes, expected {}; it was removed, run the command again",
                    digest.str(), st.st_size, size);
  }
  return link_or_copy(p, dest);
}

std::optional<std::string> BlobStore::get_record(std::string_view ns, std::string_view key,
                                                 std::uint64_t max_size) const {
  auto data = read_file(m_root / "records" / std::string(ns) / std::string(key), max_size);
  if (!data) {
    return std::nullopt;
  }
  return std::move(*data);
}

Result<void> BlobStore::put_record(std::string_view ns, std::string_view key, std::string_view value,
                                   bool durable) const {
  fs::path dir = m_root / "records" / std::string(ns);
  LS_TRY(make_dirs(dir));
  return write_file_atomic(dir / std::string(key), value, 0644, durable);
}

struct BlobStore::RecordQueue::Shared {
  const BlobStore& store;
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::tuple<std::string, std::string, std::string>> queue;
  bool stop = false;
  std::thread thread; // started with the first record

  explicit Shared(const BlobStore& s) : store(s) {}

  void work() {
    std::unique_lock lock(mutex);
    while (true) {
      wake.wait(lock, [this] { return stop || !queue.empty(); });
      if (queue.empty()) {
        return;
      }
      auto [ns, key, value] = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      if (auto r = store.put_record(ns, key, value, false); !r) {
        log::debug("can't write the record {}/{}: {}", ns, key, r.error().message);
      }
      lock.lock();
    }
  }
};

BlobStore::RecordQueue::RecordQueue(const BlobStore& store) : m_shared(std::make_unique<Shared>(store)) {
}

BlobStore::RecordQueue::~RecordQueue() {
  {
    std::lock_guard lock(m_shared->mutex);
    m_shared->stop = true;
  }
  m_shared->wake.notify_one();
  if (m_shared->thread.joinable()) {
    m_shared->thread.join();
  }
}

void BlobStore::RecordQueue::put(std::string ns, std::string key, std::string value) {
  {
    std::lock_guard lock(m_shared->mutex);
    m_shared->queue.emplace_back(std::move(ns), std::move(key), std::move(value));
    if (!m_shared->thread.joinable()) {
      m_shared->thread = std::thread([shared = m_shared.get()] { shared->work(); });
    }
  }
  m_shared->wake.notify_one();
}

} // namespace lockstep
