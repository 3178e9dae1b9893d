// `lockstep sign docker://REF --key KEY` and `lockstep generate-key`: cosign-format signatures of
// registry images, which skopeo's `sigstoreSigned` policies accept (docs/signing.md). Checking
// them is `lockstep verify docker://REF --key PUB` (cmd_verify.cpp, verify_registry_image below).
#include "builder/image/build.hpp"
#include "cli/cli.hpp"
#include "envspec/documents/provenance.hpp"
#include "envspec/settings/settings.hpp"
#include "support/base/log.hpp"
#include "support/base/version.hpp"
#include "support/codec/base64.hpp"
#include "support/oci/image_source.hpp"
#include "support/registry/referrers.hpp"
#include "support/supplychain/sigstore.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace lockstep::cli {

namespace {

namespace fs = std::filesystem;

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

// A passphrase typed on the terminal, without echo.
Result<std::string> prompt(const char* question) {
  std::FILE* tty = std::fopen("/dev/tty", "r+");
  if (tty == nullptr) {
    return invalid_input(
        "the key's passphrase: give --passphrase-file or set LOCKSTEP_KEY_PASSPHRASE (there is "
        "no terminal to ask on)");
  }
  std::fputs(question, tty);
  std::fflush(tty);
  termios old{};
  const bool restore = ::tcgetattr(::fileno(tty), &old) == 0;
  if (restore) {
    termios quiet = old;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(::fileno(tty), TCSAFLUSH, &quiet);
  }
  std::string line;
  for (int c = std::fgetc(tty); c != EOF && c != '\n'; c = std::fgetc(tty)) {
    line += static_cast<char>(c);
  }
  if (restore) {
    ::tcsetattr(::fileno(tty), TCSAFLUSH, &old);
  }
  std::fputs("\n", tty);
  std::fclose(tty);
  return line;
}

// The passphrase from --passphrase-file, the environment, or the terminal.
Result<std::string> passphrase(const std::string& file, bool confirm) {
  if (!file.empty()) {
    LS_TRY_ASSIGN(std::string text, read_file(file, 64 << 10));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
      text.pop_back();
    }
    return text;
  }
  for (const char* name : {"LOCKSTEP_KEY_PASSPHRASE", "COSIGN_PASSWORD"}) {
    if (const char* v = std::getenv(name)) {
      return std::string(v);
    }
  }
  LS_TRY_ASSIGN(std::string first, prompt("Passphrase for the private key: "));
  if (confirm) {
    LS_TRY_ASSIGN(std::string again, prompt("The passphrase again: "));
    if (again != first) {
      return invalid_input("the two passphrases differ; nothing was written");
    }
  }
  return first;
}

Result<oci::RegistryRef> registry_image(const std::string& text, const char* command) {
  LS_TRY_ASSIGN(oci::ImageRef ref, oci::ImageRef::parse(text));
  if (ref.transport != oci::ImageRef::Transport::docker) {
    return invalid_input("{}: {} is not a registry image; signatures live beside an image in its registry "
                         "(docker://HOST/REPO:TAG): push it first",
                         command, text);
  }
  return ref.remote;
}

// HOST/REPO of a signed reference (HOST/REPO[:TAG][@DIGEST]).
std::string repository_of(std::string reference) {
  reference = reference.substr(0, reference.find('@'));
  const std::size_t colon = reference.rfind(':');
  const std::size_t slash = reference.rfind('/');
  return colon != std::string::npos && (slash == std::string::npos || colon > slash)
             ? reference.substr(0, colon)
             : reference;
}

// The reference a signature names: HOST/REPO:TAG, or HOST/REPO for a digest.
std::string signed_reference(const oci::RegistryRef& ref) {
  return ref.tag.empty() ? ref.name() : ref.name() + ":" + ref.tag;
}

// Signs `digest` as `ref` names it; returns the signature manifest's digest.
Result<Digest> sign_image(const oci::RegistryRef& ref, const Digest& digest, const SigningKey& key) {
  const std::string payload =
      simple_signing_payload(signed_reference(ref), digest, fmt::format("lockstep {}", k_version));
  LS_TRY_ASSIGN(std::string signature, key.sign(payload));
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  return registry::add_signature(ref, digest, payload, base64_encode(signature), store,
                                 registry::default_client_options());
}

