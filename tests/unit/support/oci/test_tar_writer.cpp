#include "support/oci/tar_writer.hpp"
#include "tests/unit/test_support.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <catch2/catch.hpp>

#include <clocale>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

using test::StringSink;

struct ReadEntry {
  std::string path;
  int type;
  unsigned mode;
  long uid;
  long gid;
  long mtime;
  bool has_atime;
  bool has_ctime;
  std::string link;
  std::string hardlink;
  std::string data;
  std::vector<std::string> xattrs;
  std::string uname;
};

std::vector<ReadEntry> read_tar(const std::string& bytes) {
  std::vector<ReadEntry> out;
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  REQUIRE(archive_read_open_memory(a, bytes.data(), bytes.size()) == ARCHIVE_OK);
  struct archive_entry* e = nullptr;
  // ARCHIVE_WARN: a name could not be converted to the reader's locale; it is still returned raw.
  for (int rc = archive_read_next_header(a, &e); rc == ARCHIVE_OK || rc == ARCHIVE_WARN;
       rc = archive_read_next_header(a, &e)) {
    ReadEntry r;
    r.path = archive_entry_pathname(e);
    r.type = static_cast<int>(archive_entry_filetype(e));
    r.mode = archive_entry_perm(e);
    r.uid = archive_entry_uid(e);
    r.gid = archive_entry_gid(e);
    r.mtime = archive_entry_mtime(e);
    r.has_atime = archive_entry_atime_is_set(e) != 0;
    r.has_ctime = archive_entry_ctime_is_set(e) != 0;
    r.link = archive_entry_symlink(e) ? archive_entry_symlink(e) : "";
    r.hardlink = archive_entry_hardlink(e) ? archive_entry_hardlink(e) : "";
    r.uname = archive_entry_uname(e) ? archive_entry_uname(e) : "";
    const char* name = nullptr;
    const void* value = nullptr;
    size_t size = 0;
    archive_entry_xattr_reset(e);
    while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
      r.xattrs.push_back(std::string(name) + "=" + std::string(static_cast<const char*>(value), size));
    }
    char buf[4096];
    la_ssize_t n = 0;
    while ((n = archive_read_data(a, buf, sizeof(buf))) > 0) {
      r.data.append(buf, static_cast<std::size_t>(n));
    }
    out.push_back(r);
  }
  archive_read_free(a);
  return out;
}

std::string build_sample() {
  StringSink sink;
  TarWriter tar(sink);
  TarEntry dir;
  dir.path = "opt";
  dir.type = TarEntry::Type::dir;
  dir.mode = 0755;
  dir.mtime = 1700000000;
  tar.add(dir);
  TarEntry file;
  file.path = "opt/hello.txt";
  file.mode = 04755;
  file.uid = 1000;
  file.gid = 100;
  file.mtime = 1700000000;
  file.size = 5;
  file.xattrs = {{"security.capability", std::string("\x01\x00\x00\x02", 4)}};
  tar.add(file);
  tar.write_data("hello", 5);
  TarEntry link;
  link.path = "opt/hard";
  link.type = TarEntry::Type::hardlink;
  link.link_target = "opt/hello.txt";
  tar.add(link);
  TarEntry sym;
  sym.path = "opt/sym";
  sym.type = TarEntry::Type::symlink;
  sym.mode = 0777;
  sym.link_target = "hello.txt";
  tar.add(sym);
  TarEntry longname;
  longname.path = "opt/" + std::string(180, 'n');
  longname.size = 0;
  tar.add(longname);
  tar.finish();
  return sink.out;
}

} // namespace

TEST_CASE("the tar writer writes exactly the attributes it is given", "[tar]") {
  auto entries = read_tar(build_sample());
  REQUIRE(entries.size() == 5);
  CHECK(entries[0].path == "opt/");
  CHECK(entries[0].type == AE_IFDIR);
  CHECK(entries[1].path == "opt/hello.txt");
  CHECK(entries[1].mode == 04755);
  CHECK(entries[1].uid == 1000);
  CHECK(entries[1].gid == 100);
  CHECK(entries[1].mtime == 1700000000);
  CHECK(entries[1].data == "hello");
  CHECK(entries[1].uname.empty());
  CHECK_FALSE(entries[1].has_atime);
  CHECK_FALSE(entries[1].has_ctime);
  REQUIRE(entries[1].xattrs.size() == 1);
  CHECK(entries[1].xattrs[0] == std::string("security.capability=\x01\x00\x00\x02", 24));
  CHECK(entries[2].hardlink == "opt/hello.txt");
  CHECK(entries[3].link == "hello.txt");
  CHECK(entries[4].path == "opt/" + std::string(180, 'n'));
}

TEST_CASE("the tar writer is deterministic and ends with two zero blocks", "[tar]") {
  std::string a = build_sample();
  std::string b = build_sample();
  REQUIRE(a == b);
  REQUIRE(a.size() % 512 == 0);
  CHECK(a.substr(a.size() - 1024) == std::string(1024, '\0'));
  // Only the xattr and the long name need PAX records; no atime/ctime/mtime records ever.
  CHECK(a.find("atime=") == std::string::npos);
  CHECK(a.find("ctime=") == std::string::npos);
  CHECK(a.find("mtime=") == std::string::npos);
  CHECK(a.find("LIBARCHIVE.") == std::string::npos);
  CHECK(a.find("SCHILY.xattr.security.capability=") != std::string::npos);
}

TEST_CASE("the tar writer's bytes do not depend on the process locale", "[tar]") {
  auto build = [] {
    StringSink sink;
    TarWriter tar(sink);
    std::vector<std::string> names = {"ünicode-ascii-mix.txt", "plain.txt",
                                      std::string("x/") + std::string(120, 'a') + "é", "bad-\xff-name"};
    for (const std::string& name : names) {
      TarEntry e;
      e.path = name;
      tar.add(e);
    }
    tar.finish();
    return sink.out;
  };
  std::setlocale(LC_ALL, "C");
  std::string c = build();
  std::setlocale(LC_ALL, "C.UTF-8");
  std::string utf8 = build();
  std::setlocale(LC_ALL, "C");
  REQUIRE(c == utf8);
  auto entries = read_tar(c);
  REQUIRE(entries.size() == 4);
  CHECK(entries[0].path == "ünicode-ascii-mix.txt");
  // Only the name that is not UTF-8 is marked as raw bytes.
  std::size_t marks = 0;
  for (std::size_t pos = 0; (pos = c.find("hdrcharset=BINARY", pos)) != std::string::npos; ++pos) {
    ++marks;
  }
  CHECK(marks == 1);
}
