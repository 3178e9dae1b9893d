#include "support/oci/squashfs.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/codec/compress.hpp"
#include "support/oci/layer_model.hpp"
#include "support/oci/tar_reader.hpp"
#include "support/system/fs.hpp"

#include <climits>
#include <libdeflate.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <sqfs/block.h>
#include <sqfs/block_processor.h>
#include <sqfs/block_writer.h>
#include <sqfs/compressor.h>
#include <sqfs/data_reader.h>
#include <sqfs/dir.h>
#include <sqfs/dir_reader.h>
#include <sqfs/dir_writer.h>
#include <sqfs/error.h>
#include <sqfs/frag_table.h>
#include <sqfs/id_table.h>
#include <sqfs/inode.h>
#include <sqfs/io.h>
#include <sqfs/meta_writer.h>
#include <sqfs/super.h>
#include <sqfs/xattr_writer.h>
#include <unordered_map>
#include <vector>

namespace lockstep {

namespace fs = std::filesystem;

std::string_view squashfs_compressor_name(SquashfsCompressor compressor) {
  switch (compressor) {
  case SquashfsCompressor::gzip:
    return "gzip";
  case SquashfsCompressor::xz:
    return "xz";
  case SquashfsCompressor::zstd:
    return "zstd";
  case SquashfsCompressor::lz4:
    return "lz4";
  }
  return "gzip";
}

std::optional<SquashfsCompressor> parse_squashfs_compressor(std::string_view name) {
  for (auto c : {SquashfsCompressor::gzip, SquashfsCompressor::xz, SquashfsCompressor::zstd,
                 SquashfsCompressor::lz4}) {
    if (squashfs_compressor_name(c) == name) {
      return c;
    }
  }
  return std::nullopt;
}

namespace {

constexpr std::uint32_t k_no_xattr = 0xFFFFFFFFU;
constexpr std::size_t k_no_slot = static_cast<std::size_t>(-1);
constexpr std::size_t k_max_name = 256; // SQUASHFS_NAME_LEN
constexpr std::size_t k_io_buffer = 1U << 20;

struct SqfsDeleter {
  void operator()(void* p) const { sqfs_destroy(p); }
};
template <typename T> using SqfsPtr = std::unique_ptr<T, SqfsDeleter>;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); } // NOLINT(cppcoreguidelines-no-malloc)
};
using InodePtr = std::unique_ptr<sqfs_inode_generic_t, FreeDeleter>;

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

// ---------------------------------------------------------------------------------------------
// gzip blocks from libdeflate. Squashfs "gzip" blocks are zlib streams (RFC 1950), which
// libdeflate_zlib_compress writes; any zlib inflater (the kernel, squashfuse, unsquashfs) reads
// them. The configuration reported is the squashfs default (level 9, window 15), so no compressor
// options block is written, exactly like `mksquashfs -comp gzip`.

struct DeflateCompressor {
  sqfs_compressor_t iface; // first member
  libdeflate_compressor* deflate = nullptr;
  int level = k_squashfs_gzip_level;
  std::uint32_t block_size = k_squashfs_block_size;
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

sqfs_compressor_t* make_shrink_only(sqfs_compressor_t* inner);

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

SQFS_COMPRESSOR compressor_id(SquashfsCompressor c) {
  switch (c) {
  case SquashfsCompressor::gzip:
    return SQFS_COMP_GZIP;
  case SquashfsCompressor::xz:
    return SQFS_COMP_XZ;
  case SquashfsCompressor::zstd:
    return SQFS_COMP_ZSTD;
  case SquashfsCompressor::lz4:
    return SQFS_COMP_LZ4;
  }
  return SQFS_COMP_GZIP;
}

Result<SqfsPtr<sqfs_compressor_t>> make_compressor(SquashfsCompressor c) {
  if (c == SquashfsCompressor::gzip) {
    sqfs_compressor_t* cmp = make_deflate_compressor(k_squashfs_gzip_level, k_squashfs_block_size);
    if (cmp == nullptr) {
      return internal_error("can't create a libdeflate compressor");
    }
    return SqfsPtr<sqfs_compressor_t>(cmp);
  }
  sqfs_compressor_config_t cfg{};
  int ret = sqfs_compressor_config_init(&cfg, compressor_id(c), k_squashfs_block_size, 0);
  if (ret == 0 && c == SquashfsCompressor::zstd) {
    cfg.level = k_squashfs_zstd_level;
  }
  if (ret == 0 && c == SquashfsCompressor::xz) {
    cfg.level = k_squashfs_xz_level;
  }
  sqfs_compressor_t* cmp = nullptr;
  if (ret == 0) {
    ret = sqfs_compressor_create(&cfg, &cmp);
  }
  if (ret != 0) {
    return external_error("libsquashfs can't create a {} compressor: {}", squashfs_compressor_name(c),
                          sqfs_error_text(ret));
  }
  return SqfsPtr<sqfs_compressor_t>(make_shrink_only(cmp));
}

// A decompressor for the compressor an image records in its superblock.
Result<SqfsPtr<sqfs_compressor_t>> make_decompressor(const sqfs_super_t& super, sqfs_file_t* file,
                                                     const std::string& what) {
  sqfs_compressor_config_t cfg{};
  int ret = sqfs_compressor_config_init(&cfg, static_cast<SQFS_COMPRESSOR>(super.compression_id),
                                        super.block_size, SQFS_COMP_FLAG_UNCOMPRESS);
  sqfs_compressor_t* cmp = nullptr;
  if (ret == 0) {
    ret = sqfs_compressor_create(&cfg, &cmp);
  }
  if (ret != 0) {
    return invalid_input("{}: can't read squashfs compressor {}: {}", what, super.compression_id,
                         sqfs_error_text(ret));
  }
  SqfsPtr<sqfs_compressor_t> out(cmp);
  if ((super.flags & SQFS_FLAG_COMPRESSOR_OPTIONS) != 0) {
    ret = cmp->read_options(cmp, file);
    if (ret != 0) {
      return invalid_input("{}: bad squashfs compressor options: {}", what, sqfs_error_text(ret));
    }
  }
  return out;
}

// "libsquashfs.so.1.4.0": the file name of the loaded library (its version).
std::string libsquashfs_version() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&sqfs_super_init), &info) == 0 || info.dli_fname == nullptr) {
    return "libsquashfs";
  }
  std::error_code ec;
  fs::path real = fs::canonical(info.dli_fname, ec);
  return ec ? fs::path(info.dli_fname).filename().string() : real.filename().string();
}

// ---------------------------------------------------------------------------------------------
// The in-memory tree.

