// Git sources into layers: a commit's tree from the git cache, or lockstep's canonical export of it
// from a mirror, written as tar members with fixed owners and times (see git_source.hpp and
// docs/git-sources.md); git_source.cpp resolves revisions and keeps the cache.
#include "builder/lock/git_repo.hpp"
#include "builder/lock/git_source.hpp"
#include "support/base/interrupt.hpp"
#include "support/base/text.hpp"
#include "support/codec/digest.hpp"
#include "support/net/mirror.hpp"
#include "support/oci/tar_reader.hpp"
#include "support/system/fs.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

// Bounds on hostile trees (from any server or mirror).
constexpr std::uint64_t k_max_blob_size = 1ULL << 30;     // 1 GiB: a blob is read into memory whole
constexpr std::uint64_t k_max_export_bytes = 64ULL << 30; // a tree may name one blob many times
constexpr std::size_t k_max_entries = 2'000'000;          // ... and one subtree many times
constexpr std::size_t k_max_depth = 256;
constexpr std::size_t k_max_path_length = 4096;
constexpr std::size_t k_max_symlink_length = 4095;
// Bumped whenever export_git_tree() would write different bytes for the same commit and options.
constexpr int k_export_format_version = 1;

// What both ways of exporting a tree share (a commit from the git cache, or lockstep's canonical
// export of it from a mirror): member names and bounds, the owner and mtime of every member, and the
// paths the layer already holds.
class ExportWriter {
public:
  ExportWriter(TarWriter& tar, log::Progress& progress, const GitExportOptions& opt,
               std::set<std::string>& seen, std::string where)
      : m_tar(tar), m_progress(progress), m_opt(opt), m_seen(seen), m_where(std::move(where)) {}

  // Emits the directories of `dir` ("opt/src"), parents first.
  void add_parents(const std::string& dir) {
    std::size_t i = 0;
    while (i < dir.size()) {
      std::size_t j = dir.find('/', i);
      if (j == std::string::npos) {
        j = dir.size();
      }
      add_dir(dir.substr(0, j));
      i = j + 1;
    }
  }

  [[nodiscard]] std::uint64_t bytes() const { return m_bytes; }

protected:
  // Paths in messages are shown as in the image ("/opt/src/x").
  static std::string shown_path(const std::string& path) { return "/" + path; }

  // Bounds every entry: its name, its path's length and the number of entries.
  Result<void> check_entry(std::string_view name, const std::string& path) {
    LS_TRY(check_name(name, path));
    if (path.size() > k_max_path_length) {
      return invalid_input("{}: a path is longer than {} bytes: {}...", m_where, k_max_path_length,
                           path.substr(0, 64));
    }
    if (++m_entries > k_max_entries) {
      return invalid_input("{}: the tree has more than {} entries", m_where, k_max_entries);
    }
    return {};
  }

  Result<void> check_name(std::string_view name, const std::string& path) const {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos) {
      return invalid_input("{}: the tree has an entry called '{}' (in {}), which is not a file name", m_where,
                           name, shown_path(path.substr(0, path.size() - name.size())));
    }
    if (name.size() == 4 && name[0] == '.' && (name[1] | 0x20) == 'g' && (name[2] | 0x20) == 'i' &&
        (name[3] | 0x20) == 't') {
      return invalid_input("{}: the tree has an entry {}, which git itself refuses to check out", m_where,
                           shown_path(path));
    }
    return {};
  }

  TarEntry entry(const std::string& path, TarEntry::Type type, std::uint32_t mode) const {
    TarEntry e;
    e.path = path;
    e.type = type;
    e.mode = mode;
    e.uid = m_opt.uid;
    e.gid = m_opt.gid;
    e.mtime = m_opt.epoch;
    return e;
  }

  void add_dir(const std::string& path) {
    if (m_seen.insert(path).second) {
      m_tar.add(entry(path, TarEntry::Type::dir, 0755));
    }
  }

  Result<void> claim(const std::string& path) {
    if (!m_seen.insert(path).second) {
      return invalid_input("{}: {} is already in this layer (another source provides it)", m_where,
                           shown_path(path));
    }
    return {};
  }

  // Counts a file's bytes against the bounds.
  Result<void> count_file(const std::string& path, std::uint64_t size) {
    if (size > k_max_blob_size) {
      return invalid_input("{}: {} is {}, more than the {} allowed", m_where, shown_path(path),
                           log::human_size(size), log::human_size(k_max_blob_size));
    }
    m_bytes += size;
    if (m_bytes > k_max_export_bytes) {
      return invalid_input("{}: the files add up to more than {}", m_where,
                           log::human_size(k_max_export_bytes));
    }
    return {};
  }

  TarWriter& m_tar;
  log::Progress& m_progress;
  const GitExportOptions& m_opt;
  std::set<std::string>& m_seen;
  std::string m_where; // "git source URL at COMMIT"
  std::uint64_t m_bytes = 0;
  std::size_t m_entries = 0;
};

