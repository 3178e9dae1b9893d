#include "builder/image/platforms_build.hpp"

#include "builder/lock/platforms_lock.hpp"
#include "envspec/settings/settings.hpp"
#include "support/base/log.hpp"
#include "support/oci/image_writer.hpp"
#include "support/store/blob_store.hpp"

#include <fmt/format.h>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view k_arch = "{arch}";

// Every path of one platform's outputs, `{arch}` replaced; the index outputs (OCI layout and
// archives) are written once, by build_platforms, so they are left out here.
Result<void> platform_outputs(const envspec::Spec& spec, const BuildOptions& options,
                              const oci::Platform& platform, envspec::Spec& spec_out,
                              BuildOptions& options_out) {
  const auto each = [&](const std::optional<fs::path>& in, std::optional<fs::path>& out,
                        std::string_view what) -> Result<void> {
    out.reset();
    if (in) {
      LS_TRY_ASSIGN(out, platform_path(*in, platform, what));
    }
    return {};
  };
  spec_out.outputs.oci.reset();
  spec_out.outputs.oci_archive.reset();
  spec_out.outputs.docker_archive.reset();
  options_out.oci.reset();
  options_out.oci_archive.reset();
  options_out.docker_archive.reset();
  const bool cli = cli_outputs(options);
  LS_TRY(each(cli ? std::nullopt : spec.outputs.sif, spec_out.outputs.sif, "outputs.sif"));
  LS_TRY(each(options.sif, options_out.sif, "--sif"));
  LS_TRY(each(options.provenance, options_out.provenance, "--provenance"));
  spec_out.outputs.sbom.clear();
  options_out.sbom.clear();
  for (const fs::path& p : cli ? std::vector<fs::path>{} : spec.outputs.sbom) {
    LS_TRY_ASSIGN(fs::path one, platform_path(p, platform, "outputs.sbom"));
    spec_out.outputs.sbom.push_back(std::move(one));
  }
  for (const fs::path& p : options.sbom) {
    LS_TRY_ASSIGN(fs::path one, platform_path(p, platform, "--sbom"));
    options_out.sbom.push_back(std::move(one));
  }
  return {};
}

// The image index over every platform's manifest, in the spec's order, stored.
Result<oci::Descriptor> store_index(const BlobStore& store, const std::vector<BuildResult>& results) {
  oci::Index index;
  index.media_type = std::string(oci::k_media_index);
  for (const BuildResult& r : results) {
    index.manifests.push_back(r.manifest); // its platform set by the build
  }
  LS_TRY_ASSIGN(BlobInfo info, store.put(index.serialize()));
  return oci::Descriptor{std::string(oci::k_media_index), info.digest, info.size, {}, {}, {}, {}};
}

} // namespace

Result<fs::path> platform_path(const fs::path& path, const oci::Platform& platform, std::string_view what) {
  std::string text = path.string();
  if (text.find(k_arch) == std::string::npos) {
    return invalid_input("{} {}: several platforms are built, one file each: name the architecture with "
                         "{{arch}} in the path (e.g. build/image-{{arch}}.sif)",
                         what, text);
  }
  for (std::size_t at = text.find(k_arch); at != std::string::npos; at = text.find(k_arch, at)) {
    text.replace(at, k_arch.size(), platform.architecture);
    at += platform.architecture.size();
  }
  return fs::path(text);
}

Result<BuildResult> build_platforms(const envspec::Spec& spec, const BuildOptions& options) {
  std::vector<BuildResult> results;
  for (const oci::Platform& platform : spec.platforms) {
    envspec::Spec one = envspec::spec_for_platform(spec, platform);
    BuildOptions one_options = options;
    LS_TRY(platform_outputs(spec, options, platform, one, one_options));
    if (options.lock) {
      one_options.lock = envspec::lock_for_platform(*options.lock, one.platform.str());
    }
    log::info("building {}", platform.str());
    Result<BuildResult> built = build_image(one, one_options);
    if (!built) {
      return built.error().with_context(platform.str());
    }
    results.push_back(std::move(*built));
  }
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(options.store_root.value_or(settings::store_root())));
  BuildResult index;
  LS_TRY_ASSIGN(index.manifest, store_index(store, results));
  index.epoch = results.front().epoch;
  index.ref_name = results.front().ref_name;
  index.repo_tag = results.front().repo_tag;
  index.git = results.front().git;
  oci::StoredImage stored;
  stored.manifest = index.manifest;
  stored.ref_name = index.ref_name;
  stored.repo_tag = index.repo_tag;
  stored.epoch = index.epoch;
  for (const BuildResult& r : results) {
    oci::StoredImage one = stored_image(r);
    stored.blobs.push_back(one.manifest);
    stored.blobs.insert(stored.blobs.end(), one.blobs.begin(), one.blobs.end());
    stored.platform_images.push_back(std::move(one));
    index.impure = index.impure || r.impure;
    index.outputs.insert(index.outputs.end(), r.outputs.begin(), r.outputs.end());
  }
  // The index outputs: the command line's, else the spec's.
  const bool cli = cli_outputs(options);
  const auto pick = [&](const std::optional<fs::path>& flag, const std::optional<fs::path>& key) {
    return cli ? flag : key;
  };
  if (auto dir = pick(options.oci, spec.outputs.oci)) {
    LS_TRY(oci::write_oci_layout(store, stored, *dir));
    index.outputs.push_back(WrittenOutput{"oci", *dir});
  }
  if (auto file = pick(options.oci_archive, spec.outputs.oci_archive)) {
    LS_TRY(oci::write_oci_archive(store, stored, *file));
    index.outputs.push_back(WrittenOutput{"oci-archive", *file});
  }
  if (auto file = pick(options.docker_archive, spec.outputs.docker_archive)) {
    LS_TRY(oci::write_docker_archive(store, stored, *file));
    index.outputs.push_back(WrittenOutput{"docker-archive", *file});
  }
  for (const WrittenOutput& o : index.outputs) {
    if (o.kind == "oci" || o.kind == "oci-archive" || o.kind == "docker-archive") {
      log::info("wrote {} (an index of {} platforms)", o.reference(), results.size());
    }
  }
  index.platforms = std::move(results);
  return index;
}

} // namespace lockstep::builder
