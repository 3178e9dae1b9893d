#include "runner/runtime/ld_cache.hpp"

#include "support/system/fs.hpp"

#include <array>
#include <cstring>

namespace lockstep::runner {
namespace {

constexpr std::string_view k_old_magic = "ld.so-1.7.0"; // CACHEMAGIC
constexpr std::string_view k_new_magic = "glibc-ld.so.cache"
                                         "1.1";         // CACHEMAGIC_VERSION_NEW
constexpr std::size_t k_old_header_size = 16;           // magic[11], pad, nlibs
constexpr std::size_t k_old_entry_size = 12;            // flags, key, value
constexpr std::size_t k_new_header_size = 48;           // struct cache_file_new
constexpr std::size_t k_new_entry_size = 24;            // struct file_entry_new
constexpr std::size_t k_new_alignment = 8;              // ALIGN_CACHE
constexpr std::uint32_t k_extension_magic = 0xeaa42174; // cache_extension_magic
constexpr std::uint32_t k_extension_tag_generator = 0;
constexpr std::size_t k_extension_section_size = 16; // tag, flags, offset, size
constexpr std::uint32_t k_max_extension_sections = 1024;

// cache_file_new.flags & 3: 0 unknown (old ldconfig), 1 invalid, 2 little endian, 3 big endian.
constexpr std::uint8_t k_endian_unset = 0;
constexpr std::uint8_t k_endian_invalid = 1;
constexpr std::uint8_t k_endian_big = 3;

/// Bounds-checked little- or big-endian reads over the file bytes; every failure names the
/// origin and what was being read.
class Reader {
public:
  Reader(std::string_view bytes, const std::string& origin) : m_bytes(bytes), m_origin(origin) {}

  void set_big_endian(bool big) { m_big_endian = big; }
  [[nodiscard]] std::size_t size() const { return m_bytes.size(); }

  Result<std::uint32_t> u32(std::size_t offset, std::string_view what) const {
    LS_TRY(need(offset, 4, what));
    std::array<unsigned char, 4> b{};
    std::memcpy(b.data(), m_bytes.data() + offset, 4);
    if (m_big_endian) {
      return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
    }
    return (std::uint32_t{b[3]} << 24) | (std::uint32_t{b[2]} << 16) | (std::uint32_t{b[1]} << 8) | b[0];
  }

  Result<std::uint64_t> u64(std::size_t offset, std::string_view what) const {
    LS_TRY_ASSIGN(std::uint64_t first, u32(offset, what));
    LS_TRY_ASSIGN(std::uint64_t second, u32(offset + 4, what));
    return m_big_endian ? (first << 32) | second : (second << 32) | first;
  }

  /// The NUL-terminated string at `base + offset`, which must end inside the file.
  Result<std::string> string_at(std::size_t base, std::uint32_t offset, std::string_view what) const {
    const std::size_t start = base + offset; // base <= size, offset < 2^32: no overflow in size_t
    if (start >= m_bytes.size()) {
      return fail("{} starts at byte {}, past the end of the file ({} bytes)", what, start, m_bytes.size());
    }
    const std::size_t end = m_bytes.find('\0', start);
    if (end == std::string_view::npos) {
      return fail("{} at byte {} is not NUL-terminated before the end of the file", what, start);
    }
    return std::string(m_bytes.substr(start, end - start));
  }

  Result<void> need(std::size_t offset, std::size_t length, std::string_view what) const {
    if (offset > m_bytes.size() || length > m_bytes.size() - offset) {
      return fail("truncated: {} needs bytes {}..{}, but the file has {} bytes", what, offset,
                  offset + length, m_bytes.size());
    }
    return {};
  }

  template <typename... Args> Error fail(fmt::format_string<Args...> f, Args&&... args) const {
    return invalid_input("invalid ld.so cache {}: {}", m_origin, fmt::format(f, std::forward<Args>(args)...));
  }

