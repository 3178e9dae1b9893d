#include "cli/cli.hpp"

namespace lockstep::cli {

void register_build(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("build", "(not yet implemented)");
  add_common_flags(*cmd, ctx);
}

} // namespace lockstep::cli
