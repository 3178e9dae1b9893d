#pragma once
// The spec (lockstep.yaml, schema version 1) as typed data. See docs/spec.md for the full schema,
// the `extends` merge rules and the canonical digest.
#include "envspec/yaml/diagnostics.hpp"
#include "support/base/result.hpp"
#include "support/codec/compress.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/oci.hpp"
#include "support/oci/registry_ref.hpp"
#include "support/oci/squashfs.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::envspec {

/// How permission bits of copied files are chosen.
enum class ModePolicy {
  normalize, ///< default: files 0644, or 0755 when the owner may execute; dirs 0755; no setuid/setgid/sticky
  preserve,  ///< the source's permission bits, setuid/setgid/sticky included (for copying a root filesystem)
  fixed,     ///< `mode: 0NNN`: every regular file gets exactly these bits; dirs 0755
};

/// How ownership of copied files is chosen.
enum class OwnerPolicy {
  fixed,    ///< default 0:0, or `owner: UID[:GID]`
  preserve, ///< the source's numeric uid/gid
};

/// One `copy:` item: host files (`from`) or a git repository at a revision (`git` + `rev`).
struct CopyItem {
  std::filesystem::path from; ///< absolute, lexically normal path on the host (empty for git items)
  std::string from_text;      ///< as written in the spec (for messages and history)
  std::string git;            ///< `git: URL` (a URL, or a host path made absolute); empty for host files
  std::string git_text;       ///< `git` as written
  std::string rev;            ///< `rev:` a full commit id, a tag or a branch (git items)
  std::string to;             ///< normalised absolute path in the image ("/opt/app"); "/" allowed
  bool to_is_dir = false;     ///< `to` was written with a trailing '/'
  ModePolicy mode_policy = ModePolicy::normalize;
  std::uint32_t mode = 0; ///< with ModePolicy::fixed
  OwnerPolicy owner_policy = OwnerPolicy::fixed;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  SourceLocation location;      ///< of the item
  SourceLocation from_location; ///< of the `from` value
};

/// Which packages a Debian bootstrap base starts from (mmdebstrap's variants of the same names).
enum class DebianVariant {
  essential, ///< the packages marked Essential: yes
  apt,       ///< essential + apt (the default)
  required,  ///< essential + every package of Priority: required
};

/// The `base:` image.
struct BaseImage {
  /// registry: `{image: docker://REF}`; `{image: oci:DIR[:TAG]}` and `{image: oci-archive:FILE[:TAG]}`
  /// are Kind::oci, as `{oci: PATH, tag: TAG}` is.
  enum class Kind { scratch, oci, registry, debian };
  Kind kind = Kind::scratch;
  std::filesystem::path path; ///< OCI layout directory or OCI archive file (absolute), Kind::oci
  std::string path_text;      ///< as written
  std::string tag;            ///< optional `tag: TAG` selecting a ref.name in the layout
  /// `PATH@sha256:...` (Kind::oci) or `docker://REF@sha256:...` (Kind::registry): the digest of the
  /// base's manifest (or, in a registry, of the index it is reached through)
  std::optional<Digest> pin;
  oci::RegistryRef remote;      ///< Kind::registry: the image, normalised as Docker does
  std::string key = "base.oci"; ///< the key the base was written under, for messages ("base.image")
  std::string suite;            ///< Kind::debian: the suite or codename (`debian: bookworm`)
  DebianVariant variant = DebianVariant::apt; ///< Kind::debian
  /// Kind::oci and Kind::registry: `python: /usr/local/bin/python3.11`, the base's Python when it is
  /// not a Debian package (an absolute image path, normalised); wheels go into its site-packages.
  std::string python;
  SourceLocation python_location;
  SourceLocation location; ///< of the `oci` or `image` value (or of `base` itself)
};

