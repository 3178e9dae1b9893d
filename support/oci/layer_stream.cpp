#include "support/oci/layer_stream.hpp"

#include "support/base/buffers.hpp"
#include "support/base/interrupt.hpp"
#include "support/codec/compress.hpp"

#include <fmt/format.h>
#include <libdeflate.h>
#include <zstd.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace lockstep::oci {

namespace {

// The input window: refilled whenever less than half of it is ahead, so a gzip member of up to
// k_window / 2 compressed bytes is always whole in it (lockstep writes members of 1 MiB).
constexpr std::size_t k_window = 8U << 20;
// One gzip member's output when libdeflate decodes it whole; a bigger member goes to zlib.
constexpr std::size_t k_member_out = 4U << 20;
// What zlib and libzstd produce per step.
constexpr std::size_t k_stream_out = 1U << 20;

class FileBlobReader final : public BlobReader {
public:
  FileBlobReader(UniqueFd fd, std::string what) : m_fd(std::move(fd)), m_what(std::move(what)) {}
  Result<std::size_t> read(void* data, std::size_t size) override {
    return read_some(m_fd.get(), data, size, m_what);
  }
  [[nodiscard]] int file_descriptor() const override { return m_fd.get(); }

private:
  UniqueFd m_fd;
  std::string m_what;
};

class MemoryBlobReader final : public BlobReader {
public:
  explicit MemoryBlobReader(std::string_view bytes) : m_bytes(bytes) {}
  Result<std::size_t> read(void* data, std::size_t size) override {
    const std::size_t n = std::min(size, m_bytes.size());
    std::memcpy(data, m_bytes.data(), n);
    m_bytes.remove_prefix(n);
    return n;
  }

private:
  std::string_view m_bytes;
};

bool is_gzip_magic(const std::uint8_t* p, std::size_t n) {
  return n >= 2 && p[0] == 0x1F && p[1] == 0x8B;
}

bool is_zstd_magic(const std::uint8_t* p, std::size_t n) {
  return n >= 4 && p[0] == 0x28 && p[1] == 0xB5 && p[2] == 0x2F && p[3] == 0xFD;
}

// ---------------------------------------------------------------------------------------------
// Members decoded ahead. A multi-member gzip stream (lockstep writes a member per MiB of tar) can
// be inflated on several threads at once if one knows where its members start. A reader thread
// reads the blob in blocks (hashing them for the digest), takes every place that looks like a
// gzip header as a candidate, and decoder threads inflate from each candidate; the consumer then
// follows the chain from the first member: the member decoded from where the previous one ended
// is the real one, and the other candidates (a header's bytes inside a member, such as a .gz file
// stored in the tar) are dropped. The output is therefore exactly what decoding in order gives.
// Whatever the chain can't follow (a member too big to hold or longer than a block, bytes after
// the last member, a bad member) is decoded in order from that point by the sequential path,
// which also says precisely what is wrong.

constexpr std::size_t k_block = 1U << 20;     // fresh raw bytes per block
constexpr std::size_t k_max_carry = 4U << 20; // candidates further apart: not members of this kind
constexpr std::size_t k_ahead_per_decoder = 2;
constexpr unsigned k_max_decoders = 16;
// What open() reads to recognise the codec before choosing how to decode.
constexpr std::size_t k_probe = 64U << 10;

// Shared by every stream of the process: the layers of one image reuse one set of buffers.
BufferRecycler& member_outputs() {
  static BufferRecycler r(k_member_out, std::size_t{2} * k_max_decoders * k_ahead_per_decoder);
  return r;
}
BufferRecycler& raw_blocks() {
  static BufferRecycler r(k_block + k_max_carry, 8); // the carry (at most k_max_carry) and a block
  return r;
}

bool is_member_candidate(const std::uint8_t* p) {
  // ID1 ID2 CM=deflate, and FLG's reserved bits clear (RFC 1952 2.3.1).
  return p[0] == 0x1F && p[1] == 0x8B && p[2] == 0x08 && (p[3] & 0xE0) == 0;
}

// Raw blob bytes from `base` on, in storage that is neither zeroed nor given back to the system
// between blocks (both cost a page fault per 4 KiB).
struct RawBlock {
  std::uint64_t base = 0;
  BigBuffer bytes; ///< raw_blocks().size() bytes
  std::size_t size = 0;
  [[nodiscard]] const std::uint8_t* data() const { return bytes.get(); }
  [[nodiscard]] std::uint64_t end() const { return base + size; }
};

struct MemberJob {
  std::shared_ptr<const RawBlock> block;
  std::size_t start = 0; ///< in block->data()
  std::uint64_t at = 0;  ///< the blob offset of the candidate
  BigBuffer out;
  std::size_t out_used = 0;
  std::size_t in_used = 0;
  bool ok = false;
  bool done = false;
  bool cancelled = false;
};

/// Reads the blob's next raw bytes into a buffer (hashing and counting them); 0 at its end.
using RawRead = std::function<Result<std::size_t>(std::uint8_t*, std::size_t)>;

class AheadDecoder {
public:
  /// `first`: the raw bytes already read, from blob offset `first_at`; `eof`: nothing follows.
  AheadDecoder(unsigned decoders, RawRead read, std::vector<std::uint8_t> first, std::uint64_t first_at,
               bool eof)
      : m_read(std::move(read)), m_carry(std::move(first)), m_carry_at(first_at), m_eof(eof),
        m_want(decoders * k_ahead_per_decoder) {
    for (unsigned i = 0; i < decoders; ++i) {
      m_decoders.emplace_back([this] { decode_loop(); });
    }
    m_reader = std::thread([this] { read_loop(); });
  }
  ~AheadDecoder() {
    stop();
    std::lock_guard lock(m_mutex);
    m_ordered.clear();
    m_queue.clear();
    m_blocks.clear();
  }
  AheadDecoder(const AheadDecoder&) = delete;
  AheadDecoder& operator=(const AheadDecoder&) = delete;
  AheadDecoder(AheadDecoder&&) = delete;
  AheadDecoder& operator=(AheadDecoder&&) = delete;

