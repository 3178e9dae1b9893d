#pragma once
// Git sources: `copy: [{git: URL, rev: REV, to: PATH}]`. A revision (tag, branch or full commit id)
// is resolved to a commit id with libgit2, which the lock records; a build exports that commit's
// tree into a layer, without `.git`, byte for byte the same on every machine (docs/git-sources.md).
//
// Fetched objects live in a bare mirror cache per URL, STORE_ROOT/git/<sha256(URL)>.git, created
// atomically (initialised beside it, then renamed) and flock(2)ed (STORE_ROOT/git/<sha256>.lock)
// while a fetch writes to it, so concurrent builds share it safely. A commit the cache holds never
// needs the network again.
#include "support/base/log.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/tar_writer.hpp"
#include "support/store/blob_store.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace lockstep::builder {

/// True for a full commit id: exactly 40 hex digits (either case).
bool is_full_commit_id(std::string_view rev);

/// The bare mirror cache for `url`: STORE_ROOT/git/<sha256 of the URL without credentials>.git.
std::filesystem::path git_cache_dir(const std::filesystem::path& store_root, const std::string& url);

/// Resolves `rev` of the repository at `url` to a commit id (40 lowercase hex), fetching what it
/// names into the cache. `url` is an absolute local path, file://, http://, https:// or git://;
/// `rev` is a tag (annotated tags peel to their commit), a branch, a full ref name ("refs/...")
/// or a full commit id (which needs no network when the cache has it). A name that is both a tag
/// and a branch means the tag, as in git. Errors: an unknown rev or an abbreviated commit id is
/// invalid_input (naming some tags and branches that exist); an unreachable server is external,
/// with libgit2's message; SIGINT/SIGTERM stop a fetch (interrupted).
Result<std::string> resolve_git_rev(const std::filesystem::path& store_root, const std::string& url,
                                    const std::string& rev);

/// Makes sure the cache holds `commit` (a full id) of `url` and that it is a commit, fetching if
/// needed: first `rev_hint` (the tag or branch the lock was made from, may be empty), then the
/// commit by id (servers that allow it), then every branch and tag. A commit on none of them is
/// invalid_input.
Result<void> ensure_git_commit(const std::filesystem::path& store_root, const std::string& url,
                               const std::string& commit, const std::string& rev_hint = {});

/// Where and how a commit's tree lands in the layer.
struct GitExportOptions {
  std::string to;         ///< absolute directory in the image ("/opt/src"); created with its parents
  std::int64_t epoch = 0; ///< mtime of every member
  std::uint32_t uid = 0;  ///< owner of every member
  std::uint32_t gid = 0;
};

/// Writes the tree of `commit` into `tar` under `opt.to` (fetching it first if the cache lacks it):
/// directories 0755, files 0644 or 0755 (git's 100755), symlinks (120000) with their target
/// verbatim, submodules (160000) as empty directories with a warning, every member owned by
/// uid:gid with mtime epoch. Members are depth-first with names sorted bytewise in each directory;
/// parents of `opt.to` come first. `seen` holds the paths already in the layer (shared with the
/// layer's other writers): a directory there is not emitted again, a file or symlink there is an
/// error. Hostile trees are refused: names ".", "..", ".git" or with '/', duplicate names, files
/// over 1 GiB, more than 2,000,000 members or 64 GiB in all, paths over 4096 bytes, nesting over
/// 256 levels. Returns the file bytes written; `progress` advances by them.
Result<std::uint64_t> export_git_tree(TarWriter& tar, log::Progress& progress,
                                      const std::filesystem::path& store_root, const std::string& url,
                                      const std::string& commit, const GitExportOptions& opt,
                                      std::set<std::string>& seen);

/// The sha256 and size of lockstep's canonical export of a commit's tree (a tar of the tree at "/",
/// epoch 0, owner 0:0): what a lock pins a git source's content by, beyond git's SHA-1 commit id.
struct GitTreeDigest {
  Digest sha256;
  std::uint64_t size = 0;
};

/// Computes the GitTreeDigest of `commit` of `url` (fetching it into the store's git cache if needed).
Result<GitTreeDigest> git_export_digest(const std::filesystem::path& store_root, const std::string& url,
                                        const std::string& commit, const std::string& rev_hint = {});

/// True when the store's git cache holds `commit` (a full id) of `url`; never the network.
Result<bool> git_commit_cached(const std::filesystem::path& store_root, const std::string& url,
                               const std::string& commit);

/// Writes lockstep's canonical export of `commit` (what GitTreeDigest digests) into `store` as a
/// blob, fetching the commit into the git cache first if needed: what `lockstep vendor` saves of a
/// git source. With `expected` (the lock's sha256 and size), other bytes are invalid_input and
/// nothing is stored.
Result<BlobInfo> store_git_export(const BlobStore& store, const std::string& url, const std::string& commit,
                                  const std::string& rev_hint,
                                  const std::optional<GitTreeDigest>& expected = std::nullopt);

/// True when the store holds the canonical export `pinned` names (a lock's sha256 and size), or a
/// mirror (default_mirrors()) had it and it is now in the store, checked; false when neither has it.
Result<bool> find_git_export(const BlobStore& store, const GitTreeDigest& pinned);

/// Writes the canonical export in `archive` (a file the caller checked against the lock's sha256,
/// from the store or a mirror) into `tar` under `opt.to`: the same bytes export_git_tree() writes
/// for the commit it came from, without the commit or the network. Members no git tree export can
/// hold (other types or modes) and every bound of export_git_tree() are refused as invalid_input;
/// `where` names the source in messages.
Result<std::uint64_t> export_git_archive(TarWriter& tar, log::Progress& progress,
                                         const std::filesystem::path& archive, const GitExportOptions& opt,
                                         std::set<std::string>& seen, const std::string& where);

/// The text that identifies what export_git_tree() writes (format version, commit, `to`, epoch,
/// owner), for the layer fingerprint. The URL is not part of it: a commit id names its content.
std::string git_export_fingerprint(const std::string& commit, const GitExportOptions& opt);

} // namespace lockstep::builder
