// Reading an image's final filesystem in memory (runner/audit/image_contents) and checking it against
// dpkg's and pip's records and a lock (runner/audit/verify).
#include "runner/audit/image_contents.hpp"
#include "runner/audit/verify.hpp"
#include "support/system/fs.hpp"
#include "tests/unit/support/test_image_fixture.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;
using test::TarEntry;
using Type = TarEntry::Type;

namespace {

/// Points $LOCKSTEP_CACHE somewhere for one scope, restoring the previous value.
class ScopedCache {
public:
  explicit ScopedCache(const fs::path& dir) {
    if (const char* old = std::getenv("LOCKSTEP_CACHE"); old != nullptr) {
      m_old = old;
    }
    ::setenv("LOCKSTEP_CACHE", dir.c_str(), 1);
  }
  ~ScopedCache() {
    if (m_old) {
      ::setenv("LOCKSTEP_CACHE", m_old->c_str(), 1);
    } else {
      ::unsetenv("LOCKSTEP_CACHE");
    }
  }
  ScopedCache(const ScopedCache&) = delete;
  ScopedCache& operator=(const ScopedCache&) = delete;

private:
  std::optional<std::string> m_old;
};

const std::string k_md5_of_a = "7fc56270e7a70fa81a5935b72eacbe29"; // md5sum of "A"

class ContentsFixture : public test::TempDirFixture {
public:
  /// Applies `entries` as layer `n` of `contents`; returns the error message, "" on success.
  std::string apply(ImageContents& contents, const std::vector<TarEntry>& entries, std::size_t n,
                    const ContentsOptions& options = {}) {
    const fs::path tar = dir() / ("layer" + std::to_string(n) + ".tar");
    test::write_tar(tar, entries);
    Result<void> r = apply_layer_to_contents(contents, tar, "layer " + std::to_string(n), options);
    return r ? std::string() : r.error().message;
  }

  /// A dpkg root with two packages and one wheel, every record right.
  fs::path make_root() {
    write("root/var/lib/dpkg/status", "Package: ls-app\n"
                                      "Status: install ok installed\n"
                                      "Architecture: amd64\n"
                                      "Version: 1.0-1\n"
                                      "Conffiles:\n"
                                      " /etc/ls-app.conf " +
                                          k_md5_of_a +
                                          "\n"
                                          "Description: app\n"
                                          "\n"
                                          "Package: ls-lib\n"
                                          "Status: install ok installed\n"
                                          "Multi-Arch: same\n"
                                          "Architecture: amd64\n"
                                          "Version: 2.0-1\n"
                                          "Description: lib\n");
    write("root/var/lib/dpkg/info/ls-app.md5sums", k_md5_of_a + "  usr/bin/ls-app\n");
    write("root/var/lib/dpkg/info/ls-lib:amd64.md5sums",
          k_md5_of_a + "  usr/lib/libls.so.1\n" + k_md5_of_a + "  usr/share/doc/ls-lib/copyright\n");
    write("root/var/lib/dpkg/arch", "amd64\n");
    write("root/etc/ls-app.conf", "A");
    write("root/usr/bin/ls-app", "A");
    write("root/usr/lib/libls.so.1", "A");
    write("root/usr/share/doc/ls-lib/copyright", "A");
    const std::string site = "root/usr/local/lib/python3.11/dist-packages/";
    write(site + "demo/__init__.py", "A");
    write("root/usr/local/bin/demo-cli", "A");
    write(site + "demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: Demo\nVersion: 1.0\n");
    write(site + "demo-1.0.dist-info/INSTALLER", "lockstep\n");
    const std::string a = "sha256=VZrq0IJk1XldOQlxjN0Fq9SVcuhP5VWQ7vMaiKCP3_0"; // urlsafe b64 sha256("A")
    write(site + "demo-1.0.dist-info/RECORD", "../../../bin/demo-cli," + a +
                                                  ",1\r\n"
                                                  "demo-1.0.dist-info/RECORD,,\r\n"
                                                  "demo/__init__.py," +
                                                  a + ",1\r\n");
    return dir() / "root";
  }

