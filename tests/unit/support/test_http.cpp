// Downloads against a tiny HTTP server running in the test process (127.0.0.1, a free port).
#include "support/base/interrupt.hpp"
#include "support/net/host_credentials.hpp"
#include "support/net/http.hpp"
#include "support/net/http_cache.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <netinet/in.h>
#include <thread>

using namespace lockstep;
namespace fs = std::filesystem;

namespace {

// A request as the server saw it.
struct Request {
  std::string path;
  std::map<std::string, std::string> headers; // names lowercased
};

std::string response(int code, const std::string& reason, const std::string& body,
                     const std::string& extra_headers = "") {
  return "HTTP/1.1 " + std::to_string(code) + " " + reason +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n" + extra_headers +
         "\r\n" + body;
}
std::string ok(const std::string& body) {
  return response(200, "OK", body);
}
std::string redirect(const std::string& location) {
  return response(302, "Found", "moved", "Location: " + location + "\r\n");
}

// An HTTP/1.1 server on 127.0.0.1 answering one connection at a time from a routing table. Each
// handler returns the raw response bytes; unknown paths get a 404. Start::later binds the port but
// starts serving only at start(), so a test can fork while the process still has one thread.
class TestServer {
public:
  using Handler = std::function<std::string(const Request&)>;
  enum class Start { now, later };

  explicit TestServer(Start when = Start::now) {
    // A proxy in the environment must not intercept requests to the test server.
    ::setenv("no_proxy", "127.0.0.1", 1);
    ::setenv("NO_PROXY", "127.0.0.1", 1);
    m_listen = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(m_listen >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(::bind(m_listen, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(m_listen, 64) == 0);
    socklen_t len = sizeof(addr);
    REQUIRE(::getsockname(m_listen, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    m_port = ntohs(addr.sin_port);
    if (when == Start::now) {
      start();
    }
  }
  ~TestServer() {
    m_stop = true;
    if (m_thread.joinable()) {
      m_thread.join();
    }
    ::close(m_listen);
  }
  void start() {
    m_thread = std::thread([this] { serve(); });
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  void route(const std::string& path, Handler handler) {
    std::lock_guard lock(m_mutex);
    m_routes[path] = std::move(handler);
  }
  void route(const std::string& path, const std::string& raw_response) {
    route(path, [raw_response](const Request&) { return raw_response; });
  }
  [[nodiscard]] std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(m_port) + path;
  }
  [[nodiscard]] int hits(const std::string& path) {
    std::lock_guard lock(m_mutex);
    return m_hits[path];
  }
  [[nodiscard]] Request last(const std::string& path) {
    std::lock_guard lock(m_mutex);
    return m_last[path];
  }

private:
  void serve() {
    while (!m_stop) {
      pollfd p{m_listen, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) {
        continue;
      }
      int fd = ::accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        handle(fd);
        ::close(fd);
      }
    }
  }

  void handle(int fd) {
    std::string in;
    char buf[4096];
    while (in.find("\r\n\r\n") == std::string::npos && in.size() < 65536) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) {
        return;
      }
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n <= 0) {
        return;
      }
      in.append(buf, static_cast<std::size_t>(n));
    }
    Request req;
    auto sp1 = in.find(' ');
    auto sp2 = in.find(' ', sp1 + 1);
    req.path = in.substr(sp1 + 1, sp2 - sp1 - 1);
    for (auto pos = in.find("\r\n") + 2; pos < in.size();) {
      auto eol = in.find("\r\n", pos);
      std::string line = in.substr(pos, eol - pos);
      pos = eol + 2;
      auto colon = line.find(':');
      if (line.empty() || colon == std::string::npos) {
        break;
      }
      std::string name = line.substr(0, colon);
      for (char& c : name) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      req.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    Handler handler;
    {
      std::lock_guard lock(m_mutex);
      ++m_hits[req.path];
      m_last[req.path] = req;
      auto it = m_routes.find(req.path);
      if (it != m_routes.end()) {
        handler = it->second;
      }
    }
    std::string out = handler ? handler(req) : response(404, "Not Found", "no such file");
    for (std::size_t off = 0; off < out.size();) {
      ssize_t n = ::send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        break;
      }
      off += static_cast<std::size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    // Let the client read everything before the socket closes (a close with unread input resets).
    while (true) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 1000) <= 0 || ::read(fd, buf, sizeof(buf)) <= 0) {
        break;
      }
    }
  }

  int m_listen = -1;
  int m_port = 0;
  std::atomic<bool> m_stop{false};
  std::thread m_thread;
  std::mutex m_mutex;
  std::map<std::string, Handler> m_routes;
  std::map<std::string, int> m_hits;
  std::map<std::string, Request> m_last;
};

