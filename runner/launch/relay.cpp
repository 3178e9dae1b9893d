#include "runner/launch/relay.hpp"

#include "runner/runtime/join.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <netinet/in.h>
#include <set>

namespace lockstep::runner {

using join::connect_relay;
using join::peer_uid;
using join::receive_message;
using join::send_message;

namespace {

constexpr std::string_view k_call = "call:";
constexpr std::size_t k_call_words = 8; // what a relay shows of its call: the host is among them
constexpr std::string_view k_preflight = "preflight:";
constexpr std::string_view k_pass = "pass";
constexpr std::string_view k_io = "io";
constexpr std::size_t k_max_relay_message = 1U << 20;
// Ends what a relay passes on of the agent's stderr: the agent's exit status follows.
constexpr std::string_view k_exit_mark = "\x1elockstep-rsh-relay: exit ";

bool has_space(std::string_view word) {
  return word.find_first_of(" \t\n\r\v\f") != std::string_view::npos;
}

// Bounds a blocking exchange on a relay socket: neither side waits on the other for ever.
void limit_waits(int socket) {
  const timeval limit{10, 0};
  (void)::setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  (void)::setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
}

// One message on a relay socket; descriptors sent with it (none are expected) are closed.
Result<std::string> receive_words(int conn) {
  std::vector<int> fds;
  Result<std::string> message = receive_message(conn, k_max_relay_message, fds);
  for (int fd : fds) {
    ::close(fd);
  }
  return message;
}

// Becomes `argv` (the agent), as a relay with nothing to add does; 255 when it can't, as ssh.
int become(const std::vector<std::string>& argv) {
  std::vector<char*> cargv = c_strings(argv);
  ::execvp(cargv[0], cargv.data());
  std::cerr << fmt::format("lockstep rsh-relay: can't run the rsh agent {}: {}\n", argv[0],
                           std::strerror(errno));
  return 255;
}

// What `lockstep run` wants of this call: the index of the host among `words` and the preflight
// command to start there beside the daemon; nullopt: pass.
Result<std::optional<std::pair<std::size_t, std::string>>> ask(int conn,
                                                               const std::vector<std::string>& words) {
  std::string message(k_call);
  for (std::size_t i = 0; i < words.size() && i < k_call_words; ++i) {
    message += (i == 0 ? "" : "\n") + words[i];
  }
  LS_TRY(send_message(conn, message));
  LS_TRY_ASSIGN(std::string reply, receive_words(conn));
  std::size_t index = 0;
  const std::size_t colon = reply.find(':', k_preflight.size());
  if (!reply.starts_with(k_preflight) || colon == std::string::npos ||
      std::from_chars(reply.data() + k_preflight.size(), reply.data() + colon, index).ec != std::errc() ||
      index >= words.size() || index >= k_call_words) {
    return std::optional<std::pair<std::size_t, std::string>>();
  }
  return std::optional<std::pair<std::size_t, std::string>>(std::in_place, index, reply.substr(colon + 1));
}

// Passes what the agent writes to stderr on to ours (mpirun's), and to `lockstep run` as far as
// its socket takes it without waiting; returns at the end of `err`.
void pass_on_stderr(int err, int conn) {
  std::array<char, 16384> buf{};
  for (;;) {
    const ssize_t n = ::read(err, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;
    }
    (void)write_all(2, buf.data(), static_cast<std::size_t>(n), "stderr");
    if (conn >= 0 && ::send(conn, buf.data(), static_cast<std::size_t>(n), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
        errno != EAGAIN) {
      conn = -1; // lockstep run went away: stderr alone from here
    }
  }
}

// The relayed call: the agent runs `argv` with a socket as stdin and pipes as stdout and stderr;
// stdin and stdout go to `lockstep run`, stderr is passed on.
int relay_call(UniqueFd conn, const std::vector<std::string>& argv) {
  std::array<int, 2> in{-1, -1};
  std::array<int, 2> out{-1, -1};
  std::array<int, 2> err{-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in.data()) != 0 ||
      ::pipe2(out.data(), O_CLOEXEC) != 0 || ::pipe2(err.data(), O_CLOEXEC) != 0) {
    std::cerr << fmt::format("lockstep rsh-relay: can't make pipes: {}\n", std::strerror(errno));
    return 255;
  }
  UniqueFd in_run(in[0]);
  UniqueFd in_agent(in[1]);
  UniqueFd out_run(out[0]);
  UniqueFd out_agent(out[1]);
  UniqueFd err_mine(err[0]);
  UniqueFd err_agent(err[1]);
  if (Result<void> sent = send_message(conn.get(), k_io, {in_run.get(), out_run.get()}); !sent) {
    std::cerr << "lockstep rsh-relay: " << sent.error().message << "\n";
    return 255;
  }
  in_run.reset();
  out_run.reset();
  Result<pid_t> pid = spawn_with_stdio(argv, in_agent.get(), out_agent.get(), err_agent.get());
  in_agent.reset();
  out_agent.reset();
  err_agent.reset();
  if (!pid) {
    const std::string why = fmt::format("lockstep rsh-relay: {}\n", pid.error().message);
    std::cerr << why;
    (void)!::send(conn.get(), why.data(), why.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    return 255;
  }
  const SignalForwarding forwarding(*pid);
  pass_on_stderr(err_mine.get(), conn.get());
  const int status = wait_exit_code(*pid);
  const std::string trailer = fmt::format("{}{}\n", k_exit_mark, status);
  (void)!::send(conn.get(), trailer.data(), trailer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  return status;
}

// An IPv4 or IPv6 address as text; "" for another family.
std::string address_text(const sockaddr* addr) {
  std::array<char, INET6_ADDRSTRLEN> text{};
  const void* raw = nullptr;
  if (addr->sa_family == AF_INET) {
    raw = &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr;
  } else if (addr->sa_family == AF_INET6) {
    raw = &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
  }
  return raw != nullptr && ::inet_ntop(addr->sa_family, raw, text.data(), text.size()) != nullptr
             ? std::string(text.data())
             : std::string();
}

} // namespace

std::optional<std::vector<std::string>> relay_agent(const std::string& lockstep, const std::string& run_dir,
                                                    const std::vector<std::string>& agent) {
  std::vector<std::string> inner = agent;
  // mpirun adds -x to an agent named ssh (no X11 forwarding); with the relay in front it can't see it.
  if (!inner.empty() && std::filesystem::path(inner[0]).filename() == "ssh" &&
      std::find(inner.begin(), inner.end(), "-x") == inner.end() &&
      std::find(inner.begin(), inner.end(), "-X") == inner.end()) {
    inner.emplace_back("-x");
  }
  std::vector<std::string> words = {lockstep, "rsh-relay", run_dir, std::to_string(inner.size())};
  words.insert(words.end(), inner.begin(), inner.end());
  for (const std::string& w : words) {
    if (w.empty() || has_space(w)) {
      return std::nullopt;
    }
  }
  return words;
}

std::string relayed_command(const std::string& preflight, const std::vector<std::string>& daemon) {
  const std::string script =
      fmt::format("exec 3<&0; {{ {} ; }} <&3 3<&- 2>&1 & {{ {} ; }} </dev/null >&2 3<&-", preflight,
                  fmt::join(daemon, " "));
  return "/bin/sh -c " + shell_quote(script);
}

int rsh_relay_main(const std::vector<std::string>& args) {
  std::size_t k = 0;
  if (args.size() >= 2) {
    const std::string& n = args[1];
    if (std::from_chars(n.data(), n.data() + n.size(), k).ec != std::errc() || k == 0 || k > 64) {
      k = 0;
    }
  }
  if (k == 0 || args.size() < 2 + k + 2) {
    std::cerr << "lockstep rsh-relay: usage: lockstep rsh-relay RUN_DIR K AGENT_1..AGENT_K HOST COMMAND...\n"
                 "  (mpirun's rsh agent during `lockstep run`; not for direct use)\n";
    return 255;
  }
  const std::string& run_dir = args[0];
  const auto agent_end = args.begin() + 2 + static_cast<std::ptrdiff_t>(k);
  const std::vector<std::string> agent(args.begin() + 2, agent_end);
  const std::vector<std::string> call(agent_end, args.end()); // [ARGS...] HOST COMMAND...
  std::vector<std::string> direct = agent;
  direct.insert(direct.end(), call.begin(), call.end());
  UniqueFd conn = connect_relay(run_dir);
  if (!conn.valid()) {
    return become(direct); // no run listens here: a daemon another daemon starts, or a run that ended
  }
  if (Result<uid_t> peer = peer_uid(conn.get()); !peer || *peer != ::geteuid()) {
    // Another user's process holds the name: it gets nothing of this call, and runs nothing.
    std::cerr << "lockstep rsh-relay: the run's relay socket is held by another user's process; "
                 "starting mpirun's daemon alone\n";
    conn.reset();
    return become(direct);
  }
  limit_waits(conn.get());
  Result<std::optional<std::pair<std::size_t, std::string>>> wanted = ask(conn.get(), call);
  if (!wanted || !*wanted || (*wanted)->first + 1 >= call.size()) {
    conn.reset();
    return become(direct);
  }
  const auto host = call.begin() + static_cast<std::ptrdiff_t>((*wanted)->first);
  std::vector<std::string> argv = agent;
  argv.insert(argv.end(), call.begin(), host + 1);
  argv.push_back(relayed_command((*wanted)->second, std::vector<std::string>(host + 1, call.end())));
  return relay_call(std::move(conn), argv);
}

Result<std::vector<std::string>> relay_call_words(int conn) {
  limit_waits(conn);
  LS_TRY_ASSIGN(uid_t peer, peer_uid(conn));
  if (peer != ::geteuid()) {
    return invalid_input("a process of uid {} connected to the run's relay socket", peer);
  }
  LS_TRY_ASSIGN(std::string message, receive_words(conn));
  if (!message.starts_with(k_call)) {
    return invalid_input("a malformed message on the run's relay socket ({} bytes)", message.size());
  }
  std::vector<std::string> words;
  std::size_t pos = k_call.size();
  while (pos <= message.size() && words.size() < k_call_words) {
    const std::size_t end = std::min(message.find('\n', pos), message.size());
    words.push_back(message.substr(pos, end - pos));
    pos = end + 1;
  }
  return words;
}

Result<Dialogue> relay_preflight(UniqueFd conn, std::size_t host_index, const std::string& preflight) {
  LS_TRY(send_message(conn.get(), fmt::format("{}{}:{}", k_preflight, host_index, preflight)));
  std::vector<int> fds;
  Result<std::string> message = receive_message(conn.get(), k_max_relay_message, fds);
  std::vector<UniqueFd> owned;
  owned.reserve(fds.size());
  for (int fd : fds) {
    owned.emplace_back(fd);
  }
  if (!message) {
    return message.error();
  }
  if (*message != k_io || owned.size() != 2) {
    return external_error("the rsh relay answered with {} bytes and {} descriptors, not its agent call's "
                          "input and output",
                          message->size(), owned.size());
  }
  const timeval none{0, 0};
  (void)::setsockopt(conn.get(), SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  return Dialogue::adopt(std::move(owned[0]), std::move(owned[1]), std::move(conn));
}

int relayed_exit_status(std::string& err) {
  const std::size_t mark = err.rfind(k_exit_mark);
  if (mark == std::string::npos) {
    return -1;
  }
  int status = -1;
  const char* first = err.data() + mark + k_exit_mark.size();
  if (std::from_chars(first, err.data() + err.size(), status).ec != std::errc()) {
    status = -1;
  }
  err.erase(mark);
  return status;
}

void relay_pass(int conn) {
  (void)send_message(conn, k_pass);
}

std::vector<bool> name_this_node(const std::vector<std::string>& hosts) {
  std::array<char, 256> name{};
  const std::string mine = ::gethostname(name.data(), name.size() - 1) == 0 ? name.data() : "";
  const std::string_view short_mine = std::string_view(mine).substr(0, mine.find('.'));
  std::set<std::string> local; // this node's interface addresses, read once
  if (ifaddrs* ifs = nullptr; ::getifaddrs(&ifs) == 0) {
    for (const ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr != nullptr) {
        local.insert(address_text(i->ifa_addr));
      }
    }
    ::freeifaddrs(ifs);
  }
  local.erase("");
  auto names = [&](const std::string& host) {
    if (host == "localhost" || host == "127.0.0.1" || host == "::1") {
      return true;
    }
    const std::string_view short_host = std::string_view(host).substr(0, host.find('.'));
    if (!mine.empty() &&
        (host == mine || (short_host == short_mine &&
                          (host.find('.') == std::string::npos || mine.find('.') == std::string::npos)))) {
      return true;
    }
    // An address of one of this node's interfaces?
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) {
      return false;
    }
    bool is_local = false;
    for (const addrinfo* i = found; i != nullptr && !is_local; i = i->ai_next) {
      is_local = local.contains(address_text(i->ai_addr));
    }
    ::freeaddrinfo(found);
    return is_local;
  };
  std::vector<bool> out;
  out.reserve(hosts.size());
  for (const std::string& h : hosts) {
    out.push_back(names(h));
  }
  return out;
}

} // namespace lockstep::runner