  ImageContents read_root(const fs::path& root) {
    ImageContents contents;
    contents.what = "test-image";
    Result<void> r = add_directory_to_contents(contents, root);
    REQUIRE_OK(r);
    return contents;
  }

  std::vector<std::string> messages(const ImageContents& contents, const VerifyOptions& options = {}) {
    Result<VerifyReport> report = verify_contents(contents, options);
    REQUIRE_OK(report);
    std::vector<std::string> out;
    for (const VerifyProblem& p : report->problems) {
      out.push_back(p.message);
    }
    return out;
  }

  std::string verify_error(const ImageContents& contents) {
    Result<VerifyReport> report = verify_contents(contents, {});
    REQUIRE_FALSE(report.ok());
    CHECK(report.error().code == ExitCode::invalid_input);
    return report.error().message;
  }
};

envspec::LockedArtifact artifact(std::string kind, std::string name, std::string version, std::string arch) {
  envspec::LockedArtifact a;
  a.kind = std::move(kind);
  a.name = std::move(name);
  a.version = std::move(version);
  a.arch = std::move(arch);
  return a;
}

} // namespace

TEST_CASE_METHOD(ContentsFixture, "Layers apply in memory with OCI semantics", "[verify][contents]") {
  ImageContents c;
  REQUIRE(apply(c,
                {{"usr/bin/a", "A"},
                 {"etc/x", "X"},
                 {"opt/d/f1", "1"},
                 {"keep", "k"},
                 {"gone/sub/file", "g"},
                 {"bin", "", Type::symlink, "usr/bin"}},
                1) == "");
  REQUIRE(apply(c,
                {{"bin/b", "B"},
                 {".wh.keep", ""},
                 {".wh.gone", ""},
                 {"opt/d/f2", "2"},
                 {"opt/d/.wh..wh..opq", ""},
                 {"usr/bin/c", "", Type::hardlink, "usr/bin/a"},
                 {"etc/x", "", Type::symlink, "/bin/../bin/a"}},
                2) == "");
  std::vector<std::string> paths;
  for (const auto& [p, e] : c.entries()) {
    paths.push_back(p);
  }
  CHECK(paths == std::vector<std::string>{"bin", "etc", "etc/x", "opt", "opt/d", "opt/d/f2", "usr", "usr/bin",
                                          "usr/bin/a", "usr/bin/b", "usr/bin/c"});
  const ImageEntry* a = c.resolve("/etc/x", FollowLast::yes);
  REQUIRE(a != nullptr);
  CHECK(a->type == ImageEntry::Type::file);
  CHECK(hex_of(a->md5.data(), a->md5.size()) == k_md5_of_a);
  CHECK(hex_of(a->sha256.data(), a->sha256.size()) == sha256_of("A").hex());
  const ImageEntry* hard = c.resolve("usr/bin/c", FollowLast::no);
  REQUIRE(hard != nullptr);
  CHECK(hex_of(hard->sha256.data(), hard->sha256.size()) == sha256_of("A").hex());
  std::string resolved;
  CHECK(c.resolve("../../bin/b", FollowLast::yes, &resolved) != nullptr);
  CHECK(resolved == "usr/bin/b");
  CHECK(c.resolve("etc/x", FollowLast::no)->type == ImageEntry::Type::symlink);
  CHECK(c.resolve("keep", FollowLast::yes) == nullptr);
}

