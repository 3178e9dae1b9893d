#pragma once
// Conda packages made for the tests of support/conda/package and link: a tree with info/index.json,
// info/paths.json (computed from the files, or edited by the test) and info/link.json, packed by
// Debian's cph (conda-package-handling), the peer that judges our reading; and hand-made tars and
// zips (libarchive's writer, a tiny stored-zip writer) for the hostile members cph can't make.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::test {

/// True when cph is on the PATH; otherwise prints why the calling test is skipped.
bool have_cph();

/// A package tree on disk, packed with cph.
class CondaTree {
public:
  /// A tree for NAME-VERSION-BUILD under `root` (created), with index.json fields `index_extra`.
  CondaTree(std::filesystem::path root, std::string name, std::string version, std::string build,
            nlohmann::json index_extra = nlohmann::json::object());

  /// A regular file; a non-empty `placeholder` lists it with that placeholder and `file_mode`.
  void file(const std::string& path, const std::string& data, unsigned mode = 0644,
            const std::string& placeholder = "", const std::string& file_mode = "text", bool no_link = false);
  void symlink(const std::string& path, const std::string& target);
  void directory(const std::string& path);
  /// Sets a file's mtime (seconds).
  void set_mtime(const std::string& path, std::int64_t mtime);
  /// Writes info/link.json with these noarch.entry_points under noarch type `type`.
  void link_json(const std::string& type, const std::vector<std::string>& entry_points);
  /// Writes an arbitrary file under info/ (legacy files, a broken JSON...).
  void info_file(const std::string& name, const std::string& data);
  /// paths.json as it will be written; tests edit it to make hostile packages.
  nlohmann::json& paths() { return m_paths; }
  /// Leaves info/paths.json out (a legacy package).
  void without_paths_json() { m_write_paths = false; }

  /// Writes info/index.json and info/paths.json and packs the tree with cph into `out_dir`;
  /// `ext` is ".conda" or ".tar.bz2". Returns the archive's path.
  std::filesystem::path pack(const std::filesystem::path& out_dir, const std::string& ext);
  /// The archive's file name for `ext`.
  [[nodiscard]] std::string filename(const std::string& ext) const { return m_stem + ext; }
  [[nodiscard]] const std::filesystem::path& root() const { return m_root; }

private:
  std::filesystem::path m_root;
  std::string m_stem;
  nlohmann::json m_index;
  nlohmann::json m_paths;
  bool m_write_paths = true;
};

/// One member of a hand-made tar.
struct TarMember {
  enum class Type { file, dir, symlink, hardlink, fifo, chardev };
  std::string name;
  Type type = Type::file;
  std::string data;   ///< file bytes
  std::string target; ///< symlink or hard link target
  unsigned mode = 0644;
};

/// A regular file member.
TarMember tar_file(std::string name, std::string data, unsigned mode = 0644);
/// A symlink member.
TarMember tar_symlink(std::string name, std::string target);
/// A member of another type (directory, hard link to `target`, FIFO, device).
TarMember tar_other(std::string name, TarMember::Type type, std::string target = "");

/// A tar of `members` compressed with "zstd" or "bzip2" (libarchive's writer, pax format).
std::string tar_bytes(const std::vector<TarMember>& members, const std::string& filter);

/// One member of a hand-made zip.
struct ZipEntry {
  ZipEntry(std::string n, std::string d, std::uint16_t m = 0)
      : name(std::move(n)), data(std::move(d)), method(m) {}
  std::string name;
  std::string data;
  std::uint16_t method = 0; ///< 0 stored; 8 writes the data deflated with zlib
};

/// A zip of `entries` (no data descriptors); with `zip64`, every size and offset goes through the
/// zip64 extra fields and end records, as writers that force zip64 (cph) write them.
std::string zip_bytes(const std::vector<ZipEntry>& entries, bool zip64 = false);

/// A .conda of these tar members: metadata.json, pkg-STEM.tar.zst (members outside info/) and
/// info-STEM.tar.zst (info/ members), every member stored.
std::string conda_bytes(const std::string& stem, const std::vector<TarMember>& members);

/// info/index.json's text for NAME-VERSION-BUILD.
std::string index_json_text(const std::string& name, const std::string& version, const std::string& build,
                            const nlohmann::json& extra = nlohmann::json::object());

} // namespace lockstep::test
