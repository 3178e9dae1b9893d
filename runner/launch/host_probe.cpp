// Host probes for preflight: mpirun --version, the PMIx and UCX libraries (dlopen), the NVIDIA
// driver (runner/runtime/gpu), a user namespace test child, and statvfs of the lockstep cache.
#include "runner/launch/host_probe.hpp"

#include "envspec/settings/settings.hpp"
#include "runner/runtime/gpu.hpp"
#include "runner/runtime/ld_cache.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/codec/digest.hpp"
#include "support/oci/oci.hpp"
#include "support/store/blob_store.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <climits>
#include <fmt/format.h>

#include <dlfcn.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t k_banner_limit = 160;
constexpr std::size_t k_library_text_limit = 256;
constexpr std::chrono::milliseconds k_mpirun_timeout{2000};
constexpr std::size_t k_mpirun_output_limit = 4096;

// Why user namespaces are off, as preflight and doctor say it.
constexpr std::string_view k_userns_max_zero =
    "user namespaces are disabled: /proc/sys/user/max_user_namespaces is 0 (an administrator "
    "can raise it with sysctl user.max_user_namespaces)";
constexpr std::string_view k_userns_clone_zero =
    "kernel.unprivileged_userns_clone is 0; an administrator can set it to 1";
constexpr std::string_view k_userns_apparmor = "AppArmor restricts unprivileged user namespaces "
                                               "(kernel.apparmor_restrict_unprivileged_userns is 1)";

// The leading run of [0-9A-Za-z.] of `word` when it starts with a digit ("4.1.4", "5.0.0rc12").
std::string version_word(std::string_view word) {
  if (word.empty() || word.front() < '0' || word.front() > '9') {
    return {};
  }
  std::size_t n = 0;
  while (n < word.size() && n < 64 && (is_ascii_alnum(word[n]) || word[n] == '.')) {
    ++n;
  }
  return std::string(word.substr(0, n));
}

// The first whitespace-separated word of `s`.
std::string_view first_word(std::string_view s) {
  s = trim_chars(s, " \t\r");
  return s.substr(0, s.find_first_of(" \t\r"));
}

