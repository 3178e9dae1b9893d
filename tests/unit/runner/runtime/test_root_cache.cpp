#include "runner/runtime/root_cache.hpp"
#include "support/base/version.hpp"
#include "support/oci/image_source.hpp"
#include "tests/unit/support/test_image_fixture.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;
using test::TarEntry;

namespace {

std::string tar_bytes(const test::TempDirFixture& tmp, const std::vector<TarEntry>& entries) {
  fs::path p = tmp.dir() / "layer.tar";
  test::write_tar(p, entries);
  std::string bytes = test::slurp(p);
  fs::remove(p);
  return bytes;
}

// Two layers: the second deletes etc/motd (a whiteout) and adds bin/tool.
struct CacheFixture {
  test::TempDirFixture tmp;
  BlobStore store = BlobStore::open(tmp.dir() / "cache").value();
  std::vector<std::string> layer_tars;
  std::vector<oci::Descriptor> layers;
  std::vector<Digest> diff_ids;

  CacheFixture() {
    layer_tars.push_back(tar_bytes(
        tmp, {{"etc/", "", TarEntry::Type::directory}, {"etc/motd", "hello\n"}, {"etc/hostname", "box\n"}}));
    layer_tars.push_back(tar_bytes(tmp, {{"etc/.wh.motd", ""}, {"bin/tool", "#!/bin/sh\n"}}));
    for (const auto& t : layer_tars) {
      auto info = store.put(t);
      REQUIRE(info);
      oci::Descriptor d;
      d.media_type = std::string(oci::k_media_layer_tar);
      d.digest = info->digest;
      d.size = info->size;
      layers.push_back(d);
      diff_ids.push_back(sha256_of(t));
    }
  }

  [[nodiscard]] fs::path roots() const { return store.root() / "roots"; }
  [[nodiscard]] std::vector<std::string> tmp_entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(roots() / "tmp")) {
      out.push_back(e.path().filename().string());
    }
    return out;
  }
};

} // namespace

TEST_CASE("the ChainID follows the OCI definition", "[root_cache]") {
  Digest a = sha256_of("a");
  Digest b = sha256_of("b");
  Digest c = sha256_of("c");
  CHECK(chain_id_of({a}) == a);
  CHECK(chain_id_of({a, b}) == sha256_of(a.str() + " " + b.str()));
  CHECK(chain_id_of({a, b, c}) == sha256_of(sha256_of(a.str() + " " + b.str()).str() + " " + c.str()));
  CHECK(chain_id_of({}) == sha256_of(""));
}

