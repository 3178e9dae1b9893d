#include "support/compress.hpp"

#include "support/interrupt.hpp"

#include <archive.h>
#include <libdeflate.h>
#include <zstd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace lockstep {

unsigned default_thread_count() {
  if (const char* env = std::getenv("LOCKSTEP_THREADS"); env != nullptr && *env != '\0') { // NOLINT
    long v = std::strtol(env, nullptr, 10);
    if (v >= 1 && v <= 1024) {
      return static_cast<unsigned>(v);
    }
  }
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

std::string codec_library_versions() {
  return fmt::format("libdeflate {}, zstd {}, {}", LIBDEFLATE_VERSION_STRING, ZSTD_versionString(),
                     archive_version_string());
}

class ParallelCompressor::Impl {
public:
  virtual ~Impl() = default;
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  virtual void write(const void* data, std::size_t size) = 0;
  virtual void finish() = 0;
};

namespace {

// gzip: fixed-size chunks compressed as independent members by a pool of workers; the calling
// thread submits chunks and writes finished ones in submission order.
class GzipImpl final : public ParallelCompressor::Impl {
public:
  GzipImpl(ByteSink& out, unsigned threads) : m_out(out), m_max_inflight(threads * 2 + 2) {
    m_current.reserve(k_gzip_chunk_size);
    for (unsigned i = 0; i < threads; ++i) {
      m_workers.emplace_back([this] { work(); });
    }
  }

  ~GzipImpl() override {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_work_cv.notify_all();
    for (auto& t : m_workers) {
      t.join();
    }
  }
  GzipImpl(const GzipImpl&) = delete;
  GzipImpl& operator=(const GzipImpl&) = delete;

  void write(const void* data, std::size_t size) override {
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

  void finish() override {
    if (!m_current.empty() || m_submitted == 0) {
      submit();
    }
    std::unique_lock lock(m_mutex);
    while (!m_jobs.empty()) {
      drain_front(lock, true);
    }
  }

private:
  struct Job {
    std::vector<char> input;
    std::vector<char> output;
    bool taken = false;
    bool done = false;
  };

  void submit() {
    throw_if_interrupted();
    auto job = std::make_shared<Job>();
    job->input.swap(m_current);
    m_current.clear();
    m_current.reserve(k_gzip_chunk_size);
    std::unique_lock lock(m_mutex);
    // Write out finished chunks at the front; block while too many are in flight.
    while (!m_jobs.empty() && (m_jobs.front()->done || m_jobs.size() >= m_max_inflight)) {
      drain_front(lock, m_jobs.size() >= m_max_inflight);
    }
    m_jobs.push_back(std::move(job));
    ++m_submitted;
    lock.unlock();
    m_work_cv.notify_one();
  }

  // Waits (if `wait`) for the front job, then writes it without holding the lock.
  void drain_front(std::unique_lock<std::mutex>& lock, bool wait) {
    if (wait) {
      m_done_cv.wait(lock, [this] { return m_jobs.front()->done; });
    } else if (!m_jobs.front()->done) {
      return;
    }
    std::shared_ptr<Job> job = m_jobs.front();
    m_jobs.pop_front();
    lock.unlock();
    m_out.write(job->output.data(), job->output.size());
    lock.lock();
  }

  void work() {
    libdeflate_compressor* c = libdeflate_alloc_compressor(k_gzip_level);
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock lock(m_mutex);
        m_work_cv.wait(lock, [this] { return m_stop || next_job() != nullptr; });
        if (m_stop) {
          break;
        }
        job = next_job();
        job->taken = true;
      }
      std::size_t bound = libdeflate_gzip_compress_bound(c, job->input.size());
      job->output.resize(bound);
      std::size_t n = libdeflate_gzip_compress(c, job->input.data(), job->input.size(), job->output.data(), bound);
      job->output.resize(n);
      // libdeflate writes OS=255 ("unknown"); pin OS=3 (Unix), as `gzip -n` does, for one fixed header.
      if (n >= 10) {
        job->output[9] = 3;
      }
      job->input = {};
      {
        std::lock_guard lock(m_mutex);
        job->done = true;
      }
      m_done_cv.notify_all();
    }
    libdeflate_free_compressor(c);
  }

  std::shared_ptr<Job> next_job() {
    for (auto& j : m_jobs) {
      if (!j->taken) {
        return j;
      }
    }
    return nullptr;
  }

  ByteSink& m_out;
  std::size_t m_max_inflight;
  std::vector<char> m_current;
  std::deque<std::shared_ptr<Job>> m_jobs;
  std::size_t m_submitted = 0;
  std::mutex m_mutex;
  std::condition_variable m_work_cv;
  std::condition_variable m_done_cv;
  std::vector<std::thread> m_workers;
  bool m_stop = false;
};

// zstd: libzstd's own worker pool; the input is fed in fixed 1 MiB pieces.
class ZstdImpl final : public ParallelCompressor::Impl {
public:
  ZstdImpl(ByteSink& out, unsigned threads) : m_out(out), m_ctx(ZSTD_createCCtx()) {
    m_buf.resize(ZSTD_CStreamOutSize());
    check(ZSTD_CCtx_setParameter(m_ctx, ZSTD_c_compressionLevel, k_zstd_level));
    check(ZSTD_CCtx_setParameter(m_ctx, ZSTD_c_checksumFlag, 1));
    // nbWorkers >= 1 selects the multi-threaded format, identical for any worker count.
    check(ZSTD_CCtx_setParameter(m_ctx, ZSTD_c_nbWorkers, static_cast<int>(threads == 0 ? 1 : threads)));
    m_current.reserve(k_gzip_chunk_size);
  }
  ~ZstdImpl() override { ZSTD_freeCCtx(m_ctx); }
  ZstdImpl(const ZstdImpl&) = delete;
  ZstdImpl& operator=(const ZstdImpl&) = delete;

  void write(const void* data, std::size_t size) override {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      std::size_t n = std::min(size, k_gzip_chunk_size - m_current.size());
      m_current.insert(m_current.end(), p, p + n);
      p += n;
      size -= n;
      if (m_current.size() == k_gzip_chunk_size) {
        feed(ZSTD_e_continue);
      }
    }
  }

  void finish() override { feed(ZSTD_e_end); }

private:
  static void check(std::size_t r) {
    if (ZSTD_isError(r) != 0U) {
      throw Failure(internal_error("zstd: {}", ZSTD_getErrorName(r)));
    }
  }

  void feed(ZSTD_EndDirective mode) {
    throw_if_interrupted();
    ZSTD_inBuffer in{m_current.data(), m_current.size(), 0};
    for (;;) {
      ZSTD_outBuffer out{m_buf.data(), m_buf.size(), 0};
      std::size_t left = ZSTD_compressStream2(m_ctx, &out, &in, mode);
      check(left);
      if (out.pos > 0) {
        m_out.write(m_buf.data(), out.pos);
      }
      bool finished = mode == ZSTD_e_end ? left == 0 : in.pos == in.size;
      if (finished) {
        break;
      }
    }
    m_current.clear();
  }

  ByteSink& m_out;
  ZSTD_CCtx* m_ctx;
  std::vector<char> m_buf;
  std::vector<char> m_current;
};

} // namespace

