// `lockstep schema`: print the JSON Schema of lockstep.yaml, made from the spec's shape
// (envspec/load/spec_shape.hpp), for editors' YAML support.
#include "cli/cli.hpp"
#include "envspec/load/spec_shape.hpp"
#include "support/base/log.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace lockstep::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* k_examples = R"(Examples:
  lockstep schema
      print the JSON Schema (draft 2020-12) of lockstep.yaml on standard output
  lockstep schema -o docs/lockstep.schema.json
      regenerate the committed copy (a test fails while it differs from this output)
  # yaml-language-server: $schema=../../docs/lockstep.schema.json
      a comment in a lockstep.yaml that points VS Code's YAML extension (Red Hat) at the schema: a
      path relative to the spec, or a URL; docs/spec.md, "Editor support", shows other editors

The output depends only on the lockstep version: the same lockstep prints the same bytes.)";

struct SchemaArgs {
  std::string output;
};

Result<ExitCode> run_schema(const SchemaArgs& args) {
  const std::string text = envspec::shape::json_schema().dump(2) + "\n";
  if (args.output.empty()) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
      return Error{ExitCode::io, "schema: can't write to standard output"};
    }
    return ExitCode::ok;
  }
  LS_TRY_ASSIGN(AtomicFile out, AtomicFile::create(fs::absolute(args.output), 0644));
  LS_TRY(out.write(text));
  LS_TRY(out.commit());
  log::info("wrote {}", args.output);
  return ExitCode::ok;
}

} // namespace

void register_schema(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<SchemaArgs>();
  auto* cmd = app.add_subcommand("schema", "Print the JSON Schema of lockstep.yaml (for editors)");
  cmd->add_option("-o,--output", args->output, "Write to FILE (atomically) instead of standard output")
      ->type_name("FILE");
  add_common_flags(*cmd, ctx, false);
  cmd->footer(command_footer(k_examples, {ExitCode::ok, ExitCode::invalid_input, ExitCode::io}));
  cmd->callback([args, &ctx] { ctx.action = [args] { return run_schema(*args); }; });
}

} // namespace lockstep::cli
