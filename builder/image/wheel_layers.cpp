// The "python packages" layer: a lock's wheels installed with builder/image/wheel_install. See
// wheel_layers.hpp and docs/wheels.md ("Locking and installing").
#include "builder/image/wheel_layers.hpp"

#include "builder/image/layer_plan.hpp"
#include "builder/image/wheel_install.hpp"
#include "builder/lock/wheel_lock.hpp"
#include "support/base/log.hpp"
#include "support/net/http.hpp"
#include "support/python/pep440.hpp"
#include "support/python/pep508.hpp"
#include "support/python/wheel.hpp"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <set>

namespace lockstep::builder {

namespace {

// Bump when what the layer holds for the same wheels changes (wheel_install's output included).
constexpr const char* k_wheel_layer_version = "lockstep-wheel-layer-1";
constexpr std::uint64_t k_max_wheel_size = 16ULL << 30;

// Checks a lock's wheel entry before anything is fetched for it; returns its file name.
Result<std::string> check_locked_wheel(const envspec::LockedArtifact& a, std::size_t index) {
  const std::string where = fmt::format("the lock's artifacts[{}] ({} {})", index, a.name, a.version);
  const std::string filename = url_filename(a.url);
  auto name = WheelName::parse(filename);
  if (!name) {
    return invalid_input("{}: its URL does not end with a wheel file name: {}", where, name.error().message);
  }
  auto version = PyVersion::parse(a.version);
  if (a.name != normalize_project_name(a.name) || !valid_project_name(a.name) || !version ||
      name->project != a.name || !(name->version == *version)) {
    return invalid_input("{}: the URL names {} {}; run `lockstep lock` to rewrite the lock", where,
                         name->project, name->version_text);
  }
  if (a.size == 0) {
    return invalid_input("{}: size 0; run `lockstep lock` to rewrite the lock", where);
  }
  return filename;
}

} // namespace

Result<void> build_wheel_layer(const envspec::Spec& spec, const envspec::Lock& lock, ImageState& image) {
  const BlobStore& store = *image.store;
  std::vector<const envspec::LockedArtifact*> wheels;
  std::vector<std::string> filenames;
  for (std::size_t i = 0; i < lock.artifacts.size(); ++i) {
    const envspec::LockedArtifact& a = lock.artifacts[i];
    if (a.kind == "wheel") {
      LS_TRY_ASSIGN(std::string filename, check_locked_wheel(a, i));
      wheels.push_back(&a);
      filenames.push_back(std::move(filename));
    }
  }
  if (wheels.empty()) {
    return {};
  }
  LS_TRY_ASSIGN(const PythonTarget python,
                python_target(lock, spec.platform, image.base(), spec.base.python, spec.conda.prefix));
  WheelTarget target;
  target.site_packages = python.site_packages();
  target.scripts_dir = python.scripts_dir;
  target.data_dir = python.data_dir;
  target.python = python.interpreter;
  target.epoch = image.epoch;

  // 1. Every wheel into the store, size and sha256 checked against the lock.
  std::vector<Download> downloads;
  for (std::size_t i = 0; i < wheels.size(); ++i) {
    downloads.push_back(Download{wheels[i]->url, wheels[i]->sha256, wheels[i]->size, filenames[i]});
  }
  {
    log::Timer t("fetch wheels");
    FetchOptions fetch;
    fetch.max_size = k_max_wheel_size;
    fetch.local_roots = image.local_roots;
    LS_TRY(fetch_all(store, downloads, fetch));
  }

  // 2. One layer, cached by what it is made of.
  FingerprintHasher fp;
  fp.add(k_layer_format_version, k_wheel_layer_version, layer_settings(image.codec), image.epoch,
         target.site_packages, target.scripts_dir, target.data_dir, target.headers_dir, target.python);
  for (const envspec::LockedArtifact* a : wheels) {
    fp.add(a->name, a->version, a->sha256.hex());
  }
  const std::string created_by =
      fmt::format("python packages: {} wheels into /{}", wheels.size(), target.site_packages);
  auto layer = build_generated_layer(
      fp.finish(), true, store, image.codec, "python packages", 0,
      [&](TarWriter& tar, log::Progress& progress) -> Result<void> {
        std::set<std::string> seen;
        std::map<std::string, std::string> owner; // file path -> the wheel that installed it
        for (std::size_t i = 0; i < wheels.size(); ++i) {
          const envspec::LockedArtifact& a = *wheels[i];
          auto info = install_wheel(tar, progress, store.blob_path(a.sha256), target, seen, filenames[i]);
          if (!info) {
            Error e = info.error();
            // Name the other wheel of a conflict (install_wheel knows only that there is one).
            for (const auto& [path, wheel] : owner) {
              const std::string needle = ": /" + path + " is ";
              if (e.message.find(needle) != std::string::npos) {
                const std::string other = "another wheel";
                if (auto at = e.message.find(other); at != std::string::npos) {
                  e.message.replace(at, other.size(), wheel);
                }
                break;
              }
            }
            return e;
          }
          if (info->project != a.name || !(info->version == unwrap(PyVersion::parse(a.version)))) {
            return invalid_input("{}: the wheel inside is {} {}, not what the lock names ({} {})",
                                 filenames[i], info->project, info->version.str(), a.name, a.version);
          }
          for (const std::string& f : info->files) {
            owner.emplace(f, filenames[i]);
          }
        }
        return {};
      });
  if (!layer) {
    return layer.error();
  }
  append_layer(image, *layer, created_by);
  return {};
}

} // namespace lockstep::builder