// Retries without the production backoff, so the suite stays fast.
FetchOptions fast(std::uint64_t max_size = 1 << 20) {
  FetchOptions o;
  o.max_size = max_size;
  o.retry_delay_ms = 10;
  return o;
}

// Options that let local files under `root` be read.
FetchOptions reading(const fs::path& root, std::uint64_t max_size = 1 << 20) {
  FetchOptions o = fast(max_size);
  o.local_roots = {root};
  return o;
}

} // namespace

TEST_CASE("http_get returns the body of a 200 response and names lockstep as the user agent", "[http]") {
  TestServer server;
  server.route("/index", ok("Package: hello\n"));
  auto body = http_get(server.url("/index"), 1 << 20);
  REQUIRE(body);
  CHECK(*body == "Package: hello\n");
  CHECK(server.last("/index").headers["user-agent"].rfind("lockstep/", 0) == 0);
}

TEST_CASE("a 404 says not found, names the URL and is not retried", "[http]") {
  TestServer server;
  auto r = http_get(server.url("/missing"), fast());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK(r.error().message == "can't download " + server.url("/missing") + ": not found (HTTP 404)");
  CHECK(server.hits("/missing") == 1);
}

TEST_CASE("a 500 is retried and the later success is returned", "[http]") {
  TestServer server;
  std::atomic<int> calls{0};
  server.route("/flaky", [&](const Request&) {
    return ++calls == 1 ? response(500, "Internal Server Error", "oops") : ok("fine");
  });
  auto body = http_get(server.url("/flaky"), fast());
  REQUIRE(body);
  CHECK(*body == "fine");
  CHECK(server.hits("/flaky") == 2);
}

TEST_CASE("a server that keeps failing is given up on after the retries", "[http]") {
  TestServer server;
  server.route("/down", response(503, "Service Unavailable", "busy"));
  auto r = http_get(server.url("/down"), fast());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK(r.error().message == "can't download " + server.url("/down") +
                                 ": the server answered HTTP 503 (gave up after 4 attempts)");
  CHECK(server.hits("/down") == 4);
}

TEST_CASE("a 403 is not retried", "[http]") {
  TestServer server;
  server.route("/secret", response(403, "Forbidden", "no"));
  auto r = http_get(server.url("/secret"), fast());
  REQUIRE_FALSE(r);
  CHECK(r.error().message ==
        "can't download " + server.url("/secret") + ": the server answered HTTP 403; " +
            server.url("").substr(7) +
            " wants credentials: lockstep sends those of its entry in ~/.netrc (or the "
            "file $NETRC names), as curl, pip and conda do, or in the credentials file pixi and rattler keep "
            "($RATTLER_AUTH_FILE, else ~/.rattler/credentials.json: a conda token, bearer token or user and "
            "password per host; docs/conda.md, \"Channels\")");
  CHECK(server.hits("/secret") == 1);
}

TEST_CASE("redirects to http are followed and the redirect's own body is dropped", "[http]") {
  TestServer server;
  server.route("/old", redirect("/middle"));
  server.route("/middle", redirect(server.url("/new")));
  server.route("/new", ok("new content"));
  auto body = http_get(server.url("/old"), fast());
  REQUIRE(body);
  CHECK(*body == "new content");
}

TEST_CASE("a redirect to a file URL is refused", "[http]") {
  TestServer server;
  server.route("/evil", redirect("file:///etc/passwd"));
  auto r = http_get(server.url("/evil"), fast());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK_THAT(r.error().message,
             Catch::StartsWith("can't download " + server.url("/evil") +
                               ": the server redirected to a URL that is not http or https"));
  CHECK(server.hits("/evil") == 1);
}

TEST_CASE("more than five redirects are refused", "[http]") {
  TestServer server;
  server.route("/loop", redirect("/loop"));
  auto r = http_get(server.url("/loop"), fast());
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "can't download " + server.url("/loop") + ": more than 5 redirects");
  CHECK(server.hits("/loop") == 6);
}

