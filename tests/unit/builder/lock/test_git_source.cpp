#include "builder/lock/git_source.hpp"
#include "support/oci/tar_writer.hpp"
#include "support/store/blob_store.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <chrono>
#include <netinet/in.h>
#include <thread>

using namespace lockstep;
using namespace lockstep::builder;
namespace fs = std::filesystem;

namespace {

// git with a fixed identity and dates and no user or system configuration, so commit ids are
// the same on every machine.
const std::string k_git = "env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=Test "
                          "GIT_AUTHOR_EMAIL=test@example.org GIT_COMMITTER_NAME=Test "
                          "GIT_COMMITTER_EMAIL=test@example.org GIT_AUTHOR_DATE=2020-01-01T00:00:00Z "
                          "GIT_COMMITTER_DATE=2020-01-01T00:00:00Z git";

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
    s.pop_back();
  }
  return s;
}

std::string quote(const fs::path& p) {
  return "'" + p.string() + "'";
}

// A repository with history: "zero" (untagged) <- "one" (lightweight tag `light`, branch `dev`) <-
// "two" (annotated tag `v2`, branch `main`). "two" has a regular file, an executable, a symlink,
// nested directories, names whose bytewise order differs from git's tree order ("a" and "a-b"),
// an empty file and a submodule entry.
struct GitRepoFixture : test::TempDirFixture {
  fs::path src = dir() / "src";
  fs::path store = dir() / "store";
  std::string c0, c1, c2;

  GitRepoFixture() {
    git_in(dir(), "init -q -b main src");
    write("src/README", "zero\n");
    git("add -A");
    git("commit -q -m zero");
    write("src/README", "hello\n");
    write("src/run.sh", "#!/bin/sh\necho hi\n");
    fs::permissions(src / "run.sh", fs::perms(0755));
    git("add -A");
    git("commit -q -m one");
    git("tag light");
    git("branch dev");
    write("src/a/x", "x\n");
    write("src/a-b", "ab\n");
    write("src/docs/deep/note.txt", "deep\n");
    write("src/empty", "");
    fs::create_symlink("README", src / "link");
    git("add -A");
    c0 = rev("HEAD~1");
    git("update-index --add --cacheinfo 160000," + c0 + ",vendor/lib");
    git("commit -q -m two");
    git("tag -a v2 -m 'release 2'");
    c0 = rev("HEAD~2");
    c1 = rev("HEAD~1");
    c2 = rev("HEAD");
  }

  void git_in(const fs::path& where, const std::string& args) const {
    test::run_command("cd " + quote(where) + " && " + k_git + " " + args + " >&2");
  }
  void git(const std::string& args) const { git_in(src, args); }
  [[nodiscard]] std::string rev(const std::string& name) const {
    return trim(
        test::run_command("cd " + quote(src) + " && " + k_git + " rev-parse '" + name + "^{commit}'"));
  }
};

// The tar export_git_tree() writes, as bytes.
std::string export_tar(const fs::path& store, const std::string& url, const std::string& commit,
                       const GitExportOptions& opt) {
  test::StringSink sink;
  TarWriter tar(sink);
  log::Progress progress("export", 0);
  std::set<std::string> seen;
  auto bytes = export_git_tree(tar, progress, store, url, commit, opt, seen);
  INFO((bytes ? "" : bytes.error().message));
  REQUIRE(bytes);
  tar.finish();
  return sink.out;
}

// "TYPE MODE PATH [-> TARGET]" of everything under `root`, sorted.
std::string tree_listing(const fs::path& root) {
  return test::run_command("cd " + quote(root) +
                           " && find . -mindepth 1 -printf '%y %m %p %l\\n' | LC_ALL=C sort");
}

// A tar to export into, with the options of a source at /src.
struct ExportTarget {
  test::StringSink sink;
  TarWriter tar{sink};
  log::Progress progress{"export", 0};
  std::set<std::string> seen;
  GitExportOptions opt;
  ExportTarget() { opt.to = "/src"; }
};

