// What a rank (`lockstep _rank`) and the node's holder share: the key, the rendezvous name, the
// messages and the descriptor passing (join.hpp).
#include "runner/runtime/join.hpp"

#include "support/system/process.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

extern char** environ; // NOLINT(readability-redundant-declaration)

namespace lockstep::runner::join {

namespace {

// ---- bytes -----------------------------------------------------------------------------------------

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) {
    out += static_cast<char>((v >> (8 * i)) & 0xff);
  }
}

void put_str(std::string& out, std::string_view s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}

void put_list(std::string& out, const std::vector<std::string>& list) {
  put_u32(out, static_cast<std::uint32_t>(list.size()));
  for (const std::string& s : list) {
    put_str(out, s);
  }
}

// Reads what the put_ functions wrote; any read past the end makes ok() false.
class Reader {
public:
  explicit Reader(std::string_view bytes) : m_rest(bytes) {}

  std::uint32_t u32() {
    if (m_rest.size() < 4) {
      m_ok = false;
      return 0;
    }
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      v |= static_cast<std::uint32_t>(static_cast<unsigned char>(m_rest[i])) << (8 * i);
    }
    m_rest.remove_prefix(4);
    return v;
  }
  std::string str() {
    const std::uint32_t n = u32();
    if (!m_ok || n > m_rest.size()) {
      m_ok = false;
      return {};
    }
    std::string s(m_rest.substr(0, n));
    m_rest.remove_prefix(n);
    return s;
  }
  std::vector<std::string> list() {
    const std::uint32_t n = u32();
    std::vector<std::string> out;
    if (n > m_rest.size() / 4) { // each entry takes at least its 4-byte length
      m_ok = false;
      return out;
    }
    out.reserve(n);
    for (std::uint32_t i = 0; i < n && m_ok; ++i) {
      out.push_back(str());
    }
    return out;
  }
  char tag() {
    if (m_rest.empty()) {
      m_ok = false;
      return '\0';
    }
    const char c = m_rest.front();
    m_rest.remove_prefix(1);
    return c;
  }
  // True when everything read was there and nothing is left over.
  [[nodiscard]] bool done() const { return m_ok && m_rest.empty(); }

private:
  std::string_view m_rest;
  bool m_ok = true;
};

constexpr char k_request = 'Q';
constexpr char k_grant = 'G';
constexpr char k_refusal = 'R';
constexpr std::string_view k_key_version = "lockstep-join-key 1";

// 64-bit FNV-1a from `basis`, finished with splitmix64's mixer.
std::uint64_t hash64(std::string_view s, std::uint64_t basis) {
  std::uint64_t h = basis;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

const std::string* find_env(const std::vector<std::string>& env, std::string_view name) {
  for (const std::string& kv : env) {
    if (kv.size() > name.size() && kv[name.size()] == '=' && std::string_view(kv).starts_with(name)) {
      return &kv;
    }
  }
  return nullptr;
}

std::optional<int> positive_int(std::string_view s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) {
    return std::nullopt;
  }
  return v;
}

// "2(x3),1" at node `index` -> 2 (Slurm's compressed tasks-per-node list).
std::optional<int> tasks_at(std::string_view list, int index) {
  while (!list.empty()) {
    const std::size_t comma = std::min(list.find(','), list.size());
    std::string_view item = list.substr(0, comma);
    list.remove_prefix(std::min(comma + 1, list.size()));
    int repeat = 1;
    if (const std::size_t open = item.find("(x"); open != std::string_view::npos) {
      if (!item.ends_with(")")) {
        return std::nullopt;
      }
      std::optional<int> r = positive_int(item.substr(open + 2, item.size() - open - 3));
      if (!r) {
        return std::nullopt;
      }
      repeat = *r;
      item = item.substr(0, open);
    }
    std::optional<int> tasks = positive_int(item);
    if (!tasks) {
      return std::nullopt;
    }
    if (index < repeat) {
      return tasks;
    }
    index -= repeat;
  }
  return std::nullopt;
}

} // namespace

