// Installing .debs into a layer: real dpkg-deb builds the packages, real dpkg judges the database.
#include "builder/image/deb_package.hpp"
#include "runner/runtime/unpack.hpp"
#include "support/oci/tar_reader.hpp"
#include "support/oci/tar_writer.hpp"
#include "support/system/fs.hpp"
#include "tests/unit/test_support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

using namespace lockstep;
using namespace lockstep::builder;
namespace fs = std::filesystem;
using test::run_command;
using test::slurp;
using test::TempDirFixture;

namespace {

std::string shell(const std::string& cmd) {
  return run_command(cmd, test::ExitCheck::ignore);
}

bool have_dpkg() {
  return test::have_tool("dpkg-deb") && test::have_tool("dpkg") && test::have_tool("dpkg-query") &&
         test::have_tool("tar");
}

void write_file(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << content;
}

// Three small packages built by dpkg-deb, covering what the database must record: a conffile, a
// setuid file under /bin, a hard link and a symlink, maintainer scripts, trigger interests and an
// activation, Multi-Arch: same, a package without md5sums, three compressors.
struct TestDebs {
  fs::path one;   // lstest-one 1:1.0-1 amd64, Multi-Arch: same, xz
  fs::path two;   // lstest-two 2.0 all, gzip, no md5sums
  fs::path three; // lstest-three 3.0 amd64, zstd
};

TestDebs build_test_debs(const fs::path& dir) {
  const std::string script =
      "#!/bin/sh\nset -e\necho \"lstest-one $(basename \"$0\" | sed 's/.*[.]//') $*\" >> "
      "\"$DPKG_ROOT/var/lstest.log\"\n";
  fs::path one = dir / "src-one";
  write_file(one / "DEBIAN/control", "Package: lstest-one\n"
                                     "Source: lstest (1.0-1)\n"
                                     "Version: 1:1.0-1\n"
                                     "Architecture: amd64\n"
                                     "Maintainer: Lockstep Tests <tests@example.org>\n"
                                     "Installed-Size: 12\n"
                                     "Depends: lstest-two (>= 2.0), lstest-three(>=3)\n"
                                     "Recommends: foo:any | bar(>=1)\n"
                                     "Provides: lstest-virtual (= 1.0)\n"
                                     "Section: misc\n"
                                     "Priority: optional\n"
                                     "Multi-Arch: same\n"
                                     "Homepage: https://example.org/lstest\n"
                                     "Built-Using: foo (= 1.0)\n"
                                     "Description: lockstep test package\n"
                                     " Long text.\n"
                                     " .\n"
                                     " More text.\n");
  write_file(one / "DEBIAN/conffiles", "/etc/lstest.conf\n");
  write_file(one / "DEBIAN/preinst", script);
  write_file(one / "DEBIAN/postinst", script);
  write_file(one / "DEBIAN/triggers", "interest-noawait /usr/share/lstest-files\ninterest lstest-trig\n");
  write_file(one / "etc/lstest.conf", "setting=1\n");
  write_file(one / "bin/xyz", "#!/bin/sh\necho xyz\n");
  write_file(one / "lib/lstest/lib.txt", "library\n");
  write_file(one / "usr/share/lstest-one/a", "shared data\n");
  fs::path two = dir / "src-two";
  write_file(two / "DEBIAN/control", "Package: lstest-two\nVersion: 2.0\nArchitecture: all\n"
                                     "Maintainer: T <t@example.org>\nDescription: two\n");
  write_file(two / "DEBIAN/triggers", "activate-noawait lstest-trig\n");
  write_file(two / "usr/share/lstest-files/x", "x\n");
  write_file(two / "sbin/lstest-two-tool", "#!/bin/sh\n");
  fs::path three = dir / "src-three";
  write_file(three / "DEBIAN/control", "Package: lstest-three\nVersion: 3.0\nArchitecture: amd64\n"
                                       "Maintainer: T <t@example.org>\nDescription: three\n");
  write_file(three / "usr/share/lstest-three/data", std::string(100000, 'z'));
  std::string d = dir.string();
  run_command("set -e; cd '" + d + "'; chmod 0755 src-one/DEBIAN/preinst src-one/DEBIAN/postinst; " +
              "chmod 4755 src-one/bin/xyz; chmod 0755 src-two/sbin/lstest-two-tool; " +
              "ln src-one/usr/share/lstest-one/a src-one/usr/share/lstest-one/b; " +
              "ln -s a src-one/usr/share/lstest-one/c; " +
              "(cd src-one && find . -type f ! -path './DEBIAN/*' -printf '%P\\n' | sort | xargs md5sum > " +
              "DEBIAN/md5sums); " + "dpkg-deb -Zxz --build --root-owner-group src-one one.deb >/dev/null; " +
              "dpkg-deb -Zgzip --build --root-owner-group src-two two.deb >/dev/null; " +
              "dpkg-deb -Zzstd --build --root-owner-group src-three three.deb >/dev/null");
  return TestDebs{dir / "one.deb", dir / "two.deb", dir / "three.deb"};
}

// Reads every package, writes its data, the merged-/usr links and the database into one tar.
struct Assembled {
  std::string tar;
  std::vector<InstalledDeb> debs;
};

Assembled assemble(const std::vector<fs::path>& debs, DebState state, DebLayerOptions options = {}) {
  test::StringSink sink;
  TarWriter tar(sink);
  log::Progress progress("test", 0);
  DebLayerPaths seen;
  Assembled out;
  for (const fs::path& deb : debs) {
    auto control = read_deb_control(deb, deb.filename().string());
    REQUIRE_OK(control);
    auto contents = write_deb_data(tar, progress, deb, options, seen, deb.filename().string());
    REQUIRE_OK(contents);
    out.debs.push_back(InstalledDeb{*control, *contents});
  }
  if (options.merged_usr) {
    REQUIRE_OK(emit_merged_usr_links(tar, seen, options.epoch, "amd64"));
  }
  REQUIRE_OK(write_dpkg_database(tar, seen, out.debs, state, options.epoch, "amd64"));
  tar.finish();
  out.tar = sink.out;
  return out;
}

// Extracts `tar` into dir/name with GNU tar and returns that directory.
fs::path extract(const fs::path& dir, const std::string& name, const std::string& tar) {
  fs::path root = dir / name;
  fs::create_directories(root);
  write_file(dir / (name + ".tar"), tar);
  run_command("tar -xpf '" + (dir / (name + ".tar")).string() + "' -C '" + root.string() + "'");
  return root;
}

// Everything about a tree outside the dpkg database except times and directory sizes: type, mode,
// owner, size, link count, link target, content hash.
std::string tree_listing(const fs::path& root) {
  std::string r = root.string();
  return shell(
      "cd '" + r +
      "' && find . -mindepth 1 -path ./var/lib/dpkg -prune -o -type d -printf '%p d %m %U:%G %n\\n' " +
      "-o -printf '%p %y %m %U:%G %s %n %l\\n' | sort && " +
      "find . -path ./var/lib/dpkg -prune -o -type f -print0 | sort -z | xargs -0 md5sum");
}

// A root where real dpkg installs the same packages: merged /usr like ours, an empty database.
fs::path reference_root(const fs::path& dir) {
  fs::path ref = dir / "ref";
  std::string r = ref.string();
  run_command("set -e; mkdir -p '" + r + "'/var/lib/dpkg/info '" + r + "'/var/lib/dpkg/updates '" + r +
              "'/var/lib/dpkg/triggers; : > '" + r + "'/var/lib/dpkg/status; cd '" + r +
              "'; for d in bin sbin lib lib32 lib64 libx32; do mkdir -p usr/$d; ln -s usr/$d $d; done");
  return ref;
}

std::string dpkg_in(const fs::path& root, const std::string& args) {
  return "dpkg --root='" + root.string() + "' --force-script-chrootless --log=/dev/null " + args;
}

// The status file with conffile hashes replaced by dpkg's "newconffile" (what dpkg --unpack
// records before configuring; lockstep records the shipped file's MD5 right away).
std::string with_new_conffiles(const std::string& status) {
  std::string out;
  std::size_t pos = 0;
  while (pos < status.size()) {
    std::size_t end = std::min(status.find('\n', pos), status.size());
    std::string line = status.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() > 35 && line.rfind(" /", 0) == 0 && line[line.size() - 33] == ' ' &&
        line.find_first_not_of("0123456789abcdef", line.size() - 32) == std::string::npos) {
      line = line.substr(0, line.size() - 32) + "newconffile";
    }
    out += line + "\n";
  }
  return out;
}

