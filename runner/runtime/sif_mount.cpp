#include "runner/runtime/sif_mount.hpp"

#include "runner/runtime/root_cache.hpp"
#include "runner/runtime/unpack.hpp"
#include "support/base/log.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/sif.hpp"
#include "support/oci/squashfs.hpp"
#include "support/store/blob_store.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <fmt/ranges.h>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

constexpr auto k_fuse_mount_timeout = std::chrono::seconds(10);
constexpr auto k_fuse_exit_timeout = std::chrono::seconds(3);
constexpr std::uint64_t k_max_oci_config = 4ULL << 20;

// The first executable `name` on $PATH (or the usual system directories), or empty.
fs::path find_program(const std::string& name) {
  std::string path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  if (const char* p = std::getenv("PATH"); p != nullptr && *p != '\0') {
    path = std::string(p) + ":" + path;
  }
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = path.find(':', i);
    if (j == std::string::npos) {
      j = path.size();
    }
    std::string dir = path.substr(i, j - i);
    if (!dir.empty()) {
      fs::path candidate = fs::path(dir) / name;
      if (::access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
    }
    i = j + 1;
  }
  return {};
}

bool readable_writable(const char* path) {
  return ::access(path, R_OK | W_OK) == 0;
}

// Why FUSE is unusable here, or empty when it looks usable.
std::string fuse_unavailable_reason() {
  if (find_program("squashfuse").empty()) {
    return "squashfuse is not installed";
  }
  if (!readable_writable("/dev/fuse")) {
    return fmt::format("/dev/fuse is not accessible ({}; many hosts without udev leave it 0600)",
                       std::strerror(errno));
  }
  if (::geteuid() != 0 && find_program("fusermount3").empty()) {
    return "fusermount3 is not installed";
  }
  return {};
}

std::string loop_unavailable_reason() {
  if (::geteuid() != 0) {
    return "loop mounts need root";
  }
  if (!readable_writable("/dev/loop-control")) {
    return fmt::format("/dev/loop-control is not accessible ({})", std::strerror(errno));
  }
  return {};
}

// Runs a program and waits; returns its exit code (or -1 when it could not be started).
int run_program(const std::vector<std::string>& argv) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> args = c_strings(argv);
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    ::execv(args[0], args.data());
    _exit(127);
  }
  if (pid < 0) {
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool same_device_as_parent(const fs::path& dir) {
  struct stat a {};
  struct stat b {};
  return ::stat(dir.c_str(), &a) == 0 && ::stat(dir.parent_path().c_str(), &b) == 0 && a.st_dev == b.st_dev;
}

// The object named oci-config.json, if the SIF has one (bounded: the file is hostile input).
Result<std::string> read_oci_config(const sif::Image& image) {
  for (const sif::Descriptor& d : image.descriptors) {
    if (d.type != sif::DataType::generic_json || d.name != "oci-config.json") {
      continue;
    }
    if (d.size < 0 || static_cast<std::uint64_t>(d.size) > k_max_oci_config) {
      return invalid_input("{}: the oci-config.json object is too large ({} bytes)", image.file.string(),
                           d.size);
    }
    LS_TRY_ASSIGN(UniqueFd fd, open_file(image.file, O_RDONLY));
    std::string bytes(static_cast<std::size_t>(d.size), '\0');
    ssize_t n = ::pread(fd.get(), bytes.data(), bytes.size(), d.offset);
    if (n != d.size) {
      return io_error("can't read the oci-config.json object of {}", image.file.string());
    }
    return bytes;
  }
  return std::string();
}

} // namespace

Result<std::string> read_sif_oci_config(const fs::path& sif) {
  LS_TRY_ASSIGN(sif::Image image, sif::read_image(sif));
  return read_oci_config(image);
}

namespace {

Result<void> make_private_dir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_error("can't create directory " + dir.string(), errno);
  }
  return {};
}

// STORE/roots/sif-<key>: the extracted root of the SIF whose content key is `key`.
fs::path extracted_dir(const fs::path& store_root, std::string_view key) {
  return store_root / "roots" / ("sif-" + std::string(key));
}