std::optional<std::string> launcher_dir_to_bind(const char* value) {
  if (value == nullptr || value[0] != '/') {
    return std::nullopt;
  }
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::weakly_canonical(value, ec);
  if (ec || !std::filesystem::is_directory(dir, ec) || dir == "/" || dir == "/tmp" ||
      dir.string().starts_with("/tmp/")) {
    return std::nullopt;
  }
  return dir.string();
}

KeyInputs key_inputs(const std::vector<std::string>& argv) {
  KeyInputs in;
  in.argv = argv;
  for (std::string_view name : k_key_environment) {
    const char* v = std::getenv(std::string(name).c_str());
    const bool launcher_dir = std::any_of(k_launcher_dir_variables.begin(), k_launcher_dir_variables.end(),
                                          [name](const char* l) { return name == l; });
    in.env.push_back(launcher_dir ? launcher_dir_to_bind(v)
                                  : (v != nullptr ? std::optional<std::string>(v) : std::nullopt));
  }
  std::array<char, 4096> buf{};
  if (::getcwd(buf.data(), buf.size()) != nullptr) {
    in.cwd = buf.data();
  }
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) == 0) {
    in.host = host.data();
  }
  in.uid = ::geteuid();
  in.gid = ::getegid();
  return in;
}

std::string key_of(const KeyInputs& in) {
  std::string out;
  put_str(out, k_key_version);
  put_list(out, in.argv);
  put_u32(out, static_cast<std::uint32_t>(in.env.size()));
  for (const std::optional<std::string>& v : in.env) {
    put_u32(out, v ? 1 : 0);
    put_str(out, v.value_or(""));
  }
  put_str(out, in.cwd);
  put_str(out, in.host);
  put_u32(out, in.uid);
  put_u32(out, in.gid);
  return out;
}

namespace {

// "\0lockstep-KIND-" and 32 hex digits of a 128-bit hash of `text`: an abstract socket's name.
std::string abstract_name(std::string_view kind, std::string_view text) {
  return fmt::format("{}lockstep-{}-{:016x}{:016x}", '\0', kind, hash64(text, 0xcbf29ce484222325ULL),
                     hash64(text, 0x84222325cbf29ce4ULL));
}

} // namespace

std::string socket_name(std::string_view key) {
  return abstract_name("join", key);
}

std::string encode(const Request& r) {
  std::string out(1, k_request);
  put_str(out, r.key);
  put_list(out, r.env);
  return out;
}

std::string encode_grant(const Grant& g) {
  std::string out(1, k_grant);
  put_list(out, g.argv);
  put_list(out, g.env);
  put_str(out, g.cwd);
  put_u32(out, g.set_ids ? 1 : 0);
  put_u32(out, g.uid);
  put_u32(out, g.gid);
  return out;
}

std::string encode_refusal(std::string_view reason) {
  std::string out(1, k_refusal);
  put_str(out, reason);
  return out;
}

Result<Request> decode_request(std::string_view bytes) {
  Reader in(bytes);
  Request r;
  const char tag = in.tag();
  r.key = in.str();
  r.env = in.list();
  if (tag != k_request || !in.done()) {
    return invalid_input("a malformed request from a rank ({} bytes)", bytes.size());
  }
  return r;
}

Result<Reply> decode_reply(std::string_view bytes) {
  Reader in(bytes);
  Reply r;
  const char tag = in.tag();
  if (tag == k_grant) {
    r.granted = true;
    r.grant.argv = in.list();
    r.grant.env = in.list();
    r.grant.cwd = in.str();
    r.grant.set_ids = in.u32() != 0;
    r.grant.uid = in.u32();
    r.grant.gid = in.u32();
  } else if (tag == k_refusal) {
    r.reason = in.str();
  }
  if ((tag != k_grant && tag != k_refusal) || !in.done() || (r.granted && r.grant.argv.empty())) {
    return invalid_input("a malformed reply from the node's container holder ({} bytes)", bytes.size());
  }
  return r;
}

