// Reading an image's final filesystem view: layers applied in memory (OCI), or a root directory
// walked; regular files hashed (MD5 for dpkg's records, SHA-256 for RECORD) on a pool of threads
// while the reader goes on. runner/audit/image_contents.cpp adds the SIF reader and IMAGE's forms.
#include "support/oci/image_contents.hpp"

#include "support/base/buffers.hpp"
#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/codec/compress.hpp"
#include "support/codec/md5_lanes.hpp"
#include "support/oci/layer_model.hpp"
#include "support/oci/layer_stream.hpp"
#include "support/oci/oci.hpp"
#include "support/oci/tar_reader.hpp"
#include "support/system/fs.hpp"

// The low-level digest interfaces need no provider lookup per file (see support/codec/digest.cpp). MD5 is
// what dpkg records; it is compared with dpkg's own record, never trusted for integrity.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/md5.h>
#include <openssl/sha.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <utility>

namespace lockstep::oci {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t k_chunk = 1U << 20;
constexpr std::size_t k_max_path = 4096;
constexpr std::size_t k_max_depth = 1024;
constexpr std::uint64_t k_max_inflight = 64ULL << 20;
constexpr std::size_t k_inline_buffer = 256U << 10; // fits in L2: read into it, hashed while warm
constexpr std::string_view k_dist_info_suffix = ".dist-info";

// ---------------------------------------------------------------------------------------------
// Hashing on a pool of threads. Each file is a slot; its chunks are hashed in order, MD5 by one
// worker and SHA-256 by the next, so one big file keeps two cores busy and many files keep all of
// them. The reader blocks while more than k_max_inflight bytes wait. Results depend only on the
// bytes, never on the scheduling.

struct HashSlot {
  std::unique_ptr<MD5_CTX> md5 = std::make_unique<MD5_CTX>(); ///< freed once final
  std::unique_ptr<SHA256_CTX> sha; ///< null when the file needs no SHA-256; freed once final
  std::array<std::uint8_t, 16> md5_out{};
  std::array<std::uint8_t, 32> sha_out{};
};

// Chunk buffers are left uninitialised: the reader overwrites every byte of a chunk, and
// zeroing them first cost a memset of the image's whole data.
using Bytes = UninitBuffer<char>;

// Chunk buffers, recycled: a fresh 1 MiB allocation per chunk cost a memset and a page fault per
// 4 KiB, a fifth of verify's time. A buffer returns to the free list when its last task drops it.
class ChunkPool {
public:
  ChunkPool() = default;
  ~ChunkPool() = default;
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  // A buffer of `size` bytes whose contents are unspecified. Only full chunks are recycled: small
  // buffers come cheaply from the heap, 1 MiB ones from fresh mappings.
  std::shared_ptr<Bytes> take(std::size_t size) {
    if (size < k_chunk) {
      return std::make_shared<Bytes>(size);
    }
    std::unique_ptr<Bytes> v;
    {
      std::lock_guard lock(m_mutex);
      if (!m_free.empty()) {
        v = std::move(m_free.back());
        m_free.pop_back();
      }
    }
    if (!v) {
      v = std::make_unique<Bytes>();
    }
    v->resize(size); // fills only what lies beyond the buffer's last size
    return {v.release(), [this](Bytes* p) { give_back(p); }};
  }

private:
  void give_back(Bytes* p) {
    std::unique_ptr<Bytes> v(p);
    std::lock_guard lock(m_mutex);
    if (m_free.size() < k_max_free) {
      m_free.push_back(std::move(v));
    }
  }

  static constexpr std::size_t k_max_free = 128;
  std::mutex m_mutex;
  std::vector<std::unique_ptr<Bytes>> m_free;
};

class HashPool {
public:
  explicit HashPool(unsigned threads) {
    const unsigned n = std::max(1U, threads);
    m_queues.resize(n);
    for (unsigned i = 0; i < n; ++i) {
      m_workers.emplace_back([this, i] { run(i); });
    }
  }
  ~HashPool() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    for (auto& t : m_workers) {
      t.join();
    }
  }
  HashPool(const HashPool&) = delete;
  HashPool& operator=(const HashPool&) = delete;

  // A new file; its index is what ImageEntry::hash_slot holds.
  std::size_t open(bool sha256) {
    auto slot = std::make_unique<HashSlot>();
    MD5_Init(slot->md5.get());
    if (sha256) {
      slot->sha = std::make_unique<SHA256_CTX>();
      SHA256_Init(slot->sha.get());
    }
    m_slots.push_back(std::move(slot));
    return m_slots.size() - 1;
  }

  void feed(std::size_t slot, std::shared_ptr<const Bytes> chunk) { push(slot, std::move(chunk), false); }
  void close(std::size_t slot) { push(slot, nullptr, true); }

  // Waits until every queued chunk is hashed.
  void wait() {
    std::unique_lock lock(m_mutex);
    m_done_cv.wait(lock, [this] { return m_pending == 0; });
  }

  [[nodiscard]] const HashSlot& slot(std::size_t i) const { return *m_slots[i]; }
  [[nodiscard]] ChunkPool& chunks() { return m_chunks; }

private:
  struct Task {
    HashSlot* slot = nullptr;
    bool sha = false;
    std::shared_ptr<const Bytes> chunk;
    bool final = false;
  };

  void push(std::size_t index, std::shared_ptr<const Bytes> chunk, bool final) {
    HashSlot* slot = m_slots[index].get();
    const std::size_t bytes = chunk ? chunk->size() : 0;
    std::unique_lock lock(m_mutex);
    m_done_cv.wait(lock, [this] { return m_inflight < k_max_inflight; });
    const std::size_t w = m_queues.size();
    const bool sha = slot->sha != nullptr;
    m_queues[index % w].push_back(Task{slot, false, chunk, final});
    if (sha) {
      m_queues[(index + 1) % w].push_back(Task{slot, true, std::move(chunk), final});
    }
    m_inflight += (sha ? 2 : 1) * bytes;
    m_pending += sha ? 2 : 1;
    lock.unlock();
    m_cv.notify_all();
  }

