// `lockstep inspect`: summarise an existing image (OCI layout, OCI archive, docker-archive).
#include "cli/cli.hpp"
#include "runner/audit/inspect.hpp"

#include <cstdio>
#include <memory>

namespace lockstep::cli {

namespace {

struct InspectArgs {
  std::string image;
  std::string platform;
  std::string digest;
};

constexpr const char* k_examples = R"(Examples:
  lockstep inspect oci:build/hello                 the only image of an OCI layout directory
  lockstep inspect oci:build/hello:v1              the image tagged v1 (org.opencontainers.image.ref.name)
  lockstep inspect --json docker-archive:hello.tar
  lockstep inspect docker-archive:all.tar:hello:v1 one image of a multi-image `docker save` archive
  lockstep inspect --platform linux/arm64 oci-archive:multi.tar

IMAGE is oci:DIR[:TAG], oci-archive:FILE[:TAG] or docker-archive:FILE[:NAME[:TAG]]. Every blob read is
verified against its digest; a corrupt or hostile image is refused with exit code 2.
The output is described in docs/inspect.md.)";

Result<ExitCode> run_inspect(const InspectArgs& args, const Context& ctx) {
  oci::SelectOptions options;
  if (!args.platform.empty()) {
    LS_TRY_ASSIGN(options.platform, oci::Platform::parse(args.platform));
  }
  if (!args.digest.empty()) {
    LS_TRY_ASSIGN(options.digest, Digest::parse(args.digest));
  }
  LS_TRY_ASSIGN(runner::ImageSummary summary, runner::inspect_image(args.image, options));
  if (ctx.json) {
    std::string text =
        runner::summary_to_json(summary).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("%s\n", text.c_str());
  } else {
    std::fputs(runner::summary_to_text(summary).c_str(), stdout);
  }
  return ExitCode::ok;
}

} // namespace

void register_inspect(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<InspectArgs>();
  auto* cmd = app.add_subcommand("inspect", "Show an image's manifest, config and layers");
  cmd->add_option(
         "IMAGE", args->image,
         "The image: oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE, or the path of an OCI "
         "layout directory or archive")
      ->required();
  cmd->add_option("--platform", args->platform,
                  "For a multi-platform image: which one (default: this host's)")
      ->type_name("OS/ARCH");
  cmd->add_option("--digest", args->digest, "Select (or require) the manifest with this digest")
      ->type_name("sha256:HEX");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_examples);
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_inspect(*args, ctx); }; });
}

} // namespace lockstep::cli
