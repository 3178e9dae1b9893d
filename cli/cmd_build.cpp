// `lockstep build`: build the spec's image and write its outputs.
#include "builder/image/attach.hpp"
#include "builder/image/build.hpp"
#include "builder/image/platforms_build.hpp"
#include "builder/lock/mirrors.hpp"
#include "builder/lock/relock.hpp"
#include "cli/cli.hpp"
#include "envspec/load/load.hpp"
#include "envspec/settings/settings.hpp"
#include "envspec/spec/spec.hpp"
#include "runner/runtime/subids.hpp"
#include "support/base/log.hpp"
#include "support/registry/push.hpp"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <memory>

namespace lockstep::cli {

namespace {

struct BuildArgs {
  std::string spec = "lockstep.yaml";
  std::string oci;
  std::string oci_archive;
  std::string docker_archive;
  std::string sif;
  std::string sif_compression;
  std::string tag;
  std::string compression;
  bool allow_outside = false;
  bool no_vcs = false;
  bool locked = false;
  std::string lock;
  std::vector<std::string> push;    ///< docker:// targets
  std::vector<std::string> sbom;    ///< --sbom files
  std::string provenance;           ///< --provenance FILE
  std::vector<std::string> mirrors; ///< --mirror
  bool offline = false;
  std::string key; ///< --key: sign what --push pushes
  std::string passphrase_file;
  std::string userns = "auto";
};

constexpr const char* k_examples = R"(Examples:
  lockstep build                                   build ./lockstep.yaml into its `outputs`
  lockstep build examples/hello/lockstep.yaml --oci build/hello --docker-archive build/hello.tar
  lockstep build --tag v1 --compression zstd --oci-archive hello.oci.tar
  lockstep build --sif hello.sif                   a SIF for Apptainer: apptainer run hello.sif
  lockstep build --locked examples/mpi-hello/lockstep.yaml   CI: refuse a missing or stale lock
  digest=$(lockstep build -q)                      the manifest digest is the last line on stdout
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) lockstep build --json
  lockstep build --push docker://registry.lab:5000/team/app:v1 --push docker://registry.lab:5000/team/app:latest
  lockstep build --locked --offline --mirror /srv/vendor   from `lockstep vendor`, no network
  lockstep build --sbom app.spdx.json --oci out   the image's SBOM too (pushed with it by --push)
  lockstep build --userns single                   without root: map only your own ids (no /etc/subuid)

Output paths given here replace the spec's `outputs` paths. Timestamps come from the lock, else
SOURCE_DATE_EPOCH (default 0), never the clock; the same spec, lock and inputs give the same digest
on any machine. A spec with packages, a Debian base or git sources builds from its lock
(lockstep.lock beside it): without --locked a missing or stale lock is made first. Without root the
image is the same: maintainer scripts and run: steps get other owners through subordinate ids
(--userns subuid) or a supervisor that records them (--userns single); see docs/rootless.md.)";

