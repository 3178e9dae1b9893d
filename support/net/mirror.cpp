// Mirrors of content-addressed files: see mirror.hpp.
#include "support/net/mirror.hpp"

#include "support/base/log.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <sys/stat.h>

namespace lockstep {

namespace fs = std::filesystem;

Result<bool> DirMirror::fetch(const Digest& sha256, std::optional<std::uint64_t> size,
                              const BlobStore& store) const {
  const fs::path file = m_dir / "blobs" / sha256.algorithm() / sha256.hex();
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) {
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_input("mirror {}: {} is not a regular file; refusing it", name(), file.string());
  }
  if (size && static_cast<std::uint64_t>(st.st_size) != *size) {
    return invalid_input("mirror {}: {} has {} bytes, the lock says {}; refusing it (nothing was stored)",
                         name(), file.string(), st.st_size, *size);
  }
  LS_TRY_ASSIGN(UniqueFd fd, open_input_file(file));
  auto committed = store.put_file(
      fd.get(), sha256, size ? std::optional<std::int64_t>(static_cast<std::int64_t>(*size)) : std::nullopt,
      file.string());
  if (!committed && committed.error().code != ExitCode::invalid_input) {
    return committed.error(); // a read error or an interruption, not the file's content
  }
  if (!committed) {
    return invalid_input("mirror {}: {} does not match its sha256 {} ({}); refusing it (nothing was stored)",
                         name(), file.string(), sha256.str(), committed.error().message);
  }
  log::debug("{} from mirror {}", sha256.str(), name());
  return true;
}

Result<bool> MirrorSet::fetch(const Digest& sha256, std::optional<std::uint64_t> size,
                              const BlobStore& store) const {
  for (const auto& m : mirrors) {
    LS_TRY_ASSIGN(bool found, m->fetch(sha256, size, store));
    if (found) {
      return true;
    }
  }
  return false;
}

std::string MirrorSet::names() const {
  if (mirrors.empty()) {
    return "no mirror";
  }
  std::string out;
  for (const auto& m : mirrors) {
    out += (out.empty() ? "" : ", ") + m->name();
  }
  return out;
}

MirrorSet& default_mirrors() {
  static MirrorSet set;
  return set;
}

} // namespace lockstep
