// The C adapters for libsquashfs (squashfs_adapters.hpp): error text, the offset file and the
// libdeflate and shrink-only compressors, each a C struct whose first member is libsquashfs's
// interface, with callbacks that cast back to it.
#include "support/oci/squashfs_adapters.hpp"

#include <fmt/format.h>
#include <libdeflate.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sqfs/error.h>

namespace lockstep::squashfs_detail {

std::string sqfs_error_text(int code) {
  switch (code) {
  case SQFS_ERROR_ALLOC:
    return "out of memory";
  case SQFS_ERROR_IO:
    return "input/output error";
  case SQFS_ERROR_COMPRESSOR:
    return "compressor error";
  case SQFS_ERROR_INTERNAL:
    return "internal libsquashfs error";
  case SQFS_ERROR_CORRUPTED:
    return "corrupted data";
  case SQFS_ERROR_UNSUPPORTED:
    return "unsupported feature";
  case SQFS_ERROR_OVERFLOW:
    return "a value is too large for the format";
  case SQFS_ERROR_OUT_OF_BOUNDS:
    return "a reference points outside the image";
  case SFQS_ERROR_SUPER_MAGIC:
    return "no squashfs magic";
  case SFQS_ERROR_SUPER_VERSION:
    return "not squashfs version 4.0";
  case SQFS_ERROR_SUPER_BLOCK_SIZE:
    return "invalid block size";
  case SQFS_ERROR_NOT_DIR:
    return "not a directory";
  case SQFS_ERROR_NO_ENTRY:
    return "no such entry";
  case SQFS_ERROR_LINK_LOOP:
    return "a directory loop";
  case SQFS_ERROR_NOT_FILE:
    return "not a regular file";
  case SQFS_ERROR_ARG_INVALID:
    return "invalid argument";
  case SQFS_ERROR_SEQUENCE:
    return "calls out of sequence";
  default:
    return fmt::format("libsquashfs error {}", code);
  }
}

// ---------------------------------------------------------------------------------------------
// An sqfs_file_t over a region of an open file that starts at `base`: the squashfs image inside a
// SIF. Writes extend it; reads past its end fail.

namespace {

struct OffsetFile {
  sqfs_file_t iface; // first member: libsquashfs casts between the two
  int fd = -1;
  std::int64_t base = 0;
  std::uint64_t size = 0; // logical size of the image
  int error = 0;          // errno of the last failure
};

int offset_read_at(sqfs_file_t* f, sqfs_u64 offset, void* buffer, size_t size) {
  auto* self = reinterpret_cast<OffsetFile*>(f);
  if (offset > self->size || size > self->size - offset) {
    return SQFS_ERROR_OUT_OF_BOUNDS;
  }
  auto* p = static_cast<char*>(buffer);
  while (size > 0) {
    ssize_t n =
        ::pread(self->fd, p, size, static_cast<off_t>(self->base + static_cast<std::int64_t>(offset)));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      self->error = n < 0 ? errno : EIO;
      return SQFS_ERROR_IO;
    }
    p += n;
    offset += static_cast<sqfs_u64>(n);
    size -= static_cast<size_t>(n);
  }
  return 0;
}

int offset_write_at(sqfs_file_t* f, sqfs_u64 offset, const void* buffer, size_t size) {
  auto* self = reinterpret_cast<OffsetFile*>(f);
  const auto* p = static_cast<const char*>(buffer);
  sqfs_u64 at = offset;
  std::size_t left = size;
  while (left > 0) {
    ssize_t n = ::pwrite(self->fd, p, left, static_cast<off_t>(self->base + static_cast<std::int64_t>(at)));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      self->error = errno;
      return SQFS_ERROR_IO;
    }
    p += n;
    at += static_cast<sqfs_u64>(n);
    left -= static_cast<size_t>(n);
  }
  self->size = std::max<std::uint64_t>(self->size, offset + size);
  return 0;
}

