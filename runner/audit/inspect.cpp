#include "runner/audit/inspect.hpp"

#include "envspec/settings/settings.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/oci/image_arg.hpp"
#include "support/registry/pull.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <utility>

namespace lockstep::runner {

namespace {

using json = nlohmann::json;

constexpr int k_label_width = 17;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// One "Label:  value" line; further values go on continuation lines under the first.
void add_field(std::string& out, std::string_view label, const std::vector<std::string>& values) {
  std::string head = fmt::format("{}:", label);
  if (values.empty()) {
    out += fmt::format("{:<{}} -\n", head, k_label_width);
    return;
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    out +=
        fmt::format("{:<{}} {}\n", i == 0 ? head : std::string(), k_label_width, escape_controls(values[i]));
  }
}

void add_field(std::string& out, std::string_view label, const std::string& value) {
  add_field(out, label, value.empty() ? std::vector<std::string>{} : std::vector<std::string>{value});
}

// The image config's `config` object (Entrypoint, Env, ...), or null.
const json& runtime_config(const json& config) {
  static const json k_null;
  if (!config.is_object()) {
    return k_null;
  }
  auto it = config.find("config");
  return it != config.end() && it->is_object() ? *it : k_null;
}

// A config value as text: strings as they are, arrays as JSON, absent/null as empty.
std::string config_text(const json& rc, const char* key) {
  if (!rc.is_object()) {
    return {};
  }
  auto it = rc.find(key);
  if (it == rc.end() || it->is_null()) {
    return {};
  }
  return it->is_string() ? it->get<std::string>() : dump(*it);
}

// Env as one line per variable; anything but an array of strings as JSON.
std::vector<std::string> config_lines(const json& rc, const char* key) {
  std::vector<std::string> out;
  if (!rc.is_object()) {
    return out;
  }
  auto it = rc.find(key);
  if (it == rc.end() || it->is_null()) {
    return out;
  }
  if (it->is_array()) {
    for (const auto& v : *it) {
      out.push_back(v.is_string() ? v.get<std::string>() : dump(v));
    }
  } else if (it->is_object()) {
    for (const auto& [k, v] : it->items()) {
      out.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : dump(v)));
    }
  } else {
    out.push_back(dump(*it));
  }
  return out;
}

std::uint64_t total_layer_size(const oci::Manifest& m) {
  std::uint64_t total = 0;
  for (const auto& l : m.layers) {
    total += static_cast<std::uint64_t>(l.size);
  }
  return total;
}

json created_of(const json& config) {
  if (config.is_object()) {
    if (auto it = config.find("created"); it != config.end() && it->is_string()) {
      return *it;
    }
  }
  return nullptr;
}

} // namespace

Result<ImageSummary> inspect_image(const std::string& ref) {
  return inspect_image(ref, oci::SelectOptions{});
}

Result<ImageSummary> inspect_image(const std::string& ref, const oci::SelectOptions& options) {
  LS_TRY_ASSIGN(ImageArg arg, parse_image_arg(ref));
  if (arg.kind != ImageArg::Kind::oci) {
    return invalid_input(
        "'{}' is a {}: inspect shows an OCI image's manifest, config and layers (for what any "
        "image holds, use 'lockstep verify' or 'lockstep diff')",
        ref, arg.kind == ImageArg::Kind::sif ? "SIF file" : "root directory");
  }
  const oci::ImageRef& parsed = arg.ref;
  LS_TRY_ASSIGN(auto source, registry::open_image(parsed, settings::store_root()));
  LS_TRY_ASSIGN(oci::OpenedImage image, source->resolve(options));
  return ImageSummary{parsed, std::move(image)};
}

