// Licenses for SBOMs and the SBOM of a lock: see sbom_output.hpp.
#include "builder/image/sbom_output.hpp"

#include "builder/lock/lock.hpp"
#include "support/base/log.hpp"
#include "support/base/parallel.hpp"
#include "support/base/version.hpp"
#include "support/debian/copyright.hpp"
#include "support/debian/deb_archive.hpp"
#include "support/net/http.hpp"
#include "support/python/wheel.hpp"
#include "support/python/wheel_archive.hpp"

#include <algorithm>
#include <thread>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

// Keyed by lockstep's version and the artifact's sha256: another version may read licenses otherwise.
constexpr const char* k_license_ns = "sbom-license";
// The METADATA records the resolver keeps by wheel sha256 (builder/lock/wheel_resolve.cpp).
constexpr const char* k_wheel_metadata_ns = "wheel-metadata";
// A copyright file larger than this is not read (Debian's largest are a few hundred KiB).
constexpr std::uint64_t k_max_copyright = 4ULL << 20;
// Records hold "L" and the expression, or "-" for a package that declares none: present either way.
constexpr char k_known = 'L';

std::string record_key(const envspec::LockedArtifact& a) {
  return std::string(k_version) + "-" + a.sha256.hex();
}

// The license `a` declares, read from the stored artifact; "" for none.
Result<std::string> read_license(const envspec::LockedArtifact& a, const BlobStore& store) {
  const fs::path path = store.blob_path(a.sha256);
  const std::string what = a.name + " " + a.version;
  if (a.kind == "deb") {
    const std::string wanted = "usr/share/doc/" + a.name + "/copyright";
    LS_TRY_ASSIGN(auto files, read_deb_files(
                                  path, [&](std::string_view member) { return member == wanted; },
                                  k_max_copyright, what));
    return files.empty() ? std::string() : dep5_license(files.front().second);
  }
  if (auto cached = store.get_record(k_wheel_metadata_ns, a.sha256.hex(), 16ULL << 20)) {
    return metadata_license(*cached);
  }
  LS_TRY_ASSIGN(auto metadata, read_wheel_metadata_text(path, what));
  return metadata_license(metadata.second);
}

} // namespace

std::optional<envspec::SbomFormat> sbom_format_of_path(const fs::path& path) {
  const std::string name = path.filename().string();
  if (name.ends_with(".spdx.json")) {
    return envspec::SbomFormat::spdx_json;
  }
  if (name.ends_with(".cdx.json")) {
    return envspec::SbomFormat::cyclonedx_json;
  }
  return std::nullopt;
}

Result<std::map<std::string, std::string>> artifact_licenses(const envspec::Lock& lock,
                                                             const BlobStore& store, const fs::path& spec_dir,
                                                             const std::vector<fs::path>& local_roots) {
  std::map<std::string, std::string> out;
  std::vector<const envspec::LockedArtifact*> unread;
  for (const envspec::LockedArtifact& a : lock.artifacts) {
    if (a.kind != "deb" && a.kind != "wheel") {
      continue;
    }
    if (auto r = store.get_record(k_license_ns, record_key(a)); r && !r->empty()) {
      if (r->front() == k_known) {
        out[a.sha256.hex()] = r->substr(1);
      }
      continue;
    }
    unread.push_back(&a);
  }
  if (unread.empty()) {
    return out;
  }
  // What the store lacks is fetched as a build fetches it.
  const envspec::Lock resolved = resolve_lock_urls(lock, spec_dir);
  std::vector<Download> downloads;
  FetchOptions fetch;
  fetch.local_roots = local_roots;
  fetch.max_size = 0;
  for (const envspec::LockedArtifact* a : unread) {
    if (!store.has(a->sha256, static_cast<std::int64_t>(a->size))) {
      // A local file the lock names relative to its spec's directory is fetched from there.
      const auto index = static_cast<std::size_t>(a - lock.artifacts.data());
      downloads.push_back(
          Download{resolved.artifacts[index].url, a->sha256, a->size, a->name + " " + a->version});
      fetch.max_size = std::max(fetch.max_size, a->size);
    }
  }
  if (!downloads.empty()) {
    log::Timer t("sbom: fetch packages");
    LS_TRY(fetch_all(store, downloads, fetch));
  }
  log::Timer t("sbom: read licenses");
  std::vector<Result<std::string>> read(unread.size(), std::string());
  for_each_index(unread.size(), std::max(1U, std::thread::hardware_concurrency()),
                 [&](std::size_t i) { read[i] = read_license(*unread[i], store); });
  for (std::size_t i = 0; i < unread.size(); ++i) {
    if (!read[i]) {
      return read[i].error();
    }
    if (!read[i]->empty()) {
      out[unread[i]->sha256.hex()] = *read[i];
    }
    (void)store.put_record(k_license_ns, record_key(*unread[i]),
                           read[i]->empty() ? std::string("-") : k_known + *read[i],
                           /*durable=*/false);
  }
  return out;
}

Result<std::string> make_sbom(const envspec::Lock& lock, envspec::SbomFormat format, const std::string& name,
                              const Digest& subject, const BlobStore& store, const fs::path& spec_dir,
                              const std::vector<fs::path>& local_roots) {
  envspec::SbomOptions options;
  options.name = name;
  options.subject = subject;
  options.version = std::string(k_version);
  LS_TRY_ASSIGN(options.licenses, artifact_licenses(lock, store, spec_dir, local_roots));
  return envspec::render_sbom(lock, format, options);
}

} // namespace lockstep::builder
