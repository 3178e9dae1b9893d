#include "runner/runtime/root_cache.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/base/version.hpp"
#include "support/system/fs.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <stdio.h> // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <future>
#include <optional>
#include <system_error>

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

/// Bumped whenever what an unpacked root contains changes for the same layers (policy, attributes).
// 2: roots unpacked for an unprivileged caller record image ownership (user.lockstep.stat).
constexpr int k_root_format = 2;
constexpr auto k_stale_build_age = std::chrono::hours(24);

std::string root_key(const Digest& chain_id, const UnpackOptions& options) {
  return fmt::format("{}-{}-v{}", chain_id.hex(), ownership_name(options), k_root_format);
}

// Creates `dir` mode 0700 when missing: an unpacked root may hold world-writable directories (/tmp),
// and other users must not reach them through the cache.
Result<void> make_private_dir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_error("can't create directory " + dir.string(), errno);
  }
  return {};
}

// Removes builds that a killed process left in roots/tmp more than a day ago.
void sweep_stale_builds(const fs::path& tmp) {
  std::error_code ec;
  auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(tmp, ec)) {
    std::error_code ec2;
    auto t =
        fs::symlink_status(e.path(), ec2).type() == fs::file_type::directory ? e.last_write_time(ec2) : now;
    if (!ec2 && now - t > k_stale_build_age) {
      log::debug("removing a stale unpack left by a killed process: {}", e.path().string());
      (void)remove_tree(e.path());
    }
  }
}

// A build directory under roots/tmp, removed (read-only directories too) unless published.
class BuildDir {
public:
  static Result<BuildDir> create(const fs::path& tmp, const std::string& key) {
    LS_TRY_ASSIGN(TempDir dir, TempDir::create(tmp, key + "-"));
    fs::path p = dir.path();
    dir.release();
    return BuildDir(std::move(p));
  }
  ~BuildDir() {
    if (!m_path.empty()) {
      auto removed = remove_tree(m_path);
      if (!removed) {
        log::warn("{}", removed.error().message);
      }
    }
  }
  /// Takes over `path`, a build directory made by create() and released.
  static BuildDir adopt(fs::path path) { return BuildDir(std::move(path)); }
  BuildDir(BuildDir&& o) noexcept : m_path(std::move(o.m_path)) { o.m_path.clear(); }
  BuildDir& operator=(BuildDir&&) = delete;
  BuildDir(const BuildDir&) = delete;
  BuildDir& operator=(const BuildDir&) = delete;

  [[nodiscard]] const fs::path& path() const { return m_path; }
  void release() { m_path.clear(); }

private:
  explicit BuildDir(fs::path p) : m_path(std::move(p)) {}
  fs::path m_path;
};

std::string info_json(const Digest& chain_id, const std::vector<oci::Descriptor>& layers,
                      const std::vector<Digest>& diff_ids, const UnpackOptions& options) {
  nlohmann::json j;
  j["chain_id"] = chain_id.str();
  j["diff_ids"] = nlohmann::json::array();
  for (const auto& d : diff_ids) {
    j["diff_ids"].push_back(d.str());
  }
  j["layers"] = nlohmann::json::array();
  for (const auto& l : layers) {
    j["layers"].push_back(l.digest.str());
  }
  j["ownership"] = ownership_name(options);
  j["format"] = k_root_format;
  j["lockstep_version"] = k_version;
  return j.dump() + "\n";
}

// Creates `build`/rootfs, the root the layers are unpacked into.
Result<void> init_root(const fs::path& build, const UnpackOptions& options) {
  fs::path rootfs = build / "rootfs";
  if (::mkdir(rootfs.c_str(), 0700) != 0) {
    return errno_error("can't create " + rootfs.string(), errno);
  }
  LS_TRY_ASSIGN(UniqueFd root, open_file(rootfs, O_RDONLY | O_DIRECTORY));
  // The root's mode must not depend on the umask; a layer's "./" member may still change it.
  if (::fchmod(root.get(), 0755) != 0) {
    return errno_error("can't chmod " + rootfs.string(), errno);
  }
  // With an id offset the root belongs to the sandbox's root, like every implied directory.
  if (options.ownership == UnpackOptions::Ownership::keep && options.id_offset != 0 &&
      ::fchown(root.get(), options.id_offset, options.id_offset) != 0) {
    return errno_error("can't chown " + rootfs.string(), errno);
  }
  return {};
}

