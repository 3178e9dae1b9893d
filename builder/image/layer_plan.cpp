#include "builder/image/layer_plan.hpp"

#include "builder/image/tree_scan.hpp"
#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/codec/compress.hpp"
#include "support/system/fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>

namespace lockstep::builder {

namespace fs = std::filesystem;
using envspec::CopyItem;
using envspec::ModePolicy;
using envspec::OwnerPolicy;

namespace {

// A node of the image tree being assembled: a member (if any) and children sorted by name.
struct Node {
  std::optional<PlannedEntry> entry;
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::uint64_t nlink = 1;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  std::size_t item = 0; // which copy item produced it (hard links never cross items)
  std::vector<std::pair<std::string, std::unique_ptr<Node>>> children; // sorted by name

  // The child called `name`, created if missing. Appending in sorted order (a fresh directory
  // filled from a sorted listing) costs no search.
  Node& child(const std::string& name) {
    if (children.empty() || children.back().first < name) {
      return *children.emplace_back(name, std::make_unique<Node>()).second;
    }
    auto it = std::lower_bound(children.begin(), children.end(), name,
                               [](const auto& c, const std::string& n) { return c.first < n; });
    if (it == children.end() || it->first != name) {
      it = children.emplace(it, name, std::make_unique<Node>());
    }
    return *it->second;
  }
};

struct Planner {
  std::int64_t epoch = 0;
  std::int64_t racy_after_ns = 0;
  bool cacheable = true;
  Node root;

  // The node for `image_path` ("/a/b"), creating implied parent directories.
  Node& node_for(const std::string& image_path) {
    Node* n = &root;
    std::string rel;
    std::size_t i = 1;
    while (i <= image_path.size()) {
      std::size_t j = image_path.find('/', i);
      if (j == std::string::npos) {
        j = image_path.size();
      }
      std::string name = image_path.substr(i, j - i);
      i = j + 1;
      if (name.empty()) {
        continue;
      }
      if (!rel.empty()) {
        rel += '/';
      }
      rel += name;
      n = &n->child(name);
      if (n->entry && n->entry->tar.type != TarEntry::Type::dir && j < image_path.size()) {
        // A later item puts something below what was a file: the file gives way to a directory.
        n->entry.reset();
      }
      if (!n->entry && j < image_path.size()) {
        PlannedEntry dir;
        dir.tar.path = rel;
        dir.tar.type = TarEntry::Type::dir;
        dir.tar.mode = 0755;
        dir.tar.mtime = epoch;
        n->entry = std::move(dir);
      }
    }
    return *n;
  }

  std::uint32_t choose_mode(const CopyItem& item, const struct stat& st, TarEntry::Type type) const {
    std::uint32_t perm = st.st_mode & 07777;
    switch (type) {
    case TarEntry::Type::symlink:
      return 0777;
    case TarEntry::Type::char_device:
    case TarEntry::Type::block_device:
    case TarEntry::Type::fifo:
      return item.mode_policy == ModePolicy::preserve ? perm : (perm & 0777);
    case TarEntry::Type::dir:
      return item.mode_policy == ModePolicy::preserve ? perm : 0755;
    case TarEntry::Type::file:
    case TarEntry::Type::hardlink:
      break;
    }
    switch (item.mode_policy) {
    case ModePolicy::preserve:
      return perm;
    case ModePolicy::fixed:
      return item.mode & 07777;
    case ModePolicy::normalize:
      break;
    }
    return (st.st_mode & S_IXUSR) != 0 ? 0755 : 0644;
  }

