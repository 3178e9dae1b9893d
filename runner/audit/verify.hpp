#pragma once
// `lockstep verify`: does an image hold what its package records say, and what its lock says?
//   - every package dpkg lists as installed: each file of its md5sums, and each conffile of its
//     status paragraph, exists with that MD5 (dpkg's own record, as `dpkg --verify` checks);
//   - every .dist-info RECORD row with a sha256: the file exists with that digest and size (RECORD
//     itself and rows without a hash are skipped, as pip does);
//   - every conda-meta record's paths_data (runner/audit/conda_meta.hpp): each file exists with its
//     sha256 in the prefix and size, each soft link is a symbolic link;
//   - with a lock: the image was built from it (dev.lockstep.lock.digest), every deb is installed at
//     the lock's name, version and architecture and no other; every wheel is installed at the lock's
//     version and no other; every conda package at the lock's version and build and no other.
// Also the image's package lists, which `lockstep diff` compares. docs/verify-diff.md.
#include "envspec/documents/components.hpp"
#include "envspec/lock/lockfile.hpp"
#include "runner/audit/conda_meta.hpp"
#include "runner/audit/image_contents.hpp"
#include "support/base/result.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::runner {

/// One conffile of an installed package (status field Conffiles).
struct Conffile {
  std::string path; ///< absolute, as dpkg lists it
  std::string md5;  ///< lowercase hex; "" for `newconffile` (not configured yet)
  bool obsolete = false;
};

/// One file dpkg recorded for a package (its md5sums).
struct DebFile {
  std::string path; ///< relative to the root, as md5sums lists it ("usr/bin/ls-app")
  std::string md5;  ///< lowercase hex
  int line = 0;     ///< in the md5sums file
};

/// One package paragraph of /var/lib/dpkg/status.
struct InstalledDeb {
  std::string name;
  std::string version;
  std::string arch;
  std::string multi_arch; ///< "same", "foreign", "allowed" or ""
  std::string want;       ///< first word of Status: install, hold, deinstall, purge, unknown
  std::string state;      ///< third word: installed, unpacked, half-configured, config-files, ...
  std::vector<Conffile> conffiles;
  std::string md5sums;        ///< the md5sums file found for it (image path), "" when none
  std::vector<DebFile> files; ///< its md5sums entries, in file order
  int line = 0;               ///< of the paragraph in the status file
  /// True for "installed" (what verify checks and diff lists).
  [[nodiscard]] bool installed() const { return state == "installed"; }
};

/// One .dist-info directory in the image.
struct InstalledDist {
  std::string dir;       ///< image path of the .dist-info directory
                         ///< ("usr/local/lib/python3.11/dist-packages/demo-1.0.dist-info")
  std::string name;      ///< METADATA Name as written (else from the directory name)
  std::string project;   ///< PEP 503 normalised
  std::string version;   ///< METADATA Version as written (else from the directory name)
  std::string installer; ///< INSTALLER's first line ("pip", "lockstep"), "" when absent
  bool from_deb = false; ///< its METADATA belongs to a Debian package (dpkg's md5sums list it)
};

/// A dpkg diversion (/var/lib/dpkg/diversions): `from` is found at `to` for every package but `by`.
struct Diversion {
  std::string to; ///< absolute
  std::string by; ///< the diverting package, ":" for a local diversion
};

/// What an image has installed: the dpkg database and the .dist-info directories.
struct ImagePackages {
  bool has_dpkg = false;                       ///< the image has /var/lib/dpkg/status
  std::vector<InstalledDeb> debs;              ///< every paragraph, sorted by name then architecture
  std::vector<InstalledDist> dists;            ///< sorted by directory
  std::map<std::string, Diversion> diversions; ///< by the diverted path (absolute)
  std::string native_arch;                     ///< /var/lib/dpkg/arch's first line, else the config's
  std::vector<InstalledConda> condas;          ///< conda-meta records, by prefix then name
};