TEST_CASE("a body shorter than its Content-Length fails after the retries", "[http]") {
  TestServer server;
  server.route("/short", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly ten b");
  auto r = http_get(server.url("/short"), fast());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK_THAT(r.error().message, Catch::StartsWith("can't download " + server.url("/short") + ": "));
  CHECK_THAT(r.error().message, Catch::Contains("(curl error 18)") && Catch::EndsWith("after 4 attempts)"));
  CHECK(server.hits("/short") == 4);
}

TEST_CASE("a server that sends nothing for the stall timeout fails, saying so", "[http]") {
  TestServer server;
  server.route("/stall", [](const Request&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    return ok("late");
  });
  FetchOptions o = fast();
  o.low_speed_timeout_s = 1;
  o.retries = 0;
  // The server answers after 3 s: a failure is the watch firing before it.
  auto r = http_get(server.url("/stall"), o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK(r.error().message == "can't download " + server.url("/stall") + ": timed out: nothing moved for 1 s");
}

TEST_CASE("a body larger than the limit is refused, announced or not", "[http]") {
  TestServer server;
  server.route("/big", ok(std::string(100, 'x')));
  // No Content-Length: the body ends when the connection closes.
  server.route("/big-unannounced", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + std::string(100, 'x'));
  auto announced = http_get(server.url("/big"), fast(10));
  REQUIRE_FALSE(announced);
  CHECK(announced.error().code == ExitCode::invalid_input);
  CHECK(announced.error().message ==
        server.url("/big") + " has 100 bytes, larger than the 10 bytes allowed; not downloaded");
  auto streamed = http_get(server.url("/big-unannounced"), fast(10));
  REQUIRE_FALSE(streamed);
  CHECK(streamed.error().code == ExitCode::invalid_input);
  CHECK(streamed.error().message ==
        server.url("/big-unannounced") + " is larger than the 10 bytes allowed; the download was stopped");
  CHECK(server.hits("/big-unannounced") == 1);
}

TEST_CASE("credentials in a URL never appear in messages", "[http]") {
  TestServer server;
  std::string url = server.url("/private");
  url.insert(url.find("127.0.0.1"), "user:hunter2@");
  auto r = http_get(url, fast());
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "can't download " + server.url("/private") + ": not found (HTTP 404)");
}

TEST_CASE("file URLs and absolute paths are read locally, percent-decoded", "[http]") {
  test::TempDirFixture tmp;
  fs::path file = tmp.write("a dir/Packages", "Package: local\n");
  std::string encoded = (tmp.dir() / "a%20dir" / "Packages").string();
  CHECK(*http_get("file://" + encoded, reading(tmp.dir())) == "Package: local\n");
  CHECK(*http_get("file://localhost" + encoded, reading(tmp.dir())) == "Package: local\n");
  CHECK(*http_get(file.string(), reading(tmp.dir())) == "Package: local\n");

  auto missing = http_get("file://" + (tmp.dir() / "nope").string(), reading(tmp.dir()));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ExitCode::io);
  CHECK(missing.error().message == "can't read file://" + (tmp.dir() / "nope").string() + ": not found");

  auto dir = http_get(tmp.dir().string(), reading(tmp.dir()));
  REQUIRE_FALSE(dir);
  CHECK(dir.error().message == tmp.dir().string() + " is not a regular file");

  auto big = http_get(file.string(), reading(tmp.dir(), 4));
  REQUIRE_FALSE(big);
  CHECK(big.error().code == ExitCode::invalid_input);
  CHECK_THAT(big.error().message,
             Catch::Equals(file.string() + " has 15 bytes, larger than the 4 bytes allowed; not downloaded"));
}

