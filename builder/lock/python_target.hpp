#pragma once
// The Python an image's wheels are locked and installed for: its version, glibc, machine and
// where its site directory is (docs/wheels.md).
#include "builder/lock/base_contents.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/oci/oci.hpp"

#include <string>
#include <string_view>

namespace lockstep::builder {

/// The Python an image gets from its Debian packages (or a base image's own, `base.python`), and
/// where wheels are installed for it.
struct PythonTarget {
  std::string full_version; ///< "3.11.2" (python_full_version)
  std::string version;      ///< "3.11" (python_version)
  std::string glibc;        ///< "2.36", from libc6
  std::string machine;      ///< "x86_64", "aarch64", ... (platform_machine)
  /// The `#!` of console scripts: "/usr/bin/python3" (python3-minimal in the lock), else
  /// "/usr/bin/python3.11"; `base.python` as written.
  std::string interpreter;
  std::string package; ///< "python3.11 3.11.2-6+deb12u1": where the version came from, for messages
  /// Relative to the root: the prefix wheels' data and headers go under ("usr/local", or the
  /// `base.python` interpreter's prefix, "opt/conda"), and where its scripts go.
  std::string data_dir = "usr/local";
  std::string scripts_dir = "usr/local/bin";
  /// The site directory, relative to the root: Debian's for locally installed packages
  /// ("usr/local/lib/python3.11/dist-packages"), or PREFIX/lib/python3.N/site-packages.
  std::string site;
  bool debian = true; ///< a Debian python3.X package (false: `base.python` or a conda python)
  bool conda = false; ///< the lock's conda python (packages.conda)

  [[nodiscard]] const std::string& site_packages() const { return site; }
  /// "cp311 manylinux x86_64 (CPython 3.11.2, glibc 2.36)", for messages.
  [[nodiscard]] std::string describe() const;
};

/// The file name a URL ends with, percent-decoded ("file:///a/b%20c/x.whl" -> "x.whl").
std::string url_filename(const std::string& url);

/// The target Python of an image built from `lock` for `platform`: the lock's `python3.X` deb (the
/// one `python3` selects when several are locked) and its `libc6`. An image without either is
/// invalid_input saying to add python3 to packages.apt. Over a base image (`base`), the base's
/// installed packages count too, where the lock doesn't replace them; with `interpreter` (the
/// spec's `base.python`, needs `base`) the target is that file of the base instead: X.Y from the
/// python3.N it resolves to, the full version from PREFIX/include/python3.N/patchlevel.h (else the
/// config's PYTHON_VERSION), glibc from the base's libc6. A path that is no interpreter in the base,
/// or whose version can't be told, is invalid_input saying what was looked for.
///
/// A lock with a conda `python` (and `conda_prefix`, the spec's conda.prefix) targets that
/// environment instead: its python's version, PREFIX/bin/pythonX.Y, PREFIX/lib/pythonX.Y/site-packages
/// (or the record's python_site_packages_path), glibc from libc6, else the python record's
/// `__glibc >=X.Y` floor.
Result<PythonTarget> python_target(const envspec::Lock& lock, const oci::Platform& platform,
                                   const BaseMetadata* base = nullptr, std::string_view interpreter = {},
                                   std::string_view conda_prefix = {});

} // namespace lockstep::builder
