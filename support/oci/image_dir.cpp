// Reading an OCI image layout directory (image-spec image-layout.md).
//
// Blob paths are built only from validated Digests. Every file inside the layout is opened with
// O_NOFOLLOW (a symlinked blob could point anywhere on the host) and must be a regular file of the
// size its descriptor states; its bytes are hashed while they are read.
#include "support/base/interrupt.hpp"
#include "support/oci/image_internal.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace lockstep::oci::detail {

namespace {

namespace fs = std::filesystem;

class OciDirSource final : public ImageSource {
public:
  OciDirSource(ImageRef ref, SourceNames names, Index index)
      : m_ref(std::move(ref)), m_names(std::move(names)), m_index(std::move(index)) {}

  Result<OpenedImage> resolve(const SelectOptions& options) override {
    return resolve_in_layout(*this, m_index, options, m_names, TagMatch::ref_name);
  }

  Result<std::string> read_blob(const Descriptor& desc, std::uint64_t max_size) override {
    LS_TRY(check_readable_blob(desc, max_size, m_names.location));
    LS_TRY_ASSIGN(UniqueFd fd, open_blob_file(desc));
    std::string data(static_cast<std::size_t>(desc.size), '\0');
    LS_TRY_ASSIGN(std::size_t got, read_full(fd.get(), data.data(), data.size(), blob_what(desc)));
    if (got != data.size()) {
      return invalid_input("blob {} in {} was truncated while reading", desc.digest.str(), m_names.location);
    }
    Digest actual = sha256_of(data);
    if (actual != desc.digest) {
      return blob_digest_mismatch(desc.digest, actual, m_names.location, "layout");
    }
    return data;
  }

  Result<void> fetch_blob(const Descriptor& desc, const BlobStore& store) override {
    if (store.has(desc.digest, desc.size)) {
      return {};
    }
    LS_TRY(check_readable_blob(desc, UINT64_MAX, m_names.location));
    LS_TRY_ASSIGN(UniqueFd fd, open_blob_file(desc));
    auto info = store.put_file(fd.get(), desc.digest, desc.size, blob_what(desc));
    if (!info) {
      return std::move(info).error().with_context(
          fmt::format("blob {} in {} (the layout is corrupt)", desc.digest.str(), m_names.location));
    }
    return {};
  }

  Result<std::unique_ptr<BlobReader>> open_blob(const Descriptor& desc) override {
    LS_TRY(check_readable_blob(desc, UINT64_MAX, m_names.location));
    LS_TRY_ASSIGN(UniqueFd fd, open_blob_file(desc));
    return file_blob_reader(std::move(fd), blob_what(desc));
  }

private:
  // "blob sha256:... in oci:DIR", for read errors.
  [[nodiscard]] std::string blob_what(const Descriptor& desc) const {
    return fmt::format("blob {} in {}", desc.digest.str(), m_names.location);
  }

  // Opens blobs/<alg>/<hex> without following a symlink; checks type and size.
  Result<UniqueFd> open_blob_file(const Descriptor& desc) {
    fs::path p = m_ref.path / "blobs" / desc.digest.algorithm() / desc.digest.hex();
    int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == ENOENT) {
        return invalid_input("blob {} is missing from {} (no file {})", desc.digest.str(), m_names.location,
                             p.string());
      }
      if (err == ELOOP) {
        return invalid_input("blob {} in {} is a symbolic link; refusing it", desc.digest.str(),
                             m_names.location);
      }
      return errno_error(fmt::format("can't open blob {} in {}", desc.digest.str(), m_names.location), err);
    }
    UniqueFd owned(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      return errno_error("can't stat " + p.string(), errno);
    }
    if (!S_ISREG(st.st_mode)) {
      return invalid_input("blob {} in {} is not a regular file", desc.digest.str(), m_names.location);
    }
    if (st.st_size != desc.size) {
      return invalid_input("blob {} in {} has {} bytes, expected {}; the layout is corrupt",
                           desc.digest.str(), m_names.location, st.st_size, desc.size);
    }
    return owned;
  }

  ImageRef m_ref;
  SourceNames m_names;
  Index m_index;
};

// Reads a small top-level file of the layout (oci-layout, index.json) without following links.
Result<std::string> read_layout_file(const fs::path& dir, const char* name, std::uint64_t max_size,
                                     const std::string& location) {
  fs::path p = dir / name;
  int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) {
      return invalid_input("{}: {} is missing", location, name);
    }
    if (err == ELOOP) {
      return invalid_input("{}: {} is a symbolic link; refusing it", location, name);
    }
    return errno_error("can't open " + p.string(), err);
  }
  UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return errno_error("can't stat " + p.string(), errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_input("{}: {} is not a regular file", location, name);
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_size) {
    return invalid_input("{}: {} is {} bytes, more than the limit of {} bytes", location, name, st.st_size,
                         max_size);
  }
  std::string data(static_cast<std::size_t>(st.st_size), '\0');
  LS_TRY_ASSIGN(std::size_t got, read_full(fd, data.data(), data.size(), p.string()));
  data.resize(got);
  return data;
}

} // namespace

Result<void> check_layout_marker(std::string_view bytes, const std::string& where) {
  auto j = parse_json(bytes, where);
  if (!j || !j->is_object()) {
    return invalid_input("{}: not a JSON object", where);
  }
  auto v = j->find("imageLayoutVersion");
  if (v == j->end() || !v->is_string()) {
    return invalid_input("{}: no 'imageLayoutVersion'", where);
  }
  if (*v != "1.0.0") {
    return invalid_input("{}: unsupported imageLayoutVersion '{}' (expected 1.0.0)", where,
                         v->get<std::string>());
  }
  return {};
}

Result<std::unique_ptr<ImageSource>> open_oci_dir(const ImageRef& ref) {
  SourceNames names;
  names.location = "oci:" + ref.path.string();
  names.ref = ref.str();
  names.tag_hint = names.location + ":TAG";
  names.ref_tag = ref.tag;
  struct stat st {};
  if (::stat(ref.path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return invalid_input("{}: {} does not exist", names.ref, ref.path.string());
    }
    return errno_error("can't open " + ref.path.string(), errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    return invalid_input(
        "{}: {} is not a directory (for an archive, use oci-archive:{} or docker-archive:{})", names.ref,
        ref.path.string(), ref.path.string(), ref.path.string());
  }
  struct stat marker {};
  if (::lstat((ref.path / "oci-layout").c_str(), &marker) != 0 && errno == ENOENT) {
    return invalid_input("{} is not an OCI image layout (no oci-layout file)", ref.path.string());
  }
  LS_TRY_ASSIGN(std::string layout,
                read_layout_file(ref.path, "oci-layout", std::uint64_t{64} * 1024, names.location));
  LS_TRY(check_layout_marker(layout, names.location + ": oci-layout"));
  LS_TRY_ASSIGN(std::string index_bytes,
                read_layout_file(ref.path, "index.json", k_max_json_size, names.location));
  LS_TRY_ASSIGN(Index index, Index::parse(index_bytes, names.location + ": index.json"));
  return std::unique_ptr<ImageSource>(
      std::make_unique<OciDirSource>(ref, std::move(names), std::move(index)));
}

} // namespace lockstep::oci::detail
