#pragma once
// Mirrors of content-addressed files (docs/vendor.md): places that may hold a file a lock names, by
// its sha256 — a vendor directory (`lockstep vendor --to DIR`: DIR/blobs/sha256/<hex>) or a
// registry repository (support/registry/vendor_mirror.hpp). Downloads (support/http's fetch_all)
// and base-image pulls ask the mirrors first, in order, and upstream only for what none holds;
// offline, never upstream. A mirror file whose bytes do not match its sha256 is refused and nothing
// is stored.
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/store/blob_store.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lockstep {

/// One mirror.
class BlobMirror {
public:
  virtual ~BlobMirror() = default;
  BlobMirror() = default;
  BlobMirror(const BlobMirror&) = delete;
  BlobMirror& operator=(const BlobMirror&) = delete;

  /// "dir:/srv/vendor", "docker://reg/team/vendor": names the mirror in messages.
  [[nodiscard]] virtual std::string name() const = 0;
  /// Copies the blob `sha256` into `store` when the mirror has it: true; false when it has not. A
  /// file that does not match `sha256` (or `size`) is invalid_input, and nothing is stored.
  virtual Result<bool> fetch(const Digest& sha256, std::optional<std::uint64_t> size,
                             const BlobStore& store) const = 0;
};

/// A vendor directory: DIR/blobs/sha256/<hex>.
class DirMirror final : public BlobMirror {
public:
  explicit DirMirror(std::filesystem::path dir) : m_dir(std::move(dir)) {}
  [[nodiscard]] std::string name() const override { return "dir:" + m_dir.string(); }
  Result<bool> fetch(const Digest& sha256, std::optional<std::uint64_t> size,
                     const BlobStore& store) const override;

private:
  std::filesystem::path m_dir;
};

/// The mirrors of this process (set by the CLI from --mirror, the spec's `mirrors` and
/// LOCKSTEP_MIRRORS), and whether upstream may be asked at all.
struct MirrorSet {
  std::vector<std::shared_ptr<const BlobMirror>> mirrors;
  bool offline = false; ///< --offline: only the store and the mirrors

  /// Asks each mirror in order for `sha256`: true when one put it into `store`.
  Result<bool> fetch(const Digest& sha256, std::optional<std::uint64_t> size, const BlobStore& store) const;
  /// The mirrors' names, for messages ("dir:/srv/v, docker://reg/v"; "no mirror").
  [[nodiscard]] std::string names() const;
};

/// The process-wide MirrorSet (empty and online unless the CLI set it).
MirrorSet& default_mirrors();

} // namespace lockstep