struct Member {
  TarEntry entry;
  std::string data;
};

std::string tar_of(const std::vector<Member>& members) {
  test::StringSink sink;
  TarWriter tar(sink);
  for (const auto& m : members) {
    TarEntry e = m.entry;
    e.size = e.type == TarEntry::Type::file ? static_cast<std::int64_t>(m.data.size()) : 0;
    tar.add(e);
    tar.write_data(m.data.data(), m.data.size());
  }
  tar.finish();
  return sink.out;
}

Member file(const std::string& path, const std::string& data, std::uint32_t mode = 0644) {
  TarEntry e;
  e.path = path;
  e.mode = mode;
  return Member{e, data};
}

Member dir_member(const std::string& path) {
  TarEntry e;
  e.path = path;
  e.type = TarEntry::Type::dir;
  e.mode = 0755;
  return Member{e, ""};
}

std::string control_tar(const std::string& package) {
  return tar_of({file("./control",
                      "Package: " + package +
                          "\nVersion: 1.0\nArchitecture: all\nMaintainer: T <t@e.org>\nDescription: x\n")});
}

// A .deb made by hand from a data.tar's members.
fs::path hand_deb(const TempDirFixture& fx, const std::string& name, const std::vector<Member>& data) {
  return fx.write(name + ".deb", test::ar_archive({{"debian-binary", "2.0\n"},
                                                   {"control.tar", control_tar(name)},
                                                   {"data.tar", tar_of(data)}}));
}

// The members of a tar held in memory, as "type name[ -> target]" lines, and file contents.
std::vector<std::string> members_of(const TempDirFixture& fx, const std::string& tar,
                                    std::map<std::string, std::string>* contents = nullptr) {
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
    const char* type = (*m)->type == TarMember::Type::file        ? "f"
                       : (*m)->type == TarMember::Type::directory ? "d"
                       : (*m)->type == TarMember::Type::symlink   ? "l"
                                                                  : "h";
    out.push_back(std::string(type) + " " + (*m)->name +
                  ((*m)->link_target.empty() ? "" : " -> " + (*m)->link_target));
    if (contents != nullptr && (*m)->type == TarMember::Type::file) {
      std::string data(static_cast<std::size_t>((*m)->size), '\0');
      auto n = reader->read(data.data(), data.size());
      REQUIRE_OK(n);
      (*contents)[(*m)->name] = data.substr(0, *n);
    }
  }
  return out;
}

} // namespace

