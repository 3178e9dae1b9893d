// `lockstep verify IMAGE [--lock L]`: the image's files against dpkg's and pip's records, and its
// packages against a lock (docs/verify-diff.md).
#include "cli/cli.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/settings/settings.hpp"
#include "runner/audit/image_contents.hpp"
#include "runner/audit/verify.hpp"
#include "runner/audit/verify_signed.hpp"
#include "support/base/log.hpp"

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

namespace lockstep::cli {

namespace {

constexpr const char* k_verify_footer = R"(Examples:
  lockstep verify oci:out                      every file of every package against dpkg's and pip's records
  lockstep verify out --lock lockstep.lock     also: exactly the lock's debs and wheels, built from that lock
  lockstep verify image.sif --json             the same as JSON (docs/verify-diff.md)
  lockstep verify oci:out --platform linux/arm64 --lock lockstep.lock
                                               the arm64 image of an index, against its platform's share
  lockstep verify docker://registry.lab:5000/team/train:v1 --key lockstep.pub   its signature (docs/signing.md)

IMAGE is oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:NAME[:TAG]], a SIF file, an OCI
layout directory, an OCI or docker archive, or dir:ROOT (an unpacked root).
Checked: each file in /var/lib/dpkg/info/*.md5sums and each conffile of /var/lib/dpkg/status has its
recorded MD5; each row of a .dist-info/RECORD with a hash has that sha256 and size. With --lock: the
image records that lock's digest (when it records one), and its installed debs and wheels are exactly
the lock's (name, version, architecture). A multi-platform lock is compared by the share of the
image's platform.

With --key PUB (a registry image): a cosign signature by that key must name the image's manifest
digest and repository (as skopeo's sigstoreSigned policy with matchRepository checks), and a
provenance attached and signed by the key must be about that digest. With --lock as well, the signed
provenance must exist, name that lock and list exactly its inputs, and the files are checked too.

Exit codes: 0 everything matches, 1 a mismatch (one line per problem; a signature over another
digest names both), 2 the image, the lock, a signature or a record in the image is malformed or
unreadable, 3/4 as for every command.)";

struct VerifyArgs {
  std::string image;
  std::string lock;
  std::string key;
  std::string platform;
};

Result<ExitCode> run_verify(const VerifyArgs& args, const Context& ctx) {
  if (!args.key.empty()) {
    nlohmann::json report;
    std::optional<envspec::Lock> provenance_lock;
    if (!args.lock.empty()) {
      LS_TRY_ASSIGN(provenance_lock, envspec::read_lock(args.lock));
    }
    LS_TRY_ASSIGN(const oci::RegistryRef ref, registry_image_arg(args.image, "verify --key"));
    LS_TRY_ASSIGN(runner::SignedImage signed_image,
                  runner::verify_signature(ref, args.image, args.key, report));
    if (!ctx.json) {
      std::printf("signature ok: %s@%s signed as %s by key %s\n", ref.name().c_str(),
                  signed_image.manifest.digest.str().c_str(), signed_image.signed_as.c_str(),
                  signed_image.key.key_id().str().substr(0, 19).c_str());
    }
    std::optional<oci::Platform> platform;
    if (!args.platform.empty()) {
      LS_TRY_ASSIGN(platform, oci::Platform::parse(args.platform));
    }
    // Of an index, the provenance checked is that of this host's (or --platform's) image.
    LS_TRY_ASSIGN(const runner::SignedImage built,
                  runner::signed_platform_image(std::move(signed_image), platform, settings::store_root()));
    LS_TRY(runner::verify_provenance(built, provenance_lock ? &*provenance_lock : nullptr, report));
    if (!ctx.json && report.contains("provenance") && report["provenance"].is_object()) {
      std::printf("provenance ok: built by %s%s, %zu inputs\n",
                  report["provenance"]["builder"].get<std::string>().c_str(),
                  provenance_lock ? " from this lock" : "",
                  report["provenance"]["dependencies"].get<std::size_t>());
    }
    if (args.lock.empty()) {
      if (ctx.json) {
        std::printf("%s\n", report.dump(2).c_str());
      }
      return ExitCode::ok;
    }
  }
  LS_TRY_ASSIGN(runner::ImageArg image, runner::parse_image_arg(args.image));
  if (!args.platform.empty()) {
    LS_TRY_ASSIGN(image.platform, oci::Platform::parse(args.platform));
  }
  std::optional<envspec::Lock> lock;
  if (!args.lock.empty()) {
    LS_TRY_ASSIGN(lock, envspec::read_lock(args.lock));
  }
  log::Timer read_timer("verify: read the image");
  LS_TRY_ASSIGN(const runner::ImageContents contents, runner::read_for_verify(image));
  read_timer.stop();
  runner::VerifyOptions options;
  options.lock = lock ? &*lock : nullptr;
  options.lock_name = args.lock;
  LS_TRY_ASSIGN(const runner::VerifyReport report, runner::verify_contents(contents, options));
  if (report.debs == 0 && report.wheels == 0 && report.conda == 0) {
    log::warn(
        "{} has no dpkg database (/var/lib/dpkg/status), no .dist-info RECORD and no conda-meta record: "
        "no file records to check",
        report.image);
  }
  if (ctx.json) {
    std::printf(
        "%s\n",
        runner::verify_json(report).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fputs(runner::render_verify_text(report).c_str(), stdout);
  }
  return report.ok() ? ExitCode::ok : ExitCode::check_failed;
}

} // namespace

void register_verify(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand("verify", "Check an image's files against its package records and a lock");
  cmd->add_option(
         "IMAGE", args->image,
         "The image, as every command takes it: oci:DIR, oci-archive:FILE, docker-archive:FILE, a SIF, "
         "dir:ROOT, or a path")
      ->required();
  cmd->add_option("--lock", args->lock, "Also check that the image holds exactly this lock's packages")
      ->type_name("LOCK");
  cmd->add_option("--platform", args->platform,
                  "For a multi-platform image (an index): which one (default: this host's)")
      ->type_name("OS/ARCH");
  cmd->add_option("--key", args->key, "Check the registry image's cosign signature with this public key")
      ->type_name("PUB");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_verify_footer);
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_verify(*args, ctx); }; });
}

} // namespace lockstep::cli
