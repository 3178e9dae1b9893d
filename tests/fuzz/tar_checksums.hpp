#pragma once
// For the fuzz targets that read tar layers.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace lockstep::fuzz {

// Most mutations of a header break its checksum, and libarchive then stops at "damaged archive"
// before reaching the unpacker. So the harness walks the ustar headers (header, data rounded up to
// 512 bytes, next header) and rewrites each checksum, letting mutations reach names, types and sizes.
// (A bad checksum is covered by the unit tests.)
inline std::string with_valid_checksums(std::string_view input) {
  std::string tar(input);
  std::size_t offset = 0;
  while (offset + 512 <= tar.size()) {
    char* h = tar.data() + offset;
    bool zero = true;
    for (std::size_t i = 0; i < 512 && zero; ++i) {
      zero = h[i] == 0;
    }
    if (zero) {
      break;
    }
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (std::size_t i = 0; i < 512; ++i) {
      sum += static_cast<unsigned char>(h[i]);
    }
    std::snprintf(h + 148, 8, "%06o", sum & 0777777U);
    h[155] = ' ';
    std::uint64_t size = 0;
    if ((static_cast<unsigned char>(h[124]) & 0x80U) != 0) {
      for (int i = 125; i < 136; ++i) {
        size = (size << 8) | static_cast<unsigned char>(h[i]);
      }
    } else {
      for (int i = 124; i < 136 && h[i] >= '0' && h[i] <= '7'; ++i) {
        size = size * 8 + static_cast<std::uint64_t>(h[i] - '0');
      }
    }
    char type = h[156];
    if (type == '1' || type == '2' || type == '3' || type == '4' || type == '5' || type == '6') {
      size = 0;
    }
    if (size > tar.size()) {
      break;
    }
    offset += 512 + ((size + 511) / 512) * 512;
  }
  return tar;
}

} // namespace lockstep::fuzz
