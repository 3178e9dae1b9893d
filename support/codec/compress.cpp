#include "support/codec/compress.hpp"

#include "support/base/interrupt.hpp"

#include <archive.h>
#include <libdeflate.h>
#include <zstd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lockstep {

namespace {
std::atomic<unsigned> g_thread_count{0};
} // namespace

void set_default_thread_count(unsigned threads) {
  g_thread_count.store(threads, std::memory_order_relaxed);
}

unsigned default_thread_count() {
  if (unsigned set = g_thread_count.load(std::memory_order_relaxed); set != 0) {
    return set;
  }
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

std::string codec_library_versions() {
  return fmt::format("libdeflate {}, zstd {}, {}", LIBDEFLATE_VERSION_STRING, ZSTD_versionString(),
                     archive_version_string());
}

namespace {

using Chunk = std::shared_ptr<const std::vector<char>>;

// Runs `consume` on its own thread for every item, in submission order. submit() blocks while
// `capacity` items wait. The first exception thrown by `consume` is rethrown by submit()/finish().
template <typename T> class OrderedWorker {
public:
  OrderedWorker(std::size_t capacity, std::function<void(T&)> consume)
      : m_capacity(capacity), m_consume(std::move(consume)), m_thread([this] { run(); }) {}
  ~OrderedWorker() {
    close();
    m_thread.join();
  }
  OrderedWorker(const OrderedWorker&) = delete;
  OrderedWorker& operator=(const OrderedWorker&) = delete;

  void submit(T item) {
    std::unique_lock lock(m_mutex);
    m_space.wait(lock, [this] { return m_items.size() < m_capacity || m_error; });
    rethrow_locked();
    m_items.push_back(std::move(item));
    m_ready.notify_one();
  }

  // Waits until every submitted item was consumed; rethrows a consumer failure.
  void finish() {
    close();
    std::unique_lock lock(m_mutex);
    m_space.wait(lock, [this] { return m_drained || m_error; });
    rethrow_locked();
  }

  // Like finish() but never throws (for destructors).
  void finish_quietly() noexcept {
    close();
    std::unique_lock lock(m_mutex);
    m_space.wait(lock, [this] { return m_drained || m_error; });
  }

private:
  void close() {
    std::lock_guard lock(m_mutex);
    m_closed = true;
    m_ready.notify_one();
  }

  void rethrow_locked() {
    if (m_error) {
      std::rethrow_exception(m_error);
    }
  }

  void run() {
    for (;;) {
      T item;
      {
        std::unique_lock lock(m_mutex);
        m_ready.wait(lock, [this] { return !m_items.empty() || m_closed; });
        if (m_items.empty()) {
          m_drained = true;
          m_space.notify_all();
          return;
        }
        item = std::move(m_items.front());
        m_items.pop_front();
        m_space.notify_all();
      }
      try {
        m_consume(item);
      } catch (...) {
        std::lock_guard lock(m_mutex);
        m_error = std::current_exception();
        m_items.clear();
        m_drained = true;
        m_space.notify_all();
        return;
      }
    }
  }

  std::size_t m_capacity;
  std::function<void(T&)> m_consume;
  std::deque<T> m_items;
  std::mutex m_mutex;
  std::condition_variable m_ready;
  std::condition_variable m_space;
  std::exception_ptr m_error;
  bool m_closed = false;
  bool m_drained = false;
  std::thread m_thread; // last: started after everything it uses
};

// gzip: each chunk becomes an independent member, compressed by a pool of threads; a writer thread
// emits finished members in submission order.
class GzipBackend {
public:
  GzipBackend(ByteSink& out, unsigned threads)
      : m_writer(threads * 2 + 2, [this, &out](std::shared_ptr<Job>& job) { write_when_done(out, *job); }) {
    for (unsigned i = 0; i < threads; ++i) {
      m_pool.emplace_back([this] { compress_jobs(); });
    }
  }
  ~GzipBackend() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_work_cv.notify_all();
    m_done_cv.notify_all();
    m_writer.finish_quietly();
    for (auto& t : m_pool) {
      t.join();
    }
  }
  GzipBackend(const GzipBackend&) = delete;
  GzipBackend& operator=(const GzipBackend&) = delete;

  void submit(Chunk chunk) {
    auto job = std::make_shared<Job>();
    job->input = std::move(chunk);
    {
      std::lock_guard lock(m_mutex);
      m_queue.push_back(job);
    }
    m_work_cv.notify_one();
    m_writer.submit(std::move(job)); // blocks when too many members are in flight
  }

  void finish() { m_writer.finish(); }

private:
  struct Job {
    Chunk input;
    std::vector<char> output;
    bool done = false;
  };

  void compress_jobs() {
    libdeflate_compressor* c = libdeflate_alloc_compressor(k_gzip_level);
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock lock(m_mutex);
        m_work_cv.wait(lock, [this] { return m_stop || !m_queue.empty(); });
        if (m_stop) {
          break;
        }
        job = std::move(m_queue.front());
        m_queue.pop_front();
      }
      const std::vector<char>& in = *job->input;
      std::size_t bound = libdeflate_gzip_compress_bound(c, in.size());
      std::vector<char> output(bound);
      std::size_t n = libdeflate_gzip_compress(c, in.data(), in.size(), output.data(), bound);
      output.resize(n);
      // libdeflate writes OS=255 ("unknown"); pin OS=3 (Unix), as `gzip -n` does: one fixed header.
      if (n >= 10) {
        output[9] = 3;
      }
      {
        std::lock_guard lock(m_mutex);
        job->output = std::move(output);
        job->input.reset();
        job->done = true;
      }
      m_done_cv.notify_all();
    }
    libdeflate_free_compressor(c);
  }

  void write_when_done(ByteSink& out, Job& job) {
    {
      std::unique_lock lock(m_mutex);
      m_done_cv.wait(lock, [&] { return job.done || m_stop; });
      if (!job.done) {
        return;
      }
    }
    out.write(job.output.data(), job.output.size());
    job.output = {};
  }

  std::mutex m_mutex;
  std::condition_variable m_work_cv;
  std::condition_variable m_done_cv;
  std::deque<std::shared_ptr<Job>> m_queue;
  bool m_stop = false;
  std::vector<std::thread> m_pool;
  OrderedWorker<std::shared_ptr<Job>> m_writer;
};

