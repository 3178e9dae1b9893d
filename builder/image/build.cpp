#include "builder/image/build.hpp"

#include "builder/image/conda_layers.hpp"
#include "builder/image/deb_layers.hpp"
#include "builder/image/git_layers.hpp"
#include "builder/image/image_facts.hpp"
#include "builder/image/run_step.hpp"
#include "builder/image/sbom_output.hpp"
#include "builder/image/sif_output.hpp"
#include "builder/image/wheel_layers.hpp"
#include "builder/lock/base_contents.hpp"
#include "builder/lock/base_image.hpp"
#include "builder/lock/epoch.hpp"
#include "builder/lock/lock.hpp"
#include "envspec/documents/provenance.hpp"
#include "envspec/settings/settings.hpp"
#include "envspec/spec/host_paths.hpp"
#include "envspec/stack/stack.hpp"
#include "runner/runtime/emulation.hpp"
#include "support/base/log.hpp"
#include "support/base/version.hpp"
#include "support/oci/image_source.hpp"
#include "support/oci/image_writer.hpp"
#include "support/registry/pull.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>

namespace lockstep::builder {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* k_default_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr const char* k_annotation_spec_digest = "dev.lockstep.spec.digest";
constexpr const char* k_annotation_dirty = "dev.lockstep.source.dirty";
constexpr const char* k_annotation_impure = "dev.lockstep.impure";
constexpr const char* k_annotation_lock_digest = "dev.lockstep.lock.digest";

// The base image, resolved, with its layers in the store.
struct Base {
  oci::OpenedImage image;
  /// "oci:PATH[:TAG]" as written in the spec, or the registry reference "HOST/REPO[:TAG][@DIGEST]"
  /// normalised (the org.opencontainers.image.base.name annotation)
  std::string name;
};

Error base_refusal(const envspec::Spec& spec, const std::string& message) {
  return base_error(spec, invalid_input("{}", message));
}

// Pass: open the base image (the lock's manifest when the lock records one), check its platform,
// import its layers into the store.
Result<std::optional<Base>> resolve_base(const envspec::Spec& spec, const BlobStore& store,
                                         const registry::ClientOptions& client,
                                         const std::optional<envspec::Lock>& lock) {
  if (!is_image_base(spec)) { // scratch, or a Debian base made of packages
    return std::optional<Base>();
  }
  std::optional<envspec::LockedBase> locked;
  if (lock) {
    if (!lock->base) {
      return base_error(spec, Error{ExitCode::check_failed,
                                    "the lock does not record this base image; run `lockstep lock`"});
    }
    locked = lock->base;
  }
  LS_TRY_ASSIGN(OpenedBase opened, open_base_image(spec, store, client, locked));
  for (const auto& layer : opened.image.manifest.layers) {
    auto comp = oci::layer_compression(layer.media_type);
    if (!comp) {
      return base_refusal(
          spec, fmt::format("{}: layer {}: {}", opened.what, layer.digest.str(), comp.error().message));
    }
    if (auto r = opened.source->fetch_blob(layer, store); !r) {
      return base_error(spec, r.error());
    }
  }
  Base base{std::move(opened.image), std::move(opened.name)};
  return std::optional<Base>(std::move(base));
}

// OCI media type for a base layer (Docker schema 2 types have OCI twins with the same bytes).
std::string oci_layer_type(const std::string& media_type) {
  if (media_type == oci::k_docker_layer_gzip) {
    return std::string(oci::k_media_layer_gzip);
  }
  if (media_type == oci::k_docker_layer_tar) {
    return std::string(oci::k_media_layer_tar);
  }
  return media_type;
}

// The spec may not set lockstep's own labels: `lockstep run` trusts them to describe the image.
Result<void> check_spec_labels(const envspec::Spec& spec) {
  for (const auto& [key, value] : spec.labels) {
    if (key.starts_with(envspec::k_reserved_label_prefix)) {
      return invalid_input(
          "{}: labels.{}: labels under '{}' are written by lockstep (docs/spec.md, \"What the "
          "image records\"); rename the label",
          spec.file.string(), key, envspec::k_reserved_label_prefix);
    }
  }
  return {};
}

// Pass: the image config, from the base's (carried forward), the spec and the image facts.
json compose_config(const envspec::Spec& spec, const std::optional<Base>& base,
                    const std::vector<Digest>& diff_ids, const std::vector<std::string>& history,
                    std::int64_t epoch, const std::map<std::string, std::string>& fact_labels,
                    const std::vector<std::pair<std::string, std::string>>& stack_env, bool conda,
                    const std::vector<std::pair<std::string, std::string>>& conda_activation) {
  json cfg = base ? base->image.config : json::object();
  cfg["architecture"] = spec.platform.architecture;
  cfg["os"] = spec.platform.os;
  if (spec.platform.variant.empty()) {
    cfg.erase("variant");
  } else {
    cfg["variant"] = spec.platform.variant;
  }
  cfg["created"] = oci::rfc3339(epoch);
  if (!cfg.contains("config") || !cfg["config"].is_object()) {
    cfg["config"] = json::object();
  }
  json& c = cfg["config"];

  std::vector<std::pair<std::string, std::string>> env;
  if (c.contains("Env") && c["Env"].is_array()) {
    for (const auto& e : c["Env"]) {
      std::string s = e.is_string() ? e.get<std::string>() : std::string();
      auto eq = s.find('=');
      env.emplace_back(s.substr(0, eq), eq == std::string::npos ? std::string() : s.substr(eq + 1));
    }
  }
  // The stack's variables over the base's, then a conda environment's and its activation's, then the
  // spec's over all.
  std::vector<std::pair<std::string, std::string>> conda_env;
  if (conda) {
    auto path = std::find_if(env.begin(), env.end(), [](const auto& p) { return p.first == "PATH"; });
    conda_env = conda_env_vars(spec.conda.prefix, path == env.end() ? k_default_path : path->second);
  }
  using Vars = std::vector<std::pair<std::string, std::string>>;
  for (const Vars* vars : {&stack_env, static_cast<const Vars*>(&conda_env), &conda_activation, &spec.env}) {
    for (const auto& var : *vars) {
      auto it = std::find_if(env.begin(), env.end(), [&](const auto& p) { return p.first == var.first; });
      if (it != env.end()) {
        it->second = var.second;
      } else {
        env.push_back(var);
      }
    }
  }
  if (std::none_of(env.begin(), env.end(), [](const auto& p) { return p.first == "PATH"; })) {
    env.insert(env.begin(), {"PATH", k_default_path});
  }
  json env_json = json::array();
  for (const auto& [name, value] : env) {
    std::string entry = name;
    entry += '=';
    entry += value;
    env_json.push_back(std::move(entry));
  }
  c["Env"] = env_json;

  if (spec.entrypoint) {
    c["Entrypoint"] = *spec.entrypoint;
    if (!spec.cmd) {
      c.erase("Cmd"); // as in a Dockerfile: a new ENTRYPOINT resets the inherited CMD
    }
  }
  if (spec.cmd) {
    c["Cmd"] = *spec.cmd;
  }
  if (spec.workdir) {
    c["WorkingDir"] = *spec.workdir;
  }
  if (spec.user) {
    c["User"] = *spec.user;
  }
  if (!spec.labels.empty() || !fact_labels.empty()) {
    if (!c.contains("Labels") || !c["Labels"].is_object()) {
      c["Labels"] = json::object();
    }
    for (const auto& [k, v] : spec.labels) {
      c["Labels"][k] = v;
    }
    for (const auto& [k, v] : fact_labels) { // never clash: check_spec_labels refused dev.lockstep.*
      c["Labels"][k] = v;
    }
  }

  json ids = json::array();
  for (const auto& d : diff_ids) {
    ids.push_back(d.str());
  }
  cfg["rootfs"] = json{{"type", "layers"}, {"diff_ids", ids}};

  json hist = base && cfg.contains("history") && cfg["history"].is_array() ? cfg["history"] : json::array();
  for (const auto& h : history) {
    hist.push_back(json{{"created", oci::rfc3339(epoch)}, {"created_by", "lockstep build: " + h}});
  }
  cfg["history"] = hist;
  return cfg;
}

// Pass: manifest annotations (provenance).
std::map<std::string, std::string> compose_annotations(const envspec::Spec& spec,
                                                       const std::optional<Base>& base,
                                                       const std::optional<GitInfo>& git,
                                                       std::int64_t epoch) {
  std::map<std::string, std::string> a;
  a[std::string(oci::k_annotation_created)] = oci::rfc3339(epoch);
  a[std::string(oci::k_annotation_title)] = spec.name;
  a[k_annotation_spec_digest] = spec.digest.str();
  if (base) {
    a[std::string(oci::k_annotation_base_digest)] = base->image.manifest_digest.str();
    a[std::string(oci::k_annotation_base_name)] = base->name;
  }
  if (git && !git->commit.empty()) {
    a[std::string(oci::k_annotation_revision)] = git->commit;
    a[k_annotation_dirty] = git->dirty ? "true" : "false";
    if (!git->remote.empty()) {
      a[std::string(oci::k_annotation_source)] = git->remote;
    }
  }
  return a;
}

// Splits --tag into (repository name, tag).
Result<std::pair<std::string, std::string>> parse_tag(const std::string& name, const std::string& tag) {
  if (tag.empty()) {
    return std::make_pair(name, std::string("latest"));
  }
  std::string repo = name;
  std::string t = tag;
  auto colon = tag.rfind(':');
  if (colon != std::string::npos && tag.find('/', colon) == std::string::npos) {
    repo = tag.substr(0, colon);
    t = tag.substr(colon + 1);
  } else if (tag.find('/') != std::string::npos || tag.find(':') != std::string::npos) {
    repo = tag;
    t = "latest";
  }
  // A registry host is not part of the repository grammar.
  std::size_t host = oci::registry_host_length(repo);
  std::string repo_path = host > 0 ? repo.substr(host + 1) : repo;
  if (!oci::valid_repository_name(repo_path)) {
    return invalid_input("--tag '{}': '{}' is not a valid repository name (lowercase letters, digits, and "
                         "separators '.', '_', '-', '/')",
                         tag, repo);
  }
  if (!oci::valid_tag(t)) {
    return invalid_input("--tag '{}': '{}' is not a valid tag ([A-Za-z0-9_][A-Za-z0-9._-]{{0,127}})", tag, t);
  }
  return std::make_pair(repo, t);
}

// The SIF output: the spec file as its definition, the squashfs compressed as asked.
Result<void> write_sif_output(const envspec::Spec& spec, const BuildOptions& options, const BlobStore& store,
                              const oci::StoredImage& image, const fs::path& path) {
  SifSettings sif;
  LS_TRY_ASSIGN(sif.deffile, read_file(spec.file));
  sif.spec_digest = spec.digest;
  sif.arch = spec.platform.architecture;
  sif.compression = options.sif_compression.value_or(spec.outputs.sif_compression);
  LS_TRY_ASSIGN(SifResult written, write_sif(store, image, sif, path));
  log::debug("sif {} {} {}{}", path.string(), written.digest.str(), log::human_size(written.size),
             written.cached ? " (cached)" : "");
  return {};
}

// Pass: publish every requested output.
Result<std::vector<WrittenOutput>> write_outputs(const envspec::Spec& spec, const BuildOptions& options,
                                                 const BlobStore& store, const oci::StoredImage& image,
                                                 Codec codec) {
  std::vector<WrittenOutput> wanted;
  const bool cli = cli_outputs(options);
  auto pick = [&](const std::optional<fs::path>& cli_path, const std::optional<fs::path>& spec_path,
                  const char* kind) {
    const auto& p = cli ? cli_path : spec_path;
    if (p) {
      wanted.push_back(WrittenOutput{kind, *p});
    }
  };
  pick(options.oci, spec.outputs.oci, "oci");
  pick(options.oci_archive, spec.outputs.oci_archive, "oci-archive");
  pick(options.docker_archive, spec.outputs.docker_archive, "docker-archive");
  pick(options.sif, spec.outputs.sif, "sif");
  for (const auto& out : wanted) {
    if (out.kind == "oci") {
      LS_TRY(oci::write_oci_layout(store, image, out.path));
    } else if (out.kind == "oci-archive") {
      LS_TRY(oci::write_oci_archive(store, image, out.path));
    } else if (out.kind == "sif") {
      LS_TRY(write_sif_output(spec, options, store, image, out.path));
    } else {
      if (codec == Codec::zstd) {
        log::warn("docker-archive {} has zstd layers: Docker older than 23.0 can't load them; build with "
                  "--compression gzip for older Docker",
                  out.path.string());
      }
      LS_TRY(oci::write_docker_archive(store, image, out.path));
    }
    log::info("wrote {}", out.reference());
  }
  return wanted;
}

// ---- the passes of build_image ---------------------------------------------------------------------

// One build: what each pass of build_image adds, for the passes after it.
struct ImageBuild {
  ImageBuild(const envspec::Spec& spec_, const BuildOptions& options_) : spec(spec_), options(options_) {}