struct Node {
  enum class Kind : std::uint8_t { directory, file, symlink, fifo };
  Kind kind = Kind::directory;
  std::uint16_t perm = 0755; // permission bits incl. setuid/setgid/sticky
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint32_t mtime = 0;
  std::string target;           // symlinks
  std::string capability;       // the security.capability xattr value, if any
  std::uint64_t size = 0;       // files
  std::int32_t layer = -1;      // files: the layer holding the data (-1: `inline_data`)
  std::uint64_t member = 0;     // files: the member's ordinal in that layer
  std::string inline_data;      // files added with SquashfsWriter::add
  std::size_t slot = k_no_slot; // files: index of the inode the block processor wrote
  std::map<std::string, std::shared_ptr<Node>, std::less<>> children; // directories, sorted bytewise
  // Serialisation scratch.
  std::uint32_t nlink = 0;
  std::uint32_t inode_num = 0;
  std::uint64_t ref = 0;
  std::uint32_t parent_num = 0;
};

using NodePtr = std::shared_ptr<Node>;

// What a node is, as the layer model sees it (a null node: nothing there).
layer::Entry entry_of(const Node* n) {
  layer::Entry e;
  if (n == nullptr) {
    return e;
  }
  switch (n->kind) {
  case Node::Kind::directory:
    e.type = layer::Entry::Type::directory;
    break;
  case Node::Kind::symlink:
    e.type = layer::Entry::Type::symlink;
    e.link_target = n->target;
    break;
  default:
    e.type = layer::Entry::Type::other;
    break;
  }
  return e;
}

std::uint16_t type_bits(Node::Kind kind) {
  switch (kind) {
  case Node::Kind::directory:
    return S_IFDIR;
  case Node::Kind::file:
    return S_IFREG;
  case Node::Kind::symlink:
    return S_IFLNK;
  case Node::Kind::fifo:
    return S_IFIFO;
  }
  return 0;
}

} // namespace

// ---------------------------------------------------------------------------------------------

class SquashfsWriter::Impl {
public:
  Impl(int fd, std::int64_t offset, const SquashfsOptions& options, std::string what)
      : m_fd(fd), m_offset(offset), m_options(options), m_what(std::move(what)) {
    m_root = std::make_shared<Node>();
    m_root->mtime = clamp_time(options.epoch);
    m_buffer.resize(k_io_buffer);
  }
  ~Impl() {
    stop_data();
    reset_inodes();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;

  Result<void> start_data();
  Result<void> add_layer(const fs::path& tar, const std::string& what);
  Result<void> add(const SquashfsEntry& entry);
  [[nodiscard]] bool exists(std::string_view path) const;
  Result<std::int64_t> finish();

private:
  struct Layer {
    fs::path path;
    std::string what;
  };

  [[nodiscard]] std::uint32_t clamp_time(std::int64_t t) const {
    return static_cast<std::uint32_t>(std::clamp<std::int64_t>(t, 0, m_options.epoch));
  }
  Error sqfs_failure(const std::string& doing, int code) const {
    if (code == SQFS_ERROR_IO) {
      int err = reinterpret_cast<OffsetFile*>(m_file.get())->error;
      return errno_error(fmt::format("{}: {}", m_what, doing), err != 0 ? err : EIO);
    }
    return internal_error("{}: {}: {}", m_what, doing, sqfs_error_text(code));
  }
  // Drains the block processor (blocks still queued in its threads are freed only once they come
  // back) and destroys it.
  void stop_data() {
    if (m_processor) {
      (void)sqfs_block_processor_finish(m_processor.get());
      m_processor.reset();
    }
  }
  void reset_inodes() {
    for (auto* inode : m_inodes) {
      sqfs_free(inode);
    }
    m_inodes.clear();
  }

  class NodeTree;

  Result<void> read_layer(std::size_t index, const std::unordered_map<std::uint64_t, Node*>* winners);
  Result<std::size_t> stream_file(TarReader& reader, const std::string& name);
  Result<std::size_t> stream_bytes(std::string_view data);
  /// The node at the resolved `path` (no symbolic link followed), or null.
  [[nodiscard]] NodePtr node_at(std::string_view path) const;
  /// The node at `path`, its parents resolved inside the root, a final link not followed; or null.
  [[nodiscard]] NodePtr lookup(std::string_view path) const;
  Result<void> stream_inline_files();
  Result<void> redo_data();
  Result<void> write_tables(sqfs_super_t& super, std::int64_t& size);
  struct Tables;
  std::vector<Node*> number_nodes();
  Result<Tables> create_tables();
  Result<void> record_xattrs(const std::vector<Node*>& order, Tables& t);
  Result<sqfs_inode_generic_t*> inode_of(Node& n, std::uint32_t xattr, Tables& t, InodePtr& owned);
  Result<void> write_inodes(const std::vector<Node*>& order, Tables& t);
  Result<void> write_directory_and_id_tables(sqfs_super_t& super, Tables& t);
  Result<std::int64_t> write_superblock(sqfs_super_t& super);

  int m_fd;
  std::int64_t m_offset;
  SquashfsOptions m_options;
  std::string m_what;
  NodePtr m_root;
  std::vector<Layer> m_layers;
  std::vector<char> m_buffer;

  SqfsPtr<sqfs_file_t> m_file;
  SqfsPtr<sqfs_compressor_t> m_cmp;
  SqfsPtr<sqfs_compressor_t> m_uncmp;
  SqfsPtr<sqfs_block_writer_t> m_block_writer;
  SqfsPtr<sqfs_frag_table_t> m_frag_table;
  SqfsPtr<sqfs_block_processor_t> m_processor;
  sqfs_super_t m_super{};
  std::deque<sqfs_inode_generic_t*> m_inodes; // stable addresses: the block processor updates them
  std::uint64_t m_streamed = 0;               // files whose data went into the image
};

Result<void> SquashfsWriter::Impl::start_data() {
  stop_data();
  m_frag_table.reset();
  m_block_writer.reset();
  reset_inodes();
  m_streamed = 0;
  if (!m_file) {
    m_file = make_offset_file(m_fd, m_offset, 0);
  }
  if (int r = m_file->truncate(m_file.get(), 0); r != 0) {
    return sqfs_failure("can't truncate the image", r);
  }
  if (!m_cmp) {
    LS_TRY_ASSIGN(m_cmp, make_compressor(m_options.compressor));
    // A decompressor lets fragment deduplication compare bytes, not just hashes.
    sqfs_compressor_config_t cfg{};
    sqfs_compressor_config_init(&cfg, compressor_id(m_options.compressor), k_squashfs_block_size,
                                SQFS_COMP_FLAG_UNCOMPRESS);
    sqfs_compressor_t* uncmp = nullptr;
    if (sqfs_compressor_create(&cfg, &uncmp) == 0) {
      m_uncmp.reset(uncmp);
    }
  }
  if (int r = sqfs_super_init(&m_super, k_squashfs_block_size, static_cast<sqfs_u32>(m_options.epoch),
                              compressor_id(m_options.compressor));
      r != 0) {
    return sqfs_failure("can't initialise the superblock", r);
  }
  if (int r = sqfs_super_write(&m_super, m_file.get()); r != 0) {
    return sqfs_failure("can't write the superblock", r);
  }
  int r = m_cmp->write_options(m_cmp.get(), m_file.get());
  if (r < 0) {
    return sqfs_failure("can't write the compressor options", r);
  }
  if (r > 0) {
    m_super.flags |= SQFS_FLAG_COMPRESSOR_OPTIONS;
  }
  m_block_writer.reset(sqfs_block_writer_create(m_file.get(), SQFS_DEVBLK_SIZE, 0));
  m_frag_table.reset(sqfs_frag_table_create(0));
  if (!m_block_writer || !m_frag_table) {
    return internal_error("{}: out of memory", m_what);
  }
  unsigned threads = m_options.threads != 0 ? m_options.threads : default_thread_count();
  sqfs_block_processor_desc_t desc{};
  desc.size = sizeof(desc);
  desc.max_block_size = k_squashfs_block_size;
  desc.num_workers = std::max(1U, threads);
  desc.max_backlog = 8 * desc.num_workers;
  desc.cmp = m_cmp.get();
  desc.wr = m_block_writer.get();
  desc.tbl = m_frag_table.get();
  desc.file = m_uncmp ? m_file.get() : nullptr;
  desc.uncmp = m_uncmp.get();
  sqfs_block_processor_t* proc = nullptr;
  if (int rc = sqfs_block_processor_create_ex(&desc, &proc); rc != 0) {
    return sqfs_failure("can't start the block compressor", rc);
  }
  m_processor.reset(proc);
  return {};
}

Result<std::size_t> SquashfsWriter::Impl::stream_bytes(std::string_view data) {
  m_inodes.push_back(nullptr);
  std::size_t slot = m_inodes.size() - 1;
  if (int r = sqfs_block_processor_begin_file(m_processor.get(), &m_inodes.back(), nullptr, 0); r != 0) {
    return sqfs_failure("can't compress file data", r);
  }
  if (int r = sqfs_block_processor_append(m_processor.get(), data.data(), data.size()); r != 0) {
    return sqfs_failure("can't compress file data", r);
  }
  if (int r = sqfs_block_processor_end_file(m_processor.get()); r != 0) {
    return sqfs_failure("can't compress file data", r);
  }
  ++m_streamed;
  return slot;
}

Result<std::size_t> SquashfsWriter::Impl::stream_file(TarReader& reader, const std::string& name) {
  m_inodes.push_back(nullptr);
  std::size_t slot = m_inodes.size() - 1;
  if (int r = sqfs_block_processor_begin_file(m_processor.get(), &m_inodes.back(), nullptr, 0); r != 0) {
    return sqfs_failure("can't compress " + name, r);
  }
  for (;;) {
    LS_TRY(check_interrupted());
    LS_TRY_ASSIGN(std::size_t n, reader.read(m_buffer.data(), m_buffer.size()));
    if (n == 0) {
      break;
    }
    if (int r = sqfs_block_processor_append(m_processor.get(), m_buffer.data(), static_cast<std::size_t>(n));
        r != 0) {
      return sqfs_failure("can't compress " + name, r);
    }
  }
  if (int r = sqfs_block_processor_end_file(m_processor.get()); r != 0) {
    return sqfs_failure("can't compress " + name, r);
  }
  ++m_streamed;
  return slot;
}

// The in-memory tree as the layer model sees it (support/oci/layer_model.hpp): paths are resolved,
// a file's data is streamed into the block processor when the model writes the file.
class SquashfsWriter::Impl::NodeTree final : public layer::Tree {
public:
  NodeTree(Impl& impl, std::size_t layer) : m_impl(impl), m_layer(layer) {}

