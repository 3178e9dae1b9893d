#include "support/oci/image_writer.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/oci/tar_writer.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <system_error>

namespace lockstep::oci {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view k_oci_layout = R"({"imageLayoutVersion":"1.0.0"})";

std::string index_json(const StoredImage& image, bool docker) {
  Index idx;
  idx.media_type = std::string(k_media_index);
  Descriptor d = image.manifest;
  if (!image.ref_name.empty()) {
    d.annotations[std::string(k_annotation_ref_name)] = image.ref_name;
  }
  if (docker && !image.repo_tag.empty()) {
    d.annotations["io.containerd.image.name"] = normalize_docker_reference(image.repo_tag);
  }
  idx.manifests.push_back(std::move(d));
  return idx.serialize();
}

json docker_manifest_item(const StoredImage& image, const json& repo_tags) {
  json item = json::object();
  item["Config"] = "blobs/sha256/" + image.blobs.front().digest.hex();
  item["RepoTags"] = repo_tags;
  json layers = json::array();
  for (std::size_t i = 1; i < image.blobs.size(); ++i) {
    layers.push_back("blobs/sha256/" + image.blobs[i].digest.hex());
  }
  item["Layers"] = layers;
  return item;
}

// One entry per image. Several platforms: each is tagged NAME:TAG-ARCH, and the first platform's
// also NAME:TAG (`docker load` keeps one image per tag).
std::string docker_manifest_json(const StoredImage& image) {
  if (image.platform_images.empty()) {
    return json::array({docker_manifest_item(image, image.repo_tag.empty() ? json::array()
                                                                           : json::array({image.repo_tag}))})
        .dump();
  }
  json items = json::array();
  for (std::size_t i = 0; i < image.platform_images.size(); ++i) {
    const StoredImage& one = image.platform_images[i];
    json tags = json::array();
    if (!image.repo_tag.empty()) {
      if (i == 0) {
        tags.push_back(image.repo_tag);
      }
      if (one.manifest.platform) {
        tags.push_back(image.repo_tag + "-" + one.manifest.platform->architecture);
      }
    }
    items.push_back(docker_manifest_item(one, tags));
  }
  return items.dump();
}

// Every distinct blob of the image, sorted by digest (manifest included).
std::vector<Descriptor> all_blobs(const StoredImage& image) {
  std::map<std::string, Descriptor> by_digest;
  by_digest.emplace(image.manifest.digest.str(), image.manifest);
  for (const auto& b : image.blobs) {
    by_digest.emplace(b.digest.str(), b);
  }
  std::vector<Descriptor> out;
  out.reserve(by_digest.size());
  for (auto& [k, d] : by_digest) {
    out.push_back(d);
  }
  return out;
}

// Refuses to replace something that is not an OCI layout.
Result<void> check_replaceable_layout(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    return {};
  }
  if (!S_ISDIR(st.st_mode)) {
    return io_error("refusing to write the OCI layout to {}: it exists and is not a directory; remove it or "
                    "choose another path",
                    dir.string());
  }
  std::error_code ec;
  bool empty = fs::is_empty(dir, ec);
  if (!empty && !fs::exists(dir / "oci-layout", ec)) {
    return io_error(
        "refusing to replace {}: it is not an OCI image layout (no oci-layout file) and not empty; "
        "remove it or choose another path",
        dir.string());
  }
  return {};
}

Result<void> check_replaceable_file(const fs::path& file) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return io_error("refusing to write {}: it exists and is not a regular file", file.string());
  }
  if (!file.has_parent_path() || file.parent_path().empty()) {
    return {};
  }
  return make_dirs(file.parent_path());
}

class FileSink final : public ByteSink {
public:
  explicit FileSink(AtomicFile& f) : m_file(f) {}
  void write(const void* data, std::size_t size) override { unwrap(m_file.write(data, size)); }

private:
  AtomicFile& m_file;
};

void add_json(TarWriter& tar, const std::string& path, std::string_view data, std::int64_t epoch) {
  TarEntry e;
  e.path = path;
  e.mode = 0644;
  e.mtime = epoch;
  e.size = static_cast<std::int64_t>(data.size());
  tar.add(e);
  tar.write_data(data.data(), data.size());
}

void add_dir(TarWriter& tar, const std::string& path, std::int64_t epoch) {
  TarEntry e;
  e.path = path;
  e.type = TarEntry::Type::dir;
  e.mode = 0755;
  e.mtime = epoch;
  tar.add(e);
}

