#include "cli/cli.hpp"

#include "envspec/settings/settings.hpp"
#include "runner/launch/relay.hpp"
#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/base/version.hpp"
#include "support/oci/image_source.hpp"
#include "support/registry/client.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>

namespace lockstep::cli {

namespace {

// The --help footer: the exit-code table (support/base/result.hpp), then where to look next.
std::string footer() {
  std::string out = "Exit codes:\n";
  for (const ExitCodeMeaning& e : k_exit_codes) {
    out += fmt::format("  {:<3} {}\n", static_cast<int>(e.code), e.meaning);
  }
  out += "  exec and run end with the command's or the failed rank's own exit status.\n\n";
  out += "Run 'lockstep COMMAND --help' for a command's options and examples.";
  return out;
}

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
  settings::apply_to_support();
  registry::ClientOptions& registry = registry::default_client_options();
  if (!ctx.tls_verify.empty()) {
    registry.tls_verify = ctx.tls_verify == "true";
  }
  registry.connections = ctx.connections;
  registry.stall_timeout_s = ctx.registry_timeout_s;
  registry.retries = ctx.registry_retries;
}

} // namespace

bool is_spec_name(const std::filesystem::path& p) {
  return p.extension() == ".yaml" || p.extension() == ".yml";
}

std::filesystem::path spec_beside(const std::filesystem::path& lock) {
  std::filesystem::path yaml = lock;
  yaml.replace_extension(".yaml");
  std::filesystem::path yml = lock;
  yml.replace_extension(".yml");
  std::error_code ec;
  return std::filesystem::exists(yaml, ec) || !std::filesystem::exists(yml, ec) ? yaml : yml;
}

Result<ExitCode> write_output(const std::string& output, const std::string& text, std::string_view command) {
  if (output.empty() || output == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
      return Error{ExitCode::io, fmt::format("{}: can't write to standard output", command)};
    }
    return ExitCode::ok;
  }
  LS_TRY_ASSIGN(AtomicFile out, AtomicFile::create(std::filesystem::absolute(output), 0644));
  LS_TRY(out.write(text));
  LS_TRY(out.commit());
  log::info("wrote {}", output);
  return ExitCode::ok;
}

Result<oci::RegistryRef> registry_image_arg(const std::string& text, const char* command) {
  LS_TRY_ASSIGN(oci::ImageRef ref, oci::ImageRef::parse(text));
  if (ref.transport != oci::ImageRef::Transport::docker) {
    return invalid_input("{}: {} is not a registry image; signatures live beside an image in its registry "
                         "(docker://HOST/REPO:TAG): push it first",
                         command, text);
  }
  return ref.remote;
}

std::string command_footer(std::string_view examples, std::initializer_list<ExitCode> codes) {
  std::string out = std::string(examples) + "\n\nExit codes:\n";
  for (const ExitCodeMeaning& e : k_exit_codes) {
    if (std::find(codes.begin(), codes.end(), e.code) != codes.end()) {
      out += fmt::format("  {:<3} {}\n", static_cast<int>(e.code), e.meaning);
    }
  }
  out.pop_back();
  return out;
}

void add_common_flags(CLI::App& cmd, Context& ctx, bool with_json) {
  if (with_json) {
    cmd.add_flag("--json", ctx.json, "Print machine-readable JSON on stdout");
  }
  cmd.add_flag("--debug", ctx.debug, "Log each step on stderr");
  cmd.add_flag("-q,--quiet", ctx.quiet, "Print only errors and the result");
  cmd.add_flag("--timings", ctx.timings, "Print how long each phase took on stderr");
}

void add_registry_flags(CLI::App& cmd, Context& ctx) {
  cmd.add_option(
         "--tls-verify", ctx.tls_verify,
         "Registries: require HTTPS with a verified certificate (default true; false also allows plain "
         "HTTP)")
      ->check(CLI::IsMember({"true", "false"}))
      ->type_name("BOOL");
  cmd.add_option("--connections", ctx.connections, "Registries: blobs transferred at once (default 8)")
      ->check(CLI::Range(1, 64))
      ->type_name("N");
  cmd.add_option("--registry-timeout", ctx.registry_timeout_s,
                 "Registries: a transfer that receives nothing for this long fails (default 60)")
      ->check(CLI::Range(1, 3600))
      ->type_name("SECONDS");
  cmd.add_option("--registry-retries", ctx.registry_retries,
                 "Registries: further attempts after a transfer failure, 429 or 5xx, with doubling backoff "
                 "(default 4; 0 fails at once)")
      ->check(CLI::Range(0, 20))
      ->type_name("N");
}

int run(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "rsh-relay") {
    // mpirun's rsh agent during a gated `lockstep run`: mpirun's words follow, not lockstep's options.
    return runner::rsh_relay_main(std::vector<std::string>(argv + 2, argv + argc));
  }
  install_interrupt_handlers();
  CLI::App app{"lockstep: one spec, pinned to the byte; reproducible OCI images without a daemon",
               "lockstep"};
  app.set_version_flag("--version", std::string("lockstep ") + k_version);
  app.require_subcommand(1);
  app.footer(footer());
  app.get_formatter()->column_width(34);

  Context ctx;
  register_init(app, ctx);
  register_check(app, ctx);
  register_lock(app, ctx);
  register_outdated(app, ctx);
  register_build(app, ctx);
  register_push(app, ctx);
  register_pull(app, ctx);
  register_inspect(app, ctx);
  register_exec(app, ctx);
  register_run(app, ctx);
  register_preflight(app, ctx);
  register_stage(app, ctx);
  register_doctor(app, ctx);
  register_verify(app, ctx);
  register_diff(app, ctx);
  register_export(app, ctx);
  register_sbom(app, ctx);
  register_sign(app, ctx);
  register_vendor(app, ctx);
  register_schema(app, ctx);
  register_login(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "lockstep: error: %s\nRun 'lockstep --help' for usage.\n",
                 diagnostic_text(e.what()).c_str());
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
      // Every error passes diagnostic_text: control characters from input never reach the terminal.
      const std::string message = diagnostic_text(err.message);
      if (err.rendered) {
        std::fputs(message.c_str(), stderr);
        if (!message.empty() && message.back() != '\n') {
          std::fputc('\n', stderr);
        }
      } else {
        std::fprintf(stderr, "lockstep: error: %s\n", message.c_str());
      }
      // Whatever failed after SIGINT/SIGTERM (a blocking call ended with EINTR, reported in a spec
      // diagnostic or with another code) failed because of it.
      return interrupted() ? static_cast<int>(ExitCode::interrupted) : err.process_exit();
    }
    return ctx.exit_status >= 0 ? ctx.exit_status : static_cast<int>(*r);
  } catch (const Failure& f) {
    std::fprintf(stderr, "lockstep: error: %s\n", diagnostic_text(f.error().message).c_str());
    return interrupted() ? static_cast<int>(ExitCode::interrupted) : f.error().process_exit();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lockstep: internal error: %s\nPlease report this as a bug.\n",
                 diagnostic_text(e.what()).c_str());
    return static_cast<int>(ExitCode::internal);
  }
}

} // namespace lockstep::cli