// Writes one commit's tree into a tar (see export_git_tree()).
class TreeExporter : public ExportWriter {
public:
  TreeExporter(const LibGit& git, git_repository* repo, git_odb* odb, TarWriter& tar, log::Progress& progress,
               const GitExportOptions& opt, std::set<std::string>& seen, std::string where)
      : ExportWriter(tar, progress, opt, seen, std::move(where)), m_git(git), m_repo(repo), m_odb(odb) {}

  // Emits the entries of `tree` under `dir` (empty for the layer root), depth-first.
  Result<void> walk(const git_tree* tree, const std::string& dir, std::size_t depth) {
    if (depth > k_max_depth) {
      return invalid_input("{}: {} is nested more than {} directories deep", m_where, dir, k_max_depth);
    }
    const std::size_t count = m_git.git_tree_entrycount(tree);
    std::vector<std::pair<std::string_view, const git_tree_entry*>> entries;
    entries.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      const git_tree_entry* e = m_git.git_tree_entry_byindex(tree, i);
      entries.emplace_back(m_git.git_tree_entry_name(e), e);
    }
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < entries.size(); ++i) {
      LS_TRY(check_interrupted());
      const auto [name, entry] = entries[i];
      const std::string path = dir.empty() ? std::string(name) : dir + "/" + std::string(name);
      LS_TRY(check_entry(name, path));
      if (i > 0 && entries[i - 1].first == name) {
        return invalid_input("{}: the tree has two entries called {}", m_where, shown_path(path));
      }
      const git_oid& id = *m_git.git_tree_entry_id(entry);
      switch (m_git.git_tree_entry_filemode(entry)) {
      case GIT_FILEMODE_TREE: {
        add_dir(path);
        git_tree* raw = nullptr;
        if (m_git.git_tree_lookup(&raw, m_repo, &id) != 0) {
          return io_error("{}: can't read the tree of {}: {}", m_where, shown_path(path), m_git.last_error());
        }
        GitPtr<git_tree> sub(raw, m_git.git_tree_free);
        LS_TRY(walk(sub.get(), path, depth + 1));
        break;
      }
      case GIT_FILEMODE_BLOB:
        LS_TRY(add_file(path, id, 0644));
        break;
      case GIT_FILEMODE_BLOB_EXECUTABLE:
        LS_TRY(add_file(path, id, 0755));
        break;
      case GIT_FILEMODE_LINK:
        LS_TRY(add_symlink(path, id));
        break;
      case GIT_FILEMODE_COMMIT:
        log::warn(
            "{}: {} is a submodule (commit {}); submodules are not fetched, so it is an empty directory",
            m_where, shown_path(path), oid_hex(m_git, id));
        add_dir(path);
        break;
      default:
        return invalid_input("{}: {} has an unknown git file mode", m_where, shown_path(path));
      }
    }
    return {};
  }