TEST_CASE("read_deb_control returns the control fields and the files dpkg keeps", "[deb]") {
  if (!have_dpkg()) {
    WARN("dpkg-deb not installed; skipping");
    return;
  }
  TempDirFixture fx;
  TestDebs debs = build_test_debs(fx.dir());
  auto one = read_deb_control(debs.one, "one.deb");
  REQUIRE_OK(one);
  CHECK(one->package == "lstest-one");
  CHECK(one->version == "1:1.0-1");
  CHECK(one->architecture == "amd64");
  CHECK(one->multi_arch == "same");
  CHECK(one->dpkg_name() == "lstest-one:amd64");
  CHECK(one->has_maintainer_scripts());
  CHECK(one->control == slurp(fx.dir() / "src-one/DEBIAN/control"));
  std::vector<std::string> names;
  for (const auto& [name, content] : one->files) {
    names.push_back(name);
    CHECK(content == slurp(fx.dir() / "src-one/DEBIAN" / name));
  }
  CHECK(names == std::vector<std::string>{"conffiles", "md5sums", "postinst", "preinst", "triggers"});

  auto two = read_deb_control(debs.two, "two.deb");
  REQUIRE_OK(two);
  CHECK(two->dpkg_name() == "lstest-two");
  CHECK(two->multi_arch.empty());
  CHECK_FALSE(two->has_maintainer_scripts());
  CHECK(two->files.count("md5sums") == 0);
  auto three = read_deb_control(debs.three, "three.deb");
  REQUIRE_OK(three);
  CHECK(three->version == "3.0");
}

