#pragma once
// The lockfile (`lockstep.lock` beside `lockstep.yaml`): every artifact a build may use, pinned by
// URL, version, size and sha256, plus what the lock was made from. A build from a lock fetches
// nothing else and checks every byte against it. Format and rules: docs/lockfile.md.
//
// The file is JSON laid out for diffs: fixed key order, one repository and one artifact per line,
// artifacts sorted by kind, group and name, so a changed package is a one-line change.
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

/// The lockfile schema version this lockstep reads and writes.
inline constexpr int k_lock_schema = 1;

/// One repository as it was when the lock was made.
struct LockedRepo {
  std::string kind; ///< "apt", "pypi", "wheels" or "conda"
  std::string url;  ///< apt/pypi URL, or the wheelhouse path as in the spec
  /// One suite's Release, for a repository with several suites.
  struct SuiteRelease {
    std::string suite;
    std::string release_date;   ///< the Release file's Date
    std::string release_sha256; ///< sha256 of the verified Release text (hex)
    bool operator==(const SuiteRelease&) const = default;
  };
  std::string suite;                   ///< apt: the one suite (empty for flat or several suites)
  std::vector<std::string> components; ///< apt
  std::string release_date;            ///< apt: the Release file's Date (one suite, or flat)
  std::string release_sha256;          ///< apt: sha256 of the verified Release text (hex)
  /// apt with several suites (`suites:` in the spec): each suite's Release, in the spec's order;
  /// then `suite` and release_* are empty. Empty for one suite, so those locks read as before.
  std::vector<SuiteRelease> suites = {};
  /// conda: the subdirs read, e.g. [linux-64, noarch].
  std::vector<std::string> subdirs = {};
};

/// A conda package's record as its channel's index had it when locked (after the channel's repodata
/// patches): what the solve used, what a build checks, and what conda-meta records in the image.
struct LockedCondaRecord {
  std::string build;
  std::uint64_t build_number = 0;
  std::string subdir; ///< "linux-64", "noarch", ...
  std::string md5;    ///< of the archive, 32 hex digits ("" when the index had none)
  std::vector<std::string> depends;
  std::vector<std::string> constrains;
  std::vector<std::string> track_features;
  std::string noarch;          ///< "", "generic" or "python"
  std::uint64_t timestamp = 0; ///< build time, ms (0 when the index had none)
  std::string license;
  std::string python_site_packages_path; ///< only on python records
  bool operator==(const LockedCondaRecord&) const = default;
};

/// One pinned artifact.
struct LockedArtifact {
  std::string kind;    ///< "deb", "wheel", "conda" or "git"
  std::string name;    ///< package name; git: the repository URL as in the spec
  std::string version; ///< Debian/PEP 440 version; git: the commit id
  std::string arch;    ///< deb: amd64/all/...; wheel: the wheel's tags; git: empty
  std::string group;   ///< deb: base, mpi, cuda, python or app (one layer each); wheel: python; git: empty
  std::uint64_t size = 0;
  Digest sha256;      ///< of the file; git: of lockstep's deterministic export (a tar of the tree)
  std::string url;    ///< where it is fetched from
  int repo = -1;      ///< index into Lock::repos (-1 for git)
  std::string rev;    ///< git: the rev the spec asked for
  std::string suite;  ///< deb: the suite whose index listed it ("bookworm-security"), "" if unknown or flat
  std::string reason; ///< why it is in the lock ("requested", "openmpi-bin (Depends)")
  std::optional<LockedCondaRecord> conda; ///< conda: the rest of its record
  /// A multi-platform lock: the platforms whose images use it ("linux/arm64"), in the lock's order;
  /// empty when every platform of the lock does (an `Architecture: all` deb, a pure-Python wheel,
  /// a git source).
  std::vector<std::string> platforms = {};
};

/// One component the stack solver chose (docs/spec.md, `stack:`).
struct LockedStackChoice {
  std::string component; ///< "cuda", "cudnn", "nccl", "mpi", "python" or "framework"
  std::string name;      ///< "cuda", "cudnn", "nccl", "openmpi", "python", "pytorch", ...
  std::string version;   ///< what was chosen: "12.1", "8.9.2.26", "2.18", "2.1.2"
  std::string variant;   ///< framework build variant ("cu121"); else ""
  /// "apt" (packages from an apt repository), "wheels", "conda" (conda packages from the spec's
  /// channels) or "base" (the base image's own, nothing installed)
  std::string via;
  std::vector<std::string> packages; ///< the requests it made ("libnccl2=2.18*-*+cuda12.1", "torch==2.1.2")
  std::vector<std::string> facts;    ///< why, with the recipe rows and their sources
  bool operator==(const LockedStackChoice&) const = default;
};

/// The stack solver's result as the lock records it.
struct LockedStack {
  std::string recipes;            ///< where the recipes came from: "builtin", "dir PATH" or "git URL"
  std::string recipes_commit;     ///< git: the commit; else ""
  Digest recipes_digest;          ///< sha256 over the recipe files (envspec::RecipeOrigin::digest)
  std::string cuda;               ///< CUDA X.Y of the image ("" without CUDA)
  std::string driver_floor;       ///< lowest Linux driver ("530.30.02"), "" when unknown
  std::string min_cc;             ///< lowest GPU compute capability ("5.0"), "" when unknown
  std::vector<std::string> archs; ///< compute capabilities the framework binaries carry, if known
  std::string
      nvidia_require_cuda; ///< the NVIDIA_REQUIRE_CUDA value images get ("cuda>=12.1,driver>=530.30.02")
  std::vector<LockedStackChoice> choices; ///< in component order
  bool operator==(const LockedStack&) const = default;
};