nlohmann::json result_to_json(const builder::BuildResult& r, const envspec::Spec& spec) {
  nlohmann::json j;
  j["name"] = spec.name;
  j["manifest_digest"] = r.manifest.digest.str();
  j["manifest_size"] = r.manifest.size;
  if (!r.platforms.empty()) { // an index: each platform's image as a build of it alone reports it
    j["media_type"] = r.manifest.media_type;
    j["spec_digest"] = spec.digest.str();
    j["epoch"] = r.epoch;
    j["tag"] = r.repo_tag;
    j["platforms"] = nlohmann::json::array();
    for (std::size_t i = 0; i < r.platforms.size(); ++i) {
      j["platforms"].push_back(
          result_to_json(r.platforms[i], envspec::spec_for_platform(spec, spec.platforms[i])));
    }
    j["outputs"] = nlohmann::json::array();
    for (const auto& o : r.outputs) {
      j["outputs"].push_back({{"kind", o.kind}, {"path", o.path.string()}, {"reference", o.reference()}});
    }
    return j;
  }
  j["config_digest"] = r.config.digest.str();
  j["spec_digest"] = spec.digest.str();
  j["platform"] = spec.platform.str();
  j["epoch"] = r.epoch;
  j["tag"] = r.repo_tag;
  j["layers"] = nlohmann::json::array();
  for (std::size_t i = 0; i < r.layers.size(); ++i) {
    nlohmann::json l = r.layers[i].to_json();
    l["diff_id"] = r.diff_ids[i].str();
    bool from_base = i < r.base_layer_count;
    l["source"] = from_base ? "base" : "built";
    if (!from_base) {
      l["cached"] = static_cast<bool>(r.layer_cached[i - r.base_layer_count]);
    }
    j["layers"].push_back(l);
  }
  j["outputs"] = nlohmann::json::array();
  for (const auto& o : r.outputs) {
    j["outputs"].push_back({{"kind", o.kind}, {"path", o.path.string()}, {"reference", o.reference()}});
  }
  if (r.git) {
    j["git"] = {{"commit", r.git->commit}, {"dirty", r.git->dirty}};
  }
  return j;
}

// A multi-platform build: each platform's image by digest (with its provenance), before the index
// that names them is pushed to `target`'s tags.
Result<void> push_platform_images(const builder::BuildResult& result, const oci::RegistryRef& target,
                                  oci::ImageSource& source, const BlobStore& store, const BuildArgs& args) {
  for (const builder::BuildResult& one : result.platforms) {
    registry::PushContent content;
    LS_TRY_ASSIGN(content.manifest_bytes, store.read(one.manifest.digest));
    content.media_type = one.manifest.media_type;
    content.blobs.push_back(one.config);
    content.blobs.insert(content.blobs.end(), one.layers.begin(), one.layers.end());
    LS_TRY_ASSIGN(auto pushed, registry::push_by_digest(source, content, target, store,
                                                        registry::default_client_options()));
    log::info("pushed docker://{}@{} ({}; {} blobs sent, {} mounted, {} already there)", target.name(),
              one.manifest.digest.str(), one.manifest.platform ? one.manifest.platform->str() : "",
              pushed.second.uploaded, pushed.second.mounted, pushed.second.present);
    LS_TRY(builder::attach_provenance(pushed.first, one.manifest, args.key, args.passphrase_file));
  }
  return {};
}

// --push: the built image, from the store, to each target (one upload per repository; the tags of
// one repository in one push). A multi-platform image: every platform's image, then the index.
Result<void> push_result(const builder::BuildResult& result, const std::vector<oci::RegistryRef>& targets,
                         const BuildArgs& args) {
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  registry::PushContent content;
  LS_TRY_ASSIGN(content.manifest_bytes, store.read(result.manifest.digest));
  content.media_type = result.manifest.media_type;
  if (result.platforms.empty()) {
    content.blobs.push_back(result.config);
    content.blobs.insert(content.blobs.end(), result.layers.begin(), result.layers.end());
  }
  auto source = registry::local_blobs({}, store);
  std::vector<std::filesystem::path> sbom_files; // the SBOMs written go along, attached to the image
  for (const builder::WrittenOutput& o : result.outputs) {
    if (o.kind == "sbom") {
      sbom_files.push_back(o.path);
    }
  }
  std::vector<bool> done(targets.size(), false);
  for (const auto& t : targets) {
    if (t.digest && *t.digest != result.manifest.digest) {
      return invalid_input("--push docker://{} names digest {}, but the image built is {}", t.str(),
                           t.digest->str(), result.manifest.digest.str());
    }
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (done[i]) {
      continue;
    }
    std::vector<std::string> tags;
    for (std::size_t j = i; j < targets.size(); ++j) {
      if (!done[j] && targets[j].name() == targets[i].name()) {
        tags.push_back(registry::push_reference(targets[j]));
        done[j] = true;
      }
    }
    if (!result.platforms.empty()) {
      LS_TRY(push_platform_images(result, targets[i], *source, store, args));
    }
    LS_TRY_ASSIGN(auto pushed, registry::push(*source, content, targets[i], tags, store,
                                              registry::default_client_options()));
    log::info("pushed docker://{} ({} blobs sent, {} mounted, {} already there)", targets[i].name(),
              pushed.second.uploaded, pushed.second.mounted, pushed.second.present);
    if (result.platforms.empty()) { // a multi-platform image's SBOMs are its platforms'
      LS_TRY(builder::attach_sbom_files(targets[i], result.manifest, sbom_files));
    }
    // The image's provenance, signed with --key; of an index (its platforms' are theirs), the signature.
    LS_TRY(builder::attach_provenance(targets[i], result.manifest, args.key, args.passphrase_file));
  }
  return {};
}

