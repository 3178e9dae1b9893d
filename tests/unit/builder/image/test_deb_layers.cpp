// Installing locked .debs over a base image: a base root made by real dpkg (a hold, a foreign
// architecture, a diversion, a stat override, file trigger interests, /var/run -> ../run, merged
// /usr), its metadata read from the tree as read_base_metadata() would, then build_deb_layers()
// with an upgrade and a new package; the layers applied over the base are judged by real dpkg.
#include "builder/image/deb_layers.hpp"
#include "builder/image/deb_package.hpp"
#include "runner/runtime/unpack.hpp"
#include "support/oci/tar_reader.hpp"
#include "support/system/fs.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

using namespace lockstep;
using namespace lockstep::builder;
namespace fs = std::filesystem;
using test::run_command;
using test::slurp;
using test::TempDirFixture;

namespace {

bool have_dpkg() {
  return test::have_tool("dpkg-deb") && test::have_tool("dpkg") && test::have_tool("dpkg-query") &&
         test::have_tool("dpkg-divert") && test::have_tool("gzip");
}

std::string shell(const std::string& cmd) {
  return run_command(cmd, test::ExitCheck::ignore);
}

void write_file(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << content;
}

std::string control(const std::string& package, const std::string& version, const std::string& arch) {
  return "Package: " + package + "\nVersion: " + version + "\nArchitecture: " + arch +
         "\nMaintainer: T <t@example.org>\nDescription: " + package + "\n";
}

// Builds dir/NAME.deb from the files under dir/NAME (DEBIAN/ included).
fs::path build_deb(const fs::path& dir, const std::string& name) {
  run_command("cd '" + dir.string() + "' && dpkg-deb -Zgzip --build --root-owner-group " + name + " " + name +
              ".deb >/dev/null");
  return dir / (name + ".deb");
}

// The packages: lsbase-keep stays in the base (it diverts /usr/bin/diverted and is held),
// lsbase-up 1.0 is in the base and 2.0 in the lock (a file dropped, a file moved from /bin to
// /usr/bin, a postrm dropped, a file trigger interest changed), lsbase-new is new (a diverted file,
// a file with a stat override, a file below /var/run).
struct Debs {
  fs::path keep, up1, up2, fresh;
};

Debs build_debs(const fs::path& dir) {
  write_file(dir / "keep/DEBIAN/control", control("lsbase-keep", "1.0", "all"));
  write_file(dir / "keep/DEBIAN/triggers", "interest-noawait /usr/share/keep-trig\n");
  write_file(dir / "keep/usr/bin/diverted", "keep's wrapper\n");
  write_file(dir / "keep/usr/share/doc/lsbase/keep", "keep\n");

  write_file(dir / "up1/DEBIAN/control", control("lsbase-up", "1.0", "amd64"));
  write_file(dir / "up1/DEBIAN/triggers", "interest-noawait /usr/share/up-trig\n");
  write_file(dir / "up1/DEBIAN/postrm", "#!/bin/sh\nexit 0\n");
  write_file(dir / "up1/usr/bin/up-both", "both 1\n");
  write_file(dir / "up1/usr/bin/up-old-only", "old only\n");
  write_file(dir / "up1/bin/up-moved", "moved 1\n");
  write_file(dir / "up1/sbin/up-dropped", "dropped\n"); // no other package lists /sbin
  write_file(dir / "up1/usr/share/doc/lsbase/up", "up 1\n");

  write_file(dir / "up2/DEBIAN/control", control("lsbase-up", "2.0", "amd64"));
  write_file(dir / "up2/DEBIAN/triggers", "interest-noawait /usr/share/up-trig2\n");
  write_file(dir / "up2/usr/bin/up-both", "both 2\n");
  write_file(dir / "up2/usr/bin/up-moved", "moved 2\n");
  write_file(dir / "up2/usr/share/doc/lsbase/up", "up 2\n");

  write_file(dir / "new/DEBIAN/control", control("lsbase-new", "1.0", "amd64"));
  write_file(dir / "new/usr/bin/diverted", "the real tool\n");
  write_file(dir / "new/usr/bin/overridden", "#!/bin/sh\n");
  write_file(dir / "new/bin/new-in-bin", "in bin\n");
  write_file(dir / "new/var/run/lsbase/pid", "1\n");
  run_command("chmod 0755 '" + (dir / "up1/DEBIAN/postrm").string() + "'");
  return Debs{build_deb(dir, "keep"), build_deb(dir, "up1"), build_deb(dir, "up2"), build_deb(dir, "new")};
}

std::string dpkg_in(const fs::path& root, const std::string& args) {
  return "dpkg --root='" + root.string() + "' --force-script-chrootless --log=/dev/null " + args;
}

// A base root installed by real dpkg: merged /usr, /var/run -> ../run (relative, so that dpkg --root
// follows it inside the root; bookworm's /run is absolute: tests/cli/test_debian_base.sh), i386 added,
// lsbase-keep (held, diverting /usr/bin/diverted) and lsbase-up 1.0, a stat override for /usr/bin/overridden.
fs::path make_base(const fs::path& dir, const Debs& debs) {
  fs::path base = dir / "base";
  const std::string b = base.string();
  run_command(
      "set -e; mkdir -p '" + b + "'/var/lib/dpkg/info '" + b + "'/var/lib/dpkg/updates '" + b +
      "'/var/lib/dpkg/triggers '" + b + "'/run '" + b + "'/etc; : > '" + b + "'/var/lib/dpkg/status; cd '" +
      b +
      "'; for d in bin sbin lib lib64; do mkdir -p usr/$d; ln -s usr/$d $d; done; ln -s ../run var/run; " +
      "echo 'root:x:0:0:root:/root:/bin/sh' > etc/passwd; printf 'root:x:0:\\nstaff:x:50:\\n' > etc/group");
  run_command(dpkg_in(base, "--add-architecture i386"));
  run_command(dpkg_in(base, "--install '" + debs.keep.string() + "' '" + debs.up1.string() + "' >/dev/null"));
  run_command("dpkg-divert --root='" + b +
              "' --package lsbase-keep --no-rename --divert /usr/bin/diverted.distrib --add "
              "/usr/bin/diverted >/dev/null");
  run_command("echo 'lsbase-keep hold' | " + dpkg_in(base, "--set-selections"));
  write_file(base / "var/lib/dpkg/statoverride", "root staff 4750 /usr/bin/overridden\n");
  return base;
}

// What read_base_metadata() reads of an image, read from the tree `root`.
BaseMetadata metadata_of(const fs::path& root) {
  BaseMetadata m;
  m.manifest = sha256_of("a base image");
  const fs::path db = root / "var/lib/dpkg";
  m.has_dpkg_status = true;
  m.dpkg_status = slurp(db / "status");
  m.dpkg_arch = fs::exists(db / "arch") ? slurp(db / "arch") : "";
  m.dpkg_diversions = fs::exists(db / "diversions") ? slurp(db / "diversions") : "";
  m.dpkg_statoverride = fs::exists(db / "statoverride") ? slurp(db / "statoverride") : "";
  for (const auto& e : fs::directory_iterator(db / "info")) {
    const std::string name = e.path().filename().string();
    m.dpkg_info_names.push_back(name);
    if (name.ends_with(".list")) {
      m.dpkg_lists[name.substr(0, name.size() - 5)] = slurp(e.path());
    }
  }
  std::sort(m.dpkg_info_names.begin(), m.dpkg_info_names.end());
  for (const auto& e : fs::directory_iterator(db / "triggers")) {
    m.dpkg_triggers[e.path().filename().string()] = slurp(e.path());
  }
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = it->path().lexically_relative(root).string();
    if (it->is_symlink()) {
      m.symlinks[rel] = fs::read_symlink(it->path()).string();
    } else if (it->is_directory()) {
      m.directories.push_back(rel);
    }
  }
  std::sort(m.directories.begin(), m.directories.end());
  m.passwd = slurp(root / "etc/passwd");
  m.group = slurp(root / "etc/group");
  m.merged_usr = true;
  return m;
}

