// Child processes: capture, foreground runs with signal forwarding, shell quoting, PATH lookup.
#include "support/system/process.hpp"

#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

extern char** environ; // NOLINT(readability-redundant-declaration)

namespace lockstep {

namespace fs = std::filesystem;

namespace {

volatile sig_atomic_t g_forward_to = 0;

void forward_signal(int sig, siginfo_t* info, void* /*context*/) {
  // Signals the terminal sends (SI_KERNEL) reach the whole foreground process group, the child
  // included; forwarding them too would deliver them twice.
  if (info != nullptr && info->si_code == SI_KERNEL) {
    return;
  }
  pid_t pid = g_forward_to;
  if (pid > 0) {
    ::kill(pid, sig);
  }
}

} // namespace

std::vector<char*> c_strings(const std::vector<std::string>& words) {
  std::vector<char*> out;
  out.reserve(words.size() + 1);
  for (const std::string& w : words) {
    out.push_back(const_cast<char*>(w.c_str())); // NOLINT(cppcoreguidelines-pro-type-const-cast)
  }
  out.push_back(nullptr);
  return out;
}

namespace {

class SpawnAttributes {
public:
  SpawnAttributes() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnAttributes() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  posix_spawn_file_actions_t actions{};
  posix_spawnattr_t attr{};
};

// Default dispositions and an empty mask for the child (signals the caller ignores stay ignored).
void reset_child_signals(SpawnAttributes& sa, bool new_group) {
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : k_forwarded_signals) {
    struct sigaction cur {};
    sigaction(s, nullptr, &cur);
    if (cur.sa_handler != SIG_IGN) {
      sigaddset(&defaults, s);
    }
  }
  sigaddset(&defaults, SIGPIPE);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&sa.attr, &defaults);
  posix_spawnattr_setsigmask(&sa.attr, &empty);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (new_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&sa.attr, 0);
  }
  posix_spawnattr_setflags(&sa.attr, flags);
}

Result<pid_t> spawn(const std::vector<std::string>& argv, const std::optional<std::vector<std::string>>& env,
                    SpawnAttributes& sa) {
  if (argv.empty()) {
    return internal_error("spawn: empty command");
  }
  std::vector<char*> args = c_strings(argv);
  std::vector<char*> envp;
  if (env) {
    envp = c_strings(*env);
  }
  pid_t pid = 0;
  int rc =
      posix_spawnp(&pid, argv[0].c_str(), &sa.actions, &sa.attr, args.data(), env ? envp.data() : environ);
  if (rc != 0) {
    return external_error("can't run {}: {}", argv[0], std::strerror(rc));
  }
  return pid;
}

bool is_plain_word(std::string_view word) {
  if (word.empty()) {
    return false;
  }
  for (char c : word) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
    if (!ok) {
      return false;
    }
  }
  return true;
}

} // namespace

SignalForwarding::SignalForwarding(pid_t pid) {
  g_forward_to = pid;
  struct sigaction sa {};
  sa.sa_sigaction = forward_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < k_forwarded_signals.size(); ++i) {
    sigaction(k_forwarded_signals[i], &sa, &m_old[i]);
  }
}

SignalForwarding::~SignalForwarding() {
  for (std::size_t i = 0; i < k_forwarded_signals.size(); ++i) {
    sigaction(k_forwarded_signals[i], &m_old[i], nullptr);
  }
  g_forward_to = 0;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return 128;
    }
  }
  return exit_code_of_status(status);
}

sigset_t forwarded_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : k_forwarded_signals) {
    sigaddset(&set, s);
  }
  return set;
}

int exit_code_of_status(int status) {
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  if (WIFSIGNALED(status)) {
    return 128 + WTERMSIG(status);
  }
  return 128;
}