// Unpacks layers[begin..] into `build`/rootfs.
Result<void> apply_layers(const BlobStore& store, const fs::path& build,
                          const std::vector<oci::Descriptor>& layers, const std::vector<Digest>& diff_ids,
                          std::size_t begin, const UnpackOptions& options) {
  const fs::path rootfs = build / "rootfs";
  LS_TRY_ASSIGN(UniqueFd root, open_file(rootfs, O_RDONLY | O_DIRECTORY));
  if (layers.size() > oci::k_max_layers) {
    return invalid_input("the image has {} layers, more than the {} an image may have", layers.size(),
                         oci::k_max_layers);
  }
  // The image's layers together unpack to at most options.max_bytes: each layer gets what the ones
  // before it left.
  std::uint64_t used = 0;
  for (std::size_t i = begin; i < layers.size(); ++i) {
    const oci::Descriptor& layer = layers[i];
    if (!store.has(layer.digest)) {
      return io_error("layer {} is not in the blob store at {}; fetch the image's layers first",
                      layer.digest.str(), store.root().string());
    }
    // A layer applied twice in a row leaves what it left once (its whiteouts and opaque
    // directories remove only what lies below it, and it writes the same members again).
    if (i > 0 && layer.digest == layers[i - 1].digest && diff_ids[i] == diff_ids[i - 1]) {
      log::debug("layer {}/{} {} repeats the layer before it: nothing to apply", i + 1, layers.size(),
                 layer.digest.str());
      continue;
    }
    log::debug("unpacking layer {}/{} {} ({})", i + 1, layers.size(), layer.digest.str(),
               log::human_size(static_cast<std::uint64_t>(layer.size)));
    UnpackOptions left = options;
    left.max_bytes = options.max_bytes - used;
    auto applied = apply_layer(root.get(), store.blob_path(layer.digest), layer, diff_ids[i], left);
    if (applied) {
      // File data, and a tar header for each member.
      used = std::min(options.max_bytes, used + applied->bytes + applied->entries * 512);
    }
    if (!applied) {
      Error error = std::move(applied).error();
      if (used > 0 && error.message.find("limit") != std::string::npos) {
        error.message += fmt::format(" (what the image's bound of {} bytes for all its layers leaves after "
                                     "the {} before it)",
                                     options.max_bytes, i);
      }
      // A store blob that no longer matches its digest is removed, so that the next run fetches it again.
      if (error.code != ExitCode::interrupted && !store.verify(layer.digest)) {
        error.message += "; the corrupt blob was removed from the store, run the command again to fetch it";
      }
      return error;
    }
  }
  return {};
}

// Syncs `build`/rootfs and writes info.json beside it: the root is ready to publish.
Result<void> seal_root(const fs::path& build, const std::vector<oci::Descriptor>& layers,
                       const std::vector<Digest>& diff_ids, const Digest& chain_id,
                       const UnpackOptions& options) {
  const fs::path rootfs = build / "rootfs";
  LS_TRY_ASSIGN(UniqueFd root, open_file(rootfs, O_RDONLY | O_DIRECTORY));
  // One syncfs instead of an fsync per file: a published root must survive a crash intact.
  if (::syncfs(root.get()) != 0) {
    return errno_error("can't sync " + rootfs.string(), errno);
  }
  LS_TRY(write_file_atomic(build / "info.json", info_json(chain_id, layers, diff_ids, options), 0644));
  return {};
}

bool same_options(const UnpackOptions& a, const UnpackOptions& b) {
  return a.ownership == b.ownership && a.id_offset == b.id_offset && a.id_count == b.id_count &&
         a.max_bytes == b.max_bytes;
}

} // namespace

