#pragma once
// Child processes: run a tool and capture its bounded output (with a timeout), run a command in
// the foreground with signals forwarded to it, shell quoting for command lines handed to ssh-like
// agents and batch scripts, and PATH lookup.
#include "support/base/result.hpp"
#include "support/system/fs.hpp"

#include <sys/types.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

/// How run_capture() runs a command.
struct CaptureOptions {
  /// The child's environment ("K=V"); nullopt = the caller's.
  std::optional<std::vector<std::string>> env;
  /// Killed (SIGKILL, its process group) after this long; zero = no limit.
  std::chrono::milliseconds timeout{0};
  /// Bytes kept of each of stdout and stderr; the rest is read and dropped.
  std::size_t max_output = 1U << 20;
};

/// What a captured command did.
struct CaptureResult {
  int status = 0; ///< exit code, or 128+N when signal N killed it
  std::string out;
  std::string err;
  bool timed_out = false;
};

/// `words` as the exec family wants them (argv, envp): pointers into the strings, which must outlive
/// the result, then a null pointer.
std::vector<char*> c_strings(const std::vector<std::string>& words);

/// Starts a child that runs `entry(arg)` on a stack of its own, sharing this process's memory until
/// it executes a program or exits, this process waiting meanwhile (CLONE_VM | CLONE_VFORK, as
/// posix_spawn does): no page tables copied and no copy-on-write faults after, most of what a fork
/// costs a process that only sets itself up and executes. The child has its own descriptor table,
/// signal handlers and file system context, and must not return from `entry`. Only for a process
/// with one thread (the child may then allocate), and never when the child keeps running after
/// this process resumes. Under AddressSanitizer (which can't follow a stack of our own) it is a
/// plain fork. Returns the child's pid, or -1 with errno.
pid_t start_sharing_child(int (*entry)(void*), void* arg);

/// Starts argv (looked up in PATH) in the caller's process group with `in`, `out` and `err` as its
/// standard input, output and error, its signals reset as run_foreground() does; the caller waits.
Result<pid_t> spawn_with_stdio(const std::vector<std::string>& argv, int in, int out, int err);

/// Runs argv (argv[0] looked up in PATH) with stdin from /dev/null, capturing stdout and stderr.
/// A command that can't be started is an `external` error naming it (exit 3).
Result<CaptureResult> run_capture(const std::vector<std::string>& argv, const CaptureOptions& options = {});

/// run_capture() with `input` as the child's standard input (a memory file, so a child that does not
/// read it never blocks lockstep): the server name a credential helper reads, for instance.
Result<CaptureResult> run_capture_with_input(const std::vector<std::string>& argv, std::string_view input,
                                             const CaptureOptions& options = {});

/// Starts argv (looked up in PATH) with the caller's stdio and waits for it, forwarding SIGINT,
/// SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to it (signals the terminal sends to the whole
/// foreground process group are not sent twice). `env` nullopt = the caller's environment.
/// Returns its exit code, or 128+N when signal N killed it.
Result<int> run_foreground(const std::vector<std::string>& argv,
                           const std::optional<std::vector<std::string>>& env = std::nullopt);

class SignalForwarding;

/// run_foreground() in two steps: the child starts now (with the caller's stdio, the signals above
/// forwarded to it) and is waited for later; `lockstep run` starts mpirun while the nodes'
/// preflights run. A child never waited for is ended (end_within(0)) when the object goes.
class ForegroundChild {
public:
  /// With `hold_stderr` the child's stderr goes through a pipe and is held back until
  /// release_stderr() (`lockstep run` shows mpirun's complaints only when the launch went ahead).
  static Result<ForegroundChild> start(const std::vector<std::string>& argv,
                                       const std::optional<std::vector<std::string>>& env = std::nullopt,
                                       bool hold_stderr = false);
  ForegroundChild(ForegroundChild&&) noexcept;
  ForegroundChild& operator=(ForegroundChild&&) = delete;
  ForegroundChild(const ForegroundChild&) = delete;
  ForegroundChild& operator=(const ForegroundChild&) = delete;
  ~ForegroundChild();

  /// Waits for the child: its exit code, or 128+N when signal N killed it.
  int wait();
  /// Whether the child has not ended yet (it is not waited for: wait() still gives its status).
  [[nodiscard]] bool running() const;
  /// Waits at most `limit`, then sends SIGTERM, and SIGKILL 5 s later; the exit code as wait().
  int end_within(std::chrono::milliseconds limit);
  /// With hold_stderr: writes what the child wrote to stderr so far to this process's stderr and
  /// passes the rest on as it comes (`show`), or drops all of it.
  void release_stderr(bool show);

private:
  struct Relay;
  ForegroundChild(pid_t pid, std::unique_ptr<SignalForwarding> forwarding);
  void end_relay();
  pid_t m_pid = -1;
  std::unique_ptr<SignalForwarding> m_forwarding;
  std::unique_ptr<Relay> m_relay;
};