sqfs_u64 offset_get_size(const sqfs_file_t* f) {
  return reinterpret_cast<const OffsetFile*>(f)->size;
}

int offset_truncate(sqfs_file_t* f, sqfs_u64 size) {
  auto* self = reinterpret_cast<OffsetFile*>(f);
  if (::ftruncate(self->fd, static_cast<off_t>(self->base + static_cast<std::int64_t>(size))) != 0) {
    self->error = errno;
    return SQFS_ERROR_IO;
  }
  self->size = size;
  return 0;
}

void offset_destroy(sqfs_object_t* obj) {
  delete reinterpret_cast<OffsetFile*>(obj); // NOLINT(cppcoreguidelines-owning-memory)
}

} // namespace

SqfsPtr<sqfs_file_t> make_offset_file(int fd, std::int64_t base, std::uint64_t size) {
  auto* f = new OffsetFile(); // NOLINT(cppcoreguidelines-owning-memory)
  f->iface.base.destroy = offset_destroy;
  f->iface.base.copy = nullptr;
  f->iface.read_at = offset_read_at;
  f->iface.write_at = offset_write_at;
  f->iface.get_size = offset_get_size;
  f->iface.truncate = offset_truncate;
  f->fd = fd;
  f->base = base;
  f->size = size;
  return SqfsPtr<sqfs_file_t>(&f->iface);
}

int offset_file_error(const sqfs_file_t* file) {
  return reinterpret_cast<const OffsetFile*>(file)->error;
}

// ---------------------------------------------------------------------------------------------
// gzip blocks from libdeflate. Squashfs "gzip" blocks are zlib streams (RFC 1950), which
// libdeflate_zlib_compress writes; any zlib inflater (the kernel, squashfuse, unsquashfs) reads
// them. The configuration reported is the squashfs default (level 9, window 15), so no compressor
// options block is written, exactly like `mksquashfs -comp gzip`.

namespace {

struct DeflateCompressor {
  sqfs_compressor_t iface; // first member
  libdeflate_compressor* deflate = nullptr;
  int level = 0;                // set by make_deflate_compressor
  std::uint32_t block_size = 0; // set by make_deflate_compressor
};

void deflate_destroy(sqfs_object_t* obj) {
  auto* self = reinterpret_cast<DeflateCompressor*>(obj);
  libdeflate_free_compressor(self->deflate);
  delete self; // NOLINT(cppcoreguidelines-owning-memory)
}

sqfs_object_t* deflate_copy(const sqfs_object_t* obj);

void deflate_get_configuration(const sqfs_compressor_t* cmp, sqfs_compressor_config_t* cfg) {
  const auto* self = reinterpret_cast<const DeflateCompressor*>(cmp);
  sqfs_compressor_config_init(cfg, SQFS_COMP_GZIP, self->block_size, 0);
}

int deflate_write_options(sqfs_compressor_t* /*cmp*/, sqfs_file_t* /*file*/) {
  return 0; // defaults: nothing to record
}

int deflate_read_options(sqfs_compressor_t* /*cmp*/, sqfs_file_t* /*file*/) {
  return SQFS_ERROR_UNSUPPORTED; // compression only
}

sqfs_s32 deflate_do_block(sqfs_compressor_t* cmp, const sqfs_u8* in, sqfs_u32 size, sqfs_u8* out,
                          sqfs_u32 outsize) {
  auto* self = reinterpret_cast<DeflateCompressor*>(cmp);
  if (size == 0) {
    return 0;
  }
  // A block that doesn't shrink is stored uncompressed (return 0), as libsquashfs's codecs do.
  std::size_t avail = std::min<std::size_t>(outsize, size - 1);
  std::size_t n = libdeflate_zlib_compress(self->deflate, in, size, out, avail);
  return static_cast<sqfs_s32>(n);
}

} // namespace

