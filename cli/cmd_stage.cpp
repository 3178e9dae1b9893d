// `lockstep stage-receive` (hidden): the receiving end of staging on a node (runner/launch/stage.hpp,
// docs/launch.md "Staging"). `lockstep run` starts it through the rsh agent (the bundle on stdin,
// forwarded to --forward hosts) or through srun after sbcast (--file, --sif-file). Prints one JSON
// line per node of its subtree; its exit status is 0 when every one of them staged the image.
#include "cli/cli.hpp"
#include "runner/launch/stage.hpp"

#include <iostream>
#include <memory>

namespace lockstep::cli {

namespace {

struct StageArgs {
  runner::ReceiveOptions options;
  std::string file;
  std::string sif_file;
};

Result<ExitCode> run_stage_receive(StageArgs& args) {
  runner::ReceiveOptions& o = args.options;
  o.file = args.file;
  o.sif_file = args.sif_file;
  if (!o.sif_file.empty() && o.sif_digest.empty()) {
    return invalid_input("--sif-file needs --sif-digest");
  }
  if (o.how.lockstep.empty()) {
    std::error_code ec;
    o.how.lockstep = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  }
  bool all_ok = true;
  for (const runner::StagedNode& n : runner::receive_stage(o)) {
    std::cout << runner::to_json_line(n) << "\n";
    all_ok = all_ok && n.ok;
  }
  std::cout.flush();
  return all_ok ? ExitCode::ok : ExitCode::check_failed;
}

} // namespace

void register_stage(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<StageArgs>();
  runner::ReceiveOptions& o = args->options;
  auto* cmd = app.add_subcommand("stage-receive", "Receive an image staged by lockstep run (internal)");
  cmd->group(""); // not for people: lockstep run starts it on the nodes
  cmd->add_option("--file", args->file, "A bundle sent with sbcast (removed)");
  cmd->add_option("--sif-file", args->sif_file, "A SIF sent with sbcast (moved into the store)");
  cmd->add_option("--sif-digest", o.sif_digest, "Its digest");
  cmd->add_option("--forward", o.forward, "A host of the subtree to forward the stream to (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--agent", o.how.agent, "A word of the rsh agent (repeatable)")->allow_extra_args(false);
  cmd->add_option("--lockstep", o.how.lockstep, "lockstep on the nodes");
  cmd->add_option("--width", o.how.width, "Nodes each node forwards to")->check(CLI::Range(1, 64));
  add_common_flags(*cmd, ctx, false);
  cmd->callback([args, &ctx] { ctx.action = [args] { return run_stage_receive(*args); }; });
}

} // namespace lockstep::cli
