// Reading an image's final filesystem view for verify and diff: OCI images through
// support/oci/image_contents, a SIF's squashfs extracted privately and walked, or a root directory
// walked.
#include "runner/audit/image_contents.hpp"

#include "envspec/settings/settings.hpp"
#include "runner/launch/preflight.hpp"
#include "runner/runtime/sif_mount.hpp"
#include "runner/runtime/unpack.hpp"
#include "support/oci/image_source.hpp"
#include "support/oci/oci.hpp"
#include "support/oci/sif.hpp"
#include "support/oci/squashfs.hpp"
#include "support/registry/oras.hpp"
#include "support/registry/pull.hpp"
#include "support/store/blob_store.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t k_max_sif_labels = 1 << 20;

// Reads `bytes.size()` bytes at `offset` (a short read at the end of the file gives fewer).
Result<std::size_t> read_at(int fd, std::string& bytes, std::int64_t offset, const std::string& what) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n =
        ::pread(fd, bytes.data() + done, bytes.size() - done, offset + static_cast<std::int64_t>(done));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return errno_error("can't read " + what, errno);
    }
    if (n == 0) {
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  return done;
}

// A private directory under the lockstep cache's tmp/ (swept after a day if a kill leaves it).
Result<TempDir> private_dir(const std::string& prefix) {
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  return TempDir::create(store.root() / "tmp", prefix);
}

Result<ImageContents> read_oci(const ImageArg& image, const ContentsOptions& options) {
  LS_TRY_ASSIGN(std::unique_ptr<oci::ImageSource> source,
                registry::open_image(image.ref, settings::store_root()));
  oci::SelectOptions select;
  select.platform = image.platform;
  LS_TRY_ASSIGN(oci::OpenedImage opened, source->resolve(select));
  return oci::read_opened_image(*source, opened, image.ref.str(), options);
}

Result<void> read_sif(ImageContents& contents, const ImageArg& image, const ContentsOptions& options) {
  LS_TRY_ASSIGN(sif::Image sif_image, sif::read_image(image.path));
  const sif::Descriptor* part = sif_image.primary_partition();
  if (part == nullptr) {
    return invalid_input("{}: the SIF has no primary system partition", contents.what);
  }
  if (part->fs_type != sif::FsType::squashfs) {
    return invalid_input("{}: the primary partition is not squashfs; lockstep reads squashfs only",
                         contents.what);
  }
  contents.architecture = sif_image.arch;
  LS_TRY_ASSIGN(const std::string config_bytes, read_sif_oci_config(image.path));
  if (!config_bytes.empty()) {
    LS_TRY_ASSIGN(nlohmann::json config, oci::parse_json(config_bytes, contents.what + " oci-config.json"));
    LS_TRY_ASSIGN(contents.labels, oci::config_labels(config, contents.what));
  }
  if (auto it = contents.labels.find(std::string(k_lock_digest_key)); it != contents.labels.end()) {
    contents.lock_digest = it->second;
  }
  // The SIF's labels object (JSON.Generic "labels", Apptainer's `inspect --labels`) carries the
  // manifest annotations a build copies there; the lock digest is taken from it when present.
  for (const sif::Descriptor& d : sif_image.descriptors) {
    if (d.type != sif::DataType::labels || d.size <= 0 || d.size > k_max_sif_labels) {
      continue;
    }
    LS_TRY_ASSIGN(UniqueFd fd, open_file(image.path, O_RDONLY));
    std::string bytes(static_cast<std::size_t>(d.size), '\0');
    LS_TRY_ASSIGN(std::size_t n, read_at(fd.get(), bytes, d.offset, contents.what));
    auto labels = oci::parse_json(bytes.substr(0, n), contents.what + " labels");
    if (labels && labels->is_object() && labels->contains(k_lock_digest_key) &&
        (*labels)[std::string(k_lock_digest_key)].is_string() && contents.lock_digest.empty()) {
      contents.lock_digest = (*labels)[std::string(k_lock_digest_key)].get<std::string>();
    }
  }
  LS_TRY_ASSIGN(contents.digest, image_digest(image));
  LS_TRY_ASSIGN(TempDir tmp, private_dir("verify-sif-"));
  const fs::path rootfs = tmp.path() / "rootfs";
  if (::mkdir(rootfs.c_str(), 0700) != 0) {
    return errno_error("can't create " + rootfs.string(), errno);
  }
  auto read = [&]() -> Result<void> {
    LS_TRY_ASSIGN(UniqueFd dest, open_file(rootfs, O_RDONLY | O_DIRECTORY));
    LS_TRY(extract_squashfs(image.path, part->offset, dest.get(), false));
    // The extracted tree has the image's modes: unreadable entries are made readable (owned).
    return oci::walk_directory_into(contents, rootfs, contents.what, options, true);
  }();
  LS_TRY(remove_tree(rootfs));
  LS_TRY(std::move(read));
  contents.layers = 1;
  return {};
}

} // namespace

Result<ImageContents> read_image_contents(const ImageArg& image, const ContentsOptions& options) {
  ImageContents contents;
  switch (image.kind) {
  case ImageArg::Kind::oci: {
    LS_TRY_ASSIGN(contents, read_oci(image, options));
    break;
  }
  case ImageArg::Kind::sif: {
    ImageArg local = image;
    if (image.ref.is_remote()) {
      LS_TRY_ASSIGN(local.path, registry::pull_sif(image.ref.remote, settings::store_root()));
    }
    contents.what = image.ref.is_remote() ? image.ref.str() : "sif:" + image.path.string();
    LS_TRY(read_sif(contents, local, options));
    break;
  }
  case ImageArg::Kind::directory:
    contents.what = "dir:" + image.path.string();
    LS_TRY(oci::walk_directory_into(contents, image.path, contents.what, options, false));
    contents.layers = 1;
    break;
  }
  if (const ImageEntry* e = contents.resolve("var/lib/dpkg/arch", FollowLast::yes);
      contents.architecture.empty() && e != nullptr && e->text) {
    contents.architecture = e->text->substr(0, e->text->find('\n'));
  }
  return contents;
}

} // namespace lockstep::runner