  // The member being applied: its reader (for a file's data) and its ordinal in the layer.
  void set_member(TarReader* reader, std::uint64_t ordinal) {
    m_reader = reader;
    m_ordinal = ordinal;
  }

  [[nodiscard]] layer::Entry lookup(const std::string& path) const override {
    return entry_of(m_impl.node_at(path).get());
  }

  [[nodiscard]] std::vector<std::string> children(const std::string& path) const override {
    std::vector<std::string> out;
    if (NodePtr n = m_impl.node_at(path)) {
      for (const auto& [name, child] : n->children) {
        out.push_back(name);
      }
    }
    return out;
  }

  void remove(const std::string& path) override {
    auto [dir, base] = split(path);
    if (NodePtr parent = m_impl.node_at(dir)) {
      parent->children.erase(std::string(base));
    }
  }

  Result<void> make_implied_directory(const std::string& path, const layer::Member& m) override {
    auto dir = std::make_shared<Node>();
    dir->mtime = m_impl.clamp_time(m.mtime);
    return attach(path, std::move(dir));
  }

  Result<void> put(const std::string& path, const layer::Member& m) override {
    if (m.kind == layer::Member::Kind::root || m.kind == layer::Member::Kind::directory) {
      if (NodePtr d = path.empty() ? m_impl.m_root : m_impl.node_at(path);
          d && d->kind == Node::Kind::directory) {
        set_attributes(*d, m); // a directory over a directory keeps its children
        return {};
      }
    }
    auto n = std::make_shared<Node>();
    set_attributes(*n, m);
    switch (m.kind) {
    case layer::Member::Kind::directory:
      n->kind = Node::Kind::directory;
      break;
    case layer::Member::Kind::symlink:
      n->kind = Node::Kind::symlink;
      n->target = m.link;
      break;
    case layer::Member::Kind::fifo:
      n->kind = Node::Kind::fifo;
      break;
    default:
      n->kind = Node::Kind::file;
      n->size = m.size;
      n->layer = static_cast<std::int32_t>(m_layer);
      n->member = m_ordinal;
      n->capability = m.capability;
      if (m.size > 0 && m_reader != nullptr) {
        LS_TRY_ASSIGN(n->slot, m_impl.stream_file(*m_reader, path));
      }
      break;
    }
    return attach(path, std::move(n));
  }

  Result<void> link(const std::string& path, const std::string& target, const layer::Member& /*m*/) override {
    NodePtr n = m_impl.node_at(target);
    if (!n) {
      return internal_error("{}: hard link target '{}' vanished", m_impl.m_what, target);
    }
    return attach(path, std::move(n));
  }

private:
  static std::pair<std::string_view, std::string_view> split(std::string_view path) {
    const std::size_t slash = path.rfind('/');
    if (slash == std::string_view::npos) {
      return {std::string_view(), path};
    }
    return {path.substr(0, slash), path.substr(slash + 1)};
  }
  void set_attributes(Node& n, const layer::Member& m) const {
    n.perm = static_cast<std::uint16_t>(m.perm & 07777U);
    n.uid = m.uid;
    n.gid = m.gid;
    n.mtime = m_impl.clamp_time(m.mtime);
  }
  Result<void> attach(const std::string& path, NodePtr node) {
    auto [dir, base] = split(path);
    NodePtr parent = m_impl.node_at(dir);
    if (!parent || parent->kind != Node::Kind::directory) {
      return internal_error("{}: the parent of '{}' is not a directory", m_impl.m_what, path);
    }
    parent->children[std::string(base)] = std::move(node);
    return {};
  }