// The store's record of a SIF's content key: the sha256 of its identity (device, inode, size and
// times), so a changed file is hashed again.
Result<std::pair<std::string, struct stat>> content_record_key(const fs::path& sif) {
  struct stat st {};
  if (::stat(sif.c_str(), &st) != 0) {
    return errno_error("can't stat " + sif.string(), errno);
  }
  const std::string identity =
      fmt::format("{}:{}:{}:{}.{}:{}.{}", st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec,
                  st.st_mtim.tv_nsec, st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
  return std::pair{sha256_of(identity).hex(), st};
}

// The SIF's sha256 the store remembers under `record_key` (content_record_key), if any.
std::optional<std::string> remembered_content_key(const BlobStore& store, const std::string& record_key) {
  std::optional<std::string> known = store.get_record("sif-digests", record_key);
  return known && known->size() == 64 ? known : std::nullopt;
}

// The extracted root of `sif` when the store already has one and knows the SIF's content key
// (never hashes the file): auto uses it before mounting anything.
std::optional<fs::path> existing_extracted_root(const fs::path& sif, const fs::path& store_root) {
  struct stat roots {};
  if (::stat((store_root / "roots").c_str(), &roots) != 0) {
    return std::nullopt; // nothing was ever extracted or unpacked here: don't create the store to look
  }
  Result<std::pair<std::string, struct stat>> record = content_record_key(sif);
  if (!record) {
    return std::nullopt;
  }
  Result<BlobStore> store = BlobStore::open(store_root);
  if (!store) {
    return std::nullopt;
  }
  std::optional<std::string> key = remembered_content_key(*store, record->first);
  if (!key) {
    return std::nullopt;
  }
  fs::path dir = extracted_dir(store_root, *key);
  if (!is_published(dir)) {
    return std::nullopt;
  }
  return dir / "rootfs";
}

// Extracts the partition into STORE/roots/sif-<key>/rootfs once; later calls reuse it. Built in
// roots/tmp and published by renaming the directory (info.json marks it complete), like the
// unpack cache.
Result<fs::path> extracted_root(const fs::path& sif, const sif::Descriptor& part,
                                const fs::path& store_root) {
  LS_TRY_ASSIGN(std::string key, sif_content_key(sif, store_root));
  const fs::path roots = store_root / "roots";
  const fs::path dir = extracted_dir(store_root, key);
  auto published = [&] { return is_published(dir); };
  if (published()) {
    log::debug("sif: extracted root cached at {}", dir.string());
    return dir / "rootfs";
  }
  LS_TRY(make_dirs(store_root));
  LS_TRY(make_private_dir(roots));
  LS_TRY(make_private_dir(roots / "tmp"));
  // Held while one process extracts the SIF; others wait, then reuse its root.
  const fs::path lock_path = roots / ("sif-" + key + ".lock");
  LS_TRY_ASSIGN(UniqueFd lock,
                lock_file_exclusive(lock_path, 0600,
                                    "waiting for another lockstep process to finish extracting " +
                                        lock_path.stem().string()));
  if (published()) {
    return dir / "rootfs";
  }
  log::Timer timer("extract the SIF partition");
  LS_TRY_ASSIGN(TempDir staging, TempDir::create(roots / "tmp", "sif-" + key + "-"));
  const fs::path rootfs = staging.path() / "rootfs";
  if (::mkdir(rootfs.c_str(), 0755) != 0) {
    return errno_error("can't create " + rootfs.string(), errno);
  }
  LS_TRY_ASSIGN(UniqueFd dest, open_file(rootfs, O_RDONLY | O_DIRECTORY));
  LS_TRY(extract_squashfs(sif, part.offset, dest.get(), ::geteuid() == 0));
  if (::fsync(dest.get()) != 0) {
    return errno_error("can't sync " + rootfs.string(), errno);
  }
  LS_TRY(write_file_atomic(staging.path() / "info.json",
                           fmt::format("{{\"sif\":\"{}\",\"sha256\":\"{}\",\"offset\":{},\"size\":{}}}\n",
                                       sif.filename().string(), key, part.offset, part.size)));
  if (::rename(staging.path().c_str(), dir.c_str()) != 0) {
    int err = errno;
    if (!published()) {
      return errno_error("can't publish the extracted root " + dir.string(), err);
    }
    // Published meanwhile by a process that did not take the lock; ours is removed.
    (void)remove_tree(staging.path());
  }
  staging.release();
  (void)fsync_dir(roots);
  log::debug("sif: extracted the partition into {}", dir.string());
  return dir / "rootfs";
}

} // namespace