  struct Next {
    std::shared_ptr<MemberJob> job; ///< the member that starts at the chain, decoded
    bool end = false;               ///< every byte of the blob was read and decoded
    std::optional<Error> error;     ///< reading the blob failed
  };

  /// The member at blob offset `chain`; nothing in Next when the chain can't be followed here.
  Next next(std::uint64_t chain) {
    std::unique_lock lock(m_mutex);
    for (;;) {
      while (!m_ordered.empty() && m_ordered.front()->at < chain) {
        m_ordered.front()->cancelled = true; // a worker may still be inflating it: leave it be
        m_ordered.pop_front();
        m_state_cv.notify_all();
      }
      while (!m_blocks.empty() && m_blocks.front()->end() <= chain) {
        m_blocks.pop_front();
      }
      if (!m_ordered.empty()) {
        break;
      }
      if (m_reader_done) {
        if (m_error) {
          return Next{nullptr, false, m_error};
        }
        return Next{nullptr, m_eof && chain == m_read_end, std::nullopt};
      }
      m_state_cv.wait(lock);
    }
    if (m_ordered.front()->at != chain) {
      return {};
    }
    std::shared_ptr<MemberJob> job = std::move(m_ordered.front());
    m_ordered.pop_front();
    m_state_cv.notify_all();
    m_state_cv.wait(lock, [&] { return job->done; });
    if (!job->ok) {
      return {};
    }
    return Next{std::move(job), false, std::nullopt};
  }

