// The holder of a container shared by the ranks on one node (hold.hpp).
#include "runner/runtime/hold.hpp"

#include "runner/runtime/join.hpp"
#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <vector>

extern char** environ; // NOLINT(readability-redundant-declaration)

namespace lockstep::runner {

namespace {

using Clock = std::chrono::steady_clock;

constexpr timeval k_rank_io_timeout{10, 0}; // a rank that connects must say what it wants

// What the holder has: the prepared container, or why there is none.
struct Holding {
  std::optional<PreparedExec> prepared;
  HeldContainer held;
  std::string refusal; ///< "" when the container stands
};

Holding prepare(const ExecOptions& exec) {
  Holding h;
  Result<PreparedExec> prepared = prepare_exec(exec);
  if (!prepared) {
    h.refusal = prepared.error().message;
    return h;
  }
  Result<HeldContainer> held = hold_sandbox(prepared->config);
  if (!held) {
    h.refusal = held.error().message;
    return h;
  }
  h.prepared.emplace(std::move(*prepared));
  h.held = std::move(*held);
  return h;
}

// The grant for one rank: the command, the environment composed from the rank's, the held
// container's working directory, identity and namespaces.
Result<join::Grant> grant_for(const ExecOptions& exec, const Holding& h, const join::Request& request) {
  LS_TRY_ASSIGN(std::vector<std::string> env, exec_environment(exec, *h.prepared, request.env));
  std::erase_if(env, [](const std::string& kv) { return kv.starts_with("PWD="); });
  env.push_back("PWD=" + h.held.cwd);
  join::Grant g;
  g.argv = h.prepared->config.argv;
  g.env = std::move(env);
  g.cwd = h.held.cwd;
  g.set_ids = h.held.set_ids;
  g.uid = h.held.uid;
  g.gid = h.held.gid;
  return g;
}

// Answers one connection. Returns true when the rank was granted the container (and stays
// connected while it runs).
bool answer(int conn, const ExecOptions& exec, const HoldOptions& hold, const Holding& h, int& expected) {
  ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &k_rank_io_timeout, sizeof k_rank_io_timeout);
  ::setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &k_rank_io_timeout, sizeof k_rank_io_timeout);
  Result<uid_t> peer = join::peer_uid(conn);
  if (!peer || *peer != ::geteuid()) {
    log::debug("hold: refused a connection from uid {}", peer ? std::to_string(*peer) : "?");
    return false;
  }
  std::vector<int> fds;
  Result<std::string> bytes = join::receive_message(conn, join::k_max_message, fds);
  for (int fd : fds) {
    ::close(fd); // a rank sends none
  }
  Result<join::Request> request = bytes ? join::decode_request(*bytes) : Result<join::Request>(bytes.error());
  if (!request) {
    log::debug("hold: {}", request.error().message);
    return false;
  }
  auto refuse = [conn](const std::string& why) {
    (void)join::send_message(conn, join::encode_refusal(why));
    return false;
  };
  if (request->key != hold.key) {
    return refuse("the container held here is another job's");
  }
  if (!h.refusal.empty()) {
    return refuse(h.refusal);
  }
  Result<join::Grant> grant = grant_for(exec, h, *request);
  if (!grant) {
    return refuse(grant.error().message);
  }
  if (expected == 0) { // a holder preflight started learns the local size from the first rank
    expected = join::local_rank_count(request->env).value_or(0);
  }
  std::vector<int> ns = {h.held.mount_ns.get()};
  if (h.held.user_ns.valid()) {
    ns.push_back(h.held.user_ns.get());
  }
  Result<void> sent = join::send_message(conn, join::encode_grant(*grant), ns);
  if (!sent) {
    log::debug("hold: {}", sent.error().message);
    return false;
  }
  return true;
}

} // namespace

Result<void> hold_for_ranks(const ExecOptions& exec, const HoldOptions& hold) {
  const Holding h = prepare(exec);
  std::vector<std::string> own_env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    own_env.emplace_back(*e);
  }
  // The ranks the launcher starts on this node (the first rank's environment says; unknown: wait
  // out the grace period once the last rank is gone).
  int expected = h.refusal.empty() ? join::local_rank_count(own_env).value_or(0) : 0; // 0: unknown
  log::debug("hold: {}; expecting {} rank(s) here", h.refusal.empty() ? "container ready" : h.refusal,
             expected > 0 ? std::to_string(expected) : "an unknown number of");
  if (!h.refusal.empty() && hold.leave_if_unprepared) {
    return {};
  }
  std::vector<UniqueFd> ranks; // connected ranks, each running in the container
  int served = 0;
  Clock::time_point idle_since = Clock::now();
  for (;;) {
    if (ranks.empty() && expected > 0 && served >= expected) {
      return {};
    }
    int timeout_ms = -1;
    if (ranks.empty()) {
      const auto wait = served == 0 ? hold.first_wait : hold.grace;
      const auto left =
          wait - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - idle_since);
      if (left.count() <= 0) {
        return {};
      }
      timeout_ms = static_cast<int>(left.count());
    }
    std::vector<pollfd> fds = {{hold.listen_fd, POLLIN, 0}};
    for (const UniqueFd& r : ranks) {
      fds.push_back({r.get(), POLLIN, 0});
    }
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno == EINTR) {
      LS_TRY(check_interrupted());
      continue;
    }
    if (n < 0) {
      return errno_error("can't wait for the ranks", errno);
    }
    // A rank leaves by closing its connection (its command ended, or it was killed).
    for (std::size_t i = fds.size() - 1; i >= 1; --i) {
      if (fds[i].revents == 0) {
        continue;
      }
      char byte = 0;
      const ssize_t got = ::recv(fds[i].fd, &byte, 1, MSG_DONTWAIT);
      if (got <= 0 && !(got < 0 && (errno == EAGAIN || errno == EINTR))) {
        ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(i - 1));
        idle_since = Clock::now();
      }
    }
    if ((fds[0].revents & POLLIN) != 0) {
      UniqueFd conn(::accept4(hold.listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
      if (conn.valid() && answer(conn.get(), exec, hold, h, expected)) {
        ++served;
        ranks.push_back(std::move(conn));
      }
      idle_since = Clock::now();
    }
  }
}

} // namespace lockstep::runner