  Impl& m_impl;
  std::size_t m_layer;
  TarReader* m_reader = nullptr;
  std::uint64_t m_ordinal = 0;
};

// Reads one layer. First pass (no `winners`): every member is applied to the tree by the layer
// model, in order, and every regular file's data is streamed. Redo pass: only the data of the
// members in `winners` is streamed, into their nodes.
Result<void> SquashfsWriter::Impl::read_layer(std::size_t index,
                                              const std::unordered_map<std::uint64_t, Node*>* winners) {
  const Layer& layer = m_layers[index];
  const std::string& what = layer.what;
  // Read once, front to back, through the one layer decoder (support/oci/layer_stream.hpp):
  // memory stays bounded whatever the layer's size or compression.
  LS_TRY_ASSIGN(std::unique_ptr<oci::BlobReader> blob, oci::open_file_blob(layer.path, what));
  std::error_code ec;
  const std::uint64_t blob_size = std::filesystem::file_size(layer.path, ec);
  oci::LayerCheck bound;
  bound.max_out = oci::max_layer_expansion(ec ? 0 : blob_size); // a base layer may be hostile
  LS_TRY_ASSIGN(oci::LayerStream stream,
                oci::LayerStream::open(std::move(blob), oci::LayerCodec::detect, what, bound));
  LS_TRY_ASSIGN(TarReader reader, TarReader::open_layer(std::move(stream)));
  const oci::LayerStream* progress_of = reader.layer_stream();
  std::uint64_t consumed = 0;
  auto report_progress = [&] {
    if (m_options.progress != nullptr && progress_of != nullptr) {
      const std::uint64_t now = progress_of->blob_bytes();
      if (now > consumed) {
        m_options.progress->advance(now - consumed);
        consumed = now;
      }
    }
  };
  NodeTree tree(*this, index);
  layer::LayerApplier applier(tree, what);
  for (std::uint64_t ordinal = 0;; ++ordinal) {
    LS_TRY(check_interrupted());
    LS_TRY_ASSIGN(std::optional<layer::Member> m, reader.next_layer_member());
    if (!m) {
      break;
    }
    report_progress();
    if (winners != nullptr) {
      auto it = winners->find(ordinal);
      if (it != winners->end() && m->kind == layer::Member::Kind::file) {
        LS_TRY_ASSIGN(it->second->slot, stream_file(reader, m->raw));
      }
      continue;
    }
    tree.set_member(&reader, ordinal);
    LS_TRY(applier.apply(*m));
  }
  report_progress();
  return {};
}

NodePtr SquashfsWriter::Impl::node_at(std::string_view path) const {
  NodePtr n = m_root;
  std::size_t i = 0;
  while (n && i < path.size()) {
    std::size_t j = path.find('/', i);
    j = j == std::string_view::npos ? path.size() : j;
    if (n->kind != Node::Kind::directory) {
      return NodePtr();
    }
    auto it = n->children.find(path.substr(i, j - i));
    n = it == n->children.end() ? NodePtr() : it->second;
    i = j + 1;
  }
  return n;
}

NodePtr SquashfsWriter::Impl::lookup(std::string_view path) const {
  layer::Walk w = layer::walk_in_root(
      path, [this](const std::string& p) { return entry_of(node_at(p).get()); }, false);
  return w.status == layer::Walk::Status::ok ? node_at(w.path) : NodePtr();
}

Result<void> SquashfsWriter::Impl::add_layer(const fs::path& tar, const std::string& what) {
  if (!m_processor) {
    LS_TRY(start_data());
  }
  m_layers.push_back(Layer{tar, what});
  return read_layer(m_layers.size() - 1, nullptr);
}

Result<void> SquashfsWriter::Impl::add(const SquashfsEntry& entry) {
  if (!m_processor) {
    LS_TRY(start_data());
  }
  layer::Member m;
  m.raw = entry.path;
  std::string path = entry.path;
  while (!path.empty() && path.front() == '/') {
    path.erase(0, 1);
  }
  LS_TRY_ASSIGN(m.path, normalize_member_name(path.empty() ? "." : path));
  const std::size_t slash = m.path.rfind('/');
  m.parent = slash == std::string::npos ? std::string() : m.path.substr(0, slash);
  m.base = slash == std::string::npos ? m.path : m.path.substr(slash + 1);
  m.perm = entry.mode & 07777U;
  m.uid = entry.uid;
  m.gid = entry.gid;
  m.mtime = m_options.epoch;
  switch (entry.type) {
  case SquashfsEntry::Type::file:
    m.kind = layer::Member::Kind::file;
    break;
  case SquashfsEntry::Type::directory:
    m.kind = m.path.empty() ? layer::Member::Kind::root : layer::Member::Kind::directory;
    break;
  case SquashfsEntry::Type::symlink:
    m.kind = layer::Member::Kind::symlink;
    m.link = entry.data;
    break;
  }
  NodeTree tree(*this, 0);
  layer::LayerApplier applier(tree, m_what);
  LS_TRY(applier.apply(m));
  if (entry.type == SquashfsEntry::Type::file) {
    NodePtr n = lookup(m.path);
    n->layer = -1;
    n->size = entry.data.size();
    n->inline_data = entry.data; // streamed by finish(), once nothing can replace it any more
  }
  return {};
}

bool SquashfsWriter::Impl::exists(std::string_view path) const {
  return lookup(path) != nullptr;
}

namespace {

// Every distinct node once, in sorted depth-first order (a hard-linked file at its first path).
void collect_nodes(const NodePtr& dir, std::vector<Node*>& out, std::set<Node*>& seen) {
  for (const auto& [name, child] : dir->children) {
    if (seen.insert(child.get()).second) {
      out.push_back(child.get());
    }
    if (child->kind == Node::Kind::directory) {
      collect_nodes(child, out, seen);
    }
  }
}

} // namespace

Result<void> SquashfsWriter::Impl::stream_inline_files() {
  std::vector<Node*> nodes;
  std::set<Node*> seen;
  collect_nodes(m_root, nodes, seen);
  for (Node* n : nodes) {
    if (n->kind == Node::Kind::file && n->layer < 0 && n->size > 0 && n->slot == k_no_slot) {
      LS_TRY_ASSIGN(n->slot, stream_bytes(n->inline_data));
    }
  }
  return {};
}

// The second data pass: only files still in the tree, in the same layer order.
Result<void> SquashfsWriter::Impl::redo_data() {
  log::debug("{}: files were replaced or deleted by upper layers; writing the data again without them",
             m_what);
  m_options.progress = nullptr; // the progress line already went through the layers once
  std::vector<Node*> nodes;
  std::set<Node*> seen;
  collect_nodes(m_root, nodes, seen);
  std::vector<std::unordered_map<std::uint64_t, Node*>> winners(m_layers.size());
  for (Node* n : nodes) {
    if (n->kind == Node::Kind::file) {
      n->slot = k_no_slot;
      if (n->layer >= 0 && n->size > 0) {
        winners[static_cast<std::size_t>(n->layer)][n->member] = n;
      }
    }
  }
  LS_TRY(start_data());
  for (std::size_t i = 0; i < m_layers.size(); ++i) {
    if (!winners[i].empty()) {
      LS_TRY(read_layer(i, &winners[i]));
    }
  }
  return stream_inline_files();
}

Result<std::int64_t> SquashfsWriter::Impl::finish() {
  if (!m_processor) {
    LS_TRY(start_data());
  }
  LS_TRY(stream_inline_files());
  {
    std::vector<Node*> nodes;
    std::set<Node*> seen;
    collect_nodes(m_root, nodes, seen);
    std::uint64_t live = 0;
    for (Node* n : nodes) {
      live += (n->kind == Node::Kind::file && n->slot != k_no_slot) ? 1 : 0;
    }
    if (live != m_streamed) {
      LS_TRY(redo_data());
    }
  }
  if (int r = sqfs_block_processor_finish(m_processor.get()); r != 0) {
    return sqfs_failure("can't finish the data blocks", r);
  }
  std::int64_t size = 0;
  LS_TRY(write_tables(m_super, size));
  return size;
}

namespace {

// Inode numbers as gensquashfs and mksquashfs give them: a directory's entries are numbered after
// everything below them, so every inode is written before the directory listing it. Hard-linked
// files come first of all, as any directory may list them.
void number_inodes(Node* dir, std::vector<Node*>& order) {
  for (const auto& [name, child] : dir->children) {
    if (child->kind == Node::Kind::directory) {
      number_inodes(child.get(), order);
    }
  }
  for (const auto& [name, child] : dir->children) {
    if (child->inode_num == 0) {
      order.push_back(child.get());
      child->inode_num = static_cast<std::uint32_t>(order.size());
    }
  }
}

void count_links(Node* dir) {
  dir->nlink = 2;
  for (const auto& [name, child] : dir->children) {
    if (child->kind == Node::Kind::directory) {
      ++dir->nlink;
      count_links(child.get());
    } else {
      ++child->nlink;
    }
  }
}

void set_parents(Node* dir) {
  for (const auto& [name, child] : dir->children) {
    if (child->kind == Node::Kind::directory) {
      child->parent_num = dir->inode_num;
      set_parents(child.get());
    }
  }
}

// A zeroed inode with room for `extra` payload bytes (freed with std::free).
InodePtr new_inode(std::size_t extra) {
  // NOLINTNEXTLINE(cppcoreguidelines-no-malloc)
  auto* p = static_cast<sqfs_inode_generic_t*>(std::calloc(1, sizeof(sqfs_inode_generic_t) + extra));
  if (p != nullptr) {
    p->payload_bytes_available = static_cast<sqfs_u32>(extra);
    p->payload_bytes_used = static_cast<sqfs_u32>(extra);
  }
  return InodePtr(p);
}

} // namespace

// The writers of the tables after the data: ids, extended attributes, inodes, directories.
struct SquashfsWriter::Impl::Tables {
  SqfsPtr<sqfs_id_table_t> ids;
  SqfsPtr<sqfs_xattr_writer_t> xattrs;
  SqfsPtr<sqfs_meta_writer_t> inodes;
  SqfsPtr<sqfs_meta_writer_t> dir_meta;
  SqfsPtr<sqfs_dir_writer_t> dirs;
  std::vector<std::uint32_t> xattr_index; ///< per node of the inode order
  bool any_xattr = false;
};

// Writes the tables and the superblock after the data; `size` is the padded image size.
Result<void> SquashfsWriter::Impl::write_tables(sqfs_super_t& super, std::int64_t& size) {
  const std::vector<Node*> order = number_nodes();
  LS_TRY_ASSIGN(Tables t, create_tables());
  LS_TRY(record_xattrs(order, t));
  super.inode_table_start = m_file->get_size(m_file.get());
  LS_TRY(write_inodes(order, t));
  LS_TRY(write_directory_and_id_tables(super, t));
  super.inode_count = static_cast<sqfs_u32>(order.size());
  LS_TRY_ASSIGN(size, write_superblock(super));
  return {};
}

// Inode numbers as mksquashfs gives them (hard-linked files first, then depth-first, the root
// last), link counts and parent numbers; returns the nodes in inode order.
std::vector<Node*> SquashfsWriter::Impl::number_nodes() {
  std::vector<Node*> all;
  std::set<Node*> seen;
  collect_nodes(m_root, all, seen);
  for (Node* n : all) {
    n->nlink = 0;
    n->inode_num = 0;
  }
  count_links(m_root.get());
  std::vector<Node*> order;
  for (Node* n : all) {
    if (n->kind != Node::Kind::directory && n->nlink > 1) {
      order.push_back(n);
      n->inode_num = static_cast<std::uint32_t>(order.size());
    }
  }
  number_inodes(m_root.get(), order);
  order.push_back(m_root.get());
  m_root->inode_num = static_cast<std::uint32_t>(order.size());
  m_root->parent_num = m_root->inode_num + 1; // as mksquashfs
  set_parents(m_root.get());
  return order;
}

Result<SquashfsWriter::Impl::Tables> SquashfsWriter::Impl::create_tables() {
  Tables t;
  t.ids.reset(sqfs_id_table_create(0));
  t.xattrs.reset(sqfs_xattr_writer_create(0));
  t.inodes.reset(sqfs_meta_writer_create(m_file.get(), m_cmp.get(), 0));
  t.dir_meta.reset(sqfs_meta_writer_create(m_file.get(), m_cmp.get(), SQFS_META_WRITER_KEEP_IN_MEMORY));
  if (t.dir_meta) {
    t.dirs.reset(sqfs_dir_writer_create(t.dir_meta.get(), 0));
  }
  if (!t.ids || !t.xattrs || !t.inodes || !t.dir_meta || !t.dirs) {
    return internal_error("{}: out of memory", m_what);
  }
  return t;
}

// Extended attributes (file capabilities), in inode order.
Result<void> SquashfsWriter::Impl::record_xattrs(const std::vector<Node*>& order, Tables& t) {
  t.xattr_index.assign(order.size(), k_no_xattr);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Node* n = order[i];
    if (n->capability.empty()) {
      continue;
    }
    t.any_xattr = true;
    int r = sqfs_xattr_writer_begin(t.xattrs.get(), 0);
    if (r == 0) {
      r = sqfs_xattr_writer_add(t.xattrs.get(), "security.capability", n->capability.data(),
                                n->capability.size());
    }
    if (r == 0) {
      r = sqfs_xattr_writer_end(t.xattrs.get(), &t.xattr_index[i]);
    }
    if (r != 0) {
      return sqfs_failure("can't record extended attributes", r);
    }
  }
  return {};
}