TEST_CASE("a local file outside the local roots is refused before it is opened", "[http]") {
  test::TempDirFixture tmp;
  const fs::path secret = tmp.write("outside/shadow", "root:$6$SECRET-HASH:19000:0:99999:7:::\n");
  const fs::path inside = tmp.dir() / "project";
  fs::create_directories(inside);
  fs::create_symlink(secret, inside / "link.deb");
  REQUIRE(::mkfifo((tmp.dir() / "outside/fifo").c_str(), 0600) == 0);
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  const Digest wrong = sha256_of("what the lock says");
  for (const std::string& url :
       {"file://" + secret.string(), secret.string(), (inside / "link.deb").string(),
        "file://" + (inside / "../outside/shadow").string(), (tmp.dir() / "outside/fifo").string()}) {
    INFO(url);
    auto r = fetch_all(*store, {{url, wrong, 40, "ls-lib 1.0-1"}}, reading(inside));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK_THAT(r.error().message,
               Catch::Contains("leads outside the directories local files may be read from (" +
                               inside.string() + "); nothing was read"));
    // Neither its content, nor its size or sha256, nor a blob of it.
    CHECK_THAT(r.error().message, !Catch::Contains("SECRET") &&
                                      !Catch::Contains(sha256_of(test::slurp(secret)).hex()) &&
                                      !Catch::Contains("has 40 bytes"));
  }
  CHECK_FALSE(store->has(sha256_of(test::slurp(secret))));
  CHECK(test::count_files(tmp.dir() / "cache") == 0);

  auto none = http_get(secret.string(), fast());
  REQUIRE_FALSE(none);
  CHECK(none.error().message == secret.string() + ": local files are not read here; nothing was read");

  fs::create_directories(tmp.dir() / "repo");
  tmp.write("repo/Packages", "Package: a\n");
  fs::create_symlink(tmp.dir() / "repo", inside / "repo");
  // A symlink inside the root leads outside it; a root reached through a symlink is where it leads.
  auto via_link = http_get((inside / "repo/Packages").string(), reading(inside));
  REQUIRE_FALSE(via_link);
  CHECK(via_link.error().code == ExitCode::invalid_input);
  CHECK(*http_get((inside / "repo/Packages").string(), reading(inside / "repo")) == "Package: a\n");
}

TEST_CASE("local_url_path names the local file of a URL", "[http]") {
  CHECK(*local_url_path("/a/b") == fs::path("/a/b"));
  CHECK(*local_url_path("file:///a/b%20c") == fs::path("/a/b c"));
  CHECK(*local_url_path("file://localhost/a") == fs::path("/a"));
  CHECK(*local_url_path("https://example.org/x") == std::nullopt);
  CHECK(local_url_path("file://otherhost/etc/passwd").error().code == ExitCode::invalid_input);
}

TEST_CASE("unsupported and malformed URLs are invalid input", "[http]") {
  auto ftp = http_get("ftp://example.invalid/x", 1 << 20);
  REQUIRE_FALSE(ftp);
  CHECK(ftp.error().code == ExitCode::invalid_input);
  CHECK(ftp.error().message ==
        "ftp://example.invalid/x: unsupported URL (use http://, https://, file:// or an absolute path)");
  CHECK(http_get("relative/path", 1 << 20).error().code == ExitCode::invalid_input);
  CHECK(http_get("file://otherhost/etc/passwd", 1 << 20).error().message ==
        "file://otherhost/etc/passwd: a file URL must name an absolute path on this machine (file:///PATH)");
  CHECK(http_get("file:///tmp/%00x", 1 << 20).error().message ==
        "file:///tmp/%00x: bad percent-encoding in the file URL");
  CHECK(http_get("http://127.0.0.1/a b", 1 << 20).error().code == ExitCode::invalid_input);
}

TEST_CASE("fetch_all stores every file and returns them in input order", "[http]") {
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  TestServer server;
  std::vector<Download> downloads;
  for (int i = 0; i < 12; ++i) {
    std::string body = "file " + std::to_string(i) + std::string(static_cast<std::size_t>(i) * 1000, 'x');
    server.route("/f" + std::to_string(i), ok(body));
    Download d{server.url("/f" + std::to_string(i)), std::nullopt, std::nullopt, "f" + std::to_string(i)};
    if (i % 2 == 0) { // half with the lock's digest and size
      d.sha256 = sha256_of(body);
      d.size = body.size();
    }
    downloads.push_back(d);
  }
  fs::path local = tmp.write("local.deb", "a local file");
  downloads.push_back({"file://" + local.string(), sha256_of("a local file"), 12, "local"});

  auto blobs = fetch_all(*store, downloads, reading(tmp.dir()));
  REQUIRE(blobs);
  REQUIRE(blobs->size() == downloads.size());
  for (int i = 0; i < 12; ++i) {
    std::string body = "file " + std::to_string(i) + std::string(static_cast<std::size_t>(i) * 1000, 'x');
    CHECK((*blobs)[static_cast<std::size_t>(i)].digest == sha256_of(body));
    CHECK((*blobs)[static_cast<std::size_t>(i)].size == static_cast<std::int64_t>(body.size()));
    CHECK(*store->read(sha256_of(body)) == body);
  }
  CHECK(blobs->back().digest == sha256_of("a local file"));

  // Everything with a known digest is in the store now: a second run downloads only the others.
  auto again = fetch_all(*store, downloads, reading(tmp.dir()));
  REQUIRE(again);
  CHECK(server.hits("/f0") == 1);
  CHECK(server.hits("/f1") == 2);
  CHECK((*again)[0].digest == (*blobs)[0].digest);
  CHECK((*again)[0].size == (*blobs)[0].size);
}