  void run(unsigned me) {
    std::unique_lock lock(m_mutex);
    for (;;) {
      m_cv.wait(lock, [&] { return m_stop || !m_queues[me].empty(); });
      if (m_queues[me].empty()) {
        return;
      }
      Task task = std::move(m_queues[me].front());
      m_queues[me].pop_front();
      lock.unlock();
      const std::size_t bytes = task.chunk ? task.chunk->size() : 0;
      if (task.chunk) {
        if (task.sha) {
          SHA256_Update(task.slot->sha.get(), task.chunk->data(), bytes);
        } else {
          MD5_Update(task.slot->md5.get(), task.chunk->data(), bytes);
        }
      }
      if (task.final) {
        if (task.sha) {
          SHA256_Final(task.slot->sha_out.data(), task.slot->sha.get());
          task.slot->sha.reset();
        } else {
          MD5_Final(task.slot->md5_out.data(), task.slot->md5.get());
          task.slot->md5.reset();
        }
      }
      task.chunk.reset();
      lock.lock();
      m_inflight -= bytes;
      --m_pending;
      m_done_cv.notify_all();
    }
  }

  ChunkPool m_chunks; // outlives the workers: destroyed after the destructor joined them
  std::vector<std::unique_ptr<HashSlot>> m_slots; // touched by the reader only
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::condition_variable m_done_cv;
  std::vector<std::deque<Task>> m_queues;
  std::uint64_t m_inflight = 0;
  std::uint64_t m_pending = 0;
  bool m_stop = false;
  std::vector<std::thread> m_workers; // last: started once the rest exists
};

// ---------------------------------------------------------------------------------------------
// Paths

std::string join_path(const std::string& dir, std::string_view name) {
  return dir.empty() ? std::string(name) : dir + "/" + std::string(name);
}

std::pair<std::string_view, std::string_view> split_last(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) {
    return {std::string_view(), path};
  }
  return {path.substr(0, slash), path.substr(slash + 1)};
}

// What a path names in the view, for the layer model.
layer::Entry view_entry(const std::map<std::string, ImageEntry>& entries, const std::string& path) {
  return layer::lookup_in(entries, path, [](const ImageEntry& e) {
    return e.type == ImageEntry::Type::directory ? layer::Entry::Type::directory
           : e.type == ImageEntry::Type::symlink ? layer::Entry::Type::symlink
                                                 : layer::Entry::Type::other;
  });
}

layer::Walk walk(const std::map<std::string, ImageEntry>& entries, std::string_view input, bool follow_last) {
  return layer::walk_in_root(
      input, [&entries](const std::string& path) { return view_entry(entries, path); }, follow_last);
}

// ---------------------------------------------------------------------------------------------
// Building the view

// A file's digests computed on the reading thread, as its bytes pass.
class InlineHash {
public:
  InlineHash(bool md5, bool sha256) {
    if (md5) {
      m_md5.emplace();
      MD5_Init(&*m_md5);
    }
    if (sha256) {
      m_sha.emplace();
      SHA256_Init(&*m_sha);
    }
  }
  void update(const char* data, std::size_t size) {
    if (m_md5) {
      MD5_Update(&*m_md5, data, size);
    }
    if (m_sha) {
      SHA256_Update(&*m_sha, data, size);
    }
  }
  void finish(ImageEntry& e) {
    if (m_md5) {
      MD5_Final(e.md5.data(), &*m_md5);
    }
    if (m_sha) {
      SHA256_Final(e.sha256.data(), &*m_sha);
    }
  }

private:
  std::optional<MD5_CTX> m_md5;
  std::optional<SHA256_CTX> m_sha;
};

// Where a reader's files are hashed: on a pool of threads (a directory walk, whose reads wait on
// the disk), or on the reading thread itself (a layer, whose bytes come from a stream that
// already decodes on other threads: handing them on would cost a copy and a wake-up each).
enum class Hashing { pool, inline_ };

// What one reader (a layer or a directory walk) shares: the view, the limits and the hash pool.
class ViewBuilder {
public:
  ViewBuilder(ImageContents& contents, const ContentsOptions& options, std::string what, Hashing hashing)
      : m_contents(contents), m_entries(contents.mutable_entries()), m_options(options),
        m_what(std::move(what)) {
    if (options.digests && hashing == Hashing::pool) {
      m_pool.emplace(options.threads == 0 ? default_thread_count() : options.threads);
    }
    for (const auto& [path, e] : m_entries) {
      if (e.text) {
        m_metadata_bytes += e.text->size();
      }
    }
  }

  // Puts `entry` at `path`, replacing what is there (a directory replaced by something else takes
  // its subtree with it; a directory over a directory keeps both's children).
  Result<void> add(const std::string& path, ImageEntry entry) {
    if (path.size() > k_max_path) {
      return invalid_input("{}: path /{}... is longer than {} bytes", m_what, path.substr(0, 64), k_max_path);
    }
    auto it = m_entries.find(path);
    if (it != m_entries.end()) {
      if (it->second.type == ImageEntry::Type::directory && entry.type == ImageEntry::Type::directory) {
        return {};
      }
      remove(path);
    } else if (m_entries.size() >= m_options.max_entries) {
      return invalid_input("{}: the image has more than {} paths; refusing it", m_what,
                           m_options.max_entries);
    }
    m_entries.emplace(path, std::move(entry));
    return {};
  }

  // Removes `path` and everything below it, with the metadata text they kept.
  void remove(const std::string& path) {
    auto it = m_entries.find(path);
    if (it == m_entries.end()) {
      return;
    }
    forget_text(it->second);
    m_entries.erase(it);
    const std::string prefix = path + "/";
    for (auto c = m_entries.lower_bound(prefix);
         c != m_entries.end() && c->first.compare(0, prefix.size(), prefix) == 0;) {
      forget_text(c->second);
      c = m_entries.erase(c);
    }
  }