private:
  // The size of blob `id`, checked against `limit`.
  Result<std::size_t> blob_size(const std::string& path, const git_oid& id, std::uint64_t limit) {
    std::size_t size = 0;
    git_object_t type = GIT_OBJECT_INVALID;
    if (m_git.git_odb_read_header(&size, &type, m_odb, &id) != 0) {
      return io_error("{}: can't read the object of {}: {}", m_where, shown_path(path), m_git.last_error());
    }
    if (type != GIT_OBJECT_BLOB) {
      return invalid_input("{}: {} is a {} where a file was expected", m_where, shown_path(path),
                           m_git.git_object_type2string(type));
    }
    if (size > limit) {
      return invalid_input("{}: {} is {}, more than the {} allowed", m_where, shown_path(path),
                           log::human_size(size), log::human_size(limit));
    }
    return size;
  }

  Result<GitPtr<git_blob>> load_blob(const std::string& path, const git_oid& id) {
    git_blob* raw = nullptr;
    if (m_git.git_blob_lookup(&raw, m_repo, &id) != 0) {
      return io_error("{}: can't read {}: {}", m_where, shown_path(path), m_git.last_error());
    }
    return GitPtr<git_blob>(raw, m_git.git_blob_free);
  }

  Result<void> add_file(const std::string& path, const git_oid& id, std::uint32_t mode) {
    LS_TRY(claim(path));
    LS_TRY_ASSIGN(std::size_t size, blob_size(path, id, k_max_blob_size));
    LS_TRY(count_file(path, size));
    LS_TRY_ASSIGN(GitPtr<git_blob> blob, load_blob(path, id));
    if (m_git.git_blob_rawsize(blob.get()) != size) {
      return io_error("{}: {} changed size while being read", m_where, shown_path(path));
    }
    TarEntry e = entry(path, TarEntry::Type::file, mode);
    e.size = static_cast<std::int64_t>(size);
    m_tar.add(e);
    if (size > 0) {
      m_tar.write_data(m_git.git_blob_rawcontent(blob.get()), size);
    }
    m_progress.advance(size);
    return {};
  }

  Result<void> add_symlink(const std::string& path, const git_oid& id) {
    LS_TRY(claim(path));
    LS_TRY_ASSIGN(std::size_t size, blob_size(path, id, k_max_symlink_length));
    LS_TRY_ASSIGN(GitPtr<git_blob> blob, load_blob(path, id));
    std::string target(static_cast<const char*>(m_git.git_blob_rawcontent(blob.get())),
                       std::min<std::size_t>(size, m_git.git_blob_rawsize(blob.get())));
    if (target.empty() || target.find('\0') != std::string::npos) {
      return invalid_input("{}: the symlink {} has an empty target or one with a NUL byte", m_where,
                           shown_path(path));
    }
    TarEntry e = entry(path, TarEntry::Type::symlink, 0777);
    e.link_target = std::move(target);
    m_tar.add(e);
    return {};
  }

  const LibGit& m_git;
  git_repository* m_repo;
  git_odb* m_odb;
};

// Writes lockstep's canonical export of a commit (a tar at "/", epoch 0, owner 0:0; what the lock's
// sha256 pins) into a tar under `opt.to`, member by member, exactly as TreeExporter writes the commit
// itself. Anything the canonical export can't contain is refused: other member types, modes other
// than 0755 directories, 0644 or 0755 files and 0777 symlinks, and every bound of a tree.
class ArchiveExporter : public ExportWriter {
public:
  using ExportWriter::ExportWriter;