// Streams a store blob into the archive, verifying its digest on the way.
void add_blob(TarWriter& tar, const BlobStore& store, const Descriptor& d, std::int64_t epoch) {
  fs::path src = store.blob_path(d.digest);
  UniqueFd fd = unwrap(open_file(src, O_RDONLY | O_NOFOLLOW));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_size != d.size) {
    throw Failure(io_error("blob {} in the store has the wrong size; remove {} and build again",
                           d.digest.str(), src.string()));
  }
  TarEntry e;
  e.path = "blobs/" + d.digest.algorithm() + "/" + d.digest.hex();
  e.mode = 0644;
  e.mtime = epoch;
  e.size = d.size;
  tar.add(e);
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (;;) {
    throw_if_interrupted();
    std::size_t n = unwrap(read_some(fd.get(), buf.data(), buf.size(), src.string()));
    if (n == 0) {
      break;
    }
    h.update(buf.data(), n);
    tar.write_data(buf.data(), n);
  }
  if (h.finish() != d.digest) {
    throw Failure(
        io_error("blob {} in the store is corrupt; remove {} and build again", d.digest.str(), src.string()));
  }
}

Result<void> write_archive(const BlobStore& store, const StoredImage& image, const fs::path& file,
                           bool docker) {
  LS_TRY(check_replaceable_file(file));
  LS_TRY_ASSIGN(AtomicFile out, AtomicFile::create(file, 0644));
  try {
    FileSink sink(out);
    TarWriter tar(sink);
    add_dir(tar, "blobs", image.epoch);
    add_dir(tar, "blobs/sha256", image.epoch);
    for (const auto& d : all_blobs(image)) {
      add_blob(tar, store, d, image.epoch);
    }
    add_json(tar, "index.json", index_json(image, docker), image.epoch);
    if (docker) {
      add_json(tar, "manifest.json", docker_manifest_json(image), image.epoch);
    }
    add_json(tar, "oci-layout", k_oci_layout, image.epoch);
    tar.finish();
  } catch (const Failure& f) {
    return f.error();
  }
  return out.commit();
}

// True when `dir` already holds exactly this image: the same index.json bytes, the layout marker,
// and every blob a hard link to the store's copy (same inode, so the same verified bytes).
bool layout_is_current(const BlobStore& store, const StoredImage& image, const fs::path& dir,
                       const std::string& index) {
  auto current = read_file(dir / "index.json", 1 << 20);
  if (!current || *current != index) {
    return false;
  }
  auto marker = read_file(dir / "oci-layout", 4096);
  if (!marker || *marker != k_oci_layout) {
    return false;
  }
  for (const auto& d : all_blobs(image)) {
    struct stat in_store {};
    struct stat in_layout {};
    if (::stat(store.blob_path(d.digest).c_str(), &in_store) != 0 ||
        ::lstat((dir / "blobs" / d.digest.algorithm() / d.digest.hex()).c_str(), &in_layout) != 0 ||
        in_store.st_dev != in_layout.st_dev || in_store.st_ino != in_layout.st_ino ||
        in_layout.st_size != d.size) {
      return false;
    }
  }
  return true;
}

} // namespace

Result<void> write_oci_layout(const BlobStore& store, const StoredImage& image, const fs::path& dir) {
  LS_TRY(check_replaceable_layout(dir));
  std::string index = index_json(image, false);
  if (layout_is_current(store, image, dir, index)) {
    log::debug("{} already holds this image; left as it is", dir.string());
    return {};
  }
  fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  LS_TRY(make_dirs(parent));
  LS_TRY_ASSIGN(TempDir staged, TempDir::create(parent, ".lockstep-tmp-" + dir.filename().string() + "-"));
  const fs::path& root = staged.path();
  if (::chmod(root.c_str(), 0755) != 0) {
    return errno_error("can't chmod " + root.string(), errno);
  }
  fs::path blobs = root / "blobs" / "sha256";
  LS_TRY(make_dirs(blobs));
  for (const auto& d : all_blobs(image)) {
    LS_TRY(check_interrupted());
    LS_TRY(store.export_to(d.digest, d.size, blobs / d.digest.hex()));
  }
  LS_TRY(write_file_atomic(root / "oci-layout", k_oci_layout));
  LS_TRY(write_file_atomic(root / "index.json", index));
  LS_TRY(fsync_dir(blobs));
  LS_TRY(fsync_dir(root / "blobs"));
  LS_TRY(replace_directory(root, dir));
  staged.release();
  return {};
}

Result<void> write_oci_archive(const BlobStore& store, const StoredImage& image, const fs::path& file) {
  return write_archive(store, image, file, false);
}

Result<void> write_docker_archive(const BlobStore& store, const StoredImage& image, const fs::path& file) {
  return write_archive(store, image, file, true);
}

std::string normalize_docker_reference(const std::string& repo_tag) {
  if (registry_host_length(repo_tag) > 0) {
    return repo_tag;
  }
  if (repo_tag.find('/') == std::string::npos) {
    return "docker.io/library/" + repo_tag;
  }
  return "docker.io/" + repo_tag;
}

} // namespace lockstep::oci
