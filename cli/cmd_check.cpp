#include "cli/cli.hpp"

namespace lockstep::cli {

void register_check(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("check", "(not yet implemented)");
  add_common_flags(*cmd, ctx);
}

} // namespace lockstep::cli
