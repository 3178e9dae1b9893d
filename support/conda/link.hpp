#pragma once
// Installing (linking) conda packages into a prefix, as a plan of files and no file written
// (../shared/reference/conda.md §7, §10): what each paths.json entry becomes in the prefix, the
// conda-meta/ records that make `conda list` and `micromamba list` see the environment, and the
// merge of many packages into one prefix. The caller writes the plan into an image layer.
//
// The rules, each as conda (conda/core/portability.py, path_actions.py) unless it says otherwise:
//  - Text prefix replacement: every byte occurrence of the placeholder, UTF-8 only (conda also
//    tries UTF-16/32 encodings; rattler and lockstep do not). A first line holding "#!PLACEHOLDER"
//    gets the prefix with its spaces escaped ("\ "). Then the shebang rule: when the first line is
//    a shebang (`#!`, optional spaces, an absolute executable without unescaped whitespace, the
//    rest of the line as options) longer than 127 bytes (the line without its newline) or whose
//    executable's directory holds an escaped space, the line becomes `#!/usr/bin/env NAME OPTIONS`
//    (NAME: the executable's last component). Only files with a placeholder are touched.
//  - Binary replacement (file_mode binary): each placeholder occurrence starts a C string that
//    runs to the next NUL; every placeholder inside it is replaced and the string padded with
//    NULs to its old length. A prefix longer than the placeholder where the file holds one is an
//    invalid_input error naming the file (conda's PaddingError; mamba would corrupt the file).
//    A placeholder with no NUL after it is left alone, as conda leaves it.
//  - noarch: python: `site-packages/X` goes to `SP/X` (SP: the python record's
//    python_site_packages_path, else lib/pythonX.Y/site-packages), `python-scripts/X` to `bin/X`;
//    link.json's entry points become `bin/CMD` (mode 0755): `#!PREFIX/bin/pythonX.Y`, or when that
//    line with its newline passes 127 bytes or holds a space, the sh/python polyglot conda writes,
//    then a script that imports the function, strips "-script.py(w)"/".exe" from argv[0] and exits
//    with its result. No .pyc is compiled (as pixi; Python compiles on first import, in memory on
//    a read-only image); .pyc files a package ships are installed like any file.
//  - Modes: the archive member's permission bits (at most 0755); directories 0755 when the archive
//    has none. Mtimes (§10 items 4-5): a file installed unchanged keeps its archive member's mtime,
//    so the .pyc files non-noarch packages ship stay valid; a rewritten file (its bytes changed by
//    the replacement), an entry point, a directory the archive lacks and every conda-meta/ file get
//    the caller's `generated_mtime` (SOURCE_DATE_EPOCH or the lock's time).
//  - Pre/post-link scripts (bin/.NAME-{pre-link,post-link,pre-unlink,post-unlink}.sh) are installed
//    as files but never run (as pixi); the plan lists them so the caller can say so.
//  - conda-meta/NAME-VERSION-BUILD.json: the locked record plus fn, url, channel (CHANNEL/SUBDIR, as
//    conda writes it), md5, sha256, size, files, paths_data, link and requested_spec(s); JSON with
//    sorted keys, two-space indent and non-ASCII escaped (Python's json.dumps(indent=2,
//    sort_keys=True), as conda writes). No host path: the package cache is a fixed fake root,
//    PREFIX/pkgs/<stem> (extracted_package_dir, link.source) and PREFIX/pkgs/<fn>
//    (package_tarball_full_path); link.type is 3 (copy), which is what writing a layer does.
//    paths_data records sha256 (the packaged file's), sha256_in_prefix and size_in_bytes (the
//    installed file's) for files, and entry points as path_type unix_python_entry_point.
#include "support/base/result.hpp"
#include "support/conda/package.hpp"
#include "support/conda/repodata.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::conda {

/// The default prefix of an image's conda environment.
inline constexpr std::string_view k_default_prefix = "/opt/conda";

/// Where and how packages are linked.
struct LinkOptions {
  std::string prefix = std::string(k_default_prefix); ///< absolute, normalised, no trailing '/'
  /// "3.11": the X.Y of the environment's python, needed by noarch: python packages.
  std::string python_version;
  /// The python record's python_site_packages_path (CEP 17), prefix-relative; "" for the default.
  std::string python_site_packages_path;
  std::int64_t generated_mtime = 0; ///< mtime of rewritten and generated files (see the file comment)
};

/// Where a package came from, as the lock has it; written into its conda-meta record.
struct PackageOrigin {
  /// The locked record (the channel's, repodata patches applied); index.json fills what it leaves
  /// empty. Text it views must outlive plan_package.
  Record record;
  std::string channel; ///< channel URL without the subdir ("https://conda.anaconda.org/conda-forge")
  std::string url;     ///< the archive's URL
  std::vector<std::string> requested_specs; ///< the spec's MatchSpecs that name this package
};

