// Extracting a squashfs image into a directory safely (extract_squashfs, squashfs.hpp): libsquashfs
// reads the tables and data through the adapters of squashfs_adapters.hpp; every object is created
// here with *at() calls relative to directories this code created.
#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/oci/squashfs.hpp"
#include "support/oci/squashfs_adapters.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <sqfs/data_reader.h>
#include <sqfs/dir.h>
#include <sqfs/dir_reader.h>
#include <sqfs/error.h>
#include <sqfs/id_table.h>
#include <sqfs/inode.h>
#include <sqfs/super.h>
#include <unordered_map>
#include <vector>

namespace lockstep {

namespace fs = std::filesystem;
using namespace squashfs_detail; // the libsquashfs adapters (squashfs_adapters.hpp)

namespace {

constexpr std::size_t k_max_name = 256; // SQUASHFS_NAME_LEN

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
