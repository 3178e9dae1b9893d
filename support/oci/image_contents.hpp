#pragma once
// What an image holds: its final filesystem view, read without unpacking it to disk. An OCI image's
// layers are streamed and applied in memory with OCI semantics (whiteouts, opaque directories,
// parents resolved through symbolic links inside the root, hard links); a root directory is walked
// in place. runner/audit/image_contents.hpp reads every form of IMAGE (a SIF too) with these.
//
// What is kept per path is small: the type, the size, a symbolic link's target, the MD5 and SHA-256
// of every regular file (hashed on all cores while the layers stream), and the text of the few
// metadata files verify, diff and the builder read (the dpkg status, diversions and md5sums, and
// each .dist-info's METADATA and RECORD). Everything is hostile input: names, sizes, entry counts,
// link hops and the metadata bytes kept are bounded, and a refusal names the image, layer and
// member. docs/verify-diff.md.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/image_source.hpp"

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::oci {

/// One path of an image's final filesystem.
struct ImageEntry {
  enum class Type { file, directory, symlink, other };
  Type type = Type::other;
  std::uint64_t size = 0;                ///< regular files: the data's byte count
  std::string link_target;               ///< symbolic links: the target as stored
  std::array<std::uint8_t, 16> md5{};    ///< regular files, when digests were computed
  std::array<std::uint8_t, 32> sha256{}; ///< regular files, when has_sha256
  bool has_sha256 = false;               ///< see wants_sha256 and ContentsOptions::sha256_paths
  /// The file's bytes, kept only for the metadata files (see is_metadata_path), else null.
  std::shared_ptr<const std::string> text;
  std::size_t hash_slot = SIZE_MAX; ///< internal: where the digests arrive while hashing runs
};

/// Lowercase hex of a digest's bytes.
std::string hex_of(const std::uint8_t* bytes, std::size_t size);

/// True for the image paths whose text is kept: var/lib/dpkg/{status,diversions,arch,statoverride},
/// var/lib/dpkg/info/*.{md5sums,list}, var/lib/dpkg/triggers/*, etc/passwd, etc/group, etc/os-release,
/// usr/lib/os-release, usr/share/doc/NAME/copyright, etc/apt/sources.list
/// and sources.list.d/*.{list,sources}, METADATA, RECORD and INSTALLER directly inside a
/// `*.dist-info` directory, `*.json` directly inside a `conda-meta` directory, and a CPython's
/// `include/python3.N/patchlevel.h` (its full version). `path` is relative to the image root, normalised
/// ("var/lib/dpkg/status").
bool is_metadata_path(std::string_view path);

/// True for the paths a wheel installs in practice, whose SHA-256 a RECORD row may give: a path
/// under a `*-packages` directory, or a `bin`, `sbin` or `include` directory. Every regular file
/// gets an MD5 (dpkg's records); only these also get a SHA-256 (SHA-256 for all doubles the cost).
bool wants_sha256(std::string_view path);

/// Limits for reading hostile images.
struct ContentsOptions {
  bool digests = true; ///< hash every regular file (verify); diff only needs the metadata
  /// Files that get a SHA-256 besides those wants_sha256 names (verify's second read, for a RECORD
  /// naming a file elsewhere, e.g. a wheel's data files).
  const std::set<std::string>* sha256_paths = nullptr;
  bool sha256_all = false;              ///< a SHA-256 of every regular file (tests compare whole trees by it)
  std::uint64_t max_entries = 4U << 20; ///< paths in the final view (and members per layer)
  std::uint64_t max_layer_bytes = 1ULL << 40;    ///< uncompressed bytes of one layer
  std::uint64_t max_metadata_file = 64U << 20;   ///< one kept metadata file
  std::uint64_t max_metadata_total = 1ULL << 30; ///< all kept metadata together
  unsigned threads = 0;                          ///< hashing threads; 0: default_thread_count()
};

/// How resolve() treats a symbolic link in the last component.
enum class FollowLast { no, yes };

/// The final filesystem of one image, plus what its config says about it.
class ImageContents {
public:
  /// Every path (relative to the root, normalised, bytewise sorted; the root itself is not listed).
  [[nodiscard]] const std::map<std::string, ImageEntry>& entries() const { return m_entries; }
  /// Looks `path` up (absolute or relative; "/" and ".." resolve inside the root as the kernel's
  /// RESOLVE_IN_ROOT does), following symbolic links in the parents and, with FollowLast::yes, in
  /// the last component; at most 40 links. nullptr when nothing is there (or a parent is not a
  /// directory, or the links loop). `resolved` receives the final path when given.
  [[nodiscard]] const ImageEntry* resolve(std::string_view path, FollowLast follow,
                                          std::string* resolved = nullptr) const;
  /// The kept text of the metadata file at `path` (resolved as above, last link followed), or nullptr.
  [[nodiscard]] const std::string* text(std::string_view path) const;

  std::string what;             ///< the image as named by the user, for messages
  std::optional<Digest> digest; ///< manifest digest, or sha256 of a SIF file
  std::string lock_digest;      ///< dev.lockstep.lock.digest, "" when absent
  /// dev.lockstep.base.layers (0 when absent): after that many layers, what the base image had is
  /// kept below, for `verify --lock` over an image base.
  std::size_t base_layers = 0;
  std::optional<std::string> base_dpkg_status; ///< the dpkg status after the base's layers, if any
  std::set<std::string> base_dist_infos;       ///< the *.dist-info directories after the base's layers
  std::map<std::string, std::string> labels;   ///< the config's labels
  std::string architecture;                    ///< the config's (OCI) or the SIF's ("amd64"), "" unknown
  bool has_digests = false;                    ///< ContentsOptions::digests was set
  std::uint64_t layers = 0;                    ///< layers read (1 for a SIF or a directory)
  std::uint64_t bytes_hashed = 0;              ///< regular-file bytes hashed

  /// For the readers (image_contents.cpp) and tests: the map itself.
  std::map<std::string, ImageEntry>& mutable_entries() { return m_entries; }

private:
  std::map<std::string, ImageEntry> m_entries;
};

/// Reads the layers of an image already resolved from `source` into `contents` (applied over what
/// it holds; contents.what names the image in messages) and sets contents.layers. Every layer blob
/// is read once where it lies (the layout, the archive's member, the registry), its digest and size
/// checked while it streams; several layers are listed at once and applied in layer order. Malformed
/// or hostile content is invalid_input naming the image, layer and member.
Result<void> read_image_layers(ImageContents& contents, ImageSource& source, const OpenedImage& opened,
                               const ContentsOptions& options = {});

/// The final filesystem view and config of an image already resolved from `source`, named `what` in
/// messages: the manifest digest, the config's labels and architecture, the lock digest annotation
/// (k_annotation_lock_digest), and the layers as read_image_layers reads them.
Result<ImageContents> read_opened_image(ImageSource& source, const OpenedImage& opened, std::string what,
                                        const ContentsOptions& options = {});

/// Applies one uncompressed (or gzip/zstd) layer tar file over `contents` (for tests and the OCI
/// reader), with the layer model's semantics. `what` names the layer in errors.
Result<void> apply_layer_to_contents(ImageContents& contents, const std::filesystem::path& tar,
                                     const std::string& what, const ContentsOptions& options = {});

/// Adds the tree under the directory `root` to `contents` (for tests and the SIF and directory
/// readers): symbolic links are never followed, files are hashed when options.digests is set.
Result<void> add_directory_to_contents(ImageContents& contents, const std::filesystem::path& root,
                                       const ContentsOptions& options = {});

/// As add_directory_to_contents, naming the image `what` in messages. With `owned` (a private
/// extraction the caller may change), unreadable files and directories are made readable first.
Result<void> walk_directory_into(ImageContents& contents, const std::filesystem::path& root,
                                 const std::string& what, const ContentsOptions& options, bool owned);

} // namespace lockstep::oci
