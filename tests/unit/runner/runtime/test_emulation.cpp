#include "runner/runtime/emulation.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace lockstep;
using namespace lockstep::runner;
namespace fs = std::filesystem;

namespace {

// A scratch binfmt.d directory.
struct BinfmtDir {
  fs::path dir = fs::temp_directory_path() / ("ls-binfmt-" + std::to_string(::getpid()));
  BinfmtDir() { fs::create_directories(dir); }
  ~BinfmtDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  BinfmtDir(const BinfmtDir&) = delete;
  BinfmtDir& operator=(const BinfmtDir&) = delete;
  void write(const std::string& name, const std::string& text) const { std::ofstream(dir / name) << text; }
};

// Debian 12's qemu-aarch64.conf, with the interpreter at `interp`.
std::string debian_line(const std::string& interp) {
  return "# "
         "comment\n:qemu-aarch64:M::"
         "\\x7f\\x45\\x4c\\x46\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00"
         "\\x00\\x02\\x00\\xb7\\x00:"
         "\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff"
         "\\xff\\xfe\\xff\\xff\\xff:" +
         interp + ":OCPF\n";
}

} // namespace

TEST_CASE("emulation: the host's own architecture needs none; another takes qemu-user's handler",
          "[emulation]") {
  BinfmtDir b;
  const std::string host = host_architecture();
  REQUIRE_FALSE(host.empty());
  auto none = plan_emulation(host, b.dir);
  REQUIRE(none);
  CHECK_FALSE(none->has_value());
  auto unknown = plan_emulation("", b.dir);
  REQUIRE(unknown);
  CHECK_FALSE(unknown->has_value());
  if (host != "amd64") {
    return; // the rest emulates arm64 on an x86_64 machine
  }
  // Missing qemu-user-static: an external error saying what to install.
  auto missing = plan_emulation("arm64", b.dir);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ExitCode::external);
  CHECK_THAT(missing.error().message, Catch::Contains("apt-get install qemu-user-static"));
  // Debian's line: F (and P for the -binfmt-P name) kept, C dropped.
  const fs::path interp = b.dir / "aarch64-binfmt-P";
  fs::copy_file("/bin/true", interp);
  b.write("qemu-aarch64.conf", debian_line(interp.string()));
  auto planned = plan_emulation("arm64", b.dir);
  REQUIRE(planned);
  REQUIRE(planned->has_value());
  const Emulation& e = **planned;
  CHECK(e.name == "qemu-aarch64");
  CHECK(e.architecture == "arm64");
  CHECK(e.host == "amd64");
  CHECK(e.interpreter == interp);
  CHECK(e.registration.starts_with(":qemu-aarch64:M::\\x7f\\x45\\x4c\\x46"));
  CHECK(e.registration.ends_with(":" + interp.string() + ":POF"));
  CHECK(emulation_note(e).starts_with("emulating linux/arm64 on this linux/amd64 machine with qemu-user"));
  // An interpreter without the -binfmt-P name: F alone.
  const fs::path plain = b.dir / "qemu-aarch64-static";
  fs::copy_file("/bin/true", plain);
  b.write("qemu-aarch64.conf", debian_line(plain.string()));
  auto f_only = plan_emulation("arm64", b.dir);
  REQUIRE(f_only);
  CHECK((*f_only)->registration.ends_with(":F"));
}

TEST_CASE("emulation: malformed handler files and unknown architectures are refused", "[emulation]") {
  BinfmtDir b;
  if (host_architecture() != "amd64") {
    return;
  }
  auto mips = plan_emulation("mips64le", b.dir);
  REQUIRE_FALSE(mips);
  CHECK(mips.error().code == ExitCode::invalid_input);
  CHECK_THAT(mips.error().message, Catch::Contains("lockstep emulates amd64, arm64"));
  for (const std::string& text :
       {std::string(":qemu-aarch64:E::aarch64::/bin/true:F\n"),
        std::string(":other:M::\\x7f:\\xff:/bin/true:F\n"),
        std::string(":qemu-aarch64:M::\\x7f:\\xff:relative/qemu:F\n"), std::string("nothing here\n")}) {
    b.write("qemu-aarch64.conf", text);
    auto r = plan_emulation("arm64", b.dir);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::invalid_input);
  }
  b.write("qemu-aarch64.conf", debian_line("/nonexistent/qemu-aarch64-static"));
  auto gone = plan_emulation("arm64", b.dir);
  REQUIRE_FALSE(gone);
  CHECK(gone.error().code == ExitCode::external);
}
