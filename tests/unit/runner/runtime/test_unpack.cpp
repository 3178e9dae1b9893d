#include "runner/runtime/unpack.hpp"
#include "support/codec/compress.hpp"
#include "support/oci/layer_model.hpp"
#include "support/system/fs.hpp"
#include "tests/unit/test_layers.hpp"
#include "tests/unit/test_support.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace lockstep;
using namespace lockstep::runner;
using namespace lockstep::test;
namespace fs = std::filesystem;
using Ownership = UnpackOptions::Ownership;

namespace {

// Rewrites the size field of the ustar header at `offset` (base-256 for big values) and its checksum.
void patch_size(std::string& tar, std::size_t offset, std::uint64_t size) {
  char* h = tar.data() + offset;
  std::memset(h + 124, 0, 12);
  h[124] = static_cast<char>(0x80);
  for (int i = 0; i < 8; ++i) {
    h[135 - i] = static_cast<char>((size >> (8 * i)) & 0xff);
  }
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; ++i) {
    sum += static_cast<unsigned char>(h[i]);
  }
  std::snprintf(h + 148, 8, "%06o", sum);
}

// A root to unpack into, beside an "outside" directory holding a canary file that no member may reach.
struct RootFixture {
  test::TempDirFixture tmp;
  fs::path root = tmp.dir() / "root";
  fs::path outside = tmp.dir() / "outside";
  UniqueFd root_fd;

  RootFixture() {
    fs::create_directories(root);
    fs::create_directories(outside);
    tmp.write("outside/canary", "keep");
    ::chmod((outside / "canary").c_str(), 0644);
    ::chmod(outside.c_str(), 0755);
    root_fd = UniqueFd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(root_fd.valid());
  }

  Result<UnpackStats> apply(const std::vector<Member>& members, const UnpackOptions& options = {}) const {
    return apply_tar_bytes(root_fd.get(), make_tar(members), options);
  }

