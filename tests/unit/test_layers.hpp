#pragma once
// Hand-made layer tars for the tests of the layer consumers (unpack, the SIF writer, image contents
// and the differential test that holds them to one tree).
#include <archive.h>
#include <archive_entry.h>
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lockstep::test {

// One member of a hand-made layer tar; names and link targets are written verbatim.
struct Member {
  std::string name;
  mode_t type = AE_IFREG;
  std::string data;
  std::string link;     ///< symlink target
  std::string hardlink; ///< hard link target
  mode_t perm = 0644;
  std::int64_t uid = 0, gid = 0;
  std::int64_t mtime = 0;
  std::map<std::string, std::string> xattrs;
};

inline Member file(std::string name, std::string data, mode_t perm = 0644) {
  Member m;
  m.name = std::move(name);
  m.data = std::move(data);
  m.perm = perm;
  return m;
}
inline Member dir(std::string name, mode_t perm = 0755) {
  Member m;
  m.name = std::move(name);
  m.type = AE_IFDIR;
  m.perm = perm;
  return m;
}
inline Member symlink_to(std::string name, std::string target) {
  Member m;
  m.name = std::move(name);
  m.type = AE_IFLNK;
  m.link = std::move(target);
  m.perm = 0777;
  return m;
}
inline Member hardlink_to(std::string name, std::string target) {
  Member m;
  m.name = std::move(name);
  m.hardlink = std::move(target);
  return m;
}
inline Member special(std::string name, mode_t type) {
  Member m;
  m.name = std::move(name);
  m.type = type;
  m.perm = 0666;
  return m;
}

inline la_ssize_t append_to_string(struct archive*, void* out, const void* data, size_t size) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(data), size);
  return static_cast<la_ssize_t>(size);
}

// A pax tar of `members`, unblocked (two zero blocks at the end), as a layer producer writes it.
inline std::string make_tar(const std::vector<Member>& members) {
  std::string out;
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_set_bytes_per_block(a, 0);
  REQUIRE(archive_write_open(a, &out, nullptr, append_to_string, nullptr) == ARCHIVE_OK);
  for (const auto& m : members) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_filetype(e, m.type);
    archive_entry_set_perm(e, m.perm);
    archive_entry_set_uid(e, m.uid);
    archive_entry_set_gid(e, m.gid);
    archive_entry_set_mtime(e, m.mtime, 0);
    if (m.type == AE_IFLNK) {
      archive_entry_set_symlink(e, m.link.c_str());
    }
    if (!m.hardlink.empty()) {
      archive_entry_set_hardlink(e, m.hardlink.c_str());
    }
    if (m.type == AE_IFCHR || m.type == AE_IFBLK) {
      archive_entry_set_rdev(e, makedev(1, 3));
    }
    for (const auto& [k, v] : m.xattrs) {
      archive_entry_xattr_add_entry(e, k.c_str(), v.data(), v.size());
    }
    archive_entry_set_size(
        e, m.type == AE_IFREG && m.hardlink.empty() ? static_cast<la_int64_t>(m.data.size()) : 0);
    REQUIRE(archive_write_header(a, e) == ARCHIVE_OK);
    if (!m.data.empty()) {
      REQUIRE(archive_write_data(a, m.data.data(), m.data.size()) == static_cast<la_ssize_t>(m.data.size()));
    }
    archive_entry_free(e);
  }
  REQUIRE(archive_write_close(a) == ARCHIVE_OK);
  archive_write_free(a);
  return out;
}

/// A layer every consumer must refuse, and the message it gives (the layer is named "layer").
struct HostileCase {
  std::string title;
  std::vector<Member> members;
  std::string error;
};

/// The hostile-layer table: each refused with a located message, nothing created outside the root.
inline std::vector<HostileCase> hostile_layer_cases() {
  Member root_symlink = symlink_to(".", "/tmp");
  Member root_file = file(".", "x");
  Member root_hardlink = hardlink_to(".", "etc");
  return {
      {"a '../' member", {file("../x", "evil")}, "layer: member '../x' escapes the root with '..'"},
      {"a '..' deeper down", {file("a/../../x", "evil")}, "layer: member 'a/../../x' has a '..' component"},
      {"an absolute name",
       {file("/etc/passwd", "evil")},
       "layer: member '/etc/passwd' has an absolute name; layer members are relative to the root"},
      {"a hard link to '../'",
       {hardlink_to("x", "../outside/canary")},
       "layer: member 'x' is a hard link to '../outside/canary', which escapes the root"},
      {"a hard link to an absolute name",
       {hardlink_to("x", "/etc/passwd")},
       "layer: member 'x' is a hard link to '/etc/passwd', an absolute name"},
      {"a hard link to a missing file",
       {hardlink_to("x", "missing")},
       "layer: member 'x' is a hard link to 'missing', which does not exist"},
      {"a hard link to a directory",
       {dir("d/"), hardlink_to("x", "d")},
       "layer: member 'x' is a hard link to 'd', which is a directory"},
      {"a hard link through a symlink that points outside",
       {symlink_to("s", "../outside"), hardlink_to("x", "s/canary")},
       "layer: member 'x' is a hard link to 's/canary', which does not exist"},
      {"a hard link to itself", {hardlink_to("x", "./x")}, "layer: member 'x' is a hard link to itself"},
      {"a whiteout of the root",
       {file(".wh..", "")},
       "layer: member '.wh..' is a whiteout of the root directory"},
      {"a whiteout of '..'", {file("a/.wh...", "")}, "layer: member 'a/.wh...' is a whiteout of '..'"},
      {"a whiteout of its own directory",
       {file("a/.wh..", "")},
       "layer: member 'a/.wh..' is a whiteout of its own directory"},
      {"an empty whiteout", {file("a/.wh.", "")}, "layer: member 'a/.wh.' is a whiteout with an empty name"},
      {"a whiteout name as a directory",
       {file(".wh.a/b", "")},
       "layer: member '.wh.a/b' has a whiteout name ('.wh.a') as a directory component"},
      {"a root entry that is a symlink (CVE-2021-29136)",
       {root_symlink, file("passwd", "evil")},
       "layer: member '.' names the root directory but is a symbolic link; the root must stay a directory"},
      {"a root entry that is a file",
       {root_file},
       "layer: member '.' names the root directory but is a regular file; the root must stay a directory"},
      {"a root entry that is a hard link",
       {file("etc", "x"), root_hardlink},
       "layer: member '.' names the root directory but is a hard link; the root must stay a directory"},
      {"a file written through a symlink to a missing directory outside",
       {symlink_to("a", "/etc"), file("a/passwd", "evil")},
       "layer: member 'a/passwd' has a parent 'a' that is a symbolic link to a missing directory"},
      {"a symlink chain that climbs out",
       {symlink_to("l1", "l2"), symlink_to("l2", "../../outside"), file("l1/canary", "evil")},
       "layer: member 'l1/canary' has a parent 'l1' that is a symbolic link to a missing directory"},
      {"a symlink loop",
       {symlink_to("a", "b"), symlink_to("b", "a"), file("a/x", "evil")},
       "layer: member 'a/x': can't open its parent directory 'a': Too many levels of symbolic links"},
      {"a file used as a directory",
       {file("f", "x"), file("f/x", "evil")},
       "layer: member 'f/x': can't open its parent directory 'f': Not a directory"},
  };
}

} // namespace lockstep::test
