// Vendoring a lock's files: see vendor.hpp.
#include "builder/image/vendor.hpp"

#include "builder/lock/git_source.hpp"
#include "builder/lock/lock.hpp"
#include "support/base/json.hpp"
#include "support/base/log.hpp"
#include "support/base/version.hpp"
#include "support/net/http.hpp"
#include "support/oci/image_source.hpp"
#include "support/oci/oci.hpp"
#include "support/registry/pull.hpp"
#include "support/registry/push.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

constexpr const char* k_index_name = "lockstep-vendor.json";
constexpr std::string_view k_artifact_type = "application/vnd.lockstep.vendor.v1+json";
constexpr std::string_view k_index_media_type = "application/vnd.lockstep.vendor.index.v1+json";
constexpr std::uint64_t k_max_index = 64ULL << 20;

// The base image's manifest, config and layers into the store.
Result<void> gather_base(const envspec::LockedBase& base, const BlobStore& store,
                         const registry::ClientOptions& options, std::vector<VendoredFile>& out) {
  LS_TRY_ASSIGN(oci::ImageRef ref, oci::ImageRef::parse(base.image));
  if (ref.transport == oci::ImageRef::Transport::docker) {
    ref.remote.digest = base.manifest;
  }
  LS_TRY_ASSIGN(std::unique_ptr<oci::ImageSource> source, registry::open_image(ref, store, options));
  oci::SelectOptions select;
  LS_TRY_ASSIGN(select.platform, oci::Platform::parse(base.platform));
  LS_TRY_ASSIGN(oci::OpenedImage image, source->resolve(select));
  if (image.manifest_digest != base.manifest) {
    return Error{ExitCode::check_failed,
                 fmt::format("base {}: its manifest is now {}, the lock says {}; run "
                             "`lockstep lock`",
                             base.image, image.manifest_digest.str(), base.manifest.str())};
  }
  LS_TRY(store.put(image.manifest_bytes));
  LS_TRY(store.put(image.config_bytes));
  out.push_back({image.manifest_digest, image.manifest_bytes.size(), "image",
                 base.image + " manifest " + base.platform, base.image});
  out.push_back({image.manifest.config.digest, image.config_bytes.size(), "image",
                 base.image + " config " + base.platform, base.image});
  for (std::size_t i = 0; i < image.manifest.layers.size(); ++i) {
    const oci::Descriptor& layer = image.manifest.layers[i];
    LS_TRY(source->fetch_blob(layer, store));
    out.push_back({layer.digest, static_cast<std::uint64_t>(layer.size), "image",
                   fmt::format("{} layer {} ({})", base.image, i + 1, base.platform), base.image});
  }
  return {};
}

