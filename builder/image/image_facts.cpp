#include "builder/image/image_facts.hpp"

#include "builder/image/layer_builder.hpp"
#include "builder/image/layer_plan.hpp"
#include "envspec/stack/recipes.hpp"
#include "support/base/log.hpp"
#include "support/system/fs.hpp"

#include <string_view>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view k_drivers_recipe = "cuda/drivers.yaml";
constexpr const char* k_facts_layer_version = "lockstep-facts-layer-1";

} // namespace

Result<envspec::CudaDriverTable> load_cuda_driver_table() {
  fs::path origin;
  auto text = envspec::read_builtin_recipe(k_drivers_recipe, origin);
  if (!text) {
    // Only an unreadable LOCKSTEP_RECIPES_DIR/cuda/drivers.yaml fails as io; a recipe missing from
    // the binary is a build bug (internal) that says so itself.
    const Error& e = text.error();
    return e.code == ExitCode::io ? e.with_context("reading the CUDA driver recipe (LOCKSTEP_RECIPES_DIR)")
                                  : e;
  }
  return envspec::parse_cuda_driver_table(*text, origin);
}

Result<envspec::ImageFacts> image_facts_for(const envspec::Lock& lock) {
  envspec::ImageFacts facts = envspec::facts_from_lock(lock);
  if (facts.cuda.version.empty() && lock.stack && !lock.stack->cuda.empty()) {
    // CUDA from the framework's wheels (no cuda-cudart deb): the stack solver's choice.
    facts.cuda = {lock.stack->cuda, "stack: the framework's wheels"};
    facts.cuda_driver_floor = lock.stack->driver_floor;
    return facts;
  }
  if (facts.cuda.version.empty()) {
    return facts;
  }
  LS_TRY_ASSIGN(const envspec::CudaDriverTable table, load_cuda_driver_table());
  facts.cuda_driver_floor = table.floor_for(facts.cuda.version);
  if (facts.cuda_driver_floor.empty()) {
    log::warn("CUDA {} ({}) is not in lockstep's CUDA driver table (recipes/cuda/drivers.yaml): the image "
              "records no driver floor, so `lockstep run` can't check the nodes' driver for it",
              facts.cuda.version, facts.cuda.from);
  }
  return facts;
}

Result<void> build_facts_layer(const envspec::ImageFacts& facts, ImageState& image) {
  if (facts.empty()) {
    return {};
  }
  const std::string text = envspec::render_facts_file(facts);
  const std::string path(envspec::k_facts_path.substr(1)); // ".lockstep/facts.json"
  FingerprintHasher fp;
  fp.add(k_layer_format_version, k_facts_layer_version, layer_settings(image.codec), image.epoch, text);
  auto layer = build_generated_layer(fp.finish(), true, *image.store, image.codec, "image facts", text.size(),
                                     [&](TarWriter& tar, log::Progress& progress) -> Result<void> {
                                       TarEntry dir;
                                       dir.path = path.substr(0, path.find('/'));
                                       dir.type = TarEntry::Type::dir;
                                       dir.mode = 0755;
                                       dir.mtime = image.epoch;
                                       tar.add(dir);
                                       TarEntry file;
                                       file.path = path;
                                       file.type = TarEntry::Type::file;
                                       file.mode = 0644;
                                       file.mtime = image.epoch;
                                       file.size = static_cast<std::int64_t>(text.size());
                                       tar.add(file);
                                       tar.write_data(text.data(), text.size());
                                       progress.advance(text.size());
                                       return {};
                                     });
  if (!layer) {
    return layer.error();
  }
  append_layer(image, *layer, fmt::format("image facts: {}", envspec::k_facts_path));
  return {};
}

} // namespace lockstep::builder
