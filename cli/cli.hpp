#pragma once
// The `lockstep` command line: one CLI11 app, one subcommand module per command (cmd_*.cpp), and
// one place (run()) that prints errors and maps them to exit codes.
#include "support/base/result.hpp"
#include "support/oci/registry_ref.hpp"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

namespace lockstep::cli {

/// Options every command shares, and the action the chosen subcommand installs.
struct Context {
  bool json = false;
  bool debug = false;
  bool quiet = false;
  bool timings = false;
  /// Registry flags (add_registry_flags): "true"/"false" or empty, and parallel transfers.
  std::string tls_verify;
  std::size_t connections = 8;
  long registry_timeout_s = 60;
  int registry_retries = 4;
  /// Set by the chosen subcommand's parse callback; run() calls it after parsing.
  std::function<Result<ExitCode>()> action;
  /// Set by a command that ran another program (exec): its exit status, passed through as
  /// lockstep's own instead of the ExitCode the action returns. -1 when unset.
  int exit_status = -1;
};

/// Adds the common flags (--json, --debug, --quiet) to a subcommand.
void add_common_flags(CLI::App& cmd, Context& ctx, bool with_json = true);

/// A command's --help footer: its examples, then the exit codes it ends with, worded as in the shared
/// table (support/base/result.hpp).
std::string command_footer(std::string_view examples, std::initializer_list<ExitCode> codes);

/// Adds the registry flags (--tls-verify, --connections) to a command that reads or writes registry images.
void add_registry_flags(CLI::App& cmd, Context& ctx);

void register_push(CLI::App& app, Context& ctx);
void register_pull(CLI::App& app, Context& ctx);
void register_check(CLI::App& app, Context& ctx);
void register_init(CLI::App& app, Context& ctx);
void register_build(CLI::App& app, Context& ctx);
void register_inspect(CLI::App& app, Context& ctx);
void register_exec(CLI::App& app, Context& ctx);
void register_run(CLI::App& app, Context& ctx);
void register_preflight(CLI::App& app, Context& ctx);
void register_stage(CLI::App& app, Context& ctx);
void register_doctor(CLI::App& app, Context& ctx);
void register_lock(CLI::App& app, Context& ctx);
void register_outdated(CLI::App& app, Context& ctx);
void register_verify(CLI::App& app, Context& ctx);
void register_diff(CLI::App& app, Context& ctx);
void register_export(CLI::App& app, Context& ctx);
void register_schema(CLI::App& app, Context& ctx);
void register_login(CLI::App& app, Context& ctx);
void register_sbom(CLI::App& app, Context& ctx);
void register_sign(CLI::App& app, Context& ctx);
void register_vendor(CLI::App& app, Context& ctx);

/// True for a spec's file name (.yaml or .yml).
bool is_spec_name(const std::filesystem::path& p);

/// The spec beside a lock: NAME.yaml, else NAME.yml.
std::filesystem::path spec_beside(const std::filesystem::path& lock);

/// Writes `text` to `output` atomically, or to standard output for "" or "-"; `command` names the
/// writer in errors.
Result<ExitCode> write_output(const std::string& output, const std::string& text, std::string_view command);

/// A registry image argument (docker://HOST/REPO[:TAG][@DIGEST]) for `command` (sign, verify --key):
/// any other transport is invalid_input, saying that signatures live beside an image in its registry.
Result<oci::RegistryRef> registry_image_arg(const std::string& text, const char* command);

/// Parses argv, runs the command, prints any error, and returns the process exit code.
int run(int argc, char** argv);

} // namespace lockstep::cli