/// Parses the image's dpkg status, md5sums and diversions, and finds its .dist-info directories. A
/// malformed file is invalid_input naming the image, the file and the line ("oci:out:
/// /var/lib/dpkg/status:12: ..."); so is an md5sums path with a ".." component.
Result<ImagePackages> image_packages(const ImageContents& contents);

/// The image as diff compares it: its installed debs and the wheels not installed by a deb
/// (complete), and the "stack" components of its dev.lockstep.* labels (complete).
envspec::ComponentSet image_components(const ImageContents& contents, const ImagePackages& packages);

/// One thing verify found wrong.
struct VerifyProblem {
  enum class Kind {
    lock_digest,   ///< the image records another lock's digest
    lock_platform, ///< a multi-platform lock without the image's platform
    deb_missing,   ///< in the lock, not installed
    deb_extra,     ///< installed, not in the lock
    deb_changed,   ///< installed at another version or architecture
    deb_state,     ///< dpkg lists it half-installed, unpacked, ...
    wheel_missing, ///< in the lock, no .dist-info
    wheel_extra,   ///< a .dist-info the lock doesn't name
    wheel_changed, ///< another version
    conda_missing, ///< in the lock, no conda-meta record
    conda_extra,   ///< a conda-meta record the lock doesn't name
    conda_changed, ///< another version or build
    link_type,     ///< a soft link conda-meta records is not a symbolic link
    file_missing,  ///< a recorded file is not there
    file_type,     ///< a recorded file is not a regular file
    md5,           ///< MD5 differs from dpkg's record (md5sums or Conffiles)
    sha256,        ///< SHA-256 differs from RECORD or conda-meta
    size,          ///< size differs from RECORD or conda-meta
  };
  Kind kind = Kind::file_missing;
  std::string package; ///< "ls-lib", "demo 1.0"; "" for the lock digest
  std::string path;    ///< file problems: the absolute image path
  std::string message; ///< the line printed ("/usr/lib/libfoo.so.1: md5 differs from libfoo1's record")
};

/// What verify checked and found.
struct VerifyReport {
  std::string image;            ///< as named
  std::optional<Digest> digest; ///< manifest digest, or sha256 of a SIF
  std::string lock;             ///< the lock file given, "" when none
  std::string lock_platform;    ///< a multi-platform lock: the platform whose share was compared
  std::size_t debs = 0;         ///< installed packages checked
  std::size_t wheels = 0;       ///< .dist-info directories with a RECORD checked
  std::size_t conda = 0;        ///< conda-meta records checked
  std::size_t files = 0;        ///< file records checked
  std::vector<VerifyProblem> problems;
  /// True when nothing is wrong.
  [[nodiscard]] bool ok() const { return problems.empty(); }
};

/// What to verify against.
struct VerifyOptions {
  const envspec::Lock* lock = nullptr; ///< compare the package sets with it, when given
  std::string lock_name;               ///< the lock's file, for messages
};

/// Reads an image for verify_contents: read_image_contents, then, when a RECORD names files that
/// got no SHA-256 (outside wants_sha256's paths), a second read that hashes just those.
Result<ImageContents> read_for_verify(const ImageArg& image);

/// Checks `contents` (read with digests). Problems come in a fixed order: the lock digest, the
/// lock's debs and wheels (by name), then file problems package by package in name order, files in
/// record order. A malformed status, md5sums, diversions or RECORD file, or a record naming a path
/// outside the image, is invalid_input naming the file and the line or entry.
Result<VerifyReport> verify_contents(const ImageContents& contents, const VerifyOptions& options);

/// The text form: a summary line, then one line per problem.
std::string render_verify_text(const VerifyReport& report);

/// The JSON form, keys in this order:
///   {"verify":1,"image":"oci:out","digest":"sha256:…"|null,"lock":"lockstep.lock"|null,"ok":false,
///    "checked":{"debs":8,"wheels":1,"conda":0,"files":42},
///    "problems":[{"kind":"md5","package":"ls-lib","path":"/usr/lib/…","message":"…"}]}
nlohmann::ordered_json verify_json(const VerifyReport& report);

} // namespace lockstep::runner
