// Child processes: capture, foreground runs with signal forwarding, shell quoting, PATH lookup.
#include "support/process.hpp"

#include "support/fs.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

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
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  std::array<struct pollfd, 2> fds{{{out_r.get(), POLLIN, 0}, {err_r.get(), POLLIN, 0}}};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  int open_count = 2;
  std::array<char, 16384> buf{};
  while (open_count > 0) {
    int wait_ms = -1;
    if (options.timeout.count() > 0) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        result.timed_out = true;
        ::kill(-pid, SIGKILL);
        ::kill(pid, SIGKILL);
        break;
      }
      wait_ms = static_cast<int>(left.count());
    }
    int n = ::poll(fds.data(), fds.size(), wait_ms);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
        continue;
      }
      ssize_t got = ::read(fds[i].fd, buf.data(), buf.size());
      if (got > 0) {
        std::string& sink = *sinks[i];
        std::size_t keep = std::min(static_cast<std::size_t>(got),
                                    options.max_output - std::min(options.max_output, sink.size()));
        sink.append(buf.data(), keep);
      } else if (got == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  result.status = wait_exit_code(pid);
  return result;
}

} // namespace

Result<CaptureResult> run_capture(const std::vector<std::string>& argv, const CaptureOptions& options) {
  return capture(argv, std::nullopt, options);
}

Result<CaptureResult> run_capture_with_input(const std::vector<std::string>& argv, std::string_view input,
                                             const CaptureOptions& options) {
  return capture(argv, input, options);
}

Result<int> run_foreground(const std::vector<std::string>& argv,
                           const std::optional<std::vector<std::string>>& env) {
  // Block the forwarded signals until the handlers know the child, so none is lost in between.
  const sigset_t block = forwarded_signal_set();
  sigset_t old_mask;
  sigprocmask(SIG_BLOCK, &block, &old_mask);
  SpawnAttributes sa;
  reset_child_signals(sa, false);
  Result<pid_t> pid = spawn(argv, env, sa);
  if (!pid) {
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return pid.error();
  }
  SignalForwarding forwarding(*pid);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  return wait_exit_code(*pid);
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