/// The base image a lock builds on (`base: {image: ...}` or `{oci: ...}`): the manifest a build uses,
/// whatever the reference's tag points at later. docs/lockfile.md, "The base image".
struct LockedBase {
  std::string
      image; ///< the reference as the spec names it, normalised: "docker://HOST/REPO:TAG", "oci:PATH[:TAG]"
  Digest manifest;      ///< the platform's image manifest (not an index)
  Digest config;        ///< its config blob
  std::string platform; ///< "linux/amd64"
  bool operator==(const LockedBase&) const = default;
};

/// A locked stack as the lock writes it (its `stack` object; also `lockstep check --json`).
nlohmann::ordered_json locked_stack_json(const LockedStack& stack);

/// A parsed lockfile.
struct Lock {
  int schema = k_lock_schema;
  std::string tool;       ///< "lockstep 0.1.0": the version that wrote it
  Digest spec_digest;     ///< the spec's canonical digest (extends included) when it was locked
  std::int64_t epoch = 0; ///< the image epoch builds from this lock use
  std::string platform;   ///< the platform ("linux/amd64"); a multi-platform lock: the first
  /// Every platform of a multi-platform lock (`platforms:` in the spec), in the spec's order; empty
  /// for a lock of one platform. lock_for_platform() gives each platform's own lock.
  std::vector<std::string> platforms;
  /// A multi-platform lock: the spec digest of each platform's own spec (envspec::spec_for_platform),
  /// one per platform in `platforms` order; its share of the lock records it as its `spec_digest`.
  std::vector<Digest> platform_spec_digests;
  nlohmann::json inputs;          ///< lock_inputs() of the spec it was made from
  std::optional<LockedBase> base; ///< an image base, resolved when the lock was made
  /// A multi-platform lock over an image base: each platform's manifest (`base` is then empty).
  std::vector<LockedBase> bases;
  std::optional<LockedStack> stack; ///< the `stack:` solver's choices, when the spec has a stack
  /// A multi-platform lock whose platforms solved the stack differently (a framework's aarch64
  /// wheels don't take the x86_64 ones' pins): each platform's, in `platforms` order (`stack` is
  /// then empty). Platforms that solve it alike share `stack`.
  std::vector<std::pair<std::string, LockedStack>> stacks;
  std::vector<LockedRepo> repos;
  std::vector<LockedArtifact> artifacts;
};

/// The parts of a spec that decide what a lock holds: platform, Debian base, repositories,
/// requested packages and git sources. A lock is stale exactly when these differ; other keys (env,
/// labels, copy from the host, outputs) may change without re-locking.
nlohmann::json lock_inputs(const Spec& spec);

/// Human-readable differences between two lock_inputs() values, one line each
/// ("packages.apt: added htop", "base: debian bookworm -> trixie"); empty when equal.
std::vector<std::string> describe_input_changes(const nlohmann::json& locked, const nlohmann::json& now);

/// Where the lock of `spec_file` lives: the same name with `.lock` for `.yaml`/`.yml`.
std::filesystem::path default_lock_path(const std::filesystem::path& spec_file);

/// Sorts artifacts into the lock's order (kind, group, name, arch, version).
void sort_artifacts(std::vector<LockedArtifact>& artifacts);

/// The lockfile text (deterministic: same Lock, same bytes).
std::string render_lock(const Lock& lock);

/// Parses lockfile text strictly: unknown keys, wrong types, malformed digests or URLs, an
/// unsupported schema version or more than `max` bytes are invalid_input naming `what` and the key.
Result<Lock> parse_lock(std::string_view text, std::string_view what);

/// Reads and parses a lockfile. A missing file is a check_failed error that says to run `lockstep lock`.
Result<Lock> read_lock(const std::filesystem::path& path);

/// One platform's share of a multi-platform lock: exactly the lock a spec of that platform alone
/// has (envspec::spec_for_platform), the one that platform's image is built from and records. Its
/// artifacts (those naming it or no platform), its base, its spec digest, its inputs (`platform`
/// for `platforms`), its conda channels' subdirs (its own and noarch). The lock itself when it is
/// of one platform. The platform must be one of the lock's.
Lock lock_for_platform(const Lock& lock, const std::string& platform);

/// The share of `lock` (lock_for_platform; the lock itself when it is of one platform) whose
/// lock_digest is `digest`, the lock an image recording that digest was built from; nullopt when
/// none is.
std::optional<Lock> lock_share_with_digest(const Lock& lock, const Digest& digest);

/// The share (lock_for_platform) of the lock's platform whose architecture is `architecture` (an
/// image's config, "arm64"; its `platform` names it), nullopt when none is.
std::optional<Lock> lock_share_for_arch(const Lock& lock, std::string_view architecture);

/// The platforms a lock is for: `platforms`, or its one `platform`.
std::vector<std::string> lock_platforms(const Lock& lock);

/// The lock's stack, or its first platform's of `stacks` (every platform's is solved from the same
/// recipes, so either says where they came from); nullptr when it has none.
const LockedStack* lock_recipes_stack(const Lock& lock);

/// sha256 of the rendered lock, recorded in images built from it.
Digest lock_digest(const Lock& lock);

} // namespace lockstep::envspec