namespace {

// One poll of a child's stdout and stderr pipes: what comes is appended to result.out and result.err
// (each kept up to `max_output` bytes, the rest read and dropped), a pipe at its end is closed. False
// when both are closed, or when `deadline` (nullopt: none) has passed: result.timed_out is set then.
bool pump_outputs(UniqueFd& out, UniqueFd& err, CaptureResult& result, std::size_t max_output,
                  std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (!out.valid() && !err.valid()) {
    return false;
  }
  int wait_ms = -1;
  if (deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now())
            .count();
    if (left <= 0) {
      result.timed_out = true;
      return false;
    }
    wait_ms = static_cast<int>(std::min<long long>(left, 1 << 30));
  }
  std::array<struct pollfd, 2> fds{{{out.get(), POLLIN, 0}, {err.get(), POLLIN, 0}}};
  if (::poll(fds.data(), fds.size(), wait_ms) < 0) {
    return errno == EINTR;
  }
  std::array<UniqueFd*, 2> owners{&out, &err};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  std::array<char, 16384> buf{};
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
      continue;
    }
    const ssize_t got = ::read(fds[i].fd, buf.data(), buf.size());
    if (got > 0) {
      std::string& sink = *sinks[i];
      sink.append(buf.data(),
                  std::min(static_cast<std::size_t>(got), max_output - std::min(max_output, sink.size())));
    } else if (got == 0 || errno != EINTR) {
      owners[i]->reset();
    }
  }
  return true;
}

Result<CaptureResult> capture(const std::vector<std::string>& argv, std::optional<std::string_view> input,
                              const CaptureOptions& options) {
  std::array<int, 2> out_pipe{-1, -1};
  std::array<int, 2> err_pipe{-1, -1};
  if (::pipe2(out_pipe.data(), O_CLOEXEC) != 0) {
    return errno_error("pipe", errno);
  }
  UniqueFd out_r(out_pipe[0]);
  UniqueFd out_w(out_pipe[1]);
  if (::pipe2(err_pipe.data(), O_CLOEXEC) != 0) {
    return errno_error("pipe", errno);
  }
  UniqueFd err_r(err_pipe[0]);
  UniqueFd err_w(err_pipe[1]);

  UniqueFd in_fd;
  if (input) {
    in_fd = UniqueFd(::memfd_create("lockstep-stdin", MFD_CLOEXEC));
    if (!in_fd.valid()) {
      return errno_error("memfd_create", errno);
    }
    LS_TRY(write_all(in_fd.get(), input->data(), input->size(), "the input of " + argv[0]));
    if (::lseek(in_fd.get(), 0, SEEK_SET) != 0) {
      return errno_error("lseek", errno);
    }
  }

  SpawnAttributes sa;
  if (in_fd.valid()) {
    posix_spawn_file_actions_adddup2(&sa.actions, in_fd.get(), 0);
  } else {
    posix_spawn_file_actions_addopen(&sa.actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&sa.actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&sa.actions, err_w.get(), 2);
  reset_child_signals(sa, true);
  LS_TRY_ASSIGN(pid_t pid, spawn(argv, options.env, sa));
  out_w.reset();
  err_w.reset();

  CaptureResult result;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (options.timeout.count() > 0) {
    deadline = std::chrono::steady_clock::now() + options.timeout;
  }
  while (pump_outputs(out_r, err_r, result, options.max_output, deadline)) {
  }
  if (result.timed_out) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
  result.status = wait_exit_code(pid);
  return result;
}

// ASan can't follow a child running on a stack of our own (g++ says __SANITIZE_ADDRESS__, clang
// __has_feature(address_sanitizer)).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool k_sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool k_sanitized = true;
#else
constexpr bool k_sanitized = false;
#endif
#else
constexpr bool k_sanitized = false;
#endif

} // namespace

pid_t start_sharing_child(int (*entry)(void*), void* arg) {
  if (k_sanitized) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      entry(arg);
      _exit(127); // entry never returns
    }
    return pid;
  }
  constexpr std::size_t k_stack_size = 1U << 20; // reserved, not touched: only what it uses is paged in
  void* stack =
      ::mmap(nullptr, k_stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    return -1;
  }
  const pid_t pid =
      ::clone(entry, static_cast<char*>(stack) + k_stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
  const int err = errno;
  ::munmap(stack, k_stack_size); // the child has executed a program or exited by now
  errno = err;
  return pid;
}

