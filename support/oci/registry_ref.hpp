#pragma once
// A registry image reference, `[HOST[:PORT]/]REPO[:TAG][@sha256:DIGEST]`, normalised as Docker does:
// a first component without '.' or ':' that is not "localhost" is a repository path on docker.io, and
// a one-component name there lives under "library/" (`debian:bookworm` is
// `docker.io/library/debian:bookworm`); no tag and no digest means the tag "latest". docs/registry.md.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace lockstep::oci {

/// The host images without a registry host live on.
inline constexpr std::string_view k_docker_hub = "docker.io";

/// One image (or artifact) in a registry.
struct RegistryRef {
  std::string host;             ///< normalised: "docker.io", "127.0.0.1:5000", "nvcr.io"
  std::string repository;       ///< "library/debian", "nvidia/pytorch"
  std::string tag;              ///< empty only when a digest is given without a tag
  std::optional<Digest> digest; ///< a pinned manifest digest; when set it wins over the tag

  /// Parses the text after "docker://" (or "oras://"). Errors say which part is wrong and what the
  /// form is; upper-case repository names and non-sha256 digests are refused.
  static Result<RegistryRef> parse(std::string_view text);

  /// "HOST/REPO", the name the registry's API and credential lookups use.
  [[nodiscard]] std::string name() const;
  /// The full normalised reference: "HOST/REPO[:TAG][@DIGEST]"; parse(str()) gives back the same.
  [[nodiscard]] std::string str() const;
  /// What the manifest endpoint is asked for: the digest when pinned, else the tag.
  [[nodiscard]] std::string api_reference() const;
  /// The host the API is served from: "registry-1.docker.io" for docker.io, else `host`.
  [[nodiscard]] std::string api_host() const;

  friend bool operator==(const RegistryRef&, const RegistryRef&) = default;
};

} // namespace lockstep::oci