Result<std::vector<VendoredFile>> gather(const envspec::Lock& lock, const std::string& lock_text,
                                         const BlobStore& store, const fs::path& spec_dir,
                                         const std::vector<fs::path>& local_roots,
                                         const registry::ClientOptions& options) {
  std::vector<VendoredFile> files;
  LS_TRY_ASSIGN(BlobInfo lock_blob, store.put(lock_text));
  files.push_back(
      {lock_blob.digest, static_cast<std::uint64_t>(lock_blob.size), "lock", "lockstep.lock", ""});
  std::vector<Download> downloads;
  FetchOptions fetch;
  fetch.local_roots = local_roots;
  fetch.max_size = 0;
  // Local files a lock names relative to its spec's directory are fetched from there.
  const envspec::Lock resolved = resolve_lock_urls(lock, spec_dir);
  for (std::size_t i = 0; i < lock.artifacts.size(); ++i) {
    const envspec::LockedArtifact& a = lock.artifacts[i];
    if (a.kind == "git") {
      // The commit's canonical tree export, which the lock pins by sha256: a build without the
      // commit in its git cache writes the layer from it. It is made from the git cache the
      // build used (keyed by the URL as the spec resolves it), so a gone repository is no matter.
      const GitTreeDigest pinned{a.sha256, a.size};
      LS_TRY_ASSIGN(bool found, find_git_export(store, pinned));
      if (!found) {
        log::info("exporting {} at {}", a.name, a.version.substr(0, 12));
        Result<BlobInfo> exported =
            store_git_export(store, resolve_spec_path(a.url, spec_dir), a.version, a.rev, pinned);
        if (!exported) {
          return exported.error().with_context("git " + a.name);
        }
      }
      files.push_back({a.sha256, a.size, "git", fmt::format("{} {}", a.name, a.version), a.url});
      continue;
    }
    downloads.push_back(Download{resolved.artifacts[i].url, a.sha256, a.size, a.name + " " + a.version});
    // A deb the mirror dropped since the lock was made: from the snapshot of its Release's date.
    if (std::string fallback = a.kind == "deb" ? deb_snapshot_url(lock, a, {}) : std::string();
        !fallback.empty()) {
      downloads.back().fallback_urls.push_back(std::move(fallback));
    }
    fetch.max_size = std::max(fetch.max_size, a.size);
    files.push_back({a.sha256, a.size, a.kind,
                     a.kind == "deb" ? fmt::format("{} {} {}", a.name, a.version, a.arch)
                                     : fmt::format("{} {}", a.name, a.version),
                     a.url});
  }
  if (!downloads.empty()) {
    LS_TRY(fetch_all(store, downloads, fetch));
  }
  if (lock.base) {
    LS_TRY(gather_base(*lock.base, store, options, files));
  }
  for (const envspec::LockedBase& base : lock.bases) { // a multi-platform lock: each platform's
    LS_TRY(gather_base(base, store, options, files));
  }
  const envspec::LockedStack* stack = envspec::lock_recipes_stack(lock);
  if (stack != nullptr && stack->recipes.rfind("git ", 0) == 0 && !stack->recipes_commit.empty()) {
    // A team's recipes at the locked commit, as a tree export: what the stack was solved from.
    const std::string text = stack->recipes.substr(4);
    const std::string url = resolve_spec_path(text, spec_dir);
    log::info("exporting the stack recipes {} at {}", text, stack->recipes_commit.substr(0, 12));
    Result<BlobInfo> recipes = store_git_export(store, url, stack->recipes_commit, {});
    if (!recipes) {
      return recipes.error().with_context("stack recipes " + text);
    }
    files.push_back({recipes->digest, static_cast<std::uint64_t>(recipes->size), "recipes",
                     fmt::format("{} {}", text, stack->recipes_commit), text});
  }
  // One entry per file, in a fixed order.
  std::sort(files.begin(), files.end(), [](const VendoredFile& x, const VendoredFile& y) {
    return std::tie(x.kind, x.name, x.sha256) < std::tie(y.kind, y.name, y.sha256);
  });
  files.erase(std::unique(files.begin(), files.end(),
                          [](const VendoredFile& x, const VendoredFile& y) { return x.sha256 == y.sha256; }),
              files.end());
  return files;
}

nlohmann::json file_json(const VendoredFile& f) {
  return {{"sha256", f.sha256.hex()}, {"size", f.size}, {"kind", f.kind}, {"name", f.name}, {"url", f.url}};
}

} // namespace

Result<std::vector<VendoredFile>> gather_lock_files(const envspec::Lock& lock, const std::string& lock_text,
                                                    const BlobStore& store, const fs::path& spec_dir,
                                                    const std::vector<fs::path>& local_roots,
                                                    const registry::ClientOptions& options) {
  return gather(lock, lock_text, store, spec_dir, local_roots, options);
}