  [[nodiscard]] std::string_view bytes() const { return m_bytes; }

private:
  std::string_view m_bytes;
  const std::string& m_origin;
  bool m_big_endian = false;
};

/// Checks that `count` records of `record_size` bytes fit from `offset` to the end of the file.
Result<void> need_table(const Reader& r, std::size_t offset, std::uint64_t count, std::size_t record_size,
                        std::string_view what) {
  const std::size_t available = offset <= r.size() ? r.size() - offset : 0;
  if (count > available / record_size) {
    return r.fail("{} {} entries of {} bytes do not fit in the {} bytes after byte {}", count, what,
                  record_size, available, offset);
  }
  return {};
}

/// The fields both formats' entries start with: flags, then the offsets of the name and the path
/// among the strings at `strings`.
Result<LdCacheEntry> read_entry(const Reader& r, std::size_t at, std::size_t strings,
                                const std::string& what) {
  LdCacheEntry e;
  LS_TRY_ASSIGN(const std::uint32_t flags, r.u32(at, what));
  e.flags = static_cast<std::int32_t>(flags);
  LS_TRY_ASSIGN(const std::uint32_t key, r.u32(at + 4, what));
  LS_TRY_ASSIGN(const std::uint32_t value, r.u32(at + 8, what));
  LS_TRY_ASSIGN(e.name, r.string_at(strings, key, "the name of " + what));
  LS_TRY_ASSIGN(e.path, r.string_at(strings, value, "the path of " + what));
  return e;
}

Result<std::vector<LdCacheEntry>> read_old_entries(const Reader& r) {
  LS_TRY_ASSIGN(const std::uint32_t nlibs, r.u32(12, "the old header"));
  LS_TRY(need_table(r, k_old_header_size, nlibs, k_old_entry_size, "old-format"));
  const std::size_t strings = k_old_header_size + std::size_t{nlibs} * k_old_entry_size;
  std::vector<LdCacheEntry> entries;
  entries.reserve(nlibs);
  for (std::uint32_t i = 0; i < nlibs; ++i) {
    const std::size_t at = k_old_header_size + std::size_t{i} * k_old_entry_size;
    LS_TRY_ASSIGN(LdCacheEntry e, read_entry(r, at, strings, fmt::format("entry {} of {}", i, nlibs)));
    entries.push_back(std::move(e));
  }
  return entries;
}

/// Reads the generator string from the extension directory (new format), if there is one.
/// Unlike the string offsets, the directory's offsets count from the start of the file, which
/// matters in the compat format (`ldconfig -c compat` writes them so).
Result<std::string> read_generator(const Reader& r, std::uint32_t extension_offset) {
  constexpr std::size_t base = 0;
  if (extension_offset == 0) {
    return std::string();
  }
  if (extension_offset % 4 != 0) {
    return r.fail("the extension directory offset {} is not a multiple of 4", extension_offset);
  }
  const std::size_t dir = base + extension_offset;
  LS_TRY_ASSIGN(const std::uint32_t magic, r.u32(dir, "the extension directory"));
  if (magic != k_extension_magic) {
    return r.fail("the extension directory at byte {} has magic {:#x}, expected {:#x}", dir, magic,
                  k_extension_magic);
  }
  LS_TRY_ASSIGN(const std::uint32_t count, r.u32(dir + 4, "the extension directory"));
  if (count > k_max_extension_sections) {
    return r.fail("the extension directory claims {} sections (at most {} are accepted)", count,
                  k_max_extension_sections);
  }
  LS_TRY(need_table(r, dir + 8, count, k_extension_section_size, "extension section"));
  std::string generator;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::size_t at = dir + 8 + std::size_t{i} * k_extension_section_size;
    const std::string what = fmt::format("extension section {} of {}", i, count);
    LS_TRY_ASSIGN(const std::uint32_t tag, r.u32(at, what));
    LS_TRY_ASSIGN(const std::uint32_t offset, r.u32(at + 8, what));
    LS_TRY_ASSIGN(const std::uint32_t size, r.u32(at + 12, what));
    LS_TRY(r.need(base + offset, size, "the data of " + what));
    if (tag == k_extension_tag_generator) {
      generator.assign(r.bytes().substr(base + offset, size));
      // Some writers include a trailing NUL in the size; ldconfig -p prints up to it.
      if (const auto nul = generator.find('\0'); nul != std::string::npos) {
        generator.resize(nul);
      }
    }
  }
  return generator;
}

/// Reads the new-format table whose header starts at `base`.
Result<LdCache> read_new_table(Reader& r, std::size_t base, LdCacheFormat format) {
  LS_TRY(r.need(base, k_new_header_size, "the header"));
  const auto endian = static_cast<std::uint8_t>(static_cast<unsigned char>(r.bytes()[base + 28]) & 3);
  if (endian == k_endian_invalid) {
    return r.fail("the header marks the cache as invalid (endianness flag 1); run ldconfig to rebuild it");
  }
  // Unset (written by ldconfig before glibc 2.33) means the writer's own byte order: assume ours.
  if (endian != k_endian_unset) {
    r.set_big_endian(endian == k_endian_big);
  }
  LS_TRY_ASSIGN(const std::uint32_t nlibs, r.u32(base + 20, "the header"));
  LS_TRY_ASSIGN(const std::uint32_t len_strings, r.u32(base + 24, "the header"));
  LS_TRY_ASSIGN(const std::uint32_t extension_offset, r.u32(base + 32, "the header"));
  LS_TRY(need_table(r, base + k_new_header_size, nlibs, k_new_entry_size, "new-format"));
  const std::size_t strings_start = base + k_new_header_size + std::size_t{nlibs} * k_new_entry_size;
  if (len_strings > r.size() - strings_start) {
    return r.fail("the string table of {} bytes after byte {} runs past the end of the file ({} bytes)",
                  len_strings, strings_start, r.size());
  }

  LdCache cache;
  cache.format = format;
  cache.entries.reserve(nlibs);
  for (std::uint32_t i = 0; i < nlibs; ++i) {
    const std::size_t at = base + k_new_header_size + std::size_t{i} * k_new_entry_size;
    const std::string what = fmt::format("entry {} of {}", i, nlibs);
    LS_TRY_ASSIGN(LdCacheEntry e, read_entry(r, at, base, what));
    LS_TRY_ASSIGN(e.hwcap, r.u64(at + 16, what));
    cache.entries.push_back(std::move(e));
  }
  LS_TRY_ASSIGN(cache.generator, read_generator(r, extension_offset));
  return cache;
}

} // namespace