  /// Stops every thread and hands back the raw bytes read from blob offset `chain` on.
  std::vector<std::uint8_t> stop_and_take(std::uint64_t chain) {
    stop();
    std::vector<std::uint8_t> rest;
    std::uint64_t cursor = chain;
    for (const auto& b : m_blocks) {
      if (b->end() > cursor && b->base <= cursor) {
        rest.insert(rest.end(), b->data() + (cursor - b->base), b->data() + b->size);
        cursor = b->end();
      }
    }
    if (cursor < m_carry_at + m_carry.size() && m_carry_at <= cursor) {
      rest.insert(rest.end(), m_carry.begin() + static_cast<std::ptrdiff_t>(cursor - m_carry_at),
                  m_carry.end());
    }
    return rest;
  }

  /// Whether the reader reached the end of the blob (once stopped).
  [[nodiscard]] bool blob_ended() const { return m_eof; }

private:
  void stop() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_work_cv.notify_all();
    m_state_cv.notify_all();
    if (m_reader.joinable()) {
      m_reader.join();
    }
    for (auto& t : m_decoders) {
      if (t.joinable()) {
        t.join();
      }
    }
  }

  void read_loop() {
    for (;;) {
      {
        std::unique_lock lock(m_mutex);
        m_state_cv.wait(lock, [&] { return m_stop || m_ordered.size() < m_want; });
        if (m_stop) {
          return;
        }
      }
      auto more = read_block();
      const bool go_on = more && *more;
      std::lock_guard lock(m_mutex);
      if (!more) {
        m_error = std::move(more).error();
      }
      if (!go_on) {
        m_reader_done = true;
        m_state_cv.notify_all();
        return;
      }
    }
  }

  static std::shared_ptr<RawBlock> new_block() {
    auto b = std::make_unique<RawBlock>();
    b->bytes = raw_blocks().take();
    return {b.release(), [](RawBlock* p) {
              std::unique_ptr<RawBlock> owned(p);
              raw_blocks().give(std::move(owned->bytes));
            }};
  }

  // The reader thread: the carry, then up to k_block fresh bytes; a job for every candidate
  // that has another candidate after it (every one, at the end of the blob). False at the end.
  Result<bool> read_block() {
    std::shared_ptr<RawBlock> block = new_block(); // m_carry is at most k_max_carry: see `sparse`
    block->base = m_carry_at;
    std::memcpy(block->bytes.get(), m_carry.data(), m_carry.size());
    block->size = m_carry.size();
    while (!m_eof && block->size < m_carry.size() + k_block) {
      LS_TRY_ASSIGN(std::size_t n,
                    m_read(block->bytes.get() + block->size, m_carry.size() + k_block - block->size));
      m_eof = n == 0;
      block->size += n;
    }
    std::vector<std::size_t> candidates;
    if (block->size >= 4) {
      const std::uint8_t* p = block->data();
      const std::uint8_t* last = p + block->size - 3;
      for (const std::uint8_t* q = p; q < last; ++q) {
        q = static_cast<const std::uint8_t*>(std::memchr(q, 0x1F, static_cast<std::size_t>(last - q)));
        if (q == nullptr) {
          break;
        }
        if (is_member_candidate(q)) {
          candidates.push_back(static_cast<std::size_t>(q - p));
        }
      }
    }
    std::size_t queued = candidates.size();
    bool sparse = false;
    if (m_eof) {
      m_carry.clear();
    } else {
      const std::size_t keep_from = candidates.empty() ? 0 : candidates.back();
      queued = candidates.empty() ? 0 : candidates.size() - 1;
      m_carry.assign(block->data() + keep_from, block->data() + block->size);
      m_carry_at = block->base + keep_from;
      sparse = m_carry.size() > k_max_carry;
    }
    std::lock_guard lock(m_mutex);
    for (std::size_t i = 0; i < queued; ++i) {
      auto job = std::make_shared<MemberJob>();
      job->block = block;
      job->start = candidates[i];
      job->at = block->base + candidates[i];
      m_ordered.push_back(job);
      m_queue.push_back(std::move(job));
    }
    m_read_end = block->end();
    m_blocks.push_back(std::move(block));
    m_work_cv.notify_all();
    m_state_cv.notify_all();
    return !m_eof && !sparse;
  }