Result<CaptureResult> run_capture(const std::vector<std::string>& argv, const CaptureOptions& options) {
  return capture(argv, std::nullopt, options);
}

Result<CaptureResult> run_capture_with_input(const std::vector<std::string>& argv, std::string_view input,
                                             const CaptureOptions& options) {
  return capture(argv, input, options);
}

// The held stderr of a ForegroundChild: a thread reads the pipe, keeps what comes (bounded) until
// release_stderr() says show (written out, then passed on) or drop.
struct ForegroundChild::Relay {
  enum class Mode { hold, show, drop };
  UniqueFd pipe;
  std::mutex mutex;
  Mode mode = Mode::hold;
  std::string held;
  std::atomic<bool> child_gone{false};
  std::thread thread;

  static constexpr std::size_t k_max_held = 1U << 20;

  void run() {
    std::array<char, 16384> buf{};
    int idle_after_exit = 0;
    for (;;) {
      pollfd p{pipe.get(), POLLIN, 0};
      const int n = ::poll(&p, 1, 100);
      if (n == 0) {
        // A process the child started may keep the pipe open: 2 s after the child, stop reading.
        if (child_gone && ++idle_after_exit >= 20) {
          break;
        }
        continue;
      }
      if (n < 0 && errno == EINTR) {
        continue;
      }
      const ssize_t got = n > 0 ? ::read(pipe.get(), buf.data(), buf.size()) : -1;
      if (got < 0 && errno == EINTR) {
        continue;
      }
      if (got <= 0) {
        break;
      }
      std::lock_guard lock(mutex);
      if (mode == Mode::show) {
        (void)write_all(2, buf.data(), static_cast<std::size_t>(got), "stderr");
      } else if (mode == Mode::hold && held.size() < k_max_held) {
        held.append(buf.data(), std::min(static_cast<std::size_t>(got), k_max_held - held.size()));
      }
    }
  }
};

ForegroundChild::ForegroundChild(pid_t pid, std::unique_ptr<SignalForwarding> forwarding)
    : m_pid(pid), m_forwarding(std::move(forwarding)) {
}

ForegroundChild::ForegroundChild(ForegroundChild&& o) noexcept
    : m_pid(std::exchange(o.m_pid, -1)), m_forwarding(std::move(o.m_forwarding)),
      m_relay(std::move(o.m_relay)) {
}

ForegroundChild::~ForegroundChild() {
  if (m_pid > 0) {
    end_within(std::chrono::milliseconds(0));
  }
  end_relay();
}

Result<ForegroundChild> ForegroundChild::start(const std::vector<std::string>& argv,
                                               const std::optional<std::vector<std::string>>& env,
                                               bool hold_stderr) {
  auto relay = hold_stderr ? std::make_unique<Relay>() : nullptr;
  UniqueFd err_write;
  if (relay) {
    std::array<int, 2> fds{-1, -1};
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
      return errno_error("pipe", errno);
    }
    relay->pipe = UniqueFd(fds[0]);
    err_write = UniqueFd(fds[1]);
  }
  // Block the forwarded signals until the handlers know the child, so none is lost in between.
  const sigset_t block = forwarded_signal_set();
  sigset_t old_mask;
  sigprocmask(SIG_BLOCK, &block, &old_mask);
  SpawnAttributes sa;
  reset_child_signals(sa, false);
  if (err_write.valid()) {
    posix_spawn_file_actions_adddup2(&sa.actions, err_write.get(), 2);
  }
  Result<pid_t> pid = spawn(argv, env, sa);
  if (!pid) {
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return pid.error();
  }
  auto forwarding = std::make_unique<SignalForwarding>(*pid);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ForegroundChild child(*pid, std::move(forwarding));
  if (relay) {
    err_write.reset();
    Relay* r = relay.get();
    relay->thread = std::thread([r] { r->run(); });
    child.m_relay = std::move(relay);
  }
  return child;
}

