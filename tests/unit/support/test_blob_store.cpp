#include "support/store/blob_store.hpp"
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

TEST_CASE("a partial download a killed process left is continued, and removed once the blob is stored",
          "[store]") {
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  const std::string blob = "the whole blob, downloaded in two processes";
  const Digest d = sha256_of(blob);
  const fs::path partial = tmp.dir() / "cache" / "tmp" / ("partial-sha256-" + d.hex());
  {
    auto first = store->resume_write(d, static_cast<std::int64_t>(blob.size()));
    REQUIRE(first);
    CHECK(first->resumed() == 0);
    REQUIRE(first->write(blob.substr(0, 10)));
    CHECK(fs::exists(partial));
    // A write that ends without a commit (an error, SIGINT) removes it; a killed process can't.
  }
  CHECK_FALSE(fs::exists(partial));
  tmp.write("cache/tmp/partial-sha256-" + d.hex(), blob.substr(0, 10)); // what a killed process leaves
  auto second = store->resume_write(d, static_cast<std::int64_t>(blob.size()));
  REQUIRE(second);
  CHECK(second->resumed() == 10);
  // Another writer of the same blob meanwhile gets a file of its own (the partial one is locked).
  auto other = store->resume_write(d, static_cast<std::int64_t>(blob.size()));
  REQUIRE(other);
  CHECK(other->resumed() == 0);
  REQUIRE(second->write(blob.substr(10)));
  auto info = second->commit(d, static_cast<std::int64_t>(blob.size()));
  REQUIRE(info);
  CHECK(*store->read(d) == blob);
  CHECK_FALSE(fs::exists(partial));
  struct stat st {};
  REQUIRE(::stat(store->blob_path(d).c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);

  // A partial file of a blob stored some other way is removed by that store.
  const std::string b2 = "another blob";
  const Digest d2 = sha256_of(b2);
  const fs::path partial2 = tmp.dir() / "cache" / "tmp" / ("partial-sha256-" + d2.hex());
  tmp.write("cache/tmp/partial-sha256-" + d2.hex(), "anot");
  REQUIRE(store->put(b2));
  CHECK_FALSE(fs::exists(partial2));
  // One longer than the blob starts over.
  const std::string b3 = "third";
  const Digest d3 = sha256_of(b3);
  tmp.write("cache/tmp/partial-sha256-" + d3.hex(), "far too long for it");
  auto third = store->resume_write(d3, 5);
  REQUIRE(third);
  CHECK(third->resumed() == 0);
  REQUIRE(third->write(b3));
  REQUIRE(third->commit(d3, 5));
}
