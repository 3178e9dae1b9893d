#pragma once
// Builds small OCI layouts, OCI archives and docker-archives by hand for the image reader tests
// (no external tools): blobs and JSON are written with nlohmann + sha256_of, tars with libarchive.
#include "support/codec/digest.hpp"
#include "support/oci/oci.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace lockstep::test {

namespace image_fixture_detail {
inline void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out) {
    throw std::runtime_error("can't write " + p.string());
  }
}
} // namespace image_fixture_detail

/// How LayoutWriter::image builds an image.
struct ImageOptions {
  std::string os = "linux";
  std::string architecture = "amd64";
  std::string variant;
  std::string layer_media_type = std::string(oci::k_media_layer_tar);
  std::function<void(oci::json&)> edit_config;   ///< runs before the config is hashed
  std::function<void(oci::json&)> edit_manifest; ///< runs before the manifest is hashed
};

/// Writes an OCI image layout into a directory.
class LayoutWriter {
public:
  /// Creates `dir` with blobs/sha256 and (unless `marker` is false) an oci-layout file.
  explicit LayoutWriter(std::filesystem::path dir, bool marker = true) : m_dir(std::move(dir)) {
    std::filesystem::create_directories(m_dir / "blobs" / "sha256");
    if (marker) {
      image_fixture_detail::write_bytes(m_dir / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    }
  }

  [[nodiscard]] const std::filesystem::path& dir() const { return m_dir; }
  [[nodiscard]] std::filesystem::path blob_path(const Digest& d) const {
    return m_dir / "blobs" / d.algorithm() / d.hex();
  }

  /// Stores `bytes` as a blob and returns its descriptor.
  oci::Descriptor blob(const std::string& bytes, std::string_view media_type) const {
    oci::Descriptor d;
    d.media_type = std::string(media_type);
    d.digest = sha256_of(bytes);
    d.size = static_cast<std::int64_t>(bytes.size());
    image_fixture_detail::write_bytes(blob_path(d.digest), bytes);
    return d;
  }

  /// An image whose layers hold `layers` (diff_id = sha256 of each, as for uncompressed layers);
  /// returns the manifest descriptor.
  oci::Descriptor image(const std::vector<std::string>& layers, const ImageOptions& opts = {}) const {
    oci::json config = {{"architecture", opts.architecture},
                        {"os", opts.os},
                        {"created", "1970-01-01T00:00:00Z"},
                        {"config", {{"Env", {"PATH=/usr/bin"}}}},
                        {"rootfs", {{"type", "layers"}, {"diff_ids", oci::json::array()}}}};
    if (!opts.variant.empty()) {
      config["variant"] = opts.variant;
    }
    oci::json manifest = {
        {"schemaVersion", 2}, {"mediaType", oci::k_media_manifest}, {"layers", oci::json::array()}};
    for (const auto& l : layers) {
      config["rootfs"]["diff_ids"].push_back(sha256_of(l).str());
      manifest["layers"].push_back(blob(l, opts.layer_media_type).to_json());
    }
    if (opts.edit_config) {
      opts.edit_config(config);
    }
    manifest["config"] = blob(config.dump(), oci::k_media_config).to_json();
    if (opts.edit_manifest) {
      opts.edit_manifest(manifest);
    }
    oci::Descriptor d = blob(manifest.dump(), oci::k_media_manifest);
    d.platform = oci::Platform{opts.os, opts.architecture, opts.variant};
    return d;
  }

  /// Stores an image index listing `entries` as a blob (a multi-platform image).
  oci::Descriptor index_blob(const std::vector<oci::Descriptor>& entries) const {
    oci::Index idx;
    idx.media_type = std::string(oci::k_media_index);
    idx.manifests = entries;
    return blob(idx.serialize(), oci::k_media_index);
  }

  /// Writes index.json listing `entries`.
  void write_index(const std::vector<oci::Descriptor>& entries) const {
    oci::Index idx;
    idx.media_type = std::string(oci::k_media_index);
    idx.manifests = entries;
    image_fixture_detail::write_bytes(m_dir / "index.json", idx.serialize());
  }

  /// Writes index.json verbatim.
  void write_index_text(const std::string& text) const {
    image_fixture_detail::write_bytes(m_dir / "index.json", text);
  }

  /// `d` annotated with the tag `org.opencontainers.image.ref.name`, platform dropped.
  static oci::Descriptor tagged(oci::Descriptor d, const std::string& tag) {
    d.annotations[std::string(oci::k_annotation_ref_name)] = tag;
    d.platform.reset();
    return d;
  }

private:
  std::filesystem::path m_dir;
};

/// One member of a hand-made tar.
struct TarEntry {
  enum class Type { file, directory, symlink, hardlink };
  TarEntry() = default;
  TarEntry(std::string name_, std::string data_, Type type_ = Type::file, std::string link_ = {})
      : name(std::move(name_)), data(std::move(data_)), type(type_), link(std::move(link_)) {}
  std::string name;
  std::string data;
  Type type = Type::file;
  std::string link; ///< symlink / hardlink target
};

/// Every file under `dir` as tar entries named relative to it (sorted; directories included).
inline std::vector<TarEntry> tar_entries_of(const std::filesystem::path& dir) {
  std::vector<TarEntry> out;
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    TarEntry t;
    t.name = std::filesystem::relative(p, dir).string();
    if (std::filesystem::is_directory(p)) {
      t.type = TarEntry::Type::directory;
    } else {
      std::ifstream in(p, std::ios::binary);
      t.data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    out.push_back(std::move(t));
  }
  return out;
}

/// Writes `entries` as a pax tar (gzip-compressed when asked); names are written verbatim.
inline void write_tar(const std::filesystem::path& out, const std::vector<TarEntry>& entries,
                      bool gzip = false) {
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (gzip) {
    archive_write_add_filter_gzip(a);
  }
  if (archive_write_open_filename(a, out.c_str()) != ARCHIVE_OK) {
    throw std::runtime_error(std::string("can't write tar: ") + archive_error_string(a));
  }
  for (const auto& e : entries) {
    struct archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    archive_entry_set_mtime(entry, 0, 0);
    switch (e.type) {
    case TarEntry::Type::file:
      archive_entry_set_filetype(entry, AE_IFREG);
      archive_entry_set_perm(entry, 0644);
      archive_entry_set_size(entry, static_cast<la_int64_t>(e.data.size()));
      break;
    case TarEntry::Type::directory:
      archive_entry_set_filetype(entry, AE_IFDIR);
      archive_entry_set_perm(entry, 0755);
      break;
    case TarEntry::Type::symlink:
      archive_entry_set_filetype(entry, AE_IFLNK);
      archive_entry_set_perm(entry, 0777);
      archive_entry_set_symlink(entry, e.link.c_str());
      break;
    case TarEntry::Type::hardlink:
      archive_entry_set_filetype(entry, AE_IFREG);
      archive_entry_set_perm(entry, 0644);
      archive_entry_set_hardlink(entry, e.link.c_str());
      archive_entry_set_size(entry, 0);
      break;
    }
    if (archive_write_header(a, entry) != ARCHIVE_OK) {
      throw std::runtime_error(std::string("can't write tar header: ") + archive_error_string(a));
    }
    if (e.type == TarEntry::Type::file && !e.data.empty()) {
      archive_write_data(a, e.data.data(), e.data.size());
    }
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
}

} // namespace lockstep::test