TEST_CASE_METHOD(ContentsFixture, "A whiteout never removes what its own layer wrote", "[verify][contents]") {
  ImageContents c;
  REQUIRE(apply(c, {{"d/old", "o"}}, 1) == "");
  REQUIRE(apply(c, {{"d/new", "n"}, {"d/.wh..wh..opq", ""}, {"f", "x"}, {".wh.f", ""}}, 2) == "");
  CHECK(c.resolve("d/new", FollowLast::yes) != nullptr);
  CHECK(c.resolve("d/old", FollowLast::yes) == nullptr);
  CHECK(c.resolve("f", FollowLast::yes) != nullptr);

  // A directory this layer writes into counts as written: the opaque marker keeps it (not its lower
  // children), as runner/runtime/unpack does.
  ImageContents o;
  REQUIRE(apply(o, {{"d/sub/x", "x"}, {"d/sub2/z", "z"}, {"d/keep", "", Type::directory}}, 1) == "");
  REQUIRE(apply(o, {{"d/sub/y", "y"}, {"d/.wh..wh..opq", ""}, {"d/keep", "", Type::directory}}, 2) == "");
  std::vector<std::string> paths;
  for (const auto& [p, e] : o.entries()) {
    paths.push_back(p);
  }
  CHECK(paths == std::vector<std::string>{"d", "d/keep", "d/sub", "d/sub/y"});
}

TEST_CASE_METHOD(ContentsFixture, "Hostile layers are refused naming the layer and member",
                 "[verify][contents]") {
  ImageContents c;
  CHECK(apply(c, {{"f", "x"}, {"f/x", "y"}}, 1) ==
        "layer 1: member 'f/x': can't open its parent directory 'f': Not a directory");
  ImageContents loop;
  CHECK(apply(loop, {{"a", "", Type::symlink, "b"}, {"b", "", Type::symlink, "a"}, {"a/x", "y"}}, 1) ==
        "layer 1: member 'a/x': can't open its parent directory 'a': Too many levels of symbolic links");
  ImageContents link;
  CHECK(apply(link, {{"h", "", Type::hardlink, "nope"}}, 1) ==
        "layer 1: member 'h' is a hard link to 'nope', which does not exist");
  ImageContents dotdot;
  CHECK(apply(dotdot, {{"../escape", "x"}}, 1) == "layer 1: member '../escape' escapes the root with '..'");
  ContentsOptions small;
  small.max_metadata_file = 10;
  ImageContents big;
  CHECK(apply(big, {{"var/lib/dpkg/status", std::string(20, 'x')}}, 1, small) ==
        "layer 1: /var/lib/dpkg/status has 20 bytes, more than the 10 a metadata file may have");
  ContentsOptions few;
  few.max_entries = 3;
  ImageContents many;
  CHECK(apply(many, {{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}}, 1, few) ==
        "layer 1: more than 3 members; refusing the layer");
}

TEST_CASE_METHOD(ContentsFixture, "Digests do not depend on the number of hashing threads",
                 "[verify][contents]") {
  std::vector<TarEntry> entries;
  for (int i = 0; i < 200; ++i) {
    entries.emplace_back("f/" + std::to_string(i),
                         std::string(static_cast<std::size_t>(i * 97), static_cast<char>('a' + i % 26)));
  }
  entries.emplace_back("big", std::string(3U << 20, 'z') + "end");
  ContentsOptions one;
  one.threads = 1;
  one.sha256_all = true;
  ContentsOptions four;
  four.threads = 4;
  four.sha256_all = true;
  ImageContents a;
  ImageContents b;
  REQUIRE(apply(a, entries, 1, one) == "");
  REQUIRE(apply(b, entries, 1, four) == "");
  REQUIRE(a.entries().size() == b.entries().size());
  for (const auto& [p, e] : a.entries()) {
    const ImageEntry& other = b.entries().at(p);
    CHECK(e.md5 == other.md5);
    CHECK(e.sha256 == other.sha256);
  }
  const ImageEntry& big = a.entries().at("big");
  CHECK(hex_of(big.sha256.data(), big.sha256.size()) == sha256_of(std::string(3U << 20, 'z') + "end").hex());
  CHECK(big.size == (3U << 20) + 3);
}

