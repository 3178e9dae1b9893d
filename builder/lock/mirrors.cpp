#include "builder/lock/mirrors.hpp"

#include "support/base/log.hpp"
#include "support/net/mirror.hpp"
#include "support/oci/image_source.hpp"
#include "support/registry/client.hpp"
#include "support/registry/vendor_mirror.hpp"

#include <cstdlib>
#include <memory>
#include <string_view>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

Result<std::shared_ptr<const BlobMirror>> mirror_of(const std::string& text, const fs::path& base) {
  if (text.starts_with("docker://")) {
    LS_TRY_ASSIGN(oci::ImageRef ref, oci::ImageRef::parse(text));
    return std::shared_ptr<const BlobMirror>(
        std::make_shared<registry::RegistryMirror>(ref.remote, registry::default_client_options()));
  }
  std::string dir = text.starts_with("dir:") ? text.substr(4) : text;
  if (dir.empty() || text.find("://") != std::string::npos) {
    return invalid_input("mirror '{}': expected a directory (DIR or dir:DIR) or docker://REGISTRY/REPO",
                         text);
  }
  fs::path p(dir);
  return std::shared_ptr<const BlobMirror>(std::make_shared<DirMirror>(p.is_absolute() ? p : base / p));
}

} // namespace

Result<void> configure_mirrors(const std::vector<std::string>& cli, const std::vector<std::string>& spec,
                               const fs::path& spec_dir, bool offline) {
  MirrorSet& set = default_mirrors();
  set.mirrors.clear();
  set.offline = offline;
  for (const std::string& m : cli) {
    LS_TRY_ASSIGN(auto mirror, mirror_of(m, fs::current_path()));
    set.mirrors.push_back(std::move(mirror));
  }
  for (const std::string& m : spec) {
    LS_TRY_ASSIGN(auto mirror, mirror_of(m, spec_dir));
    set.mirrors.push_back(std::move(mirror));
  }
  if (const char* env = std::getenv("LOCKSTEP_MIRRORS"); env != nullptr) {
    std::string_view rest(env);
    while (!rest.empty()) {
      const std::size_t sep = rest.find_first_of(" \t\n");
      const std::string item(rest.substr(0, sep));
      rest.remove_prefix(sep == std::string_view::npos ? rest.size() : sep + 1);
      if (!item.empty()) {
        LS_TRY_ASSIGN(auto mirror, mirror_of(item, fs::current_path()));
        set.mirrors.push_back(std::move(mirror));
      }
    }
  }
  if (!set.mirrors.empty()) {
    log::debug("mirrors: {}{}", set.names(), offline ? " (offline)" : "");
  }
  return {};
}

} // namespace lockstep::builder