// The inode of one node, by kind (a directory's listing is written here too); `owned` holds it
// unless it is a file's inode from the block processor.
Result<sqfs_inode_generic_t*> SquashfsWriter::Impl::inode_of(Node& n, std::uint32_t xattr, Tables& t,
                                                             InodePtr& owned) {
  switch (n.kind) {
  case Node::Kind::directory: {
    int r = sqfs_dir_writer_begin(t.dirs.get(), 0);
    for (const auto& [name, child] : n.children) {
      if (r == 0) {
        r = sqfs_dir_writer_add_entry(t.dirs.get(), name.c_str(), child->inode_num, child->ref,
                                      static_cast<sqfs_u16>(type_bits(child->kind) | child->perm));
      }
    }
    if (r == 0) {
      r = sqfs_dir_writer_end(t.dirs.get());
    }
    if (r != 0) {
      return sqfs_failure("can't write a directory listing", r);
    }
    owned.reset(sqfs_dir_writer_create_inode(t.dirs.get(), 0, xattr, n.parent_num));
    if (!owned) {
      return internal_error("{}: out of memory", m_what);
    }
    if (owned->base.type == SQFS_INODE_DIR) {
      owned->data.dir.nlink = n.nlink;
    } else {
      owned->data.dir_ext.nlink = n.nlink;
    }
    return owned.get();
  }
  case Node::Kind::file: {
    sqfs_inode_generic_t* inode = nullptr;
    if (n.slot != k_no_slot) {
      inode = m_inodes[n.slot];
    } else {
      owned = new_inode(0);
      if (!owned) {
        return internal_error("{}: out of memory", m_what);
      }
      owned->base.type = SQFS_INODE_FILE;
      owned->data.file.fragment_index = 0xFFFFFFFFU;
      inode = owned.get();
    }
    if (n.nlink > 1) {
      if (int r = sqfs_inode_make_extended(inode); r != 0) {
        return sqfs_failure("can't build an inode", r);
      }
      inode->data.file_ext.nlink = n.nlink;
    }
    return inode;
  }
  case Node::Kind::symlink:
    owned = new_inode(n.target.size());
    if (!owned) {
      return internal_error("{}: out of memory", m_what);
    }
    owned->base.type = SQFS_INODE_SLINK;
    owned->data.slink.nlink = n.nlink;
    owned->data.slink.target_size = static_cast<sqfs_u32>(n.target.size());
    std::memcpy(static_cast<void*>(owned->extra), n.target.data(), n.target.size());
    return owned.get();
  case Node::Kind::fifo:
    break;
  }
  owned = new_inode(0);
  if (!owned) {
    return internal_error("{}: out of memory", m_what);
  }
  owned->base.type = SQFS_INODE_FIFO;
  owned->data.ipc.nlink = n.nlink;
  return owned.get();
}