  // Fills `node` from the host object at `host` (already lstat'ed into `st`).
  Result<void> set_entry(Node& node, const CopyItem& item, std::size_t item_index, const std::string& rel,
                         const std::string& host, const struct stat& st) {
    PlannedEntry e;
    e.tar.path = rel;
    if (!describe_source(e, st, host)) {
      log::debug("skipping socket {}", host);
      return {};
    }
    e.tar.mode = choose_mode(item, st, e.tar.type);
    if (item.owner_policy == OwnerPolicy::preserve) {
      e.tar.uid = st.st_uid;
      e.tar.gid = st.st_gid;
    } else {
      e.tar.uid = item.uid;
      e.tar.gid = item.gid;
    }
    e.tar.mtime = std::clamp<std::int64_t>(st.st_mtim.tv_sec, 0, epoch);
    // xattr policy: only file capabilities, and only when permission bits are preserved too.
    e.read_capability = e.tar.type == TarEntry::Type::file && item.mode_policy == ModePolicy::preserve;
    if (e.tar.type == TarEntry::Type::dir && node.entry && node.entry->tar.type == TarEntry::Type::dir) {
      // Directory over directory: keep the children, take the new attributes.
    } else if (node.entry && node.entry->tar.type == TarEntry::Type::dir &&
               e.tar.type != TarEntry::Type::dir) {
      node.children.clear(); // a non-directory replaces a directory and everything below it
    }
    node.entry = std::move(e);
    node.dev = st.st_dev;
    node.ino = st.st_ino;
    node.nlink = st.st_nlink;
    node.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    node.ctime_ns = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
    node.item = item_index;
    if (node.mtime_ns >= racy_after_ns || node.ctime_ns >= racy_after_ns) {
      cacheable = false;
    }
    return {};
  }

  // Adds the scanned contents of host directory `host` below `node` (image path `rel`).
  Result<void> walk(const TreeScan& scan, const std::string& host, Node& node, const std::string& rel,
                    const CopyItem& item, std::size_t item_index) {
    const std::vector<ScannedEntry>* entries = scan.listing(host);
    if (entries == nullptr) {
      return internal_error("directory {} was not scanned", host);
    }
    for (const auto& e : *entries) {
      std::string child_host = host + "/" + e.name;
      std::string child_rel = rel.empty() ? e.name : rel + "/" + e.name;
      Node& slot = node.child(e.name);
      LS_TRY(set_entry(slot, item, item_index, child_rel, child_host, e.st));
      if (S_ISDIR(e.st.st_mode)) {
        LS_TRY(walk(scan, child_host, slot, child_rel, item, item_index));
      }
    }
    return {};
  }