TEST_CASE_METHOD(ContentsFixture, "A root whose records match verifies", "[verify]") {
  const ImageContents c = read_root(make_root());
  Result<VerifyReport> report = verify_contents(c, {});
  REQUIRE_OK(report);
  CHECK(report->ok());
  CHECK(report->debs == 2);
  CHECK(report->wheels == 1);
  CHECK(report->files == 6);
  CHECK(render_verify_text(*report) == "test-image: 3 packages (2 debs, 1 wheel), 6 files checked: ok\n");
}

TEST_CASE_METHOD(ContentsFixture, "Changed, missing and retyped files are named with their package",
                 "[verify]") {
  const fs::path root = make_root();
  write("root/usr/lib/libls.so.1", "B");
  write("root/etc/ls-app.conf", "changed");
  fs::remove(root / "usr/share/doc/ls-lib/copyright");
  fs::create_directory(root / "usr/share/doc/ls-lib/copyright");
  write("root/usr/local/lib/python3.11/dist-packages/demo/__init__.py", "AB");
  fs::remove(root / "usr/local/bin/demo-cli");
  const ImageContents c = read_root(root);
  CHECK(messages(c) ==
        std::vector<std::string>{
            "/etc/ls-app.conf: conffile md5 differs from ls-app's record",
            "/usr/lib/libls.so.1: md5 differs from ls-lib's record",
            "/usr/share/doc/ls-lib/copyright: not a regular file (ls-lib's record lists a file)",
            "/usr/local/bin/demo-cli: missing (in Demo 1.0's RECORD)",
            std::string("/usr/local/lib/python3.11/dist-packages/demo/__init__.py: sha256 differs from Demo "
                        "1.0's RECORD (2 bytes, RECORD says 1)"),
        });
  Result<VerifyReport> report = verify_contents(c, {});
  REQUIRE_OK(report);
  CHECK(
      verify_json(*report)["problems"][1].dump() ==
      R"({"kind":"md5","package":"ls-lib","path":"/usr/lib/libls.so.1","message":"/usr/lib/libls.so.1: md5 differs from ls-lib's record"})");
}

TEST_CASE_METHOD(ContentsFixture, "A Debian package's .dist-info is checked by its md5sums, not its RECORD",
                 "[verify]") {
  const fs::path root = make_root();
  const std::string dist = "usr/lib/python3/dist-packages/blinker-1.5.dist-info/";
  write("root/" + dist + "METADATA", "A");
  write("root/" + dist + "RECORD", "blinker-1.5.dist-info/METADATA,sha256=" + sha256_of("A").hex() + ",1\n");
  write("root/var/lib/dpkg/info/ls-app.md5sums",
        k_md5_of_a + "  usr/bin/ls-app\n" + k_md5_of_a + "  " + dist + "METADATA\n");
  const ImageContents c = read_root(root);
  Result<VerifyReport> report = verify_contents(c, {});
  REQUIRE_OK(report);
  CHECK(report->ok());
  CHECK(report->wheels == 1); // demo only
  Result<ImagePackages> packages = image_packages(c);
  REQUIRE_OK(packages);
  REQUIRE(packages->dists.size() == 2);
  CHECK(packages->dists[0].project == "blinker");
  CHECK(packages->dists[0].from_deb);
  CHECK_FALSE(packages->dists[1].from_deb);
}

TEST_CASE_METHOD(ContentsFixture, "A diverted file is checked where the diversion put it", "[verify]") {
  const fs::path root = make_root();
  fs::rename(root / "usr/bin/ls-app", root / "usr/bin/ls-app.distrib");
  write("root/usr/bin/ls-app", "local version");
  write("root/var/lib/dpkg/diversions", "/usr/bin/ls-app\n/usr/bin/ls-app.distrib\n:\n");
  CHECK(messages(read_root(root)).empty());
}

TEST_CASE_METHOD(ContentsFixture, "The lock's packages must be exactly the installed ones", "[verify]") {
  const ImageContents c = read_root(make_root());
  envspec::Lock lock;
  lock.platform = "linux/amd64";
  lock.artifacts = {artifact("deb", "ls-app", "1.0-1", "amd64"), artifact("deb", "ls-lib", "1.0-1", "amd64"),
                    artifact("deb", "ls-data", "1.0-1", "all"),
                    artifact("wheel", "demo", "2.0", "py3-none-any"),
                    artifact("wheel", "dep", "1.0", "py3-none-any")};
  VerifyOptions options;
  options.lock = &lock;
  options.lock_name = "other.lock";
  CHECK(messages(c, options) == std::vector<std::string>{
                                    "deb ls-data: lock says 1.0-1, not installed",
                                    "deb ls-lib: lock says 1.0-1, image has 2.0-1",
                                    "wheel demo: lock says 2.0, image has 1.0",
                                    "wheel dep: lock says 1.0, not installed",
                                });
  ImageContents recorded = c;
  recorded.lock_digest = "sha256:" + std::string(64, '0');
  const std::vector<std::string> with_digest = messages(recorded, options);
  REQUIRE(!with_digest.empty());
  CHECK(with_digest[0] ==
        "image was built from a different lock (the image records sha256:" + std::string(64, '0') +
            ", other.lock is " + envspec::lock_digest(lock).str() + ")");
}

TEST_CASE_METHOD(ContentsFixture, "A multi-platform lock is compared by the image's platform's share",
                 "[verify][platforms]") {
  ImageContents c = read_root(make_root());
  c.architecture = "amd64";
  envspec::Lock lock;
  lock.platform = "linux/amd64";
  lock.platforms = {"linux/amd64", "linux/arm64"};
  lock.platform_spec_digests = {sha256_of("amd64 spec"), sha256_of("arm64 spec")};
  envspec::LockedArtifact arm = artifact("deb", "ls-arm", "1.0-1", "arm64");
  arm.platforms = {"linux/arm64"};
  envspec::LockedArtifact amd = artifact("deb", "ls-lib", "2.0-1", "amd64");
  amd.platforms = {"linux/amd64"};
  lock.artifacts = {artifact("deb", "ls-app", "1.0-1", "amd64"), amd, arm};
  VerifyOptions options;
  options.lock = &lock;
  options.lock_name = "both.lock";
  // Only the amd64 share: the arm64 deb ls-arm is not missing; the unlocked wheel is the one problem.
  CHECK(messages(c, options) ==
        std::vector<std::string>{
            "wheel demo: installed (1.0, /usr/local/lib/python3.11/dist-packages/demo-1.0.dist-info), not in "
            "the lock"});
  c.lock_digest = envspec::lock_digest(envspec::lock_for_platform(lock, "linux/amd64")).str();
  Result<VerifyReport> report = verify_contents(c, options);
  REQUIRE_OK(report);
  CHECK(report->lock_platform == "linux/amd64");
  CHECK(render_verify_text(*report).find("against both.lock (linux/amd64): 1 problem") != std::string::npos);
  // An image of a platform the lock has not: one problem, nothing compared.
  c.architecture = "riscv64";
  CHECK(messages(c, options) ==
        std::vector<std::string>{
            "the image is for architecture riscv64, both.lock is for linux/amd64, "
            "linux/arm64: verify the image of one of those platforms (--platform for an index)"});
}

TEST_CASE_METHOD(ContentsFixture, "Malformed records are errors naming the file and line", "[verify]") {
  fs::path root = make_root();
  write("root/var/lib/dpkg/status",
        "Package: ls-app\nStatus: install ok installed\nVersion: 1.0-1\n\nthis is garbage\n");
  CHECK(verify_error(read_root(root)).rfind("test-image:/var/lib/dpkg/status:5: ", 0) == 0);

  root = make_root();
  write("root/var/lib/dpkg/status", "Package: ls-app\nStatus: installed\nVersion: 1.0-1\n");
  CHECK(verify_error(read_root(root)) ==
        "test-image:/var/lib/dpkg/status:2: package ls-app: Status 'installed' is not 'WANT FLAG STATE'");

  root = make_root();
  write("root/var/lib/dpkg/info/ls-app.md5sums", k_md5_of_a + "  ../../etc/shadow\n");
  CHECK(verify_error(read_root(root)) ==
        "test-image:/var/lib/dpkg/info/ls-app.md5sums:1: '../../etc/shadow' is not a path inside the image");

  root = make_root();
  write("root/var/lib/dpkg/info/ls-app.md5sums", k_md5_of_a + "  usr/bin/ls-app\ngarbage\n");
  CHECK(verify_error(read_root(root)) ==
        "test-image:/var/lib/dpkg/info/ls-app.md5sums:2: expected 'MD5  PATH', found 'garbage'");

  root = make_root();
  const std::string record = "root/usr/local/lib/python3.11/dist-packages/demo-1.0.dist-info/RECORD";
  write(record, "../../../../../../../etc/passwd,sha256=VZrq0IJk1XldOQlxjN0Fq9SVcuhP5VWQ7vMaiKCP3_0,1\n");
  CHECK(verify_error(read_root(root)) ==
        "test-image:/usr/local/lib/python3.11/dist-packages/demo-1.0.dist-info/RECORD: entry 1 "
        "('../../../../../../../etc/passwd') points outside the image");

  root = make_root();
  write(record, "demo/__init__.py,md5=abc,1\n");
  CHECK(verify_error(read_root(root))
            .rfind("test-image:/usr/local/lib/python3.11/dist-packages/demo-1.0.dist-info/RECORD: row 1",
                   0) == 0);
}

TEST_CASE_METHOD(ContentsFixture, "A member placed through a symlink into dpkg's records is read as metadata",
                 "[verify][contents]") {
  // Layers are listed before they are applied, and the listing decides by a member's own name
  // what to keep; "db/info/x.md5sums" only lands in var/lib/dpkg/info through the link "db".
  const std::vector<TarEntry> lower{{"var/lib/dpkg/info/a.list", "/a\n"},
                                    {"db", "", Type::symlink, "var/lib/dpkg"}};
  const std::vector<TarEntry> upper{{"db/info/x.md5sums", k_md5_of_a + "  usr/bin/x\n"}, {"usr/bin/x", "A"}};
  ImageContents c;
  REQUIRE(apply(c, lower, 1) == "");
  REQUIRE(apply(c, upper, 2) == "");
  const std::string* text = c.text("var/lib/dpkg/info/x.md5sums");
  REQUIRE(text != nullptr);
  CHECK(*text == k_md5_of_a + "  usr/bin/x\n");

  ScopedCache cache(dir() / "cache");
  test::LayoutWriter layout(dir() / "layout");
  test::write_tar(dir() / "l1.tar", lower);
  test::write_tar(dir() / "l2.tar", upper);
  const oci::Descriptor m = layout.image({test::slurp(dir() / "l1.tar"), test::slurp(dir() / "l2.tar")});
  layout.write_index({m});
  Result<ImageArg> arg = parse_image_arg((dir() / "layout").string());
  REQUIRE_OK(arg);
  Result<ImageContents> image = read_image_contents(*arg);
  REQUIRE_OK(image);
  text = image->text("var/lib/dpkg/info/x.md5sums");
  REQUIRE(text != nullptr);
  CHECK(*text == k_md5_of_a + "  usr/bin/x\n");
  CHECK(image->bytes_hashed == 3 + c.text("var/lib/dpkg/info/x.md5sums")->size() + 1);
}

TEST_CASE_METHOD(ContentsFixture, "An OCI layout is read where it lies, each blob checked as it streams",
                 "[verify][contents]") {
  ScopedCache cache(dir() / "cache");
  test::LayoutWriter layout(dir() / "layout");
  test::write_tar(dir() / "l1.tar", {{"usr/bin/a", "A"}, {"bin", "", Type::symlink, "usr/bin"}});
  test::write_tar(dir() / "l2.tar", {{"bin/b", "B"}});
  test::ImageOptions opts;
  opts.edit_config = [](oci::json& config) {
    config["config"]["Labels"] = {{"dev.lockstep.mpi.impl", "openmpi"}};
  };
  opts.edit_manifest = [](oci::json& manifest) {
    manifest["annotations"] = {{"dev.lockstep.lock.digest", "sha256:" + std::string(64, 'a')}};
  };
  const oci::Descriptor m =
      layout.image({test::slurp(dir() / "l1.tar"), test::slurp(dir() / "l2.tar")}, opts);
  layout.write_index({m});
  Result<ImageArg> arg = parse_image_arg((dir() / "layout").string());
  REQUIRE_OK(arg);
  Result<ImageContents> c = read_image_contents(*arg);
  REQUIRE_OK(c);
  CHECK(c->digest == m.digest);
  CHECK(c->lock_digest == "sha256:" + std::string(64, 'a'));
  CHECK(c->labels.at("dev.lockstep.mpi.impl") == "openmpi");
  CHECK(c->layers == 2);
  const ImageEntry* b = c->resolve("/usr/bin/b", FollowLast::yes);
  REQUIRE(b != nullptr);
  CHECK(hex_of(b->sha256.data(), b->sha256.size()) == sha256_of("B").hex());
  CHECK_FALSE(fs::exists(dir() / "cache" / "tmp")); // no private copy of any blob

  // One byte changed in a layer blob: named as the blob's digest mismatch.
  const std::string l2 = test::slurp(dir() / "l2.tar");
  const fs::path blob = dir() / "layout" / "blobs" / "sha256" / sha256_of(l2).hex();
  REQUIRE(fs::exists(blob));
  std::string tampered = l2;
  tampered[600] = static_cast<char>(tampered[600] ^ 1);
  fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
  write(blob.lexically_relative(dir()).string(), tampered);
  Result<ImageContents> bad = read_image_contents(*arg);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ExitCode::invalid_input);
  CHECK_THAT(bad.error().message,
             Catch::Contains("layer 2/2 (" + sha256_of(l2).str() + "): digest mismatch: the blob hashes to " +
                             sha256_of(tampered).str()));
}

