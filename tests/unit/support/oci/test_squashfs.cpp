#include "support/codec/compress.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/squashfs.hpp"
#include "support/oci/tar_writer.hpp"
#include "support/system/fs.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <libdeflate.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using test::slurp;
using test::TempDirFixture;

// A tar layer built in memory.
class Layer {
public:
  Layer& dir(const std::string& path, std::uint32_t mode = 0755) {
    TarEntry e;
    e.path = path;
    e.type = TarEntry::Type::dir;
    e.mode = mode;
    m_tar.add(e);
    return *this;
  }
  Layer& file(const std::string& path, const std::string& data, std::uint32_t mode = 0644,
              std::uint32_t uid = 0, std::int64_t mtime = 100) {
    TarEntry e;
    e.path = path;
    e.mode = mode;
    e.uid = uid;
    e.gid = uid;
    e.mtime = mtime;
    e.size = static_cast<std::int64_t>(data.size());
    m_tar.add(e);
    m_tar.write_data(data.data(), data.size());
    return *this;
  }
  Layer& symlink(const std::string& path, const std::string& target) {
    TarEntry e;
    e.path = path;
    e.type = TarEntry::Type::symlink;
    e.mode = 0777;
    e.link_target = target;
    m_tar.add(e);
    return *this;
  }
  Layer& hardlink(const std::string& path, const std::string& target) {
    TarEntry e;
    e.path = path;
    e.type = TarEntry::Type::hardlink;
    e.link_target = target;
    m_tar.add(e);
    return *this;
  }
  Layer& device(const std::string& path) {
    TarEntry e;
    e.path = path;
    e.type = TarEntry::Type::char_device;
    e.mode = 0666;
    e.dev_major = 1;
    e.dev_minor = 3;
    m_tar.add(e);
    return *this;
  }
  Layer& whiteout(const std::string& path) { return file(path, ""); }
  enum class Format { tar, gzip_members, gzip_single, zstd };
  /// Writes the tar (gzip-compressed when asked) to `path`.
  fs::path save(const fs::path& path, bool gzip = false) {
    return save_as(path, gzip ? Format::gzip_members : Format::tar);
  }
  /// Writes the tar as `format`: plain, lockstep's 1 MiB gzip members, one gzip member (as `gzip`
  /// and Go write it), or zstd.
  fs::path save_as(const fs::path& path, Format format) {
    if (!m_finished) {
      m_tar.finish();
      m_finished = true;
    }
    std::string bytes = m_sink.out;
    if (format == Format::gzip_members || format == Format::zstd) {
      test::StringSink out;
      ParallelCompressor c(format == Format::zstd ? Codec::zstd : Codec::gzip, out, 2);
      c.write(bytes.data(), bytes.size());
      c.finish();
      bytes = out.out;
    } else if (format == Format::gzip_single) {
      libdeflate_compressor* c = libdeflate_alloc_compressor(1);
      std::string out(libdeflate_gzip_compress_bound(c, bytes.size()), '\0');
      out.resize(libdeflate_gzip_compress(c, bytes.data(), bytes.size(), out.data(), out.size()));
      libdeflate_free_compressor(c);
      bytes = out + std::string(512, '\0'); // padding after the member, which readers ignore
    }
    REQUIRE(write_file_atomic(path, bytes));
    return path;
  }

private:
  test::StringSink m_sink;
  TarWriter m_tar{m_sink};
  bool m_finished = false;
};

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) {
    c = static_cast<char>(rng());
  }
  return s;
}

struct Built {
  fs::path file;
  std::int64_t size = 0;
};

