#include "support/base/interrupt.hpp"

#include <atomic>
#include <csignal>

namespace lockstep {

namespace {

std::atomic<int> g_signal{0};

void on_signal(int sig) {
  if (g_signal.exchange(sig) != 0) {
    // Second signal: the user insists. Restore the default action and re-raise.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

} // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // No SA_RESTART: a call blocked in the kernel (an open or read that waits) returns EINTR, and
  // errno_error() turns that into an `interrupted` error, so the signal ends it with exit 130.
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() {
  return g_signal.load(std::memory_order_relaxed) != 0;
}

Result<void> check_interrupted() {
  if (interrupted()) {
    return Error{ExitCode::interrupted, "interrupted; nothing was published"};
  }
  return {};
}

void throw_if_interrupted() {
  if (interrupted()) {
    throw Failure(Error{ExitCode::interrupted, "interrupted; nothing was published"});
  }
}

} // namespace lockstep