  void decode_loop() {
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    std::unique_lock lock(m_mutex);
    for (;;) {
      m_work_cv.wait(lock, [&] { return m_stop || !m_queue.empty(); });
      if (m_stop) {
        break;
      }
      std::shared_ptr<MemberJob> job = std::move(m_queue.front());
      m_queue.pop_front();
      if (job->cancelled || d == nullptr) {
        job->done = true;
        m_state_cv.notify_all();
        continue;
      }
      lock.unlock();
      BigBuffer out = member_outputs().take();
      std::size_t in_used = 0;
      std::size_t out_used = 0;
      const RawBlock& b = *job->block;
      const bool ok = libdeflate_gzip_decompress_ex(d, b.data() + job->start, b.size - job->start, out.get(),
                                                    k_member_out, &in_used, &out_used) == LIBDEFLATE_SUCCESS;
      lock.lock();
      job->out = std::move(out);
      job->ok = ok;
      job->in_used = in_used;
      job->out_used = out_used;
      job->done = true;
      m_state_cv.notify_all();
    }
    if (d != nullptr) {
      libdeflate_free_decompressor(d);
    }
  }

  RawRead m_read;
  // The reader thread's own: the bytes from the last candidate on, and where the blob ended.
  std::vector<std::uint8_t> m_carry;
  std::uint64_t m_carry_at = 0;
  bool m_eof = false;
  const std::size_t m_want;

  std::mutex m_mutex;
  std::condition_variable m_work_cv;                    ///< decoders wait here for jobs
  std::condition_variable m_state_cv;                   ///< the consumer and the reader wait here
  std::deque<std::shared_ptr<MemberJob>> m_ordered;     ///< not yet taken by the consumer, by offset
  std::deque<std::shared_ptr<MemberJob>> m_queue;       ///< not yet taken by a decoder
  std::deque<std::shared_ptr<const RawBlock>> m_blocks; ///< holding the raw bytes from the chain on
  std::uint64_t m_read_end = 0;
  bool m_reader_done = false;
  std::optional<Error> m_error;
  bool m_stop = false;

  std::vector<std::thread> m_decoders; // last: started once the rest exists
  std::thread m_reader;
};

} // namespace

std::unique_ptr<BlobReader> file_blob_reader(UniqueFd fd, std::string what) {
  return std::make_unique<FileBlobReader>(std::move(fd), std::move(what));
}

std::unique_ptr<BlobReader> memory_blob_reader(std::string_view bytes) {
  return std::make_unique<MemoryBlobReader>(bytes);
}

Result<std::unique_ptr<BlobReader>> open_file_blob(const std::filesystem::path& path, std::string what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP) {
      return invalid_input("{}: {} is a symbolic link; refusing it", what, path.string());
    }
    return errno_error(fmt::format("{}: can't open {}", what, path.string()), err);
  }
  UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return errno_error(fmt::format("{}: can't stat {}", what, path.string()), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_input("{}: {} is not a regular file", what, path.string());
  }
  return file_blob_reader(std::move(owned), std::move(what));
}

LayerCodec layer_codec(Compression c) {
  switch (c) {
  case Compression::gzip:
    return LayerCodec::gzip;
  case Compression::zstd:
    return LayerCodec::zstd;
  case Compression::none:
    break;
  }
  return LayerCodec::none;
}

struct LayerStream::Impl {
  std::unique_ptr<BlobReader> blob;
  LayerCodec codec = LayerCodec::none;
  std::string what;
  LayerCheck check;

  Sha256 raw_hash;
  std::optional<Sha256> out_hash;
  std::atomic<std::uint64_t> raw_bytes = 0; ///< the reader thread counts while decoding ahead
  std::uint64_t out_bytes = 0;

  UninitBuffer<std::uint8_t> in;
  std::size_t in_pos = 0;
  std::size_t in_end = 0;
  bool in_eof = false;

