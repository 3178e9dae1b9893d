#include "envspec/canonical.hpp"

#include <fmt/format.h>

namespace lockstep::envspec {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string canonical_path(const fs::path& resolved, const std::string& written, const fs::path& spec_dir) {
  if (fs::path(written).is_absolute()) {
    return resolved.generic_string();
  }
  fs::path rel = resolved.lexically_relative(spec_dir);
  return rel.empty() ? resolved.generic_string() : rel.generic_string();
}

json canonical_form(const Spec& spec) {
  json j = json::object();
  j["lockstep"] = spec.schema;
  j["name"] = spec.name;
  j["platform"] = spec.platform.str();

  if (spec.base.kind == BaseImage::Kind::scratch) {
    j["base"] = "scratch";
  } else {
    json base = json::object();
    base["oci"] = canonical_path(spec.base.path, spec.base.path_text, spec.dir);
    if (spec.base.pin) {
      base["pin"] = spec.base.pin->str();
    }
    if (!spec.base.tag.empty()) {
      base["tag"] = spec.base.tag;
    }
    j["base"] = std::move(base);
  }

  json copy = json::array();
  for (const CopyItem& item : spec.copy) {
    json c = json::object();
    c["from"] = canonical_path(item.from, item.from_text, spec.dir);
    c["to"] = item.to_is_dir && item.to != "/" ? item.to + "/" : item.to;
    switch (item.mode_policy) {
    case ModePolicy::normalize:
      c["mode"] = "normalize";
      break;
    case ModePolicy::preserve:
      c["mode"] = "preserve";
      break;
    case ModePolicy::fixed:
      c["mode"] = fmt::format("{:04o}", item.mode);
      break;
    }
    c["owner"] = item.owner_policy == OwnerPolicy::preserve ? std::string("preserve")
                                                            : fmt::format("{}:{}", item.uid, item.gid);
    copy.push_back(std::move(c));
  }
  j["copy"] = std::move(copy);
  if (!spec.run.empty()) { // absent when empty, so specs without steps keep their digests
    json run = json::array();
    for (const RunStep& step : spec.run) {
      run.push_back(json{{"sh", step.sh}, {"network", step.network}});
    }
    j["run"] = std::move(run);
  }

  json env = json::object();
  for (const auto& [name, value] : spec.env) {
    env[name] = value;
  }
  j["env"] = std::move(env);
  json labels = json::object();
  for (const auto& [key, value] : spec.labels) {
    labels[key] = value;
  }
  j["labels"] = std::move(labels);

  if (spec.entrypoint) {
    j["entrypoint"] = *spec.entrypoint;
  }
  if (spec.cmd) {
    j["cmd"] = *spec.cmd;
  }
  if (spec.workdir) {
    j["workdir"] = *spec.workdir;
  }
  if (spec.user) {
    j["user"] = *spec.user;
  }

  // Output paths say where to write the image, not what it is: they stay out of the digest, so
  // moving an output never makes the image (or a lock) differ. Compression changes the bytes.
  json out = json::object();
  out["compression"] = spec.outputs.compression == Codec::zstd ? "zstd" : "gzip";
  if (spec.outputs.sif_compression != SquashfsCompressor::gzip) { // the default is left out
    out["sif_compression"] = std::string(squashfs_compressor_name(spec.outputs.sif_compression));
  }
  j["outputs"] = std::move(out);
  return j;
}

} // namespace lockstep::envspec