// zstd: a feeder thread hands chunks to libzstd (whose own workers compress) and writes the output.
class ZstdBackend {
public:
  ZstdBackend(ByteSink& out, unsigned threads)
      : m_out(out), m_ctx(ZSTD_createCCtx()), m_buf(ZSTD_CStreamOutSize()),
        m_feeder(4, [this](Chunk& c) { feed(c); }) {
    check(ZSTD_CCtx_setParameter(m_ctx, ZSTD_c_compressionLevel, k_zstd_level));
    check(ZSTD_CCtx_setParameter(m_ctx, ZSTD_c_checksumFlag, 0)); // sha256 digests already cover the blob
    // nbWorkers >= 1 selects the multi-threaded format, identical for any worker count.
    check(ZSTD_CCtx_setParameter(m_ctx, ZSTD_c_nbWorkers, static_cast<int>(threads == 0 ? 1 : threads)));
  }
  ~ZstdBackend() {
    m_feeder.finish_quietly();
    ZSTD_freeCCtx(m_ctx);
  }
  ZstdBackend(const ZstdBackend&) = delete;
  ZstdBackend& operator=(const ZstdBackend&) = delete;

  void submit(Chunk chunk) { m_feeder.submit(std::move(chunk)); }
  void finish() {
    m_feeder.submit(nullptr); // end of stream
    m_feeder.finish();
  }

private:
  static void check(std::size_t r) {
    if (ZSTD_isError(r) != 0U) {
      throw Failure(internal_error("zstd: {}", ZSTD_getErrorName(r)));
    }
  }

  void feed(const Chunk& chunk) {
    ZSTD_EndDirective mode = chunk ? ZSTD_e_continue : ZSTD_e_end;
    ZSTD_inBuffer in{chunk ? chunk->data() : nullptr, chunk ? chunk->size() : 0, 0};
    for (;;) {
      ZSTD_outBuffer out{m_buf.data(), m_buf.size(), 0};
      std::size_t left = ZSTD_compressStream2(m_ctx, &out, &in, mode);
      check(left);
      if (out.pos > 0) {
        m_out.write(m_buf.data(), out.pos);
      }
      if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) {
        break;
      }
    }
  }

  ByteSink& m_out;
  ZSTD_CCtx* m_ctx;
  std::vector<char> m_buf;
  OrderedWorker<Chunk> m_feeder;
};

} // namespace

class ParallelCompressor::Impl {
public:
  Impl(Codec codec, ByteSink& out, unsigned threads, std::function<void(const void*, std::size_t)> tap) {
    if (tap) {
      m_tap = std::make_unique<OrderedWorker<Chunk>>(
          threads * 2 + 4, [t = std::move(tap)](Chunk& c) { t(c->data(), c->size()); });
    }
    if (codec == Codec::gzip) {
      m_gzip = std::make_unique<GzipBackend>(out, threads);
    } else {
      m_zstd = std::make_unique<ZstdBackend>(out, threads);
    }
    m_current.reserve(k_gzip_chunk_size);
  }

  void write(const void* data, std::size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      std::size_t n = std::min(size, k_gzip_chunk_size - m_current.size());
      m_current.insert(m_current.end(), p, p + n);
      p += n;
      size -= n;
      if (m_current.size() == k_gzip_chunk_size) {
        submit();
      }
    }
  }

  void finish() {
    // An empty stream still becomes one (empty) gzip member.
    if (!m_current.empty() || m_submitted == 0) {
      submit();
    }
    if (m_gzip) {
      m_gzip->finish();
    } else {
      m_zstd->finish();
    }
    if (m_tap) {
      m_tap->finish();
    }
  }

private:
  void submit() {
    throw_if_interrupted();
    auto chunk = std::make_shared<const std::vector<char>>(std::move(m_current));
    m_current = {};
    m_current.reserve(k_gzip_chunk_size);
    ++m_submitted;
    if (m_tap) {
      m_tap->submit(chunk);
    }
    if (m_gzip) {
      m_gzip->submit(std::move(chunk));
    } else {
      m_zstd->submit(std::move(chunk));
    }
  }

  // Destroyed bottom-up: the back ends stop before the tap.
  std::unique_ptr<OrderedWorker<Chunk>> m_tap;
  std::unique_ptr<GzipBackend> m_gzip;
  std::unique_ptr<ZstdBackend> m_zstd;
  std::vector<char> m_current;
  std::size_t m_submitted = 0;
};

ParallelCompressor::ParallelCompressor(Codec codec, ByteSink& out, unsigned threads,
                                       std::function<void(const void*, std::size_t)> tap)
    : m_impl(std::make_unique<Impl>(codec, out, threads == 0 ? 1 : threads, std::move(tap))) {
}

ParallelCompressor::~ParallelCompressor() = default;

void ParallelCompressor::write(const void* data, std::size_t size) {
  m_impl->write(data, size);
}

void ParallelCompressor::finish() {
  m_impl->finish();
}

} // namespace lockstep