TEST_CASE("a sha256 mismatch stores nothing and says what the lock expected", "[http]") {
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  TestServer server;
  server.route("/pkg.deb", ok("tampered"));
  Digest locked = sha256_of("original");
  auto r = fetch_all(*store, {{server.url("/pkg.deb"), locked, std::nullopt, "ls-lib 1.0-1"}}, fast());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message == "ls-lib 1.0-1 (" + server.url("/pkg.deb") + ") has " +
                                 sha256_of("tampered").str() + ", the lock says " + locked.str() +
                                 ": the file was changed on the server or in transit; nothing was stored. "
                                 "Lock again if the change is expected");
  CHECK_FALSE(store->has(sha256_of("tampered")));
  CHECK_FALSE(store->has(locked));
  CHECK(test::count_files(tmp.dir() / "cache") == 0);
  CHECK(server.hits("/pkg.deb") == 1);
}

TEST_CASE("a size other than the lock's is refused, larger or smaller", "[http]") {
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  TestServer server;
  server.route("/grown", ok("0123456789"));
  server.route("/shrunk", ok("0123"));
  auto grown = fetch_all(*store, {{server.url("/grown"), std::nullopt, 5, "grown"}}, fast());
  REQUIRE_FALSE(grown);
  CHECK(grown.error().code == ExitCode::invalid_input);
  CHECK(grown.error().message == "grown (" + server.url("/grown") +
                                     ") has more than 5 bytes, the lock says 5: the file was changed on the "
                                     "server or in transit; nothing was stored");
  auto shrunk = fetch_all(*store, {{server.url("/shrunk"), std::nullopt, 5, "shrunk"}}, fast());
  REQUIRE_FALSE(shrunk);
  CHECK(shrunk.error().message ==
        "shrunk (" + server.url("/shrunk") +
            ") has 4 bytes, the lock says 5: the file was changed on the server or in "
            "transit; nothing was stored");
  auto huge = fetch_all(*store, {{server.url("/grown"), std::nullopt, 1ULL << 40, "huge"}}, fast());
  REQUIRE_FALSE(huge);
  CHECK(huge.error().message ==
        "huge (" + server.url("/grown") +
            "): the lock says it has 1099511627776 bytes, more than the limit of 1048576 "
            "bytes for one download");
  CHECK(server.hits("/grown") == 1);
  CHECK(test::count_files(tmp.dir() / "cache") == 0);
}

TEST_CASE("fetch_all tries every download and lists all failures in input order", "[http]") {
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  TestServer server;
  server.route("/good", ok("good"));
  auto r = fetch_all(*store,
                     {{server.url("/gone-a"), std::nullopt, std::nullopt, "a"},
                      {server.url("/good"), std::nullopt, std::nullopt, "good"},
                      {server.url("/gone-b"), std::nullopt, std::nullopt, "b"}},
                     fast());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK(r.error().message == "2 of 3 downloads failed:\n  can't download a (" + server.url("/gone-a") +
                                 "): not found (HTTP 404)\n  can't download b (" + server.url("/gone-b") +
                                 "): not found (HTTP 404)");
  // The good one was still stored, so the next attempt need not fetch it again.
  CHECK(store->has(sha256_of("good")));
}

TEST_CASE("a connection refused is a network error naming the URL", "[http]") {
  // Bind a port and close it again: nothing listens there afterwards.
  int port = 0;
  {
    TestServer server;
    port = std::stoi(server.url("").substr(std::string("http://127.0.0.1:").size()));
  }
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/x";
  FetchOptions o = fast();
  o.retries = 1;
  auto r = http_get(url, o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ExitCode::external);
  CHECK_THAT(r.error().message, Catch::StartsWith("can't download " + url + ": ") &&
                                    Catch::Contains("(curl error 7)") &&
                                    Catch::EndsWith("(gave up after 2 attempts)"));
}

