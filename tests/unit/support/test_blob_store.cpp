#include "support/blob_store.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <thread>
#include <vector>

using namespace lockstep;
namespace fs = std::filesystem;

TEST_CASE("a blob is stored under its sha256, read back verified, and read-only", "[store]") {
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  auto info = store->put("hello");
  REQUIRE(info);
  CHECK(info->digest == sha256_of("hello"));
  CHECK(info->size == 5);
  CHECK(store->has(info->digest, 5));
  CHECK_FALSE(store->has(info->digest, 6));
  CHECK(*store->read(info->digest) == "hello");
  struct stat st {};
  REQUIRE(::stat(store->blob_path(info->digest).c_str(), &st) == 0);
  CHECK((st.st_mode & 0222) == 0);
}

TEST_CASE("a killed write leaves no visible blob", "[store]") {
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto w = store->begin_write();
    std::string chunk(1 << 20, 'x');
    for (int i = 0; i < 8; ++i) {
      (void)w->write(chunk);
    }
    ::raise(SIGKILL); // dies mid-write, before commit
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  CHECK(test::count_files(tmp.dir() / "cache" / "blobs") == 0);
  // What the killed writer left is only a temporary file, outside blobs/.
  CHECK(test::count_files(tmp.dir() / "cache" / "tmp") == 1);
}

TEST_CASE("a blob whose content does not match the expected digest is not published", "[store]") {
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  auto w = store->begin_write();
  REQUIRE(w);
  REQUIRE(w->write("evil"));
  Digest claimed = sha256_of("good");
  auto r = w->commit(claimed);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message ==
        "digest mismatch: expected " + claimed.str() + ", got " + sha256_of("evil").str() + " (4 bytes)");
  CHECK_FALSE(store->has(claimed));
  CHECK_FALSE(store->has(sha256_of("evil")));
  CHECK(test::count_files(tmp.dir() / "cache") == 0);
}

TEST_CASE("a corrupt blob is detected on read and removed", "[store]") {
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  auto info = store->put("original");
  REQUIRE(info);
  fs::path p = store->blob_path(info->digest);
  ::chmod(p.c_str(), 0644);
  tmp.write("cache/blobs/sha256/" + info->digest.hex(), "tampered");
  auto r = store->read(info->digest);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("is corrupt") != std::string::npos);
  CHECK_FALSE(fs::exists(p));
}

TEST_CASE("concurrent writers of the same blob both succeed with one copy", "[store]") {
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  std::string data(3 << 20, 'z');
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto w = store->begin_write();
      if (!w) {
        return;
      }
      for (std::size_t off = 0; off < data.size(); off += 65536) {
        (void)w->write(data.data() + off, 65536);
      }
      ok[static_cast<std::size_t>(i)] = w->commit(sha256_of(data)) ? 1 : 0;
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (int v : ok) {
    CHECK(v == 1);
  }
  CHECK(test::count_files(tmp.dir() / "cache") == 1);
  CHECK(store->read(sha256_of(data), 8 << 20));
}

TEST_CASE("records are written atomically and read back", "[store]") {
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  CHECK_FALSE(store->get_record("layers", "abc"));
  REQUIRE(store->put_record("layers", "abc", "{\"x\":1}"));
  CHECK(*store->get_record("layers", "abc") == "{\"x\":1}");
}