Result<void> send_message(int socket, std::string_view bytes, const std::vector<int>& fds) {
  if (bytes.size() > k_max_message || fds.size() > 2) {
    return internal_error("a message of {} bytes and {} descriptors is too large", bytes.size(), fds.size());
  }
  std::string header;
  put_u32(header, static_cast<std::uint32_t>(bytes.size()));
  iovec iov{header.data(), header.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) std::array<char, CMSG_SPACE(2 * sizeof(int))> control{};
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  }
  ssize_t n = 0;
  while ((n = ::sendmsg(socket, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (n < 0) {
    return errno_error("can't send on a local socket (to the node's container holder, or lockstep run)",
                       errno);
  }
  std::size_t sent = static_cast<std::size_t>(n);
  std::string rest = header.substr(sent) + std::string(bytes);
  std::size_t off = 0;
  while (off < rest.size()) {
    n = ::send(socket, rest.data() + off, rest.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return errno_error("can't send on a local socket (to the node's container holder, or lockstep run)",
                         errno);
    }
    off += static_cast<std::size_t>(n);
  }
  return {};
}

Result<std::string> receive_message(int socket, std::size_t limit, std::vector<int>& fds) {
  std::array<char, 4> header{};
  std::size_t got = 0;
  while (got < header.size()) {
    iovec iov{header.data() + got, header.size() - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) std::array<char, CMSG_SPACE(2 * sizeof(int))> control{};
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    const ssize_t n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return errno_error("can't receive from the other side of the join socket", errno);
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
          int fd = -1;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          fds.push_back(fd);
        }
      }
    }
    if (n == 0) {
      return external_error("the other side of the join socket went away{}",
                            got == 0 ? "" : " in the middle of a message");
    }
    got += static_cast<std::size_t>(n);
  }
  Reader in(std::string_view(header.data(), header.size()));
  const std::uint32_t size = in.u32();
  if (size > limit) {
    return invalid_input("a message of {} bytes on the join socket (at most {})", size, limit);
  }
  std::string body(size, '\0');
  got = 0;
  while (got < body.size()) {
    const ssize_t n = ::recv(socket, body.data() + got, body.size() - got, 0);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return n == 0 ? external_error("the other side of the join socket went away in the middle of a message")
                    : errno_error("can't receive from the other side of the join socket", errno);
    }
    got += static_cast<std::size_t>(n);
  }
  return body;
}

Result<uid_t> peer_uid(int socket) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return errno_error("can't read the credentials of the other side of the join socket", errno);
  }
  return cred.uid;
}

std::optional<int> local_rank_count(const std::vector<std::string>& env) {
  auto value = [&env](std::string_view name) -> std::optional<std::string_view> {
    const std::string* kv = find_env(env, name);
    return kv == nullptr ? std::nullopt
                         : std::optional<std::string_view>(std::string_view(*kv).substr(name.size() + 1));
  };
  for (std::string_view name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    if (auto v = value(name)) {
      if (std::optional<int> n = positive_int(*v); n && *n > 0) {
        return n;
      }
    }
  }
  auto list = value("SLURM_STEP_TASKS_PER_NODE");
  auto node = value("SLURM_NODEID");
  if (list && node) {
    if (std::optional<int> index = positive_int(*node)) {
      if (std::optional<int> n = tasks_at(*list, *index); n && *n > 0) {
        return n;
      }
    }
  }
  return std::nullopt;
}