Result<ExitCode> run_build(const BuildArgs& args, const Context& ctx) {
  envspec::LoadOptions load;
  load.allow_outside = args.allow_outside;
  log::Timer load_timer("load spec");
  LS_TRY_ASSIGN(envspec::Spec spec, envspec::load_spec(args.spec, load));
  load_timer.stop();

  if (args.offline && !args.locked) {
    return invalid_input("--offline builds from the lock as it is: add --locked");
  }
  LS_TRY(builder::configure_mirrors(args.mirrors, spec.mirrors, spec.dir, args.offline));
  builder::BuildOptions options;
  LS_TRY_ASSIGN(options.lock, builder::lock_for_build(spec, args.lock, args.locked));
  if (!args.oci.empty()) {
    options.oci = std::filesystem::absolute(args.oci);
  }
  if (!args.oci_archive.empty()) {
    options.oci_archive = std::filesystem::absolute(args.oci_archive);
  }
  if (!args.docker_archive.empty()) {
    options.docker_archive = std::filesystem::absolute(args.docker_archive);
  }
  if (!args.sif.empty()) {
    options.sif = std::filesystem::absolute(args.sif);
  }
  for (const std::string& f : args.sbom) {
    options.sbom.push_back(std::filesystem::absolute(f));
  }
  if (!args.provenance.empty()) {
    options.provenance = std::filesystem::absolute(args.provenance);
  }
  if (!args.key.empty() && args.push.empty()) {
    return invalid_input("--key signs what --push pushes; give --push docker://... (or sign later with "
                         "`lockstep push ... --key`)");
  }
  if (!args.sif_compression.empty()) {
    options.sif_compression = parse_squashfs_compressor(args.sif_compression);
  }
  options.tag = args.tag;
  if (args.compression == "zstd") {
    options.compression = Codec::zstd;
  } else if (args.compression == "gzip") {
    options.compression = Codec::gzip;
  }
  options.vcs_annotations = !args.no_vcs;
  options.registry = registry::default_client_options(); // --tls-verify etc., for a docker:// base too
  LS_TRY_ASSIGN(runner::UsernsMode userns, runner::parse_userns_mode(args.userns));
  if (::geteuid() != 0) {
    LS_TRY_ASSIGN(options.subids, runner::choose_subordinate_ids(userns));
    log::debug("build sandbox ids: {}",
               options.subids ? fmt::format("the caller and subordinate uids {}+{}",
                                            options.subids->uid_first, options.subids->uid_count)
                              : std::string("the caller's only"));
  }

  std::vector<oci::RegistryRef> targets;
  for (const std::string& t : args.push) {
    LS_TRY_ASSIGN(oci::ImageRef ref, oci::ImageRef::parse(t));
    if (ref.transport != oci::ImageRef::Transport::docker) {
      return invalid_input("--push {}: expected docker://HOST/REPO[:TAG]", t);
    }
    targets.push_back(ref.remote);
  }

  LS_TRY_ASSIGN(builder::BuildResult result, spec.platforms.size() > 1
                                                 ? builder::build_platforms(spec, options)
                                                 : builder::build_image(spec, options));
  if (!targets.empty()) {
    LS_TRY(push_result(result, targets, args));
  }
  if (result.outputs.empty()) {
    log::info("no outputs requested (set `outputs` in the spec or pass --oci/--oci-archive/--docker-archive/"
              "--sif); the image is in the store at {}",
              settings::store_root().string());
  }
  if (ctx.json) {
    std::printf("%s\n", result_to_json(result, spec).dump(2).c_str());
  } else {
    std::printf("%s\n", result.manifest.digest.str().c_str());
  }
  return ExitCode::ok;
}

} // namespace