TEST_CASE("a root is unpacked once and shared by the next call", "[root_cache]") {
  CacheFixture f;
  auto first = unpacked_root(f.store, f.layers, f.diff_ids, {});
  REQUIRE(first);
  CHECK_FALSE(first->cached);
  Digest chain = chain_id_of(f.diff_ids);
  CHECK(first->chain_id == chain);
  fs::path dir = f.roots() / (chain.hex() + "-caller-v2");
  CHECK(first->rootfs == dir / "rootfs");
  CHECK(test::slurp(first->rootfs / "etc" / "hostname") == "box\n");
  CHECK(test::slurp(first->rootfs / "bin" / "tool") == "#!/bin/sh\n");
  CHECK_FALSE(fs::exists(first->rootfs / "etc" / "motd"));
  CHECK_FALSE(fs::exists(first->rootfs / "etc" / ".wh.motd"));
  struct stat st {};
  REQUIRE(::stat(first->rootfs.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
  REQUIRE(::stat(f.roots().c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);

  auto info = oci::parse_json(test::slurp(dir / "info.json"), "info.json");
  REQUIRE(info);
  CHECK((*info)["chain_id"] == chain.str());
  CHECK((*info)["diff_ids"] == oci::json({f.diff_ids[0].str(), f.diff_ids[1].str()}));
  CHECK((*info)["layers"] == oci::json({f.layers[0].digest.str(), f.layers[1].digest.str()}));
  CHECK((*info)["ownership"] == "caller");
  CHECK((*info)["lockstep_version"] == k_version);

  auto second = unpacked_root(f.store, f.layers, f.diff_ids, {});
  REQUIRE(second);
  CHECK(second->cached);
  CHECK(second->rootfs == first->rootfs);
  CHECK(f.tmp_entries().empty());

  SECTION("the ownership policy is part of the key") {
    if (::geteuid() == 0) {
      UnpackOptions keep;
      keep.ownership = UnpackOptions::Ownership::keep;
      auto kept = unpacked_root(f.store, f.layers, f.diff_ids, keep);
      REQUIRE(kept);
      CHECK_FALSE(kept->cached);
      CHECK(kept->rootfs == f.roots() / (chain.hex() + "-keep-v2") / "rootfs");
    }
  }
  SECTION("a prefix of the layers is another root") {
    auto base = unpacked_root(f.store, {f.layers[0]}, {f.diff_ids[0]}, {});
    REQUIRE(base);
    CHECK_FALSE(base->cached);
    CHECK(test::slurp(base->rootfs / "etc" / "motd") == "hello\n");
  }
}

TEST_CASE(
    "an image's layers together are held to the unpack bound; a layer repeated in a row is applied once",
    "[root_cache]") {
  CacheFixture f;
  const std::uint64_t biggest = std::max(f.layer_tars[0].size(), f.layer_tars[1].size());
  UnpackOptions tight;
  tight.max_bytes = biggest + 100; // each layer alone fits, the two together don't
  REQUIRE(unpacked_root(f.store, {f.layers[0]}, {f.diff_ids[0]}, tight));
  REQUIRE(unpacked_root(f.store, {f.layers[1]}, {f.diff_ids[1]}, tight));
  auto both = unpacked_root(f.store, f.layers, f.diff_ids, tight);
  REQUIRE_FALSE(both);
  CHECK(both.error().code == ExitCode::invalid_input);
  CHECK_THAT(both.error().message, Catch::Contains("for all its layers"));
  CHECK(f.tmp_entries().empty());

  // The first layer 200 times: applied once, within the bound that holds one copy.
  std::vector<oci::Descriptor> repeated(200, f.layers[0]);
  std::vector<Digest> repeated_ids(200, f.diff_ids[0]);
  repeated.push_back(f.layers[1]);
  repeated_ids.push_back(f.diff_ids[1]);
  UnpackOptions roomy;
  roomy.max_bytes = 3 * biggest;
  auto root = unpacked_root(f.store, repeated, repeated_ids, roomy);
  REQUIRE(root);
  CHECK(test::slurp(root->rootfs / "etc" / "hostname") == "box\n");
  CHECK_FALSE(fs::exists(root->rootfs / "etc" / "motd"));

  std::vector<oci::Descriptor> too_many(oci::k_max_layers + 1, f.layers[0]);
  std::vector<Digest> too_many_ids(oci::k_max_layers + 1, f.diff_ids[0]);
  auto refused = unpacked_root(f.store, too_many, too_many_ids, {});
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("more than the 1000"));
}

TEST_CASE("a root finished from layers unpacked in the background is the same root", "[root_cache]") {
  CacheFixture f;
  auto head = start_root(f.store, {f.layers[0]}, {f.diff_ids[0]}, {});
  REQUIRE(head);
  CHECK(f.tmp_entries().size() == 1); // the head's build directory
  auto root = unpacked_root(f.store, f.layers, f.diff_ids, {}, &*head);
  REQUIRE(root);
  CHECK_FALSE(root->cached);
  CHECK(root->rootfs == f.roots() / (chain_id_of(f.diff_ids).hex() + "-caller-v2") / "rootfs");
  CHECK(test::slurp(root->rootfs / "etc" / "hostname") == "box\n");
  CHECK(test::slurp(root->rootfs / "bin" / "tool") == "#!/bin/sh\n");
  CHECK_FALSE(fs::exists(root->rootfs / "etc" / "motd")); // the second layer's whiteout applied over it
  auto info = oci::parse_json(test::slurp(root->rootfs.parent_path() / "info.json"), "info.json");
  REQUIRE(info);
  CHECK((*info)["layers"] == oci::json({f.layers[0].digest.str(), f.layers[1].digest.str()}));
  *head = RootHead(); // taken: dropping it removes nothing
  CHECK(fs::exists(root->rootfs / "bin" / "tool"));
  CHECK(f.tmp_entries().empty());
}

TEST_CASE("a background head that doesn't begin the root is dropped, its directory removed", "[root_cache]") {
  CacheFixture f;
  {
    auto head = start_root(f.store, {f.layers[1]}, {f.diff_ids[1]}, {});
    REQUIRE(head);
    auto root = unpacked_root(f.store, f.layers, f.diff_ids, {}, &*head);
    REQUIRE(root);
    CHECK(test::slurp(root->rootfs / "etc" / "hostname") == "box\n");
    CHECK(fs::exists(root->rootfs / "bin" / "tool"));
  }
  CHECK(f.tmp_entries().empty());
  // A root published already: the head is not needed and goes away with its directory.
  {
    auto head = start_root(f.store, {f.layers[0]}, {f.diff_ids[0]}, {});
    REQUIRE(head);
    auto root = unpacked_root(f.store, f.layers, f.diff_ids, {}, &*head);
    REQUIRE(root);
    CHECK(root->cached);
  }
  CHECK(f.tmp_entries().empty());
}

TEST_CASE("a corrupt blob is an error, leaves no root published and is removed from the store",
          "[root_cache]") {
  CacheFixture f;
  fs::path blob = f.store.blob_path(f.layers[1].digest);
  fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
  std::string bad = f.layer_tars[1];
  bad[600] = 'X'; // inside bin/tool's data
  f.tmp.write(fs::relative(blob, f.tmp.dir()).string(), bad);
  auto r = unpacked_root(f.store, f.layers, f.diff_ids, {});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message ==
        fmt::format("layer {}: digest mismatch: the blob hashes to {} (the image is corrupt); the "
                    "corrupt blob was removed from the store, run the command again to fetch it",
                    f.layers[1].digest.str(), sha256_of(bad).str()));
  CHECK_FALSE(f.store.has(f.layers[1].digest));
  std::vector<std::string> roots;
  for (const auto& e : fs::directory_iterator(f.roots())) {
    roots.push_back(e.path().filename().string());
  }
  std::sort(roots.begin(), roots.end());
  CHECK(roots == std::vector<std::string>{chain_id_of(f.diff_ids).hex() + "-caller-v2.lock", "tmp"});
  CHECK(f.tmp_entries().empty());

  auto missing = unpacked_root(f.store, f.layers, f.diff_ids, {});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message ==
        fmt::format("layer {} is not in the blob store at {}; fetch the image's layers first",
                    f.layers[1].digest.str(), f.store.root().string()));
}