TEST_CASE("an interrupt stops a download in flight and stores nothing", "[http]") {
  test::TempDirFixture tmp;
  // The server thread starts after the fork: a child forked from a process with a second thread may
  // inherit a lock that thread held (the allocator's, the sanitizer's) and hang on it.
  TestServer server(TestServer::Start::later);
  server.route("/slow", [](const Request&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return ok("late");
  });
  // In a child process: the interrupt flag is process-wide and must not leak into other tests.
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(60); // a hang fails the test (killed by SIGALRM) instead of stalling the suite
    install_interrupt_handlers();
    std::thread signaller([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ::kill(::getpid(), SIGINT);
    });
    auto store = BlobStore::open(tmp.dir() / "cache");
    auto r = fetch_all(*store, {{server.url("/slow"), std::nullopt, std::nullopt, "slow"}}, fast());
    signaller.join();
    const bool ok =
        !r && r.error().code == ExitCode::interrupted && test::count_files(tmp.dir() / "cache") == 0;
    ::_exit(ok ? 0 : 1);
  }
  server.start();
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

// ---- the HTTP cache (support/http_cache) ------------------------------------------------------------

TEST_CASE("cache_lifetime takes max-age and refuses what must be revalidated", "[http][http_cache]") {
  CHECK(cache_lifetime("max-age=600, public") == 600U);
  CHECK(cache_lifetime("public,MAX-AGE=\"30\"") == 30U);
  CHECK_FALSE(cache_lifetime(""));
  CHECK_FALSE(cache_lifetime("public"));
  CHECK_FALSE(cache_lifetime("max-age=0"));
  CHECK_FALSE(cache_lifetime("max-age=600, no-cache"));
  CHECK_FALSE(cache_lifetime("no-store, max-age=600"));
  CHECK_FALSE(cache_lifetime("max-age=ten"));
  CHECK_FALSE(cache_lifetime("max-age=-5"));
}

TEST_CASE("cached_get reuses a fresh page without a request, and refresh or staleness asks again",
          "[http][http_cache]") {
  TestServer server;
  std::atomic<int> calls{0};
  server.route("/fresh/", [&](const Request&) {
    ++calls;
    return response(200, "OK", "page " + std::to_string(calls.load()),
                    "Cache-Control: max-age=600, public\r\n");
  });
  server.route("/aged/", [&](const Request&) {
    return response(200, "OK", "aged", "Cache-Control: max-age=600\r\nAge: 600\r\n");
  });
  server.route("/nocache/", [&](const Request&) { return ok("plain"); });
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  CacheUse use = CacheUse::reused;
  auto first = cached_get(*store, server.url("/fresh/"), fast(), false, &use);
  REQUIRE(first);
  CHECK(*first == "page 1");
  CHECK(use == CacheUse::fetched);
  auto second = cached_get(*store, server.url("/fresh/"), fast(), false, &use);
  REQUIRE(second);
  CHECK(*second == "page 1");
  CHECK(use == CacheUse::reused);
  CHECK(server.hits("/fresh/") == 1);
  // Another Accept is another entry.
  FetchOptions json = fast();
  json.headers.emplace_back("Accept: application/vnd.pypi.simple.v1+json");
  REQUIRE(cached_get(*store, server.url("/fresh/"), json, false, &use));
  CHECK(use == CacheUse::fetched);
  auto refreshed = cached_get(*store, server.url("/fresh/"), fast(), true, &use);
  REQUIRE(refreshed);
  CHECK(*refreshed == "page 3");
  CHECK(use == CacheUse::fetched);
  // Cache-Control over several lines is one list; a line too long to keep is left out.
  server.route("/split/", [&](const Request&) {
    return response(200, "OK", "split",
                    "Cache-Control: public\r\nCache-Control: x-" + std::string(5000, 'a') +
                        "\r\nCache-Control: max-age=60\r\n");
  });
  REQUIRE(cached_get(*store, server.url("/split/"), fast(), false, &use));
  REQUIRE(cached_get(*store, server.url("/split/"), fast(), false, &use));
  CHECK(use == CacheUse::reused);
  CHECK(server.hits("/split/") == 1);
  // Already as old as its max-age when it arrived, or without caching headers: asked each time.
  for (const char* path : {"/aged/", "/nocache/"}) {
    REQUIRE(cached_get(*store, server.url(path), fast(), false, &use));
    REQUIRE(cached_get(*store, server.url(path), fast(), false, &use));
    CHECK(use == CacheUse::fetched);
    CHECK(server.hits(path) == 2);
  }
}

