#pragma once
// The one definition of OCI layer semantics, used by every consumer of layers: the unpacker
// (runner/runtime/unpack.cpp, to disk), the image reader of verify and diff
// (runner/audit/image_contents.cpp, in memory) and the SIF writer (support/oci/squashfs.cpp, in
// memory). docs/unpack.md states the rules; tests/unit/support/oci/test_layer_model.cpp holds the
// three consumers to the same tree, member for member.
//
//  - classify_member(): what a tar member is (name normalisation, whiteouts, opaque markers, aufs
//    metadata, hard links, the types that are skipped) and every refusal that needs no tree.
//  - walk_in_root() and resolve_parent(): where a path lands, as openat2(RESOLVE_IN_ROOT) resolves
//    it, and where a member's parent is (missing directories created, a symbolic link to a missing
//    directory, a non-directory on the way and a loop refused).
//  - LayerApplier over a Tree: how a layer changes a tree (whiteouts hide what lower layers wrote
//    and never what the layer itself wrote, wherever they stand in the layer; a directory over a
//    directory merges; anything else replaces what is there, subtree included; hard links to an
//    existing non-directory). The disk unpacker executes the same rules with the kernel doing the
//    walk and inode sets recording what the layer wrote.
#include "support/base/result.hpp"
#include "support/codec/archive_names.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

struct archive_entry; // libarchive

namespace lockstep::layer {

using lockstep::k_max_name;
using lockstep::k_max_path;
inline constexpr std::string_view k_whiteout_prefix = ".wh.";
inline constexpr std::string_view k_whiteout_meta_prefix = ".wh..wh.";
inline constexpr std::string_view k_opaque_marker = ".wh..wh..opq";
inline constexpr int k_max_links = 40;                   ///< symbolic links in one walk (MAXSYMLINKS)
inline constexpr std::uint64_t k_max_id = 0xFFFFFFFEULL; ///< (uid_t)-1 means "unchanged" to chown

/// One layer member, classified.
struct Member {
  enum class Kind {
    root,      ///< the root directory itself ("./"): only its attributes change
    directory, ///< a directory (over a directory: merged)
    file,      ///< a regular file of `size` bytes
    symlink,   ///< a symbolic link to `link` (stored verbatim, never followed when written)
    hardlink,  ///< a hard link to the member named `link` (normalised)
    fifo,      ///< a named pipe
    whiteout,  ///< removes `base` from `parent` as lower layers left it
    opaque,    ///< hides what lower layers left below the directory `path`
    skipped,   ///< not image content: device nodes, sockets, aufs metadata, unknown types
  };
  Kind kind = Kind::skipped;
  std::string raw;    ///< the name as stored, for messages
  std::string path;   ///< normalised ("" for the root); opaque: the directory
  std::string parent; ///< the directory part of `path` ("" at the top)
  std::string base;   ///< the last component; whiteout: the name it removes
  std::string link;   ///< symlink: the target as stored; hard link: the target, normalised
  std::uint64_t size = 0;
  std::uint32_t perm = 0; ///< permission bits, setuid/setgid/sticky included
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::int64_t mtime = 0;
  long mtime_nsec = 0;
  /// Regular files: the security.capability extended attribute, "" when none. No other extended
  /// attribute is image content (docs/ARCHITECTURE.md, "Xattr policy").
  std::string capability;
  std::string_view skip_reason; ///< skipped: "character device", "socket", "whiteout metadata", ...
};

/// Classifies the member whose header `entry` holds. Refusals are invalid_input, located as
/// "WHAT: member 'RAW' WHY" (an absolute or escaping name, a whiteout name used as a directory, an
/// empty or self-naming whiteout, a root that is not a directory, a hard link out of the root or to
/// itself, an owner out of range, a name or link target too long, a negative size).
Result<Member> classify_member(struct archive_entry* entry, std::string_view what);

/// "WHAT: member 'RAW' WHY", invalid_input: every refusal about one member reads so.
Error refuse_member(std::string_view what, std::string_view raw, std::string_view why);

/// What a normalised path names in a tree (its last component not followed).
struct Entry {
  enum class Type { missing, directory, symlink, other };
  Type type = Type::missing;
  std::string link_target; ///< symlinks: the target as stored
};
/// Looks a normalised path up ("usr/lib": relative to the root, never empty).
using Lookup = std::function<Entry(const std::string& path)>;

/// The Entry for `path` in a map from paths to values that have a `link_target`, `type_of(value)`
/// telling what each is: the lookup of every in-memory view of a tree.
template <typename Map, typename TypeOf>
Entry lookup_in(const Map& map, const std::string& path, TypeOf&& type_of) {
  Entry v;
  if (auto it = map.find(path); it != map.end()) {
    v.type = type_of(it->second);
    if (v.type == Entry::Type::symlink) {
      v.link_target = it->second.link_target;
    }
  }
  return v;
}

/// Where a path lands inside the root, as openat2(RESOLVE_IN_ROOT) resolves it: symbolic links
/// followed (the last one only with `follow_last`), absolute targets restart at the root, ".."
/// stops there, at most k_max_links links.
struct Walk {
  enum class Status {
    ok,            ///< `path` is where the input lands (it need not exist)
    missing,       ///< a component before the last is missing; `path` names it
    not_directory, ///< a component before the last is not a directory; `path` names it
    loop,          ///< more than k_max_links links; `path` names the last one
  };
  Status status = Status::ok;
  std::string path;
};
Walk walk_in_root(std::string_view input, const Lookup& lookup, bool follow_last);

/// Where a member's parent directory is, and what is created to get there.
struct Parent {
  enum class Status {
    ok,              ///< `path` is the directory, `created` what is made on the way
    link_to_missing, ///< `path` (a prefix of the parent) is a symbolic link to nothing
    not_directory,   ///< `path` (the parent, or a prefix) is, or leads to, a non-directory
    loop,            ///< `path` (the parent, or a prefix) meets more than k_max_links links
  };
  Status status = Status::ok;
  std::string path;                 ///< ok: the parent resolved inside the root ("" is the root)
  std::vector<std::string> created; ///< ok: missing directories made, outermost first
};

/// The rule for a member's parent directory (docs/unpack.md, "Parent directory"): the parent is
/// resolved inside the root; when it is missing, each prefix is resolved in turn and a missing
/// component of the parent itself is created, but a symbolic link to a missing directory is
/// refused. A non-directory or a loop is refused, naming the parent (or the prefix where the
/// prefix walk met it), exactly as the unpacker's openat2 calls report it.
Parent resolve_parent(std::string_view parent, const Lookup& lookup);

/// The located refusal for a Parent that is not ok: the messages the unpacker gives on disk.
Error parent_error(std::string_view what, std::string_view raw, const Parent& parent);

/// A tree a layer is applied to in memory. Paths are normalised and resolved (no symbolic link in
/// their parents); the layer model calls these only for paths whose parent is a directory.
class Tree {
public:
  virtual ~Tree() = default;
  Tree() = default;
  Tree(const Tree&) = delete;
  Tree& operator=(const Tree&) = delete;
  Tree(Tree&&) = delete;
  Tree& operator=(Tree&&) = delete;

