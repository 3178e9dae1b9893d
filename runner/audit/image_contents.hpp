#pragma once
// What an image holds, for verify and diff: the final filesystem view of every form of IMAGE. OCI
// images (layout, OCI archive, docker-archive, registry) are read by support/oci/image_contents
// (layers streamed and applied in memory); a SIF's squashfs is extracted with the existing safe
// extractor into a private directory and walked; a root directory is walked in place.
// docs/verify-diff.md.
#include "runner/runtime/exec.hpp"
#include "support/base/result.hpp"
#include "support/oci/image_contents.hpp"

namespace lockstep::runner {

using oci::add_directory_to_contents;
using oci::apply_layer_to_contents;
using oci::ContentsOptions;
using oci::FollowLast;
using oci::hex_of;
using oci::ImageContents;
using oci::ImageEntry;
using oci::is_metadata_path;
using oci::wants_sha256;

/// Reads the image's final filesystem view and config (see the file comment). For OCI images every
/// layer blob is read once where it lies (the layout, or the archive's member), its digest and size
/// checked while it streams; the cached blobs of other commands are not trusted for this. Malformed or
/// hostile content is invalid_input naming the image, layer and member.
Result<ImageContents> read_image_contents(const ImageArg& image, const ContentsOptions& options = {});

} // namespace lockstep::runner
