// qemu-user through a private binfmt_misc: see emulation.hpp.
#include "runner/runtime/emulation.hpp"

#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <utility>

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

// OCI architecture names and qemu's (the handler's name is "qemu-" and qemu's).
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> k_arches = {{
    {"amd64", "x86_64"},
    {"arm64", "aarch64"},
    {"riscv64", "riscv64"},
    {"ppc64le", "ppc64le"},
    {"s390x", "s390x"},
    {"386", "i386"},
}};

constexpr const char* k_binfmt_mount = "/proc/sys/fs/binfmt_misc";
// A handler entry or a binfmt.d file is a few hundred bytes.
constexpr std::uint64_t k_max_binfmt_text = std::uint64_t{64} * 1024;

std::string qemu_name(std::string_view oci) {
  for (const auto& [a, q] : k_arches) {
    if (a == oci) {
      return std::string(q);
    }
  }
  return "";
}

// Splits a binfmt.d line (":name:type:offset:magic:mask:interpreter:flags", any first character
// as the separator) into its eight fields; empty when it has another shape.
std::vector<std::string> binfmt_fields(std::string_view line) {
  std::vector<std::string> out;
  if (line.size() < 2) {
    return out;
  }
  const char sep = line.front();
  std::size_t start = 1;
  for (;;) {
    const std::size_t end = line.find(sep, start);
    out.emplace_back(line.substr(start, end == std::string_view::npos ? line.npos : end - start));
    if (end == std::string_view::npos) {
      break;
    }
    start = end + 1;
  }
  return out.size() == 7 ? out : std::vector<std::string>{};
}

// Whether the host's binfmt_misc (when mounted) has `name` enabled with the F flag.
bool host_has_handler(const std::string& name) {
  Result<std::string> text = read_file(fs::path(k_binfmt_mount) / name, k_max_binfmt_text);
  if (!text) {
    return false;
  }
  bool enabled = false;
  bool fixed = false;
  for_each_line(*text, [&](std::string_view line) {
    enabled = enabled || line == "enabled";
    if (line.starts_with("flags: ")) {
      fixed = line.find('F') != std::string_view::npos;
    }
    return true;
  });
  return enabled && fixed;
}

Result<void> write_register(const std::string& line) {
  const std::string path = std::string(k_binfmt_mount) + "/register";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno_error("can't open " + path, errno);
  }
  const ssize_t n = ::write(fd, line.data(), line.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size())) {
    return errno_error("can't register the qemu-user handler in the container's binfmt_misc",
                       n < 0 ? err : EIO);
  }
  return {};
}

// Linux 6.7 and later give each user namespace that mounts one a binfmt_misc of its own.
bool private_binfmt_misc() {
  struct utsname u {};
  if (::uname(&u) != 0) {
    return false;
  }
  const std::string_view release = u.release;
  unsigned major = 0;
  unsigned minor = 0;
  const char* end = release.data() + release.size();
  auto [after_major, e1] = std::from_chars(release.data(), end, major);
  if (e1 != std::errc() || after_major == end || *after_major != '.') {
    return false;
  }
  if (std::from_chars(after_major + 1, end, minor).ec != std::errc()) {
    return false;
  }
  return major > 6 || (major == 6 && minor >= 7);
}

} // namespace

std::string host_architecture() {
  struct utsname u {};
  if (::uname(&u) != 0) {
    return "amd64";
  }
  const std::string_view machine = u.machine;
  for (const auto& [a, q] : k_arches) {
    if (q == machine) {
      return std::string(a);
    }
  }
  return std::string(machine);
}

