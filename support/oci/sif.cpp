#include "support/oci/sif.hpp"

#include "support/system/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

namespace lockstep::sif {

namespace {

// Global header (128 bytes at offset 0), sylabs/sif pkg/sif/sif.go `header`.
constexpr std::size_t k_off_launch = 0;   // [32] NUL-padded launch script
constexpr std::size_t k_off_magic = 32;   // [10] "SIF_MAGIC\0"
constexpr std::size_t k_off_version = 42; // [3]  "01\0"
constexpr std::size_t k_off_arch = 45;    // [3]  arch code of the primary partition, "00\0" if none
constexpr std::size_t k_off_id = 48;      // [16] UUID
constexpr std::size_t k_off_created = 64; // int64 times
constexpr std::size_t k_off_modified = 72;
constexpr std::size_t k_off_desc_free = 80; // int64 table geometry
constexpr std::size_t k_off_desc_total = 88;
constexpr std::size_t k_off_desc_offset = 96;
constexpr std::size_t k_off_desc_size = 104;
constexpr std::size_t k_off_data_offset = 112;
constexpr std::size_t k_off_data_size = 120;
constexpr std::size_t k_launch_size = 32;
constexpr std::string_view k_magic{"SIF_MAGIC\0", 10};
constexpr std::string_view k_version{"01\0", 3};

// Descriptor (585 bytes), pkg/sif/descriptor.go `rawDescriptor`.
constexpr std::size_t k_d_type = 0;     // int32
constexpr std::size_t k_d_used = 4;     // bool
constexpr std::size_t k_d_id = 5;       // uint32
constexpr std::size_t k_d_group = 9;    // uint32 | 0xF0000000
constexpr std::size_t k_d_link = 13;    // uint32
constexpr std::size_t k_d_offset = 17;  // int64
constexpr std::size_t k_d_size = 25;    // int64
constexpr std::size_t k_d_padded = 33;  // int64 SizeWithPadding
constexpr std::size_t k_d_created = 41; // int64
constexpr std::size_t k_d_modified = 49;
constexpr std::size_t k_d_uid = 57; // int64, deprecated (0)
constexpr std::size_t k_d_gid = 65; // int64, deprecated (0)
constexpr std::size_t k_d_name = 73;
constexpr std::size_t k_d_name_size = 128;
constexpr std::size_t k_d_extra = 201; // [384] partition: fstype int32, parttype int32, arch[3]
constexpr std::uint32_t k_group_mask = 0xF0000000U;
constexpr std::int64_t k_max_descriptors = 1 << 16; // far above any real file (48 by default)

// The architecture codes of pkg/sif/arch.go.
constexpr std::array<std::pair<std::string_view, std::string_view>, 12> k_arches{{
    {"386", "01"},
    {"amd64", "02"},
    {"arm", "03"},
    {"arm64", "04"},
    {"ppc64", "05"},
    {"ppc64le", "06"},
    {"mips", "07"},
    {"mipsle", "08"},
    {"mips64", "09"},
    {"mips64le", "10"},
    {"s390x", "11"},
    {"riscv64", "12"},
}};

template <typename T> void put(std::string& buf, std::size_t off, T value) {
  using U = std::make_unsigned_t<T>;
  auto u = static_cast<U>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    buf[off + i] = static_cast<char>(static_cast<std::uint8_t>(u >> (8 * i)));
  }
}

template <typename T> T get(std::string_view buf, std::size_t off) {
  using U = std::make_unsigned_t<T>;
  U u = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    u |= static_cast<U>(static_cast<U>(static_cast<std::uint8_t>(buf[off + i])) << (8 * i));
  }
  return static_cast<T>(u);
}

void put_bytes(std::string& buf, std::size_t off, std::string_view bytes, std::size_t field) {
  std::memcpy(buf.data() + off, bytes.data(), std::min(bytes.size(), field));
}

// A NUL-terminated string field (all `field` bytes when there is no NUL).
std::string get_cstr(std::string_view buf, std::size_t off, std::size_t field) {
  std::string_view s = buf.substr(off, field);
  return std::string(s.substr(0, s.find('\0')));
}