/// One `repos:` entry.
struct Repo {
  enum class Kind { apt, pypi, wheels, conda };
  Kind kind = Kind::apt;
  /// apt/pypi: the URL (http, https or file); conda: the channel's URL (a bare name such as
  /// `conda-forge` made https://conda.anaconda.org/conda-forge); wheels: unused
  std::string url;
  std::string url_text;
  std::string suite; ///< apt: the suite or codename (empty for a flat repository or several suites)
  /// apt: every suite, in the spec's order, all with the entry's priority (`suites: [jammy,
  /// jammy-updates]`); {suite} for `suite:` (then `suite` is that one); empty for a flat repository.
  std::vector<std::string> suites;
  std::vector<std::string> components; ///< apt: e.g. [main] (empty for a flat repository)
  /// apt: the entry's pin priority (`priority:`, apt_preferences(5)'s meaning): a name is taken from
  /// the entries of the highest priority that have it, and among equal ones (every entry without
  /// the key has apt's default, 500) the highest version wins.
  int priority = 500;
  bool flat = false; ///< apt: `flat: true`, a repository without dists/
  /// apt: `snapshot: YYYYMMDDTHHMMSSZ`, the repository as a snapshot service served it then (`url` is
  /// then the snapshot's URL, `url_text` the URL as written); "" for the live repository.
  std::string snapshot;
  /// apt: the snapshot service's URL of this archive, laid out BASE/<timestamp>/ like
  /// snapshot.debian.org/archive/debian (`snapshot_url:`, else known for Debian's and Ubuntu's
  /// archives: snapshot_base_of). A build fetches a pool file upstream no longer has from there.
  std::string snapshot_url;
  std::filesystem::path keyring; ///< apt: the OpenPGP keyring (absolute) Release files must be signed by
  std::string keyring_text;
  std::filesystem::path dir; ///< wheels: a local directory of .whl files (absolute)
  std::string dir_text;
  /// conda: the subdirs read (`subdirs: [linux-64, noarch]`); empty: the platform's and noarch.
  std::vector<std::string> subdirs;
  SourceLocation location;
};

/// The snapshot service's URL of the archive at `url` (an apt repository URL as written, without a
/// snapshot timestamp): snapshot.debian.org/archive/NAME for deb.debian.org/NAME and
/// security.debian.org/NAME, snapshot.ubuntu.com/ubuntu for archive.ubuntu.com/ubuntu and
/// security.ubuntu.com/ubuntu; "" for others.
std::string known_snapshot_base(std::string_view url);

/// The snapshot URL of the pool file `file_url` of the apt repository `repo_url` as it was at
/// `release_date` (a Release file's Date, RFC 2822): BASE/<timestamp>/<path under repo_url>, the
/// timestamp six hours after the date (snapshot.debian.org imports four times a day, so the snapshot
/// after a Release has its files). "" when `file_url` is not under `repo_url` or the date does not
/// parse.
std::string snapshot_file_url(std::string_view base, std::string_view repo_url, std::string_view file_url,
                              std::string_view release_date);

/// One requested package: `NAME`, `NAME=VERSION`, `NAME:ARCH` (apt) or a PEP 508 requirement (pip).
struct PackageRequest {
  std::string text;    ///< as written
  std::string name;    ///< apt: the package name; pip: the whole requirement text
  std::string version; ///< apt: `=VERSION`, else empty
  std::string arch;    ///< apt: `:ARCH`, else empty
  /// pip: sha256 digests (hex) from a requirements file's `--hash=sha256:` options; the locked
  /// wheel must have one of them. Empty: any file of the pinned version.
  std::vector<std::string> hashes;
  std::string from_file; ///< pip: the requirements file it came from (as written), else empty
  /// Where it was asked for when not in `packages:` ("stack.nccl" for a package the stack solver
  /// added); empty for the spec's own requests.
  std::string origin;
  /// conda: asked for only where a channel offers the name (the stack's `pytorch-cuda`, which the
  /// pytorch channel has and conda-forge doesn't); dropped otherwise.
  bool if_offered = false;
  SourceLocation location;
};

/// The `packages:` section.
struct Packages {
  std::vector<PackageRequest> apt;
  std::vector<PackageRequest> pip;
  /// conda MatchSpecs (`python=3.11`, `conda-forge::numpy>=1.26`, `blas=*=openblas`): `text` as
  /// written, `name` the package name (support/conda/match_spec.hpp reads the rest).
  std::vector<PackageRequest> conda;
};

/// The `conda:` section: how the conda environment is solved and where it goes.
struct CondaSettings {
  std::string prefix = "/opt/conda"; ///< `prefix:` the environment's absolute path in the image
  /// `channel_priority:` strict (default: a name's records come from the first channel that has
  /// it) or flexible (every channel's records, the channel order first).
  std::string channel_priority = "strict";
  /// `virtual_packages:` overrides of what the image provides (docs/conda.md, "Virtual packages"):
  /// "glibc", "linux", "archspec", "cuda" to a version ("2.28", "5.10", "x86_64_v3", "12.4"), or
  /// "" to leave it out.
  std::map<std::string, std::string> virtual_packages;
  SourceLocation location;
};

/// The `outputs:` section; every path is absolute.
struct Outputs {
  std::optional<std::filesystem::path> oci;
  std::optional<std::filesystem::path> oci_archive;
  std::optional<std::filesystem::path> docker_archive;
  std::optional<std::filesystem::path> sif;
  /// SBOM files written beside the image (`outputs.sbom`): *.spdx.json (SPDX 2.3) or *.cdx.json
  /// (CycloneDX 1.6), by name.
  std::vector<std::filesystem::path> sbom;
  Codec compression = Codec::gzip;                               ///< layer compression
  SquashfsCompressor sif_compression = SquashfsCompressor::gzip; ///< the SIF's squashfs blocks
};

