// The differential layer test: every layer sequence goes through the three consumers of layers,
// and they must give the same tree, or all refuse it (with the same message when a member is
// refused). The three trees:
//  - the unpacked root (runner/runtime/unpack, what `lockstep exec` runs in), walked on disk;
//  - the squashfs the SIF writer makes (support/oci/squashfs), extracted by `unsquashfs`;
//  - the image_contents listing (runner/audit/image_contents, what verify and diff check).
// The cases: the hostile-layer table, layer-semantics cases (whiteouts, opaque directories, aufs
// metadata, hard links, replacements, symbolic links) and every seed of the unpack fuzz corpus.
#include "runner/audit/image_contents.hpp"
#include "runner/runtime/unpack.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/squashfs.hpp"
#include "support/system/fs.hpp"
#include "tests/unit/test_layers.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace lockstep;
using namespace lockstep::test;
namespace fs = std::filesystem;

namespace {

// A tree as a listing: path -> "dir", "file SIZE SHA256", "link TARGET" or "fifo".
using Listing = std::map<std::string, std::string>;

struct Outcome {
  bool ok = true;
  std::string error;
  Listing tree;
};

std::string describe(const Outcome& o) {
  if (!o.ok) {
    return "refused: " + o.error;
  }
  std::string out;
  for (const auto& [path, what] : o.tree) {
    out += "  " + path + ": " + what + "\n";
  }
  return out;
}

Listing list_directory(const fs::path& root) {
  Listing out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = it->path().lexically_relative(root).string();
    struct stat st {};
    REQUIRE(::lstat(it->path().c_str(), &st) == 0);
    if (S_ISDIR(st.st_mode)) {
      out[rel] = "dir";
    } else if (S_ISLNK(st.st_mode)) {
      out[rel] = "link " + fs::read_symlink(it->path()).string();
    } else if (S_ISREG(st.st_mode)) {
      auto digest = sha256_of_file(it->path());
      REQUIRE(digest);
      out[rel] = "file " + std::to_string(st.st_size) + " " + digest->hex();
    } else {
      out[rel] = "fifo";
    }
  }
  return out;
}

fs::path write_layer(const fs::path& dir, std::size_t i, const std::string& tar) {
  fs::path p = dir / ("layer" + std::to_string(i) + ".tar");
  std::ofstream(p, std::ios::binary) << tar;
  return p;
}

Outcome unpacked(const fs::path& work, const std::vector<std::string>& layers) {
  Outcome o;
  const fs::path root = work / "unpacked";
  fs::create_directories(root);
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(fd.valid());
  runner::UnpackOptions options;
  options.ownership = runner::UnpackOptions::Ownership::caller;
  for (const std::string& tar : layers) {
    auto r = runner::apply_tar_bytes(fd.get(), tar, options);
    if (!r) {
      return {false, r.error().message, {}};
    }
  }
  o.tree = list_directory(root);
  return o;
}

Outcome in_sif(const fs::path& work, const std::vector<std::string>& layers) {
  const fs::path image = work / "image.squashfs";
  UniqueFd fd(::open(image.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  REQUIRE(fd.valid());
  auto writer = SquashfsWriter::create(fd.get(), 0, SquashfsOptions{}, image.string());
  REQUIRE(writer);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto r = writer->add_layer(write_layer(work, i, layers[i]), "layer");
    if (!r) {
      return {false, r.error().message, {}};
    }
  }
  REQUIRE(writer->finish());
  fd.reset();
  // The peer tool reads the image back: what a mounted SIF shows.
  const fs::path out = work / "sif-root";
  test::run_command("unsquashfs -no-progress -no-xattrs -d '" + out.string() + "' '" + image.string() +
                    "' >/dev/null");
  Outcome o;
  o.tree = list_directory(out);
  return o;
}

Outcome listed(const fs::path& work, const std::vector<std::string>& layers) {
  runner::ImageContents contents;
  runner::ContentsOptions options;
  options.sha256_all = true; // the trees are compared by every file's SHA-256
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto r = runner::apply_layer_to_contents(contents, write_layer(work, i, layers[i]), "layer", options);
    if (!r) {
      return {false, r.error().message, {}};
    }
  }
  Outcome o;
  for (const auto& [path, e] : contents.entries()) {
    switch (e.type) {
    case runner::ImageEntry::Type::directory:
      o.tree[path] = "dir";
      break;
    case runner::ImageEntry::Type::symlink:
      o.tree[path] = "link " + e.link_target;
      break;
    case runner::ImageEntry::Type::file:
      o.tree[path] =
          "file " + std::to_string(e.size) + " " + runner::hex_of(e.sha256.data(), e.sha256.size());
      break;
    case runner::ImageEntry::Type::other:
      o.tree[path] = "fifo";
      break;
    }
  }
  return o;
}

// Runs `layers` through the three consumers and checks that they agree. Returns the unpacked outcome.
Outcome agree(const std::vector<std::string>& layers) {
  test::TempDirFixture tmp;
  const Outcome disk = unpacked(tmp.dir(), layers);
  const Outcome sif = in_sif(tmp.dir(), layers);
  const Outcome contents = listed(tmp.dir(), layers);
  INFO("unpacked:\n"
       << describe(disk) << "SIF (unsquashfs):\n"
       << describe(sif) << "image_contents:\n"
       << describe(contents));
  CHECK(sif.ok == disk.ok);
  CHECK(contents.ok == disk.ok);
  if (disk.ok && sif.ok && contents.ok) {
    CHECK(sif.tree == disk.tree);
    CHECK(contents.tree == disk.tree);
  } else if (disk.error.find(": member '") != std::string::npos &&
             disk.error.find(" declares ") == std::string::npos &&
             disk.error.find(" can't be read") == std::string::npos) {
    // A member refused by the layer model: the same located message everywhere. (A broken tar
    // stream, or member data cut short, is refused by each reader in libarchive's words for its
    // reading mode.)
    CHECK(sif.error == disk.error);
    CHECK(contents.error == disk.error);
  }
  return disk;
}

