#include "support/oci/layer_stream.hpp"

#include "support/interrupt.hpp"

#include <fmt/format.h>
#include <libdeflate.h>
#include <zstd.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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
  std::uint64_t raw_bytes = 0;
  std::uint64_t out_bytes = 0;

  std::vector<std::uint8_t> in;
  std::size_t in_pos = 0;
  std::size_t in_end = 0;
  bool in_eof = false;

  std::vector<std::uint8_t> out;
  std::uint64_t members = 0;
  libdeflate_decompressor* deflate = nullptr;
  std::unique_ptr<z_stream> zlib; ///< set while a member is being inflated by zlib
  ZSTD_DStream* zstd = nullptr;
  bool zstd_frame_open = false;

  bool ended = false;   ///< the decoder produced its last byte
  bool checked = false; ///< the blob was drained and the checks passed
  std::optional<Error> failed;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;
  ~Impl() {
    if (deflate != nullptr) {
      libdeflate_free_decompressor(deflate);
    }
    end_zlib();
    if (zstd != nullptr) {
      ZSTD_freeDStream(zstd);
    }
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
      LS_TRY(check_interrupted());
      LS_TRY_ASSIGN(std::size_t n, blob->read(in.data() + in_end, in.size() - in_end));
      if (n == 0) {
        in_eof = true;
        break;
      }
      raw_hash.update(in.data() + in_end, n);
      raw_bytes += n;
      in_end += n;
      if (check.size && raw_bytes > *check.size) {
        return invalid_input("{}: the blob is larger than the {} bytes its descriptor says", what,
                             *check.size);
      }
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

  Result<std::span<const std::uint8_t>> emit(std::size_t n) {
    out_bytes += n;
    if (out_hash) {
      out_hash->update(out.data(), n);
    }
    return std::span<const std::uint8_t>(out.data(), n);
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
        ++members;
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
      ++members;
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
      return next_gzip();
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
    in_pos = in_end;
    while (!in_eof) {
      LS_TRY(fill());
      in_pos = in_end;
    }
    if (check.size && raw_bytes != *check.size) {
      return invalid_input("{}: the blob has {} bytes, its descriptor says {}", what, raw_bytes, *check.size);
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
                                      LayerCheck check) {
  auto impl = std::make_unique<Impl>();
  impl->blob = std::move(blob);
  impl->what = std::move(what);
  impl->check = std::move(check);
  if (impl->check.diff_id) {
    impl->out_hash.emplace();
  }
  impl->in.resize(k_window);
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
    impl->out.resize(k_member_out);
    if (impl->deflate == nullptr) {
      return internal_error("libdeflate: out of memory");
    }
  } else if (codec == LayerCodec::zstd) {
    impl->zstd = ZSTD_createDStream();
    impl->out.resize(k_stream_out);
    if (impl->zstd == nullptr) {
      return internal_error("libzstd: out of memory");
    }
  }
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

std::uint64_t LayerStream::bytes_out() const {
  return m_impl->out_bytes;
}

const std::string& LayerStream::what() const {
  return m_impl->what;
}

} // namespace lockstep::oci
