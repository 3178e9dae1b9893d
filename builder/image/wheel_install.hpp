#pragma once
// Installing a Python wheel into an image layer without pip: the wheel (a zip, read with
// libarchive) is checked against its own RECORD and written as tar members per the binary
// distribution format spec ("Installing a wheel"): the root and .data/{purelib,platlib} into
// site-packages, .data/scripts (with `#!python` rewritten) into the scripts directory,
// .data/data and .data/headers into theirs, console_scripts/gui_scripts wrappers generated as pip
// writes them, and the .dist-info completed with INSTALLER and a RECORD of the installed files.
// No .pyc files are written (Python compiles on first import, or a later `run:` step may).
//
// Determinism: members are written in depth-first order with names sorted bytewise in each
// directory (as every lockstep layer), parent directories first and once per layer, modes
// 0644/0755, uid/gid 0, mtime = the target's epoch. The output depends only on the wheel's bytes
// and the target. See docs/wheels.md for the memory bound and the passes over the zip.
#include "support/base/log.hpp"
#include "support/base/result.hpp"
#include "support/oci/tar_writer.hpp"
#include "support/python/pep440.hpp"
#include "support/python/wheel.hpp"

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::builder {

/// Where a wheel's parts go in the image (paths relative to the image root, without a leading
/// '/'), and the interpreter its scripts run with.
struct WheelTarget {
  std::string site_packages = "usr/local/lib/python3.11/dist-packages"; ///< purelib and platlib
  std::string scripts_dir = "usr/local/bin";
  std::string data_dir = "usr/local";
  /// Empty: DATA_DIR/include/pythonX.Y/NAME, with pythonX.Y taken from `site_packages` (as pip's
  /// headers scheme path for the project NAME from METADATA).
  std::string headers_dir;
  std::string python = "/usr/bin/python3"; ///< absolute, no spaces: the `#!` of every script
  std::int64_t epoch = 0;                  ///< mtime of every member
  /// Zip members that come too early in the zip for the sorted output are held in memory up to
  /// this many bytes; beyond, the zip is read again for them (another pass, no extra decompression).
  std::uint64_t buffer_bytes = 256ULL << 20;
};

/// What was installed.
struct WheelInstallInfo {
  std::string project; ///< normalised name
  PyVersion version;
  CoreMetadata metadata;
  WheelInfo wheel;
  std::string dist_info;            ///< tar path of the .dist-info directory
  std::vector<std::string> files;   ///< tar paths of the regular files written, in order
  std::vector<std::string> scripts; ///< tar paths of the generated entry point wrappers
  std::uint64_t bytes = 0;          ///< regular file bytes written
  int zip_passes = 0;               ///< reads of the zip after the listing (1 unless it was out of order)
};

/// Reads the wheel `whl`, verifies every member against the wheel's RECORD (sha256 and size; a
/// member missing from RECORD, a RECORD row without its member, or any mismatch is invalid_input
/// naming the member), and writes the installed files into `tar` (the LayerContentWriter contract
/// of builder/image/layer_builder.hpp; members may be written before a later member fails to verify, so
/// the caller must discard the layer on error, as build_generated_layer does). `seen` holds the tar
/// paths already written to this layer by earlier wheels, directories with a trailing '/'; a
/// directory in it is not written again, and a file in it (or a file where another wheel made a
/// directory) is an error. `what` names the wheel in messages; when it (or the path's file name)
/// is a wheel file name, the .dist-info directory must match its project and version. Unsafe zip
/// members (absolute, "..", backslashes, control characters, duplicates, symlinks, encryption,
/// over 16 GiB, over 64 GiB in all or over 500,000 members) are invalid_input.
Result<WheelInstallInfo> install_wheel(TarWriter& tar, log::Progress& progress,
                                       const std::filesystem::path& whl, const WheelTarget& target,
                                       std::set<std::string>& seen, std::string_view what);

} // namespace lockstep::builder