  Result<void> replay(TarReader& reader, const std::string& root) {
    std::vector<char> scratch(256 << 10);
    while (true) {
      LS_TRY(check_interrupted());
      LS_TRY_ASSIGN(std::optional<TarMember> m, reader.next());
      if (!m) {
        return {};
      }
      if (m->name.empty()) {
        return refuse(*m, "the archive's root itself");
      }
      const std::string path = root.empty() ? m->name : root + "/" + m->name;
      const std::size_t slash = m->name.rfind('/');
      const std::string_view name = slash == std::string::npos ? std::string_view(m->name)
                                                               : std::string_view(m->name).substr(slash + 1);
      if (static_cast<std::size_t>(std::count(m->name.begin(), m->name.end(), '/')) > k_max_depth) {
        return invalid_input("{}: {} is nested more than {} directories deep", m_where, shown_path(path),
                             k_max_depth);
      }
      LS_TRY(check_entry(name, path));
      switch (m->type) {
      case TarMember::Type::directory:
        if (m->mode != 0755) {
          return refuse(*m, fmt::format("a directory with mode {:04o}", m->mode));
        }
        add_dir(path);
        break;
      case TarMember::Type::file: {
        if (m->mode != 0644 && m->mode != 0755) {
          return refuse(*m, fmt::format("a file with mode {:04o}", m->mode));
        }
        LS_TRY(claim(path));
        const auto size = static_cast<std::uint64_t>(m->size);
        LS_TRY(count_file(path, size));
        TarEntry e = entry(path, TarEntry::Type::file, m->mode);
        e.size = m->size;
        m_tar.add(e);
        std::uint64_t copied = 0;
        while (true) {
          LS_TRY_ASSIGN(std::span<const char> chunk, reader.read_view(scratch.data(), scratch.size()));
          if (chunk.empty()) {
            break;
          }
          m_tar.write_data(chunk.data(), chunk.size());
          copied += chunk.size();
          m_progress.advance(chunk.size());
        }
        if (copied != size) {
          return io_error("{}: {} ends after {} of its {} bytes", m_where, shown_path(path), copied, size);
        }
        break;
      }
      case TarMember::Type::symlink: {
        if (m->mode != 0777) {
          return refuse(*m, fmt::format("a symlink with mode {:04o}", m->mode));
        }
        if (m->link_target.empty() || m->link_target.size() > k_max_symlink_length) {
          return refuse(*m, "a symlink with an empty or overlong target");
        }
        LS_TRY(claim(path));
        TarEntry e = entry(path, TarEntry::Type::symlink, 0777);
        e.link_target = m->link_target;
        m_tar.add(e);
        break;
      }
      default:
        return refuse(*m, "a hard link or special file");
      }
    }
  }

private:
  Error refuse(const TarMember& m, const std::string& what) const {
    return invalid_input("{}: member '{}' is {}, which no git tree export holds; refusing it", m_where,
                         m.name, what);
  }
};

} // namespace

Result<std::uint64_t> export_git_tree(TarWriter& tar, log::Progress& progress, const fs::path& store_root,
                                      const std::string& url, const std::string& commit_in,
                                      const GitExportOptions& opt, std::set<std::string>& seen) {
  LS_TRY_ASSIGN(const LibGit* git, load_libgit());
  LS_TRY(validate_url(url));
  LS_TRY_ASSIGN(const std::string commit, validate_commit(commit_in, url));
  LS_TRY_ASSIGN(const std::string to, normalize_image_path(opt.to));
  LS_TRY(ensure_git_commit(store_root, url, commit));
  LS_TRY_ASSIGN(Repo repo, open_repo(*git, git_cache_dir(store_root, url)));
  LS_TRY_ASSIGN(const git_oid oid, parse_oid(*git, commit));
  const std::string where = fmt::format("git source {} at {}", shown(url), commit);
  git_commit* commit_raw = nullptr;
  if (git->git_commit_lookup(&commit_raw, repo.get(), &oid) != 0) {
    return io_error("{}: can't read the commit: {}", where, git->last_error());
  }
  GitPtr<git_commit> commit_obj(commit_raw, git->git_commit_free);
  git_tree* tree_raw = nullptr;
  if (git->git_commit_tree(&tree_raw, commit_obj.get()) != 0) {
    return io_error("{}: can't read the commit's tree: {}", where, git->last_error());
  }
  GitPtr<git_tree> tree(tree_raw, git->git_tree_free);
  git_odb* odb_raw = nullptr;
  if (git->git_repository_odb(&odb_raw, repo.get()) != 0) {
    return io_error("{}: can't open the object database: {}", where, git->last_error());
  }
  GitPtr<git_odb> odb(odb_raw, git->git_odb_free);
  TreeExporter exporter(*git, repo.get(), odb.get(), tar, progress, opt, seen, where);
  const std::string root = to == "/" ? std::string() : to.substr(1);
  try {
    exporter.add_parents(root);
    LS_TRY(exporter.walk(tree.get(), root, 0));
  } catch (const Failure& f) {
    return f.error();
  }
  return exporter.bytes();
}