std::string serialize_descriptor(const Descriptor& d) {
  std::string buf(static_cast<std::size_t>(k_descriptor_size), '\0');
  put<std::int32_t>(buf, k_d_type, static_cast<std::int32_t>(d.type));
  buf[k_d_used] = 1;
  put<std::uint32_t>(buf, k_d_id, d.id);
  put<std::uint32_t>(buf, k_d_group, d.group_id | k_group_mask);
  put<std::uint32_t>(buf, k_d_link, d.linked_id);
  put<std::int64_t>(buf, k_d_offset, d.offset);
  put<std::int64_t>(buf, k_d_size, d.size);
  put<std::int64_t>(buf, k_d_padded, d.size_with_padding);
  put<std::int64_t>(buf, k_d_created, d.created_at);
  put<std::int64_t>(buf, k_d_modified, d.modified_at);
  put<std::int64_t>(buf, k_d_uid, 0);
  put<std::int64_t>(buf, k_d_gid, 0);
  put_bytes(buf, k_d_name, d.name, k_d_name_size - 1);
  if (d.type == DataType::partition) {
    put<std::int32_t>(buf, k_d_extra, static_cast<std::int32_t>(d.fs_type));
    put<std::int32_t>(buf, k_d_extra + 4, static_cast<std::int32_t>(d.part_type));
    std::string code = arch_code(d.arch).value_or("00");
    put_bytes(buf, k_d_extra + 8, code, 2);
  }
  return buf;
}

Error bad(const std::filesystem::path& file, const std::string& why) {
  return invalid_input("{}: not a valid SIF image: {}", file.string(), why);
}

Result<void> pwrite_all(int fd, std::string_view data, std::int64_t offset, const std::string& what) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done,
                         static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno_error("can't write " + what, errno);
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

// a + b > limit, without overflow, for non-negative a and b.
bool past(std::int64_t a, std::int64_t b, std::int64_t limit) {
  return a > limit || b > limit - a;
}

} // namespace

std::optional<std::string> arch_code(std::string_view go_arch) {
  for (const auto& [name, code] : k_arches) {
    if (name == go_arch) {
      return std::string(code);
    }
  }
  return std::nullopt;
}

std::string arch_name(std::string_view code) {
  for (const auto& [name, c] : k_arches) {
    if (c == code) {
      return std::string(name);
    }
  }
  return {};
}

std::string_view data_type_name(DataType type) {
  switch (type) {
  case DataType::deffile:
    return "Def.FILE";
  case DataType::env_vars:
    return "Env.Vars";
  case DataType::labels:
    return "JSON.Labels";
  case DataType::partition:
    return "FS";
  case DataType::signature:
    return "Signature";
  case DataType::generic_json:
    return "JSON.Generic";
  case DataType::generic:
    return "Generic/Raw";
  case DataType::crypto_message:
    return "Cryptographic Message";
  case DataType::sbom:
    return "SBOM";
  }
  return "Unknown";
}

std::array<std::uint8_t, 16> derive_uuid(std::string_view seed) {
  Digest d = sha256_of(seed);
  std::array<std::uint8_t, 16> id{};
  for (std::size_t i = 0; i < id.size(); ++i) {
    id[i] = static_cast<std::uint8_t>(std::stoi(d.hex().substr(2 * i, 2), nullptr, 16));
  }
  id[6] = static_cast<std::uint8_t>((id[6] & 0x0FU) | 0x50U); // version 5 (name-based, SHA)
  id[8] = static_cast<std::uint8_t>((id[8] & 0x3FU) | 0x80U); // RFC 4122 variant
  return id;
}

std::string uuid_string(const std::array<std::uint8_t, 16>& id) {
  std::string s;
  for (std::size_t i = 0; i < id.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      s += '-';
    }
    s += fmt::format("{:02x}", id[i]);
  }
  return s;
}

const Descriptor* Image::primary_partition() const {
  for (const auto& d : descriptors) {
    if (d.type == DataType::partition && d.part_type == PartType::prim_sys) {
      return &d;
    }
  }
  return nullptr;
}

const Descriptor* Image::find(std::uint32_t object_id) const {
  for (const auto& d : descriptors) {
    if (d.id == object_id) {
      return &d;
    }
  }
  return nullptr;
}

