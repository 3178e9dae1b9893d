#include "support/squashfs.hpp"

namespace lockstep {

std::string_view squashfs_compressor_name(SquashfsCompressor compressor) {
  switch (compressor) {
  case SquashfsCompressor::gzip:
    return "gzip";
  case SquashfsCompressor::xz:
    return "xz";
  case SquashfsCompressor::zstd:
    return "zstd";
  case SquashfsCompressor::lz4:
    return "lz4";
  }
  return "gzip";
}

std::optional<SquashfsCompressor> parse_squashfs_compressor(std::string_view name) {
  for (auto c : {SquashfsCompressor::gzip, SquashfsCompressor::xz, SquashfsCompressor::zstd,
                 SquashfsCompressor::lz4}) {
    if (squashfs_compressor_name(c) == name) {
      return c;
    }
  }
  return std::nullopt;
}

} // namespace lockstep