  UninitBuffer<std::uint8_t> out;
  libdeflate_decompressor* deflate = nullptr;
  std::unique_ptr<z_stream> zlib; ///< set while a member is being inflated by zlib
  ZSTD_DStream* zstd = nullptr;
  bool zstd_frame_open = false;

  // Members decoded ahead (see AheadDecoder); off once the chain falls back to sequential.
  std::unique_ptr<AheadDecoder> ahead_decoder;
  std::shared_ptr<MemberJob> current; ///< whose output next() last handed out
  std::uint64_t chain = 0;            ///< the blob offset where the next member starts
  std::uint64_t members_ahead = 0;    ///< members that came from the decoders

  bool ended = false;   ///< the decoder produced its last byte
  bool checked = false; ///< the blob was drained and the checks passed
  std::optional<Error> failed;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;
  ~Impl() {
    stop_decoders();
    if (deflate != nullptr) {
      libdeflate_free_decompressor(deflate);
    }
    end_zlib();
    if (zstd != nullptr) {
      ZSTD_freeDStream(zstd);
    }
  }

  void stop_decoders() {
    if (!ahead_decoder) {
      return;
    }
    current.reset();
    ahead_decoder.reset(); // joins its threads: no job outlives them
  }

  void end_zlib() {
    if (zlib) {
      inflateEnd(zlib.get());
      zlib.reset();
    }
  }

  // The raw offset of in[in_pos], for messages.
  [[nodiscard]] std::uint64_t offset() const { return raw_bytes - (in_end - in_pos); }
  [[nodiscard]] std::size_t ahead() const { return in_end - in_pos; }

  // Moves what is ahead to the front of the window and reads until it is full or the blob ends.
  Result<void> fill() {
    if (in_pos > 0) {
      std::memmove(in.data(), in.data() + in_pos, ahead());
      in_end -= in_pos;
      in_pos = 0;
    }
    while (!in_eof && in_end < in.size()) {
      LS_TRY_ASSIGN(std::size_t n, read_raw(in.data() + in_end, in.size() - in_end));
      in_eof = n == 0;
      in_end += n;
    }
    return {};
  }

  // Keeps at least half a window ahead (or all that is left).
  Result<void> top_up() {
    if (!in_eof && ahead() < k_window / 2) {
      LS_TRY(fill());
    }
    return {};
  }

  Result<std::span<const std::uint8_t>> emit(std::size_t n) { return emit(out.data(), n); }

  Result<std::span<const std::uint8_t>> emit(const std::uint8_t* data, std::size_t n) {
    out_bytes += n;
    if (out_hash) {
      out_hash->update(data, n);
    }
    return std::span<const std::uint8_t>(data, n);
  }

  // Reads fresh blob bytes into `data` (hashed and counted); 0 at the end of the blob.
  Result<std::size_t> read_raw(std::uint8_t* data, std::size_t size) {
    LS_TRY(check_interrupted());
    LS_TRY_ASSIGN(std::size_t n, blob->read(data, size));
    raw_hash.update(data, n);
    const std::uint64_t total = raw_bytes.fetch_add(n, std::memory_order_relaxed) + n;
    if (n > 0 && check.size && total > *check.size) {
      return invalid_input("{}: the blob is larger than the {} bytes its descriptor says", what, *check.size);
    }
    return n;
  }

  // Starts decoding members ahead: the window read by open() is where the reader begins.
  void start_ahead(unsigned threads) {
    std::vector<std::uint8_t> first(in.begin() + static_cast<std::ptrdiff_t>(in_pos),
                                    in.begin() + static_cast<std::ptrdiff_t>(in_end));
    chain = offset();
    in_pos = in_end = 0;
    ahead_decoder = std::make_unique<AheadDecoder>(
        threads, [this](std::uint8_t* data, std::size_t size) { return read_raw(data, size); },
        std::move(first), chain, in_eof);
  }