Result<std::optional<Emulation>> plan_emulation(std::string_view architecture, const fs::path& binfmt_dir) {
  const std::string host = host_architecture();
  if (architecture.empty() || architecture == host) {
    return std::optional<Emulation>();
  }
  const std::string qemu = qemu_name(architecture);
  if (qemu.empty()) {
    return invalid_input(
        "can't run linux/{} programs on this linux/{} machine: lockstep emulates amd64, arm64, "
        "riscv64, ppc64le, s390x and 386 with qemu-user",
        architecture, host);
  }
  Emulation e;
  e.architecture = std::string(architecture);
  e.host = host;
  e.name = "qemu-" + qemu;
  const fs::path conf = binfmt_dir / (e.name + ".conf");
  Result<std::string> text = read_file(conf, k_max_binfmt_text);
  if (!text) {
    return Error{ExitCode::external,
                 fmt::format("this linux/{} image needs qemu-user to run on this linux/{} machine, and {} is "
                             "missing: install Debian's qemu-user-static (apt-get install qemu-user-static)",
                             architecture, host, conf.string())};
  }
  std::vector<std::string> fields;
  for_each_line(*text, [&](std::string_view line) {
    line = trim(line);
    if (!line.empty() && line.front() != '#') {
      fields = binfmt_fields(line);
      return false;
    }
    return true;
  });
  // name, type M (magic), offset, magic, mask, interpreter, flags
  if (fields.size() != 7 || fields[0] != e.name || fields[1] != "M" || fields[3].empty() ||
      fields[5].empty() || fields[5].front() != '/' || fields[5].size() > 127) {
    return invalid_input("{}: not a binfmt_misc line for {} (:{}:M::MAGIC:MASK:/INTERPRETER:FLAGS)",
                         conf.string(), e.name, e.name);
  }
  e.interpreter = fields[5];
  if (::access(e.interpreter.c_str(), X_OK) != 0) {
    return Error{
        ExitCode::external,
        fmt::format("{} names the interpreter {}, which can't be run here: reinstall qemu-user-static",
                    conf.string(), e.interpreter.string())};
  }
  // F: the interpreter is opened now, so the container needs no copy of it; P where Debian's
  // -binfmt-P name asks qemu to keep argv[0]; O with it; never C (a foreign setuid program would run
  // with the owner's ids under qemu).
  std::string flags = "F";
  if (e.interpreter.filename().string().ends_with("-binfmt-P")) {
    flags = "POF";
  }
  e.registration = fmt::format(":{}:M:{}:{}:{}:{}:{}", e.name, fields[2], fields[3], fields[4],
                               e.interpreter.string(), flags);
  e.host_handler = host_has_handler(e.name);
  return std::optional<Emulation>(std::move(e));
}

Result<UniqueFd> register_emulation(const Emulation& e) {
  if (::mount("binfmt_misc", k_binfmt_mount, "binfmt_misc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    const int err = errno;
    if (e.host_handler) {
      log::debug("emulation: no private binfmt_misc ({}); the host's {} handler runs linux/{} programs",
                 std::strerror(err), e.name, e.architecture);
      return UniqueFd();
    }
    return Error{
        ExitCode::external,
        fmt::format("can't give the container a binfmt_misc of its own to run linux/{} programs ({}): "
                    "this needs Linux 6.7 or later; on an older kernel register {} on the host "
                    "(`update-binfmts --enable {}` or systemd-binfmt) with the F flag",
                    e.architecture, std::strerror(err), e.name, e.name)};
  }
  // The instance lives as long as its mount: pivot_root detaches this one with the old root, so a
  // reference to it is held until the container ends.
  UniqueFd pin(::open(k_binfmt_mount, O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!pin.valid()) {
    return errno_error(fmt::format("can't hold the container's binfmt_misc ({})", k_binfmt_mount), errno);
  }
  LS_TRY(write_register(e.registration + "\n"));
  log::debug("emulation: registered {} ({}) in the container's binfmt_misc", e.name, e.interpreter.string());
  return pin;
}

std::string emulation_note(const Emulation& e) {
  return fmt::format(
      "emulating linux/{} on this linux/{} machine with qemu-user ({}, {}); programs run several "
      "times slower than natively",
      e.architecture, e.host, e.name,
      private_binfmt_misc() ? "through a binfmt_misc of the container's own" : "through the host's handler");
}

} // namespace lockstep::runner