// squashfuse run as a child in the foreground; the mount lives as long as this object.
class SifRoot::FuseMount {
public:
  static Result<std::unique_ptr<FuseMount>> start(const fs::path& sif, std::int64_t offset,
                                                  const fs::path& store_root) {
    LS_TRY(make_dirs(store_root / "tmp"));
    std::string templ = (store_root / "tmp" / "sif-mnt-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) {
      return errno_error("can't create a mount point in " + (store_root / "tmp").string(), errno);
    }
    auto m = std::unique_ptr<FuseMount>(new FuseMount(templ));
    const fs::path squashfuse = find_program("squashfuse");
    std::string options = fmt::format("offset={}", offset);
    if (::geteuid() == 0) {
      options += ",allow_other"; // the container may switch to another user (--user)
    }
    std::vector<std::string> argv = {squashfuse.string(), "-f", "-o", options, sif.string(),
                                     m->m_dir.string()};
    int err_pipe[2];
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
      return errno_error("can't create a pipe", errno);
    }
    m->m_stderr = UniqueFd(err_pipe[0]);
    pid_t pid = ::fork();
    if (pid == 0) {
      // Its own process group: a Ctrl-C meant for the container must not unmount its root. It
      // unmounts itself if lockstep dies without cleaning up.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
      int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, STDIN_FILENO);
      ::dup2(null, STDOUT_FILENO);
      ::dup2(err_pipe[1], STDERR_FILENO);
      std::vector<char*> args = c_strings(argv);
      ::execv(args[0], args.data());
      _exit(127);
    }
    ::close(err_pipe[1]);
    if (pid < 0) {
      return errno_error("can't start squashfuse", errno);
    }
    m->m_pid = pid;
    log::debug("sif: started {} (pid {})", fmt::join(argv, " "), pid);

    // Ready when the mount point's device changes; failed if squashfuse exits first.
    auto deadline = std::chrono::steady_clock::now() + k_fuse_mount_timeout;
    while (same_device_as_parent(m->m_dir)) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        m->m_pid = -1;
        std::string out = m->read_stderr();
        return Error{ExitCode::external,
                     fmt::format("squashfuse could not mount {}: {}", sif.string(),
                                 out.empty() ? fmt::format("exit status {}", WEXITSTATUS(status)) : out)};
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return Error{ExitCode::external, fmt::format("squashfuse did not mount {} within {} s", sif.string(),
                                                     k_fuse_mount_timeout.count())};
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    m->m_mounted = true;
    log::debug("sif: squashfuse mounted {} on {}", sif.string(), m->m_dir.string());
    return m;
  }

  ~FuseMount() {
    if (m_mounted) {
      bool done = ::geteuid() == 0
                      ? ::umount2(m_dir.c_str(), 0) == 0 || ::umount2(m_dir.c_str(), MNT_DETACH) == 0
                      : run_program({find_program("fusermount3").string(), "-u", "-z", m_dir.string()}) == 0;
      if (!done) {
        log::warn("can't unmount the SIF mounted at {}; unmount it with fusermount3 -u", m_dir.string());
      }
      log::debug("sif: unmounted {}", m_dir.string());
    }
    if (m_pid > 0) {
      // squashfuse exits once its mount is gone; it is asked to if it lingers.
      auto deadline = std::chrono::steady_clock::now() + k_fuse_exit_timeout;
      int status = 0;
      bool signalled = !m_mounted;
      for (;;) {
        pid_t w = ::waitpid(m_pid, &status, WNOHANG);
        if (w == m_pid || (w < 0 && errno != EINTR)) {
          break;
        }
        if (std::chrono::steady_clock::now() > deadline || signalled) {
          ::kill(m_pid, signalled ? SIGKILL : SIGTERM);
          if (!signalled) {
            deadline = std::chrono::steady_clock::now() + k_fuse_exit_timeout;
          }
          signalled = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    if (::rmdir(m_dir.c_str()) != 0 && errno != ENOENT) {
      log::debug("sif: can't remove the mount point {}: {}", m_dir.string(), std::strerror(errno));
    }
  }
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;

  [[nodiscard]] const fs::path& dir() const { return m_dir; }

private:
  explicit FuseMount(fs::path dir) : m_dir(std::move(dir)) {}

  std::string read_stderr() {
    std::string out;
    std::array<char, 1024> buf{};
    ssize_t n = 0;
    while (out.size() < 4096 && (n = ::read(m_stderr.get(), buf.data(), buf.size())) > 0) {
      out.append(buf.data(), static_cast<std::size_t>(n));
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) {
      out.pop_back();
    }
    return out;
  }

  fs::path m_dir;
  pid_t m_pid = -1;
  UniqueFd m_stderr; // kept open: squashfuse must not get SIGPIPE for a late warning
  bool m_mounted = false;
};

std::string_view sif_mount_mode_name(SifMountMode mode) {
  switch (mode) {
  case SifMountMode::automatic:
    return "auto";
  case SifMountMode::loop:
    return "loop";
  case SifMountMode::fuse:
    return "fuse";
  case SifMountMode::extract:
    return "extract";
  }
  return "auto";
}

Result<SifMountMode> parse_sif_mount_mode(std::string_view text) {
  for (SifMountMode m :
       {SifMountMode::automatic, SifMountMode::loop, SifMountMode::fuse, SifMountMode::extract}) {
    if (text == sif_mount_mode_name(m)) {
      return m;
    }
  }
  return invalid_input("unknown SIF mount path '{}': use auto, loop, fuse or extract", text);
}

Result<std::string> sif_content_key(const fs::path& sif, const fs::path& store_root) {
  LS_TRY_ASSIGN(auto record, content_record_key(sif));
  const auto& [record_key, st] = record;
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(store_root));
  if (std::optional<std::string> known = remembered_content_key(store, record_key)) {
    return *known;
  }
  log::Timer timer("hash the SIF");
  LS_TRY_ASSIGN(Digest digest, sha256_of_file(sif));
  // A file changed within the last 2 s might change again without its times ticking: not recorded.
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto changed = std::chrono::seconds(std::max(st.st_mtim.tv_sec, st.st_ctim.tv_sec));
  if (now - changed > std::chrono::seconds(2)) {
    (void)store.put_record("sif-digests", record_key, digest.hex());
  }
  return digest.hex();
}

SifRoot::SifRoot(SifRoot&&) noexcept = default;
SifRoot::~SifRoot() = default;

std::string_view SifRoot::kind_name() const {
  switch (m_kind) {
  case Kind::loop:
    return "loop";
  case Kind::fuse:
    return "fuse";
  case Kind::extracted:
    return "extract";
  }
  return "extract";
}

void SifRoot::apply_to(SandboxConfig& config) const {
  if (m_kind == Kind::loop) {
    config.loop_root = m_loop;
  } else {
    config.root = m_dir;
  }
}

Result<SifRoot> SifRoot::prepare(const fs::path& sif, SifMountMode mode, const fs::path& store_root) {
  LS_TRY_ASSIGN(sif::Image image, sif::read_image(sif));
  const sif::Descriptor* part = image.primary_partition();
  if (part == nullptr) {
    return invalid_input("{} has no primary system partition to run", sif.string());
  }
  if (part->fs_type != sif::FsType::squashfs) {
    return invalid_input("{}: the primary partition is not squashfs (type {}); only squashfs can be run",
                         sif.string(), static_cast<int>(part->fs_type));
  }
  SifRoot root;
  LS_TRY_ASSIGN(root.m_oci_config, read_oci_config(image));

  // An extracted root the store already has costs nothing to use: no mount, nothing decompressed.
  if (mode == SifMountMode::automatic) {
    if (std::optional<fs::path> dir = existing_extracted_root(fs::absolute(sif), store_root)) {
      log::debug("sif: auto: extract (already extracted at {})", dir->string());
      root.m_kind = Kind::extracted;
      root.m_dir = std::move(*dir);
      return root;
    }
  }
  // Choose the path: the first that works here, or the forced one (an error if it can't work).
  std::string loop_why = loop_unavailable_reason();
  std::string fuse_why = loop_why.empty() && mode == SifMountMode::automatic ? "" : fuse_unavailable_reason();
  SifMountMode chosen = mode;
  if (mode == SifMountMode::automatic) {
    chosen = loop_why.empty()   ? SifMountMode::loop
             : fuse_why.empty() ? SifMountMode::fuse
                                : SifMountMode::extract;
    log::debug("sif: auto: {}{}", sif_mount_mode_name(chosen),
               chosen == SifMountMode::loop ? ""
               : chosen == SifMountMode::fuse
                   ? fmt::format(" (no loop mount: {})", loop_why)
                   : fmt::format(" (no loop mount: {}; no FUSE: {})", loop_why, fuse_why));
  } else if (mode == SifMountMode::loop && !loop_why.empty()) {
    return Error{ExitCode::external, fmt::format("can't loop-mount {}: {}", sif.string(), loop_why)};
  } else if (mode == SifMountMode::fuse && !fuse_why.empty()) {
    return Error{ExitCode::external, fmt::format("can't mount {} with FUSE: {}", sif.string(), fuse_why)};
  }

  switch (chosen) {
  case SifMountMode::loop:
    root.m_kind = Kind::loop;
    root.m_loop = LoopRoot{fs::absolute(sif), static_cast<std::uint64_t>(part->offset),
                           static_cast<std::uint64_t>(part->size)};
    break;
  case SifMountMode::fuse: {
    root.m_kind = Kind::fuse;
    LS_TRY_ASSIGN(root.m_fuse, FuseMount::start(fs::absolute(sif), part->offset, store_root));
    root.m_dir = root.m_fuse->dir();
    break;
  }
  case SifMountMode::extract:
  case SifMountMode::automatic:
    root.m_kind = Kind::extracted;
    LS_TRY_ASSIGN(root.m_dir, extracted_root(fs::absolute(sif), *part, store_root));
    break;
  }
  log::debug("sif: mount path: {} for {} (partition at offset {}, {} bytes)", root.kind_name(), sif.string(),
             part->offset, part->size);
  return root;
}

} // namespace lockstep::runner