envspec::LockedArtifact artifact(const BlobStore& store, const fs::path& deb, const std::string& name,
                                 const std::string& version, const std::string& arch) {
  auto info = store.put(slurp(deb));
  REQUIRE_OK(info);
  envspec::LockedArtifact a;
  a.kind = "deb";
  a.name = name;
  a.version = version;
  a.arch = arch;
  a.group = "base";
  a.size = static_cast<std::uint64_t>(info->size);
  a.sha256 = info->digest;
  a.url = "file://" + deb.string();
  return a;
}

// The uncompressed tar of a gzip layer in the store.
std::string layer_tar(const BlobStore& store, const oci::Descriptor& layer) {
  return run_command("gzip -dc '" + store.blob_path(layer.digest).string() + "'");
}

// The member names of a tar held in memory.
std::vector<std::string> member_names(const TempDirFixture& fx, const std::string& tar) {
  fs::path p = fx.write("members.tar", tar);
  auto reader = TarReader::open(p, "test");
  REQUIRE_OK(reader);
  std::vector<std::string> out;
  for (;;) {
    auto m = reader->next();
    REQUIRE_OK(m);
    if (!*m) {
      break;
    }
    out.push_back((*m)->name);
  }
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Runs build_deb_layers() over `base` for `lock`.
ImageState build_over(const BlobStore& store, const BaseMetadata& base, const envspec::Lock& lock) {
  ImageState state;
  state.store = &store;
  state.codec = Codec::gzip;
  state.epoch = 1700000000;
  state.base_metadata = base;
  DebInputs debs;
  debs.native_arch = "amd64";
  REQUIRE_OK(build_deb_layers(lock, debs, state));
  return state;
}

} // namespace