// The inode table, in inode order; each node's reference is recorded for its directory entry.
Result<void> SquashfsWriter::Impl::write_inodes(const std::vector<Node*>& order, Tables& t) {
  for (std::size_t i = 0; i < order.size(); ++i) {
    LS_TRY(check_interrupted());
    Node* n = order[i];
    InodePtr owned;
    LS_TRY_ASSIGN(sqfs_inode_generic_t * inode, inode_of(*n, t.xattr_index[i], t, owned));
    int r = 0;
    if (t.xattr_index[i] != k_no_xattr && n->kind != Node::Kind::directory) {
      r = sqfs_inode_make_extended(inode);
      if (r == 0) {
        r = sqfs_inode_set_xattr_index(inode, t.xattr_index[i]);
      }
    }
    if (r != 0) {
      return sqfs_failure("can't build an inode", r);
    }
    inode->base.mode = static_cast<sqfs_u16>(type_bits(n->kind) | n->perm);
    inode->base.mod_time = n->mtime;
    inode->base.inode_number = n->inode_num;
    r = sqfs_id_table_id_to_index(t.ids.get(), n->uid, &inode->base.uid_idx);
    if (r == 0) {
      r = sqfs_id_table_id_to_index(t.ids.get(), n->gid, &inode->base.gid_idx);
    }
    if (r != 0) {
      return sqfs_failure("can't record owner " + std::to_string(n->uid) + ":" + std::to_string(n->gid), r);
    }
    sqfs_u64 block = 0;
    sqfs_u32 offset = 0;
    sqfs_meta_writer_get_position(t.inodes.get(), &block, &offset);
    n->ref = (block << 16U) | offset;
    if (r = sqfs_meta_writer_write_inode(t.inodes.get(), inode); r != 0) {
      return sqfs_failure("can't write the inode table", r);
    }
  }
  int r = sqfs_meta_writer_flush(t.inodes.get());
  if (r == 0) {
    r = sqfs_meta_writer_flush(t.dir_meta.get());
  }
  if (r != 0) {
    return sqfs_failure("can't write the inode table", r);
  }
  return {};
}

// The directory, fragment, ID and extended-attribute tables, in mksquashfs's order.
Result<void> SquashfsWriter::Impl::write_directory_and_id_tables(sqfs_super_t& super, Tables& t) {
  sqfs_file_t* file = m_file.get();
  sqfs_compressor_t* cmp = m_cmp.get();
  super.root_inode_ref = m_root->ref;
  super.directory_table_start = file->get_size(file);
  int r = 0;
  if (r = sqfs_meta_write_write_to_file(t.dir_meta.get()); r != 0) {
    return sqfs_failure("can't write the directory table", r);
  }
  if (r = sqfs_frag_table_write(m_frag_table.get(), file, &super, cmp); r != 0) {
    return sqfs_failure("can't write the fragment table", r);
  }
  if (r = sqfs_id_table_write(t.ids.get(), file, &super, cmp); r != 0) {
    return sqfs_failure("can't write the ID table", r);
  }
  if (t.any_xattr) {
    if (r = sqfs_xattr_writer_flush(t.xattrs.get(), file, &super, cmp); r != 0) {
      return sqfs_failure("can't write the extended attributes", r);
    }
  } else {
    super.flags |= SQFS_FLAG_NO_XATTRS;
  }
  return {};
}

// The superblock, then zeros to the device block size, as mksquashfs pads (and loop devices
// want); returns the padded size.
Result<std::int64_t> SquashfsWriter::Impl::write_superblock(sqfs_super_t& super) {
  sqfs_file_t* file = m_file.get();
  super.bytes_used = file->get_size(file);
  if (int r = sqfs_super_write(&super, file); r != 0) {
    return sqfs_failure("can't write the superblock", r);
  }
  std::uint64_t padded = (super.bytes_used + SQFS_DEVBLK_SIZE - 1) / SQFS_DEVBLK_SIZE * SQFS_DEVBLK_SIZE;
  if (padded > super.bytes_used) {
    std::string zeros(static_cast<std::size_t>(padded - super.bytes_used), '\0');
    if (int r = file->write_at(file, super.bytes_used, zeros.data(), zeros.size()); r != 0) {
      return sqfs_failure("can't pad the image", r);
    }
  }
  return static_cast<std::int64_t>(padded);
}