TEST_CASE_METHOD(ContentsFixture, "The image's packages become diff components", "[verify]") {
  ImageContents c = read_root(make_root());
  c.labels = {{"dev.lockstep.mpi.impl", "openmpi"}, {"org.example", "x"}};
  Result<ImagePackages> packages = image_packages(c);
  REQUIRE_OK(packages);
  const envspec::ComponentSet set = image_components(c, *packages);
  std::vector<std::string> rows;
  for (const envspec::Component& comp : set.components) {
    rows.push_back(comp.kind + " " + comp.name + " " + comp.version);
  }
  CHECK(rows == std::vector<std::string>{"deb ls-app 1.0-1", "deb ls-lib 2.0-1", "wheel demo 1.0",
                                         "stack mpi.impl openmpi"});
}

TEST_CASE("Only the paths a wheel installs in practice get a SHA-256", "[verify][contents]") {
  CHECK(wants_sha256("usr/local/lib/python3.11/dist-packages/demo/__init__.py"));
  CHECK(wants_sha256("opt/venv/lib/python3.11/site-packages/torch/lib/libtorch.so"));
  CHECK(wants_sha256("usr/local/bin/demo-cli"));
  CHECK(wants_sha256("opt/venv/include/python3.11/demo/demo.h"));
  CHECK_FALSE(wants_sha256("usr/lib/x86_64-linux-gnu/libc.so.6"));
  CHECK_FALSE(wants_sha256("bin"));
  CHECK_FALSE(wants_sha256("usr/share/site-packages")); // the last component is the file itself
}

