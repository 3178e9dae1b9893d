#include "builder/image/image_state.hpp"

#include "support/base/log.hpp"

namespace lockstep::builder {

void append_layer(ImageState& image, const BuiltLayer& layer, const std::string& created_by,
                  const std::string& shown_as) {
  log::info("layer {} {} {}{}", layer.descriptor.digest.str().substr(0, 19),
            log::human_size(layer.descriptor.size), shown_as.empty() ? created_by : shown_as,
            layer.cached ? " (cached)" : "");
  image.layers.push_back(layer.descriptor);
  image.diff_ids.push_back(layer.diff_id);
  image.cached.push_back(layer.cached);
  image.history.push_back(created_by);
}

} // namespace lockstep::builder