/// What a prefix path is.
enum class PrefixKind : std::uint8_t { file, symlink, directory };

/// Where a file's bytes were put by a caller that moved them out of memory (builder/image's conda
/// layer spills each package's files to a file of its own): that file's number, offset and size.
struct StoredData {
  std::uint32_t file = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

/// One path of the installed prefix.
struct PrefixPath {
  std::string path; ///< prefix-relative
  PrefixKind kind = PrefixKind::file;
  std::uint32_t mode = 0644;
  std::int64_t mtime = 0;
  std::string data;                 ///< a file's bytes as installed
  std::string target;               ///< a symlink's target
  bool generated = false;           ///< rewritten or created at install (mtime = generated_mtime)
  std::optional<StoredData> stored; ///< set (and `data` emptied) by a caller that spilled the bytes
};

/// One package's part of the prefix.
struct PackagePlan {
  std::string name;
  std::string dist;              ///< name-version-build
  std::string history_id;        ///< "conda-forge/linux-64::name-version-build", for conda-meta/history
  std::vector<PrefixPath> paths; ///< sorted by path; parent directories are implied
  PrefixPath conda_meta;         ///< conda-meta/<dist>.json
  std::vector<std::string> link_scripts;    ///< prefix paths of its pre/post-link scripts (not run)
  std::vector<std::string> requested_specs; ///< from the origin
};

/// Plans `pkg` (moved in: file bytes move into the plan) into the prefix of `options`. Errors
/// (invalid_input naming the package and path): a binary placeholder shorter than the prefix, a
/// noarch: python package without options.python_version, two entries landing on one path after
/// relocation, a record that names another package, a prefix that is not absolute and clean.
Result<PackagePlan> plan_package(Package pkg, const PackageOrigin& origin, const LinkOptions& options);

/// A path two packages install: the later one (in install order) wins, as conda's default
/// path_conflict=clobber leaves it.
struct Clobber {
  std::string path;
  std::string winner; ///< dist of the package whose file is installed
  std::string loser;  ///< dist of the package whose file is replaced
};

/// How the prefix's own files are written.
struct PrefixOptions {
  std::int64_t time = 0;                  ///< conda-meta/history's time (UTC) and those files' mtime
  std::string command = "lockstep build"; ///< history's `# cmd:` line
  bool frozen = true;         ///< write conda-meta/frozen (CEP 22): conda refuses to modify the env
  std::string frozen_message; ///< its {"message": ...}; "" writes an empty file
};

/// The whole prefix.
struct PrefixPlan {
  std::vector<PrefixPath> paths; ///< every path, conda-meta/ included, sorted bytewise
  std::vector<Clobber> clobbers; ///< in path order
  /// (dist, prefix path) of each pre/post-link script, in install order: installed, not run.
  std::vector<std::pair<std::string, std::string>> link_scripts;
};

/// conda's install order of packages (`depends[i]`: package i's dependency MatchSpecs): each after
/// the packages it depends on, ties by name; a dependency cycle is broken at its smallest name.
/// Returns indexes into `names`. Dependencies naming no package of `names` (virtual packages) are
/// ignored.
std::vector<std::size_t> install_order(const std::vector<std::string>& names,
                                       const std::vector<std::vector<std::string>>& depends);

/// Merges package plans given in install (topological) order into one prefix with conda-meta/history
/// and conda-meta/frozen. A later package's file or symlink replaces an earlier one's (a Clobber);
/// directories are shared. invalid_input: a file where another package has a directory (or the
/// reverse), a path under another package's file or symlink, a symlink that resolves outside the
/// prefix through other packages' symlinks, one name installed twice.
Result<PrefixPlan> merge_plans(std::vector<PackagePlan> plans, const PrefixOptions& options);

/// Text prefix replacement and the shebang rule of the file comment; exposed for tests.
std::string replace_prefix_text(std::string_view data, std::string_view placeholder, std::string_view prefix);

/// Binary prefix replacement of the file comment; `what` names the file in the error.
Result<std::string> replace_prefix_binary(std::string_view data, std::string_view placeholder,
                                          std::string_view prefix, std::string_view what);

/// The text of the entry point `ep` for a Python at `python` (absolute path).
std::string entry_point_script(const EntryPoint& ep, std::string_view python);

/// conda-meta/history for `plans` (a single revision installing them all).
std::string history_text(const std::vector<PackagePlan>& plans, const PrefixOptions& options);

} // namespace lockstep::conda