TEST_CASE_METHOD(ContentsFixture, "A RECORD naming a file elsewhere gets it hashed by a second read",
                 "[verify][contents]") {
  // A wheel's data file (usr/local/share/...) is outside wants_sha256's paths.
  const fs::path root = make_root();
  const std::string site = "root/usr/local/lib/python3.11/dist-packages/";
  const std::string a = "sha256=VZrq0IJk1XldOQlxjN0Fq9SVcuhP5VWQ7vMaiKCP3_0"; // urlsafe b64 sha256("A")
  write("root/usr/local/share/demo/data.txt", "A");
  write(site + "demo-1.0.dist-info/RECORD",
        "../../../bin/demo-cli," + a + ",1\n../../../share/demo/data.txt," + a +
            ",1\ndemo-1.0.dist-info/RECORD,,\ndemo/__init__.py," + a + ",1\n");
  ImageArg image;
  image.kind = ImageArg::Kind::directory;
  image.path = root;
  ImageContents first = read_root(root);
  CHECK_FALSE(first.entries().at("usr/local/share/demo/data.txt").has_sha256);
  Result<VerifyReport> refused = verify_contents(first, {});
  REQUIRE_FALSE(refused.ok()); // never compared against a digest that was not computed
  CHECK(refused.error().code == ExitCode::internal);

  Result<ImageContents> c = read_for_verify(image);
  REQUIRE_OK(c);
  CHECK(c->entries().at("usr/local/share/demo/data.txt").has_sha256);
  CHECK(messages(*c).empty());

  write("root/usr/local/share/demo/data.txt", "B");
  Result<ImageContents> changed = read_for_verify(image);
  REQUIRE_OK(changed);
  CHECK(messages(*changed) ==
        std::vector<std::string>{"/usr/local/share/demo/data.txt: sha256 differs from Demo 1.0's RECORD"});
}

