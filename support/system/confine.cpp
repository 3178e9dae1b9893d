#include "support/system/confine.hpp"

#include <iterator>
#include <system_error>

namespace lockstep {

namespace fs = std::filesystem;

bool is_within(const fs::path& path, const fs::path& root) {
  auto pi = path.begin();
  for (auto ri = root.begin(); ri != root.end(); ++ri, ++pi) {
    if (ri->empty() && std::next(ri) == root.end()) {
      return true; // root ends with a separator
    }
    if (pi == path.end() || *pi != *ri) {
      return false;
    }
  }
  return true;
}

Result<Confinement> confine_path(const fs::path& path, const std::vector<fs::path>& roots) {
  std::error_code ec;
  Confinement out;
  out.real = fs::weakly_canonical(path, ec);
  if (ec) {
    return io_error("can't resolve {}: {}", path.string(), ec.message());
  }
  const fs::path written = path.lexically_normal();
  for (const fs::path& root : roots) {
    const fs::path real_root = fs::canonical(root, ec);
    if (ec) {
      continue; // a root that does not exist holds nothing
    }
    if (is_within(out.real, real_root)) {
      out.root = root;
      out.through_symlink = false;
      return out;
    }
    if (is_within(written, root.lexically_normal())) {
      out.through_symlink = true;
    }
  }
  return out;
}

} // namespace lockstep