Result<Image> read_image(const std::filesystem::path& file) {
  int opened = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (opened < 0) {
    int err = errno;
    Error e = errno_error("can't open SIF image " + file.string(), err);
    if (err == ENOENT || err == ENOTDIR || err == ELOOP) {
      e.code = ExitCode::invalid_input; // a path given by the user that names no file
    }
    return e;
  }
  UniqueFd fd(opened);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return errno_error("can't stat " + file.string(), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_input("{}: not a SIF image: not a regular file", file.string());
  }
  Image img;
  img.file = file;
  img.file_size = st.st_size;
  std::string header(static_cast<std::size_t>(k_header_size), '\0');
  LS_TRY_ASSIGN(std::size_t got, read_full(fd.get(), header.data(), header.size(), file.string()));
  if (got < header.size()) {
    return bad(file, fmt::format("the file has {} bytes, less than the 128-byte SIF header", got));
  }
  if (std::string_view(header).substr(k_off_magic, k_magic.size()) != k_magic) {
    return bad(file, "no SIF_MAGIC at byte 32");
  }
  if (std::string_view(header).substr(k_off_version, k_version.size()) != k_version) {
    return bad(file, fmt::format("unsupported SIF version '{}' (lockstep reads version 01)",
                                 get_cstr(header, k_off_version, 3)));
  }
  img.launch_script = get_cstr(header, k_off_launch, k_launch_size);
  img.arch = arch_name(get_cstr(header, k_off_arch, 3));
  std::memcpy(img.id.data(), header.data() + k_off_id, img.id.size());
  img.created_at = get<std::int64_t>(header, k_off_created);
  img.modified_at = get<std::int64_t>(header, k_off_modified);
  img.descriptors_free = get<std::int64_t>(header, k_off_desc_free);
  img.descriptors_total = get<std::int64_t>(header, k_off_desc_total);
  img.descriptors_offset = get<std::int64_t>(header, k_off_desc_offset);
  img.descriptors_size = get<std::int64_t>(header, k_off_desc_size);
  img.data_offset = get<std::int64_t>(header, k_off_data_offset);
  img.data_size = get<std::int64_t>(header, k_off_data_size);

  const std::int64_t size = img.file_size;
  if (img.descriptors_total < 0 || img.descriptors_total > k_max_descriptors) {
    return bad(file, fmt::format("the header declares {} descriptors (at most {} are accepted)",
                                 img.descriptors_total, k_max_descriptors));
  }
  if (img.descriptors_free < 0 || img.descriptors_free > img.descriptors_total) {
    return bad(file, fmt::format("the header declares {} free descriptors of {}", img.descriptors_free,
                                 img.descriptors_total));
  }
  if (img.descriptors_size != img.descriptors_total * k_descriptor_size) {
    return bad(file, fmt::format("the descriptor table size {} is not {} descriptors of {} bytes",
                                 img.descriptors_size, img.descriptors_total, k_descriptor_size));
  }
  if (img.descriptors_offset < k_header_size || past(img.descriptors_offset, img.descriptors_size, size)) {
    return bad(file,
               fmt::format("the descriptor table ({} bytes at offset {}) is not inside the file ({} bytes)",
                           img.descriptors_size, img.descriptors_offset, size));
  }
  if (img.data_offset < 0 || img.data_size < 0 || past(img.data_offset, img.data_size, size)) {
    return bad(file, fmt::format("the data section ({} bytes at offset {}) is not inside the file ({} bytes)",
                                 img.data_size, img.data_offset, size));
  }

  std::string table(static_cast<std::size_t>(img.descriptors_size), '\0');
  if (::lseek(fd.get(), img.descriptors_offset, SEEK_SET) < 0) {
    return errno_error("can't seek in " + file.string(), errno);
  }
  LS_TRY_ASSIGN(got, read_full(fd.get(), table.data(), table.size(), file.string()));
  if (got != table.size()) {
    return bad(file, "the descriptor table is truncated");
  }
  std::set<std::uint32_t> ids;
  std::vector<std::pair<std::int64_t, std::int64_t>> extents; // [offset, end)
  std::int64_t used = 0;
  for (std::int64_t slot = 0; slot < img.descriptors_total; ++slot) {
    std::string_view raw = std::string_view(table).substr(static_cast<std::size_t>(slot * k_descriptor_size),
                                                          static_cast<std::size_t>(k_descriptor_size));
    auto used_flag = static_cast<std::uint8_t>(raw[k_d_used]);
    if (used_flag == 0) {
      continue;
    }
    std::string where = fmt::format("descriptor {}", slot + 1);
    if (used_flag != 1) {
      return bad(file, fmt::format("{} has an invalid 'used' flag {}", where, used_flag));
    }
    ++used;
    Descriptor d;
    auto type = get<std::int32_t>(raw, k_d_type);
    if (type < static_cast<std::int32_t>(DataType::deffile) || type > 0x4FFF) {
      return bad(file, fmt::format("{} has an invalid data type {:#x}", where, type));
    }
    d.type = static_cast<DataType>(type);
    d.id = get<std::uint32_t>(raw, k_d_id);
    d.group_id = get<std::uint32_t>(raw, k_d_group) & ~k_group_mask;
    d.linked_id = get<std::uint32_t>(raw, k_d_link);
    d.offset = get<std::int64_t>(raw, k_d_offset);
    d.size = get<std::int64_t>(raw, k_d_size);
    d.size_with_padding = get<std::int64_t>(raw, k_d_padded);
    d.created_at = get<std::int64_t>(raw, k_d_created);
    d.modified_at = get<std::int64_t>(raw, k_d_modified);
    d.name = get_cstr(raw, k_d_name, k_d_name_size);
    where = fmt::format("descriptor {} (ID {})", slot + 1, d.id);
    if (d.id == 0 || !ids.insert(d.id).second) {
      return bad(file, fmt::format("{}: the ID is {}", where, d.id == 0 ? "zero" : "used twice"));
    }
    if (d.offset < 0 || d.size < 0 || past(d.offset, d.size, size)) {
      return bad(
          file,
          fmt::format("{}: the object ({} bytes at offset {}) extends past the end of the file ({} bytes)",
                      where, d.size, d.offset, size));
    }
    if (d.size > 0 && d.offset < img.descriptors_offset + img.descriptors_size) {
      return bad(file, fmt::format("{}: the object at offset {} overlaps the header or the descriptor table",
                                   where, d.offset));
    }
    if (d.type == DataType::partition) {
      auto fs_type = get<std::int32_t>(raw, k_d_extra);
      auto part_type = get<std::int32_t>(raw, k_d_extra + 4);
      if (fs_type < 1 || fs_type > 6) {
        return bad(file, fmt::format("{}: unknown partition file system type {}", where, fs_type));
      }
      if (part_type < 1 || part_type > 4) {
        return bad(file, fmt::format("{}: unknown partition type {}", where, part_type));
      }
      d.fs_type = static_cast<FsType>(fs_type);
      d.part_type = static_cast<PartType>(part_type);
      d.arch = arch_name(get_cstr(raw, k_d_extra + 8, 3));
      if (d.part_type == PartType::prim_sys && img.primary_partition() != nullptr) {
        return bad(file, fmt::format("{}: a second primary system partition", where));
      }
    }
    if (d.size > 0) {
      extents.emplace_back(d.offset, d.offset + d.size);
    }
    img.descriptors.push_back(std::move(d));
  }
  if (used + img.descriptors_free != img.descriptors_total) {
    return bad(file, fmt::format("{} descriptors are used and {} free, but the header declares {} in all",
                                 used, img.descriptors_free, img.descriptors_total));
  }
  std::sort(extents.begin(), extents.end());
  for (std::size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].first < extents[i - 1].second) {
      return bad(file, fmt::format("two objects overlap (bytes {}-{} and {}-{})", extents[i - 1].first,
                                   extents[i - 1].second, extents[i].first, extents[i].second));
    }
  }
  return img;
}