std::string git_export_fingerprint(const std::string& commit, const GitExportOptions& opt) {
  auto to = normalize_image_path(opt.to);
  return fmt::format("git-export v{}\ncommit {}\nto {}\nepoch {}\nowner {}:{}\n", k_export_format_version,
                     ascii_lower(commit), to ? *to : opt.to, opt.epoch, opt.uid, opt.gid);
}

namespace {

// Hashes and counts a tar stream without keeping it.
class HashingSink final : public ByteSink {
public:
  void write(const void* data, std::size_t size) override {
    m_hash.update(data, size);
    m_size += size;
  }
  GitTreeDigest finish() { return GitTreeDigest{m_hash.finish(), m_size}; }

private:
  Sha256 m_hash;
  std::uint64_t m_size = 0;
};

// Feeds a tar stream into a blob being written to the store.
class StoreSink final : public ByteSink {
public:
  explicit StoreSink(BlobStore::Writer& writer) : m_writer(writer) {}
  void write(const void* data, std::size_t size) override {
    if (Result<void> r = m_writer.write(data, size); !r) {
      throw Failure(std::move(r).error());
    }
  }

private:
  BlobStore::Writer& m_writer;
};

// Writes the canonical export of `commit` (fetched into the cache first if needed) to `sink`.
Result<void> write_canonical_export(ByteSink& sink, const fs::path& store_root, const std::string& url,
                                    const std::string& commit, const std::string& rev_hint) {
  LS_TRY(ensure_git_commit(store_root, url, commit, rev_hint));
  try {
    TarWriter tar(sink);
    log::Progress progress("", 0);
    std::set<std::string> seen;
    GitExportOptions opt;
    opt.to = "/";
    LS_TRY(export_git_tree(tar, progress, store_root, url, commit, opt, seen));
    tar.finish();
  } catch (const Failure& f) {
    return f.error();
  }
  return {};
}

} // namespace

Result<GitTreeDigest> git_export_digest(const std::filesystem::path& store_root, const std::string& url,
                                        const std::string& commit, const std::string& rev_hint) {
  HashingSink sink;
  LS_TRY(write_canonical_export(sink, store_root, url, commit, rev_hint));
  return sink.finish();
}

Result<BlobInfo> store_git_export(const BlobStore& store, const std::string& url, const std::string& commit,
                                  const std::string& rev_hint, const std::optional<GitTreeDigest>& expected) {
  LS_TRY_ASSIGN(BlobStore::Writer writer, store.begin_write());
  StoreSink sink(writer);
  LS_TRY(write_canonical_export(sink, store.root(), url, commit, rev_hint));
  if (!expected) {
    return writer.commit();
  }
  Result<BlobInfo> info = writer.commit(expected->sha256, static_cast<std::int64_t>(expected->size));
  if (!info && info.error().code == ExitCode::invalid_input) {
    return invalid_input(
        "the tree of {} at {} is no longer the one the lock pins (sha256 {}): the repository "
        "content changed under the same commit id; refusing it",
        shown(url), commit, expected->sha256.hex());
  }
  return info;
}

Result<bool> find_git_export(const BlobStore& store, const GitTreeDigest& pinned) {
  if (store.has(pinned.sha256, static_cast<std::int64_t>(pinned.size))) {
    return true;
  }
  return default_mirrors().fetch(pinned.sha256, pinned.size, store);
}

Result<std::uint64_t> export_git_archive(TarWriter& tar, log::Progress& progress, const fs::path& archive,
                                         const GitExportOptions& opt, std::set<std::string>& seen,
                                         const std::string& where) {
  LS_TRY_ASSIGN(const std::string to, normalize_image_path(opt.to));
  LS_TRY_ASSIGN(TarReader reader, TarReader::open(archive, where));
  ArchiveExporter exporter(tar, progress, opt, seen, where);
  const std::string root = to == "/" ? std::string() : to.substr(1);
  try {
    exporter.add_parents(root);
    LS_TRY(exporter.replay(reader, root));
  } catch (const Failure& f) {
    return f.error();
  }
  return exporter.bytes();
}

} // namespace lockstep::builder
