#pragma once
// Installing Debian packages the apko way: a .deb's data.tar is streamed straight into an image
// layer (no dpkg at build time), the dpkg database is written beside it so that dpkg and apt in
// the image know what is installed, and a shell script configures the packages inside the build
// sandbox the way mmdebstrap does (docs/debs.md).
//
// A .deb is an ar archive: "debian-binary" ("2.0\n"), then "control.tar[.gz|.xz|.zst]", then
// "data.tar[.gz|.xz|.bz2|.lzma|.zst]" (deb(5)); members whose names start with '_' may sit between
// them and are ignored. libarchive reads the ar container and the inner tars; every name, size and
// type is checked, since the archive is hostile input.
#include "support/base/log.hpp"
#include "support/base/result.hpp"
#include "support/oci/tar_writer.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::builder {

/// What a .deb's control.tar holds.
struct DebControl {
  std::string control;      ///< the control file's text, as shipped
  std::string package;      ///< Package (a valid Debian package name)
  std::string version;      ///< Version (a valid Debian version), as written
  std::string architecture; ///< Architecture ("amd64", "all", ...)
  std::string multi_arch;   ///< Multi-Arch ("same", "foreign", "allowed", "no") or empty
  /// The other control members dpkg keeps in /var/lib/dpkg/info, by name: md5sums, conffiles,
  /// preinst, postinst, prerm, postrm, config, templates, triggers, shlibs, symbols. Other names are
  /// ignored.
  std::map<std::string, std::string> files;

  /// True when the package has a preinst or postinst (prerm and postrm don't run at install).
  [[nodiscard]] bool has_maintainer_scripts() const;
  /// dpkg's name for the package in info file names and triggers: "name:arch" for Multi-Arch:
  /// same, else "name".
  [[nodiscard]] std::string dpkg_name() const;
};

/// Reads and validates the control part of `deb`; `what` names the package in errors (e.g.
/// "libc6_2.36-9_amd64.deb"). A malformed archive or control file is invalid_input.
Result<DebControl> read_deb_control(const std::filesystem::path& deb, std::string_view what);

/// A dpkg-divert entry of a base image: the file `from` of every package but `by` goes to `to`.
struct Diversion {
  std::string to; ///< "/usr/bin/foo.distrib"
  std::string by; ///< the diverting package, or ":" for a local diversion
};

/// A dpkg-statoverride entry of a base image: the owner and mode a path gets, whoever ships it.
struct StatOverride {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint32_t mode = 0; ///< permission bits, setuid/setgid/sticky included
};

/// How package contents map into the layer.
struct DebLayerOptions {
  std::int64_t epoch = 0; ///< member mtimes are clamped to [0, epoch]
  /// Debian bookworm's merged /usr: /bin, /sbin, /lib, /lib32, /lib64, /libx32 and /libo32 content
  /// goes to /usr/...; emit_merged_usr_links() adds the root symlinks.
  bool merged_usr = true;
  /// Over a base image: its diversions and stat overrides, by path as packages name it ("/usr/bin/x").
  const std::map<std::string, Diversion>* diversions = nullptr;
  const std::map<std::string, StatOverride>* statoverrides = nullptr;
  std::string package = {}; ///< the package being written (a diversion by it does not apply to it)
};

/// Parses a base image's /var/lib/dpkg/diversions (three lines per entry: from, to, package).
/// A truncated file is invalid_input naming `what`.
Result<std::map<std::string, Diversion>> parse_diversions(std::string_view text, std::string_view what);

/// Parses a base image's /var/lib/dpkg/statoverride ("USER GROUP MODE PATH" per line; USER and
/// GROUP are names looked up in `passwd` and `group` (the base's /etc files) or "#ID"; MODE octal).
/// An unknown name or a malformed line is invalid_input naming `what` and the line.
Result<std::map<std::string, StatOverride>> parse_statoverride(std::string_view text, std::string_view passwd,
                                                               std::string_view group, std::string_view what);

/// The members a layer being assembled from several packages already holds, by path in the layer
/// (after the merged-/usr mapping). A directory is emitted once; a later package's file at a path
/// that is taken keeps the first one (docs/debs.md, "Files shipped by two packages").
struct DebLayerPaths {
  /// One emitted member.
  struct Member {
    TarEntry::Type type = TarEntry::Type::file;
    std::string owner;       ///< the `what` of the package (or "the dpkg database") that emitted it
    std::string link_target; ///< symlink or hard link target
    std::uint32_t mode = 0;
    std::uint32_t uid = 0;
    std::uint32_t gid = 0;
    std::int64_t size = 0;
    std::string md5; ///< regular files: the MD5 of their content (hex)
  };
  std::map<std::string, Member> members;
};

/// What write_deb_data() took from one package's data.tar: what dpkg records for it.
struct DebContents {
  /// dpkg's .list: "/." first, then every member as the package names it ("/bin/sh", not the
  /// merged-/usr path), in archive order.
  std::vector<std::string> paths;
  /// (path without the leading '/', MD5 hex) of every regular file and hard link, in archive order:
  /// the md5sums dpkg would generate for a package that ships none.
  std::vector<std::pair<std::string, std::string>> md5s;
};