TEST_CASE("concurrent callers get one root", "[root_cache]") {
  CacheFixture f;
  std::vector<Result<UnpackedRoot>> results(4, Error{});
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = unpacked_root(f.store, f.layers, f.diff_ids, {}); });
  }
  for (auto& t : threads) {
    t.join();
  }
  int built = 0;
  for (const auto& r : results) {
    REQUIRE(r);
    CHECK(r->rootfs == results[0]->rootfs);
    built += r->cached ? 0 : 1;
  }
  CHECK(built == 1);
  CHECK(f.tmp_entries().empty());
  CHECK(test::slurp(results[0]->rootfs / "bin" / "tool") == "#!/bin/sh\n");
}

TEST_CASE("an unpublished directory in the way of a root is replaced", "[root_cache]") {
  CacheFixture f;
  fs::path dir = f.roots() / (chain_id_of(f.diff_ids).hex() + "-caller-v2");
  fs::create_directories(dir / "rootfs" / "junk");
  auto r = unpacked_root(f.store, f.layers, f.diff_ids, {});
  REQUIRE(r);
  CHECK_FALSE(r->cached);
  CHECK_FALSE(fs::exists(r->rootfs / "junk"));
  CHECK(fs::exists(dir / "info.json"));
}

TEST_CASE("builds a killed process left behind are swept after a day", "[root_cache]") {
  CacheFixture f;
  fs::create_directories(f.roots() / "tmp" / "old-build" / "rootfs" / "ro");
  fs::create_directories(f.roots() / "tmp" / "recent-build");
  ::chmod((f.roots() / "tmp" / "old-build" / "rootfs" / "ro").c_str(), 0555);
  fs::last_write_time(f.roots() / "tmp" / "old-build",
                      fs::file_time_type::clock::now() - std::chrono::hours(25));
  REQUIRE(unpacked_root(f.store, f.layers, f.diff_ids, {}));
  CHECK(f.tmp_entries() == std::vector<std::string>{"recent-build"});
}

