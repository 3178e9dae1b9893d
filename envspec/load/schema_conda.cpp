// `conda:` (docs/spec.md, docs/conda.md): the environment's prefix in the image, the channel
// priority of its solve, and what the image offers the solve in place of virtual packages read
// from the image.
#include "envspec/load/schema_walker.hpp"
#include "support/conda/version.hpp"

#include <fmt/format.h>

#include <regex>

namespace lockstep::envspec::detail {

// `conda: {prefix: /opt/env, channel_priority: strict|flexible, virtual_packages: {cuda: "12.4"}}`.
void SchemaWalker::conda(const Node& v, CondaSettings& out) {
  if (!expect_map(v, "conda",
                  "a map {prefix: PATH, channel_priority: strict|flexible, virtual_packages: {...}}")) {
    return;
  }
  for (const MapEntry& e : v.entries) {
    const std::string path = child_path("conda", e.key);
    if (e.key == "prefix") {
      if (std::optional<std::string> prefix = image_path(e.value, path)) {
        if (*prefix == "/") {
          error(e.value.location, path,
                "the prefix can't be the image's root: give a directory, e.g. /opt/conda");
        } else {
          out.prefix = *prefix;
        }
      }
    } else if (e.key == "channel_priority") {
      const std::string* s = nonempty_string(e.value, path, "strict or flexible");
      if (s != nullptr && *s != "strict" && *s != "flexible") {
        error(e.value.location, path, fmt::format("'{}': expected strict or flexible", *s));
      } else if (s != nullptr) {
        out.channel_priority = *s;
      }
    } else if (e.key == "virtual_packages") {
      if (!expect_map(e.value, path, "a map, e.g. {cuda: \"12.4\", glibc: \"2.28\"}")) {
        continue;
      }
      for (const MapEntry& vp : e.value.entries) {
        const std::string vpath = child_path(path, vp.key);
        if (vp.key != "glibc" && vp.key != "linux" && vp.key != "archspec" && vp.key != "cuda") {
          unknown_key(vp, path, {"glibc", "linux", "archspec", "cuda"}, {});
          continue;
        }
        if (!vp.value.is_scalar()) {
          error(vp.value.location, vpath, "expected a version, or \"\" to leave it out");
          continue;
        }
        const std::string& text = vp.value.scalar;
        static const std::regex archspec_re("[a-z0-9_]+");
        const bool valid = text.empty() || (vp.key == "archspec" ? std::regex_match(text, archspec_re)
                                                                 : conda::Version::parse(text).ok());
        if (!valid) {
          error(vp.value.location, vpath,
                fmt::format("'{}': expected {}", text,
                            vp.key == "archspec" ? "a microarchitecture name such as x86_64_v3 or neoverse_v2"
                                                 : "a version such as 12.4"));
          continue;
        }
        out.virtual_packages[vp.key] = text;
      }
    } else {
      unknown_key(e, "conda", m_shapes.conda);
    }
  }
}

} // namespace lockstep::envspec::detail
