#pragma once
// A content-addressed blob store on the local disk, at the root its caller names (lockstep's is
// envspec/settings's store_root(): ~/.cache/lockstep, or $LOCKSTEP_CACHE).
//
// Layout:  ROOT/blobs/sha256/<hex>   complete blobs, read-only, named by the sha256 of their bytes
//          ROOT/records/<ns>/<key>   small JSON records (the layer cache), written atomically
//          ROOT/tmp/                 writes in progress; never visible under blobs/
// A blob is written to tmp/, fsynced, and renamed into blobs/ only once its digest is known (and
// matches the expected one, if given), so a killed write never leaves a visible blob. Two builds
// sharing the store may write the same blob at once: both renames publish identical bytes.
// Reads verify the digest while streaming; a blob that fails verification is removed.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/system/fs.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep {

/// A digest and byte count of a stored blob.
struct BlobInfo {
  Digest digest;
  std::int64_t size = 0;
};

class BlobStore {
public:
  /// Opens (creating) the store at `root`.
  static Result<BlobStore> open(const std::filesystem::path& root);

  [[nodiscard]] const std::filesystem::path& root() const { return m_root; }
  /// Where the blob lives (whether or not it exists).
  [[nodiscard]] std::filesystem::path blob_path(const Digest& digest) const;
  /// True if the blob exists (and has `size` bytes, when given). Does not rehash.
  [[nodiscard]] bool has(const Digest& digest, std::optional<std::int64_t> size = std::nullopt) const;

  /// Streams a new blob into the store.
  class Writer {
  public:
    Writer(Writer&&) noexcept = default;
    Writer& operator=(Writer&&) = delete;
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;
    ~Writer() = default;

    Result<void> write(const void* data, std::size_t size);
    Result<void> write(std::string_view data) { return write(data.data(), data.size()); }
    [[nodiscard]] std::int64_t size() const { return m_size; }
    /// The bytes a killed process had downloaded that this writer continues (resume_write).
    [[nodiscard]] std::int64_t resumed() const { return m_resumed; }
    /// Drops what was written: the blob starts over.
    Result<void> restart();
    /// Publishes the blob. With `expected`, a different digest (or size) is an invalid_input error
    /// and nothing is published.
    Result<BlobInfo> commit(const std::optional<Digest>& expected = std::nullopt,
                            std::optional<std::int64_t> expected_size = std::nullopt);

  private:
    friend class BlobStore;
    Writer(const BlobStore* store, AtomicFile file) : m_store(store), m_file(std::move(file)) {}
    const BlobStore* m_store;
    AtomicFile m_file;
    Sha256 m_hash;
    std::int64_t m_size = 0;
    std::int64_t m_resumed = 0;
  };

  /// Starts writing a blob.
  Result<Writer> begin_write() const;
  /// Removes the partial download of `digest` (resume_write) unless a process is writing it.
  void drop_partial(const Digest& digest) const;
  /// Starts or continues writing the blob `digest` of `size` bytes in `tmp/partial-HEX`, which a
  /// download killed midway leaves behind (SIGINT and errors remove it): the writer holds its bytes
  /// (rehashed) and appends. A partial file longer than `size` starts over; one another process is
  /// writing gives an ordinary writer. Any commit of `digest` removes its partial file.
  Result<Writer> resume_write(const Digest& digest, std::int64_t size) const;
  /// Stores `bytes` and returns its digest.
  Result<BlobInfo> put(std::string_view bytes) const;
  /// Stores what the open file `fd` holds (read to its end, or until it has more than
  /// `expected_size` bytes), published only when its digest is `expected` (and its size
  /// `expected_size`, when given): else invalid_input, nothing published. `what` names the file in
  /// read errors. Stops with ExitCode::interrupted on SIGINT/SIGTERM.
  Result<BlobInfo> put_file(int fd, const Digest& expected, std::optional<std::int64_t> expected_size,
                            const std::string& what) const;
  /// Reads a whole blob of at most `max_size` bytes, verifying its digest.
  Result<std::string> read(const Digest& digest, std::uint64_t max_size = 64ULL << 20) const;
  /// Rehashes a stored blob; a corrupt blob is removed and reported.
  Result<void> verify(const Digest& digest) const;
  /// Places the blob at `dest` (hard link where possible, else a copy). Checks the size.
  Result<void> export_to(const Digest& digest, std::int64_t size, const std::filesystem::path& dest) const;

  /// A small record under ROOT/records/NS/KEY, or nullopt if absent.
  [[nodiscard]] std::optional<std::string> get_record(std::string_view ns, std::string_view key,
                                                      std::uint64_t max_size = 1 << 20) const;
  /// Writes a record atomically; durably unless `durable` is false (records that readers check and
  /// can do without: fetched metadata, cached index pages).
  Result<void> put_record(std::string_view ns, std::string_view key, std::string_view value,
                          bool durable = true) const;

  /// Records written one at a time on a thread of their own, unsynced (see put_record), in the
  /// order given, while the caller goes on: threads that fetch in parallel hand their records
  /// here instead of creating files in one directory at once (which contends on it). The
  /// destructor finishes what is queued. A record that can't be written is dropped (logged at
  /// debug level): these are caches.
  class RecordQueue {
  public:
    explicit RecordQueue(const BlobStore& store);
    ~RecordQueue();
    RecordQueue(const RecordQueue&) = delete;
    RecordQueue& operator=(const RecordQueue&) = delete;
    void put(std::string ns, std::string key, std::string value);

  private:
    struct Shared;
    std::unique_ptr<Shared> m_shared;
  };

private:
  explicit BlobStore(std::filesystem::path root) : m_root(std::move(root)) {}
  std::filesystem::path m_root;
};

} // namespace lockstep