ParallelCompressor::ParallelCompressor(Codec codec, ByteSink& out, unsigned threads) {
  if (codec == Codec::gzip) {
    m_impl = std::make_unique<GzipImpl>(out, threads == 0 ? 1 : threads);
  } else {
    m_impl = std::make_unique<ZstdImpl>(out, threads);
  }
}

ParallelCompressor::~ParallelCompressor() = default;

void ParallelCompressor::write(const void* data, std::size_t size) { m_impl->write(data, size); }

void ParallelCompressor::finish() { m_impl->finish(); }

Result<std::string> decompress(Codec codec, const std::string& data, std::uint64_t max_size) {
  std::string out;
  if (codec == Codec::zstd) {
    ZSTD_DCtx* d = ZSTD_createDCtx();
    ZSTD_inBuffer in{data.data(), data.size(), 0};
    std::vector<char> buf(ZSTD_DStreamOutSize());
    std::size_t r = 0;
    while (in.pos < in.size) {
      ZSTD_outBuffer ob{buf.data(), buf.size(), 0};
      r = ZSTD_decompressStream(d, &ob, &in);
      if (ZSTD_isError(r) != 0U) {
        ZSTD_freeDCtx(d);
        return invalid_input("zstd: {}", ZSTD_getErrorName(r));
      }
      out.append(buf.data(), ob.pos);
      if (out.size() > max_size) {
        ZSTD_freeDCtx(d);
        return invalid_input("decompressed data exceeds {} bytes", max_size);
      }
    }
    ZSTD_freeDCtx(d);
    return out;
  }
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  std::size_t pos = 0;
  std::vector<char> buf;
  while (pos < data.size()) {
    // ISIZE (last 4 bytes of a member) is unknown before parsing; grow until it fits.
    std::size_t cap = std::max<std::size_t>(4 * (data.size() - pos), 1 << 16);
    for (;;) {
      buf.resize(cap);
      std::size_t in_used = 0;
      std::size_t out_len = 0;
      auto r = libdeflate_gzip_decompress_ex(d, data.data() + pos, data.size() - pos, buf.data(), cap, &in_used,
                                             &out_len);
      if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
        if (cap > max_size) {
          libdeflate_free_decompressor(d);
          return invalid_input("decompressed data exceeds {} bytes", max_size);
        }
        cap *= 2;
        continue;
      }
      if (r != LIBDEFLATE_SUCCESS) {
        libdeflate_free_decompressor(d);
        return invalid_input("invalid gzip data at byte {}", pos);
      }
      out.append(buf.data(), out_len);
      pos += in_used;
      break;
    }
    if (out.size() > max_size) {
      libdeflate_free_decompressor(d);
      return invalid_input("decompressed data exceeds {} bytes", max_size);
    }
  }
  libdeflate_free_decompressor(d);
  return out;
}

} // namespace lockstep
