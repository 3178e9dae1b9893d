#pragma once
// SIF, the Singularity Image Format (sylabs/sif v2.8 layout): reading and writing the header and
// descriptor table. docs/sif.md describes the layout; the byte tables are in sif.cpp.
//
//   0      128-byte global header (launch script, magic, version, arch, UUID, times, table geometry)
//   4096   48 descriptors of 585 bytes (one per object; unused slots are zero)
//   32176  object data: small objects back to back, partitions aligned to 4096 bytes
//
// Everything is little-endian and packed. Readers must trust no offset: read_image() checks every
// one against the file size before anyone uses it.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::sif {

/// What an object holds (descriptor field DataType).
enum class DataType : std::int32_t {
  deffile = 0x4001,
  env_vars,
  labels,
  partition,
  signature,
  generic_json,
  generic,
  crypto_message,
  sbom,
};

/// The file system of a partition object.
enum class FsType : std::int32_t { squashfs = 1, ext3, archive, raw, encrypted_squashfs };

/// The role of a partition object; prim_sys is the root file system a runtime boots.
enum class PartType : std::int32_t { system = 1, prim_sys, data, overlay };

inline constexpr std::int64_t k_header_size = 128;
inline constexpr std::int64_t k_descriptor_size = 585;
inline constexpr std::int64_t k_default_descriptor_count = 48;
inline constexpr std::int64_t k_descriptors_offset = 4096;
inline constexpr std::int64_t k_partition_alignment = 4096;
/// The launch script Apptainer writes: the file can be run as `./image.sif`.
inline constexpr std::string_view k_launch_script = "#!/usr/bin/env run-singularity\n";

/// One used descriptor slot.
struct Descriptor {
  DataType type = DataType::generic;
  std::uint32_t id = 0;
  std::uint32_t group_id = 0;  ///< 0 = no group (the 0xF0000000 flag bit is removed)
  std::uint32_t linked_id = 0; ///< as stored: 0 none, an object ID, or a group ID | 0xF0000000
  std::int64_t offset = 0;     ///< absolute offset of the object in the file
  std::int64_t size = 0;
  std::int64_t size_with_padding = 0; ///< size plus the alignment padding before the object
  std::int64_t created_at = 0;
  std::int64_t modified_at = 0;
  std::string name;
  FsType fs_type{};     ///< partitions only
  PartType part_type{}; ///< partitions only
  std::string arch;     ///< partitions only: Go architecture name ("amd64"), "" when unknown
};

/// A SIF file's header and used descriptors, validated.
struct Image {
  std::filesystem::path file;
  std::int64_t file_size = 0;
  std::string launch_script;
  std::string arch; ///< of the primary partition ("amd64"), "" when unknown
  std::array<std::uint8_t, 16> id{};
  std::int64_t created_at = 0;
  std::int64_t modified_at = 0;
  std::int64_t descriptors_free = 0;
  std::int64_t descriptors_total = 0;
  std::int64_t descriptors_offset = 0;
  std::int64_t descriptors_size = 0;
  std::int64_t data_offset = 0;
  std::int64_t data_size = 0;
  std::vector<Descriptor> descriptors; ///< used slots, in slot order

  /// The primary system partition (FS, PrimSys), or nullptr.
  [[nodiscard]] const Descriptor* primary_partition() const;
  /// The descriptor with this ID, or nullptr.
  [[nodiscard]] const Descriptor* find(std::uint32_t object_id) const;
};

/// Reads and validates a SIF header and descriptor table (hostile input: magic and version, table
/// geometry, every object's offset and size checked against the file size, no overlaps, at most one
/// primary partition). Errors are invalid_input and name the file.
Result<Image> read_image(const std::filesystem::path& file);

/// "amd64" -> "02" (sif pkg/sif/arch.go); nullopt for an architecture SIF has no code for.
std::optional<std::string> arch_code(std::string_view go_arch);
/// "02" -> "amd64"; "" for "00" or an unknown code.
std::string arch_name(std::string_view code);
/// "Def.FILE", "JSON.Generic", "FS", ... (siftool's names).
std::string_view data_type_name(DataType type);

/// A 16-byte UUID (RFC 4122 layout, version 5 and variant bits set) derived from `seed`: the same
/// content always gets the same ID.
std::array<std::uint8_t, 16> derive_uuid(std::string_view seed);
/// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string uuid_string(const std::array<std::uint8_t, 16>& id);

/// Writes a SIF into an open, empty file: objects are added in order, then finish() writes the
/// header and descriptor table. Every object is in group 1; every time field is `time`; the UUID is
/// derived from the descriptors and each object's content digest, so equal inputs give equal bytes.
class Writer {
public:
  /// `fd` must be open for writing; `what` names the file in errors.
  Writer(int fd, std::int64_t time, std::string what);

  /// Appends a small object (unaligned, as sif v2.8 does) and returns its ID.
  Result<std::uint32_t> add_object(DataType type, std::string_view name, std::string_view data,
                                   std::uint32_t linked_id = 0);
  /// Where the next partition starts (the current end rounded up to 4096 bytes).
  [[nodiscard]] std::int64_t next_partition_offset() const;
  /// Records a partition whose `size` bytes the caller already wrote at next_partition_offset();
  /// `content` is their sha256 (it feeds the UUID). A PrimSys partition sets the header's arch.
  Result<std::uint32_t> add_partition(std::int64_t size, const Digest& content, FsType fs, PartType part,
                                      std::string_view arch, std::string_view name = {});
  /// Writes the header and the descriptor table. Returns the file's total size.
  Result<std::int64_t> finish();
  /// The UUID finish() wrote.
  [[nodiscard]] const std::array<std::uint8_t, 16>& id() const { return m_id; }

private:
  Result<std::uint32_t> add_descriptor(Descriptor d, const Digest& content);
  int m_fd;
  std::int64_t m_time;
  std::string m_what;
  std::int64_t m_end; ///< end of the data written so far
  std::vector<Descriptor> m_descriptors;
  std::vector<Digest> m_contents;
  std::string m_arch;
  std::array<std::uint8_t, 16> m_id{};
};

} // namespace lockstep::sif
