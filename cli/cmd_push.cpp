// `lockstep push` and `lockstep pull`: images to and from registries (docs/registry.md).
#include "builder/image/attach.hpp"
#include "cli/cli.hpp"
#include "envspec/settings/settings.hpp"
#include "support/base/log.hpp"
#include "support/oci/image_arg.hpp"
#include "support/registry/oras.hpp"
#include "support/registry/pull.hpp"
#include "support/registry/push.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

namespace lockstep::cli {

namespace {

struct PushArgs {
  std::string image;
  std::vector<std::string> targets;
  std::vector<std::string> tags;
  std::string platform;
  std::vector<std::string> sbom; ///< --sbom files, attached to the image in each target
  std::string key;               ///< --key: sign the image and its provenance
  std::string passphrase_file;
};

struct PullArgs {
  std::string ref;
  std::string platform;
};

constexpr const char* k_push_examples = R"(Examples:
  lockstep push oci:build/hello docker://registry.lab:5000/team/hello:v1
  lockstep push oci:build/hello docker://ghcr.io/team/hello:v1 --tag latest --tag 2026-12
  lockstep push build/hello.sif oras://registry.lab:5000/team/hello:v1      apptainer pull oras://...
  lockstep push docker://registry.lab:5000/team/hello:v1 docker://mirror.lab/team/hello:v1
  lockstep push --tls-verify=false oci:build/hello docker://127.0.0.1:5000/test/hello
  lockstep push oci:build/hello docker://registry.lab:5000/team/hello:v1 --sbom build/hello.spdx.json

IMAGE is any image lockstep reads (oci:, oci-archive:, docker-archive:, docker://, a .sif for
oras:// targets). The digest printed is the manifest digest in the registry, the same as the local
one: the manifest is pushed byte for byte. Blobs the registry has are not sent again; blobs pushed
before to another repository of the same registry are mounted. No manifest is pushed unless every
blob arrived. Credentials: `lockstep login HOST` (docs/registry.md). --sbom attaches an SBOM of
the image (`lockstep sbom`, outputs.sbom) as an OCI referrer; `lockstep sbom docker://...` finds it.
The build's SLSA provenance (kept in the store by `lockstep build`) is attached too: as a DSSE
envelope signed with --key, which also signs the image (docs/signing.md).)";

constexpr const char* k_pull_examples = R"(Examples:
  lockstep pull docker://debian:bookworm                       docker.io/library/debian:bookworm
  lockstep pull docker://registry.lab:5000/team/hello@sha256:4f...
  lockstep pull --platform linux/arm64 docker://ubuntu:22.04
  lockstep pull oras://registry.lab:5000/team/hello.sif:v1     a SIF, as Apptainer pushes it

Every command that reads an image accepts docker:// directly and pulls what it needs; `pull`
fetches ahead (into the content store, $LOCKSTEP_CACHE). Blobs already in the store are never
fetched again. Prints the manifest digest (for oras://, the SIF's path in the store).)";

Result<oci::RegistryRef> registry_target(const std::string& text, oci::ImageRef::Transport want) {
  LS_TRY_ASSIGN(oci::ImageRef ref, oci::ImageRef::parse(text));
  if (ref.transport != want) {
    return invalid_input("'{}' is not a {} reference", text,
                         want == oci::ImageRef::Transport::docker ? "docker://HOST/REPO[:TAG]"
                                                                  : "oras://HOST/REPO[:TAG]");
  }
  return ref.remote;
}

// Tags pushed for one target: its own tag (or digest), then every --tag.
std::vector<std::string> tags_for(const oci::RegistryRef& target, const std::vector<std::string>& extra) {
  std::vector<std::string> tags;
  tags.push_back(registry::push_reference(target));
  for (const auto& t : extra) {
    tags.push_back(t);
  }
  return tags;
}

// What pushing one image of an OCI source sends: its manifest byte for byte, its config and layers.
registry::PushContent image_content(const oci::OpenedImage& image) {
  registry::PushContent content;
  content.manifest_bytes = image.manifest_bytes;
  content.media_type = image.manifest_media_type;
  content.blobs.push_back(image.manifest.config);
  content.blobs.insert(content.blobs.end(), image.manifest.layers.begin(), image.manifest.layers.end());
  return content;
}

// One image of an OCI source, with the SBOMs and provenance, to each target.
Result<void> push_one(oci::ImageSource& source, const oci::OpenedImage& opened, const PushArgs& args,
                      const BlobStore& store, const registry::ClientOptions& options, nlohmann::json& out) {
  const registry::PushContent content = image_content(opened);
  for (const auto& t : args.targets) {
    LS_TRY_ASSIGN(oci::RegistryRef target, registry_target(t, oci::ImageRef::Transport::docker));
    if (target.digest && *target.digest != opened.manifest_digest) {
      return invalid_input("{} names digest {}, but {} has {}", t, target.digest->str(), args.image,
                           opened.manifest_digest.str());
    }
    LS_TRY_ASSIGN(auto pushed,
                  registry::push(source, content, target, tags_for(target, args.tags), store, options));
    oci::Descriptor subject;
    subject.media_type = content.media_type;
    subject.digest = opened.manifest_digest;
    subject.size = static_cast<std::int64_t>(content.manifest_bytes.size());
    std::vector<std::filesystem::path> sboms(args.sbom.begin(), args.sbom.end());
    LS_TRY(builder::attach_sbom_files(target, subject, sboms));
    LS_TRY(builder::attach_provenance(target, subject, args.key, args.passphrase_file));
    out.push_back({{"target", "docker://" + target.name()},
                   {"digest", pushed.first.str()},
                   {"uploaded", pushed.second.uploaded},
                   {"mounted", pushed.second.mounted},
                   {"present", pushed.second.present},
                   {"bytes", pushed.second.bytes}});
  }
  return {};
}

// A multi-platform image (`platforms:`): each platform's image by digest (with its provenance,
// signed with --key), then the index, byte for byte, under `tags` (signed with --key too). Entries
// that are not image manifests (a nested index) are refused.
Result<nlohmann::json> push_index(oci::ImageSource& source, const oci::Descriptor& index,
                                  const oci::RegistryRef& target, const PushArgs& args,
                                  const BlobStore& store, const registry::ClientOptions& options) {
  constexpr std::uint64_t k_max_index = 4U << 20;
  registry::PushContent content;
  LS_TRY_ASSIGN(content.manifest_bytes, source.read_blob(index, k_max_index));
  content.media_type = index.media_type.empty() ? std::string(oci::k_media_index) : index.media_type;
  LS_TRY_ASSIGN(oci::Index parsed, oci::Index::parse(content.manifest_bytes, "index " + index.digest.str()));
  std::size_t uploaded = 0;
  std::size_t present = 0;
  for (const oci::Descriptor& entry : parsed.manifests) {
    if (oci::is_index_type(entry.media_type)) {
      return invalid_input("index {} holds another index ({}); push one platform with --platform",
                           index.digest.str(), entry.digest.str());
    }
    oci::SelectOptions select;
    select.digest = entry.digest;
    select.platform = entry.platform;
    LS_TRY_ASSIGN(oci::OpenedImage image, source.resolve(select));
    LS_TRY_ASSIGN(auto pushed,
                  registry::push_by_digest(source, image_content(image), target, store, options));
    uploaded += pushed.second.uploaded;
    present += pushed.second.present;
    LS_TRY(builder::attach_provenance(pushed.first, entry, args.key, args.passphrase_file));
  }
  LS_TRY_ASSIGN(auto pushed,
                registry::push(source, content, target, tags_for(target, args.tags), store, options));
  oci::Descriptor subject = index;
  subject.media_type = content.media_type;
  LS_TRY(builder::attach_provenance(target, subject, args.key, args.passphrase_file)); // signs the index
  return nlohmann::json{{"target", "docker://" + target.name()},
                        {"digest", pushed.first.str()},
                        {"platforms", parsed.manifests.size()},
                        {"uploaded", uploaded},
                        {"present", present}};
}

Result<ExitCode> run_push(const PushArgs& args, const Context& ctx) {
  for (const auto& t : args.tags) {
    if (!oci::valid_tag(t)) {
      return invalid_input("--tag {}: not a valid tag ([A-Za-z0-9_][A-Za-z0-9._-], at most 128 characters)",
                           t);
    }
  }
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  const registry::ClientOptions& options = registry::default_client_options();
  LS_TRY_ASSIGN(ImageArg image, parse_image_arg(args.image));
  nlohmann::json out = nlohmann::json::array();
  if (image.kind == ImageArg::Kind::sif) {
    if (!args.sbom.empty()) {
      return invalid_input("--sbom attaches to an OCI image; {} is a SIF", args.image);
    }
    std::filesystem::path sif = image.path;
    if (image.ref.is_remote()) {
      LS_TRY_ASSIGN(sif, registry::pull_sif(image.ref.remote, settings::store_root()));
    }
    for (const auto& t : args.targets) {
      LS_TRY_ASSIGN(oci::RegistryRef target, registry_target(t, oci::ImageRef::Transport::oras));
      LS_TRY_ASSIGN(auto pushed,
                    registry::push_sif(sif, target, tags_for(target, args.tags), store, options));
      out.push_back({{"target", "oras://" + target.name()},
                     {"digest", pushed.first.str()},
                     {"uploaded", pushed.second.uploaded},
                     {"present", pushed.second.present}});
    }
  } else if (image.kind == ImageArg::Kind::oci) {
    LS_TRY_ASSIGN(std::unique_ptr<oci::ImageSource> source, registry::open_image(image.ref, store, options));
    oci::SelectOptions select;
    if (!args.platform.empty()) {
      LS_TRY_ASSIGN(select.platform, oci::Platform::parse(args.platform));
    }
    LS_TRY_ASSIGN(oci::OpenedImage opened, source->resolve(select));
    if (opened.index && args.platform.empty()) {
      // A multi-platform image: every platform's image by digest, then the index under the tags.
      if (!args.sbom.empty()) {
        return invalid_input(
            "--sbom attaches to one image; {} holds one per platform: push one with --platform", args.image);
      }
      for (const auto& t : args.targets) {
        LS_TRY_ASSIGN(oci::RegistryRef target, registry_target(t, oci::ImageRef::Transport::docker));
        if (target.digest && *target.digest != opened.index->digest) {
          return invalid_input("{} names digest {}, but {} is the index {}", t, target.digest->str(),
                               args.image, opened.index->digest.str());
        }
        LS_TRY_ASSIGN(nlohmann::json pushed,
                      push_index(*source, *opened.index, target, args, store, options));
        out.push_back(std::move(pushed));
      }
    } else if (opened.synthesized_manifest) {
      return invalid_input(
          "{} is a docker-archive without an OCI layout: it has no registry manifest to push "
          "byte for byte; build or save it as an OCI layout first",
          args.image);
    } else {
      LS_TRY(push_one(*source, opened, args, store, options, out));
    }
  } else {
    return invalid_input("{} is a root directory; push takes an OCI image or a SIF", args.image);
  }
  if (ctx.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    for (const auto& o : out) {
      log::info("pushed {} ({} blobs sent, {} already there)", o["target"].get<std::string>(),
                o["uploaded"].get<std::size_t>(), o["present"].get<std::size_t>());
    }
    std::printf("%s\n", out.back()["digest"].get<std::string>().c_str());
  }
  return ExitCode::ok;
}

Result<ExitCode> run_pull(const PullArgs& args, const Context& ctx) {
  LS_TRY_ASSIGN(oci::ImageRef ref, oci::ImageRef::parse(args.ref));
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  const registry::ClientOptions& options = registry::default_client_options();
  if (ref.transport == oci::ImageRef::Transport::oras) {
    LS_TRY_ASSIGN(std::filesystem::path path, registry::pull_sif(ref.remote, store, options));
    if (ctx.json) {
      std::printf("%s\n", nlohmann::json{{"reference", ref.str()}, {"path", path.string()}}.dump(2).c_str());
    } else {
      std::printf("%s\n", path.c_str());
    }
    return ExitCode::ok;
  }
  if (ref.transport != oci::ImageRef::Transport::docker) {
    return invalid_input("pull takes docker://REF or oras://REF, not {}", args.ref);
  }
  oci::SelectOptions select;
  if (!args.platform.empty()) {
    LS_TRY_ASSIGN(select.platform, oci::Platform::parse(args.platform));
  }
  LS_TRY_ASSIGN(auto pulled, registry::pull(ref.remote, store, select, options));
  const auto& [image, stats] = pulled;
  if (ctx.json) {
    nlohmann::json j{{"reference", ref.str()},           {"digest", image.manifest_digest.str()},
                     {"platform", image.platform.str()}, {"blobs", stats.blobs},
                     {"downloaded", stats.downloaded},   {"bytes", stats.bytes}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    log::info("pulled {} ({} of {} blobs downloaded, {})", ref.str(), stats.downloaded, stats.blobs,
              log::human_size(stats.bytes));
    std::printf("%s\n", image.manifest_digest.str().c_str());
  }
  return ExitCode::ok;
}

} // namespace

void register_push(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<PushArgs>();
  auto* cmd = app.add_subcommand("push", "Push an image to a registry (docker://) or a SIF (oras://)");
  cmd->add_option("IMAGE", args->image, "The image to push (any image lockstep reads)")->required();
  cmd->add_option("TARGET", args->targets,
                  "docker://HOST/REPO[:TAG] or oras://HOST/REPO[:TAG]; several allowed")
      ->required();
  cmd->add_option("--tag", args->tags, "Also push under this tag (repeatable)")
      ->allow_extra_args(false)
      ->type_name("TAG");
  cmd->add_option("--platform", args->platform, "For a multi-platform IMAGE: which one")
      ->type_name("OS/ARCH");
  cmd->add_option("--sbom", args->sbom, "Attach this SBOM of the image (an OCI referrer); repeatable")
      ->allow_extra_args(false)
      ->type_name("FILE");
  cmd->add_option("--key", args->key,
                  "Sign the image (cosign's format) and its build provenance with this private key")
      ->type_name("KEY");
  cmd->add_option("--passphrase-file", args->passphrase_file, "Read the key's passphrase from FILE")
      ->type_name("FILE");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_push_examples);
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_push(*args, ctx); }; });
}

void register_pull(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<PullArgs>();
  auto* cmd = app.add_subcommand("pull", "Fetch a registry image into the content store");
  cmd->add_option("REF", args->ref, "docker://[HOST/]REPO[:TAG][@DIGEST] or oras://HOST/REPO[:TAG]")
      ->required();
  cmd->add_option("--platform", args->platform,
                  "For a multi-platform image: which one (default: this host's)")
      ->type_name("OS/ARCH");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_pull_examples);
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_pull(*args, ctx); }; });
}

} // namespace lockstep::cli