  // Leaves decoding ahead: the raw bytes from the chain on go back into the window, where the
  // sequential path takes them up.
  Result<std::span<const std::uint8_t>> fall_back() {
    current.reset();
    std::vector<std::uint8_t> rest = ahead_decoder->stop_and_take(chain);
    in_eof = ahead_decoder->blob_ended();
    ahead_decoder.reset();
    in.resize(std::max(k_window, rest.size()));
    out.resize(k_member_out);
    std::memcpy(in.data(), rest.data(), rest.size());
    in_pos = 0;
    in_end = rest.size();
    return next_gzip();
  }

  Result<std::span<const std::uint8_t>> next_gzip_ahead() {
    for (;;) {
      if (current) {
        member_outputs().give(std::move(current->out));
        current.reset();
      }
      AheadDecoder::Next n = ahead_decoder->next(chain);
      if (n.error) {
        return *n.error;
      }
      if (n.end) {
        in_eof = true;
        return std::span<const std::uint8_t>();
      }
      if (!n.job) {
        return fall_back();
      }
      chain += n.job->in_used;
      ++members_ahead;
      current = std::move(n.job);
      if (current->out_used > 0) {
        return emit(current->out.get(), current->out_used);
      }
    }
  }

  Result<std::span<const std::uint8_t>> next_plain() {
    if (ahead() == 0) {
      LS_TRY(fill());
    }
    const std::size_t n = ahead();
    std::span<const std::uint8_t> piece(in.data() + in_pos, n);
    in_pos = in_end;
    out_bytes += n;
    if (out_hash) {
      out_hash->update(piece.data(), n);
    }
    return piece;
  }

  Result<std::span<const std::uint8_t>> next_gzip() {
    for (;;) {
      if (zlib) {
        LS_TRY_ASSIGN(std::size_t n, inflate_step());
        if (n > 0) {
          return emit(n);
        }
        continue;
      }
      LS_TRY(top_up());
      if (ahead() == 0) {
        return std::span<const std::uint8_t>();
      }
      if (!is_gzip_magic(in.data() + in_pos, ahead())) {
        // Bytes after the last member that are not another member end the stream, as gzip -d
        // and libarchive treat them; they still count for the blob's digest.
        in_pos = in_end;
        return std::span<const std::uint8_t>();
      }
      std::size_t in_used = 0;
      std::size_t out_used = 0;
      auto r = libdeflate_gzip_decompress_ex(deflate, in.data() + in_pos, ahead(), out.data(), out.size(),
                                             &in_used, &out_used);
      if (r == LIBDEFLATE_SUCCESS) {
        in_pos += in_used;
        if (out_used > 0) {
          return emit(out_used);
        }
        continue;
      }
      // Too big to hold whole, or not whole in the window, or bad: zlib streams this member and
      // says precisely what is wrong if anything is.
      zlib = std::make_unique<z_stream>();
      std::memset(zlib.get(), 0, sizeof(z_stream));
      if (inflateInit2(zlib.get(), 16 + MAX_WBITS) != Z_OK) {
        zlib.reset();
        return internal_error("zlib: can't initialise the inflater");
      }
    }
  }