TEST_CASE("cached_get revalidates a kept page with its ETag or Last-Modified and reuses it on 304",
          "[http][http_cache]") {
  TestServer server;
  std::atomic<int> version{1};
  // A conda channel's repodata.json: an ETag, no max-age; 304 when the client's ETag is current.
  server.route("/linux-64/repodata.json", [&](const Request& r) {
    const std::string etag = "\"v" + std::to_string(version.load()) + "\"";
    auto it = r.headers.find("if-none-match");
    if (it != r.headers.end() && it->second == etag) {
      return response(304, "Not Modified", "", "ETag: " + etag + "\r\n");
    }
    return response(200, "OK", "index " + std::to_string(version.load()), "ETag: " + etag + "\r\n");
  });
  server.route("/dated", [&](const Request& r) {
    if (r.headers.count("if-modified-since") != 0 &&
        r.headers.at("if-modified-since") == "Wed, 21 Oct 2026 07:28:00 GMT") {
      return response(304, "Not Modified", "");
    }
    return response(200, "OK", "dated", "Last-Modified: Wed, 21 Oct 2026 07:28:00 GMT\r\n");
  });
  server.route("/secret", [&](const Request&) {
    return response(200, "OK", "secret", "ETag: \"s\"\r\nCache-Control: no-store\r\n");
  });
  test::TempDirFixture tmp;
  auto store = BlobStore::open(tmp.dir() / "cache");
  REQUIRE(store);
  const std::string url = server.url("/linux-64/repodata.json");
  CacheUse use = CacheUse::reused;
  auto first = cached_get(*store, url, fast(), false, &use);
  REQUIRE(first);
  CHECK(*first == "index 1");
  CHECK(use == CacheUse::fetched);
  CHECK(server.last("/linux-64/repodata.json").headers.count("if-none-match") == 0);
  auto second = cached_get(*store, url, fast(), false, &use);
  REQUIRE(second);
  CHECK(*second == "index 1");
  CHECK(use == CacheUse::revalidated);
  CHECK(server.last("/linux-64/repodata.json").headers.at("if-none-match") == "\"v1\"");
  // The channel changes: the conditional request gets the new body, which is kept in turn.
  version = 2;
  auto third = cached_get(*store, url, fast(), true, &use);
  REQUIRE(third);
  CHECK(*third == "index 2");
  CHECK(use == CacheUse::fetched);
  REQUIRE(cached_get(*store, url, fast(), false, &use));
  CHECK(use == CacheUse::revalidated);
  CHECK(server.hits("/linux-64/repodata.json") == 4);
  // Last-Modified works the same way.
  REQUIRE(cached_get(*store, server.url("/dated"), fast(), false, &use));
  auto dated = cached_get(*store, server.url("/dated"), fast(), false, &use);
  REQUIRE(dated);
  CHECK(*dated == "dated");
  CHECK(use == CacheUse::revalidated);
  // no-store: never kept, so never revalidated.
  REQUIRE(cached_get(*store, server.url("/secret"), fast(), false, &use));
  REQUIRE(cached_get(*store, server.url("/secret"), fast(), false, &use));
  CHECK(use == CacheUse::fetched);
  CHECK(server.last("/secret").headers.count("if-none-match") == 0);
}

TEST_CASE("a 304 to a request without a validator is an error, not an empty body", "[http][http_cache]") {
  TestServer server;
  server.route("/odd", response(304, "Not Modified", ""));
  auto r = http_get(server.url("/odd"), fast());
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "can't download " + server.url("/odd") + ": the server answered HTTP 304");
}

TEST_CASE("a conda token goes into the path after the host, once", "[http][credentials]") {
  CHECK(with_conda_token("https://conda.anaconda.org/private/linux-64/repodata.json", "tk-1") ==
        "https://conda.anaconda.org/t/tk-1/private/linux-64/repodata.json");
  CHECK(with_conda_token("http://127.0.0.1:8000/noarch/x.conda", "tk-1") ==
        "http://127.0.0.1:8000/t/tk-1/noarch/x.conda");
  CHECK(with_conda_token("https://h.example", "tk-1") == "https://h.example/t/tk-1");
  CHECK(with_conda_token("https://h.example/t/other/c/linux-64/x", "tk-1") ==
        "https://h.example/t/other/c/linux-64/x");
}
