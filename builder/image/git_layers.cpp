#include "builder/image/git_layers.hpp"

#include "builder/image/layer_plan.hpp"
#include "builder/lock/git_source.hpp"
#include "support/base/log.hpp"
#include "support/oci/tar_writer.hpp"

#include <fmt/format.h>

#include <set>

namespace lockstep::builder {

namespace {

const envspec::LockedArtifact* find_locked(const envspec::Lock& lock, const envspec::CopyItem& item) {
  for (const envspec::LockedArtifact& a : lock.artifacts) {
    if (a.kind == "git" && a.name == item.git_text && a.rev == item.rev) {
      return &a;
    }
  }
  return nullptr;
}

} // namespace

Result<void> build_git_layers(const envspec::Spec& spec, const envspec::Lock& lock, ImageState& image) {
  const BlobStore& store = *image.store;
  const std::string settings = layer_settings(image.codec);
  for (std::size_t i = 0; i < spec.copy.size(); ++i) {
    const envspec::CopyItem& item = spec.copy[i];
    if (item.git.empty()) {
      continue;
    }
    const envspec::LockedArtifact* locked = find_locked(lock, item);
    if (locked == nullptr) {
      return Error{ExitCode::check_failed,
                   fmt::format("copy[{}]: the lock has no commit for {} {}; run `lockstep lock`", i,
                               item.git_text, item.rev)};
    }
    GitExportOptions opt;
    opt.to = item.to;
    opt.epoch = image.epoch;
    FingerprintHasher fp;
    fp.add(k_layer_format_version, "git-layer-1", settings, git_export_fingerprint(locked->version, opt),
           locked->sha256.hex());
    const std::string label = fmt::format("copy[{}] git {}", i, item.git_text);
    auto layer = build_generated_layer(
        fp.finish(), true, store, image.codec, label, locked->size,
        [&](TarWriter& tar, log::Progress& progress) -> Result<void> {
          // Only a cold build reaches here. Without the commit in the git cache, the tree export the
          // lock pins, from the store or a mirror (`lockstep vendor`), needs no clone.
          std::set<std::string> seen;
          LS_TRY_ASSIGN(bool cached, git_commit_cached(store.root(), item.git, locked->version));
          if (!cached) {
            LS_TRY_ASSIGN(bool vendored, find_git_export(store, GitTreeDigest{locked->sha256, locked->size}));
            if (vendored) {
              LS_TRY(export_git_archive(tar, progress, store.blob_path(locked->sha256), opt, seen,
                                        fmt::format("copy[{}]: the tree export of {} at {} ({})", i,
                                                    item.git_text, locked->version.substr(0, 12),
                                                    locked->sha256.str().substr(0, 19))));
              return {};
            }
          }
          // The content is checked against the lock first.
          LS_TRY_ASSIGN(GitTreeDigest digest,
                        git_export_digest(store.root(), item.git, locked->version, locked->rev));
          if (digest.sha256 != locked->sha256) {
            return invalid_input(
                "copy[{}]: the tree of {} at {} has sha256 {}, the lock says {}: the repository "
                "content changed under the same commit id; refusing it",
                i, item.git_text, locked->version, digest.sha256.hex(), locked->sha256.hex());
          }
          LS_TRY(export_git_tree(tar, progress, store.root(), item.git, locked->version, opt, seen));
          return {};
        });
    if (!layer) {
      return layer.error();
    }
    const std::string created_by =
        fmt::format("copy git {}@{} -> {}", item.git_text, locked->version.substr(0, 12), item.to);
    append_layer(image, *layer, created_by);
  }
  return {};
}

} // namespace lockstep::builder