/// Streams the data.tar of `deb` into `tar`: names normalised ("./usr/" -> "usr"), mtimes clamped,
/// numeric uid/gid and permission bits (setuid included) kept, symlink targets kept verbatim, hard
/// links mapped like their targets; device nodes, FIFOs and sockets are refused. Paths `seen`
/// holds already are not emitted again. `progress` advances by the file bytes read. Errors name
/// `what`.
Result<DebContents> write_deb_data(TarWriter& tar, log::Progress& progress, const std::filesystem::path& deb,
                                   const DebLayerOptions& options, DebLayerPaths& seen,
                                   std::string_view what);

/// Emits merged /usr's root symlinks the way debootstrap does for `native_arch`: bin, sbin and lib
/// everywhere, plus lib32/lib64/libx32/libo32 where that architecture has them (amd64: lib32,
/// lib64, libx32), each "X -> usr/X" with the directory usr/X. A path a package already made a
/// directory is an error; one already linked to usr/X is left alone.
Result<void> emit_merged_usr_links(TarWriter& tar, DebLayerPaths& seen, std::int64_t epoch,
                                   std::string_view native_arch);

/// One installed package, as the dpkg database records it.
struct InstalledDeb {
  DebControl control;
  DebContents contents;
};

/// The state write_dpkg_database() records.
enum class DebState {
  unpacked,  ///< "install ok unpacked": configure_script() runs the maintainer scripts later
  installed, ///< "install ok installed": nothing left to run (no package has maintainer scripts)
};

/// What a base image's dpkg database brings to the one written over it (builder/image/deb_layers.cpp
/// fills it from the base's metadata).
struct BaseDatabase {
  /// The status paragraphs kept (the packages not replaced): name, architecture, the paragraph's
  /// text without the blank line after it.
  struct Paragraph {
    std::string package;
    std::string architecture;
    std::string text;
  };
  std::vector<Paragraph> status;
  std::vector<std::string> arches; ///< the lines of the base's var/lib/dpkg/arch
  std::string file_triggers;       ///< var/lib/dpkg/triggers/File lines kept
  /// var/lib/dpkg/triggers/NAME interest lines kept, by NAME (not File, Unincorp or Lock).
  std::map<std::string, std::string> triggers;
  /// The version a replaced package had, by dpkg name, when it was configured: the new one's
  /// status says `Config-Version: OLD`, so `dpkg --configure` runs "postinst configure OLD" (only in
  /// DebState::unpacked: an installed package has none).
  std::map<std::string, std::string> config_versions;
};

/// Writes the dpkg database for `debs` into `tar`: var/lib/dpkg/status (paragraphs sorted by name
/// then architecture, fields in dpkg's order, Conffiles with MD5s of the shipped files),
/// info/<name>.{list,md5sums,conffiles,triggers,preinst,...} (md5sums generated where a package
/// ships none, as dpkg does), the file and explicit trigger interests (triggers/File,
/// triggers/<name>), arch (`native_arch` and the foreign architectures used), available, info/format
/// and the directories dpkg expects. Fails if a package's md5sums disagree with its data, a
/// conffile is not in the data, or two packages have the same name and architecture. Over a base
/// (`base`), its kept paragraphs join the status (sorted with the new ones), its architectures and
/// trigger interests join the new ones, and `available` and info/format are left as the base has them.
Result<void> write_dpkg_database(TarWriter& tar, DebLayerPaths& seen, const std::vector<InstalledDeb>& debs,
                                 DebState state, std::int64_t epoch, std::string_view native_arch,
                                 const BaseDatabase* base = nullptr);

/// The owner recorded for the base image's directories and symbolic links in a DebLayerPaths
/// (seed_base_paths): a package's non-directory member replaces one of its links, as dpkg would.
inline constexpr std::string_view k_base_owner = "the base image";

/// Records the base image's directories and symbolic links in `seen`, so members are placed
/// through its links (never replacing one with a directory) and its directories are not emitted
/// again.
void seed_base_paths(DebLayerPaths& seen, const std::vector<std::string>& directories,
                     const std::map<std::string, std::string>& symlinks);

/// True when some package has maintainer scripts to run (write the database as DebState::unpacked
/// and run configure_script() in the image).
bool needs_configure(const std::vector<InstalledDeb>& debs);

/// The /bin/sh script that configures unpacked packages, run as root in the build sandbox over the
/// image: mmdebstrap's policy (policy-rc.d exiting 101, a no-op start-stop-daemon,
/// DEBIAN_FRONTEND=noninteractive, DEBCONF_NONINTERACTIVE_SEEN=true, LC_ALL=C.UTF-8), each
/// package's "preinst install" in the given order, "dpkg --configure --pending", ldconfig; then it
/// restores what it replaced and removes the logs that would make the layer irreproducible. The
/// text depends only on `debs_in_order`.
/// Over a base image, `upgrades` maps the dpkg name of each package that replaces the base's version
/// to that version: its preinst runs as "preinst upgrade OLD" (what `dpkg --unpack` runs for an
/// upgrade) instead of "preinst install".
std::string configure_script(const std::vector<InstalledDeb>& debs_in_order,
                             const std::map<std::string, std::string>& upgrades = {});

/// Whether the image provides what configure_script() needs.
struct ImageTools {
  bool sh = false;   ///< /bin/sh
  bool dpkg = false; ///< /usr/bin/dpkg
};

/// Fails (invalid_input) when a package has maintainer scripts but the image lacks /bin/sh or dpkg,
/// naming the first such package and what is missing.
Result<void> check_configure_possible(const std::vector<InstalledDeb>& debs, ImageTools tools);

} // namespace lockstep::builder
