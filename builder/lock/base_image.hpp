#pragma once
// The base image a spec builds on (`base: {image: docker://...|oci:...|oci-archive:...}` or
// `{oci: PATH}`): opened, resolved to one platform's manifest and config, and recorded in the lock
// by digest, so that a build uses the locked manifest whatever the tag points at later.
// docs/lockfile.md, "The base image".
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/oci/image_source.hpp"
#include "support/registry/client.hpp"
#include "support/store/blob_store.hpp"

#include <memory>
#include <optional>
#include <string>

namespace lockstep::builder {

/// True for the bases that are images (registry or local), which the lock pins by digest.
bool is_image_base(const envspec::Spec& spec);

/// An opened base image.
struct OpenedBase {
  std::unique_ptr<oci::ImageSource> source;
  oci::OpenedImage image;
  /// "oci:PATH[:TAG]" as written in the spec, or the registry reference "HOST/REPO[:TAG][@DIGEST]"
  /// normalised (the org.opencontainers.image.base.name annotation)
  std::string name;
  std::string what; ///< in messages: "../base" or "docker://HOST/REPO:TAG"
};

/// The lock's name for the spec's base: "docker://HOST/REPO[:TAG][@DIGEST]" or "oci:PATH[:TAG]".
std::string locked_base_name(const envspec::Spec& spec);

/// Opens the spec's image base and resolves it to the spec's platform. With `locked`, the locked
/// manifest is what is read (fetched by digest from a registry, or found by digest in the layout),
/// whatever the reference's tag names now; a locked base for another reference is a stale lock.
/// Without it, the reference's current manifest (the spec's own pin, if any, is checked).
/// Errors are located at the spec's base key; a registry's keep their exit code (3: unreachable).
Result<OpenedBase> open_base_image(const envspec::Spec& spec, const BlobStore& store,
                                   const registry::ClientOptions& client,
                                   const std::optional<envspec::LockedBase>& locked);

/// The lock's record of an opened base.
envspec::LockedBase locked_base_of(const envspec::Spec& spec, const OpenedBase& base);

/// An error about the base image, located at the spec's `base.oci` or `base.image` value. A
/// registry's keeps its exit code (unreachable stays 3, bad content 2); a local layout's or
/// archive's is about its content (2).
Error base_error(const envspec::Spec& spec, const Error& cause);

} // namespace lockstep::builder