ExecFailure exec_in_path(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::vector<char*> cargv = c_strings(argv);
  std::vector<char*> cenv;
  std::string path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (const std::string& e : env) {
    cenv.push_back(const_cast<char*>(e.c_str()));
    if (e.rfind("PATH=", 0) == 0) {
      path = e.substr(5);
    }
  }
  cenv.push_back(nullptr);
  const std::string& cmd = argv[0];
  if (cmd.find('/') != std::string::npos) {
    ::execve(cmd.c_str(), cargv.data(), cenv.data());
    return {errno, ""};
  }
  int err = ENOENT;
  bool denied = false;
  std::size_t start = 0;
  for (;;) { // "a::b": an empty entry is the working directory
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + cmd;
    ::execve(candidate.c_str(), cargv.data(), cenv.data());
    if (errno == EACCES) {
      denied = true;
    } else if (errno != ENOENT && errno != ENOTDIR) {
      err = errno;
      break;
    }
    if (end == path.size()) {
      break;
    }
    start = end + 1;
  }
  if (err == ENOENT && denied) {
    err = EACCES;
  }
  return {err, path};
}

namespace {

// ---- the rendezvous -------------------------------------------------------------------------------

sockaddr_un abstract_address(const std::string& name, socklen_t& len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::size_t n = std::min(name.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, name.data(), n);
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n);
  return addr;
}

UniqueFd unix_socket() {
  return UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
}

// Starts the holder: `creator` with --hold-listen 3 --hold-key 4 inserted after "exec", in a
// session of its own (the launcher's signals for this rank don't reach it) and orphaned at once
// (this rank never waits for it), its stdio on /dev/null (the launcher waits for the ranks' output
// to close). The key goes through a pipe.
void start_holder(const std::vector<std::string>& creator, int listen_fd, const std::string& key) {
  std::array<int, 2> key_pipe{-1, -1};
  if (::pipe2(key_pipe.data(), O_CLOEXEC) != 0) {
    return;
  }
  std::vector<std::string> argv = {creator[0], creator[1], "--hold-listen", "3", "--hold-key", "4"};
  argv.insert(argv.end(), creator.begin() + 2, creator.end());
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (std::string& a : argv) {
    cargv.push_back(a.data());
  }
  cargv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    if (::fork() != 0) {
      _exit(0);
    }
    const int listen_copy = ::fcntl(listen_fd, F_DUPFD, 10);
    const int key_copy = ::fcntl(key_pipe[0], F_DUPFD, 10);
    const int null = ::open("/dev/null", O_RDWR);
    if (listen_copy < 0 || key_copy < 0 || null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 ||
        ::dup2(null, 2) < 0 || ::dup2(listen_copy, 3) < 0 || ::dup2(key_copy, 4) < 0) {
      _exit(127);
    }
    ::close_range(5, ~0U, 0);
    ::execv(cargv[0], cargv.data());
    _exit(127);
  }
  ::close(key_pipe[0]);
  if (pid > 0) {
    // The holder reads the key first thing; a holder that could not start closes the pipe (EPIPE).
    struct sigaction ignore {};
    struct sigaction old {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &old);
    std::size_t off = 0;
    while (off < key.size()) {
      const ssize_t n = ::write(key_pipe[1], key.data() + off, key.size() - off);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        break;
      }
      off += static_cast<std::size_t>(n);
    }
    ::sigaction(SIGPIPE, &old, nullptr);
    (void)wait_exit_code(pid);
  }
  ::close(key_pipe[1]);
}