  // One zlib step of the current member into `out`; ends the member at its end.
  Result<std::size_t> inflate_step() {
    if (ahead() == 0) {
      LS_TRY(fill());
      if (ahead() == 0) {
        return invalid_input("{}: the gzip data ends in the middle of a member (at byte {})", what, offset());
      }
    }
    zlib->next_in = in.data() + in_pos;
    zlib->avail_in = static_cast<uInt>(std::min<std::size_t>(ahead(), UINT32_MAX));
    zlib->next_out = out.data();
    zlib->avail_out = static_cast<uInt>(std::min(out.size(), k_stream_out));
    const uInt avail_before = zlib->avail_in;
    const uInt out_before = zlib->avail_out;
    int rc = inflate(zlib.get(), Z_NO_FLUSH);
    in_pos += avail_before - zlib->avail_in;
    const std::size_t produced = out_before - zlib->avail_out;
    if (rc == Z_STREAM_END) {
      end_zlib();
      return produced;
    }
    if (rc == Z_OK || (rc == Z_BUF_ERROR && (produced > 0 || avail_before != zlib->avail_in))) {
      return produced;
    }
    if (rc == Z_BUF_ERROR) {
      LS_TRY(fill());
      if (ahead() == 0) {
        return invalid_input("{}: the gzip data ends in the middle of a member (at byte {})", what, offset());
      }
      return produced;
    }
    std::string msg = zlib->msg != nullptr ? zlib->msg : "corrupt data";
    return invalid_input("{}: invalid gzip data at byte {}: {}", what, offset(), msg);
  }

  Result<std::span<const std::uint8_t>> next_zstd() {
    for (;;) {
      LS_TRY(top_up());
      if (ahead() == 0) {
        if (zstd_frame_open) {
          return invalid_input("{}: the zstd data ends in the middle of a frame (at byte {})", what,
                               offset());
        }
        return std::span<const std::uint8_t>();
      }
      ZSTD_inBuffer ib{in.data() + in_pos, ahead(), 0};
      ZSTD_outBuffer ob{out.data(), std::min(out.size(), k_stream_out), 0};
      std::size_t r = ZSTD_decompressStream(zstd, &ob, &ib);
      if (ZSTD_isError(r) != 0U) {
        return invalid_input("{}: invalid zstd data at byte {}: {}", what, offset(), ZSTD_getErrorName(r));
      }
      in_pos += ib.pos;
      zstd_frame_open = r != 0;
      if (ob.pos > 0) {
        return emit(ob.pos);
      }
    }
  }

  Result<std::span<const std::uint8_t>> decode() {
    switch (codec) {
    case LayerCodec::gzip:
      return ahead_decoder ? next_gzip_ahead() : next_gzip();
    case LayerCodec::zstd:
      return next_zstd();
    case LayerCodec::none:
    case LayerCodec::detect:
      break;
    }
    return next_plain();
  }

  // Reads the blob to its end and compares size, digest and diff_id.
  Result<void> run_checks() {
    stop_decoders();
    in_pos = in_end;
    while (!in_eof) {
      LS_TRY(fill());
      in_pos = in_end;
    }
    if (check.size && raw_bytes != *check.size) {
      return invalid_input("{}: the blob has {} bytes, its descriptor says {}", what, raw_bytes.load(),
                           *check.size);
    }
    if (check.digest) {
      Digest got = raw_hash.finish();
      if (got != *check.digest) {
        return invalid_input("{}: digest mismatch: the blob hashes to {} (the image is corrupt)", what,
                             got.str());
      }
    }
    if (check.diff_id && out_hash) {
      Digest got = out_hash->finish();
      if (got != *check.diff_id) {
        return invalid_input(
            "{}: the uncompressed layer hashes to {}, but the image config says its diff_id is {}", what,
            got.str(), check.diff_id->str());
      }
    }
    return {};
  }

  // After a decoding failure: the blob's own fault (size or digest) when it has one, else `e`.
  Error blame(Error e) {
    if (!check.size && !check.digest) {
      return e;
    }
    if (e.code == ExitCode::interrupted) {
      return e;
    }
    check.diff_id.reset();
    auto checked_blob = run_checks();
    return checked_blob ? std::move(e) : std::move(checked_blob).error();
  }
};