  const envspec::Spec& spec;
  const BuildOptions& options;
  BuildResult result;
  ImageState image;                               ///< the layers so far, which each layer pass appends to
  envspec::ImageFacts facts;                      ///< the image's MPI and CUDA facts
  std::map<std::string, std::string> fact_labels; ///< the facts' and the stack's labels
  std::vector<std::pair<std::string, std::string>> stack_env; ///< NVIDIA_REQUIRE_CUDA
  std::optional<Base> base;

  // The image config for the layers so far.
  [[nodiscard]] json config() const {
    return compose_config(spec, base, image.diff_ids, image.history, image.epoch, fact_labels, stack_env,
                          options.lock && has_conda_packages(*options.lock), image.conda_activation);
  }
};

// Time comes from the lock, else SOURCE_DATE_EPOCH or the default epoch, never the clock; the lock
// must be for this spec's platform.
Result<void> set_epoch_and_check_lock(ImageBuild& b) {
  const envspec::Spec& spec = b.spec;
  const std::optional<envspec::Lock>& lock = b.options.lock;
  LS_TRY_ASSIGN(b.image.epoch, image_epoch());
  if (spec.needs_lock() && !lock) {
    return internal_error("a spec with packages, a Debian base or git sources is built from a lock");
  }
  if (!lock) {
    return {};
  }
  if (std::getenv("SOURCE_DATE_EPOCH") != nullptr && b.image.epoch != lock->epoch) {
    log::warn("SOURCE_DATE_EPOCH={} is ignored: the lock sets the image epoch to {} (re-lock with "
              "SOURCE_DATE_EPOCH set to change it)",
              b.image.epoch, lock->epoch);
  }
  b.image.epoch = lock->epoch;
  if (lock->platform != spec.platform.str()) {
    return Error{ExitCode::check_failed, fmt::format("the lock is for platform {}, the spec builds {}; run "
                                                     "`lockstep lock`",
                                                     lock->platform, spec.platform.str())};
  }
  return {};
}

// What the image records of its MPI and CUDA stack (labels and /.lockstep/facts.json), and the
// stack's choices: labels, and NVIDIA_REQUIRE_CUDA for nvidia-container-cli (a value the spec's
// own `env` sets wins). The image's Env, which its steps run with, is settled then.
Result<void> read_stack_facts(ImageBuild& b) {
  const std::optional<envspec::Lock>& lock = b.options.lock;
  if (lock && b.image.base_metadata) {
    LS_TRY_ASSIGN(const envspec::Lock with_base, lock_with_base_packages(*lock, *b.image.base_metadata));
    LS_TRY_ASSIGN(b.facts, image_facts_for(with_base));
  } else if (lock) {
    LS_TRY_ASSIGN(b.facts, image_facts_for(*lock));
  }
  b.fact_labels = envspec::facts_labels(b.facts);
  if (lock && lock->stack) {
    envspec::StackImageConfig sc = envspec::stack_image_config(*lock->stack);
    b.fact_labels.insert(sc.labels.begin(), sc.labels.end());
    b.stack_env = std::move(sc.env);
  }
  const json config = b.config();
  for (const auto& e : config["config"]["Env"]) {
    b.image.env.push_back(e.get<std::string>());
  }
  return {};
}

// The base image: resolved, verified, its layers imported byte for byte.
Result<void> add_base_layers(ImageBuild& b) {
  const BlobStore& store = *b.image.store;
  {
    log::Timer t("resolve base");
    LS_TRY_ASSIGN(b.base, resolve_base(b.spec, store, b.options.registry, b.options.lock));
  }
  if (!b.base) {
    return {};
  }
  const oci::OpenedImage& image = b.base->image;
  for (std::size_t i = 0; i < image.manifest.layers.size(); ++i) {
    oci::Descriptor d = image.manifest.layers[i];
    d.media_type = oci_layer_type(d.media_type);
    d.annotations.clear();
    b.image.layers.push_back(d);
    b.image.diff_ids.push_back(image.diff_ids[i]);
  }
  b.result.base_layer_count = b.image.layers.size();
  const std::optional<envspec::Lock>& lock = b.options.lock;
  const bool over = lock && std::any_of(lock->artifacts.begin(), lock->artifacts.end(),
                                        [](const envspec::LockedArtifact& a) {
                                          return a.kind == "deb" || a.kind == "wheel";
                                        });
  if (over || (lock && lock->stack)) {
    auto metadata = read_stored_base_metadata(image, store, b.base->name);
    if (!metadata) {
      return base_error(b.spec, metadata.error());
    }
    b.image.base_metadata = std::move(*metadata);
  }
  return {};
}

// Locked packages and git sources, each group in its own layer.
Result<void> add_package_layers(ImageBuild& b) {
  if (!b.options.lock) {
    return {};
  }
  const envspec::Spec& spec = b.spec;
  DebInputs debs;
  debs.native_arch = envspec::debian_arch(spec.platform);
  // Local files the lock names must lie in the project before anything is read (nothing outside
  // is ever opened); then fetch through absolute URLs. The digest recorded in the image is the
  // lock's own.
  LS_TRY(check_lock_local_files(*b.options.lock, spec));
  b.image.local_roots = envspec::local_roots(spec);
  for (const envspec::Repo& r : spec.repos) {
    if (r.kind == envspec::Repo::Kind::apt && !r.snapshot_url.empty()) {
      debs.snapshot_bases[r.url] = r.snapshot_url;
    }
  }
  const envspec::Lock lock = resolve_lock_urls(*b.options.lock, spec.dir);
  {
    log::Timer t("packages");
    LS_TRY(build_deb_layers(lock, debs, b.image));
  }
  // Right after the packages it describes: rebuilt only when the recorded facts change.
  LS_TRY(build_facts_layer(b.facts, b.image));
  {
    log::Timer t("conda environment");
    LS_TRY(build_conda_layer(spec, lock, b.image));
    if (!b.image.conda_activation.empty()) { // steps run with the activated environment
      b.image.env.clear();
      const json config = b.config();
      for (const auto& e : config["config"]["Env"]) {
        b.image.env.push_back(e.get<std::string>());
      }
    }
  }
  {
    log::Timer t("python packages");
    LS_TRY(build_wheel_layer(spec, lock, b.image));
  }
  {
    log::Timer t("git sources");
    LS_TRY(build_git_layers(spec, lock, b.image));
  }
  return {};
}

// The application layer of the host `copy` items (cached by input fingerprint).
Result<void> add_copy_layer(ImageBuild& b) {
  std::vector<envspec::CopyItem> host_copies;
  std::copy_if(b.spec.copy.begin(), b.spec.copy.end(), std::back_inserter(host_copies),
               [](const envspec::CopyItem& c) { return c.git.empty(); });
  if (host_copies.empty()) {
    return {};
  }
  log::Timer plan_timer("plan layer");
  LS_TRY_ASSIGN(LayerPlan plan, plan_copy_layer(host_copies, b.image.epoch, layer_settings(b.image.codec)));
  plan_timer.stop();
  log::Timer layer_timer("build layer");
  LS_TRY_ASSIGN(BuiltLayer layer, build_layer(plan, *b.image.store, b.image.codec, "copy layer"));
  layer_timer.stop();
  append_layer(b.image, layer, plan.created_by);
  return {};
}

// `run:` steps, each in the build sandbox over the image so far, each giving a layer.
Result<void> add_run_layers(ImageBuild& b) {
  const envspec::Spec& spec = b.spec;
  if (spec.run.empty()) {
    return {};
  }
  json partial = b.config();
  StepOptions run;
  if (partial["config"].contains("WorkingDir") && partial["config"]["WorkingDir"].is_string()) {
    run.workdir = partial["config"]["WorkingDir"].get<std::string>();
  }
  for (std::size_t i = 0; i < spec.run.size(); ++i) {
    LS_TRY_ASSIGN(BuiltLayer layer, build_run_step(spec.run[i], i, b.image, run));
    b.image.emulated = b.image.emulated || b.image.emulation.has_value();
    append_layer(b.image, layer, "run: " + spec.run[i].sh, fmt::format("run[{}]", i));
    b.result.impure = b.result.impure || spec.run[i].network;
  }
  return {};
}

// The config and the manifest, with provenance annotations, into the store; the result records the
// image's layers.
Result<void> write_config_and_manifest(ImageBuild& b, const BlobStore& store) {
  BuildResult& result = b.result;
  result.layers = b.image.layers;
  result.diff_ids = b.image.diff_ids;
  result.layer_cached = b.image.cached;
  result.epoch = b.image.epoch;
  if (b.options.vcs_annotations) {
    log::Timer t("git provenance");
    result.git = git_info_for(b.spec.dir);
  }
  LS_TRY_ASSIGN(BlobInfo cfg, store.put(b.config().dump()));
  result.config = oci::Descriptor{std::string(oci::k_media_config), cfg.digest, cfg.size, {}, {}, {}, {}};
  oci::Manifest manifest;
  manifest.media_type = std::string(oci::k_media_manifest);
  manifest.config = result.config;
  manifest.layers = result.layers;
  manifest.annotations = compose_annotations(b.spec, b.base, result.git, result.epoch);
  if (result.impure) {
    manifest.annotations[k_annotation_impure] = "true"; // a run: step had the network
  }
  if (b.options.lock) {
    manifest.annotations[k_annotation_lock_digest] = envspec::lock_digest(*b.options.lock).str();
  }
  if (b.image.base_metadata && result.base_layer_count > 0) {
    manifest.annotations[std::string(oci::k_annotation_base_layers)] =
        std::to_string(result.base_layer_count);
  }
  LS_TRY_ASSIGN(BlobInfo man, store.put(manifest.serialize()));
  result.manifest = oci::Descriptor{std::string(oci::k_media_manifest), man.digest, man.size, {}, {}, {}, {}};
  result.manifest.platform = b.spec.platform;
  return {};
}

} // namespace