  /// What is at `path`, a last symbolic link not followed.
  [[nodiscard]] virtual Entry lookup(const std::string& path) const = 0;
  /// The names directly inside the directory `path` ("" is the root).
  [[nodiscard]] virtual std::vector<std::string> children(const std::string& path) const = 0;
  /// Removes `path` and everything below it.
  virtual void remove(const std::string& path) = 0;
  /// Creates the directory `path` that member `m` implies (0755, owned by the image's root).
  virtual Result<void> make_implied_directory(const std::string& path, const Member& m) = 0;
  /// Writes member `m` (directory, file, symlink or FIFO; the root's attributes when `path` is "")
  /// at `path`. Nothing is there, except a directory when `m` is a directory: it is kept with its
  /// children and takes `m`'s attributes.
  virtual Result<void> put(const std::string& path, const Member& m) = 0;
  /// Makes `path` (nothing there) another name of the non-directory at `target`.
  virtual Result<void> link(const std::string& path, const std::string& target, const Member& m) = 0;
};

/// Applies the members of one layer, in their order, to a Tree.
class LayerApplier {
public:
  LayerApplier(Tree& tree, std::string what)
      : m_tree(tree), m_what(std::move(what)),
        m_lookup([&tree](const std::string& path) { return tree.lookup(path); }) {}

  /// Applies one member. `m.kind == skipped` does nothing.
  Result<void> apply(const Member& m);

  /// True when this layer wrote `path` (or, for a directory, wrote into it).
  [[nodiscard]] bool is_upper(const std::string& path) const { return m_upper.contains(path); }

private:
  Result<std::string> place_parent(const Member& m);
  Result<void> apply_whiteout(const Member& m);
  Result<void> apply_opaque(const Member& m);
  Result<void> apply_hardlink(const Member& m, const std::string& path);
  void remove_lower(const std::string& dir);
  void mark_upper(const std::string& path);

  Tree& m_tree;
  std::string m_what;
  Lookup m_lookup;                         ///< m_tree.lookup, as the walks take it
  std::unordered_set<std::string> m_upper; ///< paths this layer wrote, with their parents
  std::string m_cached_parent;             ///< the last member's parent as named ...
  std::string m_cached_resolved;           ///< ... and where it resolved
  bool m_cache_valid = false;
};

/// "a/b" from "a" and "b"; "b" when `dir` is empty.
std::string join(std::string_view dir, std::string_view name);

} // namespace lockstep::layer