std::vector<std::string> tars(const std::vector<std::vector<Member>>& layers) {
  std::vector<std::string> out;
  for (const auto& l : layers) {
    out.push_back(make_tar(l));
  }
  return out;
}

struct SemanticCase {
  std::string title;
  std::vector<std::vector<Member>> layers;
};

} // namespace

TEST_CASE("the hostile-layer table: unpack, the SIF and image_contents refuse alike", "[layers]") {
  REQUIRE(test::have_tool("unsquashfs"));
  for (const auto& c : hostile_layer_cases()) {
    DYNAMIC_SECTION(c.title) {
      Outcome disk = agree({make_tar(c.members)});
      CHECK_FALSE(disk.ok);
      CHECK(disk.error == c.error);
    }
  }
}

TEST_CASE("layer semantics: unpack, the SIF and image_contents give the same tree", "[layers]") {
  REQUIRE(test::have_tool("unsquashfs"));
  const std::vector<Member> lower = {dir("a/"),
                                     file("a/x", "x"),
                                     file("a/y", "y"),
                                     file("b", "b"),
                                     dir("c/"),
                                     file("c/z", "z"),
                                     dir("c/sub/"),
                                     file("c/sub/l", "l"),
                                     file("keep", "k"),
                                     symlink_to("link", "/nowhere"),
                                     symlink_to("s", "/a")};
  const std::vector<SemanticCase> cases = {
      {"explicit whiteouts",
       {lower, {file("a/.wh.x", ""), file(".wh.c", ""), file(".wh.link", ""), file(".wh.no", "")}}},
      {"a whiteout before a new entry of the same name",
       {lower, {file(".wh.b", ""), dir("b/"), file("b/new", "n")}}},
      {"a whiteout after an entry of the same layer", {lower, {file("b", "new"), file(".wh.b", "")}}},
      {"a whiteout of a directory this layer wrote into", {lower, {file("c/new", "n"), file(".wh.c", "")}}},
      {"a whiteout after a directory member of the same name",
       {lower, {dir("c/"), file(".wh.c", ""), file("c/n", "n")}}},
      {"a whiteout below, then of the directory", {lower, {file("a/.wh.x", ""), file(".wh.a", "")}}},
      {"opaque directories wherever the marker is",
       {lower,
        {dir("c/"), file("c/new", "n"), dir("c/sub/"), file("c/sub/mine", "m"), file("c/.wh..wh..opq", ""),
         dir("a/"), file("a/.wh..wh..opq", "")}}},
      {"a whiteout through a symlinked directory", {lower, {file("s/.wh.y", "")}}},
      {"a whiteout whose parent is a file or missing",
       {lower, {file("b/.wh.x", ""), file("none/.wh.x", "")}}},
      {"aufs metadata is ignored, below it too",
       {lower, {dir(".wh..wh.plnk/"), file(".wh..wh.plnk/1.2", "x"), file(".wh..wh.aufs", "")}}},
      {"device nodes are not image content",
       {lower, {special("b", AE_IFCHR), special("dev/null", AE_IFCHR), special("a/blk", AE_IFBLK)}}},
      {"FIFOs are", {{special("fifo", AE_IFIFO)}}},
      {"replacements: directory by file, file by directory, symlink by directory",
       {lower, {file("c", "now a file"), dir("b/"), file("b/in", "i"), dir("link/")}}},
      {"writes through a symlink land inside the root",
       {lower, {file("s/new", "n"), dir("s/d/"), file("s/d/f", "f")}}},
      {"implied parents", {{file("p/q/r/file", "deep")}}},
      {"hard links: to a lower file, a symlink, through a symlinked parent, and repeated",
       {lower,
        {hardlink_to("h1", "a/x"), hardlink_to("h2", "link"), hardlink_to("h3", "s/y"), file("f", "f"),
         hardlink_to("f2", "f"), hardlink_to("f2", "f")}}},
      {"a hard link whose target is whited out later in the layer",
       {lower, {hardlink_to("h", "a/x"), file("a/.wh.x", "")}}},
      {"the root entry and duplicates", {{dir("./"), file("d", "1"), file("d", "2"), dir("e/"), dir("e/")}}},
      {"three layers",
       {lower,
        {file(".wh.a", ""), dir("a/"), file("a/n", "n")},
        {file("a/.wh..wh..opq", ""), file("a/m", "m")}}},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.title) {
      Outcome disk = agree(tars(c.layers));
      CHECK(disk.ok);
    }
  }
}

TEST_CASE("the unpack fuzz corpus: unpack, the SIF and image_contents agree on every seed", "[layers]") {
  REQUIRE(test::have_tool("unsquashfs"));
  const fs::path corpus = test::source_dir() / "tests/fuzz/corpus/unpack";
  std::vector<fs::path> seeds;
  for (const auto& e : fs::directory_iterator(corpus)) {
    seeds.push_back(e.path());
  }
  std::sort(seeds.begin(), seeds.end());
  REQUIRE(seeds.size() >= 10);
  for (const fs::path& seed : seeds) {
    DYNAMIC_SECTION(seed.filename().string()) {
      agree({test::slurp(seed)});
    }
  }
}