constexpr const char* k_provenance_ns = "provenance";

// Pass: the SLSA provenance statement of the image just built, kept in the store by its manifest
// digest (push attaches it) and written to --provenance FILE.
Result<void> write_provenance(ImageBuild& b, const BlobStore& store) {
  envspec::ProvenanceInputs in;
  in.name = b.spec.name;
  in.subject = b.result.manifest.digest;
  in.spec_digest = b.spec.digest;
  if (b.options.lock) {
    in.lock = envspec::lock_digest(*b.options.lock);
  }
  in.platform = b.spec.platform.str();
  in.version = std::string(k_version);
  if (const char* id = std::getenv("LOCKSTEP_BUILDER_ID"); id != nullptr) {
    in.builder_id = id;
  }
  in.compression = b.image.codec == Codec::zstd ? "zstd" : "gzip";
  in.epoch = b.result.epoch;
  if (b.image.emulated && b.image.emulation) {
    // The qemu-user that ran the steps, pinned by its bytes (qemu versions differ in what they get
    // right: multiarch.md, "Known emulation failures").
    std::error_code ec;
    const fs::path interpreter = fs::canonical(b.image.emulation->interpreter, ec);
    LS_TRY_ASSIGN(Digest digest, sha256_of_file(ec ? b.image.emulation->interpreter : interpreter));
    in.builder_dependencies.push_back(envspec::ProvenanceInputs::Dependency{
        b.image.emulation->name, "file://" + (ec ? b.image.emulation->interpreter : interpreter).string(),
        digest});
  }
  const std::string statement = envspec::render_provenance(b.options.lock ? &*b.options.lock : nullptr, in);
  LS_TRY(store.put_record(k_provenance_ns, b.result.manifest.digest.hex(), statement));
  if (b.options.provenance) {
    LS_TRY_ASSIGN(AtomicFile out, AtomicFile::create(fs::absolute(*b.options.provenance), 0644));
    LS_TRY(out.write(statement));
    LS_TRY(out.commit());
    b.result.outputs.push_back(WrittenOutput{"provenance", *b.options.provenance});
    log::info("wrote {}", b.result.outputs.back().reference());
  }
  return {};
}