  [[nodiscard]] ImageEntry directory() const {
    ImageEntry e;
    e.type = ImageEntry::Type::directory;
    return e;
  }

  // Reads a regular file's data from `read` (a callable given a scratch buffer that returns the
  // next bytes, in that buffer or where the reader holds them; empty at the end) and hashes it,
  // keeping its text when `path` is a metadata file. `declared` is the size announced.
  // With `md5_elsewhere` (inline hashing only) the caller computes the MD5 from the bytes it saw.
  template <typename ReadFn>
  Result<ImageEntry> read_file(const std::string& path, std::uint64_t declared, ReadFn&& read,
                               bool md5_elsewhere = false) {
    ImageEntry e;
    e.type = ImageEntry::Type::file;
    const bool keep = is_metadata_path(path);
    std::string text;
    if (keep && declared > m_options.max_metadata_file) {
      return invalid_input("{}: /{} has {} bytes, more than the {} a metadata file may have", m_what, path,
                           declared, m_options.max_metadata_file);
    }
    if (!m_options.digests && !keep) {
      e.size = declared; // no digests wanted: the data is skipped, never copied
      return e;
    }
    std::size_t slot = SIZE_MAX;
    std::optional<InlineHash> hash;
    if (m_options.digests) {
      e.has_sha256 = wants_sha256_at(path);
      if (m_pool) {
        slot = m_pool->open(e.has_sha256);
      } else {
        hash.emplace(!md5_elsewhere, e.has_sha256);
      }
    }
    if (!m_pool && m_buffer.empty()) {
      m_buffer.resize(k_inline_buffer); // on first use: a view built from listings reads no file
    }
    std::uint64_t total = 0;
    for (;;) {
      LS_TRY(check_interrupted());
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(
          k_chunk, std::max<std::uint64_t>(declared - std::min(declared, total), 4096)));
      std::shared_ptr<Bytes> chunk = m_pool ? m_pool->chunks().take(want) : nullptr;
      char* scratch = chunk ? chunk->data() : m_buffer.data();
      LS_TRY_ASSIGN(std::span<const char> got, read(scratch, chunk ? chunk->size() : m_buffer.size()));
      const std::size_t n = got.size();
      if (n == 0) {
        break;
      }
      const char* buf = got.data();
      if (chunk && buf != scratch) { // bytes the reader holds: the pool needs its own copy
        chunk = m_pool->chunks().take(n);
        std::memcpy(chunk->data(), buf, n);
      } else if (chunk) {
        chunk->resize(n);
      }
      total += n;
      m_bytes += n;
      if (m_bytes > m_options.max_layer_bytes) {
        return invalid_input("{}: more than {} bytes of file data; refusing it", m_what,
                             m_options.max_layer_bytes);
      }
      if (keep) {
        if (total > m_options.max_metadata_file) {
          return invalid_input("{}: /{} is larger than the {} bytes a metadata file may have", m_what, path,
                               m_options.max_metadata_file);
        }
        text.append(buf, n);
      }
      if (m_pool) {
        m_pool->feed(slot, std::move(chunk));
      } else if (hash) {
        hash->update(buf, n);
      }
    }
    if (m_pool) {
      m_pool->close(slot);
      m_pending.push_back(path);
    } else if (hash) {
      hash->finish(e);
    }
    if (m_options.digests) {
      m_contents.bytes_hashed += total;
    }
    e.size = total;
    e.hash_slot = slot;
    if (keep) {
      e.text = std::make_shared<const std::string>(std::move(text));
      LS_TRY(count_text(e));
    }
    return e;
  }

  // Whether the file at `path` gets a SHA-256 besides its MD5.
  [[nodiscard]] bool wants_sha256_at(const std::string& path) const {
    return m_options.digests &&
           (m_options.sha256_all || wants_sha256(path) ||
            (m_options.sha256_paths != nullptr && m_options.sha256_paths->count(path) != 0));
  }

  // Counts a file's kept text against the view's limit.
  Result<void> count_text(const ImageEntry& e) {
    if (!e.text) {
      return {};
    }
    m_metadata_bytes += e.text->size();
    if (m_metadata_bytes > m_options.max_metadata_total) {
      return invalid_input("{}: more than {} bytes of package metadata; refusing it", m_what,
                           m_options.max_metadata_total);
    }
    return {};
  }

  // Waits for the hashes and stores them in the entries still in the view.
  void finish() {
    if (!m_pool) {
      m_contents.has_digests = m_contents.has_digests || m_options.digests;
      return;
    }
    m_pool->wait();
    for (const std::string& path : m_pending) {
      auto it = m_entries.find(path);
      if (it == m_entries.end() || it->second.hash_slot == SIZE_MAX) {
        continue;
      }
      const HashSlot& s = m_pool->slot(it->second.hash_slot);
      it->second.md5 = s.md5_out;
      if (it->second.has_sha256) {
        it->second.sha256 = s.sha_out;
      }
      it->second.hash_slot = SIZE_MAX;
    }
    m_contents.has_digests = true;
  }

  // Records that the entry at `path` waits for a slot's digests (a hard link to a file of this pass).
  void note_pending(const std::string& path, const ImageEntry& e) {
    if (e.hash_slot != SIZE_MAX) {
      m_pending.push_back(path);
    }
  }

  void forget_text(const ImageEntry& e) {
    if (e.text) {
      m_metadata_bytes -= std::min<std::uint64_t>(m_metadata_bytes, e.text->size());
    }
  }

  [[nodiscard]] std::map<std::string, ImageEntry>& entries() { return m_entries; }
  [[nodiscard]] const std::string& what() const { return m_what; }