Writer::Writer(int fd, std::int64_t time, std::string what)
    : m_fd(fd), m_time(time), m_what(std::move(what)),
      m_end(k_descriptors_offset + k_default_descriptor_count * k_descriptor_size) {
}

Result<std::uint32_t> Writer::add_descriptor(Descriptor d, const Digest& content) {
  if (static_cast<std::int64_t>(m_descriptors.size()) >= k_default_descriptor_count) {
    return internal_error("{}: more than {} SIF objects", m_what, k_default_descriptor_count);
  }
  d.id = static_cast<std::uint32_t>(m_descriptors.size() + 1);
  d.group_id = 1;
  d.created_at = m_time;
  d.modified_at = m_time;
  m_end = d.offset + d.size;
  m_descriptors.push_back(std::move(d));
  m_contents.push_back(content);
  return m_descriptors.back().id;
}

Result<std::uint32_t> Writer::add_object(DataType type, std::string_view name, std::string_view data,
                                         std::uint32_t linked_id) {
  if (name.size() >= k_d_name_size) {
    return internal_error("{}: SIF object name '{}' is too long", m_what, name);
  }
  LS_TRY(pwrite_all(m_fd, data, m_end, m_what));
  Descriptor d;
  d.type = type;
  d.name = std::string(name);
  d.linked_id = linked_id;
  d.offset = m_end;
  d.size = static_cast<std::int64_t>(data.size());
  d.size_with_padding = d.size;
  return add_descriptor(std::move(d), sha256_of(data));
}

