#pragma once
// An apt repository's Release file (the text inside InRelease once its signature is checked):
// what the suite is, and the sha256 and size of every index it lists. Format:
// https://wiki.debian.org/DebianRepository/Format#A.22Release.22_files
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

/// One index file a Release lists under SHA256.
struct AptIndexEntry {
  Digest sha256;
  std::uint64_t size = 0;
};

/// A parsed Release file.
struct AptRelease {
  std::string origin, label, suite, codename, version, date, valid_until;
  std::vector<std::string> architectures;
  /// `No-Support-for-Architecture-all`: "Packages" when `all` packages are listed in every
  /// architecture's index (Debian's archives), so apt never reads binary-all for them.
  std::string no_support_for_architecture_all;
  std::vector<std::string> components;
  bool acquire_by_hash = false;

  /// Whether apt reads the `arch` indexes of this Release (apt's debReleaseIndex): an empty
  /// `Architectures` supports every architecture; `all` only when listed and not left to the
  /// architectures' own indexes (No-Support-for-Architecture-all: Packages).
  [[nodiscard]] bool supports_architecture(std::string_view arch) const;
  std::map<std::string, AptIndexEntry> sha256; ///< by path relative to the dists/SUITE directory

  /// Parses Release text; `what` names it in errors. A Release without SHA256 entries, or with a
  /// malformed one, is invalid_input (apt's MD5Sum and SHA1 lists are not trusted).
  static Result<AptRelease> parse(std::string_view text, std::string_view what);
  /// The entry for `path` ("main/binary-amd64/Packages.xz"), or an invalid_input error naming
  /// the paths that exist for that directory.
  [[nodiscard]] Result<AptIndexEntry> index(std::string_view path) const;
};

/// The signed text of an InRelease file (a clearsigned OpenPGP message) without the armor and
/// dash-escaping. The signature itself must be checked by gpgv/sqv before the text is trusted.
Result<std::string> clearsigned_text(std::string_view inrelease, std::string_view what);

} // namespace lockstep