private:
  ImageContents& m_contents;
  std::map<std::string, ImageEntry>& m_entries;
  const ContentsOptions& m_options;
  std::string m_what;
  std::optional<HashPool> m_pool;
  Bytes m_buffer; ///< what a file's bytes are read into when they are hashed inline
  std::vector<std::string> m_pending;
  std::uint64_t m_bytes = 0;
  std::uint64_t m_metadata_bytes = 0;
};

// A layer read ahead of being applied (list_layer): its members in order, each regular file with
// its digests (and its text, for a metadata file) computed as its bytes passed. Several layers are
// listed at once; the view is then built from the listings in layer order. What the listing
// decided by a member's name (keep the text, compute a SHA-256) is checked against where the
// member lands; when they differ (a parent is a symbolic link to a metadata directory) the image
// is read again member by member (ListingMismatch).
struct ListedMember {
  layer::Member member;
  std::optional<ImageEntry> file; ///< a regular file's size, digests and text
};

struct LayerListing {
  std::vector<ListedMember> members;
  std::optional<Error> error; ///< what stopped the listing, after `members`
  std::uint64_t bytes_hashed = 0;
};

struct ListingMismatch {
  std::string path;
};

// The view as the layer model (support/oci/layer_model.hpp) sees it. A file's data is read from
// the layer and hashed when the model writes the file, or, for a listed layer, taken from its
// listing.
class ContentsTree final : public layer::Tree {
public:
  ContentsTree(ViewBuilder& builder, TarReader& reader) : m_b(builder), m_reader(&reader) {}
  explicit ContentsTree(ViewBuilder& builder) : m_b(builder) {}

  // The listed member being applied (listing mode).
  void set_listed(const ListedMember* m) { m_listed = m; }
  [[nodiscard]] const std::optional<ListingMismatch>& mismatch() const { return m_mismatch; }

  [[nodiscard]] layer::Entry lookup(const std::string& path) const override {
    return view_entry(m_b.entries(), path);
  }

  [[nodiscard]] std::vector<std::string> children(const std::string& path) const override {
    std::vector<std::string> out;
    const std::string prefix = path.empty() ? std::string() : path + "/";
    const auto& entries = m_b.entries();
    for (auto it = entries.lower_bound(prefix);
         it != entries.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      if (it->first.find('/', prefix.size()) == std::string::npos) {
        out.push_back(it->first.substr(prefix.size()));
      }
    }
    return out;
  }

  void remove(const std::string& path) override { m_b.remove(path); }

  Result<void> make_implied_directory(const std::string& path, const layer::Member& /*m*/) override {
    return m_b.add(path, m_b.directory());
  }

  Result<void> put(const std::string& path, const layer::Member& m) override {
    if (m.kind == layer::Member::Kind::root) {
      return {};
    }
    ImageEntry e;
    switch (m.kind) {
    case layer::Member::Kind::directory:
      e.type = ImageEntry::Type::directory;
      break;
    case layer::Member::Kind::symlink:
      e.type = ImageEntry::Type::symlink;
      e.link_target = m.link;
      break;
    case layer::Member::Kind::file: {
      if (m_reader == nullptr) {
        LS_TRY_ASSIGN(e, listed_file(path));
        break;
      }
      auto read = [this](char* scratch, std::size_t size) { return m_reader->read_view(scratch, size); };
      LS_TRY_ASSIGN(e, m_b.read_file(path, m.size, read));
      break;
    }
    case layer::Member::Kind::root:
    case layer::Member::Kind::hardlink:
    case layer::Member::Kind::fifo:
    case layer::Member::Kind::whiteout:
    case layer::Member::Kind::opaque:
    case layer::Member::Kind::skipped:
      e.type = ImageEntry::Type::other;
      break;
    }
    return m_b.add(path, std::move(e));
  }

  Result<void> link(const std::string& path, const std::string& target, const layer::Member& /*m*/) override {
    auto it = m_b.entries().find(target);
    if (it == m_b.entries().end()) {
      return internal_error("{}: hard link target '{}' vanished", m_b.what(), target);
    }
    ImageEntry e = it->second;
    m_b.note_pending(path, e);
    return m_b.add(path, std::move(e));
  }

private:
  // The listed file for `path`, where the member lands.
  Result<ImageEntry> listed_file(const std::string& path) {
    if (m_listed == nullptr || !m_listed->file) {
      return internal_error("{}: a listed file member has no data", m_b.what());
    }
    ImageEntry e = *m_listed->file;
    const bool keep = is_metadata_path(path);
    if ((keep && !e.text) || (m_b.wants_sha256_at(path) && !e.has_sha256)) {
      m_mismatch = ListingMismatch{path};
      return internal_error("{}: /{} needs what its listing did not keep", m_b.what(), path);
    }
    if (!keep) {
      e.text.reset();
    }
    LS_TRY(m_b.count_text(e));
    return e;
  }

  ViewBuilder& m_b;
  TarReader* m_reader = nullptr;          ///< streaming mode: the member's data is read here
  const ListedMember* m_listed = nullptr; ///< listing mode: the member being applied
  std::optional<ListingMismatch> m_mismatch;
};

// ---------------------------------------------------------------------------------------------
// Directories

int open_beneath(int root_fd, const std::string& rel, int flags) {
  struct open_how how {};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    long fd = ::syscall(SYS_openat2, root_fd, rel.empty() ? "." : rel.c_str(), &how, sizeof how);
    if (fd >= 0) {
      return static_cast<int>(fd);
    }
    if ((errno != EINTR && errno != EAGAIN) || attempt > 100) {
      return -1;
    }
  }
}