// One request to a connected holder: the grant, or nullopt with `why` (a refusal, or a holder that
// went away before answering: `retry` is set then).
std::optional<Joined> ask(UniqueFd conn, const std::string& key, std::string& why, bool& retry) {
  Result<uid_t> peer = peer_uid(conn.get());
  if (!peer || *peer != ::geteuid()) {
    why = "the rendezvous name is taken by another user's process";
    return std::nullopt;
  }
  Request request;
  request.key = key;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    request.env.emplace_back(*e);
  }
  std::vector<int> fds;
  Result<std::string> bytes = send_message(conn.get(), encode(request))
                                  ? receive_message(conn.get(), k_max_message, fds)
                                  : Result<std::string>(std::string());
  std::vector<UniqueFd> owned;
  owned.reserve(fds.size());
  for (int fd : fds) {
    owned.emplace_back(fd);
  }
  if (!bytes || bytes->empty()) {
    retry = true;
    why = !bytes ? bytes.error().message : "the node's container holder went away";
    return std::nullopt;
  }
  Result<Reply> reply = decode_reply(*bytes);
  if (!reply) {
    why = reply.error().message;
    return std::nullopt;
  }
  if (!reply->granted) {
    why = "the node's container holder refused: " + reply->reason;
    return std::nullopt;
  }
  if (owned.empty() || owned.size() > 2) {
    why = fmt::format("the node's container holder sent {} descriptors", owned.size());
    return std::nullopt;
  }
  Joined j;
  j.socket = std::move(conn);
  j.grant = std::move(reply->grant);
  j.mount_ns = std::move(owned[0]);
  if (owned.size() == 2) {
    j.user_ns = std::move(owned[1]);
  }
  return j;
}

} // namespace

namespace {

// A unix socket bound to the abstract `name` and listening; `what` names it in the error.
Result<UniqueFd> listen_abstract(const std::string& name, std::string_view what) {
  socklen_t len = 0;
  const sockaddr_un addr = abstract_address(name, len);
  UniqueFd listener = unix_socket();
  if (!listener.valid() || ::bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0 ||
      ::listen(listener.get(), SOMAXCONN) != 0) {
    const int err = errno;
    return errno_error(fmt::format("can't listen on the {}", what), err);
  }
  return listener;
}

std::string gate_name(std::string_view report_dir) {
  return abstract_name("gate", report_dir);
}

} // namespace

Result<UniqueFd> bind_rendezvous(std::string_view key) {
  return listen_abstract(socket_name(key), "ranks' rendezvous");
}

Result<UniqueFd> bind_gate(std::string_view report_dir) {
  return listen_abstract(gate_name(report_dir), "ranks' gate");
}

Result<UniqueFd> bind_relay(std::string_view run_dir) {
  return listen_abstract(abstract_name("relay", run_dir), "relay socket");
}

UniqueFd connect_relay(std::string_view run_dir) {
  socklen_t len = 0;
  const sockaddr_un addr = abstract_address(abstract_name("relay", run_dir), len);
  UniqueFd conn = unix_socket();
  if (conn.valid() && ::connect(conn.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    conn.reset();
  }
  return conn;
}

void keep_gate(int listener, GateWord word, int until_fd) {
  const char byte = static_cast<char>(word);
  std::array<pollfd, 2> fds{{{listener, POLLIN, 0}, {until_fd, POLLIN, 0}}};
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      return;
    }
    if ((fds[0].revents & POLLIN) != 0) {
      UniqueFd conn(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (conn.valid()) {
        (void)!::send(conn.get(), &byte, 1, MSG_NOSIGNAL);
      }
    }
    if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      std::array<char, 256> buf{};
      const ssize_t n = ::read(until_fd, buf.data(), buf.size());
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        return;
      }
    }
  }
}

