#pragma once
// Reading glibc's /etc/ld.so.cache, the table `ldconfig -p` prints: which file the dynamic loader
// uses for each library name. `--gpus` finds the host's NVIDIA driver libraries through it, as
// Apptainer's `--nv` and nvidia-container-cli do.
//
// Formats (glibc sysdeps/generic/dl-cache.h, elf/cache.c):
// - new, "glibc-ld.so.cache" "1.1": a 48-byte header (nlibs, len_strings, endianness flags,
//   extension offset), nlibs 24-byte entries {flags, key, value, osversion, hwcap}; string offsets
//   count from the start of this header. An optional extension directory carries the generator.
//   glibc >= 2.32 writes only this format by default.
// - old, "ld.so-1.7.0": a 16-byte header, nlibs 12-byte entries {flags, key, value}; string offsets
//   count from the end of the entries. `ldconfig -c compat` writes an old table followed (8-byte
//   aligned) by a complete new one, which readers prefer, as glibc does.
// The file is treated as hostile input: every count, offset and string is bounds-checked.
#include "support/base/result.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// Which layout the entries were read from.
enum class LdCacheFormat {
  old_format, ///< "ld.so-1.7.0" only
  new_format, ///< "glibc-ld.so.cache1.1" only (glibc >= 2.32 default)
  compat,     ///< old table with a new one appended; the new one was read
};

/// One entry: the name the loader looks up and the file it maps to.
struct LdCacheEntry {
  std::string name;        ///< the key: a soname or file name, e.g. "libcuda.so.1"
  std::string path;        ///< absolute path on the system the cache describes
  std::int32_t flags = 0;  ///< library type (low byte, 3 = libc6) and ABI (high byte, 0x03 = x86-64)
  std::uint64_t hwcap = 0; ///< hardware-capability bits (new format; 0 for ordinary directories)
};

/// A parsed cache: entries in file order, which is the loader's preference order.
struct LdCache {
  LdCacheFormat format = LdCacheFormat::new_format;
  std::vector<LdCacheEntry> entries;
  std::string generator; ///< "ldconfig (GNU libc) ..." from the extension, empty if absent
};

/// Parses the bytes of a cache file. `origin` names it in error messages (invalid_input).
Result<LdCache> parse_ld_cache(std::string_view bytes, const std::string& origin);

/// Reads and parses the cache at `path` (io_error if unreadable; at most 64 MiB).
Result<LdCache> read_ld_cache(const std::filesystem::path& path);

/// The entry flags this build's loader accepts for its own libraries, e.g. 0x0303 (libc6,x86-64)
/// on x86-64; glibc compares them exactly (`_dl_cache_check_flags`).
std::int32_t native_ld_cache_flags();

/// The flags as `ldconfig -p` prints them: "libc6,x86-64", "libc6", "ELF".
std::string describe_ld_cache_flags(std::int32_t flags);

} // namespace lockstep::runner