// The names in a directory, sorted bytewise.
Result<std::vector<std::string>> list_directory(int dir_fd, const std::string& where) {
  LS_TRY_ASSIGN(std::vector<std::string> names, directory_names(dir_fd, where));
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace

Result<void> walk_directory_into(ImageContents& contents, const fs::path& root, const std::string& what,
                                 const ContentsOptions& options, bool owned) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return errno_error("can't open the image root " + what, errno);
  }
  UniqueFd root_fd(fd);
  ViewBuilder builder(contents, options, what, Hashing::pool);
  std::map<std::pair<dev_t, ino_t>, std::string> links; // hard links: the first path of an inode
  auto walked = [&]() -> Result<void> {
    std::vector<std::pair<std::string, std::size_t>> todo{{"", 0}}; // directories still to list
    while (!todo.empty()) {
      auto [dir, depth] = std::move(todo.back());
      todo.pop_back();
      if (depth > k_max_depth) {
        return invalid_input("{}: directories nested more than {} deep at /{}", what, k_max_depth, dir);
      }
      int dfd = open_beneath(root_fd.get(), dir, O_RDONLY | O_DIRECTORY);
      if (dfd < 0 && errno == EACCES && owned && !dir.empty() &&
          ::fchmodat(root_fd.get(), dir.c_str(), 0700, AT_SYMLINK_NOFOLLOW) == 0) {
        dfd = open_beneath(root_fd.get(), dir, O_RDONLY | O_DIRECTORY);
      }
      if (dfd < 0) {
        return errno_error(fmt::format("can't open directory /{} in {}", dir, what), errno);
      }
      UniqueFd dir_fd(dfd);
      LS_TRY_ASSIGN(std::vector<std::string> names,
                    list_directory(dir_fd.get(), fmt::format("/{} in {}", dir, what)));
      // Pushed in reverse so that directories are listed in sorted order (the order never shows
      // in the result, which is a sorted map; it keeps I/O patterns repeatable).
      std::vector<std::pair<std::string, std::size_t>> subdirs;
      for (const std::string& name : names) {
        LS_TRY(check_interrupted());
        const std::string path = join_path(dir, name);
        struct stat st {};
        if (::fstatat(dir_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
          return errno_error(fmt::format("can't stat /{} in {}", path, what), errno);
        }
        ImageEntry e;
        if (S_ISDIR(st.st_mode)) {
          e.type = ImageEntry::Type::directory;
          subdirs.emplace_back(path, depth + 1);
        } else if (S_ISLNK(st.st_mode)) {
          e.type = ImageEntry::Type::symlink;
          std::string target(k_max_path + 1, '\0');
          ssize_t n = ::readlinkat(dir_fd.get(), name.c_str(), target.data(), target.size());
          if (n < 0) {
            return errno_error(fmt::format("can't read the link /{} in {}", path, what), errno);
          }
          if (static_cast<std::size_t>(n) > k_max_path) {
            return invalid_input("{}: the link /{} has a target longer than {} bytes", what, path,
                                 k_max_path);
          }
          target.resize(static_cast<std::size_t>(n));
          e.link_target = std::move(target);
        } else if (S_ISREG(st.st_mode)) {
          auto key = std::make_pair(st.st_dev, st.st_ino);
          if (st.st_nlink > 1) {
            if (auto it = links.find(key); it != links.end()) {
              auto first = builder.entries().find(it->second);
              if (first != builder.entries().end()) {
                e = first->second;
                builder.note_pending(path, e);
                LS_TRY(builder.add(path, std::move(e)));
                continue;
              }
            }
            links.emplace(key, path);
          }
          if (!options.digests && !is_metadata_path(path)) {
            e.type = ImageEntry::Type::file; // diff: only the metadata files are read
            e.size = static_cast<std::uint64_t>(st.st_size);
            LS_TRY(builder.add(path, std::move(e)));
            continue;
          }
          int ffd = ::openat(dir_fd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
          if (ffd < 0 && errno == EACCES && owned &&
              ::fchmodat(dir_fd.get(), name.c_str(), (st.st_mode & 07777) | S_IRUSR, AT_SYMLINK_NOFOLLOW) ==
                  0) {
            ffd = ::openat(dir_fd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
          }
          if (ffd < 0) {
            return errno_error(fmt::format("can't open /{} in {}", path, what), errno);
          }
          UniqueFd file(ffd);
          const std::string where = fmt::format("/{} in {}", path, what);
          LS_TRY_ASSIGN(
              e, builder.read_file(path, static_cast<std::uint64_t>(st.st_size),
                                   [&](char* buf, std::size_t size) -> Result<std::span<const char>> {
                                     LS_TRY_ASSIGN(std::size_t n, read_some(file.get(), buf, size, where));
                                     return std::span<const char>(buf, n);
                                   }));
        } else {
          e.type = ImageEntry::Type::other;
        }
        LS_TRY(builder.add(path, std::move(e)));
      }
      for (auto it = subdirs.rbegin(); it != subdirs.rend(); ++it) {
        todo.push_back(std::move(*it));
      }
    }
    return {};
  }();
  builder.finish();
  return walked;
}

std::string hex_of(const std::uint8_t* bytes, std::size_t size) {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += k_hex[bytes[i] >> 4];
    out += k_hex[bytes[i] & 15];
  }
  return out;
}

bool wants_sha256(std::string_view path) {
  const std::size_t last = path.rfind('/');
  if (last == std::string_view::npos) {
    return false;
  }
  std::size_t i = 0;
  while (i < last) {
    const std::size_t j = std::min(path.find('/', i), last);
    const std::string_view c = path.substr(i, j - i);
    if (c.ends_with("-packages") || c == "bin" || c == "sbin" || c == "include") {
      return true;
    }
    i = j + 1;
  }
  return false;
}

bool is_metadata_path(std::string_view path) {
  if (path == "var/lib/dpkg/status" || path == "var/lib/dpkg/diversions" || path == "var/lib/dpkg/arch" ||
      path == "var/lib/dpkg/statoverride" || path == "etc/apt/sources.list" || path == "etc/passwd" ||
      path == "etc/group" || path == "etc/os-release" || path == "usr/lib/os-release") {
    return true;
  }
  if (path.starts_with("usr/share/doc/") && path.ends_with("/copyright")) {
    // A Debian package's copyright file (its licenses, for an SBOM): directly in its doc directory.
    const std::string_view name = path.substr(14, path.size() - 14 - 10);
    return !name.empty() && name.find('/') == std::string_view::npos;
  }
  // NAME directly inside `dir`, ending in one of `exts` (any name when `exts` is empty).
  auto directly_in = [&](std::string_view dir, std::initializer_list<std::string_view> exts) {
    if (path.substr(0, dir.size()) != dir) {
      return false;
    }
    std::string_view name = path.substr(dir.size());
    if (name.empty() || name.find('/') != std::string_view::npos) {
      return false;
    }
    return exts.size() == 0 || std::any_of(exts.begin(), exts.end(), [&](std::string_view ext) {
             return name.size() > ext.size() && name.substr(name.size() - ext.size()) == ext;
           });
  };
  if (directly_in("var/lib/dpkg/info/", {".md5sums", ".list"}) || directly_in("var/lib/dpkg/triggers/", {}) ||
      directly_in("etc/apt/sources.list.d/", {".list", ".sources"})) {
    return true;
  }
  if (path.substr(0, 13) == "var/lib/dpkg/" || path.substr(0, 8) == "etc/apt/") {
    return false;
  }
  auto [dir, base] = split_last(path);
  if (base == "patchlevel.h") {
    auto [include, python] = split_last(dir);
    return python.substr(0, 8) == "python3." && split_last(include).second == "include";
  }
  if (base.size() > 5 && base.substr(base.size() - 5) == ".json" && dir.size() > 11 &&
      dir.substr(dir.size() - 11) == "/conda-meta") {
    return true; // a conda package's record (runner/audit/conda_meta.hpp)
  }
  if (base != "METADATA" && base != "RECORD" && base != "INSTALLER") {
    return false;
  }
  auto [site, dist_info] = split_last(dir);
  return dist_info.size() > k_dist_info_suffix.size() &&
         dist_info.substr(dist_info.size() - k_dist_info_suffix.size()) == k_dist_info_suffix;
}

const ImageEntry* ImageContents::resolve(std::string_view path, FollowLast follow,
                                         std::string* resolved) const {
  static const ImageEntry k_root = [] {
    ImageEntry e;
    e.type = ImageEntry::Type::directory;
    return e;
  }();
  layer::Walk w = walk(m_entries, path, follow == FollowLast::yes);
  if (w.status != layer::Walk::Status::ok) {
    return nullptr;
  }
  if (resolved != nullptr) {
    *resolved = w.path;
  }
  if (w.path.empty()) {
    return &k_root;
  }
  auto it = m_entries.find(w.path);
  return it == m_entries.end() ? nullptr : &it->second;
}

const std::string* ImageContents::text(std::string_view path) const {
  const ImageEntry* e = resolve(path, FollowLast::yes);
  return e != nullptr && e->type == ImageEntry::Type::file && e->text ? e->text.get() : nullptr;
}

namespace {

// Applies the layer `reader` reads (a plain tar or a LayerStream) to the view, reading each file's
// data as the model writes it: the way an image is read again after a ListingMismatch.
Result<void> apply_tar(ImageContents& contents, TarReader reader, const std::string& what,
                       const ContentsOptions& options) {
  ViewBuilder builder(contents, options, what, Hashing::inline_);
  ContentsTree tree(builder, reader);
  layer::LayerApplier applier(tree, what);
  std::uint64_t members = 0;
  auto applied = [&]() -> Result<void> {
    for (;;) {
      LS_TRY(check_interrupted());
      LS_TRY_ASSIGN(std::optional<layer::Member> m, reader.next_layer_member());
      if (!m) {
        return {};
      }
      if (++members > options.max_entries) {
        return invalid_input("{}: more than {} members; refusing the layer", what, options.max_entries);
      }
      LS_TRY(applier.apply(*m));
    }
  }();
  builder.finish();
  return applied;
}

// Small files' MD5s, computed sixteen at a time (support/md5_lanes): their bytes are gathered in
// an arena as they pass and hashed in SIMD lanes whenever it fills. A file is small up to 1 MiB:
// in a Debian image that is about two thirds of the bytes.
class SmallFileMd5 {
public:
  static constexpr std::size_t k_max_file = 1U << 20;
  static constexpr std::size_t k_arena = 16U << 20;

  SmallFileMd5() : m_arena(arenas().take()) {}
  ~SmallFileMd5() { arenas().give(std::move(m_arena)); }
  SmallFileMd5(const SmallFileMd5&) = delete;
  SmallFileMd5& operator=(const SmallFileMd5&) = delete;
  SmallFileMd5(SmallFileMd5&&) = delete;
  SmallFileMd5& operator=(SmallFileMd5&&) = delete;

  [[nodiscard]] static bool takes(std::uint64_t declared) { return declared <= k_max_file; }

  // Makes room for `declared` bytes, hashing what waits into `listing` when the arena is full.
  void make_room(std::uint64_t declared, LayerListing& listing) {
    if (m_used + declared > k_arena) {
      flush(listing);
    }
  }
  [[nodiscard]] std::size_t mark() const { return m_used; }
  // Keeps a file's next bytes; false when they overflow the room made for it.
  [[nodiscard]] bool keep(std::span<const char> bytes) {
    if (m_used + bytes.size() > k_arena) {
      return false;
    }
    if (!bytes.empty()) {
      std::memcpy(m_arena.get() + m_used, bytes.data(), bytes.size());
    }
    m_used += bytes.size();
    return true;
  }
  // The bytes kept since `from` are listing.members[member]'s file.
  void file(std::size_t from, std::size_t member) {
    m_pending.emplace_back(m_lanes.add(m_arena.get() + from, m_used - from), member);
  }
  void flush(LayerListing& listing) {
    m_lanes.run();
    for (const auto& [lane_index, member] : m_pending) {
      listing.members[member].file->md5 = m_lanes.digest(lane_index);
    }
    m_lanes.clear();
    m_pending.clear();
    m_used = 0;
  }

private:
  static BufferRecycler& arenas() {
    static BufferRecycler r(k_arena, 4);
    return r;
  }

  BigBuffer m_arena; // k_arena bytes; the lanes point into it
  std::size_t m_used = 0;
  Md5Lanes m_lanes;
  std::vector<std::pair<std::size_t, std::size_t>> m_pending; // lane message -> listing member
};

// Reads the layer `reader` reads into a listing, hashing each file on this thread. A failure of
// the layer itself ends the listing and is reported once the members before it are applied, as
// reading member by member would; an interrupt is returned at once.
Result<LayerListing> list_layer(TarReader reader, const std::string& what, const ContentsOptions& options,
                                const std::atomic<bool>* cancel = nullptr) {
  ImageContents scratch; // read_file's counters; the view is built from the listing later
  ViewBuilder files(scratch, options, what, Hashing::inline_);
  std::optional<SmallFileMd5> small;
  if (options.digests) {
    small.emplace();
  }
  LayerListing listing;
  auto read_member = [&](layer::Member member) -> std::optional<Error> {
    ListedMember lm{std::move(member), std::nullopt};
    if (lm.member.kind != layer::Member::Kind::file) {
      listing.members.push_back(std::move(lm));
      return std::nullopt;
    }
    const bool batched = small && SmallFileMd5::takes(lm.member.size);
    std::size_t from = 0;
    if (batched) {
      small->make_room(lm.member.size, listing);
      from = small->mark();
    }
    auto read = [&](char* scratch_buf, std::size_t size) -> Result<std::span<const char>> {
      LS_TRY_ASSIGN(std::span<const char> got, reader.read_view(scratch_buf, size));
      if (batched && !small->keep(got)) {
        return invalid_input("{}: member '{}' has more data than its header's {} bytes", what, lm.member.raw,
                             lm.member.size);
      }
      return got;
    };
    auto e = files.read_file(lm.member.path, lm.member.size, read, batched);
    if (!e) {
      return std::move(e).error();
    }
    lm.file = std::move(*e);
    listing.members.push_back(std::move(lm));
    if (batched) {
      small->file(from, listing.members.size() - 1);
    }
    return std::nullopt;
  };
  listing.error = [&]() -> std::optional<Error> {
    for (;;) {
      if (auto stop = check_interrupted(); !stop) {
        return std::move(stop).error();
      }
      if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
        return std::nullopt; // an earlier layer failed: nobody reads this listing
      }
      auto m = reader.next_layer_member();
      if (!m) {
        return std::move(m).error();
      }
      if (!*m) {
        return std::nullopt;
      }
      if (listing.members.size() >= options.max_entries) {
        return invalid_input("{}: more than {} members; refusing the layer", what, options.max_entries);
      }
      if (auto failed = read_member(std::move(**m))) {
        return failed;
      }
    }
  }();
  if (small) {
    small->flush(listing);
  }
  if (listing.error && listing.error->code == ExitCode::interrupted) {
    return *listing.error;
  }
  listing.bytes_hashed = scratch.bytes_hashed;
  return listing;
}

// Applies a listing to the view; a ListingMismatch is set in `mismatch` (and an error returned).
Result<void> apply_listing(ImageContents& contents, const LayerListing& listing, const std::string& what,
                           const ContentsOptions& options, std::optional<ListingMismatch>& mismatch) {
  ViewBuilder builder(contents, options, what, Hashing::inline_);
  ContentsTree tree(builder);
  layer::LayerApplier applier(tree, what);
  for (const ListedMember& lm : listing.members) {
    LS_TRY(check_interrupted());
    tree.set_listed(&lm);
    if (auto applied = applier.apply(lm.member); !applied) {
      mismatch = tree.mismatch();
      return applied;
    }
  }
  builder.finish();
  contents.bytes_hashed += listing.bytes_hashed;
  if (listing.error) {
    return *listing.error;
  }
  return {};
}

} // namespace