Result<ExitCode> run_sign(const SignArgs& args, const Context& ctx) {
  LS_TRY_ASSIGN(oci::RegistryRef ref, registry_image(args.image, "sign"));
  LS_TRY_ASSIGN(SigningKey key,
                SigningKey::load_private(args.key, [&] { return passphrase(args.passphrase_file, false); }));
  LS_TRY_ASSIGN(oci::Descriptor manifest,
                registry::resolve_manifest(ref, registry::default_client_options()));
  LS_TRY_ASSIGN(Digest sig_manifest, sign_image(ref, manifest.digest, key));
  const std::string tag = registry::signature_tag(manifest.digest);
  if (ctx.json) {
    const nlohmann::json j{{"image", "docker://" + ref.name() + "@" + manifest.digest.str()},
                           {"reference", signed_reference(ref)},
                           {"key", key.key_id().str()},
                           {"signatures", "docker://" + ref.name() + ":" + tag},
                           {"signatures_digest", sig_manifest.str()}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    log::info("signed {}@{} with key {} (stored under the tag {})", ref.name(), manifest.digest.str(),
              key.key_id().str().substr(0, 19), tag);
    std::printf("%s\n", manifest.digest.str().c_str());
  }
  return ExitCode::ok;
}

Result<ExitCode> run_generate_key(const GenerateKeyArgs& args) {
  const fs::path priv = args.prefix + ".key";
  const fs::path pub = args.prefix + ".pub";
  std::error_code ec;
  for (const fs::path& p : {priv, pub}) {
    if (fs::exists(fs::symlink_status(p, ec))) {
      return invalid_input("generate-key: {} exists; lockstep never overwrites a key (remove it or give "
                           "--output-prefix)",
                           p.string());
    }
  }
  LS_TRY_ASSIGN(std::string secret, passphrase(args.passphrase_file, true));
  LS_TRY_ASSIGN(SigningKey key, SigningKey::generate());
  LS_TRY_ASSIGN(std::string priv_pem, key.encrypted_private_pem(secret));
  LS_TRY_ASSIGN(AtomicFile p, AtomicFile::create(fs::absolute(priv), 0600));
  LS_TRY(p.write(priv_pem));
  LS_TRY(p.commit());
  LS_TRY_ASSIGN(AtomicFile q, AtomicFile::create(fs::absolute(pub), 0644));
  LS_TRY(q.write(key.public_pem()));
  LS_TRY(q.commit());
  log::info("wrote {} (private, encrypted) and {} (public); key {}", priv.string(), pub.string(),
            key.key_id().str());
  return ExitCode::ok;
}

constexpr std::string_view k_media_dsse = "application/vnd.dsse.envelope.v1+json";

} // namespace

Result<void> attach_provenance(const oci::RegistryRef& target, const oci::Descriptor& subject,
                               const std::string& key_path, const std::string& passphrase_file) {
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  std::optional<SigningKey> key;
  if (!key_path.empty()) {
    LS_TRY_ASSIGN(key,
                  SigningKey::load_private(key_path, [&] { return passphrase(passphrase_file, false); }));
    LS_TRY(sign_image(target, subject.digest, *key));
    log::info("signed docker://{}@{} with key {}", target.name(), subject.digest.str().substr(0, 19),
              key->key_id().str().substr(0, 19));
  }
  const std::optional<std::string> statement = builder::provenance_record(store, subject.digest);
  if (!statement) {
    log::debug("no provenance of {} in the store (it was not built here): none attached",
               subject.digest.str());
    return {};
  }
  registry::Attachment a;
  if (key) {
    LS_TRY_ASSIGN(a.content, dsse_sign(*key, envspec::k_intoto_payload_type, *statement));
    a.artifact_type = std::string(k_media_dsse);
  } else {
    a.content = *statement;
    a.artifact_type = std::string(envspec::k_intoto_payload_type);
  }
  a.media_type = a.artifact_type;
  LS_TRY_ASSIGN(registry::Attached attached,
                registry::attach(target, subject, a, store, registry::default_client_options()));
  log::info("attached the build's provenance{} to docker://{}@{} ({})", key ? ", signed," : "", target.name(),
            subject.digest.str().substr(0, 19), attached.manifest.digest.str().substr(0, 19));
  return {};
}