Result<LdCache> parse_ld_cache(std::string_view bytes, const std::string& origin) {
  Reader r(bytes, origin);
  if (bytes.starts_with(k_new_magic)) {
    return read_new_table(r, 0, LdCacheFormat::new_format);
  }
  if (!bytes.starts_with(k_old_magic)) {
    if (bytes.size() < k_old_magic.size() &&
        (k_new_magic.starts_with(bytes) || k_old_magic.starts_with(bytes))) {
      return r.fail("truncated: the file has only {} bytes", bytes.size());
    }
    return r.fail("not an ld.so cache: it starts with neither \"{}\" nor \"{}\"", k_new_magic, k_old_magic);
  }
  LS_TRY(r.need(0, k_old_header_size, "the old header"));
  LS_TRY_ASSIGN(const std::uint32_t nlibs, r.u32(12, "the old header"));
  LS_TRY(need_table(r, k_old_header_size, nlibs, k_old_entry_size, "old-format"));
  // A new table may follow the old entries (ldconfig -c compat); glibc prefers it.
  const std::size_t old_end = k_old_header_size + std::size_t{nlibs} * k_old_entry_size;
  const std::size_t new_base = (old_end + k_new_alignment - 1) / k_new_alignment * k_new_alignment;
  if (new_base <= bytes.size() && bytes.substr(new_base).starts_with(k_new_magic)) {
    return read_new_table(r, new_base, LdCacheFormat::compat);
  }
  LdCache cache;
  cache.format = LdCacheFormat::old_format;
  LS_TRY_ASSIGN(cache.entries, read_old_entries(r));
  return cache;
}

Result<LdCache> read_ld_cache(const std::filesystem::path& path) {
  LS_TRY_ASSIGN(const std::string bytes, read_file(path));
  return parse_ld_cache(bytes, path.string());
}

std::int32_t native_ld_cache_flags() {
  constexpr std::int32_t libc6 = 0x0003; // FLAG_ELF_LIBC6
#if defined(__x86_64__) && defined(__ILP32__)
  return libc6 | 0x0800; // FLAG_X8664_LIBX32
#elif defined(__x86_64__)
  return libc6 | 0x0300; // FLAG_X8664_LIB64
#elif defined(__aarch64__)
  return libc6 | 0x0a00; // FLAG_AARCH64_LIB64
#elif defined(__powerpc64__)
  return libc6 | 0x0500; // FLAG_POWERPC_LIB64
#elif defined(__s390x__)
  return libc6 | 0x0400; // FLAG_S390_LIB64
#elif defined(__riscv) && __riscv_xlen == 64 && defined(__riscv_float_abi_double)
  return libc6 | 0x1000; // FLAG_RISCV_FLOAT_ABI_DOUBLE
#else
  return libc6;
#endif
}

std::string describe_ld_cache_flags(std::int32_t flags) {
  std::string out;
  switch (flags & 0x00ff) { // FLAG_TYPE_MASK
  case 0x0000:
    out = "libc4";
    break;
  case 0x0001:
    out = "ELF";
    break;
  case 0x0002:
    out = "libc5";
    break;
  case 0x0003:
    out = "libc6";
    break;
  default:
    out = "unknown";
    break;
  }
  const int abi = flags & 0xff00; // FLAG_REQUIRED_MASK
  switch (abi) {
  case 0x0000:
    break;
  case 0x0100: // FLAG_SPARC_LIB64
  case 0x0400: // FLAG_S390_LIB64
  case 0x0500: // FLAG_POWERPC_LIB64
  case 0x0700: // FLAG_MIPS64_LIBN64
    out += ",64bit";
    break;
  case 0x0200:
    out += ",IA-64";
    break;
  case 0x0300:
    out += ",x86-64";
    break;
  case 0x0600:
    out += ",N32";
    break;
  case 0x0800:
    out += ",x32";
    break;
  case 0x0900:
    out += ",hard-float";
    break;
  case 0x0a00:
    out += ",AArch64";
    break;
  case 0x0b00: // FLAG_ARM_LIBSF
  case 0x0f00: // FLAG_RISCV_FLOAT_ABI_SOFT
    out += ",soft-float";
    break;
  case 0x1000:
    out += ",double-float";
    break;
  default:
    out += fmt::format(",{}", abi);
    break;
  }
  return out;
}

} // namespace lockstep::runner