Result<void> apply_layer_to_contents(ImageContents& contents, const fs::path& tar, const std::string& what,
                                     const ContentsOptions& options) {
  LS_TRY_ASSIGN(TarReader reader, TarReader::open(tar, what));
  LS_TRY_ASSIGN(LayerListing listing, list_layer(std::move(reader), what, options));
  const std::map<std::string, ImageEntry> before = contents.entries(); // to start again from
  const std::uint64_t hashed_before = contents.bytes_hashed;
  std::optional<ListingMismatch> mismatch;
  auto applied = apply_listing(contents, listing, what, options, mismatch);
  if (!mismatch) {
    return applied;
  }
  contents.mutable_entries() = before;
  contents.bytes_hashed = hashed_before;
  LS_TRY_ASSIGN(TarReader again, TarReader::open(tar, what));
  return apply_tar(contents, std::move(again), what, options);
}

Result<void> add_directory_to_contents(ImageContents& contents, const fs::path& root,
                                       const ContentsOptions& options) {
  return walk_directory_into(contents, root, root.string(), options, false);
}

namespace {

// "IMAGE: layer 2/6 (sha256:...)", how every message names layer `i`.
std::string layer_what(const ImageContents& contents, const OpenedImage& opened, std::size_t i) {
  return fmt::format("{}: layer {}/{} ({})", contents.what, i + 1, opened.manifest.layers.size(),
                     opened.manifest.layers[i].digest.str());
}

// Layer `i` of the image, opened where it lies: decompressed as it streams, its digest and size
// checked when it ends.
Result<LayerStream> open_layer(const ImageContents& contents, ImageSource& source, const OpenedImage& opened,
                               std::size_t i) {
  const Descriptor& layer = opened.manifest.layers[i];
  std::string what = layer_what(contents, opened, i);
  auto compression = layer_compression(layer.media_type);
  if (!compression) {
    return invalid_input("{}: {}", what, compression.error().message);
  }
  if (*compression == Compression::none && i < opened.diff_ids.size() && opened.diff_ids[i] != layer.digest) {
    return invalid_input("{}: an uncompressed layer's digest must be its diff_id ({})", what,
                         opened.diff_ids[i].str());
  }
  LS_TRY_ASSIGN(std::unique_ptr<BlobReader> blob, source.open_blob(layer));
  LayerCheck check{layer.digest, static_cast<std::uint64_t>(layer.size), std::nullopt, std::nullopt};
  if (*compression != Compression::none) {
    check.max_out = max_layer_expansion(static_cast<std::uint64_t>(layer.size));
  }
  log::debug("verify: reading {}", what);
  return LayerStream::open(std::move(blob), layer_codec(*compression), std::move(what), check);
}

// After the base image's layers (dev.lockstep.base.layers): what the base had.
void snapshot_base(ImageContents& contents, std::size_t applied) {
  if (contents.base_layers == 0 || applied != contents.base_layers) {
    return;
  }
  if (const std::string* status = contents.text("var/lib/dpkg/status")) {
    contents.base_dpkg_status = *status;
  }
  for (const auto& [path, entry] : contents.entries()) {
    if (entry.type == ImageEntry::Type::directory && path.ends_with(k_dist_info_suffix)) {
      contents.base_dist_infos.insert(path);
    }
  }
}

// Lists the image's layers, several at once (each one read once, where it lies), and applies the
// listings to the view in layer order as they become ready. The first failure in layer order is
// the one reported, as reading the layers one after the other would report it.
Result<void> read_layers(ImageContents& contents, ImageSource& source, const OpenedImage& opened,
                         const ContentsOptions& options, std::optional<ListingMismatch>& mismatch) {
  const std::size_t n = opened.manifest.layers.size();
  std::vector<std::optional<Result<LayerListing>>> listings(n);
  std::mutex mutex; // guards `listings`, `next`, `stop` and the source's open_blob
  std::condition_variable ready;
  std::size_t next = 0;
  bool stop = false;
  std::atomic<bool> cancel = false;
  auto lister = [&] {
    for (;;) {
      std::size_t i = 0;
      Result<LayerStream> stream = internal_error("unset");
      {
        std::lock_guard lock(mutex);
        if (stop || next == n) {
          return;
        }
        i = next++;
        stream = open_layer(contents, source, opened, i);
      }
      Result<LayerListing> listing = stream ? [&]() -> Result<LayerListing> {
        const std::string what = stream->what();
        LS_TRY_ASSIGN(TarReader reader, TarReader::open_layer(std::move(*stream)));
        return list_layer(std::move(reader), what, options, &cancel);
      }()
          : Result<LayerListing>(std::move(stream).error());
      std::lock_guard lock(mutex);
      listings[i] = std::move(listing);
      ready.notify_all();
    }
  };
  const unsigned threads = options.threads == 0 ? default_thread_count() : options.threads;
  std::vector<std::thread> listers;
  for (std::size_t t = 0; t < std::min<std::size_t>(n, std::max(1U, threads)); ++t) {
    listers.emplace_back(lister);
  }
  auto applied = [&]() -> Result<void> {
    for (std::size_t i = 0; i < n; ++i) {
      std::unique_lock lock(mutex);
      ready.wait(lock, [&] { return listings[i].has_value(); });
      Result<LayerListing> listing = std::move(*listings[i]);
      lock.unlock();
      if (!listing) {
        return std::move(listing).error();
      }
      LS_TRY(apply_listing(contents, *listing, layer_what(contents, opened, i), options, mismatch));
      snapshot_base(contents, i + 1);
    }
    return {};
  }();
  {
    std::lock_guard lock(mutex);
    stop = true;
  }
  cancel = true;
  for (auto& t : listers) {
    t.join();
  }
  return applied;
}

} // namespace

