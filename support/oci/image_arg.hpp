#pragma once
// IMAGE: the one argument type and grammar of every command that reads an image (exec, run,
// preflight, inspect, verify, diff, doctor). docs/exec.md, "IMAGE".
#include "support/base/result.hpp"
#include "support/oci/image_source.hpp"

#include <filesystem>
#include <string_view>

namespace lockstep {

/// An image named on the command line.
struct ImageArg {
  enum class Kind { oci, sif, directory };
  Kind kind = Kind::oci;
  /// Kind::oci; also Kind::sif for a SIF in a registry (oras://HOST/REPO:TAG, `path` empty until it is
  /// pulled)
  oci::ImageRef ref;
  std::filesystem::path path; ///< Kind::sif (the file) and Kind::directory (the root)
  /// Kind::oci, an index: the image for this platform (unset: this host's; `--platform`)
  std::optional<oci::Platform> platform;
};

/// The forms IMAGE takes, for messages.
inline constexpr std::string_view k_image_forms =
    "oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:REF], docker://[HOST/]REPO[:TAG][@DIGEST], "
    "oras://HOST/REPO[:TAG] (a SIF), sif:FILE, dir:PATH, or a path: an "
    "OCI layout directory, an OCI or docker archive, a .sif file or a root directory";

/// Parses IMAGE: oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:REF], sif:FILE,
/// dir:PATH, or a bare path, recognised by what it holds: a directory with an `oci-layout` file is an
/// OCI layout, any other directory a root; a file starting with SIF's magic (or named *.sif) a SIF;
/// a tar holding `oci-layout` an OCI archive, one holding `manifest.json` a docker-archive.
Result<ImageArg> parse_image_arg(std::string_view text);

} // namespace lockstep
