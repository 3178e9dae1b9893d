#pragma once
// The rsh relay (docs/launch.md, "Preflight"). Under a gated mpirun, `lockstep run` makes mpirun's
// rsh agent `lockstep rsh-relay RUN_DIR K AGENT...`: for every node mpirun starts its daemon on,
// the relay asks `lockstep run` (on the run's relay socket, runtime/join.hpp) whether the node's
// preflight rides along. If it does, one agent call starts both, and the preflight's standard input
// and output are handed to `lockstep run`: a node costs one agent start, not two. With no run
// listening (a daemon started by another daemon, a run that ended), or told to pass, the relay is
// the agent itself.
#include "support/base/result.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// mpirun's plm_rsh_agent words for a relayed run: `LOCKSTEP rsh-relay RUN_DIR K AGENT...`, with -x
/// added to an ssh agent as mpirun adds it. nullopt when a word is empty or holds white space
/// (mpirun splits the agent at spaces, quoting nothing).
std::optional<std::vector<std::string>> relay_agent(const std::string& lockstep, const std::string& run_dir,
                                                    const std::vector<std::string>& agent);

/// The remote command of a relayed agent call, for /bin/sh: the preflight (its stderr into its
/// stdout) in the background with the call's standard input, and mpirun's daemon command (the
/// words as ssh would join them) with /dev/null as input and its output on stderr, so the call's
/// stdout carries only the preflight's.
std::string relayed_command(const std::string& preflight, const std::vector<std::string>& daemon);

/// `lockstep rsh-relay RUN_DIR K AGENT_1 .. AGENT_K [ARGS...] HOST COMMAND...`: returns the exit
/// status to end with (the agent's, 255 when the relay itself fails, as ssh does), or does not
/// return when it becomes the agent.
int rsh_relay_main(const std::vector<std::string>& args);

/// The first words after the agent's of the call a relay that connected to the run's socket asks
/// about (mpirun's own agent arguments, if any, then the host, then the daemon's command). Refuses
/// another user's process.
Result<std::vector<std::string>> relay_call_words(int conn);

/// Tells the relay on `conn` that word `host_index` of its call is the host, and to start
/// `preflight` there beside mpirun's daemon; takes over its dialogue: the agent call's standard
/// input and output, and on `conn` what the agent writes to stderr (as the relay passes it on, best
/// effort).
Result<Dialogue> relay_preflight(UniqueFd conn, std::size_t host_index, const std::string& preflight);

/// The agent's exit status at the end of what a relay passed on of its stderr (the dialogue's err),
/// which it strips; -1 when the relay did not say (it has not ended, or could not send it).
int relayed_exit_status(std::string& err);

/// Tells the relay on `conn` to start mpirun's daemon alone.
void relay_pass(int conn);

/// For each of `hosts`, whether mpirun would start no daemon there because it names this node:
/// "localhost", this node's host name (whole or up to the first dot), or an address of one of its
/// interfaces (read once for all the hosts).
std::vector<bool> name_this_node(const std::vector<std::string>& hosts);

} // namespace lockstep::runner
