#include "cli/cli.hpp"

namespace lockstep::cli {

void register_inspect(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("inspect", "(not yet implemented)");
  add_common_flags(*cmd, ctx);
}

} // namespace lockstep::cli