namespace {

// The image `verify --key` checks: its reference, the key, its manifest as the registry holds it.
struct CheckedImage {
  oci::RegistryRef ref;
  SigningKey key;
  oci::Descriptor manifest;
};

// A provenance attached to the image and signed by the key must be about its digest; with `lock`,
// one must exist, name that lock and list exactly its inputs.
Result<void> verify_provenance(const CheckedImage& image, const envspec::Lock* lock, nlohmann::json& report) {
  const oci::RegistryRef& ref = image.ref;
  const SigningKey& key = image.key;
  const oci::Descriptor& manifest = image.manifest;
  const registry::ClientOptions& options = registry::default_client_options();
  LS_TRY_ASSIGN(std::vector<oci::Descriptor> found,
                registry::list_referrers(ref, manifest.digest, k_media_dsse, options));
  std::optional<envspec::ProvenanceFacts> facts;
  for (const oci::Descriptor& d : found) {
    LS_TRY_ASSIGN(std::string text, registry::fetch_referrer(ref, d, manifest.digest, 16ULL << 20, options));
    const std::string what = fmt::format("provenance {} of {}", d.digest.str().substr(0, 19), ref.name());
    LS_TRY_ASSIGN(DsseEnvelope env, parse_dsse(text, what));
    const bool by_key =
        std::any_of(env.signatures.begin(), env.signatures.end(), [&](const std::string& sig) {
          return key.verify(dsse_pae(env.payload_type, env.payload), sig);
        });
    if (!by_key) {
      continue;
    }
    if (env.payload_type != envspec::k_intoto_payload_type) {
      return invalid_input("{}: payloadType {}, not {}", what, env.payload_type,
                           envspec::k_intoto_payload_type);
    }
    LS_TRY_ASSIGN(envspec::ProvenanceFacts f, envspec::read_provenance(env.payload, what));
    if (f.subject != manifest.digest) {
      return Error{ExitCode::check_failed, fmt::format("{} is a statement about {}, not the image's {}", what,
                                                       f.subject.str(), manifest.digest.str())};
    }
    facts = std::move(f);
  }
  if (!facts) {
    report["provenance"] = "none";
    if (lock != nullptr) {
      return Error{
          ExitCode::check_failed,
          fmt::format("{} ({}) has no provenance signed by key {}: push it with `lockstep push ... --key "
                      "KEY` from the store that built it",
                      ref.str(), manifest.digest.str(), key.key_id().str().substr(0, 19))};
    }
    return {};
  }
  report["provenance"] = {{"builder", facts->builder_id},
                          {"lock", facts->lock ? facts->lock->str() : std::string()},
                          {"dependencies", facts->dependencies.size()}};
  if (lock != nullptr) {
    const Digest want = envspec::lock_digest(*lock);
    if (!facts->lock || *facts->lock != want) {
      return Error{ExitCode::check_failed,
                   fmt::format("{}: its provenance says it was built from the lock {}, not {}", ref.str(),
                               facts->lock ? facts->lock->str() : std::string("(none)"), want.str())};
    }
    const std::map<std::string, std::string> deps = envspec::lock_dependencies(*lock);
    std::vector<std::string> differences;
    for (const auto& [sha, uri] : deps) {
      if (!facts->dependencies.contains(sha)) {
        differences.push_back("missing " + uri);
      }
    }
    for (const auto& [sha, uri] : facts->dependencies) {
      if (!deps.contains(sha)) {
        differences.push_back("not in the lock: " + uri);
      }
    }
    if (!differences.empty()) {
      return Error{
          ExitCode::check_failed,
          fmt::format("{}: its provenance's inputs differ from the lock's ({} differences), first: {}",
                      ref.str(), differences.size(), differences.front())};
    }
  }
  return {};
}

// A cosign signature by the key must name the image's digest and repository.
Result<void> verify_signatures(const CheckedImage& image, const std::string& image_text,
                               const std::string& public_key, const Context& ctx, nlohmann::json& report) {
  const auto& [ref, key, manifest] = image;
  const registry::ClientOptions& options = registry::default_client_options();
  LS_TRY_ASSIGN(std::vector<registry::AttachedSignature> signatures,
                registry::fetch_signatures(ref, manifest.digest, options));
  report["image"] = "docker://" + ref.name() + "@" + manifest.digest.str();
  report["key"] = key.key_id().str();
  nlohmann::json found = nlohmann::json::array();
  std::optional<std::string> valid;
  std::vector<std::string> other_digests;
  std::vector<std::string> other_repositories;
  std::vector<std::string> malformed;
  for (const registry::AttachedSignature& s : signatures) {
    nlohmann::json one{{"payload", s.layer.str()}};
    const std::string what = fmt::format("signature {} of {}", s.layer.str().substr(0, 19), ref.name());
    Result<std::string> der = base64_decode(s.signature, what);
    if (s.signature.empty() || !der) {
      malformed.push_back(what + ": no base64 signature in its annotation");
      one["result"] = "malformed";
      found.push_back(one);
      continue;
    }
    if (!key.verify(s.payload, *der)) {
      one["result"] = "another key";
      found.push_back(one);
      continue;
    }
    Result<SimpleSigning> payload = parse_simple_signing(s.payload, what);
    if (!payload) {
      malformed.push_back(payload.error().message);
      one["result"] = "malformed";
    } else if (payload->digest != manifest.digest) {
      other_digests.push_back(payload->digest.str());
      one["result"] = "another digest";
      one["digest"] = payload->digest.str();
    } else {
      if (repository_of(payload->reference) != ref.name()) {
        other_repositories.push_back(payload->reference);
        one["result"] = "another repository";
        one["reference"] = payload->reference;
      } else {
        one["result"] = "ok";
        one["reference"] = payload->reference;
        valid = payload->reference;
      }
    }
    found.push_back(one);
  }
  report["signatures"] = found;
  if (valid) {
    if (!ctx.json) {
      std::printf("signature ok: %s@%s signed as %s by key %s\n", ref.name().c_str(),
                  manifest.digest.str().c_str(), valid->c_str(), key.key_id().str().substr(0, 19).c_str());
    }
    return {};
  }
  if (!other_digests.empty()) {
    return Error{ExitCode::check_failed,
                 fmt::format("{}: the signature by key {} is over {}, not the image's {}", ref.str(),
                             key.key_id().str().substr(0, 19), other_digests.front(), manifest.digest.str())};
  }
  if (!other_repositories.empty()) {
    return Error{ExitCode::check_failed,
                 fmt::format("{}: the signature by key {} names {}, another repository", ref.str(),
                             key.key_id().str().substr(0, 19), other_repositories.front())};
  }
  if (!malformed.empty()) {
    return invalid_input("{}", malformed.front());
  }
  return Error{
      ExitCode::check_failed,
      fmt::format("{} ({}) has {} signature{}, none by key {} ({}); sign it with `lockstep sign {} --key "
                  "KEY`",
                  ref.str(), manifest.digest.str(), signatures.size(), signatures.size() == 1 ? "" : "s",
                  key.key_id().str().substr(0, 19), public_key, image_text)};
}

} // namespace

Result<void> verify_registry_image(const std::string& image, const std::string& public_key,
                                   const envspec::Lock* lock, const Context& ctx, nlohmann::json& report) {
  LS_TRY_ASSIGN(oci::RegistryRef ref, registry_image(image, "verify --key"));
  LS_TRY_ASSIGN(SigningKey key, SigningKey::load_public(public_key));
  LS_TRY_ASSIGN(oci::Descriptor manifest,
                registry::resolve_manifest(ref, registry::default_client_options()));
  const CheckedImage checked{std::move(ref), std::move(key), std::move(manifest)};
  LS_TRY(verify_signatures(checked, image, public_key, ctx, report));
  return verify_provenance(checked, lock, report);
}

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