  // Nothing exists outside the root but the untouched canary.
  void check_outside_untouched() const {
    std::vector<std::string> top;
    for (const auto& e : fs::directory_iterator(tmp.dir())) {
      top.push_back(e.path().filename().string());
    }
    std::sort(top.begin(), top.end());
    CHECK(top == std::vector<std::string>{"outside", "root"});
    std::vector<std::string> inside;
    for (const auto& e : fs::recursive_directory_iterator(outside)) {
      inside.push_back(fs::relative(e.path(), outside).string());
    }
    CHECK(inside == std::vector<std::string>{"canary"});
    struct stat st {};
    REQUIRE(::lstat((outside / "canary").c_str(), &st) == 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK((st.st_mode & 07777) == 0644);
    CHECK(st.st_nlink == 1);
    CHECK(test::slurp(outside / "canary") == "keep");
    REQUIRE(::lstat(outside.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
  }

  // Every path under the root, sorted, directories with a trailing '/', symlinks as "name -> target".
  [[nodiscard]] std::vector<std::string> listing() const {
    std::vector<std::string> out;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
      std::string rel = it->path().lexically_relative(root).string();
      if (it->is_symlink()) {
        out.push_back(rel + " -> " + fs::read_symlink(it->path()).string());
      } else if (it->is_directory()) {
        out.push_back(rel + "/");
      } else {
        out.push_back(rel);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

struct stat lstat_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st;
}

} // namespace

TEST_CASE("hostile layers are refused with a located message and nothing is created outside the root",
          "[unpack]") {
  const std::vector<HostileCase> cases = hostile_layer_cases();
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.title) {
      RootFixture f;
      auto r = f.apply(c.members);
      REQUIRE_FALSE(r);
      CHECK(r.error().code == ExitCode::invalid_input);
      CHECK(r.error().message == c.error);
      f.check_outside_untouched();
    }
  }
}

TEST_CASE("symlinks are resolved as if the root were '/', so writes through them stay inside", "[unpack]") {
  RootFixture f;
  SECTION("an absolute symlink to an existing directory") {
    REQUIRE(f.apply({dir("etc/"), symlink_to("a", "/etc"), file("a/passwd", "inside")}));
    CHECK(test::slurp(f.root / "etc" / "passwd") == "inside");
  }
  SECTION("a relative symlink that climbs above the root") {
    REQUIRE(f.apply({symlink_to("a", "../.."), file("a/passwd", "inside")}));
    CHECK(test::slurp(f.root / "passwd") == "inside");
    CHECK(f.listing() == std::vector<std::string>{"a -> ../..", "passwd"});
  }
  SECTION("a symlink to the canary is replaced, never written through") {
    REQUIRE(f.apply({symlink_to("a", "../outside/canary"), file("a", "inside")}));
    CHECK(test::slurp(f.root / "a") == "inside");
    CHECK(f.listing() == std::vector<std::string>{"a"});
  }
  SECTION("a directory member over a symlink to outside replaces the symlink") {
    REQUIRE(f.apply({symlink_to("s", "../outside"), dir("s/", 0700)}));
    CHECK(S_ISDIR(lstat_of(f.root / "s").st_mode));
  }
  SECTION("a symlink chain that ends at the root") {
    REQUIRE(f.apply({symlink_to("l1", "l2"), symlink_to("l2", "/"), file("l1/x", "inside")}));
    CHECK(test::slurp(f.root / "x") == "inside");
  }
  SECTION("symlink targets are stored verbatim") {
    REQUIRE(f.apply(
        {symlink_to("abs", "/etc/passwd"), symlink_to("up", "../../../x"), symlink_to("self", "self")}));
    CHECK(fs::read_symlink(f.root / "abs") == "/etc/passwd");
    CHECK(fs::read_symlink(f.root / "up") == "../../../x");
    CHECK(fs::read_symlink(f.root / "self") == "self");
  }
  SECTION("a duplicate entry replaces the earlier one") {
    auto r =
        f.apply({file("f", "one"), file("f", "two"), dir("a/"), symlink_to("a", "/"), file("a/x", "inside")});
    REQUIRE(r);
    CHECK(test::slurp(f.root / "f") == "two");
    CHECK(f.listing() == std::vector<std::string>{"a -> /", "f", "x"});
  }
  f.check_outside_untouched();
}

TEST_CASE("device nodes are skipped and counted, FIFOs are created", "[unpack]") {
  RootFixture f;
  // (tar has no type for sockets; libarchive never reports one from a tar, but one would be skipped too)
  auto r = f.apply({special("dev/null", AE_IFCHR), special("dev/sda", AE_IFBLK), special("fifo", AE_IFIFO)});
  REQUIRE(r);
  CHECK(r->skipped == 2);
  CHECK(r->fifos == 1);
  CHECK(r->entries == 3);
  CHECK(f.listing() == std::vector<std::string>{"fifo"});
  CHECK(S_ISFIFO(lstat_of(f.root / "fifo").st_mode));
  f.check_outside_untouched();
}

TEST_CASE("sizes past the limit or past the archive's end are refused", "[unpack]") {
  RootFixture f;
  SECTION("a declared size over the limit") {
    std::string tar = make_tar({file("big", "x")});
    patch_size(tar, 0, 2ULL << 40);
    auto r = apply_tar_bytes(f.root_fd.get(), tar, {});
    REQUIRE_FALSE(r);
    CHECK(
        r.error().message ==
        "layer: member 'big' declares 2199023255552 bytes; the layer would unpack to more than the limit of "
        "274877906944 bytes");
  }
  SECTION("a declared size larger than the data that follows") {
    std::string tar = make_tar({file("big", std::string(1 << 20, 'x'))});
    tar.resize(512 + 1000);
    auto r = apply_tar_bytes(f.root_fd.get(), tar, {});
    REQUIRE_FALSE(r);
    CHECK(r.error().message ==
          "layer: member 'big' declares 1048576 bytes but the archive has only 1512 bytes left "
          "from its header on");
  }
  SECTION("members that add up to more than the limit") {
    UnpackOptions o;
    o.max_bytes = 1000;
    auto r = f.apply({file("a", std::string(600, 'a')), file("b", std::string(600, 'b'))}, o);
    REQUIRE_FALSE(r);
    CHECK(
        r.error().message ==
        "layer: member 'b' declares 600 bytes; the layer would unpack to more than the limit of 1000 bytes");
  }
  SECTION("a truncated archive") {
    std::string tar = make_tar({file("a", std::string(5000, 'a')), file("b", "b")});
    tar.resize(1024);
    auto r = apply_tar_bytes(f.root_fd.get(), tar, {});
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK(r.error().message ==
          "layer: member 'a' declares 5000 bytes but the archive has only 1024 bytes left from "
          "its header on");
  }
  SECTION("garbage") {
    auto r = apply_tar_bytes(f.root_fd.get(), std::string(1024, 'z'), {});
    REQUIRE_FALSE(r);
    CHECK(r.error().message.starts_with("layer: not a valid tar stream: "));
  }
  f.check_outside_untouched();
}

TEST_CASE("whiteouts remove what lower layers left and nothing of their own layer", "[unpack]") {
  RootFixture f;
  REQUIRE(f.apply({dir("a/"), file("a/x", "x"), file("a/y", "y"), file("b", "b"), dir("c/"), file("c/z", "z"),
                   file("keep", "k"), symlink_to("link", "/nowhere")}));
  SECTION("explicit whiteouts") {
    auto r = f.apply({file("a/.wh.x", ""), file(".wh.c", ""), file(".wh.link", ""), file(".wh.absent", "")});
    REQUIRE(r);
    CHECK(r->whiteouts == 4);
    CHECK(f.listing() == std::vector<std::string>{"a/", "a/y", "b", "keep"});
  }
  SECTION("a whiteout before a new entry of the same name") {
    REQUIRE(f.apply({file(".wh.b", ""), dir("b/"), file("b/new", "n")}));
    CHECK(f.listing() == std::vector<std::string>{"a/", "a/x", "a/y", "b/", "b/new", "c/", "c/z", "keep",
                                                  "link -> /nowhere"});
  }
  SECTION("a whiteout after an entry of the same layer leaves it") {
    REQUIRE(f.apply({file("b", "new"), file(".wh.b", "")}));
    CHECK(test::slurp(f.root / "b") == "new");
  }
  SECTION("a whiteout of a directory this layer wrote into removes only what lower layers left") {
    REQUIRE(f.apply({file("c/new", "n"), file(".wh.c", "")}));
    CHECK(fs::exists(f.root / "c" / "new"));
    CHECK_FALSE(fs::exists(f.root / "c" / "z"));
  }
  SECTION("an opaque directory keeps only this layer's children, wherever the marker is") {
    REQUIRE(f.apply({dir("c/sub/"), file("c/sub/lower", "l")}));
    auto r = f.apply({dir("c/"), file("c/new", "n"), dir("c/sub/"), file("c/sub/mine", "m"),
                      file("c/.wh..wh..opq", ""), dir("a/"), file("a/.wh..wh..opq", "")});
    REQUIRE(r);
    CHECK(r->whiteouts == 2);
    CHECK(f.listing() == std::vector<std::string>{"a/", "b", "c/", "c/new", "c/sub/", "c/sub/mine", "keep",
                                                  "link -> /nowhere"});
  }
  SECTION("a whiteout through a symlinked directory removes the target's entry inside the root") {
    REQUIRE(f.apply({symlink_to("s", "/a"), file("s/.wh.y", "")}));
    CHECK(!fs::exists(f.root / "a" / "y"));
    CHECK(fs::exists(f.root / "a" / "x"));
  }
  SECTION("aufs metadata is ignored") {
    auto r = f.apply({dir(".wh..wh.plnk/"), file(".wh..wh.plnk/123.456", "x"), file(".wh..wh.aufs", "")});
    REQUIRE(r);
    CHECK(r->skipped == 3);
    CHECK(r->whiteouts == 0);
  }
  SECTION("a whiteout under a missing directory does nothing") {
    REQUIRE(f.apply({file("nothere/.wh.x", ""), file("b/.wh.x", "")}));
    CHECK(f.listing() ==
          std::vector<std::string>{"a/", "a/x", "a/y", "b", "c/", "c/z", "keep", "link -> /nowhere"});
  }
  f.check_outside_untouched();
}

TEST_CASE("existing paths are replaced: directory by file, file by directory, directory kept", "[unpack]") {
  RootFixture f;
  REQUIRE(f.apply({dir("d/"), dir("d/deep/", 0500), file("d/deep/x", "x", 0400), file("f", "f"),
                   dir("k/", 0700), file("k/old", "o")}));
  REQUIRE(
      f.apply({file("d", "now a file"), dir("f/"), file("f/y", "y"), dir("k/", 0750), file("k/new", "n")}));
  CHECK(f.listing() == std::vector<std::string>{"d", "f/", "f/y", "k/", "k/new", "k/old"});
  CHECK(test::slurp(f.root / "d") == "now a file");
  CHECK((lstat_of(f.root / "k").st_mode & 07777) == 0750);
  f.check_outside_untouched();
}

TEST_CASE("hard links share the inode, also with a lower layer's file", "[unpack]") {
  RootFixture f;
  REQUIRE(f.apply({file("bin/a", "binary", 0755), hardlink_to("bin/b", "bin/a")}));
  auto r = f.apply({hardlink_to("usr/c", "bin/a"), hardlink_to("bin/b", "bin/a")});
  REQUIRE(r);
  CHECK(r->hardlinks == 2);
  struct stat a = lstat_of(f.root / "bin" / "a");
  CHECK(a.st_nlink == 3);
  CHECK(lstat_of(f.root / "bin" / "b").st_ino == a.st_ino);
  CHECK(lstat_of(f.root / "usr" / "c").st_ino == a.st_ino);
  f.check_outside_untouched();
}

TEST_CASE("modes and times are applied, and directories keep their member's mtime", "[unpack]") {
  RootFixture f;
  Member d = dir("etc/", 0750);
  d.mtime = 1000;
  Member p = file("etc/passwd", "root:x:0:0", 0640);
  p.mtime = 1234567890;
  Member l = symlink_to("etc/link", "passwd");
  l.mtime = 42;
  Member root = dir("./", 0755);
  root.mtime = 7;
  auto r = f.apply({root, d, p, l, file("etc/later/x", "implied parent")});
  REQUIRE(r);
  CHECK(r->files == 2);
  CHECK(r->dirs == 2);
  CHECK(r->symlinks == 1);
  CHECK(r->bytes == 24);
  struct stat st = lstat_of(f.root / "etc");
  CHECK((st.st_mode & 07777) == 0750);
  CHECK(st.st_mtim.tv_sec == 1000);
  st = lstat_of(f.root / "etc" / "passwd");
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(st.st_mtim.tv_sec == 1234567890);
  CHECK(lstat_of(f.root / "etc" / "link").st_mtim.tv_sec == 42);
  CHECK((lstat_of(f.root / "etc" / "later").st_mode & 07777) == 0755);
  CHECK(lstat_of(f.root).st_mtim.tv_sec == 7);

  // A later layer adding to a directory leaves that directory's time alone.
  REQUIRE(f.apply({file("etc/group", "root:x:0:")}));
  CHECK(lstat_of(f.root / "etc").st_mtim.tv_sec == 1000);
  CHECK(lstat_of(f.root).st_mtim.tv_sec == 7);
}

TEST_CASE("caller ownership drops setuid/setgid and keeps the owner able to write", "[unpack]") {
  RootFixture f;
  Member su = file("bin/su", "su", 04755);
  su.uid = 1234;
  su.gid = 5678;
  Member sg = file("bin/wall", "wall", 02555);
  Member ro = dir("ro/", 0555);
  Member sticky = dir("tmp/", 01777);
  su.xattrs["security.capability"] =
      std::string("\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
                  "\x00\x00\x00\x00",
                  20);
  REQUIRE(f.apply({su, sg, ro, file("ro/file", "r", 0444), sticky}));
  CHECK((lstat_of(f.root / "bin" / "su").st_mode & 07777) == 0755);
  CHECK((lstat_of(f.root / "bin" / "wall").st_mode & 07777) == 0755);
  CHECK((lstat_of(f.root / "ro").st_mode & 07777) == 0755);
  CHECK((lstat_of(f.root / "ro" / "file").st_mode & 07777) == 0644);
  CHECK((lstat_of(f.root / "tmp").st_mode & 07777) == 01777);
  CHECK(lstat_of(f.root / "bin" / "su").st_uid == ::geteuid());
  CHECK(::lgetxattr((f.root / "bin" / "su").c_str(), "security.capability", nullptr, 0) < 0);
  // A later layer can still replace what sits in a read-only directory.
  REQUIRE(f.apply({file("ro/file", "new", 0444)}));
  CHECK(test::slurp(f.root / "ro" / "file") == "new");
}

TEST_CASE("keep ownership applies owners, setuid and file capabilities", "[unpack]") {
  if (::geteuid() != 0) {
    WARN("not root: ownership 'keep' is not tested");
    return;
  }
  RootFixture f;
  UnpackOptions keep;
  keep.ownership = Ownership::keep;
  Member su = file("bin/su", "su", 04755);
  su.uid = 1234;
  su.gid = 5678;
  std::string cap("\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", 20);
  su.xattrs["security.capability"] = cap;
  su.xattrs["user.note"] = "dropped";
  Member l = symlink_to("bin/link", "su");
  l.uid = 99;
  l.gid = 98;
  Member ro = dir("ro/", 0555);
  REQUIRE(f.apply({su, l, ro, file("ro/file", "r", 0444)}, keep));
  struct stat st = lstat_of(f.root / "bin" / "su");
  CHECK((st.st_mode & 07777) == 04755);
  CHECK(st.st_uid == 1234);
  CHECK(st.st_gid == 5678);
  st = lstat_of(f.root / "bin" / "link");
  CHECK(st.st_uid == 99);
  CHECK(st.st_gid == 98);
  CHECK((lstat_of(f.root / "ro").st_mode & 07777) == 0555);
  CHECK((lstat_of(f.root / "ro" / "file").st_mode & 07777) == 0444);
  std::string got(64, '\0');
  ssize_t n = ::lgetxattr((f.root / "bin" / "su").c_str(), "security.capability", got.data(), got.size());
  REQUIRE(n == 20);
  got.resize(20);
  CHECK(got == cap);
  CHECK(::lgetxattr((f.root / "bin" / "su").c_str(), "user.note", nullptr, 0) < 0);
  Member bad = file("x", "x");
  bad.uid = 0xFFFFFFFFLL;
  auto r = f.apply({bad}, keep);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "layer: member 'x' has an owner 4294967295:0 out of range");
}

TEST_CASE("trees longer than a path can name are unpacked, whited out and removed", "[unpack]") {
  RootFixture f;
  std::string deep; // 12 levels of 200-byte names: a 2412-byte member path
  for (int i = 0; i < 12; ++i) {
    deep += std::string(200, static_cast<char>('a' + i)) + "/";
  }
  std::string narrow; // and 300 levels of 1-byte names
  for (int i = 0; i < 300; ++i) {
    narrow += "n/";
  }
  // The symlink continues the path below its target: a real path of 4824 bytes.
  REQUIRE(f.apply(
      {file(deep + "x", "x"), symlink_to("l", deep), file("l/" + deep + "y", "y"), file(narrow + "n", "")}));
  CHECK(::faccessat(f.root_fd.get(), ("l/" + deep + "y").c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0);
  // A whiteout of the second half of the long path, and an opaque top of the narrow one.
  REQUIRE(f.apply({file(deep + "z", "z"), file(deep + ".wh." + deep.substr(0, 200), ""),
                   file("n/.wh..wh..opq", ""), file("n/keep", "k")}));
  CHECK(::faccessat(f.root_fd.get(), (deep + "z").c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(::faccessat(f.root_fd.get(), (deep + deep.substr(0, 200)).c_str(), F_OK, AT_SYMLINK_NOFOLLOW) != 0);
  CHECK(::faccessat(f.root_fd.get(), (deep + "x").c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0);
  std::vector<std::string> in_n;
  for (const auto& e : fs::directory_iterator(f.root / "n")) {
    in_n.push_back(e.path().filename().string());
  }
  CHECK(in_n == std::vector<std::string>{"keep"});
  REQUIRE(f.apply({file("l/" + deep + "y", "y"), file(narrow + "n", "")}));
  REQUIRE(remove_tree(f.root));
  CHECK_FALSE(fs::exists(f.root));
  fs::create_directories(f.root);
  f.check_outside_untouched();
}

TEST_CASE("remove_tree removes read-only trees without following symlinks", "[unpack]") {
  RootFixture f;
  REQUIRE(f.apply({dir("a/", 0500), dir("a/b/", 0000), file("a/b/c", "c", 0000),
                   symlink_to("a/out", "../../outside"), symlink_to("a/canary", "/../outside/canary")}));
  ::chmod((f.root / "a" / "b").c_str(), 0);
  ::chmod((f.root / "a").c_str(), 0500);
  REQUIRE(remove_tree(f.root));
  CHECK(!fs::exists(f.root));
  CHECK(remove_tree(f.root)); // already gone
  fs::create_directories(f.root);
  f.check_outside_untouched();
}

namespace {

struct LayerFixture {
  RootFixture f;
  std::string tar =
      make_tar({dir("etc/"), file("etc/hostname", "box\n"), file("big", std::string(3 << 20, 'q'))});

  // Writes `blob` and a descriptor for it.
  oci::Descriptor blob(const std::string& bytes, std::string_view media_type,
                       const std::string& name = "blob") {
    f.tmp.write(name, bytes);
    oci::Descriptor d;
    d.media_type = std::string(media_type);
    d.digest = sha256_of(bytes);
    d.size = static_cast<std::int64_t>(bytes.size());
    return d;
  }
  Result<UnpackStats> apply(const oci::Descriptor& d, const Digest& diff_id,
                            const std::string& name = "blob") {
    return apply_layer(f.root_fd.get(), f.tmp.dir() / name, d, diff_id, {});
  }
};

std::string compress(Codec codec, const std::string& data) {
  test::StringSink sink;
  ParallelCompressor c(codec, sink, 2);
  c.write(data.data(), data.size());
  c.finish();
  return sink.out;
}

} // namespace

TEST_CASE("apply_layer reads plain, gzip (multi-member) and zstd blobs, OCI and Docker media types",
          "[unpack]") {
  LayerFixture lf;
  Digest diff_id = sha256_of(lf.tar);
  struct Kind {
    std::string bytes;
    std::string_view media_type;
  };
  std::vector<Kind> kinds = {{lf.tar, oci::k_media_layer_tar},
                             {lf.tar, oci::k_docker_layer_tar},
                             {compress(Codec::gzip, lf.tar), oci::k_media_layer_gzip},
                             {compress(Codec::gzip, lf.tar), oci::k_docker_layer_gzip},
                             {compress(Codec::zstd, lf.tar), oci::k_media_layer_zstd}};
  for (const auto& k : kinds) {
    DYNAMIC_SECTION(k.media_type) {
      auto r = lf.apply(lf.blob(k.bytes, k.media_type), diff_id);
      REQUIRE(r);
      CHECK(r->files == 2);
      CHECK(r->bytes == (3 << 20) + 4);
      CHECK(test::slurp(lf.f.root / "etc" / "hostname") == "box\n");
      CHECK(fs::file_size(lf.f.root / "big") == 3 << 20);
    }
  }
}

TEST_CASE("apply_layer refuses a blob whose size, digest or diff_id does not match", "[unpack]") {
  LayerFixture lf;
  std::string gz = compress(Codec::gzip, lf.tar);
  Digest diff_id = sha256_of(lf.tar);
  oci::Descriptor d = lf.blob(gz, oci::k_media_layer_gzip);
  std::string what = "layer " + d.digest.str();
  SECTION("a corrupt blob of the right size") {
    std::string bad = gz;
    bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 0x55);
    lf.f.tmp.write("blob", bad);
    auto r = lf.apply(d, diff_id);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK(r.error().message ==
          what + ": digest mismatch: the blob hashes to " + sha256_of(bad).str() + " (the image is corrupt)");
  }
  SECTION("a blob of another size") {
    lf.f.tmp.write("blob", gz + "x");
    auto r = lf.apply(d, diff_id);
    REQUIRE_FALSE(r);
    CHECK(r.error().message ==
          fmt::format("{}: the blob has {} bytes, its descriptor says {}", what, gz.size() + 1, gz.size()));
  }
  SECTION("a diff_id that does not match") {
    Digest other = sha256_of("other");
    auto r = lf.apply(d, other);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == what + ": the uncompressed layer hashes to " + diff_id.str() +
                                   ", but the image config says its diff_id is " + other.str());
  }
  SECTION("a media type that does not match the bytes") {
    oci::Descriptor plain = lf.blob(lf.tar, oci::k_media_layer_zstd);
    auto r = lf.apply(plain, diff_id);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.starts_with("layer " + plain.digest.str() + ": can't decompress the blob: "));
  }
  SECTION("a media type that is not a layer") {
    auto r = lf.apply(lf.blob(lf.tar, oci::k_media_config), diff_id);
    REQUIRE_FALSE(r);
    CHECK(r.error().message ==
          "layer " + sha256_of(lf.tar).str() +
              ": unsupported layer media type 'application/vnd.oci.image.config.v1+json'");
  }
  SECTION("an uncompressed stream over the limit") {
    UnpackOptions o;
    o.max_bytes = 1 << 20;
    auto r = apply_layer(lf.f.root_fd.get(), lf.f.tmp.dir() / "blob", d, diff_id, o);
    REQUIRE_FALSE(r);
    CHECK(r.error().message ==
          what + ": member 'big' declares 3145728 bytes; the layer would unpack to more than "
                 "the limit of 1048576 bytes");
  }
  SECTION("a gzip bomb stops at the limit") {
    std::string zeros = compress(Codec::gzip, std::string(8 << 20, '\0'));
    oci::Descriptor bomb = lf.blob(zeros, oci::k_media_layer_gzip, "bomb");
    UnpackOptions o;
    o.max_bytes = 1 << 20;
    auto r = apply_layer(lf.f.root_fd.get(), lf.f.tmp.dir() / "bomb", bomb, diff_id, o);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "layer " + bomb.digest.str() +
                                   ": the uncompressed layer is larger than the limit of 1048576 bytes");
  }
}

TEST_CASE("layer::resolve_parent puts a member where the unpacker does and refuses what it refuses",
          "[unpack]") {
  struct Case {
    const char* what;
    std::vector<Member> before; // the members before the probe file
    std::string probe;          // a file member
    layer::Parent::Status status;
    std::string path;                 // where the parent resolved, or the prefix refused
    std::vector<std::string> created; // ok: the directories made on the way
  };
  using S = layer::Parent::Status;
  const std::vector<Case> cases = {
      {"plain missing parents", {}, "a/b/f", S::ok, "a/b", {"a", "a/b"}},
      {"a link to an absolute directory the root has",
       {dir("tmp"), dir("usr"), symlink_to("usr/foo", "/tmp")},
       "usr/foo/bar",
       S::ok,
       "tmp",
       {}},
      {"a relative link, then a missing directory below its target",
       {dir("usr"), dir("usr/share"), dir("usr/share/x"), symlink_to("usr/zz", "share/x")},
       "usr/zz/sub/f",
       S::ok,
       "usr/share/x/sub",
       {"usr/share/x/sub"}},
      {"'..' stops at the root", {dir("etc"), symlink_to("a", "../../../etc")}, "a/f", S::ok, "etc", {}},
      {"a chain of absolute links",
       {dir("z"), symlink_to("y", "/z"), symlink_to("x", "/y")},
       "x/f",
       S::ok,
       "z",
       {}},
      {"a link to the root", {symlink_to("a", "/")}, "a/f", S::ok, "", {}},
      {"a link to a missing absolute directory",
       {dir("usr"), symlink_to("usr/foo", "/opt/elsewhere")},
       "usr/foo/bar",
       S::link_to_missing,
       "usr/foo",
       {}},
      {"a link to a missing directory below a real one",
       {dir("q"), symlink_to("p", "q/r")},
       "p/s/f",
       S::link_to_missing,
       "p",
       {}},
      {"a link to a link to nothing",
       {symlink_to("a", "b"), symlink_to("b", "/nowhere")},
       "a/f",
       S::link_to_missing,
       "a",
       {}},
      {"a file on the way", {file("a", "x")}, "a/f", S::not_directory, "a", {}},
      {"a link to a file on the way",
       {file("f", "x"), symlink_to("a", "f")},
       "a/x/y",
       S::not_directory,
       "a/x",
       {}},
      {"a loop", {symlink_to("a", "b"), symlink_to("b", "a")}, "a/f", S::loop, "a", {}},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    // The view: what the members before the probe wrote.
    std::map<std::string, layer::Entry> view;
    for (const Member& m : c.before) {
      layer::Entry v;
      v.type = m.type == AE_IFDIR   ? layer::Entry::Type::directory
               : m.type == AE_IFLNK ? layer::Entry::Type::symlink
                                    : layer::Entry::Type::other;
      v.link_target = m.link;
      view[m.name] = v;
    }
    auto lookup = [&view](const std::string& p) {
      auto it = view.find(p);
      return it == view.end() ? layer::Entry{} : it->second;
    };
    layer::Parent r = layer::resolve_parent(fs::path(c.probe).parent_path().string(), lookup);
    CHECK(r.status == c.status);
    CHECK(r.path == c.path);
    CHECK(r.created == (c.status == S::ok ? c.created : std::vector<std::string>{}));

    // The unpacker, on disk, with the same members: it agrees.
    RootFixture fx;
    std::vector<Member> members = c.before;
    members.push_back(file(c.probe, "probe"));
    auto applied = fx.apply(members);
    CHECK(applied.ok() == (c.status == S::ok));
    if (applied.ok()) {
      fs::path placed = fx.root / c.path / fs::path(c.probe).filename();
      CHECK(fs::symlink_status(placed).type() == fs::file_type::regular);
      for (const std::string& d : c.created) {
        CHECK(fs::symlink_status(fx.root / d).type() == fs::file_type::directory);
      }
    } else {
      // The same message as the model's, for every refusal.
      CHECK(applied.error().message == layer::parent_error("layer", c.probe, r).message);
    }
    fx.check_outside_untouched();
  }
}
