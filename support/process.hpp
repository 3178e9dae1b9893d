#pragma once
// Child processes: run a tool and capture its bounded output (with a timeout), run a command in
// the foreground with signals forwarded to it, shell quoting for command lines handed to ssh-like
// agents and batch scripts, and PATH lookup.
#include "support/result.hpp"

#include <sys/types.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <filesystem>
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