SquashfsWriter::SquashfsWriter(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {
}
SquashfsWriter::~SquashfsWriter() = default;
SquashfsWriter::SquashfsWriter(SquashfsWriter&&) noexcept = default;

Result<SquashfsWriter> SquashfsWriter::create(int fd, std::int64_t offset, const SquashfsOptions& options,
                                              std::string what) {
  if (options.epoch < 0 || options.epoch > static_cast<std::int64_t>(UINT32_MAX)) {
    return invalid_input("{}: squashfs can't record the time {} (it stores 32-bit seconds)", what,
                         options.epoch);
  }
  return SquashfsWriter(std::make_unique<Impl>(fd, offset, options, std::move(what)));
}

Result<void> SquashfsWriter::add_layer(const fs::path& tar, const std::string& what) {
  return m_impl->add_layer(tar, what);
}
Result<void> SquashfsWriter::add(const SquashfsEntry& entry) {
  return m_impl->add(entry);
}
bool SquashfsWriter::exists(std::string_view path) const {
  return m_impl->exists(path);
}
Result<std::int64_t> SquashfsWriter::finish() {
  return m_impl->finish();
}

std::string squashfs_settings(const SquashfsOptions& options) {
  std::string codec;
  switch (options.compressor) {
  case SquashfsCompressor::gzip:
    codec = fmt::format("gzip libdeflate {} level {}", LIBDEFLATE_VERSION_STRING, k_squashfs_gzip_level);
    break;
  case SquashfsCompressor::zstd:
    codec = fmt::format("zstd level {}", k_squashfs_zstd_level);
    break;
  case SquashfsCompressor::xz:
    codec = fmt::format("xz level {}", k_squashfs_xz_level);
    break;
  case SquashfsCompressor::lz4:
    codec = "lz4";
    break;
  }
  return fmt::format("squashfs v4 {} block {} epoch {} ({}, {})", codec, k_squashfs_block_size, options.epoch,
                     libsquashfs_version(), codec_library_versions());
}

// ---------------------------------------------------------------------------------------------
// Extraction.

namespace {

class Extractor {
public:
  Extractor(const fs::path& file, bool keep_ownership) : m_file(file), m_keep(keep_ownership) {}

  Result<void> run(std::int64_t offset, int dest_fd);

private:
  Error corrupt(const std::string& where, const std::string& why) const {
    return invalid_input("{}: invalid squashfs image: {}: {}", m_file.string(), where, why);
  }
  Error sq_error(const std::string& where, int code) const {
    if (code == SQFS_ERROR_IO) {
      return io_error("{}: can't read the squashfs image ({})", m_file.string(), where);
    }
    return corrupt(where, sqfs_error_text(code));
  }
  Result<void> extract_dir(const sqfs_inode_generic_t* dir_inode, int dir_fd, const std::string& path,
                           int depth);
  Result<void> extract_file(const sqfs_inode_generic_t* inode, int dir_fd, const std::string& name,
                            const std::string& path);
  Result<void> set_attributes(int dir_fd, const std::string& name, const std::string& path,
                              const sqfs_inode_generic_t* inode, bool is_link);

  fs::path m_file;
  bool m_keep;
  int m_dest = -1;
  SqfsPtr<sqfs_file_t> m_sq;
  sqfs_super_t m_super{};
  SqfsPtr<sqfs_compressor_t> m_cmp;
  SqfsPtr<sqfs_dir_reader_t> m_dirs;
  SqfsPtr<sqfs_data_reader_t> m_data;
  SqfsPtr<sqfs_id_table_t> m_ids;
  std::unordered_map<std::uint32_t, std::string> m_links; // inode number -> first extracted path
  std::set<std::uint32_t> m_seen_dirs;                    // a directory may be listed only once
  std::vector<char> m_buffer = std::vector<char>(k_io_buffer);
};

bool valid_entry_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos && name.size() <= k_max_name;
}

Result<void> Extractor::run(std::int64_t offset, int dest_fd) {
  LS_TRY_ASSIGN(UniqueFd fd, open_file(m_file, O_RDONLY));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_error("can't stat " + m_file.string(), errno);
  }
  if (offset < 0 || offset > st.st_size) {
    return invalid_input("{}: squashfs offset {} is outside the file ({} bytes)", m_file.string(), offset,
                         st.st_size);
  }
  m_dest = dest_fd;
  m_sq = make_offset_file(fd.get(), offset, static_cast<std::uint64_t>(st.st_size - offset));
  if (int r = sqfs_super_read(&m_super, m_sq.get()); r != 0) {
    return sq_error("superblock", r);
  }
  if (m_super.bytes_used > static_cast<std::uint64_t>(st.st_size - offset)) {
    return corrupt("superblock", "the image is truncated");
  }
  LS_TRY_ASSIGN(m_cmp, make_decompressor(m_super, m_sq.get(), m_file.string()));
  m_ids.reset(sqfs_id_table_create(0));
  m_dirs.reset(sqfs_dir_reader_create(&m_super, m_cmp.get(), m_sq.get(), 0));
  m_data.reset(sqfs_data_reader_create(m_sq.get(), m_super.block_size, m_cmp.get(), 0));
  if (!m_ids || !m_dirs || !m_data) {
    return internal_error("out of memory reading {}", m_file.string());
  }
  if (int r = sqfs_id_table_read(m_ids.get(), m_sq.get(), &m_super, m_cmp.get()); r != 0) {
    return sq_error("ID table", r);
  }
  if (int r = sqfs_data_reader_load_fragment_table(m_data.get(), &m_super); r != 0) {
    return sq_error("fragment table", r);
  }
  sqfs_inode_generic_t* root_raw = nullptr;
  if (int r = sqfs_dir_reader_get_root_inode(m_dirs.get(), &root_raw); r != 0) {
    return sq_error("root inode", r);
  }
  InodePtr root(root_raw);
  if (root->base.type != SQFS_INODE_DIR && root->base.type != SQFS_INODE_EXT_DIR) {
    return corrupt("root inode", "not a directory");
  }
  LS_TRY(extract_dir(root.get(), dest_fd, "", 0));
  // The root's own permissions (the caller's directory keeps its ownership).
  mode_t mode = root->base.mode & 07777 & (m_keep ? 07777 : 01777);
  if (::fchmod(dest_fd, mode) != 0) {
    return errno_error("can't set the permissions of the extraction root", errno);
  }
  struct timespec times[2] = {{0, UTIME_OMIT}, {static_cast<time_t>(root->base.mod_time), 0}};
  ::futimens(dest_fd, times);
  return {};
}