TEST_CASE("installed packages: dpkg lists, verifies and finds them in the image", "[deb]") {
  if (!have_dpkg()) {
    WARN("dpkg not installed; skipping");
    return;
  }
  TempDirFixture fx;
  TestDebs debs = build_test_debs(fx.dir());
  Assembled a = assemble({debs.one, debs.two, debs.three}, DebState::installed, {1000, true});
  fs::path root = extract(fx.dir(), "image", a.tar);
  std::string admin = (root / "var/lib/dpkg").string();

  CHECK(shell("dpkg-query --admindir='" + admin + "' -W -f='${Package} ${Version} ${Status}\\n'") ==
        "lstest-one 1:1.0-1 install ok installed\n"
        "lstest-three 3.0 install ok installed\n"
        "lstest-two 2.0 install ok installed\n");
  // md5sums (shipped for lstest-one, generated for the others) match every file, conffile included.
  CHECK(shell("dpkg --root='" + root.string() + "' --verify 2>&1; echo rc=$?") == "rc=0\n");
  CHECK(shell("dpkg --root='" + root.string() + "' --audit 2>&1") == "");
  CHECK(shell("dpkg --root='" + root.string() + "' -S /bin/xyz /sbin/lstest-two-tool 2>&1") ==
        "lstest-one:amd64: /bin/xyz\nlstest-two: /sbin/lstest-two-tool\n");
  CHECK(shell("dpkg --root='" + root.string() + "' -L lstest-one:amd64 | head -3") == "/.\n/bin\n/bin/xyz\n");

  // Merged /usr: the files live in /usr, the root has the symlinks debootstrap makes on amd64.
  CHECK(fs::read_symlink(root / "bin") == "usr/bin");
  CHECK(fs::read_symlink(root / "lib64") == "usr/lib64");
  CHECK(fs::is_directory(root / "usr/libx32"));
  struct stat st {};
  REQUIRE(::lstat((root / "usr/bin/xyz").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 04755);
  CHECK(st.st_mtime == 1000); // clamped to the epoch
  struct stat a_st {};
  struct stat b_st {};
  REQUIRE(::lstat((root / "usr/share/lstest-one/a").c_str(), &a_st) == 0);
  REQUIRE(::lstat((root / "usr/share/lstest-one/b").c_str(), &b_st) == 0);
  CHECK(a_st.st_ino == b_st.st_ino);
  CHECK(fs::read_symlink(root / "usr/share/lstest-one/c") == "a");
  CHECK(slurp(root / "usr/lib/lstest/lib.txt") == "library\n");
  CHECK(slurp(root / "var/lib/dpkg/arch") == "amd64\n");
  CHECK(slurp(root / "var/lib/dpkg/info/format") == "1\n");
}

TEST_CASE(
    "unpacked packages: the database is what dpkg --unpack writes; dpkg --configure finishes both alike",
    "[deb]") {
  if (!have_dpkg()) {
    WARN("dpkg not installed; skipping");
    return;
  }
  TempDirFixture fx;
  TestDebs debs = build_test_debs(fx.dir());
  Assembled a = assemble({debs.one, debs.two, debs.three}, DebState::unpacked);
  fs::path ours = extract(fx.dir(), "image", a.tar);
  fs::path ref = reference_root(fx.dir());
  // Real dpkg unpacks the same packages (running lstest-one's harmless preinst outside a chroot).
  run_command(dpkg_in(ref, "--unpack '" + debs.one.string() + "' '" + debs.two.string() + "' '" +
                               debs.three.string() + "' >/dev/null"));

  CHECK(shell("dpkg --root='" + ours.string() + "' --audit") ==
        shell("dpkg --root='" + ref.string() + "' --audit"));
  CHECK_THAT(shell("dpkg --root='" + ours.string() + "' --audit"), Catch::Contains("lstest-one"));
  CHECK(with_new_conffiles(slurp(ours / "var/lib/dpkg/status")) == slurp(ref / "var/lib/dpkg/status"));
  for (const char* f :
       {"info/format", "info/lstest-one:amd64.list", "info/lstest-one:amd64.md5sums",
        "info/lstest-one:amd64.conffiles", "info/lstest-one:amd64.preinst", "info/lstest-one:amd64.triggers",
        "info/lstest-two.list", "info/lstest-two.md5sums", "info/lstest-two.triggers",
        "info/lstest-three.list", "info/lstest-three.md5sums", "triggers/File", "triggers/lstest-trig"}) {
    INFO(f);
    CHECK(slurp(ours / "var/lib/dpkg" / f) == slurp(ref / "var/lib/dpkg" / f));
  }
  CHECK(shell("ls '" + (ours / "var/lib/dpkg/info").string() + "'") ==
        shell("ls '" + (ref / "var/lib/dpkg/info").string() + "'"));

  // What configure_script() does in the image, done here by the host's dpkg on both roots.
  run_command("DPKG_ROOT='" + ours.string() +
              "' DPKG_MAINTSCRIPT_PACKAGE=lstest-one DPKG_MAINTSCRIPT_NAME=preinst '" +
              (ours / "var/lib/dpkg/info/lstest-one:amd64.preinst").string() + "' install");
  run_command(dpkg_in(ours, "--configure --pending >/dev/null"));
  run_command(dpkg_in(ref, "--configure --pending >/dev/null"));
  CHECK(slurp(ours / "var/lib/dpkg/status") == slurp(ref / "var/lib/dpkg/status"));
  CHECK_THAT(slurp(ours / "var/lib/dpkg/status"),
             Catch::Contains(" /etc/lstest.conf 7d43cb06abb8273056a580aca18d8acb\n"));
  CHECK(slurp(ours / "var/lstest.log") == "lstest-one preinst install\nlstest-one postinst configure \n");
  CHECK(slurp(ours / "var/lstest.log") == slurp(ref / "var/lstest.log"));
  CHECK(tree_listing(ours) == tree_listing(ref));
  CHECK(shell("dpkg --root='" + ours.string() + "' --verify; echo rc=$?") == "rc=0\n");
}

TEST_CASE("configure_script configures the unpacked packages inside the image", "[deb]") {
  if (!have_dpkg() || !test::have_tool("unshare") || !test::have_tool("chroot")) {
    WARN("dpkg, unshare or chroot not installed; skipping");
    return;
  }
  TempDirFixture fx;
  TestDebs debs = build_test_debs(fx.dir());
  Assembled a = assemble({debs.one, debs.two, debs.three}, DebState::unpacked);
  std::string script = configure_script(a.debs);
  CHECK(script == configure_script(a.debs));
  CHECK_THAT(script, Catch::Contains("lockstep_preinst lstest-one amd64 lstest-one:amd64 1\n"));
  CHECK_THAT(script, !Catch::Contains("lockstep_preinst lstest-two"));
  REQUIRE_OK(check_configure_possible(a.debs, ImageTools{true, true}));

  fs::path root = extract(fx.dir(), "image", a.tar);
  write_file(root / "lstest-configure.sh", script);
  fs::create_directories(fx.dir() / "upper");
  fs::create_directories(fx.dir() / "work");
  fs::create_directories(root / "dev");
  fs::create_directories(root / "tmp");
  // The image borrows the host's /usr (sh, dpkg, ldconfig) through an overlay, its own /usr on top.
  std::string r = root.string();
  std::string enter = "unshare -r -m sh -c 'set -e; mount -t overlay overlay -o lowerdir=" + r +
                      "/usr:/usr,upperdir=" + (fx.dir() / "upper").string() +
                      ",workdir=" + (fx.dir() / "work").string() + " " + r + "/usr; mount --rbind /dev " + r +
                      "/dev; ";
  if (shell(enter + "chroot " + r + " /bin/sh -c \"echo ok\"' 2>/dev/null") != "ok\n") {
    WARN("no user namespaces, overlayfs or chroot here; skipping");
    return;
  }
  std::string out = shell(enter + "chroot " + r + " /bin/sh /lstest-configure.sh' 2>&1; echo rc=$?");
  INFO(out);
  CHECK_THAT(out, Catch::EndsWith("rc=0\n"));
  fs::remove(root / "lstest-configure.sh");

  CHECK(shell("dpkg-query --admindir='" + r + "/var/lib/dpkg' -W -f='${Package} ${Status}\\n'") ==
        "lstest-one install ok installed\nlstest-three install ok installed\nlstest-two install ok "
        "installed\n");
  CHECK(slurp(root / "var/lstest.log") == "lstest-one preinst install\nlstest-one postinst configure \n");
  // policy-rc.d and the start-stop-daemon stand-in are gone, as are dpkg's log and ldconfig's cache.
  if (fs::exists("/usr/sbin/policy-rc.d")) { // the host's (Docker's) own is put back
    CHECK(slurp(fx.dir() / "upper/sbin/policy-rc.d") == slurp("/usr/sbin/policy-rc.d"));
  } else {
    CHECK_FALSE(fs::exists(fx.dir() / "upper/sbin/policy-rc.d"));
  }
  CHECK_FALSE(fs::exists(fx.dir() / "upper/sbin/policy-rc.d.lockstep-saved"));
  CHECK_FALSE(fs::exists(fx.dir() / "upper/sbin/start-stop-daemon.REAL"));
  CHECK_FALSE(fs::exists(root / "var/log/dpkg.log"));
  CHECK_FALSE(fs::exists(root / "var/cache/ldconfig/aux-cache"));
  CHECK(fs::exists(root / "etc/ld.so.cache"));
}

TEST_CASE("check_configure_possible names the package whose scripts can't run", "[deb]") {
  DebControl scripted;
  scripted.package = "base-passwd";
  scripted.version = "3.6.1";
  scripted.files["preinst"] = "#!/bin/sh\n";
  scripted.files["postinst"] = "#!/bin/sh\n";
  DebControl plain;
  plain.package = "libzstd1";
  std::vector<InstalledDeb> debs = {{plain, {}}, {scripted, {}}};
  REQUIRE_OK(check_configure_possible(debs, ImageTools{true, true}));
  REQUIRE_OK(check_configure_possible({{plain, {}}}, ImageTools{false, false}));
  auto r = check_configure_possible(debs, ImageTools{true, false});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message == "package base-passwd 3.6.1 has maintainer scripts (preinst and postinst) that "
                             "must run in the image, but "
                             "the image has no dpkg: add the packages that provide it (dash, dpkg) or build "
                             "on a base image that has it");
  auto both = check_configure_possible(debs, ImageTools{false, false});
  REQUIRE_FALSE(both.ok());
  CHECK_THAT(both.error().message, Catch::Contains("has no /bin/sh and dpkg"));
  CHECK_FALSE(needs_configure({{plain, {}}}));
  CHECK(needs_configure(debs));
}

