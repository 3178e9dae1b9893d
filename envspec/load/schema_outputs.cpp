// `outputs:` (docs/spec.md): where the image is written, in which formats, and its SBOMs.
#include "envspec/load/schema_walker.hpp"
#include "support/codec/compress.hpp"
#include "support/oci/squashfs.hpp"

#include <fmt/format.h>

namespace lockstep::envspec::detail {

void SchemaWalker::outputs(const Node& v, Outputs& out) {
  if (!expect_map(v, "outputs")) {
    return;
  }
  for (const MapEntry& e : v.entries) {
    const std::string path = child_path("outputs", e.key);
    if (e.key == "oci") {
      output_path(e.value, path, out.oci);
    } else if (e.key == "oci_archive") {
      output_path(e.value, path, out.oci_archive);
    } else if (e.key == "docker_archive") {
      output_path(e.value, path, out.docker_archive);
    } else if (e.key == "sif") {
      output_path(e.value, path, out.sif);
    } else if (e.key == "sbom") {
      sbom_paths(e.value, path, out.sbom);
    } else if (e.key == "sif_compression") {
      const std::string* s = string(e.value, path);
      if (s == nullptr) {
        continue;
      }
      if (auto c = parse_squashfs_compressor(*s)) {
        out.sif_compression = *c;
      } else {
        error(e.value.location, path, fmt::format("expected 'gzip', 'zstd', 'xz' or 'lz4', found '{}'", *s));
      }
    } else if (e.key == "compression") {
      const std::string* s = string(e.value, path);
      if (s != nullptr && *s == "gzip") {
        out.compression = Codec::gzip;
      } else if (s != nullptr && *s == "zstd") {
        out.compression = Codec::zstd;
      } else if (s != nullptr) {
        error(e.value.location, path, fmt::format("expected 'gzip' or 'zstd', found '{}'", *s));
      }
    } else {
      unknown_key(e, "outputs", m_shapes.outputs);
    }
  }
}

// outputs.sbom: one path or a list; the name says the format (.spdx.json or .cdx.json).
void SchemaWalker::sbom_paths(const Node& v, const std::string& path, std::vector<fs::path>& out) {
  auto one = [&](const Node& item, const std::string& item_key) {
    const std::string* s = nonempty_string(item, item_key, "a path");
    if (s == nullptr) {
      return;
    }
    if (!s->ends_with(".spdx.json") && !s->ends_with(".cdx.json")) {
      error(
          item.location, item_key,
          fmt::format("'{}': an SBOM's file name says its format: NAME.spdx.json (SPDX 2.3) or NAME.cdx.json "
                      "(CycloneDX 1.6)",
                      *s));
      return;
    }
    out.push_back(resolve_host_path(item));
  };
  if (v.is_sequence()) {
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      one(v.items[i], item_path(path, i));
    }
  } else {
    one(v, path);
  }
}

void SchemaWalker::output_path(const Node& v, const std::string& path, std::optional<fs::path>& out) {
  if (nonempty_string(v, path, "a path") != nullptr) {
    out = resolve_host_path(v);
  }
}

} // namespace lockstep::envspec::detail