LayerStream::LayerStream(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {
}
LayerStream::~LayerStream() = default;
LayerStream::LayerStream(LayerStream&&) noexcept = default;
LayerStream& LayerStream::operator=(LayerStream&&) noexcept = default;

Result<LayerStream> LayerStream::open(std::unique_ptr<BlobReader> blob, LayerCodec codec, std::string what,
                                      LayerCheck check, unsigned decoders) {
  auto impl = std::make_unique<Impl>();
  impl->blob = std::move(blob);
  impl->what = std::move(what);
  impl->check = std::move(check);
  if (impl->check.diff_id) {
    impl->out_hash.emplace();
  }
  impl->in.resize(k_probe);
  if (auto filled = impl->fill(); !filled) {
    return impl->blame(std::move(filled).error());
  }
  const std::uint8_t* p = impl->in.data();
  const std::size_t n = impl->ahead();
  if (codec == LayerCodec::detect) {
    codec = is_gzip_magic(p, n)   ? LayerCodec::gzip
            : is_zstd_magic(p, n) ? LayerCodec::zstd
                                  : LayerCodec::none;
  }
  if ((codec == LayerCodec::gzip && !is_gzip_magic(p, n)) ||
      (codec == LayerCodec::zstd && !is_zstd_magic(p, n))) {
    return impl->blame(invalid_input("{}: not {} data (the blob does not start with a {} header)", impl->what,
                                     codec == LayerCodec::gzip ? "gzip" : "zstd",
                                     codec == LayerCodec::gzip ? "gzip" : "zstd"));
  }
  impl->codec = codec;
  if (codec == LayerCodec::gzip) {
    impl->deflate = libdeflate_alloc_decompressor();
    if (impl->deflate == nullptr) {
      return internal_error("libdeflate: out of memory");
    }
    if (decoders == auto_decoders) {
      const unsigned cores = default_thread_count();
      decoders = cores > 1 ? std::min(cores, k_max_decoders) : 0;
    }
    if (decoders > 0) {
      impl->start_ahead(std::min(decoders, k_max_decoders));
      return LayerStream(std::move(impl)); // the window and `out` are sized if it falls back
    }
    impl->out.resize(k_member_out);
  } else if (codec == LayerCodec::zstd) {
    impl->zstd = ZSTD_createDStream();
    impl->out.resize(k_stream_out);
    if (impl->zstd == nullptr) {
      return internal_error("libzstd: out of memory");
    }
  }
  impl->in.resize(k_window);
  return LayerStream(std::move(impl));
}

Result<std::span<const std::uint8_t>> LayerStream::next() {
  Impl& s = *m_impl;
  if (s.failed) {
    return *s.failed;
  }
  if (s.checked) {
    return std::span<const std::uint8_t>();
  }
  if (!s.ended) {
    auto piece = s.decode();
    if (!piece) {
      s.failed = s.blame(std::move(piece).error());
      return *s.failed;
    }
    if (!piece->empty()) {
      if (s.check.max_out && s.out_bytes > *s.check.max_out) {
        s.failed = invalid_input("{}: the uncompressed layer is larger than the limit of {} bytes (100 "
                                 "times its compressed size, at least 1 GiB)",
                                 s.what, *s.check.max_out);
        return *s.failed;
      }
      return piece;
    }
    s.ended = true;
  }
  auto checks = s.run_checks();
  if (!checks) {
    s.failed = std::move(checks).error();
    return *s.failed;
  }
  s.checked = true;
  return std::span<const std::uint8_t>();
}

Result<void> LayerStream::finish() {
  for (;;) {
    LS_TRY_ASSIGN(std::span<const std::uint8_t> piece, next());
    if (piece.empty()) {
      return {};
    }
  }
}

Error LayerStream::blame(Error e) {
  if (m_impl->failed) {
    return *m_impl->failed;
  }
  m_impl->failed = m_impl->blame(std::move(e));
  return *m_impl->failed;
}

std::uint64_t LayerStream::blob_bytes() const {
  return m_impl->raw_bytes - m_impl->ahead();
}

std::uint64_t LayerStream::members_decoded_ahead() const {
  return m_impl->members_ahead;
}

std::uint64_t LayerStream::bytes_out() const {
  return m_impl->out_bytes;
}

const std::string& LayerStream::what() const {
  return m_impl->what;
}

} // namespace lockstep::oci