sqfs_compressor_t* make_deflate_compressor(int level, std::uint32_t block_size) {
  auto* c = new DeflateCompressor(); // NOLINT(cppcoreguidelines-owning-memory)
  c->deflate = libdeflate_alloc_compressor(level);
  if (c->deflate == nullptr) {
    delete c; // NOLINT(cppcoreguidelines-owning-memory)
    return nullptr;
  }
  c->level = level;
  c->block_size = block_size;
  c->iface.base.destroy = deflate_destroy;
  c->iface.base.copy = deflate_copy;
  c->iface.get_configuration = deflate_get_configuration;
  c->iface.write_options = deflate_write_options;
  c->iface.read_options = deflate_read_options;
  c->iface.do_block = deflate_do_block;
  return &c->iface;
}

namespace {

sqfs_object_t* deflate_copy(const sqfs_object_t* obj) {
  const auto* self = reinterpret_cast<const DeflateCompressor*>(obj);
  return reinterpret_cast<sqfs_object_t*>(make_deflate_compressor(self->level, self->block_size));
}

// Wraps a libsquashfs compressor so that a block that doesn't shrink is stored uncompressed, as
// mksquashfs does. (libsquashfs's lz4 returns its output even when it is larger, e.g. 5 bytes for
// a 4-byte ID table; the kernel reads that, but unsquashfs 4.5 calls it corruption.)
struct ShrinkOnly {
  sqfs_compressor_t iface; // first member
  sqfs_compressor_t* inner = nullptr;
};

void shrink_destroy(sqfs_object_t* obj) {
  auto* self = reinterpret_cast<ShrinkOnly*>(obj);
  sqfs_destroy(self->inner);
  delete self; // NOLINT(cppcoreguidelines-owning-memory)
}

sqfs_object_t* shrink_copy(const sqfs_object_t* obj) {
  const auto* self = reinterpret_cast<const ShrinkOnly*>(obj);
  auto* inner = static_cast<sqfs_compressor_t*>(sqfs_copy(self->inner));
  return inner == nullptr ? nullptr : reinterpret_cast<sqfs_object_t*>(make_shrink_only(inner));
}

void shrink_get_configuration(const sqfs_compressor_t* cmp, sqfs_compressor_config_t* cfg) {
  const auto* self = reinterpret_cast<const ShrinkOnly*>(cmp);
  self->inner->get_configuration(self->inner, cfg);
}

int shrink_write_options(sqfs_compressor_t* cmp, sqfs_file_t* file) {
  auto* self = reinterpret_cast<ShrinkOnly*>(cmp);
  return self->inner->write_options(self->inner, file);
}

int shrink_read_options(sqfs_compressor_t* cmp, sqfs_file_t* file) {
  auto* self = reinterpret_cast<ShrinkOnly*>(cmp);
  return self->inner->read_options(self->inner, file);
}

sqfs_s32 shrink_do_block(sqfs_compressor_t* cmp, const sqfs_u8* in, sqfs_u32 size, sqfs_u8* out,
                         sqfs_u32 outsize) {
  auto* self = reinterpret_cast<ShrinkOnly*>(cmp);
  sqfs_s32 n = self->inner->do_block(self->inner, in, size, out, outsize);
  return n > 0 && static_cast<sqfs_u32>(n) >= size ? 0 : n;
}

} // namespace

sqfs_compressor_t* make_shrink_only(sqfs_compressor_t* inner) {
  auto* c = new ShrinkOnly(); // NOLINT(cppcoreguidelines-owning-memory)
  c->inner = inner;
  c->iface.base.destroy = shrink_destroy;
  c->iface.base.copy = shrink_copy;
  c->iface.get_configuration = shrink_get_configuration;
  c->iface.write_options = shrink_write_options;
  c->iface.read_options = shrink_read_options;
  c->iface.do_block = shrink_do_block;
  return &c->iface;
}

} // namespace lockstep::squashfs_detail