void register_build(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<BuildArgs>();
  auto* cmd = app.add_subcommand("build", "Build the spec's image into OCI layout / archive outputs");
  cmd->add_option("SPEC", args->spec, "The spec file")->capture_default_str();
  cmd->add_option("--oci", args->oci, "Write an OCI image layout directory")->type_name("DIR");
  cmd->add_option("--push", args->push, "Push the image to docker://HOST/REPO[:TAG] (repeatable)")
      ->allow_extra_args(false)
      ->type_name("REF");
  cmd->add_option("--oci-archive", args->oci_archive, "Write an OCI archive (tar of a layout)")
      ->type_name("FILE");
  cmd->add_option("--docker-archive", args->docker_archive, "Write a docker-archive for `docker load`")
      ->type_name("FILE");
  cmd->add_option("--sif", args->sif, "Write a SIF (Singularity Image Format) file for Apptainer/Singularity")
      ->type_name("FILE");
  cmd->add_option(
         "--sbom", args->sbom,
         "Write the image's SBOM: FILE.spdx.json (SPDX 2.3) or FILE.cdx.json (CycloneDX 1.6); repeatable")
      ->allow_extra_args(false)
      ->type_name("FILE");
  cmd->add_option("--mirror", args->mirrors,
                  "Fetch the lock's files from this vendor DIR or docker://REGISTRY/REPO first (repeatable)")
      ->allow_extra_args(false)
      ->type_name("WHERE");
  cmd->add_flag("--offline", args->offline,
                "Never ask upstream: only the store and the mirrors (with --locked)");
  cmd->add_option("--provenance", args->provenance,
                  "Also write the build's SLSA v1 provenance (in-toto statement) to FILE")
      ->type_name("FILE");
  cmd->add_option("--key", args->key, "With --push: sign the image and its provenance with this private key")
      ->type_name("KEY");
  cmd->add_option("--passphrase-file", args->passphrase_file, "Read the key's passphrase from FILE")
      ->type_name("FILE");
  cmd->add_option("--sif-compression", args->sif_compression,
                  "SIF squashfs compression (default: outputs.sif_compression or gzip)")
      ->check(CLI::IsMember({"gzip", "zstd", "xz", "lz4"}));
  cmd->add_option("--tag", args->tag, "Tag (TAG or NAME:TAG); default: the spec's name and 'latest'")
      ->type_name("T");
  cmd->add_option("--compression", args->compression,
                  "Layer compression (default: outputs.compression or gzip)")
      ->check(CLI::IsMember({"gzip", "zstd"}));
  cmd->add_flag("--allow-outside", args->allow_outside,
                "Allow host paths the spec reads (extends, copy, local repositories) outside its directory");
  cmd->add_option("--userns", args->userns,
                  "Without root, how the build sandbox maps ids: auto (subuid when you have a range), "
                  "subuid (/etc/subuid via newuidmap) or single (your ids only; owners recorded)")
      ->type_name("MODE")
      ->capture_default_str();
  cmd->add_flag("--no-vcs", args->no_vcs, "Don't record the spec's git revision in the manifest");
  cmd->add_flag("--locked", args->locked,
                "Build from the existing lock only; exit 1 if it is missing or stale");
  cmd->add_option("--lock", args->lock, "The lockfile (default: the spec's name with .lock)")
      ->type_name("FILE");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_examples);
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_build(*args, ctx); }; });
}

} // namespace lockstep::cli
