#pragma once
// What lockstep reads of a base image's filesystem before installing over it: the dpkg database
// (status, diversions, statoverride, file lists, trigger interests), apt's sources, whether the
// image has /bin/sh and dpkg, and each Python distribution's METADATA. Read from the layers once
// (without hashing), then kept in the store by manifest digest, so locking and building again cost
// nothing. docs/debs.md, "Installing over a base image".
#include "builder/lock/base_image.hpp"
#include "envspec/stack/stack.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"
#include "support/store/blob_store.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::builder {

/// A base image's installed state, as the resolver and the package layers need it.
struct BaseMetadata {
  Digest manifest;               ///< the base's manifest digest
  bool has_dpkg_status = false;  ///< /var/lib/dpkg/status exists
  std::string dpkg_status;       ///< its text
  std::string dpkg_arch;         ///< /var/lib/dpkg/arch ("" when absent)
  std::string dpkg_diversions;   ///< /var/lib/dpkg/diversions ("" when absent)
  std::string dpkg_statoverride; ///< /var/lib/dpkg/statoverride ("" when absent)
  /// /var/lib/dpkg/info/NAME.list by NAME ("libc6:amd64", "base-files"): each package's paths.
  std::map<std::string, std::string> dpkg_lists;
  /// /var/lib/dpkg/triggers/NAME by NAME ("File", "ldconfig", ...): trigger interests and state.
  std::map<std::string, std::string> dpkg_triggers;
  /// apt's sources by image path ("etc/apt/sources.list", "etc/apt/sources.list.d/cuda.list").
  std::map<std::string, std::string> apt_sources;
  /// Each *.dist-info directory (image path) and its METADATA text.
  std::map<std::string, std::string> dist_info;
  /// Every file name in /var/lib/dpkg/info ("libc6:amd64.postinst", ...), sorted.
  std::vector<std::string> dpkg_info_names;
  /// Every symbolic link of the final view (image path -> target as stored), so files installed
  /// over the base are placed through its links, never replacing one with a directory.
  std::map<std::string, std::string> symlinks;
  /// Every directory of the final view (image paths, sorted).
  std::vector<std::string> directories;
  /// Each CPython's include/python3.N/patchlevel.h (image path -> text), for the full version of
  /// a Python that is not a Debian package (`base.python`).
  std::map<std::string, std::string> python_headers;
  /// Every regular file named python3 or python3.N (image paths, sorted): what `base.python` may name.
  std::vector<std::string> python_executables;
  /// The image config's Env ("PYTHON_VERSION=3.11.9", ...).
  std::vector<std::string> config_env;
  std::string passwd;      ///< /etc/passwd ("" when absent): names in statoverride
  std::string group;       ///< /etc/group ("" when absent)
  bool merged_usr = false; ///< /bin, /sbin and /lib are links into /usr (Debian 12, Ubuntu 22.04)
  bool has_sh = false;     ///< /bin/sh resolves to a file
  bool has_dpkg = false;   ///< /usr/bin/dpkg resolves to a file
};

/// Reads `base`'s metadata: from the store's record for its manifest when there is one, else from
/// its layers (streamed where they lie; nothing is unpacked), recording it for next time. A
/// malformed layer is invalid_input naming the base.
Result<BaseMetadata> read_base_metadata(const OpenedBase& base, const BlobStore& store);

/// As read_base_metadata(), for a base whose layers are in `store` already (a build): its layers
/// are read from the store's files.
Result<BaseMetadata> read_stored_base_metadata(const oci::OpenedImage& image, const BlobStore& store,
                                               const std::string& what);

/// The metadata read_base_metadata() recorded for manifest `manifest`, if the store has it (offline:
/// `lockstep check` uses it when the base was locked on this machine).
std::optional<BaseMetadata> cached_base_metadata(const Digest& manifest, const BlobStore& store);

/// `path` (absolute, as a package names it: "/bin/foo") with its parents resolved through the base's
/// symbolic links, as dpkg would place it, relative to the root ("usr/bin/foo"); the last component
/// is not followed. Beyond 40 links the rest is left as it is.
std::string resolve_in_base(const BaseMetadata& base, const std::string& path);

/// "3.11.2", "3.13.0rc1", "3.12.0~b1" (a Debian upstream version, CPython's PY_VERSION) as the PEP 440
/// python_full_version of X.Y `version` ("3.13.0rc1"); nullopt when it is not X.Y[.Z] of `version`.
std::optional<std::string> python_full_version(const std::string& text, const std::string& version);

/// A base image's own Python (`base.python`), as its files tell it. Paths are relative to the root.
struct BasePython {
  std::string interpreter;  ///< as the spec names it ("/usr/local/bin/python3")
  std::string file;         ///< the file it resolves to ("usr/local/bin/python3.11")
  std::string version;      ///< "3.11"
  std::string full_version; ///< "3.11.9"
  std::string prefix;       ///< "usr/local" ("" for /bin/python3.N)
  std::string bin;          ///< "usr/local/bin"
  std::string site;         ///< "usr/local/lib/python3.11/site-packages"
  std::string from;         ///< where the full version was read, for messages
};

/// The base's interpreter `interpreter` (absolute, normalised): followed through the base's links to
/// a python3 or python3.N file in PREFIX/bin; X.Y from that name (or the prefix's one
/// include/python3.N), the full version from PREFIX/include/python3.N/patchlevel.h's PY_VERSION, else
/// the config's PYTHON_VERSION. Anything else is invalid_input saying what was looked for.
Result<BasePython> find_base_python(const BaseMetadata& base, const std::string& interpreter);

/// `lock` with the base's installed packages added as `deb` artifacts (name, version, arch; reason
/// "installed in the base image"; no URL or digest) where the lock has no deb of that name and
/// architecture: what the image ends up with, for what is derived from its packages (the target
/// Python, the image facts). A status that doesn't parse is invalid_input.
Result<envspec::Lock> lock_with_base_packages(const envspec::Lock& lock, const BaseMetadata& base);

/// The stack solver's context over `base`: the spec's, plus the base's CUDA (the highest X.Y of an
/// installed cuda-cudart-X-Y) and Python (the highest installed python3.X, or the spec's
/// `base.python`), named after `base_name`. A status that doesn't parse, or a `base.python` that
/// find_base_python() refuses, is invalid_input.
Result<envspec::StackContext> stack_context_over_base(const envspec::Spec& spec, const BaseMetadata& base,
                                                      const std::string& base_name);

/// Warnings for the repositories the base's apt sources name (its /etc/apt/sources.list and
/// sources.list.d) that the spec's `repos` lack, each with the `repos` entry to add: lockstep never
/// uses a base's sources on its own. A suite counts as present when a spec repository has that
/// suite (any mirror) with those components; a flat repository when a spec repository has its URI.
/// Unreadable source files are warned about too.
std::vector<std::string> sources_the_spec_lacks(const envspec::Spec& spec, const BaseMetadata& base);

} // namespace lockstep::builder