// Pass: the SBOM files (outputs.sbom or --sbom) of the image just built, named by its manifest digest.
Result<void> write_sboms(ImageBuild& b, const BlobStore& store) {
  const std::vector<fs::path>& paths = cli_outputs(b.options) ? b.options.sbom : b.spec.outputs.sbom;
  if (paths.empty()) {
    return {};
  }
  log::Timer t("sbom");
  envspec::Lock none; // a spec with nothing to lock: an SBOM of the image alone
  none.epoch = b.result.epoch;
  const envspec::Lock& lock = b.options.lock ? *b.options.lock : none;
  for (const fs::path& path : paths) {
    const std::optional<envspec::SbomFormat> format = sbom_format_of_path(path);
    if (!format) {
      return invalid_input("{}: an SBOM's file name says its format: NAME.spdx.json or NAME.cdx.json",
                           path.string());
    }
    LS_TRY_ASSIGN(std::string text, make_sbom(lock, *format, b.spec.name, b.result.manifest.digest, store,
                                              b.spec.dir, envspec::local_roots(b.spec)));
    LS_TRY_ASSIGN(AtomicFile out, AtomicFile::create(fs::absolute(path), 0644));
    LS_TRY(out.write(text));
    LS_TRY(out.commit());
    b.result.outputs.push_back(WrittenOutput{"sbom", path});
    log::info("wrote {}", b.result.outputs.back().reference());
  }
  return {};
}