// Error message of a failed result (for REQUIRE on the whole text).
template <typename T> std::string message_of(const Result<T>& r) {
  REQUIRE_FALSE(r);
  return r.error().message;
}

// A local port nothing listens on (bound and released; git daemon takes it next).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool port_open(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// `git daemon` serving `base` on 127.0.0.1, stopped when destroyed.
class GitDaemon {
public:
  GitDaemon(const fs::path& base, int port) : m_port(port) {
    m_pid = ::fork();
    REQUIRE(m_pid >= 0);
    if (m_pid == 0) {
      const std::string base_arg = "--base-path=" + base.string();
      const std::string port_arg = "--port=" + std::to_string(port);
      ::setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
      ::setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
      ::execlp("git", "git", "daemon", "--reuseaddr", "--export-all", base_arg.c_str(), "--listen=127.0.0.1",
               port_arg.c_str(), base.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Wait (bounded) until it accepts connections; no timing is asserted.
    for (int i = 0; i < 200 && !port_open(port); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(port_open(port));
  }
  ~GitDaemon() {
    ::kill(m_pid, SIGTERM);
    int status = 0;
    ::waitpid(m_pid, &status, 0);
  }
  GitDaemon(const GitDaemon&) = delete;
  GitDaemon& operator=(const GitDaemon&) = delete;

  [[nodiscard]] std::string url(const std::string& repo) const {
    return "git://127.0.0.1:" + std::to_string(m_port) + "/" + repo;
  }

private:
  pid_t m_pid = -1;
  int m_port;
};

bool have_git_daemon() {
  if (!test::have_tool("git")) {
    return false;
  }
  const fs::path exec_path = trim(test::run_command("git --exec-path"));
  return fs::exists(exec_path / "git-daemon");
}

} // namespace

TEST_CASE("a tag, a branch or a full commit id resolves to its commit", "[git_source]") {
  GitRepoFixture f;
  const std::string url = f.src.string();
  CHECK(*resolve_git_rev(f.store, url, "light") == f.c1);
  CHECK(*resolve_git_rev(f.store, url, "dev") == f.c1);
  CHECK(*resolve_git_rev(f.store, url, "main") == f.c2);
  CHECK(*resolve_git_rev(f.store, url, "refs/heads/main") == f.c2);
  CHECK(*resolve_git_rev(f.store, url, f.c0) == f.c0);
  // An upper-case id means the same commit.
  std::string upper = f.c1;
  for (char& c : upper) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  CHECK(*resolve_git_rev(f.store, url, upper) == f.c1);
  CHECK(fs::is_directory(git_cache_dir(f.store, url)));
}

TEST_CASE("an annotated tag peels to the commit it tags", "[git_source]") {
  GitRepoFixture f;
  const std::string tag_object = trim(test::run_command("cd " + quote(f.src) + " && git rev-parse v2"));
  REQUIRE(tag_object != f.c2); // v2 is a tag object, not the commit
  CHECK(*resolve_git_rev(f.store, f.src.string(), "v2") == f.c2);
  CHECK(*resolve_git_rev(f.store, f.src.string(), "refs/tags/v2") == f.c2);
}

TEST_CASE("an unknown revision is refused, naming the tags and branches there are", "[git_source]") {
  GitRepoFixture f;
  auto r = resolve_git_rev(f.store, f.src.string(), "v3");
  CHECK(message_of(r) == "unknown revision 'v3' of " + f.src.string() +
                             " (tags: light, v2; branches: dev, main): give a tag, a branch or a full 40-hex "
                             "commit id");
  CHECK(r.error().code == ExitCode::invalid_input);
}

TEST_CASE("an abbreviated commit id is refused", "[git_source]") {
  GitRepoFixture f;
  const std::string short_id = f.c1.substr(0, 7);
  auto r = resolve_git_rev(f.store, f.src.string(), short_id);
  CHECK(message_of(r) == "'" + short_id + "' looks like an abbreviated commit id, and " + f.src.string() +
                             " has no tag or branch of that name: give the full 40-hex commit id or a tag");
  CHECK(r.error().code == ExitCode::invalid_input);
}

TEST_CASE("malformed URLs and revisions are refused before any fetch", "[git_source]") {
  GitRepoFixture f;
  CHECK(message_of(resolve_git_rev(f.store, "src", "main")) ==
        "'src' is not a supported git URL: use an absolute path, file://, http://, https:// or git://");
  CHECK(message_of(resolve_git_rev(f.store, "ssh://git@example.org/x.git", "main")) ==
        "git URL 'ssh://example.org/x.git': ssh is not supported (lockstep passes no credentials to git); "
        "use an "
        "https:// or git:// URL");
  CHECK(message_of(resolve_git_rev(f.store, f.src.string(), "a..b")) ==
        "'a..b' is not a valid git revision of " + f.src.string() +
            ": give a tag, a branch or a full 40-hex commit id");
  CHECK(message_of(resolve_git_rev(f.store, f.src.string(), "")) ==
        "the revision of " + f.src.string() + " is empty: give a tag, a branch or a full 40-hex commit id");
  CHECK_FALSE(fs::exists(f.store / "git"));
}

TEST_CASE("a commit on no branch or tag is refused", "[git_source]") {
  GitRepoFixture f;
  const std::string missing(40, 'a');
  auto r = ensure_git_commit(f.store, f.src.string(), missing);
  CHECK(message_of(r) ==
        "commit " + missing + " is on no branch or tag of " + f.src.string() +
            " (was it force-pushed away?): lock the source again or give a revision that exists");
  CHECK(r.error().code == ExitCode::invalid_input);
}

TEST_CASE("an exported commit matches git archive of it", "[git_source]") {
  GitRepoFixture f;
  GitExportOptions opt;
  opt.to = "/opt/src";
  opt.epoch = 1700000000;
  const std::string tar = export_tar(f.store, f.src.string(), f.c2, opt);
  f.write("ours.tar", tar);

  // Members, order, owners, modes and times as GNU tar reads them.
  const std::string listing =
      test::run_command("cd " + quote(f.dir()) + " && TZ=UTC tar --numeric-owner -tvf ours.tar");
  CHECK(listing == "drwxr-xr-x 0/0               0 2023-11-14 22:13 opt/\n"
                   "drwxr-xr-x 0/0               0 2023-11-14 22:13 opt/src/\n"
                   "-rw-r--r-- 0/0               6 2023-11-14 22:13 opt/src/README\n"
                   "drwxr-xr-x 0/0               0 2023-11-14 22:13 opt/src/a/\n"
                   "-rw-r--r-- 0/0               2 2023-11-14 22:13 opt/src/a/x\n"
                   "-rw-r--r-- 0/0               3 2023-11-14 22:13 opt/src/a-b\n"
                   "drwxr-xr-x 0/0               0 2023-11-14 22:13 opt/src/docs/\n"
                   "drwxr-xr-x 0/0               0 2023-11-14 22:13 opt/src/docs/deep/\n"
                   "-rw-r--r-- 0/0               5 2023-11-14 22:13 opt/src/docs/deep/note.txt\n"
                   "-rw-r--r-- 0/0               0 2023-11-14 22:13 opt/src/empty\n"
                   "lrwxrwxrwx 0/0               0 2023-11-14 22:13 opt/src/link -> README\n"
                   "-rwxr-xr-x 0/0              18 2023-11-14 22:13 opt/src/run.sh\n"
                   "drwxr-xr-x 0/0               0 2023-11-14 22:13 opt/src/vendor/\n"
                   "drwxr-xr-x 0/0               0 2023-11-14 22:13 opt/src/vendor/lib/\n");

  // The same files, modes, symlinks and bytes as `git archive` (with git's default umask 002
  // replaced by 022, the modes lockstep normalises to).
  fs::create_directories(f.dir() / "ours");
  fs::create_directories(f.dir() / "theirs");
  test::run_command("tar -xpf " + quote(f.dir() / "ours.tar") + " -C " + quote(f.dir() / "ours"));
  test::run_command("cd " + quote(f.src) + " && git -c tar.umask=022 archive " + f.c2 + " | tar -xpf - -C " +
                    quote(f.dir() / "theirs"));
  const fs::path ours = f.dir() / "ours/opt/src";
  CHECK(tree_listing(ours) == tree_listing(f.dir() / "theirs"));
  test::run_command("diff -r --no-dereference " + quote(ours) + " " + quote(f.dir() / "theirs"));
  CHECK_FALSE(fs::exists(ours / ".git"));
}

TEST_CASE("exports are byte-identical across runs, re-clones and URL spellings", "[git_source]") {
  GitRepoFixture f;
  GitExportOptions opt;
  opt.to = "/src";
  const std::string first = export_tar(f.store, f.src.string(), f.c2, opt);
  CHECK(export_tar(f.store, f.src.string(), f.c2, opt) == first);
  CHECK(export_tar(f.dir() / "store2", f.src.string(), f.c2, opt) == first);
  CHECK(export_tar(f.dir() / "store3", "file://" + f.src.string(), f.c2, opt) == first);
  CHECK(git_cache_dir(f.dir() / "store3", "file://" + f.src.string()) !=
        git_cache_dir(f.store, f.src.string()));
  opt.epoch = 1;
  CHECK(export_tar(f.store, f.src.string(), f.c2, opt) != first);
}

TEST_CASE("a cached commit needs no source", "[git_source]") {
  GitRepoFixture f;
  const std::string url = f.src.string();
  REQUIRE(*resolve_git_rev(f.store, url, "v2") == f.c2);
  GitExportOptions opt;
  opt.to = "/src";
  const std::string before = export_tar(f.store, url, f.c2, opt);
  fs::rename(f.src, f.dir() / "gone");
  CHECK(*resolve_git_rev(f.store, url, f.c2) == f.c2);
  CHECK(*resolve_git_rev(f.store, url, f.c1) == f.c1); // history came with the tag
  CHECK(ensure_git_commit(f.store, url, f.c0, "v2"));
  CHECK(export_tar(f.store, url, f.c2, opt) == before);
  // A tag must be asked of the source, which is gone.
  auto r = resolve_git_rev(f.store, url, "v2");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK(r.error().message.rfind("can't connect to " + url + ": ", 0) == 0);
}

TEST_CASE("an export shares its layer's paths with other writers", "[git_source]") {
  GitRepoFixture f;
  GitExportOptions opt;
  opt.to = "/opt/src/";
  test::StringSink sink;
  TarWriter tar(sink);
  log::Progress progress("export", 0);
  std::set<std::string> seen = {"opt"};
  auto bytes = export_git_tree(tar, progress, f.store, f.src.string(), f.c1, opt, seen);
  REQUIRE(bytes);
  CHECK(*bytes == 6 + 18);
  CHECK(seen == std::set<std::string>{"opt", "opt/src", "opt/src/README", "opt/src/run.sh"});
  tar.finish();
  f.write("layer.tar", sink.out);
  CHECK(test::run_command("tar -tf " + quote(f.dir() / "layer.tar")) ==
        "opt/src/\nopt/src/README\nopt/src/run.sh\n");

  // A second source writing the same file is an error naming it.
  test::StringSink sink2;
  TarWriter tar2(sink2);
  auto again = export_git_tree(tar2, progress, f.store, f.src.string(), f.c2, opt, seen);
  CHECK(message_of(again) == "git source " + f.src.string() + " at " + f.c2 +
                                 ": /opt/src/README is already in this layer (another source provides it)");
}

TEST_CASE("a tree with a .git entry is refused", "[git_source]") {
  GitRepoFixture f;
  const std::string blob = trim(test::run_command("cd " + quote(f.src) + " && git hash-object -w README"));
  const std::string tree = trim(test::run_command("cd " + quote(f.src) + " && printf '100644 blob " + blob +
                                                  "\\t.GIT\\n' | git mktree"));
  const std::string commit =
      trim(test::run_command("cd " + quote(f.src) + " && " + k_git + " commit-tree " + tree + " -m bad"));
  f.git("update-ref refs/heads/bad " + commit);
  REQUIRE(*resolve_git_rev(f.store, f.src.string(), "bad") == commit);
  ExportTarget t;
  auto r = export_git_tree(t.tar, t.progress, f.store, f.src.string(), commit, t.opt, t.seen);
  CHECK(message_of(r) == "git source " + f.src.string() + " at " + commit +
                             ": the tree has an entry /src/.GIT, which git itself refuses to check out");
  CHECK(r.error().code == ExitCode::invalid_input);
}

TEST_CASE("a vendored tree export replays to the bytes of the commit's export", "[git_source]") {
  GitRepoFixture f;
  const std::string url = f.src.string();
  auto digest = git_export_digest(f.store, url, f.c2);
  REQUIRE(digest);
  auto blobs = BlobStore::open(f.dir() / "blobs");
  REQUIRE(blobs);
  auto stored = store_git_export(*blobs, url, f.c2, "v2", *digest);
  REQUIRE(stored);
  CHECK(stored->digest == digest->sha256);
  CHECK(static_cast<std::uint64_t>(stored->size) == digest->size);
  // Another lock's sha256 for the same commit: refused, nothing stored.
  auto wrong = store_git_export(*blobs, url, f.c2, "", GitTreeDigest{sha256_of("x"), digest->size});
  CHECK(message_of(wrong).find("is no longer the one the lock pins") != std::string::npos);
  CHECK_FALSE(blobs->has(sha256_of("x")));

  // The repository gone, the export in another place, options as a build sets them.
  fs::rename(f.src, f.dir() / "gone");
  REQUIRE(git_commit_cached(f.store, url, f.c2));
  CHECK(*git_commit_cached(f.store, url, f.c2));
  CHECK_FALSE(*git_commit_cached(f.dir() / "empty-store", url, f.c2));
  GitExportOptions opt;
  opt.to = "/opt/src";
  opt.epoch = 1700000000;
  opt.uid = 1000;
  opt.gid = 100;
  const std::string from_commit = export_tar(f.store, url, f.c2, opt);
  test::StringSink sink;
  TarWriter tar(sink);
  log::Progress progress("replay", 0);
  std::set<std::string> seen;
  auto bytes = export_git_archive(tar, progress, blobs->blob_path(digest->sha256), opt, seen, "vendored");
  INFO((bytes ? "" : bytes.error().message));
  REQUIRE(bytes);
  tar.finish();
  CHECK(*bytes == 6 + 2 + 3 + 5 + 18);
  CHECK(sink.out == from_commit);
  CHECK(seen.count("opt/src/run.sh") == 1);
}

TEST_CASE("a tree export holding what no git tree has is refused", "[git_source]") {
  test::TempDirFixture f;
  const auto refused = [&](const std::vector<TarEntry>& members) {
    test::StringSink sink;
    {
      TarWriter tar(sink);
      for (const TarEntry& m : members) {
        tar.add(m);
        if (m.type == TarEntry::Type::file && m.size > 0) {
          tar.write_data(std::string(static_cast<std::size_t>(m.size), 'a').data(),
                         static_cast<std::size_t>(m.size));
        }
      }
      tar.finish();
    }
    f.write("x.tar", sink.out);
    ExportTarget t;
    auto r = export_git_archive(t.tar, t.progress, f.dir() / "x.tar", t.opt, t.seen, "vendored x");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    return r.error().message;
  };
  TarEntry setuid;
  setuid.path = "bin";
  setuid.mode = 04755;
  setuid.size = 1;
  CHECK(refused({setuid}) == "vendored x: member 'bin' is a file with mode 4755, which no git tree export "
                             "holds; refusing it");
  TarEntry dev;
  dev.path = "null";
  dev.type = TarEntry::Type::char_device;
  CHECK(refused({dev}).find("a hard link or special file") != std::string::npos);
  TarEntry dotgit;
  dotgit.path = ".git";
  dotgit.type = TarEntry::Type::dir;
  dotgit.mode = 0755;
  CHECK(refused({dotgit}).find("which git itself refuses to check out") != std::string::npos);
  TarEntry file;
  file.path = "a";
  file.size = 1;
  CHECK(refused({file, file}) == "vendored x: /src/a is already in this layer (another source provides it)");
}

TEST_CASE("the export fingerprint names the commit and the options", "[git_source]") {
  GitExportOptions opt;
  opt.to = "/opt/src/";
  opt.epoch = 7;
  const std::string commit(40, 'b');
  CHECK(git_export_fingerprint(commit, opt) ==
        "git-export v1\ncommit " + commit + "\nto /opt/src\nepoch 7\nowner 0:0\n");
  GitExportOptions other = opt;
  other.uid = 1000;
  CHECK(git_export_fingerprint(commit, other) != git_export_fingerprint(commit, opt));
}

TEST_CASE("git:// sources are fetched from git daemon", "[git_source]") {
  if (!have_git_daemon()) {
    WARN("git daemon is not installed (Debian: git-daemon-run or git's git-daemon); git:// is not tested");
    return;
  }
  GitRepoFixture f;
  test::run_command("cd " + quote(f.dir()) + " && git clone -q --bare src served.git >&2");
  GitDaemon daemon(f.dir(), free_port());
  const std::string url = daemon.url("served.git");
  CHECK(*resolve_git_rev(f.store, url, "v2") == f.c2);
  CHECK(*resolve_git_rev(f.store, url, "dev") == f.c1);
  // git daemon refuses commits by id (no uploadpack.allowReachableSHA1InWant): an untagged commit
  // is found by fetching every branch and tag.
  const fs::path fresh = f.dir() / "fresh";
  CHECK(ensure_git_commit(fresh, url, f.c0));
  CHECK(*resolve_git_rev(fresh, url, f.c0) == f.c0);
  // With the lock's revision as a hint, only that ref is fetched.
  const fs::path hinted = f.dir() / "hinted";
  CHECK(ensure_git_commit(hinted, url, f.c1, "dev"));
  CHECK(test::run_command("git -C " + quote(git_cache_dir(hinted, url)) +
                          " for-each-ref --format='%(refname)'") ==
        "refs/lockstep/commits/" + f.c1 + "\nrefs/lockstep/fetch\n");
  GitExportOptions opt;
  opt.to = "/src";
  CHECK(export_tar(f.dir() / "fresh2", url, f.c2, opt) ==
        export_tar(f.dir() / "local", f.src.string(), f.c2, opt));
  auto r = resolve_git_rev(f.store, daemon.url("absent.git"), "main");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
}

TEST_CASE("credentials in a URL never reach messages", "[git_source]") {
  test::TempDirFixture f;
  const std::string url = "http://user:s3cret@127.0.0.1:" + std::to_string(free_port()) + "/repo.git";
  auto r = resolve_git_rev(f.dir(), url, "main");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK(r.error().message.find("s3cret") == std::string::npos);
  CHECK(r.error().message.rfind("can't connect to http://127.0.0.1:", 0) == 0);
  CHECK(git_cache_dir(f.dir(), url) ==
        git_cache_dir(f.dir(), "http://127.0.0.1:" + url.substr(url.rfind(':') + 1)));
}