TEST_CASE("the same packages give the same layer bytes", "[deb]") {
  if (!have_dpkg()) {
    WARN("dpkg-deb not installed; skipping");
    return;
  }
  TempDirFixture fx;
  TestDebs debs = build_test_debs(fx.dir());
  Assembled first = assemble({debs.one, debs.two, debs.three}, DebState::unpacked, {1000, true});
  Assembled again = assemble({debs.one, debs.two, debs.three}, DebState::unpacked, {1000, true});
  CHECK(first.tar == again.tar);
  // The status file doesn't depend on the order packages are given in.
  Assembled reordered = assemble({debs.three, debs.two, debs.one}, DebState::unpacked, {1000, true});
  std::map<std::string, std::string> a;
  std::map<std::string, std::string> b;
  members_of(fx, first.tar, &a);
  members_of(fx, reordered.tar, &b);
  CHECK(a.at("var/lib/dpkg/status") == b.at("var/lib/dpkg/status"));
  CHECK(shell("TZ=UTC tar --full-time -tvf '" + fx.write("l.tar", first.tar).string() +
              "' | grep -vc ' 1970-01-01 00:16:40 '") == "0\n");
}

TEST_CASE("merged /usr can be turned off", "[deb]") {
  TempDirFixture fx;
  fs::path deb = hand_deb(fx, "pkg", {dir_member("./"), dir_member("./bin"), file("./bin/tool", "t", 0755)});
  Assembled a = assemble({deb}, DebState::installed, {0, false});
  auto members = members_of(fx, a.tar);
  CHECK(members[0] == "d bin");
  CHECK(members[1] == "f bin/tool");
  CHECK(std::find(members.begin(), members.end(), "l bin -> usr/bin") == members.end());
  Assembled merged = assemble({deb}, DebState::installed, {0, true});
  auto merged_members = members_of(fx, merged.tar);
  CHECK(merged_members[0] == "d usr");
  CHECK(merged_members[1] == "d usr/bin");
  CHECK(merged_members[2] == "f usr/bin/tool");
  CHECK(std::find(merged_members.begin(), merged_members.end(), "l bin -> usr/bin") != merged_members.end());
  CHECK(merged.debs[0].contents.paths == std::vector<std::string>{"/.", "/bin", "/bin/tool"});
}

TEST_CASE("a path shipped by two packages is written once: directories shared, the first package's file kept",
          "[deb]") {
  TempDirFixture fx;
  fs::path a = hand_deb(fx, "pkg-a",
                        {dir_member("./usr"), dir_member("./usr/share"), file("./usr/share/f", "A"),
                         file("./usr/share/same", "S")});
  fs::path b = hand_deb(fx, "pkg-b",
                        {dir_member("./usr"), dir_member("./usr/share"), file("./usr/share/f", "B"),
                         file("./usr/share/same", "S")});
  Assembled out = assemble({a, b}, DebState::installed, {0, false});
  std::map<std::string, std::string> contents;
  auto members = members_of(fx, out.tar, &contents);
  CHECK(std::count(members.begin(), members.end(), "d usr/share") == 1);
  CHECK(std::count(members.begin(), members.end(), "f usr/share/f") == 1);
  CHECK(contents.at("usr/share/f") == "A");
  // Both packages still own the path, as dpkg would record it.
  CHECK(out.debs[1].contents.paths ==
        std::vector<std::string>{"/.", "/usr", "/usr/share", "/usr/share/f", "/usr/share/same"});

  // A directory where another package put a file can't be built.
  fs::path c =
      hand_deb(fx, "pkg-c", {dir_member("./usr"), dir_member("./usr/share"), dir_member("./usr/share/f")});
  test::StringSink sink;
  TarWriter tar(sink);
  log::Progress progress("test", 0);
  DebLayerPaths seen;
  REQUIRE_OK(write_deb_data(tar, progress, a, {}, seen, "pkg-a.deb"));
  auto r = write_deb_data(tar, progress, c, {}, seen, "pkg-c.deb");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::invalid_input);
  CHECK(r.error().message ==
        "pkg-c.deb: ships the directory /usr/share/f, but pkg-a.deb installed a file there");

  // A package may not ship the database.
  fs::path d = hand_deb(fx, "pkg-d", {file("./var/lib/dpkg/status", "x")});
  DebLayerPaths seen2;
  auto contents_d = write_deb_data(tar, progress, d, {}, seen2, "pkg-d.deb");
  REQUIRE_OK(contents_d);
  auto control_d = read_deb_control(d, "pkg-d.deb");
  REQUIRE_OK(control_d);
  auto db = write_dpkg_database(tar, seen2, {{*control_d, *contents_d}}, DebState::installed, 0, "amd64");
  REQUIRE_FALSE(db.ok());
  CHECK(db.error().message == "/var/lib/dpkg/status belongs to the dpkg database, but pkg-d.deb ships it");
}