std::optional<std::string> provenance_record(const BlobStore& store, const Digest& manifest) {
  return store.get_record(k_provenance_ns, manifest.hex());
}

bool cli_outputs(const BuildOptions& options) {
  return options.oci || options.oci_archive || options.docker_archive || options.sif || !options.sbom.empty();
}

oci::StoredImage stored_image(const BuildResult& result) {
  oci::StoredImage image;
  image.manifest = result.manifest;
  image.blobs.push_back(result.config);
  image.blobs.insert(image.blobs.end(), result.layers.begin(), result.layers.end());
  image.ref_name = result.ref_name;
  image.repo_tag = result.repo_tag;
  image.epoch = result.epoch;
  return image;
}

std::string WrittenOutput::reference() const {
  return kind + ":" + path.string();
}

Result<BuildResult> build_image(const envspec::Spec& spec, const BuildOptions& options) {
  if (spec.platforms.size() > 1) {
    return internal_error("a spec of several platforms is built by build_platforms (platforms_build.hpp)");
  }
  ImageBuild b(spec, options);
  LS_TRY_ASSIGN(auto names, parse_tag(spec.name, options.tag));
  b.result.repo_tag = names.first + ":" + names.second;
  b.result.ref_name = names.second;
  b.image.codec = options.compression.value_or(spec.outputs.compression);
  b.image.subids = options.subids;
  if (auto emulation = runner::plan_emulation(spec.platform.architecture); !emulation) {
    b.image.emulation_error = emulation.error();
  } else if (*emulation) {
    log::info("{}: maintainer scripts and run: steps run under it (about 3x slower for a package set)",
              runner::emulation_note(**emulation));
    b.image.emulation = std::move(*emulation);
  }

  log::Timer timer("build");
  LS_TRY(check_spec_labels(spec));
  // 1. The epoch (from the lock when there is one).
  LS_TRY(set_epoch_and_check_lock(b));
  // 2. The content-addressed store shared by all builds.
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(options.store_root.value_or(settings::store_root())));
  b.image.store = &store;
  // 3. The layers: the base image's, the locked packages' and git sources', the copied files', and
  //    one per `run:` step; the image's stack facts and labels once the base's packages are known.
  LS_TRY(add_base_layers(b));
  LS_TRY(read_stack_facts(b));
  LS_TRY(add_package_layers(b));
  LS_TRY(add_copy_layer(b));
  LS_TRY(add_run_layers(b));
  // 4. Config and manifest, with provenance annotations.
  LS_TRY(write_config_and_manifest(b, store));
  // 5. Outputs, each published atomically.
  log::Timer outputs_timer("write outputs");
  LS_TRY_ASSIGN(b.result.outputs, write_outputs(spec, options, store, stored_image(b.result), b.image.codec));
  outputs_timer.stop();
  // 6. SBOMs of the image, when asked for; its provenance.
  LS_TRY(write_sboms(b, store));
  LS_TRY(write_provenance(b, store));
  return std::move(b.result);
}

} // namespace lockstep::builder
