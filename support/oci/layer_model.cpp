#include "support/oci/layer_model.hpp"

#include "support/base/text.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <utility>

namespace lockstep::layer {

namespace {

std::string_view type_name(unsigned type) {
  switch (type) {
  case AE_IFREG:
    return "regular file";
  case AE_IFDIR:
    return "directory";
  case AE_IFLNK:
    return "symbolic link";
  case AE_IFCHR:
    return "character device";
  case AE_IFBLK:
    return "block device";
  case AE_IFIFO:
    return "FIFO";
  case AE_IFSOCK:
    return "socket";
  default:
    return "special file";
  }
}

} // namespace

namespace {

// The components of a path without empty and "." ones, as the walks consume them.
std::deque<std::string> components(std::string_view path) {
  std::deque<std::string> out;
  for (std::string& comp : path_components(path)) {
    if (comp != ".") {
      out.push_back(std::move(comp));
    }
  }
  return out;
}

// The member's name: whiteouts, opaque markers and aufs metadata recognised.
Result<void> classify_name(Member& m, std::string_view what) {
  std::string why;
  if (!normalise_name(m.raw, m.path, why)) {
    return refuse_member(what, m.raw, why);
  }
  const std::size_t slash = m.path.rfind('/');
  m.parent = slash == std::string::npos ? std::string() : m.path.substr(0, slash);
  m.base = slash == std::string::npos ? m.path : m.path.substr(slash + 1);
  for (const std::string& comp : components(m.parent)) {
    if (std::string_view(comp).starts_with(k_whiteout_meta_prefix)) {
      // Inside aufs metadata (.wh..wh.plnk/...): ignored like the metadata itself.
      m.kind = Member::Kind::skipped;
      m.skip_reason = "whiteout metadata";
      return {};
    }
    if (std::string_view(comp).starts_with(k_whiteout_prefix)) {
      return refuse_member(what, m.raw,
                           fmt::format("has a whiteout name ('{}') as a directory component", comp));
    }
  }
  if (!std::string_view(m.base).starts_with(k_whiteout_prefix)) {
    return {};
  }
  if (m.base == k_opaque_marker) {
    m.kind = Member::Kind::opaque;
    m.path = m.parent;
    return {};
  }
  if (std::string_view(m.base).starts_with(k_whiteout_meta_prefix)) {
    m.kind = Member::Kind::skipped; // aufs metadata (.wh..wh.plnk, .wh..wh.aufs): not a deletion
    m.skip_reason = "whiteout metadata";
    return {};
  }
  std::string target = m.base.substr(k_whiteout_prefix.size());
  if (target.empty()) {
    return refuse_member(what, m.raw, "is a whiteout with an empty name");
  }
  if (target == ".") {
    return refuse_member(what, m.raw,
                         m.parent.empty() ? "is a whiteout of the root directory"
                                          : "is a whiteout of its own directory");
  }
  if (target == "..") {
    return refuse_member(what, m.raw, "is a whiteout of '..'");
  }
  m.kind = Member::Kind::whiteout;
  m.base = std::move(target);
  m.path = join(m.parent, m.base);
  return {};
}

Result<void> classify_hardlink(Member& m, std::string_view raw_target, std::string_view what) {
  if (raw_target.empty()) {
    return refuse_member(what, m.raw, "is a hard link with an empty target");
  }
  if (raw_target.front() == '/') {
    return refuse_member(what, m.raw, fmt::format("is a hard link to '{}', an absolute name", raw_target));
  }
  std::string why;
  if (!normalise_name(raw_target, m.link, why)) {
    return refuse_member(what, m.raw,
                         fmt::format("is a hard link to '{}', which escapes the root", raw_target));
  }
  if (m.link.empty()) {
    return refuse_member(what, m.raw, "is a hard link to the root directory");
  }
  if (m.link == m.path) {
    return refuse_member(what, m.raw, "is a hard link to itself");
  }
  m.kind = Member::Kind::hardlink;
  return {};
}

Result<void> classify_type(Member& m, struct archive_entry* entry, std::string_view what) {
  const auto type = static_cast<unsigned>(archive_entry_filetype(entry));
  switch (type) {
  case AE_IFREG: {
    la_int64_t size = archive_entry_size(entry);
    if (size < 0) {
      return refuse_member(what, m.raw, "has a negative size");
    }
    m.kind = Member::Kind::file;
    m.size = static_cast<std::uint64_t>(size);
    archive_entry_xattr_reset(entry);
    const char* key = nullptr;
    const void* value = nullptr;
    std::size_t value_size = 0;
    while (archive_entry_xattr_next(entry, &key, &value, &value_size) == ARCHIVE_OK) {
      if (key != nullptr && value != nullptr && std::string_view(key) == "security.capability") {
        m.capability.assign(static_cast<const char*>(value), value_size);
      }
    }
    archive_entry_xattr_reset(entry);
    return {};
  }
  case AE_IFDIR:
    m.kind = Member::Kind::directory;
    return {};
  case AE_IFLNK: {
    const char* target = archive_entry_symlink(entry);
    if (target == nullptr) {
      target = archive_entry_symlink_utf8(entry);
    }
    if (target == nullptr || *target == '\0') {
      return refuse_member(what, m.raw, "is a symbolic link without a target");
    }
    m.link = target;
    if (m.link.size() > k_max_path) {
      return refuse_member(what, m.raw,
                           fmt::format("is a symbolic link with a target longer than {} bytes", k_max_path));
    }
    m.kind = Member::Kind::symlink;
    return {};
  }
  case AE_IFIFO:
    m.kind = Member::Kind::fifo;
    return {};
  default:
    // Device nodes are never image content (the runtime binds the host's /dev); sockets are
    // runtime state; anything else is unknown.
    m.kind = Member::Kind::skipped;
    m.skip_reason = type_name(type);
    return {};
  }
}

} // namespace

Error refuse_member(std::string_view what, std::string_view raw, std::string_view why) {
  return invalid_input("{}: member '{}' {}", what, raw, why);
}

std::string join(std::string_view dir, std::string_view name) {
  std::string out;
  out.reserve(dir.size() + 1 + name.size());
  if (!dir.empty()) {
    out += dir;
    out += '/';
  }
  out += name;
  return out;
}

Result<Member> classify_member(struct archive_entry* entry, std::string_view what) {
  Member m;
  const char* raw = archive_entry_pathname(entry);
  if (raw == nullptr) {
    raw = archive_entry_pathname_utf8(entry);
  }
  if (raw == nullptr) {
    return refuse_member(what, "?", "has an unreadable name");
  }
  m.raw = raw;
  m.kind = Member::Kind::file; // until the name or the type says otherwise
  LS_TRY(classify_name(m, what));
  const char* hardlink = archive_entry_hardlink(entry);
  if (m.path.empty() && m.kind != Member::Kind::opaque) {
    const auto type = static_cast<unsigned>(archive_entry_filetype(entry));
    if (hardlink != nullptr || type != AE_IFDIR) {
      // CVE-2021-29136: a root replaced by a symlink sends later members (and layers) elsewhere.
      return refuse_member(what, m.raw,
                           fmt::format("names the root directory but is a {}; the root must stay a directory",
                                       hardlink != nullptr ? "hard link" : type_name(type)));
    }
    m.kind = Member::Kind::root;
  } else if (m.kind == Member::Kind::whiteout || m.kind == Member::Kind::opaque ||
             m.kind == Member::Kind::skipped) {
    return m;
  } else if (hardlink != nullptr) {
    LS_TRY(classify_hardlink(m, hardlink, what));
  } else {
    LS_TRY(classify_type(m, entry, what));
    if (m.kind == Member::Kind::skipped) {
      return m;
    }
  }
  la_int64_t uid = archive_entry_uid(entry);
  la_int64_t gid = archive_entry_gid(entry);
  if (uid < 0 || gid < 0 || static_cast<std::uint64_t>(uid) > k_max_id ||
      static_cast<std::uint64_t>(gid) > k_max_id) {
    return refuse_member(what, m.raw, fmt::format("has an owner {}:{} out of range", uid, gid));
  }
  m.uid = static_cast<std::uint32_t>(uid);
  m.gid = static_cast<std::uint32_t>(gid);
  m.perm = static_cast<std::uint32_t>(archive_entry_perm(entry)) & 07777U;
  if (archive_entry_mtime_is_set(entry) != 0) {
    m.mtime = archive_entry_mtime(entry);
    long ns = archive_entry_mtime_nsec(entry);
    m.mtime_nsec = (ns >= 0 && ns < 1000000000L) ? ns : 0;
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Walks

Walk walk_in_root(std::string_view input, const Lookup& lookup, bool follow_last) {
  std::deque<std::string> todo = components(input);
  std::string current;            // the resolved components so far, joined
  std::vector<std::size_t> sizes; // current's size before each component, to climb with ".."
  int links = 0;
  while (!todo.empty()) {
    std::string comp = std::move(todo.front());
    todo.pop_front();
    if (comp == "..") {
      if (!sizes.empty()) { // ".." at the root stays there
        current.resize(sizes.back());
        sizes.pop_back();
      }
      continue;
    }
    const bool last = todo.empty();
    std::string candidate = join(current, comp);
    Entry e = lookup(candidate);
    if (e.type == Entry::Type::symlink && (!last || follow_last)) {
      if (++links > k_max_links) {
        return {Walk::Status::loop, candidate};
      }
      if (!e.link_target.empty() && e.link_target.front() == '/') { // absolute: from the root
        current.clear();
        sizes.clear();
      }
      std::deque<std::string> target = components(e.link_target);
      todo.insert(todo.begin(), target.begin(), target.end());
      continue;
    }
    if (last) {
      return {Walk::Status::ok, candidate};
    }
    if (e.type == Entry::Type::missing) {
      return {Walk::Status::missing, candidate};
    }
    if (e.type != Entry::Type::directory) {
      return {Walk::Status::not_directory, candidate};
    }
    sizes.push_back(current.size());
    current = std::move(candidate);
  }
  return {Walk::Status::ok, current};
}

namespace {

// Resolves `input` as a directory (every link followed): ok with the directory, or why not
// (missing includes a final component that is missing or a link to nothing; not_directory a final
// component that is not a directory).
Walk walk_to_directory(std::string_view input, const Lookup& lookup) {
  Walk w = walk_in_root(input, lookup, true);
  if (w.status != Walk::Status::ok || w.path.empty()) {
    return w;
  }
  Entry e = lookup(w.path);
  if (e.type == Entry::Type::missing || e.type == Entry::Type::symlink) {
    return {Walk::Status::missing, w.path};
  }
  if (e.type != Entry::Type::directory) {
    return {Walk::Status::not_directory, w.path};
  }
  return w;
}

} // namespace

Parent resolve_parent(std::string_view parent, const Lookup& lookup) {
  Parent r;
  Walk whole = walk_to_directory(parent, lookup);
  if (whole.status == Walk::Status::ok) {
    r.path = std::move(whole.path);
    return r;
  }
  if (whole.status != Walk::Status::missing) {
    r.status = whole.status == Walk::Status::loop ? Parent::Status::loop : Parent::Status::not_directory;
    r.path = std::string(parent);
    return r;
  }
  // Something is missing: prefix by prefix, creating what the parent itself names.
  std::string prefix;
  std::string current; // where `prefix` resolved to
  bool fresh = false;  // below a directory created here: nothing to resolve
  for (const std::string& comp : components(parent)) {
    prefix = join(prefix, comp);
    if (!fresh) {
      Walk w = walk_to_directory(prefix, lookup);
      if (w.status == Walk::Status::ok) {
        current = std::move(w.path);
        continue;
      }
      if (w.status != Walk::Status::missing) {
        r.status = w.status == Walk::Status::loop ? Parent::Status::loop : Parent::Status::not_directory;
        r.path = prefix;
        return r;
      }
      if (lookup(join(current, comp)).type == Entry::Type::symlink) {
        r.status = Parent::Status::link_to_missing;
        r.path = prefix;
        return r;
      }
      fresh = true;
    }
    current = join(current, comp);
    r.created.push_back(current);
  }
  r.path = std::move(current);
  return r;
}

Error parent_error(std::string_view what, std::string_view raw, const Parent& parent) {
  switch (parent.status) {
  case Parent::Status::link_to_missing:
    return refuse_member(
        what, raw,
        fmt::format("has a parent '{}' that is a symbolic link to a missing directory", parent.path));
  case Parent::Status::not_directory:
    return invalid_input("{}: member '{}': can't open its parent directory '{}': {}", what, raw, parent.path,
                         std::strerror(ENOTDIR));
  case Parent::Status::loop:
    return invalid_input("{}: member '{}': can't open its parent directory '{}': {}", what, raw, parent.path,
                         std::strerror(ELOOP));
  case Parent::Status::ok:
    break;
  }
  return internal_error("{}: member '{}': parent_error without an error", what, raw);
}

// ---------------------------------------------------------------------------------------------
// The apply model

void LayerApplier::mark_upper(const std::string& path) {
  std::string p = path;
  while (m_upper.insert(p).second) {
    const std::size_t slash = p.rfind('/');
    if (slash == std::string::npos) {
      m_upper.insert(std::string());
      return;
    }
    p.resize(slash);
  }
}

// Removes what lower layers left below the directory `dir`: what this layer wrote stays, and the
// directories it wrote into are emptied by the same rule.
void LayerApplier::remove_lower(const std::string& dir) {
  for (const std::string& name : m_tree.children(dir)) {
    std::string path = join(dir, name);
    if (!m_upper.contains(path)) {
      m_tree.remove(path);
    } else if (m_tree.lookup(path).type == Entry::Type::directory) {
      remove_lower(path);
    }
  }
}

// The member's parent directory, resolved (and created where missing); the last result is kept
// for the next member of the same parent, as the unpacker keeps its open parent directory.
Result<std::string> LayerApplier::place_parent(const Member& m) {
  if (m_cache_valid && m_cached_parent == m.parent) {
    return m_cached_resolved;
  }
  m_cache_valid = false;
  Parent p = resolve_parent(m.parent, m_lookup);
  if (p.status != Parent::Status::ok) {
    return parent_error(m_what, m.raw, p);
  }
  for (const std::string& dir : p.created) {
    LS_TRY(m_tree.make_implied_directory(dir, m));
  }
  mark_upper(p.path);
  m_cached_parent = m.parent;
  m_cached_resolved = p.path;
  m_cache_valid = true;
  return p.path;
}

Result<void> LayerApplier::apply_whiteout(const Member& m) {
  m_cache_valid = m_cache_valid && m_cached_parent == m.parent;
  Walk dir = walk_to_directory(m.parent, m_lookup);
  if (dir.status == Walk::Status::loop) {
    return parent_error(m_what, m.raw, Parent{Parent::Status::loop, m.parent, {}});
  }
  if (dir.status != Walk::Status::ok) {
    return {}; // nothing below a missing or non-directory parent to remove
  }
  const std::string victim = join(dir.path, m.base);
  Entry e = m_tree.lookup(victim);
  if (e.type == Entry::Type::missing) {
    return {};
  }
  if (!m_upper.contains(victim)) {
    m_tree.remove(victim);
  } else if (e.type == Entry::Type::directory) {
    remove_lower(victim); // the lower directory goes; what this layer put in it stays
  }
  return {};
}

Result<void> LayerApplier::apply_opaque(const Member& m) {
  m_cache_valid = m_cache_valid && m_cached_parent == m.path;
  Walk dir = walk_to_directory(m.path, m_lookup);
  if (dir.status == Walk::Status::loop) {
    return parent_error(m_what, m.raw, Parent{Parent::Status::loop, m.path, {}});
  }
  if (dir.status == Walk::Status::ok) {
    remove_lower(dir.path);
  }
  return {};
}

Result<void> LayerApplier::apply_hardlink(const Member& m, const std::string& path) {
  const std::size_t slash = m.link.rfind('/');
  const std::string target_parent = slash == std::string::npos ? std::string() : m.link.substr(0, slash);
  const std::string target_base = slash == std::string::npos ? m.link : m.link.substr(slash + 1);
  Walk dir = walk_to_directory(target_parent, m_lookup);
  if (dir.status == Walk::Status::loop) {
    return invalid_input("{}: member '{}': can't open the directory of hard link target '{}': {}", m_what,
                         m.raw, target_parent, std::strerror(ELOOP));
  }
  const std::string target = join(dir.path, target_base);
  Entry e = dir.status == Walk::Status::ok ? m_tree.lookup(target) : Entry{};
  if (e.type == Entry::Type::missing) {
    return refuse_member(m_what, m.raw, fmt::format("is a hard link to '{}', which does not exist", m.link));
  }
  if (e.type == Entry::Type::directory) {
    return refuse_member(m_what, m.raw, fmt::format("is a hard link to '{}', which is a directory", m.link));
  }
  if (target == path) {
    return {}; // already that file (the same place reached through a symbolic link)
  }
  if (target.starts_with(path + "/")) { // replacing `path` would remove the target with it
    return refuse_member(
        m_what, m.raw,
        fmt::format("is a hard link to '{}', which is inside the entry it would replace", m.link));
  }
  if (m_tree.lookup(path).type != Entry::Type::missing) {
    m_tree.remove(path);
  }
  LS_TRY(m_tree.link(path, target, m));
  mark_upper(path);
  return {};
}

Result<void> LayerApplier::apply(const Member& m) {
  switch (m.kind) {
  case Member::Kind::skipped:
    return {};
  case Member::Kind::whiteout:
    return apply_whiteout(m);
  case Member::Kind::opaque:
    return apply_opaque(m);
  case Member::Kind::root:
    LS_TRY(m_tree.put("", m));
    mark_upper("");
    return {};
  default:
    break;
  }
  LS_TRY_ASSIGN(std::string parent, place_parent(m));
  const std::string path = join(parent, m.base);
  if (m.kind == Member::Kind::hardlink) {
    return apply_hardlink(m, path);
  }
  Entry e = m_tree.lookup(path);
  if (e.type != Entry::Type::missing &&
      !(m.kind == Member::Kind::directory && e.type == Entry::Type::directory)) {
    m_tree.remove(path);
  }
  LS_TRY(m_tree.put(path, m));
  mark_upper(path);
  return {};
}

} // namespace lockstep::layer