TEST_CASE("hostile packages are refused with a message naming the problem", "[deb]") {
  TempDirFixture fx;
  const std::string good_control = control_tar("hostile");
  const std::string good_data = tar_of({dir_member("./"), file("./x", "x")});
  struct Case {
    std::string name;
    std::string bytes;
    std::string message; // a part of the error
  };
  TarEntry device;
  device.path = "./dev/null";
  device.type = TarEntry::Type::char_device;
  device.dev_major = 1;
  device.dev_minor = 3;
  TarEntry hardlink;
  hardlink.path = "./h";
  hardlink.type = TarEntry::Type::hardlink;
  hardlink.link_target = "./missing";
  std::string with_status = tar_of({file("./control", "Package: hostile\nVersion: 1\nArchitecture: all\n"
                                                      "Status: install ok installed\n")});
  std::vector<Case> cases = {
      {"not-ar", "hello world\n", "not a Debian package (an ar archive)"},
      {"first-member", test::ar_archive({{"control.tar", good_control}, {"debian-binary", "2.0\n"}}),
       "the first member is 'control.tar', expected 'debian-binary'"},
      {"format-3",
       test::ar_archive({{"debian-binary", "3.0\n"}, {"control.tar", good_control}, {"data.tar", good_data}}),
       "unsupported Debian package format '3.0'"},
      {"wrong-order",
       test::ar_archive({{"debian-binary", "2.0\n"}, {"data.tar", good_data}, {"control.tar", good_control}}),
       "member 'data.tar' where control.tar"},
      {"no-data", test::ar_archive({{"debian-binary", "2.0\n"}, {"control.tar", good_control}}),
       "the package ends before its data.tar member"},
      {"dotdot",
       test::ar_archive({{"debian-binary", "2.0\n"},
                         {"control.tar", good_control},
                         {"data.tar", tar_of({file("./../x", "x")})}}),
       "'..' component"},
      {"absolute",
       test::ar_archive({{"debian-binary", "2.0\n"},
                         {"control.tar", good_control},
                         {"data.tar", tar_of({file("/etc/x", "x")})}}),
       "absolute name"},
      {"device",
       test::ar_archive({{"debian-binary", "2.0\n"},
                         {"control.tar", good_control},
                         {"data.tar", tar_of({Member{device, ""}})}}),
       "'dev/null' is a device node"},
      {"dangling-hardlink",
       test::ar_archive({{"debian-binary", "2.0\n"},
                         {"control.tar", good_control},
                         {"data.tar", tar_of({Member{hardlink, ""}})}}),
       "hard link /h -> /missing: the target is not a file earlier in the package"},
      {"misnamed-compression",
       test::ar_archive(
           {{"debian-binary", "2.0\n"}, {"control.tar", good_control}, {"data.tar.gz", good_data}}),
       "data.tar.gz"},
      {"status-field",
       test::ar_archive({{"debian-binary", "2.0\n"}, {"control.tar", with_status}, {"data.tar", good_data}}),
       "a package may not set the 'Status' field"},
      {"twice",
       test::ar_archive({{"debian-binary", "2.0\n"},
                         {"control.tar", good_control},
                         {"data.tar", tar_of({file("./x", "1"), file("./x", "2")})}}),
       "lists 'x' twice"},
  };
  if (have_dpkg()) {
    TestDebs debs = build_test_debs(fx.dir());
    std::string whole = slurp(debs.three);
    cases.push_back({"truncated", whole.substr(0, whole.size() * 2 / 3), "three-truncated.deb"});
  }
  for (const Case& c : cases) {
    INFO(c.name);
    fs::path deb = fx.write(c.name + ".deb", c.bytes);
    std::string what = c.name == "truncated" ? "three-truncated.deb" : c.name + ".deb";
    test::StringSink sink;
    TarWriter tar(sink);
    log::Progress progress("test", 0);
    DebLayerPaths seen;
    auto control = read_deb_control(deb, what);
    auto data = write_deb_data(tar, progress, deb, {}, seen, what);
    REQUIRE_FALSE((control.ok() && data.ok()));
    const Error& e = !control.ok() ? control.error() : data.error();
    INFO(e.message);
    CHECK(e.code == ExitCode::invalid_input);
    CHECK_THAT(e.message, Catch::Contains(c.message) && Catch::StartsWith(what + ": "));
  }
}