// Builds an image from `layers` (and `extra` entries) into `out`, at `offset`.
Built build(const fs::path& out, const std::vector<fs::path>& layers, SquashfsOptions options = {},
            const std::vector<SquashfsEntry>& extra = {}, std::int64_t offset = 0) {
  UniqueFd fd(::open(out.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  REQUIRE(fd.valid());
  auto w = SquashfsWriter::create(fd.get(), offset, options, out.string());
  REQUIRE(w);
  int i = 0;
  for (const auto& l : layers) {
    auto r = w->add_layer(l, "layer " + std::to_string(++i));
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r);
  }
  for (const auto& e : extra) {
    REQUIRE(w->add(e));
  }
  auto size = w->finish();
  INFO((size ? std::string() : size.error().message));
  REQUIRE(size);
  return {out, *size};
}

Result<std::int64_t> try_build(const fs::path& out, const std::vector<fs::path>& layers) {
  UniqueFd fd(::open(out.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  LS_TRY_ASSIGN(auto w, SquashfsWriter::create(fd.get(), 0, SquashfsOptions{}, out.string()));
  int i = 0;
  for (const auto& l : layers) {
    LS_TRY(w.add_layer(l, "layer " + std::to_string(++i)));
  }
  return w.finish();
}

// "path type mode [size content-hash | target]" for every entry below `root`, sorted.
std::string listing(const fs::path& root) {
  std::vector<std::string> lines;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    struct stat st {};
    REQUIRE(::lstat(it->path().c_str(), &st) == 0);
    std::string rel = it->path().lexically_relative(root).string();
    std::string line = fmt::format("{} {:o}", rel, st.st_mode);
    if (S_ISREG(st.st_mode)) {
      line += fmt::format(" {} {} links={}", st.st_size, sha256_of(slurp(it->path())).hex().substr(0, 8),
                          st.st_nlink);
    } else if (S_ISLNK(st.st_mode)) {
      line += " -> " + fs::read_symlink(it->path()).string();
    }
    lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) {
    out += l + "\n";
  }
  return out;
}

std::string extract(const fs::path& image, const fs::path& dest, std::int64_t offset = 0, bool keep = false) {
  fs::create_directories(dest);
  UniqueFd fd(::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto r = extract_squashfs(image, offset, fd.get(), keep);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  return listing(dest);
}

} // namespace

TEST_CASE("squashfs compressor names round-trip", "[squashfs]") {
  for (auto c : {SquashfsCompressor::gzip, SquashfsCompressor::xz, SquashfsCompressor::zstd,
                 SquashfsCompressor::lz4}) {
    CHECK(parse_squashfs_compressor(squashfs_compressor_name(c)) == c);
  }
  CHECK_FALSE(parse_squashfs_compressor("lzo"));
}

TEST_CASE("layers are applied with whiteouts, opaque directories, hard links and symlinks", "[squashfs]") {
  TempDirFixture tmp;
  Layer base;
  base.dir("etc")
      .file("etc/passwd", "root:x:0:0\n")
      .file("etc/gone", "deleted by layer 2\n")
      .dir("opt")
      .file("opt/old", "hidden by the opaque whiteout\n")
      .dir("usr")
      .dir("usr/lib")
      .symlink("lib", "usr/lib")
      .file("usr/bin-sh", "#!/bin/sh\n", 04755)
      .hardlink("usr/sh-link", "usr/bin-sh");
  Layer top;
  top.whiteout("etc/.wh.gone")
      .whiteout("opt/.wh..wh..opq")
      .file("opt/new", "added next to the opaque whiteout\n")
      .file("lib/libx.so", "written through the lib symlink\n")
      .file("etc/passwd", "root:x:0:0\nuser:x:1000:1000\n");
  auto l1 = base.save(tmp.dir() / "l1.tar");
  auto l2 = top.save(tmp.dir() / "l2.tar.gz", true);
  auto img =
      build(tmp.dir() / "img.sqfs", {l1, l2}, SquashfsOptions{SquashfsCompressor::gzip, 50, 2, nullptr});
  CHECK(img.size % 4096 == 0);
  CHECK(extract(img.file, tmp.dir() / "x") == "etc 40755\n"
                                              "etc/passwd 100644 28 6396fe81 links=1\n"
                                              "lib 120777 -> usr/lib\n"
                                              "opt 40755\n"
                                              "opt/new 100644 34 08946aa2 links=1\n"
                                              "usr 40755\n"
                                              "usr/bin-sh 100755 10 a8076d3d links=2\n"
                                              "usr/lib 40755\n"
                                              "usr/lib/libx.so 100644 32 77bd964d links=1\n"
                                              "usr/sh-link 100755 10 a8076d3d links=2\n");
  if (test::have_tool("unsquashfs")) {
    // The peer's view: owners 0/0, every time clamped to the epoch (50 s), setuid kept in the image.
    CHECK(test::run_command("TZ=UTC unsquashfs -lln " + img.file.string() +
                            " | awk '{print $1, $2, $3, $4, $5, $6, $7, $8}'") ==
          "drwxr-xr-x 0/0 59 1970-01-01 00:00 squashfs-root  \n"
          "drwxr-xr-x 0/0 29 1970-01-01 00:00 squashfs-root/etc  \n"
          "-rw-r--r-- 0/0 28 1970-01-01 00:00 squashfs-root/etc/passwd  \n"
          "lrwxrwxrwx 0/0 7 1970-01-01 00:00 squashfs-root/lib -> usr/lib\n"
          "drwxr-xr-x 0/0 26 1970-01-01 00:00 squashfs-root/opt  \n"
          "-rw-r--r-- 0/0 34 1970-01-01 00:00 squashfs-root/opt/new  \n"
          "drwxr-xr-x 0/0 55 1970-01-01 00:00 squashfs-root/usr  \n"
          "-rwsr-xr-x 0/0 10 1970-01-01 00:00 squashfs-root/usr/bin-sh  \n"
          "drwxr-xr-x 0/0 30 1970-01-01 00:00 squashfs-root/usr/lib  \n"
          "-rw-r--r-- 0/0 32 1970-01-01 00:00 squashfs-root/usr/lib/libx.so  \n"
          "-rwsr-xr-x 0/0 10 1970-01-01 00:00 squashfs-root/usr/sh-link  \n");
    CHECK(test::run_command("TZ=UTC unsquashfs -s " + img.file.string() +
                            " | grep -E 'Creation|Compression|Number of inodes'") ==
          "Creation or last append time Thu Jan  1 00:00:50 1970\n"
          "Compression gzip\n"
          "Number of inodes 10\n");
  }
}

TEST_CASE("the image bytes are the same for any thread count and across runs", "[squashfs]") {
  TempDirFixture tmp;
  Layer l;
  l.dir("data");
  for (int i = 0; i < 40; ++i) {
    // Whole blocks, tails for fragments, duplicates, and incompressible data.
    l.file(fmt::format("data/f{:02}", i), random_bytes(static_cast<std::size_t>(i) * 20000 + 7, i % 7) +
                                              std::string(static_cast<std::size_t>(i) * 3000, 'z'));
  }
  auto layer = l.save(tmp.dir() / "l.tar.gz", true);
  auto one = build(tmp.dir() / "one.sqfs", {layer}, SquashfsOptions{SquashfsCompressor::gzip, 7, 1, nullptr});
  auto four =
      build(tmp.dir() / "four.sqfs", {layer}, SquashfsOptions{SquashfsCompressor::gzip, 7, 4, nullptr});
  auto again =
      build(tmp.dir() / "again.sqfs", {layer}, SquashfsOptions{SquashfsCompressor::gzip, 7, 3, nullptr});
  CHECK(slurp(one.file) == slurp(four.file));
  CHECK(slurp(one.file) == slurp(again.file));
  CHECK(extract(one.file, tmp.dir() / "x").find(fmt::format("data/f39 100644 {} ", 39 * 23000 + 7)) !=
        std::string::npos);
}

TEST_CASE("every compressor writes an image the peers read", "[squashfs]") {
  TempDirFixture tmp;
  Layer l;
  l.file("a", std::string(300000, 'a')).file("b", random_bytes(5000, 1));
  auto layer = l.save(tmp.dir() / "l.tar");
  for (auto c : {SquashfsCompressor::gzip, SquashfsCompressor::zstd, SquashfsCompressor::xz,
                 SquashfsCompressor::lz4}) {
    std::string name(squashfs_compressor_name(c));
    auto img = build(tmp.dir() / (name + ".sqfs"), {layer}, SquashfsOptions{c, 0, 2, nullptr});
    CHECK(extract(img.file, tmp.dir() / name) ==
          "a 100644 300000 " + sha256_of(std::string(300000, 'a')).hex().substr(0, 8) +
              " links=1\nb 100644 5000 " + sha256_of(random_bytes(5000, 1)).hex().substr(0, 8) +
              " links=1\n");
    if (test::have_tool("unsquashfs")) {
      CHECK(test::run_command("unsquashfs -s " + img.file.string() + " | grep '^Compression'") ==
            "Compression " + name + "\n");
      CHECK(test::run_command("unsquashfs -cat " + img.file.string() + " a | wc -c") == "300000\n");
    }
  }
  CHECK(squashfs_settings(SquashfsOptions{}).find("gzip libdeflate") != std::string::npos);
}

TEST_CASE("an image can start at an offset inside a file", "[squashfs]") {
  TempDirFixture tmp;
  Layer l;
  l.file("hello", "world\n");
  auto layer = l.save(tmp.dir() / "l.tar");
  fs::path out = tmp.dir() / "container";
  auto img = build(out, {layer}, SquashfsOptions{}, {}, 32768);
  CHECK(fs::file_size(out) == 32768 + static_cast<std::uintmax_t>(img.size));
  CHECK(extract(out, tmp.dir() / "x", 32768) == "hello 100644 6 e258d248 links=1\n");
  auto wrong = [&] {
    fs::create_directories(tmp.dir() / "y");
    UniqueFd fd(::open((tmp.dir() / "y").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    return extract_squashfs(out, 4096, fd.get(), false);
  }();
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message == out.string() + ": invalid squashfs image: superblock: no squashfs magic");
}

TEST_CASE("parents resolve through symlinks without leaving the root", "[squashfs]") {
  TempDirFixture tmp;
  Layer base;
  base.dir("usr")
      .dir("usr/lib")
      .symlink("lib", "/usr/lib")
      .symlink("up", "../../../..")
      .symlink("loop", "loop");
  Layer top;
  top.file("lib/a", "via an absolute symlink\n").file("up/etc/b", "clamped at the root\n");
  auto img = build(tmp.dir() / "i.sqfs", {base.save(tmp.dir() / "1.tar"), top.save(tmp.dir() / "2.tar")});
  CHECK(extract(img.file, tmp.dir() / "x") == "etc 40755\n"
                                              "etc/b 100644 20 " +
                                                  sha256_of("clamped at the root\n").hex().substr(0, 8) +
                                                  " links=1\n"
                                                  "lib 120777 -> /usr/lib\n"
                                                  "loop 120777 -> loop\n"
                                                  "up 120777 -> ../../../..\n"
                                                  "usr 40755\n"
                                                  "usr/lib 40755\n"
                                                  "usr/lib/a 100644 24 " +
                                                  sha256_of("via an absolute symlink\n").hex().substr(0, 8) +
                                                  " links=1\n");
  Layer loop;
  loop.file("loop/x", "never\n");
  auto r = try_build(tmp.dir() / "j.sqfs", {base.save(tmp.dir() / "3.tar"), loop.save(tmp.dir() / "4.tar")});
  REQUIRE_FALSE(r);
  CHECK(
      r.error().message ==
      "layer 2: member 'loop/x': can't open its parent directory 'loop': Too many levels of symbolic links");
}

TEST_CASE("hostile layers are refused with the member named", "[squashfs]") {
  TempDirFixture tmp;
  auto refused = [&](Layer& bad, const std::string& name) {
    Layer ok;
    ok.file("file", "x").dir("dir");
    auto r = try_build(tmp.dir() / (name + ".sqfs"),
                       {ok.save(tmp.dir() / (name + "-1.tar")), bad.save(tmp.dir() / (name + "-2.tar"))});
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  {
    Layer l;
    l.file("file/inside", "x");
    CHECK(refused(l, "under-file") ==
          "layer 2: member 'file/inside': can't open its parent directory 'file': Not a directory");
  }
  {
    Layer l;
    l.hardlink("h", "missing");
    CHECK(refused(l, "dangling") == "layer 2: member 'h' is a hard link to 'missing', which does not exist");
  }
  {
    Layer l;
    l.hardlink("h", "dir");
    CHECK(refused(l, "to-dir") == "layer 2: member 'h' is a hard link to 'dir', which is a directory");
  }
  {
    Layer l;
    l.whiteout("dir/.wh.");
    CHECK(refused(l, "empty-whiteout") == "layer 2: member 'dir/.wh.' is a whiteout with an empty name");
  }
  {
    Layer l;
    l.whiteout(".wh...");
    CHECK(refused(l, "dotdot-whiteout") == "layer 2: member '.wh...' is a whiteout of '..'");
  }
  {
    Layer l;
    l.symlink(".", "/etc");
    CHECK(refused(l, "root-link") == "layer 2: member '.' names the root directory but is a symbolic link; "
                                     "the root must stay a directory");
  }
  {
    // TarWriter refuses to write these names, so they are written as raw ustar headers.
    std::string hdr(512, '\0');
    std::string name = "../escape";
    std::memcpy(hdr.data(), name.data(), name.size());
    std::memcpy(hdr.data() + 100, "0000644", 7);
    std::memcpy(hdr.data() + 108, "0000000", 7);
    std::memcpy(hdr.data() + 116, "0000000", 7);
    std::memcpy(hdr.data() + 124, "00000000000", 11);
    std::memcpy(hdr.data() + 136, "00000000000", 11);
    hdr[156] = '0';
    std::memcpy(hdr.data() + 257,
                "ustar\0"
                "00",
                8);
    std::memset(hdr.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (char c : hdr) {
      sum += static_cast<unsigned char>(c);
    }
    std::string chk = fmt::format("{:06o}", sum);
    std::memcpy(hdr.data() + 148, chk.data(), 6);
    hdr[154] = '\0';
    fs::path f = tmp.write("escape.tar", hdr + std::string(1024, '\0'));
    auto r = try_build(tmp.dir() / "escape.sqfs", {f});
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "layer 1: member '../escape' escapes the root with '..'");
  }
}

TEST_CASE("files deleted by an upper layer leave no data behind", "[squashfs]") {
  TempDirFixture tmp;
  std::string big = random_bytes(2000000, 9);
  Layer base;
  base.file("big", big).file("keep", "kept\n").dir("tree").file("tree/big2", big + "x");
  Layer top;
  top.whiteout(".wh.big").file("tree", "a file replaces the directory\n");
  auto img = build(tmp.dir() / "i.sqfs", {base.save(tmp.dir() / "1.tar"), top.save(tmp.dir() / "2.tar")});
  CHECK(img.size < 100000); // without the second pass the dead 4 MB would still be there
  CHECK(extract(img.file, tmp.dir() / "x") ==
        "keep 100644 5 " + sha256_of("kept\n").hex().substr(0, 8) + " links=1\ntree 100644 30 " +
            sha256_of("a file replaces the directory\n").hex().substr(0, 8) + " links=1\n");
  // The same final tree from one layer gives the same bytes.
  Layer flat;
  flat.file("keep", "kept\n").file("tree", "a file replaces the directory\n");
  auto direct = build(tmp.dir() / "d.sqfs", {flat.save(tmp.dir() / "flat.tar")});
  CHECK(slurp(direct.file) == slurp(img.file));
}

TEST_CASE("extra entries replace layer content and create their parents", "[squashfs]") {
  TempDirFixture tmp;
  Layer l;
  l.file("etc/motd", "from the layer\n").dir("tmp", 01777);
  std::vector<SquashfsEntry> extra = {
      {"/etc/motd", SquashfsEntry::Type::file, 0600, 0, 0, "replaced\n"},
      {"/.singularity.d/env/90-environment.sh", SquashfsEntry::Type::file, 0755, 0, 0, "#!/bin/sh\n"},
      {"/singularity", SquashfsEntry::Type::symlink, 0777, 0, 0, ".singularity.d/runscript"},
  };
  auto img = build(tmp.dir() / "i.sqfs", {l.save(tmp.dir() / "l.tar")}, SquashfsOptions{}, extra);
  CHECK(extract(img.file, tmp.dir() / "x") == ".singularity.d 40755\n"
                                              ".singularity.d/env 40755\n"
                                              ".singularity.d/env/90-environment.sh 100755 10 " +
                                                  sha256_of("#!/bin/sh\n").hex().substr(0, 8) +
                                                  " links=1\n"
                                                  "etc 40755\n"
                                                  "etc/motd 100600 9 " +
                                                  sha256_of("replaced\n").hex().substr(0, 8) +
                                                  " links=1\n"
                                                  "singularity 120777 -> .singularity.d/runscript\n"
                                                  "tmp 41777\n");
}

TEST_CASE("extraction drops setuid and skips devices unless ownership is kept", "[squashfs]") {
  TempDirFixture tmp;
  Layer l;
  l.file("suid", "x", 04755, 1000).device("null").dir("ro", 0555).file("ro/inner", "y");
  auto img = build(tmp.dir() / "i.sqfs", {l.save(tmp.dir() / "l.tar")});
  CHECK(extract(img.file, tmp.dir() / "user") ==
        "ro 40555\nro/inner 100644 1 a1fce436 links=1\nsuid 100755 1 2d711642 links=1\n");
  if (::geteuid() == 0) {
    extract(img.file, tmp.dir() / "root", 0, true);
    struct stat st {};
    REQUIRE(::stat((tmp.dir() / "root" / "suid").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 04755);
    CHECK(st.st_uid == 1000);
    CHECK_FALSE(fs::exists(tmp.dir() / "root" / "null"));
  }
}
TEST_CASE("plain, gzip (one member or many) and zstd layers give the same image", "[squashfs]") {
  TempDirFixture tmp;
  Layer l;
  l.dir("d");
  for (int i = 0; i < 6; ++i) {
    l.file(fmt::format("d/{}", i), random_bytes(1500000, static_cast<unsigned>(i)));
  }
  std::string reference;
  int n = 0;
  for (auto format :
       {Layer::Format::tar, Layer::Format::gzip_members, Layer::Format::gzip_single, Layer::Format::zstd}) {
    auto layer = l.save_as(tmp.dir() / fmt::format("l{}", n), format);
    auto img = build(tmp.dir() / fmt::format("i{}.sqfs", n++), {layer});
    if (reference.empty()) {
      reference = slurp(img.file);
    } else {
      CHECK(slurp(img.file) == reference);
    }
  }
}
TEST_CASE("file capabilities survive, other extended attributes don't", "[squashfs]") {
  TempDirFixture tmp;
  test::StringSink sink;
  TarWriter tar(sink);
  // cap_net_raw+ep, as `setcap cap_net_raw+ep` stores it (VFS_CAP_REVISION_2).
  const std::string cap("\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
                        20);
  TarEntry e;
  e.path = "ping";
  e.mode = 0755;
  e.size = 4;
  e.xattrs = {{"security.capability", cap}, {"user.comment", "dropped"}};
  tar.add(e);
  tar.write_data("ping", 4);
  e.path = "plain";
  e.xattrs = {{"user.comment", "dropped"}};
  tar.add(e);
  tar.write_data("data", 4);
  tar.finish();
  fs::path layer = tmp.write("l.tar", sink.out);
  auto img = build(tmp.dir() / "i.sqfs", {layer});
  if (test::have_tool("rdsquashfs")) {
    CHECK(test::run_command("rdsquashfs -x /ping " + img.file.string()) ==
          "security.capability=0x0100000200200000000000000000000000000000\n");
    CHECK(test::run_command("rdsquashfs -x /plain " + img.file.string()).empty());
  }
  if (::geteuid() == 0 && test::have_tool("unsquashfs") && test::have_tool("getcap")) {
    test::run_command("unsquashfs -no-progress -d " + (tmp.dir() / "x").string() + " " + img.file.string() +
                      " >/dev/null");
    CHECK(test::run_command("getcap " + (tmp.dir() / "x" / "ping").string()) ==
          (tmp.dir() / "x" / "ping").string() + " cap_net_raw=ep\n");
  }
}
TEST_CASE("extract_squashfs refuses damaged images without harm", "[squashfs]") {
  TempDirFixture tmp;
  Layer l;
  l.dir("a").dir("a/b").file("a/b/f", random_bytes(20000, 3)).symlink("a/l", "../../../etc").file("g", "x");
  l.hardlink("a/h", "g");
  auto img = build(tmp.dir() / "i.sqfs", {l.save(tmp.dir() / "l.tar")});
  const std::string good = slurp(img.file);
  int n = 0;
  auto attempt = [&](const std::string& bytes) {
    fs::path f = tmp.write("bad.sqfs", bytes);
    fs::path dest = tmp.dir() / fmt::format("out{}", n++);
    fs::create_directories(dest);
    UniqueFd fd(::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    auto r = extract_squashfs(f, 0, fd.get(), false);
    fs::remove_all(dest);
    return r;
  };
  auto truncated = attempt(good.substr(0, good.size() / 2));
  REQUIRE_FALSE(truncated);
  CHECK(truncated.error().code == ExitCode::invalid_input);
  CHECK(truncated.error().message ==
        (tmp.dir() / "bad.sqfs").string() + ": invalid squashfs image: superblock: the image is truncated");
  // Every byte of the superblock and the tables flipped in turn: an error or a harmless result,
  // never a crash or a write outside the destination (ASan and the escape check below).
  std::uint64_t inode_table = 0;
  std::memcpy(&inode_table, good.data() + 64, sizeof(inode_table));
  std::vector<std::size_t> offsets;
  for (std::size_t at = 0; at < 96; ++at) {
    offsets.push_back(at);
  }
  for (auto at = static_cast<std::size_t>(inode_table); at < good.size(); ++at) {
    offsets.push_back(at);
  }
  int failures = 0;
  for (std::size_t at : offsets) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x5A);
    failures += attempt(bad) ? 0 : 1;
  }
  CHECK(failures > 0);
  CHECK_FALSE(fs::exists(tmp.dir().parent_path() / "etc" / "f"));
  for (const auto& e : fs::directory_iterator(tmp.dir())) {
    CHECK(e.path().filename().string().rfind("out", 0) != 0); // every destination was removed again
  }
}
} // namespace lockstep