std::string short_media_type(const std::string& media_type) {
  static const std::array<std::pair<std::string_view, std::string_view>, 9> k_short = {{
      {"application/vnd.oci.image.layer.v1.tar", "tar"},
      {"application/vnd.oci.image.layer.v1.tar+gzip", "tar+gzip"},
      {"application/vnd.oci.image.layer.v1.tar+zstd", "tar+zstd"},
      {"application/vnd.oci.image.layer.nondistributable.v1.tar", "tar (nondistributable)"},
      {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", "tar+gzip (nondistributable)"},
      {"application/vnd.docker.image.rootfs.diff.tar", "tar (docker)"},
      {"application/vnd.docker.image.rootfs.diff.tar.gzip", "tar+gzip (docker)"},
      {"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", "tar+gzip (docker, foreign)"},
      {"application/vnd.oci.image.layer.v1.tar+zstd+encrypted", "tar+zstd (encrypted)"},
  }};
  for (const auto& [full, brief] : k_short) {
    if (media_type == full) {
      return std::string(brief);
    }
  }
  return media_type;
}

json summary_to_json(const ImageSummary& s) {
  const oci::OpenedImage& img = s.image;
  json j = json::object();
  j["reference"] = s.ref.str();
  j["manifest_digest"] = img.manifest_digest.str();
  j["manifest_media_type"] = img.manifest_media_type;
  j["synthesized_manifest"] = img.synthesized_manifest;
  j["platform"] = img.platform.str();
  j["config_digest"] = img.manifest.config.digest.str();
  j["created"] = created_of(img.config);
  json rc = runtime_config(img.config);
  j["config"] = rc;
  j["annotations"] = img.manifest.annotations;
  j["layers"] = json::array();
  for (std::size_t i = 0; i < img.manifest.layers.size(); ++i) {
    const auto& l = img.manifest.layers[i];
    json e = json::object();
    e["media_type"] = l.media_type;
    e["digest"] = l.digest.str();
    e["size"] = l.size;
    e["diff_id"] = i < img.diff_ids.size() ? json(img.diff_ids[i].str()) : json(nullptr);
    j["layers"].push_back(std::move(e));
  }
  j["total_size"] = total_layer_size(img.manifest);
  return j;
}

std::string summary_to_text(const ImageSummary& s) {
  const oci::OpenedImage& img = s.image;
  const json& rc = runtime_config(img.config);
  std::string out;
  add_field(out, "Reference", s.ref.str());
  if (!img.ref_name.empty()) {
    add_field(out, "Name", img.ref_name);
  }
  add_field(out, "Manifest digest",
            img.manifest_digest.str() + (img.synthesized_manifest ? " (synthesised)" : std::string()));
  add_field(out, "Media type", img.manifest_media_type);
  add_field(out, "Platform", img.platform.str());
  json created = created_of(img.config);
  add_field(out, "Created", created.is_string() ? created.get<std::string>() : std::string());
  add_field(out, "Config digest", img.manifest.config.digest.str());
  add_field(out, "Entrypoint", config_text(rc, "Entrypoint"));
  add_field(out, "Cmd", config_text(rc, "Cmd"));
  add_field(out, "Env", config_lines(rc, "Env"));
  add_field(out, "Workdir", config_text(rc, "WorkingDir"));
  add_field(out, "User", config_text(rc, "User"));
  add_field(out, "Labels", config_lines(rc, "Labels"));
  std::vector<std::string> annotations;
  for (const auto& [k, v] : img.manifest.annotations) {
    annotations.push_back(k + "=" + v);
  }
  add_field(out, "Annotations", annotations);

  const auto& layers = img.manifest.layers;
  out += fmt::format("Layers:{}\n", layers.empty() ? " none" : "");
  if (!layers.empty()) {
    std::size_t type_width = 4;
    for (const auto& l : layers) {
      type_width = std::max(type_width, escape_controls(short_media_type(l.media_type)).size());
    }
    out += fmt::format("  {:>3}  {:<{}}  {:>10}  {:<71}  {}\n", "#", "TYPE", type_width, "SIZE", "DIGEST",
                       "DIFF ID");
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const auto& l = layers[i];
      out += fmt::format("  {:>3}  {:<{}}  {:>10}  {:<71}  {}\n", i + 1,
                         escape_controls(short_media_type(l.media_type)), type_width,
                         log::human_size(static_cast<std::uint64_t>(l.size)), l.digest.str(),
                         i < img.diff_ids.size() ? img.diff_ids[i].str() : std::string("-"));
    }
  }
  std::uint64_t total = total_layer_size(img.manifest);
  add_field(
      out, "Total size",
      fmt::format("{} in {} layer{}", log::human_size(total), layers.size(), layers.size() == 1 ? "" : "s"));
  return out;
}

} // namespace lockstep::runner