bool is_published(const fs::path& dir) {
  struct stat st {};
  return ::lstat((dir / "info.json").c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::lstat((dir / "rootfs").c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Digest chain_id_of(const std::vector<Digest>& diff_ids) {
  if (diff_ids.empty()) {
    return sha256_of("");
  }
  Digest chain = diff_ids.front();
  for (std::size_t i = 1; i < diff_ids.size(); ++i) {
    chain = sha256_of(chain.str() + " " + diff_ids[i].str());
  }
  return chain;
}

struct RootHead::State {
  std::vector<oci::Descriptor> layers;
  std::vector<Digest> diff_ids;
  UnpackOptions options;
  fs::path build; ///< roots/tmp/<key>-XXXXXX, removed unless taken
  std::future<Result<void>> done;
  bool taken = false;

  ~State() {
    if (done.valid()) {
      done.wait();
    }
    if (!taken && !build.empty()) {
      if (auto removed = remove_tree(build); !removed) {
        log::warn("{}", removed.error().message);
      }
    }
  }
};

RootHead::RootHead() = default;
RootHead::~RootHead() = default;
RootHead::RootHead(RootHead&&) noexcept = default;
RootHead& RootHead::operator=(RootHead&&) noexcept = default;

Result<RootHead> start_root(const BlobStore& store, const std::vector<oci::Descriptor>& layers,
                            const std::vector<Digest>& diff_ids, const UnpackOptions& options) {
  if (layers.size() != diff_ids.size()) {
    return invalid_input("the image has {} layers but its config lists {} diff_ids", layers.size(),
                         diff_ids.size());
  }
  fs::path roots = store.root() / "roots";
  LS_TRY(make_private_dir(roots));
  LS_TRY(make_private_dir(roots / "tmp"));
  LS_TRY_ASSIGN(BuildDir build, BuildDir::create(roots / "tmp", root_key(chain_id_of(diff_ids), options)));
  RootHead head;
  head.m_state = std::make_unique<RootHead::State>();
  RootHead::State& st = *head.m_state;
  st.layers = layers;
  st.diff_ids = diff_ids;
  st.options = options;
  st.build = build.path();
  build.release(); // the state removes it
  LS_TRY(init_root(st.build, options));
  log::debug("unpacking {} layer(s) in the background into {}", layers.size(), st.build.string());
  st.done = std::async(std::launch::async, [&store, &st] {
    return apply_layers(store, st.build, st.layers, st.diff_ids, 0, st.options);
  });
  return head;
}

Result<UnpackedRoot> unpacked_root(const BlobStore& store, const std::vector<oci::Descriptor>& layers,
                                   const std::vector<Digest>& diff_ids, const UnpackOptions& options,
                                   RootHead* head) {
  if (layers.size() != diff_ids.size()) {
    return invalid_input("the image has {} layers but its config lists {} diff_ids", layers.size(),
                         diff_ids.size());
  }
  Digest chain = chain_id_of(diff_ids);
  std::string key = root_key(chain, options);
  fs::path roots = store.root() / "roots";
  fs::path final_dir = roots / key;
  UnpackedRoot result{final_dir / "rootfs", chain, true};
  if (is_published(final_dir)) {
    log::debug("unpacked root {} is cached", final_dir.string());
    return result;
  }

  LS_TRY(make_private_dir(roots));
  LS_TRY(make_private_dir(roots / "tmp"));
  sweep_stale_builds(roots / "tmp");
  LS_TRY_ASSIGN(UniqueFd lock,
                lock_file_exclusive(roots / (key + ".lock"), 0600,
                                    "waiting for another lockstep process to finish unpacking the root " +
                                        chain.str()));
  if (is_published(final_dir)) {
    log::debug("unpacked root {} was published by another process", final_dir.string());
    return result;
  }

  struct stat st {};
  if (::lstat(final_dir.c_str(), &st) == 0) {
    // Not published (no info.json) yet there, and we hold the lock: debris, not someone's build.
    log::debug("removing the incomplete unpacked root {}", final_dir.string());
    LS_TRY(remove_tree(final_dir));
  }
  auto start = std::chrono::steady_clock::now();
  std::optional<BuildDir> build;
  std::size_t begin = 0;
  if (head != nullptr && head->m_state && head->m_state->done.valid()) {
    // Layers unpacked in the background: taken when they begin this root, with the same options.
    RootHead::State& hs = *head->m_state;
    const bool prefix = hs.diff_ids.size() <= diff_ids.size() &&
                        std::equal(hs.diff_ids.begin(), hs.diff_ids.end(), diff_ids.begin()) &&
                        same_options(hs.options, options);
    if (prefix) {
      LS_TRY(hs.done.get());
      hs.taken = true;
      build.emplace(BuildDir::adopt(hs.build));
      begin = hs.layers.size();
      log::debug("the first {} layer(s) were unpacked in the background", begin);
    }
  }
  if (!build) {
    LS_TRY_ASSIGN(BuildDir fresh, BuildDir::create(roots / "tmp", key));
    build.emplace(std::move(fresh));
    LS_TRY(init_root(build->path(), options));
  }
  LS_TRY(apply_layers(store, build->path(), layers, diff_ids, begin, options));
  LS_TRY(seal_root(build->path(), layers, diff_ids, chain, options));
  LS_TRY(check_interrupted());
  if (::renameat2(AT_FDCWD, build->path().c_str(), AT_FDCWD, final_dir.c_str(), RENAME_NOREPLACE) != 0) {
    int err = errno;
    if ((err == EEXIST || err == ENOTEMPTY) && is_published(final_dir)) {
      return result; // published by a process that did not take the lock; ours is removed
    }
    return errno_error("can't publish the unpacked root " + final_dir.string(), err);
  }
  build->release();
  LS_TRY(fsync_dir(roots));
  result.cached = false;
  log::debug("unpacked {} layer(s) into {} in {:.2f} s", layers.size(), final_dir.string(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return result;
}

Result<UnpackedRoot> unpack_image(const BlobStore& store, oci::ImageSource& source,
                                  const oci::OpenedImage& image, const UnpackOptions& options) {
  const auto& layers = image.manifest.layers;
  if (layers.size() != image.diff_ids.size()) {
    return invalid_input("image {}: {} layers but the config lists {} diff_ids", image.manifest_digest.str(),
                         layers.size(), image.diff_ids.size());
  }
  fs::path final_dir = store.root() / "roots" / root_key(chain_id_of(image.diff_ids), options);
  if (!is_published(final_dir)) {
    for (const auto& layer : layers) {
      LS_TRY(check_interrupted());
      LS_TRY(source.fetch_blob(layer, store));
    }
  }
  return unpacked_root(store, layers, image.diff_ids, options);
}

} // namespace lockstep::runner
