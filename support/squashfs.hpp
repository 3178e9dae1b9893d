#pragma once
// squashfs images: writing them (libsquashfs from squashfs-tools-ng) and reading them back.
#include <optional>
#include <string_view>

namespace lockstep {

/// The block compressor of a squashfs image.
enum class SquashfsCompressor { gzip, xz, zstd, lz4 };

/// "gzip", "xz", "zstd" or "lz4".
std::string_view squashfs_compressor_name(SquashfsCompressor compressor);
/// The compressor named `name`, or nullopt.
std::optional<SquashfsCompressor> parse_squashfs_compressor(std::string_view name);

} // namespace lockstep