  Result<void> add_item(const CopyItem& item, std::size_t item_index) {
    struct stat st {};
    // The top-level source is followed if it is a symlink (like Docker's COPY); inside
    // directories symlinks are copied as symlinks.
    if (::stat(item.from.c_str(), &st) != 0) {
      return errno_error("can't copy " + item.from_text + " (" + item.from.string() + ")", errno);
    }
    if (S_ISDIR(st.st_mode)) {
      Node& target = item.to == "/" ? root : node_for(item.to);
      std::string rel = item.to == "/" ? std::string() : item.to.substr(1);
      if (item.to != "/") {
        LS_TRY(set_entry(target, item, item_index, rel, item.from.string(), st));
      }
      // A top-level symlink to a directory is followed once, here; the scan never follows links.
      std::error_code ec;
      std::string source_root = fs::canonical(item.from, ec).string();
      if (ec) {
        return io_error("can't copy {} ({}): {}", item.from_text, item.from.string(), ec.message());
      }
      LS_TRY_ASSIGN(TreeScan scan, TreeScan::scan(source_root, default_thread_count()));
      return walk(scan, source_root, target, rel, item, item_index);
    }
    std::string dest = item.to;
    if (item.to_is_dir || item.to == "/") {
      dest = (item.to == "/" ? std::string() : item.to) + "/" + item.from.filename().string();
    }
    Node& target = node_for(dest);
    return set_entry(target, item, item_index, dest.substr(1), item.from.string(), st);
  }
};

using LinkKey = std::tuple<std::size_t, std::uint64_t, std::uint64_t>;

// Moves the members below `node` into `out` in tar order and feeds the fingerprint.
void flatten(Node& node, std::vector<PlannedEntry>& out, std::map<LinkKey, std::string>& links,
             FingerprintHasher& fp, std::uint64_t& bytes) {
  for (auto& [name, child] : node.children) {
    if (child->entry) {
      PlannedEntry& e = *child->entry;
      if (e.tar.type == TarEntry::Type::file && child->nlink > 1) {
        auto [it, inserted] = links.emplace(LinkKey{child->item, child->dev, child->ino}, e.tar.path);
        if (!inserted) {
          e.make_hardlink(it->second);
        }
      }
      const TarEntry& t = e.tar;
      fp.add(t.path, static_cast<int>(t.type), t.mode, t.uid, t.gid, t.mtime, t.size, t.link_target,
             t.dev_major, t.dev_minor);
      for (const auto& [k, v] : t.xattrs) {
        fp.add("xattr", k, v);
      }
      if (!e.source.empty()) {
        fp.add("source", e.source, child->dev, child->ino, child->mtime_ns, child->ctime_ns);
      }
      if (t.type == TarEntry::Type::file) {
        bytes += static_cast<std::uint64_t>(t.size);
      }
      out.push_back(std::move(e));
    }
    flatten(*child, out, links, fp, bytes);
  }
}

std::int64_t now_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

} // namespace

Result<LayerPlan> plan_copy_layer(const std::vector<CopyItem>& items, std::int64_t epoch,
                                  const std::string& settings) {
  Planner planner;
  planner.epoch = epoch;
  planner.racy_after_ns = now_ns() - 2'000'000'000;
  LayerPlan plan;
  for (std::size_t i = 0; i < items.size(); ++i) {
    LS_TRY(planner.add_item(items[i], i));
    if (!plan.created_by.empty()) {
      plan.created_by += "; ";
    }
    plan.created_by += "copy " + items[i].from_text + " -> " + items[i].to;
  }
  FingerprintHasher fp;
  fp.add(k_layer_format_version, settings, epoch);
  std::map<LinkKey, std::string> links;
  plan.entries.reserve(8192);
  flatten(planner.root, plan.entries, links, fp, plan.content_bytes);
  plan.fingerprint = fp.finish();
  plan.cacheable = planner.cacheable;
  return plan;
}

} // namespace lockstep::builder

namespace lockstep::builder {

bool describe_source(PlannedEntry& entry, const struct stat& st, const std::string& host) {
  TarEntry& t = entry.tar;
  if (S_ISREG(st.st_mode)) {
    t.type = TarEntry::Type::file;
    t.size = st.st_size;
    entry.source = host;
  } else if (S_ISDIR(st.st_mode)) {
    t.type = TarEntry::Type::dir;
  } else if (S_ISLNK(st.st_mode)) {
    t.type = TarEntry::Type::symlink;
    entry.source = host;
    entry.read_link_target = true;
  } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    t.type = S_ISCHR(st.st_mode) ? TarEntry::Type::char_device : TarEntry::Type::block_device;
    t.dev_major = major(st.st_rdev);
    t.dev_minor = minor(st.st_rdev);
  } else if (S_ISFIFO(st.st_mode)) {
    t.type = TarEntry::Type::fifo;
  } else {
    return false; // a socket
  }
  return true;
}

Result<void> complete_entry(PlannedEntry& entry) {
  if (entry.read_link_target) {
    std::string target(4096, '\0');
    ssize_t n = ::readlink(entry.source.c_str(), target.data(), target.size());
    if (n < 0) {
      return errno_error("can't read symlink " + entry.source, errno);
    }
    target.resize(static_cast<std::size_t>(n));
    entry.tar.link_target = std::move(target);
    entry.read_link_target = false;
  }
  if (entry.read_capability) {
    char buf[256];
    ssize_t n = ::lgetxattr(entry.source.c_str(), "security.capability", buf, sizeof(buf));
    if (n > 0) {
      entry.tar.xattrs.emplace_back("security.capability", std::string(buf, static_cast<std::size_t>(n)));
    }
    entry.read_capability = false;
  }
  return {};
}

} // namespace lockstep::builder