TEST_CASE("unpack_image fetches layers and shares roots between images differing only in config",
          "[root_cache]") {
  test::TempDirFixture tmp;
  test::LayoutWriter layout(tmp.dir() / "layout");
  std::string tar = tar_bytes(tmp, {{"hello", "world"}});
  oci::Descriptor a = test::LayoutWriter::tagged(layout.image({tar}), "a");
  test::ImageOptions other;
  other.edit_config = [](oci::json& c) { c["config"]["Env"] = {"PATH=/bin", "X=1"}; };
  oci::Descriptor b = test::LayoutWriter::tagged(layout.image({tar}, other), "b");
  layout.write_index({a, b});
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  auto source =
      oci::ImageSource::open(oci::ImageRef{oci::ImageRef::Transport::oci_dir, layout.dir(), "", {}});
  REQUIRE(source);
  oci::SelectOptions sel;
  sel.tag = "a";
  auto image_a = (*source)->resolve(sel);
  REQUIRE(image_a);
  sel.tag = "b";
  auto image_b = (*source)->resolve(sel);
  REQUIRE(image_b);
  CHECK(image_a->manifest_digest != image_b->manifest_digest);

  auto ra = unpack_image(*store, **source, *image_a, {});
  REQUIRE(ra);
  CHECK_FALSE(ra->cached);
  CHECK(test::slurp(ra->rootfs / "hello") == "world");
  auto rb = unpack_image(*store, **source, *image_b, {});
  REQUIRE(rb);
  CHECK(rb->cached);
  CHECK(rb->rootfs == ra->rootfs);
}

namespace {

int sh(const std::string& cmd) {
  int rc = std::system(("set -e; " + cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// type, mode, owner, size, content and symlink target, mtime of `root` and every path under it, sorted.
std::vector<std::string> tree_listing(const fs::path& root) {
  std::vector<fs::path> paths{root};
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    paths.push_back(it->path());
  }
  std::vector<std::string> out;
  for (const auto& p : paths) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    std::string rel = p.lexically_relative(root).string();
    std::string what;
    if (S_ISLNK(st.st_mode)) {
      what = "-> " + fs::read_symlink(p).string();
    } else if (S_ISREG(st.st_mode)) {
      what = fmt::format("{} {} nlink={}", st.st_size, sha256_of(test::slurp(p)).hex().substr(0, 12),
                         st.st_nlink);
    }
    out.push_back(fmt::format("{} {:o} {}:{} mtime={} {}", rel, st.st_mode, st.st_uid, st.st_gid,
                              st.st_mtim.tv_sec, what));
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

TEST_CASE("a two-layer image made by umoci unpacks as 'umoci raw unpack' does", "[root_cache][peers]") {
  if (::geteuid() != 0) {
    WARN("not root: the umoci comparison (ownership keep) is not run");
    return;
  }
  if (sh("command -v umoci") != 0) {
    if (std::getenv("CI") != nullptr) {
      FAIL("umoci is not installed (scripts/install-deps.sh installs it)");
    }
    WARN("umoci is not installed: the peer comparison is skipped");
    return;
  }
  test::TempDirFixture tmp;
  std::string d = tmp.dir().string();
  // Layer 1 (umoci insert): files, a setuid binary, a symlink, a hard link, another owner.
  // Layer 2 (umoci repack): a deleted file and a deleted directory (whiteouts), a new file.
  REQUIRE(
      sh(fmt::format(
          "cd {0}; mkdir -p src/etc src/usr/bin src/data/sub; echo hello >src/etc/hostname;"
          "echo bin >src/usr/bin/tool; chmod 4755 src/usr/bin/tool; ln -s ../usr/bin/tool src/etc/toollink;"
          "ln src/usr/bin/tool src/usr/bin/tool2; echo a >src/data/a; echo b >src/data/sub/b;"
          "chown 1234:5678 src/data/a; chmod 0700 src/data/sub; n=1000;"
          "for p in $(find src | sort -r); do n=$((n+1000)); touch -h -d @$n $p; done;"
          "umoci init --layout L; umoci new --image L:t; umoci insert --image L:t src /;"
          "umoci unpack --image L:t b; rm b/rootfs/etc/hostname; rm -r b/rootfs/data/sub;"
          "echo new >b/rootfs/data/new; umoci repack --image L:t b; umoci raw unpack --image L:t theirs",
          d)) == 0);
  auto source =
      oci::ImageSource::open(oci::ImageRef{oci::ImageRef::Transport::oci_dir, tmp.dir() / "L", "t", {}});
  REQUIRE(source);
  auto image = (*source)->resolve({});
  REQUIRE(image);
  REQUIRE(image->manifest.layers.size() == 2);
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  UnpackOptions keep;
  keep.ownership = UnpackOptions::Ownership::keep;
  auto ours = unpack_image(*store, **source, *image, keep);
  REQUIRE(ours);
  auto listing = tree_listing(ours->rootfs);
  CHECK(listing == tree_listing(tmp.dir() / "theirs"));
  CHECK(std::any_of(listing.begin(), listing.end(),
                    [](const std::string& l) { return l.starts_with("data/new "); }));
  CHECK(std::none_of(listing.begin(), listing.end(),
                     [](const std::string& l) { return l.starts_with("data/sub"); }));
}