GateOutcome wait_at_gate(std::string_view report_dir, std::chrono::milliseconds limit, std::string& why) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  socklen_t len = 0;
  const sockaddr_un addr = abstract_address(gate_name(report_dir), len);
  auto pause = std::chrono::microseconds(500);
  for (;;) {
    UniqueFd conn = unix_socket();
    if (!conn.valid()) {
      why = fmt::format("can't create a unix socket: {}", std::strerror(errno));
      return GateOutcome::failed;
    }
    if (::connect(conn.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0) {
      Result<uid_t> peer = peer_uid(conn.get());
      if (!peer || *peer != ::geteuid()) {
        why = "the gate's name is taken by another user's process";
        return GateOutcome::failed;
      }
      pollfd p{conn.get(), POLLIN, 0};
      for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
          why = fmt::format("no preflight verdict came within {} s", limit.count() / 1000);
          return GateOutcome::timed_out;
        }
        const int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n == 0 || (n < 0 && errno == EINTR)) {
          continue;
        }
        char word = 0;
        const ssize_t got = n > 0 ? ::read(conn.get(), &word, 1) : -1;
        if (got < 0 && errno == EINTR) {
          continue;
        }
        return got == 1 && word == static_cast<char>(GateWord::go) ? GateOutcome::go : GateOutcome::stop;
      }
    }
    if (errno != ECONNREFUSED && errno != EAGAIN && errno != ENOENT) {
      why = fmt::format("can't reach the node's gate: {}", std::strerror(errno));
      return GateOutcome::failed;
    }
    if (std::chrono::steady_clock::now() + pause >= deadline) {
      why = fmt::format("no preflight kept this node's gate within {} s", limit.count() / 1000);
      return GateOutcome::timed_out;
    }
    std::this_thread::sleep_for(pause); // the node's preflight has not started yet
    pause = std::min(pause * 2, std::chrono::microseconds(8000));
  }
}

std::optional<Joined> ask_holder(const std::vector<std::string>& creator, std::string& why) {
  if (creator.size() < 3 || creator[1] != "exec" || creator[0].empty() || creator[0][0] != '/') {
    why = "not a `lockstep exec` command line with an absolute path";
    return std::nullopt;
  }
  const std::string key = key_of(key_inputs(creator));
  if (key.size() > k_max_message / 2) {
    why = "the command line and environment are too large to share";
    return std::nullopt;
  }
  socklen_t len = 0;
  const sockaddr_un addr = abstract_address(socket_name(key), len);
  for (int attempt = 0; attempt < k_join_attempts; ++attempt) {
    UniqueFd conn = unix_socket();
    if (!conn.valid()) {
      why = fmt::format("can't create a unix socket: {}", std::strerror(errno));
      return std::nullopt;
    }
    if (::connect(conn.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0) {
      bool retry = false;
      std::optional<Joined> j = ask(std::move(conn), key, why, retry);
      if (j || !retry) {
        return j;
      }
      continue; // the holder was leaving: ask again, or become the next one
    }
    if (errno != ECONNREFUSED && errno != EAGAIN) {
      why = fmt::format("can't reach the node's container holder: {}", std::strerror(errno));
      return std::nullopt;
    }
    // Nobody listens: become the holder's starter, unless another rank just bound the name (it
    // listens right after; wait a moment and connect).
    if (Result<UniqueFd> listener = bind_rendezvous(key)) {
      start_holder(creator, listener->get(), key);
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  why = "no holder answered";
  return std::nullopt;
}

namespace {

// What the child reports when the command did not start: whether joining failed (nothing ran), the
// status to exit with, and the message.
struct ChildReport {
  std::int32_t joined = 0;
  std::int32_t status = 0;
  std::uint32_t length = 0;
};

[[noreturn]] void child_report(int fd, bool joined, const Error& error) {
  const std::string msg = error.message.substr(0, 3800);
  ChildReport h{joined ? 1 : 0, error.process_exit(), static_cast<std::uint32_t>(msg.size())};
  std::string record(reinterpret_cast<const char*>(&h), sizeof h);
  record += msg;
  (void)!::write(fd, record.data(), record.size()); // one write below PIPE_BUF: atomic
  _exit(error.process_exit() & 0xff);
}

// The child: join, take the ids, enter the working directory, execute. Never returns.
[[noreturn]] void joined_child(const Joined& j, int report, pid_t parent, const sigset_t& old_mask) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) {
    _exit(1);
  }
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  auto fail = [report](const char* what) {
    child_report(report, false, errno_error(fmt::format("can't join the node's container: {}", what), errno));
  };
  if (j.user_ns.valid() && ::setns(j.user_ns.get(), CLONE_NEWUSER) != 0) {
    fail("setns(user)");
  }
  if (::setns(j.mount_ns.get(), CLONE_NEWNS) != 0) {
    fail("setns(mount)");
  }
  const Grant& g = j.grant;
  if (g.set_ids) {
    const gid_t gid = g.gid;
    if (::setgroups(1, &gid) != 0 || ::setgid(g.gid) != 0 || ::setuid(g.uid) != 0) {
      child_report(report, true,
                   errno_error(fmt::format("can't switch to uid {} gid {}", g.uid, g.gid), errno));
    }
  }
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  const int dir =
      root < 0 ? -1 : static_cast<int>(::syscall(SYS_openat2, root, g.cwd.c_str(), &how, sizeof how));
  if (dir < 0 || ::fchdir(dir) != 0) {
    child_report(report, true, errno_error("can't enter the working directory " + g.cwd, errno));
  }
  ::close(dir);
  ::close(root);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s : k_forwarded_signals) {
    struct sigaction cur {};
    ::sigaction(s, nullptr, &cur);
    if (cur.sa_handler != SIG_IGN) {
      ::sigaction(s, &dfl, nullptr);
    }
  }
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  const ExecFailure f = exec_in_path(g.argv, g.env);
  child_report(report, true, exec_failure_error(g.argv[0], f));
}

} // namespace

