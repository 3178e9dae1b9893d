#pragma once
// Ranks of one job on one node share one container (docs/launch.md, "Ranks on one node"): each
// rank runs `lockstep _rank` (runner/launch/rank.cpp, lockstep's rank program), which asks the
// node's holder for the container and joins its namespaces (setns) to run the command. The first rank to
// find no holder starts one: `lockstep exec --hold-listen FD --hold-key FD ...` prepares the image
// and assembles the container once (runner/runtime/hold.cpp), then answers every rank that asks.
//
// This file is what both sides share: the key saying which ranks may share a container (the same
// `lockstep exec` command line, environment that shapes the container, working directory, ids and
// host), the rendezvous (an abstract unix socket named after the key: per network namespace, gone
// with its last descriptor, nothing left in a file system), the two messages and the descriptor
// passing, and the command's PATH search both `lockstep exec` and `lockstep _rank` use.
#include "support/base/result.hpp"
#include "support/system/fs.hpp"

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// Exit statuses for a command that could not be started (as POSIX shells use them).
constexpr int k_exit_not_executable = 126;
constexpr int k_exit_not_found = 127;

} // namespace lockstep::runner

namespace lockstep::runner::join {

/// The launcher's session directories a rank (--mpi-rank) binds when they lie outside /tmp: PMIx's
/// rendezvous files and Open MPI's session directory live there.
inline constexpr std::array<const char*, 5> k_launcher_dir_variables = {
    "PMIX_SERVER_TMPDIR", "PMIX_SYSTEM_TMPDIR", "OMPI_MCA_orte_tmpdir_base", "OMPI_MCA_prte_tmpdir_base",
    "SLURM_PMIX_TMPDIR"};

/// The environment variables `lockstep exec` reads to build a container (besides its command
/// line): ranks that differ in any of them never share one. Every getenv() on exec's way to the
/// container is listed here (tests/unit/runner/runtime/test_join.cpp checks the sources).
inline constexpr std::array<std::string_view, 12> k_key_environment = {"HOME",
                                                                       "PATH",
                                                                       "LOCKSTEP_CACHE",
                                                                       "XDG_CACHE_HOME",
                                                                       "LOCKSTEP_SIF_MOUNT",
                                                                       "LOCKSTEP_GPU_HOST_ROOT",
                                                                       "NVIDIA_VISIBLE_DEVICES",
                                                                       "PMIX_SERVER_TMPDIR",
                                                                       "PMIX_SYSTEM_TMPDIR",
                                                                       "OMPI_MCA_orte_tmpdir_base",
                                                                       "OMPI_MCA_prte_tmpdir_base",
                                                                       "SLURM_PMIX_TMPDIR"};

/// The directory a launcher session variable's value makes a rank bind (--mpi-rank): the value
/// resolved (symlinks followed), when it is an existing directory other than /, /tmp or one below
/// /tmp (the host's /tmp is bound whole). nullopt: nothing to bind.
std::optional<std::string> launcher_dir_to_bind(const char* value);

/// What decides whether two ranks may share a container.
struct KeyInputs {
  std::vector<std::string> argv; ///< the `lockstep exec ...` command line each rank would run
  /// k_key_environment's values, in its order (nullopt: unset); for the launcher's session
  /// variables (k_launcher_dir_variables), the directory a rank binds (launcher_dir_to_bind), so
  /// ranks whose session directories all lie in /tmp share a container with a holder started
  /// outside the launcher (by preflight).
  std::vector<std::optional<std::string>> env;
  std::string cwd;
  std::string host;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
};

/// This process's inputs for `argv`.
KeyInputs key_inputs(const std::vector<std::string>& argv);

/// The key: every input, each one length-prefixed (no two inputs give the same bytes).
std::string key_of(const KeyInputs& inputs);

/// The abstract socket name the holder of `key` listens on ("\0lockstep-join-" + 32 hex digits of
/// a 128-bit hash of the key). The holder compares the whole key of every request, so a name
/// shared by two keys only makes ranks run unshared.
std::string socket_name(std::string_view key);

/// A rank's request: its key and its environment (the holder composes the command's from it).
struct Request {
  std::string key;
  std::vector<std::string> env;
  bool operator==(const Request&) const = default;
};

/// The holder's grant: what the rank needs to run the command in the held container.
struct Grant {
  std::vector<std::string> argv; ///< the command
  std::vector<std::string> env;  ///< its complete environment
  std::string cwd;               ///< the working directory inside (absolute)
  bool set_ids = false;          ///< root: setgroups/setgid/setuid to uid/gid after joining
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  int mount_ns = -1; ///< descriptors received (owned by the caller), -1 when absent
  int user_ns = -1;
};

/// What the holder answered.
struct Reply {
  bool granted = false;
  Grant grant;        ///< when granted
  std::string reason; ///< when refused: why (the rank then runs `lockstep exec` itself)
};

/// Bounds of what a holder reads from a rank (and a rank from a holder).
inline constexpr std::size_t k_max_message = 16U << 20;

/// The bytes of a request / reply (without descriptors), as sent after a 4-byte length.
std::string encode(const Request& request);
std::string encode_grant(const Grant& grant);
std::string encode_refusal(std::string_view reason);
/// Parses them back; malformed bytes are invalid_input.
Result<Request> decode_request(std::string_view bytes);
Result<Reply> decode_reply(std::string_view bytes);

/// Sends one message: a 4-byte length, then the bytes, with `fds` (at most 2) attached to the first
/// byte. The socket must be blocking.
Result<void> send_message(int socket, std::string_view bytes, const std::vector<int>& fds = {});
/// Receives one message (at most `limit` bytes) and the descriptors attached to it (close-on-exec).
/// EOF before the first byte is an `external` error saying the peer went away.
Result<std::string> receive_message(int socket, std::size_t limit, std::vector<int>& fds);

/// The uid of the process at the other end of a unix socket.
Result<uid_t> peer_uid(int socket);

/// How many ranks the launcher starts on this node, from the rank's environment:
/// OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS (MPICH), or Slurm's SLURM_STEP_TASKS_PER_NODE
/// ("2(x3),1") at SLURM_NODEID; nullopt when none says.
std::optional<int> local_rank_count(const std::vector<std::string>& env);

/// Binds and listens on the rendezvous of `key` (socket_name): the caller then starts its holder.
/// Fails (EADDRINUSE) when another process has bound it.
Result<UniqueFd> bind_rendezvous(std::string_view key);

// ---- the preflight gate (docs/launch.md, "Preflight"): under mpirun the ranks start while every
// node's preflight runs; each waits at its node's gate, which the node's `lockstep preflight --gate`
// keeps, until the launching node's verdict on all the reports comes back through the agent.

/// What a gate says: every rank may start, or the job is called off (no rank runs its command).
enum class GateWord : char { go = 'g', stop = 's' };

/// Binds and listens on the gate of the job whose ranks report to `report_dir` (an abstract unix
/// socket named after it, as the rendezvous is). EADDRINUSE: another process keeps it.
Result<UniqueFd> bind_gate(std::string_view report_dir);

/// Answers every rank that connects to `listener` with `word` until `until_fd` reads EOF (or fails):
/// the launching node closes the preflight's standard input when the job is over.
void keep_gate(int listener, GateWord word, int until_fd);

/// How a rank's wait at its gate ended.
enum class GateOutcome { go, stop, timed_out, failed };

/// Waits at the gate of `report_dir`: connects (retrying while nobody listens yet, until `limit`),
/// checks the keeper is this user's process, reads its word. `why` says why on timed_out and failed;
/// a keeper that closes the connection without a word is a stop.
GateOutcome wait_at_gate(std::string_view report_dir, std::chrono::milliseconds limit, std::string& why);

// ---- the rsh relay (docs/launch.md, "Preflight"): under a gated mpirun, `lockstep run` listens
// on an abstract socket named after its record directory; each call mpirun makes to its rsh agent
// goes through `lockstep rsh-relay`, which asks there whether to start the node's preflight too.

/// Binds and listens on the relay socket of the run recording to `run_dir`.
Result<UniqueFd> bind_relay(std::string_view run_dir);

/// Connected to the relay socket of `run_dir` (blocking); invalid (errno set) when no run listens
/// there in this network namespace.
UniqueFd connect_relay(std::string_view run_dir);

/// A rank's connection to the node's holder, and what it granted.
struct Joined {
  UniqueFd socket; ///< kept open while the command runs: the holder counts the ranks inside
  Grant grant;
  UniqueFd mount_ns;
  UniqueFd user_ns;
};

/// How many times a rank tries to reach (or become) the node's holder before it runs unshared.
inline constexpr int k_join_attempts = 400;

/// Asks the holder of `creator`'s container on this node (`creator` is the `lockstep exec ...`
/// command line the rank would run; the key is key_of(key_inputs(creator))). When nobody holds it,
/// this rank starts the holder: `creator` with --hold-listen/--hold-key, in a session of its own,
/// its stdio on /dev/null, given the bound socket and the key. nullopt, with `why`: the rank runs
/// `creator` itself (a refusal, another user on the name, a holder that went away).
std::optional<Joined> ask_holder(const std::vector<std::string>& creator, std::string& why);

/// Runs the granted command in the held container: a child joins the namespaces (user, then mount),
/// takes the ids (root with --user), sets no_new_privs, enters the working directory (resolved in
/// the container's root, magic links refused), and executes the command with PATH searched as
/// exec_in_path does; this process waits, forwarding SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and
/// SIGUSR2, and returns the command's status (128+N for signal N). A command that can't be
/// executed is exec_failure_error(); when joining itself fails, `could_not_join` is set, nothing ran,
/// and the error says why.
Result<int> run_joined(const Joined& joined, bool& could_not_join);

/// Why a command could not be executed.
struct ExecFailure {
  int error = 0;         ///< errno of the decisive execve
  std::string path_list; ///< the PATH searched ("" for a command with a '/')
};
/// Executes `argv` with `env`, looking argv[0] up in the PATH of `env` (not of this process) as
/// execvp does; returns only on failure.
ExecFailure exec_in_path(const std::vector<std::string>& argv, const std::vector<std::string>& env);
/// The message and exit status (127: not found, 126: not executable) of that failure.
Error exec_failure_error(const std::string& command, const ExecFailure& failure);

} // namespace lockstep::runner::join