TEST_CASE("a Debian archive package from this machine's apt cache matches dpkg --unpack", "[deb]") {
  if (!have_dpkg()) {
    WARN("dpkg not installed; skipping");
    return;
  }
  // A real package without maintainer scripts, so that real dpkg can unpack it here harmlessly.
  // LOCKSTEP_TEST_DEB=FILE.deb checks that one instead (it must have no preinst/postinst).
  std::string found;
  if (const char* chosen = std::getenv("LOCKSTEP_TEST_DEB"); chosen != nullptr) {
    found = std::string(chosen) + "\n";
  } else {
    found = shell("for f in /var/cache/apt/archives/libzstd1_*.deb /var/cache/apt/archives/*.deb; do "
                  "[ -f \"$f\" ] || continue; "
                  "dpkg-deb --ctrl-tarfile \"$f\" 2>/dev/null | tar -t 2>/dev/null | "
                  "grep -qE '(pre|post)inst$' || { echo \"$f\"; break; }; done");
  }
  if (found.empty()) {
    WARN("no .deb in /var/cache/apt/archives; skipping");
    return;
  }
  fs::path deb = found.substr(0, found.size() - 1);
  INFO(deb.string());
  TempDirFixture fx;
  Assembled a = assemble({deb}, DebState::unpacked);
  fs::path ours = extract(fx.dir(), "image", a.tar);
  fs::path ref = reference_root(fx.dir());
  run_command(dpkg_in(ref, "--force-depends --unpack '" + deb.string() + "' >/dev/null"));
  bool has_conffiles = a.debs[0].control.files.count("conffiles") != 0;
  CHECK(with_new_conffiles(slurp(ours / "var/lib/dpkg/status")) == slurp(ref / "var/lib/dpkg/status"));
  for (const char* ext :
       {".list", ".md5sums", ".conffiles", ".triggers", ".shlibs", ".symbols", ".templates"}) {
    std::string name = a.debs[0].control.dpkg_name() + ext;
    INFO(name);
    CHECK(fs::exists(ours / "var/lib/dpkg/info" / name) == fs::exists(ref / "var/lib/dpkg/info" / name));
    CHECK(slurp(ours / "var/lib/dpkg/info" / name) == slurp(ref / "var/lib/dpkg/info" / name));
  }
  CHECK(slurp(ours / "var/lib/dpkg/triggers/File") == slurp(ref / "var/lib/dpkg/triggers/File"));
  if (!has_conffiles) { // dpkg --unpack leaves conffiles as FILE.dpkg-new until it configures
    CHECK(tree_listing(ours) == tree_listing(ref));
  }
}

TEST_CASE("every compression dpkg allows is read, and '_' members are skipped", "[deb]") {
  TempDirFixture fx;
  const std::string data = tar_of({dir_member("./"), dir_member("./usr"), file("./usr/f", "content")});
  fx.write("data.tar", data);
  fx.write("control.tar", control_tar("pkg"));
  struct Codec {
    const char* suffix;
    const char* command; // compresses stdin to stdout
  };
  for (const Codec& c :
       {Codec{"", "cat"}, Codec{".gz", "gzip -n"}, Codec{".xz", "xz"}, Codec{".zst", "zstd -q"},
        Codec{".bz2", "bzip2"}, Codec{".lzma", "xz --format=lzma"}}) {
    INFO(c.suffix);
    std::string tool = std::string(c.command).substr(0, std::string(c.command).find(' '));
    if (!test::have_tool(tool.c_str())) {
      WARN(tool + " not installed; skipping " + c.suffix);
      continue;
    }
    std::string d = fx.dir().string();
    run_command("cd '" + d + "' && " + c.command + " < data.tar > data.out && " + c.command +
                " < control.tar > control.out");
    std::string control_name = std::string("control.tar") + c.suffix;
    std::string control = slurp(fx.dir() / "control.out");
    if (std::string_view(c.suffix) == ".bz2" || std::string_view(c.suffix) == ".lzma") {
      control_name = "control.tar"; // dpkg allows these for data.tar only
      control = control_tar("pkg");
    }
    fs::path deb = fx.write(
        "pkg.deb", test::ar_archive({{"debian-binary", "2.0\n"},
                                     {"_extension", "ignored"},
                                     {control_name, control},
                                     {"_another", "ignored"},
                                     {std::string("data.tar") + c.suffix, slurp(fx.dir() / "data.out")},
                                     {"trailing", "ignored"}}));
    Assembled a = assemble({deb}, DebState::installed);
    std::map<std::string, std::string> contents;
    members_of(fx, a.tar, &contents);
    CHECK(contents.at("usr/f") == "content");
    CHECK(a.debs[0].control.package == "pkg");
  }
}

TEST_CASE("merged /usr: a package's own root symlink is kept, a file there is refused", "[deb]") {
  TempDirFixture fx;
  TarEntry link;
  link.path = "./bin";
  link.type = TarEntry::Type::symlink;
  link.mode = 0777;
  link.link_target = "usr/bin";
  fs::path linking = hand_deb(fx, "base",
                              {dir_member("./"), Member{link, ""}, dir_member("./usr"),
                               dir_member("./usr/bin"), file("./usr/bin/sh", "#!", 0755)});
  test::StringSink sink;
  TarWriter tar(sink);
  log::Progress progress("test", 0);
  DebLayerPaths seen;
  REQUIRE_OK(write_deb_data(tar, progress, linking, {}, seen, "base.deb"));
  REQUIRE_OK(emit_merged_usr_links(tar, seen, 0, "arm64"));
  tar.finish();
  auto members = members_of(fx, sink.out);
  CHECK(std::count(members.begin(), members.end(), "l bin -> usr/bin") == 1);
  CHECK(std::count(members.begin(), members.end(), "l sbin -> usr/sbin") == 1);
  CHECK(std::count(members.begin(), members.end(), "l lib -> usr/lib") == 1);
  // arm64 has no multilib directories.
  CHECK(std::find(members.begin(), members.end(), "l lib64 -> usr/lib64") == members.end());

  fs::path plain = hand_deb(fx, "odd", {file("./lib64", "not a directory")});
  DebLayerPaths seen2;
  auto r = write_deb_data(tar, progress, plain, {}, seen2, "odd.deb");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message ==
        "odd.deb: ships /lib64 as a file, which merged /usr makes a symlink to usr/lib64");
}