// A shared library opened for one call. RTLD_NODELETE keeps it mapped after dlclose: UCX and PMIx
// allocate in their constructors and are not made to be unloaded (and LeakSanitizer can then name them).
class Library {
public:
  explicit Library(const char* soname) : m_handle(::dlopen(soname, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE)) {}
  ~Library() {
    if (m_handle != nullptr) {
      ::dlclose(m_handle);
    }
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  // The C function `symbol` of type Fn, or nullptr.
  template <typename Fn> Fn function(const char* symbol) const {
    if (m_handle == nullptr) {
      return nullptr;
    }
    return reinterpret_cast<Fn>(
        ::dlsym(m_handle, symbol)); // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  }

private:
  void* m_handle;
};

// The text a `const char* f(void)` in `soname` returns, bounded; "" when absent.
std::string library_text(const char* soname, const char* symbol) {
  const Library lib(soname);
  auto fn = lib.function<const char* (*)()>(symbol);
  const char* text = fn != nullptr ? fn() : nullptr;
  if (text == nullptr) {
    return {};
  }
  return std::string(text, ::strnlen(text, k_library_text_limit));
}

// An answer about a file (mpirun's version, a library's) remembered in the store's records under
// `kind`, keyed by the path it was found at, the file it resolves to and that file's identity
// (device, inode, size, mtime, ctime), as SIF digests are, and by `extra`. A file changed in the last
// 2 s (its times may not have ticked yet) is not remembered; a file that can't be identified, or no
// store, remembers nothing.
class Remembered {
public:
  Remembered(BlobStore* store, std::string_view kind, const std::optional<fs::path>& found,
             std::string_view extra)
      : m_store(store), m_kind(kind) {
    std::error_code ec;
    const fs::path real = found ? fs::canonical(*found, ec) : fs::path();
    if (store == nullptr || !found || ec || ::stat(real.c_str(), &m_st) != 0) {
      return;
    }
    m_key = sha256_of(fmt::format("{}\n{}\n{}:{}:{}:{}.{}:{}.{}\n{}", found->string(), real.string(),
                                  m_st.st_dev, m_st.st_ino, m_st.st_size, m_st.st_mtim.tv_sec,
                                  m_st.st_mtim.tv_nsec, m_st.st_ctim.tv_sec, m_st.st_ctim.tv_nsec, extra))
                .hex();
  }

  [[nodiscard]] std::optional<std::string> known() const {
    return m_key.empty() ? std::nullopt : m_store->get_record(m_kind, m_key);
  }

  void remember(const std::string& text) const {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto changed = std::chrono::seconds(std::max(m_st.st_mtim.tv_sec, m_st.st_ctim.tv_sec));
    if (!m_key.empty() && now - changed > std::chrono::seconds(2)) {
      (void)m_store->put_record(m_kind, m_key, text);
    }
  }

private:
  BlobStore* m_store;
  std::string m_kind;
  std::string m_key; ///< "" when nothing is remembered
  struct stat m_st {};
};

// The file the dynamic loader loads for `soname` when lockstep (no RUNPATH) dlopens it:
// LD_LIBRARY_PATH's directories, then /etc/ld.so.cache's entry for this ABI, then /lib and /usr/lib.
std::optional<fs::path> loader_path(std::string_view soname, const LdCache* cache) {
  std::error_code ec;
  if (const char* llp = std::getenv("LD_LIBRARY_PATH"); llp != nullptr) {
    for (std::string_view rest = llp; !rest.empty();) {
      const std::size_t colon = rest.find(':');
      const std::string_view dir = rest.substr(0, colon);
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      if (!dir.empty() && fs::exists(fs::path(dir) / soname, ec)) {
        return fs::path(dir) / soname;
      }
    }
  }
  if (cache != nullptr) {
    for (const LdCacheEntry& e : cache->entries) {
      if (e.name == soname && e.flags == native_ld_cache_flags()) {
        return fs::path(e.path);
      }
    }
  }
  for (const char* dir : {"/lib", "/usr/lib"}) {
    if (fs::exists(fs::path(dir) / soname, ec)) {
      return fs::path(dir) / soname;
    }
  }
  return std::nullopt;
}

// library_text(), remembered by the file the loader would load (`cache`: /etc/ld.so.cache, when
// readable): loading UCX runs its constructors, several milliseconds at every preflight on every node.
std::string library_text_remembered(const char* soname, const char* symbol, const LdCache* cache,
                                    BlobStore* store) {
  const char* llp = std::getenv("LD_LIBRARY_PATH");
  const Remembered answer(store, "host-library", loader_path(soname, cache),
                          fmt::format("{}\n{}\n{}", soname, symbol, llp != nullptr ? llp : ""));
  if (std::optional<std::string> known = answer.known()) {
    return *known;
  }
  std::string text = library_text(soname, symbol);
  if (!text.empty()) {
    answer.remember(text);
  }
  return text;
}

// A small procfs/sysfs file's first word, "" when it can't be read.
std::string proc_word(const char* path) {
  auto text = read_file(path, 256);
  return text ? std::string(first_word(*text)) : std::string();
}

// What may forbid user namespaces when unshare fails, as a hint for the user.
std::string userns_hint() {
  if (proc_word("/proc/sys/kernel/unprivileged_userns_clone") == "0") {
    return std::string(k_userns_clone_zero);
  }
  if (proc_word("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1") {
    return std::string(k_userns_apparmor);
  }
  return "a kernel setting or security policy forbids them";
}

} // namespace

HostMpi parse_mpirun_version(std::string_view output) {
  HostMpi mpi;
  bool hydra = false;
  std::string hydra_version;
  std::string open_mpi_version;
  bool open_mpi = false;
  for (const std::string_view raw : text_lines(output)) {
    const std::string_view line = trim_chars(raw, " \t\r");
    if (line.empty()) {
      continue;
    }
    if (mpi.banner.empty()) {
      mpi.banner = printable_ascii(line, k_banner_limit);
    }
    if (const std::size_t at = line.find("(Open MPI)"); at != std::string_view::npos && !open_mpi) {
      open_mpi = true;
      open_mpi_version = version_word(first_word(line.substr(at + 10)));
    } else if (line.starts_with("HYDRA build details")) {
      hydra = true;
    } else if (hydra && hydra_version.empty() && line.starts_with("Version:")) {
      hydra_version = version_word(first_word(line.substr(8)));
    }
  }
  if (mpi.banner.empty()) {
    return mpi;
  }
  if (open_mpi && !open_mpi_version.empty()) {
    mpi.impl = "openmpi";
    mpi.version = open_mpi_version;
  } else if (hydra && !hydra_version.empty() && mpi.banner.find("Intel") == std::string::npos) {
    mpi.impl = "mpich";
    mpi.version = hydra_version;
  } else {
    mpi.impl = "unknown";
  }
  return mpi;
}

HostMpi probe_mpirun(std::string_view path_list) {
  const std::optional<fs::path> found = find_in_path("mpirun", path_list);
  if (!found) {
    return {};
  }
  const std::string path = printable_ascii(found->string(), PATH_MAX);
  CaptureOptions options;
  options.timeout = k_mpirun_timeout;
  options.max_output = k_mpirun_output_limit;
  Result<CaptureResult> run = run_capture({found->string(), "--version"}, options);
  HostMpi mpi;
  if (!run) {
    mpi.error = run.error().message;
  } else if (run->timed_out) {
    mpi.error =
        fmt::format("`{} --version` did not finish within {} s", path, k_mpirun_timeout.count() / 1000);
  } else {
    mpi = parse_mpirun_version(run->out.empty() ? run->err : run->out);
    if (mpi.impl.empty()) {
      mpi.error = fmt::format("`{} --version` printed nothing (exit status {})", path, run->status);
    } else if (mpi.impl == "unknown" && run->status != 0) {
      mpi.error = fmt::format("`{} --version` failed (exit status {}): {}", path, run->status, mpi.banner);
      mpi.impl.clear();
    }
  }
  mpi.path = path;
  log::debug("preflight: mpirun {}: {} {}{}", mpi.path, mpi.impl, mpi.version,
             mpi.error.empty() ? "" : " (" + mpi.error + ")");
  return mpi;
}

std::string pmix_version_from(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t start = text.find_first_not_of(" \t", pos);
    if (start == std::string_view::npos) {
      break;
    }
    const std::size_t end = std::min(text.find_first_of(" \t", start), text.size());
    std::string_view word = text.substr(start, end - start);
    if (word.size() > 1 && word.front() == 'v') {
      word.remove_prefix(1);
    }
    if (std::string v = version_word(word); v.find('.') != std::string::npos) {
      return v;
    }
    pos = end;
  }
  return {};
}

namespace {

// What the probes that remember their answers share: the store (nullptr when it can't be opened) and
// the loader's cache (nullptr when unreadable), each opened or read once.
struct ProbeContext {
  ProbeContext()
      : opened(BlobStore::open(settings::store_root())), ld_cache(read_ld_cache("/etc/ld.so.cache")) {}
  BlobStore* store() { return opened ? &*opened : nullptr; }
  const LdCache* cache() const { return ld_cache ? &*ld_cache : nullptr; }
  Result<BlobStore> opened;
  Result<LdCache> ld_cache;
};

std::string pmix_of(ProbeContext& context) {
  return pmix_version_from(
      library_text_remembered("libpmix.so.2", "PMIx_Get_version", context.cache(), context.store()));
}

std::string ucx_of(ProbeContext& context) {
  return version_word(first_word(
      library_text_remembered("libucp.so.0", "ucp_get_version_string", context.cache(), context.store())));
}

} // namespace

std::string probe_pmix() {
  ProbeContext context;
  return pmix_of(context);
}

std::string probe_ucx() {
  ProbeContext context;
  return ucx_of(context);
}

HostUserns probe_user_namespaces() {
  if (::geteuid() == 0) {
    return {UsernsState::not_needed, {}};
  }
  const std::string max = proc_word("/proc/sys/user/max_user_namespaces");
  if (max == "0") {
    return {UsernsState::disabled, std::string(k_userns_max_zero)};
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    return {UsernsState::denied,
            fmt::format("can't fork a child to test user namespaces: {}", std::strerror(errno))};
  }
  if (pid == 0) {
    // Only async-signal-safe calls in the child.
    _exit(::unshare(CLONE_NEWUSER) == 0 ? 0 : (errno > 0 && errno < 256 ? errno : 255));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return {UsernsState::denied,
              fmt::format("can't wait for the user namespace test child: {}", std::strerror(errno))};
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    return {UsernsState::allowed, {}};
  }
  const int err = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  return {UsernsState::denied,
          fmt::format("unshare(CLONE_NEWUSER) failed: {} ({})",
                      err != 0 ? std::strerror(err) : "the test child was killed", userns_hint())};
}

HostUserns userns_from_settings(const UsernsSettings& settings) {
  if (settings.max_user_namespaces == "0") {
    return {UsernsState::disabled, std::string(k_userns_max_zero)};
  }
  if (settings.unprivileged_userns_clone == "0") {
    return {UsernsState::disabled,
            "unprivileged user namespaces are disabled: " + std::string(k_userns_clone_zero)};
  }
  if (settings.apparmor_restrict == "1") {
    return {UsernsState::denied, std::string(k_userns_apparmor)};
  }
  return {UsernsState::allowed, {}};
}

HostSpace probe_space(const fs::path& cache_root) {
  HostSpace space;
  space.path = cache_root;
  // The cache may not exist yet: it will be made on the file system of its nearest ancestor.
  fs::path probe = cache_root;
  std::error_code ec;
  while (!fs::exists(probe, ec) && probe.has_parent_path() && probe.parent_path() != probe) {
    probe = probe.parent_path();
  }
  struct statvfs st {};
  if (::statvfs(probe.c_str(), &st) != 0) {
    space.error = fmt::format("can't measure the free space of {}: {}", probe.string(), std::strerror(errno));
    return space;
  }
  space.free_bytes = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
  return space;
}

namespace {

// `mpirun --version` starts Open MPI's launcher, a dozen libraries, on every node at every
// preflight: its answer is remembered (Remembered) by the program found in PATH; an answer with an
// error is not.
HostMpi probe_mpirun_remembered(std::string_view path_list, BlobStore* store) {
  const std::optional<fs::path> found = find_in_path("mpirun", path_list);
  const Remembered answer(store, "host-mpirun", found, "");
  if (std::optional<std::string> known = answer.known()) {
    std::vector<std::string> f;
    for (std::size_t pos = 0; pos <= known->size() && f.size() < 4;) {
      const std::size_t end = std::min(known->find('\n', pos), known->size());
      f.push_back(known->substr(pos, end - pos));
      pos = end + 1;
    }
    if (f.size() == 3 && !f[0].empty()) {
      HostMpi mpi;
      mpi.path = printable_ascii(found->string(), PATH_MAX);
      mpi.impl = f[0];
      mpi.version = f[1];
      mpi.banner = f[2];
      log::debug("preflight: mpirun {}: {} {} (remembered)", mpi.path, mpi.impl, mpi.version);
      return mpi;
    }
  }
  HostMpi mpi = probe_mpirun(path_list);
  if (mpi.error.empty() && !mpi.impl.empty()) {
    answer.remember(fmt::format("{}\n{}\n{}", mpi.impl, mpi.version, mpi.banner));
  }
  return mpi;
}

} // namespace

HostProbe probe_host() {
  log::Timer timer("probe the host");
  HostProbe probe;
  std::array<char, HOST_NAME_MAX + 1> name{};
  if (::gethostname(name.data(), name.size() - 1) == 0) {
    probe.hostname = printable_ascii(name.data(), HOST_NAME_MAX);
  }
  probe.platform = oci::Platform::host().str();
  ProbeContext context;
  const char* path = std::getenv("PATH");
  probe.mpi = probe_mpirun_remembered(
      path != nullptr ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      context.store());
  probe.pmix = pmix_of(context);
  probe.ucx = ucx_of(context);
  if (Result<GpuInventory> gpus = gpu_inventory(gpu_host_from_env()); gpus) {
    probe.driver_version = gpus->driver_version;
    probe.gpu_count = gpus->gpu_count;
  } else {
    probe.gpu_error = gpus.error().message;
  }
  probe.userns = probe_user_namespaces();
  probe.space = probe_space(settings::store_root());
  log::debug("preflight: host {}: pmix '{}', ucx '{}', driver '{}', {} GPUs, cache {} ({} bytes free)",
             probe.hostname, probe.pmix, probe.ucx, probe.driver_version, probe.gpu_count,
             probe.space.path.string(), probe.space.free_bytes);
  return probe;
}

} // namespace lockstep::runner
