#include "support/oci/squashfs.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/codec/compress.hpp"
#include "support/oci/layer_model.hpp"
#include "support/oci/squashfs_adapters.hpp"
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
#include <sqfs/dir.h>
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
using namespace squashfs_detail; // the libsquashfs adapters (squashfs_adapters.hpp)

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
      int err = offset_file_error(m_file.get());
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

} // namespace lockstep