/// One `run:` step: a shell command run in the build sandbox over the image built so far; its
/// filesystem changes become a layer.
struct RunStep {
  std::string sh;       ///< the command, run with `/bin/sh -c`
  bool network = false; ///< `network: true`: the host network is available (the build is impure)
  SourceLocation location;
};

/// The `stack:` section: what the team wants of the GPU/MPI/Python stack, as version constraints
/// the solver (envspec/stack/stack.hpp) turns into concrete packages from the recipes.
struct StackRequest {
  /// One requested component: the constraint text as written ("12.1", ">=12.1,<13") and where.
  struct Item {
    std::string text;
    SourceLocation location;
    [[nodiscard]] bool given() const { return !text.empty(); }
  };
  Item cuda;              ///< `cuda: "12.1"`
  Item cudnn;             ///< `cudnn: "8.9"`
  Item nccl;              ///< `nccl: "2.18"`
  Item python;            ///< `python: "3.11"`
  std::string mpi;        ///< `mpi: openmpi@4.1`: the implementation ("openmpi", "mpich"), else ""
  Item mpi_version;       ///< its version constraint ("4.1"), may be empty
  std::string framework;  ///< `framework: pytorch@2.1`: "pytorch", "tensorflow", "jax", else ""
  Item framework_version; ///< "2.1"
  SourceLocation mpi_location;
  SourceLocation framework_location;
  /// `cuda_flavor:` which CUDA packages a system CUDA installs: "base" (the runtime library,
  /// default), "runtime" (all CUDA libraries) or "devel" (the whole toolkit).
  std::string cuda_flavor = "base";
  /// `recipes: {git: URL, rev: REV}`: a team's recipes repository instead of the built-in recipes.
  std::string recipes_git;      ///< URL, or an absolute host path
  std::string recipes_git_text; ///< as written
  std::string recipes_rev;
  SourceLocation recipes_location;
  SourceLocation location; ///< of the `stack` key
};

/// A validated spec with `extends` merged.
struct Spec {
  int schema = 1;
  std::string name;
  oci::Platform platform; ///< default linux/amd64; with `platforms:`, the first
  /// Every platform the spec builds (`platforms:`), in the spec's order; `platform` alone for a
  /// single-platform spec. One lock holds them all; the build writes one image each under an index.
  std::vector<oci::Platform> platforms;
  BaseImage base;
  std::vector<Repo> repos; ///< in priority order
  Packages packages;
  CondaSettings conda;               ///< `conda:` (its defaults when the spec has none)
  std::optional<StackRequest> stack; ///< `stack:`, when the spec has one
  std::vector<CopyItem> copy;
  std::vector<RunStep> run;                             ///< in order, after the copy layer
  std::vector<std::pair<std::string, std::string>> env; ///< sorted by name
  std::map<std::string, std::string> labels;
  std::optional<std::vector<std::string>> entrypoint;
  std::optional<std::vector<std::string>> cmd;
  std::optional<std::string> workdir;
  std::optional<std::string> user;
  Outputs outputs;
  /// `mirrors`: vendor directories (absolute, resolved against the spec's directory) and
  /// docker://REGISTRY/REPO repositories a build fetches the lock's files from first.
  std::vector<std::string> mirrors;

  std::filesystem::path file; ///< the spec file (absolute)
  std::filesystem::path dir;  ///< its directory: relative paths resolve against it
  std::vector<std::filesystem::path>
      files;                ///< every file read, the spec first, then `extends` in merge order
  nlohmann::json canonical; ///< the canonical form the digest is computed over
  Digest digest;            ///< sha256 of canonical.dump()

  /// True when the spec names anything that must be pinned in a lock before building: packages, a
  /// Debian base, a registry base (its tag may move), or git sources.
  [[nodiscard]] bool needs_lock() const;
};

/// The spec as it is for one of its platforms (`platforms:`): `platform` that one, `platforms` it
/// alone, and the canonical form and digest a spec naming `platform:` alone would have, so each
/// platform's image of a multi-platform build is the image a build of that platform alone gives.
Spec spec_for_platform(const Spec& spec, const oci::Platform& platform);

/// The Debian architecture name for an OCI platform (amd64, arm64, armhf, i386, ppc64el, ...), or ""
/// when Debian has none.
std::string debian_arch(const oci::Platform& platform);

/// The conda subdir of an OCI platform: linux/amd64 -> linux-64, linux/arm64 -> linux-aarch64,
/// linux/ppc64le -> linux-ppc64le, linux/s390x -> linux-s390x; "" when conda has none.
std::string conda_subdir(const oci::Platform& platform);

} // namespace lockstep::envspec