TEST_CASE("packages over a base image: dpkg in the result sees the base's packages, the upgrade and the new "
          "one, all verified",
          "[deb]") {
  if (!have_dpkg() || ::geteuid() != 0) {
    WARN("needs dpkg-deb, dpkg, dpkg-divert and root (the base is made by dpkg --root); skipping");
    return;
  }
  TempDirFixture fx;
  const Debs debs = build_debs(fx.dir());
  const fs::path base = make_base(fx.dir(), debs);
  const BaseMetadata meta = metadata_of(base);
  auto store = BlobStore::open(fx.dir() / "store");
  REQUIRE_OK(store);
  envspec::Lock lock;
  lock.artifacts.push_back(artifact(*store, debs.up2, "lsbase-up", "2.0", "amd64"));
  lock.artifacts.push_back(artifact(*store, debs.fresh, "lsbase-new", "1.0", "amd64"));
  ImageState state = build_over(*store, meta, lock);
  // No maintainer scripts: a package layer and the database layer, nothing to configure.
  REQUIRE(state.layers.size() == 2);
  const std::string packages = layer_tar(*store, state.layers[0]);
  const std::string database = layer_tar(*store, state.layers[1]);

  // The package layer goes through the base's links and leaves its directories and links alone.
  const auto members = member_names(fx, packages);
  INFO(fmt::format("{}", fmt::join(members, "\n")));
  CHECK(contains(members, "usr/bin/diverted.distrib")); // lsbase-keep diverted it
  CHECK_FALSE(contains(members, "usr/bin/diverted"));
  CHECK(contains(members, "usr/bin/new-in-bin")); // /bin is the base's link to usr/bin
  CHECK(contains(members, "run/lsbase/pid"));     // /var/run is the base's link to /run
  for (const char* path :
       {"bin", "sbin", "lib", "lib64", "var/run", "var/run/lsbase", "usr", "usr/bin", "run"}) {
    CHECK_FALSE(contains(members, path));
  }
  // The database layer whites out what 1.0 had and 2.0 doesn't: a file and the postrm; not the file
  // that moved to /usr/bin, not a directory.
  const auto db_members = member_names(fx, database);
  INFO(fmt::format("{}", fmt::join(db_members, "\n")));
  std::vector<std::string> whiteouts;
  std::copy_if(db_members.begin(), db_members.end(), std::back_inserter(whiteouts),
               [](const std::string& m) { return m.find(".wh.") != std::string::npos; });
  CHECK(whiteouts == std::vector<std::string>{"usr/bin/.wh.up-old-only", "usr/sbin/.wh.up-dropped",
                                              "var/lib/dpkg/info/.wh.lsbase-up.postrm"});

  // Applied over the base, the image is what dpkg would have made.
  const fs::path image = fx.dir() / "image";
  run_command("cp -a '" + base.string() + "' '" + image.string() + "'");
  UniqueFd root(::open(image.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  runner::UnpackOptions keep;
  keep.ownership = runner::UnpackOptions::Ownership::keep;
  REQUIRE_OK(runner::apply_tar_bytes(root.get(), packages, keep));
  REQUIRE_OK(runner::apply_tar_bytes(root.get(), database, keep));
  CHECK(shell(dpkg_in(image, "--audit 2>&1")).empty());
  CHECK(run_command("dpkg-query --admindir='" + (image / "var/lib/dpkg").string() +
                    "' -W -f '${Package} ${Version} ${Status}\\n'") ==
        "lsbase-keep 1.0 hold ok installed\nlsbase-new 1.0 install ok installed\n"
        "lsbase-up 2.0 install ok installed\n");
  CHECK(shell(dpkg_in(image, "--verify 2>&1; echo rc=$?")) == "rc=0\n");
  CHECK(shell(dpkg_in(image, "-S /usr/bin/diverted 2>&1")) ==
        "diversion by lsbase-keep from: /usr/bin/diverted\ndiversion by lsbase-keep to: "
        "/usr/bin/diverted.distrib\n"
        "lsbase-new, lsbase-keep: /usr/bin/diverted\n");
  CHECK(slurp(image / "usr/bin/diverted") == "keep's wrapper\n");
  CHECK(slurp(image / "usr/bin/diverted.distrib") == "the real tool\n");
  CHECK(slurp(image / "usr/bin/up-both") == "both 2\n");
  CHECK(slurp(image / "usr/bin/up-moved") == "moved 2\n");
  CHECK_FALSE(fs::exists(image / "usr/bin/up-old-only"));
  CHECK_FALSE(fs::exists(image / "usr/sbin/up-dropped"));
  CHECK(fs::is_symlink(image / "sbin"));
  CHECK_FALSE(fs::exists(image / "var/lib/dpkg/info/lsbase-up.postrm"));
  CHECK(fs::is_symlink(image / "var/run"));
  CHECK(slurp(image / "run/lsbase/pid") == "1\n");
  struct stat st {};
  REQUIRE(::lstat((image / "usr/bin/overridden").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 04750);
  CHECK(st.st_uid == 0);
  CHECK(st.st_gid == 50);
  // The base's paragraphs verbatim, its architectures, its trigger interests but the old lsbase-up's.
  const std::string status = slurp(image / "var/lib/dpkg/status");
  const std::string base_status = slurp(base / "var/lib/dpkg/status");
  const std::size_t keep_at = base_status.find("Package: lsbase-keep\n");
  REQUIRE(keep_at != std::string::npos);
  const std::string keep_paragraph = base_status.substr(keep_at, base_status.find("\n\n", keep_at) - keep_at);
  CHECK(status.find(keep_paragraph + "\n\n") != std::string::npos);
  CHECK(slurp(image / "var/lib/dpkg/arch") == "amd64\ni386\n");
  CHECK(slurp(image / "var/lib/dpkg/triggers/File") ==
        "/usr/share/keep-trig lsbase-keep/noawait\n/usr/share/up-trig2 lsbase-up/noawait\n");
  CHECK(slurp(image / "var/lib/dpkg/diversions") == slurp(base / "var/lib/dpkg/diversions"));

  // The layers are cached for the same base, and not for another one.
  ImageState again = build_over(*store, meta, lock);
  CHECK(again.cached == std::vector<bool>{true, true});
  CHECK(again.layers[0].digest == state.layers[0].digest);
  BaseMetadata other = meta;
  other.manifest = sha256_of("another base image");
  ImageState moved = build_over(*store, other, lock);
  CHECK(moved.cached == std::vector<bool>{false, false});
}

TEST_CASE("an upgrade over a base image is configured as one: Config-Version, postinst configure OLD, "
          "preinst upgrade OLD",
          "[deb]") {
  if (!have_dpkg() || ::geteuid() != 0) {
    WARN("needs dpkg-deb, dpkg and root; skipping");
    return;
  }
  TempDirFixture fx;
  const fs::path dir = fx.dir();
  const std::string script =
      "#!/bin/sh\necho \"$(basename \"$0\" | sed 's/.*[.]//') $*\" >> \"$DPKG_ROOT/var/lsbase.log\"\n";
  for (const char* v : {"1.0", "2.0"}) {
    const std::string name = std::string("up") + v[0];
    write_file(dir / name / "DEBIAN/control", control("lsbase-up", v, "amd64"));
    write_file(dir / name / "DEBIAN/postinst", script);
    write_file(dir / name / "usr/share/doc/lsbase/up", v);
    run_command("chmod 0755 '" + (dir / name / "DEBIAN/postinst").string() + "'");
  }
  const fs::path up1 = build_deb(dir, "up1");
  const fs::path up2 = build_deb(dir, "up2");
  const fs::path base = dir / "base";
  const std::string b = base.string();
  run_command("set -e; mkdir -p '" + b + "'/var/lib/dpkg/info '" + b + "'/var/lib/dpkg/updates '" + b +
              "'/var/lib/dpkg/triggers; : > '" + b + "'/var/lib/dpkg/status");
  run_command(dpkg_in(base, "--install '" + up1.string() + "' >/dev/null"));
  REQUIRE(slurp(base / "var/lsbase.log") == "postinst configure \n");

  // The database over the base, as build_deb_layers() writes it for a package with scripts.
  auto ctl = read_deb_control(up2, "up2.deb");
  REQUIRE_OK(ctl);
  test::StringSink sink;
  TarWriter tar(sink);
  log::Progress progress("test", 0);
  DebLayerPaths seen;
  DebLayerOptions options;
  options.merged_usr = false;
  auto contents = write_deb_data(tar, progress, up2, options, seen, "up2.deb");
  REQUIRE_OK(contents);
  BaseDatabase over;
  over.config_versions["lsbase-up"] = "1.0";
  REQUIRE_OK(
      write_dpkg_database(tar, seen, {InstalledDeb{*ctl, *contents}}, DebState::unpacked, 0, "amd64", &over));
  tar.finish();
  UniqueFd root(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  runner::UnpackOptions keep;
  keep.ownership = runner::UnpackOptions::Ownership::keep;
  REQUIRE_OK(runner::apply_tar_bytes(root.get(), sink.out, keep));
  CHECK(shell("grep -E '^(Status|Config-Version):' '" + b + "/var/lib/dpkg/status'") ==
        "Status: install ok unpacked\nConfig-Version: 1.0\n");
  run_command(dpkg_in(base, "--configure --pending >/dev/null"));
  CHECK(slurp(base / "var/lsbase.log") == "postinst configure \npostinst configure 1.0\n");
  CHECK(shell(dpkg_in(base, "--audit 2>&1")).empty());

  // The configure script runs an upgraded package's preinst as "upgrade OLD".
  InstalledDeb with_preinst{*ctl, *contents};
  with_preinst.control.files["preinst"] = script;
  const std::string s = configure_script({with_preinst}, {{"lsbase-up", "1.0"}});
  CHECK(s.find("\nlockstep_preinst_upgrade lsbase-up amd64 lsbase-up 1 1.0\n") != std::string::npos);
  CHECK(s.find("\nlockstep_preinst lsbase-up") == std::string::npos);
}

TEST_CASE("a base image's diversions and stat overrides are read, and malformed ones refused", "[deb]") {
  auto d = parse_diversions("/usr/bin/a\n/usr/bin/a.distrib\npkg\n/etc/b\n/etc/b.local\n:\n", "diversions");
  REQUIRE_OK(d);
  CHECK(d->size() == 2);
  CHECK(d->at("/usr/bin/a").to == "/usr/bin/a.distrib");
  CHECK(d->at("/usr/bin/a").by == "pkg");
  CHECK(d->at("/etc/b").by == ":");
  auto truncated = parse_diversions("/usr/bin/a\n/usr/bin/a.distrib\n", "diversions");
  REQUIRE_FALSE(truncated.ok());
  CHECK(truncated.error().message == "diversions: 2 lines, not whole entries of three (from, to, package)");
  auto relative = parse_diversions("usr/bin/a\n/usr/bin/a.distrib\npkg\n", "diversions");
  REQUIRE_FALSE(relative.ok());
  CHECK(relative.error().message == "diversions:1: a diversion needs two absolute paths and a package");

  const std::string passwd =
      "root:x:0:0:root:/root:/bin/sh\nmessagebus:x:100:102::/nonexistent:/usr/sbin/nologin\n";
  const std::string group = "root:x:0:\nstaff:x:50:\nmessagebus:x:102:\n";
  auto o = parse_statoverride(
      "root messagebus 4754 /usr/lib/dbus-1.0/dbus-daemon-launch-helper\n#1234 #5678 0700 /srv/x\n\n", passwd,
      group, "statoverride");
  REQUIRE_OK(o);
  CHECK(o->size() == 2);
  const StatOverride& helper = o->at("/usr/lib/dbus-1.0/dbus-daemon-launch-helper");
  CHECK((helper.uid == 0 && helper.gid == 102 && helper.mode == 04754));
  const StatOverride& numeric = o->at("/srv/x");
  CHECK((numeric.uid == 1234 && numeric.gid == 5678 && numeric.mode == 0700));
  auto unknown = parse_statoverride("nobody staff 0755 /x\n", passwd, group, "statoverride");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message == "statoverride:1: user nobody is not in the base image's /etc/passwd");
  auto bad = parse_statoverride("root staff 0759 /x\n", passwd, group, "statoverride");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "statoverride:1: 'root staff 0759 /x' is not USER GROUP MODE PATH");
}