Result<void> Extractor::set_attributes(int dir_fd, const std::string& name, const std::string& path,
                                       const sqfs_inode_generic_t* inode, bool is_link) {
  if (m_keep) {
    sqfs_u32 uid = 0;
    sqfs_u32 gid = 0;
    if (sqfs_id_table_index_to_id(m_ids.get(), inode->base.uid_idx, &uid) != 0 ||
        sqfs_id_table_index_to_id(m_ids.get(), inode->base.gid_idx, &gid) != 0) {
      return corrupt(path, "owner index out of range");
    }
    if (::fchownat(dir_fd, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
      return errno_error("can't set the owner of " + path, errno);
    }
  }
  if (!is_link) {
    mode_t mode = inode->base.mode & 07777 & (m_keep ? 07777 : 01777);
    if (::fchmodat(dir_fd, name.c_str(), mode, 0) != 0) {
      return errno_error("can't set the permissions of " + path, errno);
    }
  }
  struct timespec times[2] = {{0, UTIME_OMIT}, {static_cast<time_t>(inode->base.mod_time), 0}};
  if (::utimensat(dir_fd, name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno_error("can't set the time of " + path, errno);
  }
  return {};
}

Result<void> Extractor::extract_file(const sqfs_inode_generic_t* inode, int dir_fd, const std::string& name,
                                     const std::string& path) {
  int fd = ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return errno_error("can't create " + path, errno);
  }
  UniqueFd out(fd);
  sqfs_u64 size = 0;
  sqfs_inode_get_file_size(inode, &size);
  sqfs_u64 done = 0;
  while (done < size) {
    LS_TRY(check_interrupted());
    auto want = static_cast<sqfs_u32>(std::min<sqfs_u64>(m_buffer.size(), size - done));
    sqfs_s32 n = sqfs_data_reader_read(m_data.get(), inode, done, m_buffer.data(), want);
    if (n < 0) {
      return sq_error(path, n);
    }
    if (n == 0) {
      return corrupt(path, "file data ends early");
    }
    LS_TRY(write_all(fd, m_buffer.data(), static_cast<std::size_t>(n), path));
    done += static_cast<sqfs_u64>(n);
  }
  return {};
}

Result<void> Extractor::extract_dir(const sqfs_inode_generic_t* dir_inode, int dir_fd,
                                    const std::string& path, int depth) {
  if (depth > 1024) {
    return corrupt(path, "directories nested more than 1024 deep");
  }
  if (!m_seen_dirs.insert(dir_inode->base.inode_number).second) {
    return corrupt(path.empty() ? "/" : path, "a directory is listed twice (or contains itself)");
  }
  if (int r = sqfs_dir_reader_open_dir(m_dirs.get(), dir_inode, 0); r != 0) {
    return sq_error(path.empty() ? "/" : path, r);
  }
  // Read the whole listing first: extracting a subdirectory reuses the reader.
  std::vector<std::pair<std::string, InodePtr>> entries;
  for (;;) {
    sqfs_dir_entry_t* raw_entry = nullptr;
    int r = sqfs_dir_reader_read(m_dirs.get(), &raw_entry);
    if (r > 0) {
      break;
    }
    if (r < 0) {
      return sq_error(path.empty() ? "/" : path, r);
    }
    std::unique_ptr<sqfs_dir_entry_t, FreeDeleter> entry(raw_entry);
    std::string name(reinterpret_cast<const char*>(entry->name), static_cast<std::size_t>(entry->size) + 1);
    if (!valid_entry_name(name)) {
      return corrupt(path.empty() ? "/" : path, fmt::format("invalid entry name '{}'", name));
    }
    sqfs_inode_generic_t* raw_inode = nullptr;
    if (r = sqfs_dir_reader_get_inode(m_dirs.get(), &raw_inode); r != 0) {
      return sq_error(path + "/" + name, r);
    }
    entries.emplace_back(std::move(name), InodePtr(raw_inode));
  }
  std::vector<std::pair<std::string, const sqfs_inode_generic_t*>> subdirs;
  for (const auto& [name, inode] : entries) {
    std::string child = path + "/" + name;
    std::string rel = path.empty() ? name : path.substr(1) + "/" + name;
    switch (inode->base.type) {
    case SQFS_INODE_DIR:
    case SQFS_INODE_EXT_DIR:
      if (::mkdirat(dir_fd, name.c_str(), 0700) != 0) {
        return errno_error("can't create directory " + child, errno);
      }
      subdirs.emplace_back(name, inode.get());
      continue;
    case SQFS_INODE_FILE:
    case SQFS_INODE_EXT_FILE: {
      std::uint32_t nlink = inode->base.type == SQFS_INODE_EXT_FILE ? inode->data.file_ext.nlink : 1;
      if (nlink > 1) {
        auto it = m_links.find(inode->base.inode_number);
        if (it != m_links.end()) {
          // Every component of the first path is a directory this function created.
          if (::linkat(m_dest, it->second.c_str(), dir_fd, name.c_str(), 0) != 0) {
            return errno_error("can't link " + child + " to /" + it->second, errno);
          }
          continue;
        }
        m_links.emplace(inode->base.inode_number, rel);
      }
      LS_TRY(extract_file(inode.get(), dir_fd, name, child));
      break;
    }
    case SQFS_INODE_SLINK:
    case SQFS_INODE_EXT_SLINK: {
      std::string target(reinterpret_cast<const char*>(inode->extra), inode->data.slink.target_size);
      if (target.empty() || target.find('\0') != std::string::npos) {
        return corrupt(child, "invalid symbolic link target");
      }
      if (::symlinkat(target.c_str(), dir_fd, name.c_str()) != 0) {
        return errno_error("can't create symbolic link " + child, errno);
      }
      LS_TRY(set_attributes(dir_fd, name, child, inode.get(), true));
      continue;
    }
    case SQFS_INODE_FIFO:
    case SQFS_INODE_EXT_FIFO:
      if (::mkfifoat(dir_fd, name.c_str(), 0600) != 0) {
        return errno_error("can't create FIFO " + child, errno);
      }
      break;
    default:
      log::debug("{}: skipping device node or socket {}", m_file.string(), child);
      continue; // device nodes and sockets are never created
    }
    LS_TRY(set_attributes(dir_fd, name, child, inode.get(), false));
  }
  for (const auto& [name, inode] : subdirs) {
    std::string child = path + "/" + name;
    int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      return errno_error("can't open directory " + child, errno);
    }
    UniqueFd sub(fd);
    LS_TRY(extract_dir(inode, sub.get(), child, depth + 1));
    LS_TRY(set_attributes(dir_fd, name, child, inode, false));
  }
  return {};
}

} // namespace

Result<void> extract_squashfs(const fs::path& file, std::int64_t offset, int dest_fd, bool keep_ownership) {
  Extractor extractor(file, keep_ownership);
  return extractor.run(offset, dest_fd);
}

} // namespace lockstep
