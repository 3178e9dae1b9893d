// `lockstep sign docker://REF --key KEY` and `lockstep generate-key`: cosign-format signatures of
// registry images, which skopeo's `sigstoreSigned` policies accept (docs/signing.md). Signing is
// builder/image/signing.cpp; checking is `lockstep verify docker://REF --key PUB`
// (runner/audit/verify_signed.cpp). This file parses the arguments and prints.
#include "builder/image/signing.hpp"
#include "cli/cli.hpp"
#include "support/base/log.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

namespace lockstep::cli {

namespace {

struct SignArgs {
  std::string image;
  std::string key;
  std::string passphrase_file;
};

struct GenerateKeyArgs {
  std::string prefix = "lockstep";
  std::string passphrase_file;
};

constexpr const char* k_sign_examples = R"(Examples:
  lockstep generate-key                               lockstep.key (encrypted) and lockstep.pub
  lockstep sign docker://registry.lab:5000/team/train:v1 --key lockstep.key
  lockstep verify docker://registry.lab:5000/team/train:v1 --key lockstep.pub
  LOCKSTEP_KEY_PASSPHRASE=... lockstep sign docker://... --key cosign.key    in CI, without a prompt

The signature is cosign's: a simple-signing payload naming the manifest digest and the reference,
signed with ECDSA P-256/SHA-256, stored under the tag sha256-<hex>.sig of the image's repository,
beside the signatures already there. skopeo and podman verify it with a `sigstoreSigned` policy and
`use-sigstore-attachments: true`; cosign verifies it too. KEY is cosign's encrypted key file
(ENCRYPTED SIGSTORE PRIVATE KEY, as `cosign generate-key-pair` and `lockstep generate-key` write
it), or an unencrypted PEM PRIVATE KEY / EC PRIVATE KEY on P-256. Its passphrase comes from
--passphrase-file, LOCKSTEP_KEY_PASSPHRASE or COSIGN_PASSWORD, else a prompt on the terminal.)";

constexpr const char* k_generate_examples = R"(Examples:
  lockstep generate-key                               lockstep.key and lockstep.pub
  lockstep generate-key --output-prefix team          team.key and team.pub
  LOCKSTEP_KEY_PASSPHRASE= lockstep generate-key       no passphrase (a key for CI secrets)

Writes an ECDSA P-256 key pair in cosign's formats: PREFIX.key, encrypted with the passphrase
(scrypt and NaCl secretbox, "ENCRYPTED SIGSTORE PRIVATE KEY", mode 0600), and PREFIX.pub (PEM
PUBLIC KEY). cosign, skopeo (--sign-by-sigstore-private-key) and podman read both. An existing file
is never overwritten.)";

Result<ExitCode> run_sign(const SignArgs& args, const Context& ctx) {
  LS_TRY_ASSIGN(oci::RegistryRef ref, registry_image_arg(args.image, "sign"));
  LS_TRY_ASSIGN(builder::SignedImage signed_image,
                builder::sign_registry_image(ref, args.key, args.passphrase_file));
  const oci::Descriptor& manifest = signed_image.manifest;
  if (ctx.json) {
    const nlohmann::json j{{"image", "docker://" + ref.name() + "@" + manifest.digest.str()},
                           {"reference", signed_image.reference},
                           {"key", signed_image.key_id},
                           {"signatures", "docker://" + ref.name() + ":" + signed_image.tag},
                           {"signatures_digest", signed_image.signatures_manifest.str()}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    log::info("signed {}@{} with key {} (stored under the tag {})", ref.name(), manifest.digest.str(),
              signed_image.key_id.substr(0, 19), signed_image.tag);
    std::printf("%s\n", manifest.digest.str().c_str());
  }
  return ExitCode::ok;
}

Result<ExitCode> run_generate_key(const GenerateKeyArgs& args) {
  LS_TRY_ASSIGN(builder::KeyPair pair, builder::generate_key_pair(args.prefix, args.passphrase_file));
  log::info("wrote {} (private, encrypted) and {} (public); key {}", pair.private_key.string(),
            pair.public_key.string(), pair.key_id);
  return ExitCode::ok;
}

} // namespace

void register_sign(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<SignArgs>();
  auto* cmd = app.add_subcommand("sign", "Sign a registry image in cosign's format (cosign, and skopeo or "
                                         "podman built with sigstore, verify it)");
  cmd->add_option("IMAGE", args->image, "docker://HOST/REPO[:TAG][@DIGEST]")->required();
  cmd->add_option("--key", args->key, "The private key (cosign's encrypted file, or a PEM P-256 key)")
      ->required()
      ->type_name("KEY");
  cmd->add_option("--passphrase-file", args->passphrase_file, "Read the key's passphrase from FILE")
      ->type_name("FILE");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(command_footer(k_sign_examples, {ExitCode::ok, ExitCode::invalid_input, ExitCode::external}));
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_sign(*args, ctx); }; });

  auto gen = std::make_shared<GenerateKeyArgs>();
  auto* g = app.add_subcommand("generate-key", "Write an ECDSA P-256 key pair in cosign's formats");
  g->add_option("--output-prefix", gen->prefix, "Write PREFIX.key and PREFIX.pub")->capture_default_str();
  g->add_option("--passphrase-file", gen->passphrase_file, "Read the passphrase from FILE")
      ->type_name("FILE");
  add_common_flags(*g, ctx, false);
  g->footer(command_footer(k_generate_examples, {ExitCode::ok, ExitCode::invalid_input}));
  g->callback([gen, &ctx] { ctx.action = [gen] { return run_generate_key(*gen); }; });
}

} // namespace lockstep::cli
