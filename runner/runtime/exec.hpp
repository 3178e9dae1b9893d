#pragma once
// `lockstep exec`: from an IMAGE argument to a running container. Resolves the image to a root
// (an unpacked OCI image from the cache, a SIF mounted or extracted, a sandbox directory), takes
// the image's environment, entrypoint and working directory, composes the environment in
// Apptainer's order and hands a SandboxConfig to run_in_sandbox(). docs/exec.md.
#include "runner/runtime/gpu.hpp"
#include "runner/runtime/join.hpp"
#include "runner/runtime/sandbox.hpp"
#include "runner/runtime/sif_mount.hpp"
#include "support/base/result.hpp"
#include "support/oci/image_arg.hpp"
#include "support/oci/image_source.hpp"

#include <nlohmann/json.hpp>

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

// IMAGE arguments: one type and grammar for every command (support/oci/image_arg.hpp).
using lockstep::ImageArg;
using lockstep::parse_image_arg;

/// Parses --bind SRC[:DST][:ro|:rw] (DST defaults to SRC; a relative SRC is taken from the
/// current directory). DST must be absolute and may not contain "..".
Result<BindSpec> parse_bind(std::string_view text);

/// A --user value.
struct UserSpec {
  uid_t uid = 0;
  gid_t gid = 0;
};
/// Parses --user UID[:GID] (numbers only; GID defaults to UID).
Result<UserSpec> parse_user(std::string_view text);

/// The parts of an image config `lockstep exec` uses.
struct ImageRuntime {
  std::vector<std::string> env; ///< Env ("K=V")
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string workdir; ///< WorkingDir, "" when unset
};
/// Reads them from the `config` member of an image config (or that member itself, as SIFs store
/// it); anything malformed is invalid_input.
Result<ImageRuntime> image_runtime(const nlohmann::json& config_member);

/// The inputs of the container's environment.
struct EnvSources {
  std::vector<std::string> host;      ///< the caller's environment ("K=V", as in environ)
  std::vector<std::string> image;     ///< the image's Env
  std::vector<std::string> overrides; ///< --env K=V, in order
  bool clean = false;                 ///< --cleanenv
  std::string home;                   ///< HOME when no layer sets it (the caller's home)
};
/// The container's environment, in Apptainer's order: the host's variables (unless clean; TERM
/// is kept even then; PATH and LOCKSTEP_ENV_* never pass), overridden by the image's Env,
/// overridden by the host's LOCKSTEP_ENV_K=V (as K=V), overridden by --env. PATH defaults to
/// the usual system directories and HOME to `home`. Order: first appearance. An --env without
/// '=' or with a name that is not [A-Za-z_][A-Za-z0-9_]* is invalid_input.
Result<std::vector<std::string>> compose_environment(const EnvSources& sources);

/// Everything `lockstep exec` takes from its command line.
struct ExecOptions {
  std::string image;
  std::vector<std::string> command; ///< empty: the image's ENTRYPOINT + CMD (or runscript)
  std::vector<std::string> env;     ///< --env K=V
  bool clean_env = false;
  std::vector<std::string> binds; ///< --bind SRC[:DST][:ro]
  std::optional<std::string> workdir;
  std::optional<std::string> user;
  TmpPolicy tmp = TmpPolicy::tmpfs;
  bool writable_tmpfs = false;
  bool pid_namespace = false;
  std::optional<std::string> hostname;
  NetworkPolicy network = NetworkPolicy::host;
  bool no_home = false;
  /// --gpus: nullopt = off; "auto" = $NVIDIA_VISIBLE_DEVICES or all; else the selection.
  std::optional<std::string> gpus;
  SifMountMode sif_mount = SifMountMode::automatic;
  /// --mpi-rank: this is one rank of a job a host launcher (mpirun's orted, srun) started: the
  /// host's /tmp, and the PMIx / Open MPI session directories the launcher's environment names
  /// (PMIX_SERVER_TMPDIR, PMIX_SYSTEM_TMPDIR, OMPI_MCA_orte_tmpdir_base, SLURM's TmpFS) bound in.
  bool mpi_rank = false;
  /// --platform OS/ARCH[/VARIANT]: the image of an index to run (default: this machine's); a
  /// root directory's architecture. Another architecture than this machine's runs under qemu-user
  /// (runner/runtime/emulation.hpp).
  std::optional<std::string> platform;
};

/// A container ready to start: what run_exec() runs, and what a holder keeps for the ranks that
/// join it (runner/runtime/hold.hpp). Move-only: a FUSE-mounted SIF stays mounted while it lives.
struct PreparedExec {
  SandboxConfig config;       ///< its env composed from this process's environment
  ImageRuntime image;         ///< the image config's Env, Entrypoint, Cmd, WorkingDir
  std::string home;           ///< the caller's home: the default HOME
  std::optional<GpuPlan> gpu; ///< --gpus: its variables are merged into every environment
  std::optional<SifRoot> sif; ///< a SIF's root (a FUSE mount is unmounted when this goes)
};

/// Resolves the image to a root and fills the container's configuration (binds, user, /tmp, home,
/// command, working directory, environment, GPUs): everything up to starting it.
Result<PreparedExec> prepare_exec(const ExecOptions& options);

/// The command's environment for the host environment `host` (another process's, such as a rank
/// that joins a held container), composed as prepare_exec() composes this process's.
Result<std::vector<std::string>> exec_environment(const ExecOptions& options, const PreparedExec& prepared,
                                                  const std::vector<std::string>& host);

/// Runs the command in the image; returns its exit status (or 128+signal). Errors before the
/// command starts carry lockstep's exit codes (2, 3, 4, 70; 126/127 for a command that can't run).
Result<int> run_exec(const ExecOptions& options);

} // namespace lockstep::runner
