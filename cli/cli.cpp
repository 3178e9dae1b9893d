#include "cli/cli.hpp"

#include "support/interrupt.hpp"
#include "support/log.hpp"
#include "support/version.hpp"

#include <cstdio>
#include <exception>

namespace lockstep::cli {

namespace {

constexpr const char* k_footer = R"(Exit codes:
  0   success
  1   the checked thing is not as required (drift, stale lock, mismatch)
  2   bad usage, invalid spec, or malformed input (image, archive, lock)
  3   a needed external facility is missing or failed
  4   a local file operation failed (permission denied, disk full)
  130 interrupted

Run 'lockstep COMMAND --help' for a command's options and examples.)";

void apply_context(const Context& ctx) {
  if (ctx.debug) {
    log::set_level(log::Level::debug);
  } else if (ctx.quiet) {
    log::set_level(log::Level::quiet);
  }
  if (ctx.json) {
    log::disable_progress();
  }
  if (ctx.timings) {
    log::enable_timings();
  }
}

} // namespace

void add_common_flags(CLI::App& cmd, Context& ctx, bool with_json) {
  if (with_json) {
    cmd.add_flag("--json", ctx.json, "Print machine-readable JSON on stdout");
  }
  cmd.add_flag("--debug", ctx.debug, "Log each step on stderr");
  cmd.add_flag("-q,--quiet", ctx.quiet, "Print only errors and the result");
  cmd.add_flag("--timings", ctx.timings, "Print how long each phase took on stderr");
}

int run(int argc, char** argv) {
  install_interrupt_handlers();
  CLI::App app{"lockstep: one spec, pinned to the byte; reproducible OCI images without a daemon",
               "lockstep"};
  app.set_version_flag("--version", std::string("lockstep ") + k_version);
  app.require_subcommand(1);
  app.footer(k_footer);
  app.get_formatter()->column_width(34);

  Context ctx;
  register_check(app, ctx);
  register_lock(app, ctx);
  register_build(app, ctx);
  register_inspect(app, ctx);
  register_exec(app, ctx);
  register_run(app, ctx);
  register_preflight(app, ctx);
  register_doctor(app, ctx);
  register_verify(app, ctx);
  register_diff(app, ctx);
  register_export(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "lockstep: error: %s\nRun 'lockstep --help' for usage.\n", e.what());
    return static_cast<int>(ExitCode::invalid_input);
  }

  apply_context(ctx);
  if (!ctx.action) {
    std::fprintf(stderr, "lockstep: error: no command given\n");
    return static_cast<int>(ExitCode::invalid_input);
  }
  try {
    log::Timer total("total (after start-up)");
    Result<ExitCode> r = ctx.action();
    if (!r) {
      const Error& err = r.error();
      if (err.rendered) {
        std::fputs(err.message.c_str(), stderr);
        if (!err.message.empty() && err.message.back() != '\n') {
          std::fputc('\n', stderr);
        }
      } else {
        std::fprintf(stderr, "lockstep: error: %s\n", err.message.c_str());
      }
      // Whatever failed after SIGINT/SIGTERM (a blocking call ended with EINTR, reported in a spec
      // diagnostic or with another code) failed because of it.
      return static_cast<int>(interrupted() ? ExitCode::interrupted : err.code);
    }
    return static_cast<int>(*r);
  } catch (const Failure& f) {
    std::fprintf(stderr, "lockstep: error: %s\n", f.error().message.c_str());
    return static_cast<int>(interrupted() ? ExitCode::interrupted : f.error().code);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lockstep: internal error: %s\nPlease report this as a bug.\n", e.what());
    return static_cast<int>(ExitCode::internal);
  }
}

} // namespace lockstep::cli
