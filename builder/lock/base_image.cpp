#include "builder/lock/base_image.hpp"

#include "envspec/yaml/diagnostics.hpp"
#include "support/registry/pull.hpp"

#include <fmt/format.h>

#include <system_error>

namespace lockstep::builder {

namespace fs = std::filesystem;

bool is_image_base(const envspec::Spec& spec) {
  return spec.base.kind == envspec::BaseImage::Kind::oci ||
         spec.base.kind == envspec::BaseImage::Kind::registry;
}

std::string locked_base_name(const envspec::Spec& spec) {
  if (spec.base.kind == envspec::BaseImage::Kind::registry) {
    return "docker://" + spec.base.remote.str();
  }
  return "oci:" + spec.base.path_text + (spec.base.tag.empty() ? "" : ":" + spec.base.tag);
}

Error base_error(const envspec::Spec& spec, const Error& cause) {
  envspec::Diagnostics diags;
  diags.error(spec.base.location, spec.base.key, cause.message);
  Error e = diags.to_error();
  if (spec.base.kind == envspec::BaseImage::Kind::registry || cause.code == ExitCode::check_failed) {
    e.code = cause.code;
  }
  return e;
}

Result<OpenedBase> open_base_image(const envspec::Spec& spec, const BlobStore& store,
                                   const registry::ClientOptions& client,
                                   const std::optional<envspec::LockedBase>& locked) {
  if (!is_image_base(spec)) {
    return internal_error("open_base_image: the spec's base is not an image");
  }
  const std::string name = locked_base_name(spec);
  if (locked && locked->image != name) {
    return base_error(spec, Error{ExitCode::check_failed,
                                  fmt::format("the lock's base is {}, the spec's is {}; run `lockstep lock`",
                                              locked->image, name)});
  }
  OpenedBase out;
  oci::ImageRef ref;
  oci::SelectOptions select;
  select.platform = spec.platform;
  if (spec.base.kind == envspec::BaseImage::Kind::registry) {
    // Its manifest, config and layers land in the store: a blob already there is not fetched again,
    // and a locked manifest already there needs no registry at all.
    ref.transport = oci::ImageRef::Transport::docker;
    ref.remote = spec.base.remote;
    if (locked) {
      ref.remote.digest = locked->manifest;
    }
    out.what = "docker://" + ref.remote.str();
    out.name = spec.base.remote.str();
    auto source = registry::open_image(ref, store, client);
    if (!source) {
      return base_error(spec, source.error());
    }
    out.source = std::move(*source);
  } else {
    std::error_code ec;
    ref.transport = fs::is_directory(spec.base.path, ec) ? oci::ImageRef::Transport::oci_dir
                                                         : oci::ImageRef::Transport::oci_archive;
    ref.path = spec.base.path;
    ref.tag = locked ? "" : spec.base.tag; // a locked manifest is found by digest, wherever the tag went
    select.tag = ref.tag;
    out.what = spec.base.path_text;
    out.name = "oci:" + spec.base.path_text + (spec.base.tag.empty() ? "" : ":" + spec.base.tag);
    auto source = oci::ImageSource::open(ref);
    if (!source) {
      return base_error(spec, source.error());
    }
    out.source = std::move(*source);
  }
  // The manifest, or (the spec's pin, in a registry) the index it is reached through.
  select.digest = locked ? std::optional<Digest>(locked->manifest) : spec.base.pin;
  auto image = out.source->resolve(select);
  if (!image) {
    if (locked) {
      return base_error(spec, image.error().with_context(fmt::format(
                                  "the lock's base manifest {} (run `lockstep lock --update base` to lock "
                                  "what {} names now)",
                                  locked->manifest.str(), name)));
    }
    return base_error(spec, image.error());
  }
  if (spec.base.kind == envspec::BaseImage::Kind::oci && !locked && spec.base.pin &&
      image->manifest_digest != *spec.base.pin) {
    return base_error(spec, invalid_input("{} has manifest digest {}, but the spec pins {}", out.what,
                                          image->manifest_digest.str(), spec.base.pin->str()));
  }
  if (locked && image->manifest.config.digest != locked->config) {
    return base_error(spec, invalid_input("{}: manifest {} names config {}, but the lock records {}",
                                          out.what, locked->manifest.str(),
                                          image->manifest.config.digest.str(), locked->config.str()));
  }
  if (!(image->platform == spec.platform)) {
    return base_error(spec, invalid_input("{} is for platform {}, but the spec builds {}", out.what,
                                          image->platform.str(), spec.platform.str()));
  }
  out.image = std::move(*image);
  return out;
}

envspec::LockedBase locked_base_of(const envspec::Spec& spec, const OpenedBase& base) {
  envspec::LockedBase b;
  b.image = locked_base_name(spec);
  b.manifest = base.image.manifest_digest;
  b.config = base.image.manifest.config.digest;
  b.platform = base.image.platform.str();
  return b;
}

} // namespace lockstep::builder