Result<void> read_image_layers(ImageContents& contents, ImageSource& source, const OpenedImage& opened,
                               const ContentsOptions& options) {
  contents.layers = opened.manifest.layers.size();
  std::optional<ListingMismatch> mismatch;
  auto read = read_layers(contents, source, opened, options, mismatch);
  if (!mismatch) {
    return read;
  }
  // A member landed where its listing guessed wrong: every layer again, member by member.
  log::debug("verify: /{} needs a second reading of {}", mismatch->path, contents.what);
  contents.mutable_entries().clear();
  contents.bytes_hashed = 0;
  const std::size_t n = opened.manifest.layers.size();
  for (std::size_t i = 0; i < n; ++i) {
    LS_TRY_ASSIGN(LayerStream stream, open_layer(contents, source, opened, i));
    const std::string what = stream.what();
    LS_TRY_ASSIGN(TarReader reader, TarReader::open_layer(std::move(stream)));
    LS_TRY(apply_tar(contents, std::move(reader), what, options));
    snapshot_base(contents, i + 1);
  }
  return {};
}

Result<ImageContents> read_opened_image(ImageSource& source, const OpenedImage& opened, std::string what,
                                        const ContentsOptions& options) {
  ImageContents contents;
  contents.what = std::move(what);
  contents.digest = opened.manifest_digest;
  const nlohmann::json& config = opened.config;
  LS_TRY_ASSIGN(
      contents.labels,
      config_labels(config.is_object() && config.contains("config") ? config["config"] : nlohmann::json(),
                    contents.what));
  if (auto it = opened.manifest.annotations.find(std::string(k_annotation_lock_digest));
      it != opened.manifest.annotations.end()) {
    contents.lock_digest = it->second;
  }
  if (auto it = opened.manifest.annotations.find(std::string(k_annotation_base_layers));
      it != opened.manifest.annotations.end()) {
    const std::string& n = it->second;
    if (!n.empty() && n.size() < 6 && n.find_first_not_of("0123456789") == std::string::npos) {
      contents.base_layers = std::stoul(n);
    }
  }
  contents.architecture = opened.platform.architecture;
  LS_TRY(read_image_layers(contents, source, opened, options));
  return contents;
}

} // namespace lockstep::oci