std::int64_t Writer::next_partition_offset() const {
  return (m_end + k_partition_alignment - 1) / k_partition_alignment * k_partition_alignment;
}

Result<std::uint32_t> Writer::add_partition(std::int64_t size, const Digest& content, FsType fs,
                                            PartType part, std::string_view arch, std::string_view name) {
  if (!arch_code(arch)) {
    return invalid_input("{}: SIF has no architecture code for '{}'", m_what, arch);
  }
  if (part == PartType::prim_sys) {
    if (!m_arch.empty()) {
      return internal_error("{}: a second primary partition", m_what);
    }
    m_arch = std::string(arch);
  }
  Descriptor d;
  d.type = DataType::partition;
  d.name = std::string(name);
  d.offset = next_partition_offset();
  d.size = size;
  d.size_with_padding = d.offset - m_end + size;
  d.fs_type = fs;
  d.part_type = part;
  d.arch = std::string(arch);
  return add_descriptor(std::move(d), content);
}

Result<std::int64_t> Writer::finish() {
  // The table region: header, zeros up to the descriptors, then every slot (unused ones zero).
  const auto data_offset = k_descriptors_offset + k_default_descriptor_count * k_descriptor_size;
  std::string table(static_cast<std::size_t>(data_offset), '\0');
  std::string seed = "lockstep SIF UUID v1\n";
  for (std::size_t i = 0; i < m_descriptors.size(); ++i) {
    std::string raw = serialize_descriptor(m_descriptors[i]);
    seed += raw;
    seed += m_contents[i].str();
    put_bytes(
        table,
        static_cast<std::size_t>(k_descriptors_offset + static_cast<std::int64_t>(i) * k_descriptor_size),
        raw, raw.size());
  }
  m_id = derive_uuid(seed);

  put_bytes(table, k_off_launch, k_launch_script, k_launch_size - 1);
  put_bytes(table, k_off_magic, k_magic, k_magic.size());
  put_bytes(table, k_off_version, k_version, k_version.size());
  put_bytes(table, k_off_arch, m_arch.empty() ? std::string("00") : *arch_code(m_arch), 2);
  put_bytes(table, k_off_id, std::string_view(reinterpret_cast<const char*>(m_id.data()), m_id.size()), 16);
  put<std::int64_t>(table, k_off_created, m_time);
  put<std::int64_t>(table, k_off_modified, m_time);
  put<std::int64_t>(table, k_off_desc_free,
                    k_default_descriptor_count - static_cast<std::int64_t>(m_descriptors.size()));
  put<std::int64_t>(table, k_off_desc_total, k_default_descriptor_count);
  put<std::int64_t>(table, k_off_desc_offset, k_descriptors_offset);
  put<std::int64_t>(table, k_off_desc_size, k_default_descriptor_count * k_descriptor_size);
  put<std::int64_t>(table, k_off_data_offset, data_offset);
  put<std::int64_t>(table, k_off_data_size, m_end - data_offset);

  LS_TRY(pwrite_all(m_fd, table, 0, m_what));
  // Nothing follows the last object; make the file end exactly there.
  if (::ftruncate(m_fd, static_cast<off_t>(m_end)) != 0) {
    return errno_error("can't truncate " + m_what, errno);
  }
  return m_end;
}

} // namespace lockstep::sif