/// A child the caller talks to: its standard input is a socket the caller writes to (a child that
/// went away is no error; no SIGPIPE), its stdout and stderr are captured (bounded). The preflight
/// gate (docs/launch.md): each node's preflight is asked, its report read, then it is told go or stop.
class Dialogue {
public:
  using Clock = std::chrono::steady_clock;
  /// Starts argv (looked up in PATH) in a process group of its own.
  static Result<Dialogue> start(const std::vector<std::string>& argv, std::size_t max_output = 1U << 20);
  /// A dialogue with a process that another one started and handed over: `in` (a socket) is its
  /// standard input, `out` and `err` its output. finish() then reads to their end and waits for no
  /// process (status -1).
  static Dialogue adopt(UniqueFd in, UniqueFd out, UniqueFd err, std::size_t max_output = 1U << 20);
  Dialogue(Dialogue&& o) noexcept;
  Dialogue& operator=(Dialogue&&) = delete;
  Dialogue(const Dialogue&) = delete;
  Dialogue& operator=(const Dialogue&) = delete;
  ~Dialogue();

  /// Reads the child's output until its stdout holds a whole line `wanted` accepts (returned), its
  /// stdout ends, or `deadline` passes (nullopt: timed_out() tells which).
  std::optional<std::string> read_line(const std::function<bool(std::string_view)>& wanted,
                                       Clock::time_point deadline);
  /// Writes `text` to the child's standard input.
  void say(std::string_view text);
  /// Closes the child's standard input (it reads EOF).
  void close_input() { m_in.reset(); }
  /// Closes the child's standard input, reads the rest of its output until `deadline` (then kills
  /// its process group) and waits for it.
  CaptureResult finish(Clock::time_point deadline);

  [[nodiscard]] bool timed_out() const { return m_result.timed_out; }
  /// The child's stderr so far.
  [[nodiscard]] const std::string& err() const { return m_result.err; }
  /// The child's stdout so far.
  [[nodiscard]] const std::string& out() const { return m_result.out; }

private:
  Dialogue() = default;
  // One poll of the output pipes until `deadline`; false when both are closed or the time is up.
  bool pump(Clock::time_point deadline);
  pid_t m_pid = -1;
  UniqueFd m_in;
  UniqueFd m_out;
  UniqueFd m_err;
  std::size_t m_max_output = 0;
  std::size_t m_scanned = 0; ///< stdout bytes already split into lines by read_line
  CaptureResult m_result;
  bool m_waited = false;
};

/// Forwards the signals above to `pid` for its lifetime (restoring the previous handlers after).
/// Allocates nothing, so a forked child may use it too.
class SignalForwarding {
public:
  explicit SignalForwarding(pid_t pid);
  ~SignalForwarding();
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

private:
  std::array<struct sigaction, 6> m_old{};
};

/// The signals SignalForwarding forwards, in the order it installs its handlers.
inline constexpr std::array<int, 6> k_forwarded_signals = {SIGINT,  SIGTERM, SIGHUP,
                                                           SIGQUIT, SIGUSR1, SIGUSR2};

/// k_forwarded_signals as a signal set (to block them around a fork).
sigset_t forwarded_signal_set();

/// The exit code a wait status stands for: the exit code, or 128+signal.
int exit_code_of_status(int status);

/// Waits for `pid` (retrying on EINTR) and returns exit_code_of_status of it; 128 when it can't
/// be waited for.
int wait_exit_code(pid_t pid);

/// `word` quoted for a POSIX shell: unchanged when it holds only [A-Za-z0-9_@%+=:,./-] (and is not
/// empty), else in single quotes with ' written as '\''.
std::string shell_quote(std::string_view word);

/// The words quoted and joined with spaces: a command line `sh -c` runs as argv (a first word with '='
/// is quoted too, so that it is the command and not an assignment). Every command line lockstep writes
/// into a script or hands to a shell goes through shell_quote/shell_join.
std::string shell_join(const std::vector<std::string>& argv);

/// The first executable `name` in the colon-separated `path_list` (a name with a '/' is checked
/// as is); nullopt when none.
std::optional<std::filesystem::path> find_in_path(std::string_view name, std::string_view path_list);

/// find_in_path with $PATH (the usual system directories when unset).
std::optional<std::filesystem::path> find_program(std::string_view name);

} // namespace lockstep