Result<int> run_joined(const Joined& j, bool& could_not_join) {
  could_not_join = false;
  std::array<int, 2> pipe{-1, -1};
  if (::pipe2(pipe.data(), O_CLOEXEC) != 0) {
    could_not_join = true;
    return errno_error("can't create a pipe", errno);
  }
  UniqueFd report(pipe[0]);
  sigset_t fwd = forwarded_signal_set();
  sigset_t old_mask;
  ::sigprocmask(SIG_BLOCK, &fwd, &old_mask);
  // The child shares this process's memory until it executes the command (start_sharing_child;
  // a rank has one thread): nothing copied for a process that only joins and executes.
  struct ChildArgs {
    const Joined* joined;
    int read_end;
    int report;
    pid_t parent;
    const sigset_t* old_mask;
  } args{&j, pipe[0], pipe[1], ::getpid(), &old_mask};
  const pid_t pid = start_sharing_child(
      [](void* p) -> int {
        const auto* a = static_cast<const ChildArgs*>(p);
        ::close(a->read_end);
        joined_child(*a->joined, a->report, a->parent, *a->old_mask);
      },
      &args);
  ::close(pipe[1]);
  if (pid < 0) {
    const int err = errno;
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    could_not_join = true;
    return errno_error("can't fork the rank's command", err);
  }
  SignalForwarding forwarding(pid);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  std::string record;
  std::array<char, 4096> buf{};
  for (;;) {
    const ssize_t n = ::read(report.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    record.append(buf.data(), static_cast<std::size_t>(n));
  }
  const int code = wait_exit_code(pid);
  if (record.size() >= sizeof(ChildReport)) {
    ChildReport h{};
    std::memcpy(&h, record.data(), sizeof h);
    could_not_join = h.joined == 0;
    return Error{ExitCode::external, record.substr(sizeof h, h.length), false,
                 h.status >= 0 && h.status <= 255 ? h.status : -1};
  }
  return code;
}

Error exec_failure_error(const std::string& cmd, const ExecFailure& f) {
  if (f.error == ENOENT) {
    return Error{ExitCode::external,
                 cmd.find('/') != std::string::npos
                     ? fmt::format("can't run {} in the container: no such file", cmd)
                     : fmt::format("can't run {} in the container: not found in PATH ({})", cmd, f.path_list),
                 false, k_exit_not_found};
  }
  return Error{ExitCode::external,
               fmt::format("can't run {} in the container: {}", cmd, std::strerror(f.error)), false,
               k_exit_not_executable};
}

} // namespace lockstep::runner::join