namespace {

Member symlink_member(const std::string& path, const std::string& target) {
  TarEntry e;
  e.path = path;
  e.type = TarEntry::Type::symlink;
  e.mode = 0777;
  e.link_target = target;
  return Member{e, ""};
}

Member hardlink_member(const std::string& path, const std::string& target) {
  TarEntry e;
  e.path = path;
  e.type = TarEntry::Type::hardlink;
  e.mode = 0644;
  e.link_target = target;
  return Member{e, ""};
}

} // namespace

TEST_CASE(
    "files below a package's symbolic link go where the unpacker puts them, and a link out of the layer "
    "is refused",
    "[deb]") {
  TempDirFixture fx;
  // A link to a directory of the same layer: the files land in that directory, and the unpacker applies
  // the layer.
  fs::path good =
      hand_deb(fx, "linked",
               {dir_member("./"), dir_member("./usr"), dir_member("./usr/share"), dir_member("./usr/share/x"),
                file("./usr/share/x/a", "a"), symlink_member("./usr/zz", "share/x"), file("./usr/zz/b", "b"),
                file("./usr/zz/sub/c", "c"), hardlink_member("./usr/zz/h", "./usr/zz/b"),
                symlink_member("./opt", "/usr/share"), file("./opt/x/d", "d")});
  test::StringSink sink;
  TarWriter tar(sink);
  log::Progress progress("test", 0);
  DebLayerPaths seen;
  auto contents = write_deb_data(tar, progress, good, {}, seen, "linked.deb");
  REQUIRE_OK(contents);
  tar.finish();
  auto members = members_of(fx, sink.out);
  CHECK(members == std::vector<std::string>{"d usr", "d usr/share", "d usr/share/x", "f usr/share/x/a",
                                            "l usr/zz -> share/x", "f usr/share/x/b", "d usr/share/x/sub",
                                            "f usr/share/x/sub/c", "h usr/share/x/h -> usr/share/x/b",
                                            "l opt -> /usr/share", "f usr/share/x/d"});
  // dpkg's .list names the paths as the package does.
  CHECK(contents->paths == std::vector<std::string>{"/.", "/usr", "/usr/share", "/usr/share/x",
                                                    "/usr/share/x/a", "/usr/zz", "/usr/zz/b", "/usr/zz/sub/c",
                                                    "/usr/zz/h", "/opt", "/opt/x/d"});
  fs::create_directories(fx.dir() / "root");
  UniqueFd root(::open((fx.dir() / "root").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE_OK(runner::apply_tar_bytes(root.get(), sink.out, {}));
  CHECK(slurp(fx.dir() / "root/usr/zz/sub/c") == "c");
  CHECK(slurp(fx.dir() / "root/usr/share/x/d") == "d"); // root/opt links to /usr/share: not read on the host
  CHECK(fs::hard_link_count(fx.dir() / "root/usr/share/x/h") == 2);

  // A link out of what the layer holds (an absolute directory, /tmp, nothing) with files below it: the
  // unpacker would refuse the layer or write where the layer can't see, so the build refuses it.
  for (const std::string target : {"/opt/elsewhere", "/tmp", "../missing", "a/../../nowhere"}) {
    INFO(target);
    fs::path evil = hand_deb(fx, "evil",
                             {dir_member("./"), dir_member("./usr"), symlink_member("./usr/foo", target),
                              file("./usr/foo/bar", "x")});
    test::StringSink evil_sink;
    TarWriter evil_tar(evil_sink);
    DebLayerPaths evil_seen;
    auto r = write_deb_data(evil_tar, progress, evil, {}, evil_seen, "evil.deb");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ExitCode::invalid_input);
    CHECK(r.error().message ==
          "evil.deb: /usr/foo/bar would go below /usr/foo, a symbolic link to " + target +
              " that evil.deb installed, which does not lead to a directory installed before it in this "
              "layer; refusing the package, as the image could not be unpacked (files may go below a "
              "package's symbolic link only where it leads to a directory of the same layer, as merged "
              "/usr's do)");
  }

  // A link to a file, and a loop.
  fs::path to_file = hand_deb(
      fx, "tofile", {dir_member("./"), file("./f", "x"), symlink_member("./l", "f"), file("./l/x", "x")});
  test::StringSink other_sink;
  TarWriter other_tar(other_sink);
  DebLayerPaths seen3;
  auto r3 = write_deb_data(other_tar, progress, to_file, {}, seen3, "tofile.deb");
  REQUIRE_FALSE(r3.ok());
  CHECK(
      r3.error().message ==
      "tofile.deb: /l/x would go below /l, which is not a directory (tofile.deb installed a symlink there)");
  fs::path loop = hand_deb(
      fx, "loop",
      {dir_member("./"), symlink_member("./a", "b"), symlink_member("./b", "a"), file("./a/x", "x")});
  DebLayerPaths seen4;
  auto r4 = write_deb_data(other_tar, progress, loop, {}, seen4, "loop.deb");
  REQUIRE_FALSE(r4.ok());
  CHECK(r4.error().message == "loop.deb: /a/x would go below /a, where symbolic links loop");
}