Result<VendorResult> vendor_to_dir(const envspec::Lock& lock, const std::string& lock_text,
                                   const BlobStore& store, const fs::path& spec_dir,
                                   const std::vector<fs::path>& local_roots, const fs::path& dir,
                                   const registry::ClientOptions& options) {
  // The index already there first: a malformed one stops everything before a file is written.
  const fs::path index_path = dir / k_index_name;
  std::map<std::string, nlohmann::json> entries;
  std::set<std::string> locks;
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    LS_TRY_ASSIGN(std::string text, read_file(index_path, k_max_index));
    LS_TRY_ASSIGN(nlohmann::json old, parse_json(text, index_path.string()));
    const bool v1 = old.is_object() && old.contains("lockstep-vendor") &&
                    old["lockstep-vendor"].is_number_integer() &&
                    old["lockstep-vendor"].get<std::int64_t>() == 1;
    if (!v1 || !old.contains("files") || !old["files"].is_array() || !old.contains("locks") ||
        !old["locks"].is_array()) {
      return invalid_input(
          "{}: not a lockstep vendor index (lockstep-vendor: 1, files, locks); vendor into an "
          "empty directory",
          index_path.string());
    }
    for (const auto& f : old["files"]) {
      if (!f.is_object() || !f.contains("sha256") || !f["sha256"].is_string()) {
        return invalid_input("{}: a file entry without sha256", index_path.string());
      }
      entries[f["sha256"].get<std::string>()] = f;
    }
    for (const auto& l : old["locks"]) {
      if (l.is_string()) {
        locks.insert(l.get<std::string>());
      }
    }
  }
  LS_TRY_ASSIGN(std::vector<VendoredFile> files,
                gather(lock, lock_text, store, spec_dir, local_roots, options));
  VendorResult result;
  result.where = "dir:" + dir.string();
  const fs::path blobs = dir / "blobs" / "sha256";
  LS_TRY(make_dirs(blobs));
  std::uint64_t total = 0;
  for (const VendoredFile& f : files) {
    total += f.size;
  }
  log::Progress progress("vendoring into " + dir.string(), total);
  for (const VendoredFile& f : files) {
    const fs::path dest = blobs / f.sha256.hex();
    if (!fs::exists(dest, ec) || fs::file_size(dest, ec) != f.size) {
      fs::remove(dest, ec);
      LS_TRY(store.export_to(f.sha256, static_cast<std::int64_t>(f.size), dest));
      ++result.written;
      result.bytes += f.size;
    }
    entries[f.sha256.hex()] = file_json(f);
    progress.advance(f.size);
  }
  progress.done();
  locks.insert(envspec::lock_digest(lock).hex());
  nlohmann::json index = {{"lockstep-vendor", 1}, {"tool", fmt::format("lockstep {}", k_version)}};
  index["locks"] = locks;
  index["files"] = nlohmann::json::array();
  for (auto& [hex, f] : entries) {
    index["files"].push_back(f);
  }
  LS_TRY_ASSIGN(AtomicFile out, AtomicFile::create(fs::absolute(index_path), 0644));
  LS_TRY(out.write(index.dump(1) + "\n"));
  LS_TRY(out.commit());
  result.files = std::move(files);
  return result;
}

Result<VendorResult> vendor_to_registry(const envspec::Lock& lock, const std::string& lock_text,
                                        const BlobStore& store, const fs::path& spec_dir,
                                        const std::vector<fs::path>& local_roots,
                                        const oci::RegistryRef& target,
                                        const registry::ClientOptions& options) {
  LS_TRY_ASSIGN(std::vector<VendoredFile> files,
                gather(lock, lock_text, store, spec_dir, local_roots, options));
  const std::string tag = !target.tag.empty() && !(target.tag == "latest" && !target.digest)
                              ? target.tag
                              : "lock-" + envspec::lock_digest(lock).hex().substr(0, 16);
  nlohmann::json index = {{"lockstep-vendor", 1},
                          {"tool", fmt::format("lockstep {}", k_version)},
                          {"locks", {envspec::lock_digest(lock).hex()}}};
  index["files"] = nlohmann::json::array();
  for (const VendoredFile& f : files) {
    index["files"].push_back(file_json(f));
  }
  LS_TRY_ASSIGN(BlobInfo index_blob, store.put(index.dump(1) + "\n"));
  LS_TRY_ASSIGN(BlobInfo empty, store.put("{}"));
  oci::Manifest m;
  m.media_type = std::string(oci::k_media_manifest);
  m.artifact_type = std::string(k_artifact_type);
  m.config.media_type = "application/vnd.oci.empty.v1+json";
  m.config.digest = empty.digest;
  m.config.size = empty.size;
  oci::Descriptor idx;
  idx.media_type = std::string(k_index_media_type);
  idx.digest = index_blob.digest;
  idx.size = index_blob.size;
  m.layers.push_back(idx);
  for (const VendoredFile& f : files) {
    oci::Descriptor d;
    d.media_type = "application/octet-stream";
    d.digest = f.sha256;
    d.size = static_cast<std::int64_t>(f.size);
    d.annotations["org.opencontainers.image.title"] = f.name;
    m.layers.push_back(std::move(d));
  }
  registry::PushContent content;
  content.manifest_bytes = m.serialize();
  content.media_type = std::string(oci::k_media_manifest);
  content.blobs.push_back(m.config);
  content.blobs.insert(content.blobs.end(), m.layers.begin(), m.layers.end());
  oci::RegistryRef at = target;
  at.digest.reset();
  at.tag = tag;
  auto source = registry::local_blobs({}, store);
  LS_TRY_ASSIGN(auto pushed, registry::push(*source, content, at, {tag}, store, options));
  VendorResult result;
  result.where = "docker://" + at.name() + ":" + tag;
  result.written = pushed.second.uploaded + pushed.second.mounted;
  result.bytes = pushed.second.bytes;
  result.files = std::move(files);
  return result;
}

} // namespace lockstep::builder