void ForegroundChild::release_stderr(bool show) {
  if (!m_relay) {
    return;
  }
  std::lock_guard lock(m_relay->mutex);
  if (m_relay->mode == Relay::Mode::hold && show) {
    (void)write_all(2, m_relay->held.data(), m_relay->held.size(), "stderr");
  }
  m_relay->held.clear();
  m_relay->mode = show ? Relay::Mode::show : Relay::Mode::drop;
}

void ForegroundChild::end_relay() {
  if (m_relay) {
    m_relay->child_gone = true;
    if (m_relay->thread.joinable()) {
      m_relay->thread.join();
    }
    m_relay.reset();
  }
}

bool ForegroundChild::running() const {
  if (m_pid <= 0) {
    return false;
  }
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(m_pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == 0;
}

int ForegroundChild::wait() {
  const int code = wait_exit_code(std::exchange(m_pid, -1));
  m_forwarding.reset();
  end_relay();
  return code;
}

int ForegroundChild::end_within(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  int signal_sent = 0;
  for (;;) {
    const pid_t r = ::waitpid(m_pid, &status, WNOHANG);
    if (r == m_pid || (r < 0 && errno != EINTR)) {
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline && signal_sent == 0) {
      ::kill(m_pid, SIGTERM);
      signal_sent = SIGTERM;
    } else if (now >= deadline + std::chrono::seconds(5) && signal_sent == SIGTERM) {
      ::kill(m_pid, SIGKILL);
      signal_sent = SIGKILL;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  m_pid = -1;
  m_forwarding.reset();
  end_relay();
  return exit_code_of_status(status);
}

Result<int> run_foreground(const std::vector<std::string>& argv,
                           const std::optional<std::vector<std::string>>& env) {
  LS_TRY_ASSIGN(ForegroundChild child, ForegroundChild::start(argv, env));
  return child.wait();
}

Result<pid_t> spawn_with_stdio(const std::vector<std::string>& argv, int in, int out, int err) {
  SpawnAttributes sa;
  posix_spawn_file_actions_adddup2(&sa.actions, in, 0);
  posix_spawn_file_actions_adddup2(&sa.actions, out, 1);
  posix_spawn_file_actions_adddup2(&sa.actions, err, 2);
  reset_child_signals(sa, false);
  return spawn(argv, std::nullopt, sa);
}

Result<Dialogue> Dialogue::start(const std::vector<std::string>& argv, std::size_t max_output) {
  std::array<int, 2> in{-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in.data()) != 0) {
    return errno_error("socketpair", errno);
  }
  UniqueFd in_mine(in[0]);
  UniqueFd in_theirs(in[1]);
  std::array<int, 2> out{-1, -1};
  if (::pipe2(out.data(), O_CLOEXEC) != 0) {
    return errno_error("pipe", errno);
  }
  UniqueFd out_r(out[0]);
  UniqueFd out_w(out[1]);
  std::array<int, 2> err{-1, -1};
  if (::pipe2(err.data(), O_CLOEXEC) != 0) {
    return errno_error("pipe", errno);
  }
  UniqueFd err_r(err[0]);
  UniqueFd err_w(err[1]);
  SpawnAttributes sa;
  posix_spawn_file_actions_adddup2(&sa.actions, in_theirs.get(), 0);
  posix_spawn_file_actions_adddup2(&sa.actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&sa.actions, err_w.get(), 2);
  reset_child_signals(sa, true);
  LS_TRY_ASSIGN(pid_t pid, spawn(argv, std::nullopt, sa));
  Dialogue d;
  d.m_pid = pid;
  d.m_in = std::move(in_mine);
  d.m_out = std::move(out_r);
  d.m_err = std::move(err_r);
  d.m_max_output = max_output;
  return d;
}

Dialogue Dialogue::adopt(UniqueFd in, UniqueFd out, UniqueFd err, std::size_t max_output) {
  Dialogue d;
  d.m_in = std::move(in);
  d.m_out = std::move(out);
  d.m_err = std::move(err);
  d.m_max_output = max_output;
  return d;
}

Dialogue::Dialogue(Dialogue&& o) noexcept
    : m_pid(std::exchange(o.m_pid, -1)), m_in(std::move(o.m_in)), m_out(std::move(o.m_out)),
      m_err(std::move(o.m_err)), m_max_output(o.m_max_output), m_scanned(o.m_scanned),
      m_result(std::move(o.m_result)), m_waited(o.m_waited) {
}

Dialogue::~Dialogue() {
  if (m_pid > 0 && !m_waited) {
    ::kill(-m_pid, SIGKILL);
    ::kill(m_pid, SIGKILL);
    (void)wait_exit_code(m_pid);
  }
}

bool Dialogue::pump(Clock::time_point deadline) {
  return pump_outputs(m_out, m_err, m_result, m_max_output, deadline);
}

std::optional<std::string> Dialogue::read_line(const std::function<bool(std::string_view)>& wanted,
                                               Clock::time_point deadline) {
  for (;;) {
    const std::string& out = m_result.out;
    for (std::size_t nl = out.find('\n', m_scanned); nl != std::string::npos;
         nl = out.find('\n', m_scanned)) {
      std::string line = out.substr(m_scanned, nl - m_scanned);
      m_scanned = nl + 1;
      if (wanted(line)) {
        return line;
      }
    }
    if (!m_out.valid() || !pump(deadline)) {
      return std::nullopt;
    }
  }
}

void Dialogue::say(std::string_view text) {
  if (m_in.valid()) {
    (void)!::send(m_in.get(), text.data(), text.size(), MSG_NOSIGNAL);
  }
}

CaptureResult Dialogue::finish(Clock::time_point deadline) {
  m_in.reset();
  if (m_waited) {
    return m_result;
  }
  while (pump(deadline)) {
  }
  m_waited = true;
  if (m_pid <= 0) { // adopted: its process is another's to wait for
    m_result.status = -1;
    return m_result;
  }
  if (m_result.timed_out) {
    ::kill(-m_pid, SIGKILL);
    ::kill(m_pid, SIGKILL);
  }
  m_result.status = wait_exit_code(m_pid);
  return m_result;
}

namespace {

// `word` in single quotes, ' written as '\''.
std::string single_quoted(std::string_view word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

} // namespace

std::string shell_quote(std::string_view word) {
  return is_plain_word(word) ? std::string(word) : single_quoted(word);
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& w : argv) {
    if (!out.empty()) {
      out += ' ';
    }
    // A plain first word with '=' (A=B) would be read as an assignment, not as the command.
    out += out.empty() && w.find('=') != std::string::npos ? single_quoted(w) : shell_quote(w);
  }
  return out;
}

std::optional<fs::path> find_in_path(std::string_view name, std::string_view path_list) {
  auto executable = [](const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.empty()) {
    return std::nullopt;
  }
  if (name.find('/') != std::string_view::npos) {
    fs::path p{std::string(name)};
    return executable(p) ? std::optional<fs::path>(p) : std::nullopt;
  }
  std::size_t start = 0;
  while (start <= path_list.size()) {
    std::size_t end = path_list.find(':', start);
    if (end == std::string_view::npos) {
      end = path_list.size();
    }
    std::string_view dir = path_list.substr(start, end - start);
    fs::path candidate = fs::path(dir.empty() ? std::string(".") : std::string(dir)) / std::string(name);
    if (executable(candidate)) {
      return candidate;
    }
    start = end + 1;
  }
  return std::nullopt;
}

std::optional<fs::path> find_program(std::string_view name) {
  const char* path = std::getenv("PATH");
  return find_in_path(name, path != nullptr ? path
                                            : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
}

} // namespace lockstep