TEST_CASE_METHOD(ContentsFixture, "conda-meta records are checked, and hostile ones refused",
                 "[verify][conda]") {
  const std::string sha_a = "559aead08264d5795d3909718cdd05abd49572e84fe55590eef31a88a08fdffd"; // sha256("A")
  auto record = [&](const std::string& path) {
    return R"({"name": "tool", "version": "1.0", "build": "h0_0", "url": "https://x/tool-1.0-h0_0.conda",
      "paths_data": {"paths_version": 1, "paths": [
        {"_path": ")" +
           path + R"(", "path_type": "hardlink", "sha256": ")" + sha_a +
           R"(", "size_in_bytes": 1},
        {"_path": "bin/t", "path_type": "softlink"}]}})";
  };
  write("root/opt/conda/bin/tool", "A");
  fs::create_symlink("tool", dir() / "root/opt/conda/bin/t");
  write("root/opt/conda/conda-meta/tool-1.0-h0_0.json", record("bin/tool"));
  {
    const ImageContents c = read_root(dir() / "root");
    Result<VerifyReport> report = verify_contents(c, {});
    REQUIRE_OK(report);
    CHECK(report->ok());
    CHECK(report->conda == 1);
    CHECK(report->files == 2);
    CHECK(render_verify_text(*report) ==
          "test-image: 1 package (0 debs, 0 wheels, 1 conda), 2 files checked: ok\n");
    envspec::ComponentSet set = image_components(c, *image_packages(c));
    CHECK(set.components.at(0).kind == "conda");
    CHECK(set.components.at(0).version == "1.0=h0_0");
  }
  fs::remove(dir() / "root/opt/conda/bin/tool");
  CHECK(messages(read_root(dir() / "root")) ==
        std::vector<std::string>{"/opt/conda/bin/tool: missing (in tool 1.0=h0_0's conda-meta record)"});
  write("root/opt/conda/conda-meta/tool-1.0-h0_0.json", record("../../../etc/shadow"));
  CHECK_THAT(
      verify_error(read_root(dir() / "root")),
      Catch::Matchers::Contains("conda-meta/tool-1.0-h0_0.json: paths_data.paths[0]: '../../../etc/shadow' "
                                "is not a path inside the prefix"));
  write("root/opt/conda/conda-meta/tool-1.0-h0_0.json", std::string(100, '[') + std::string(100, ']'));
  CHECK_THAT(verify_error(read_root(dir() / "root")),
             Catch::Matchers::Contains("conda-meta/tool-1.0-h0_0.json"));
}
