// `lockstep doctor`: the host probes (files read inside a root with openat2(RESOLVE_IN_ROOT), tools
// run bounded), the Python environment readers (pyvenv.cfg, dist-info, egg-info, conda-meta), the
// snapshot JSON and its strict parser, the target verdict (preflight's checks) and the report.
//
// Why each source (docs/doctor.md has the table):
// - The driver comes from /proc/driver/nvidia/version like `--gpus` reads it (runner/runtime/gpu); GPUs from
//   nvidia-smi when it answers, since only NVML knows the compute capability and memory, else from
//   /proc/driver/nvidia/gpus/*/information.
// - PMIx and UCX come from the libraries the loader finds (runner/launch/host_probe), but libfabric from
//   the dpkg database: loading libfabric.so.1 initialises its providers (~200 ms), and fi_version()
//   only knows major.minor. Under a host root nothing is loaded (it would be this machine's
//   library), so all three come from the root's dpkg database.
// - A Python environment is read from its records, never by running pip or python: a broken
//   interpreter, a slow import or a different python3 on PATH must not change what is reported.
#include "runner/audit/doctor.hpp"

#include "envspec/stack/recipes.hpp"
#include "runner/runtime/gpu.hpp"
#include "support/base/json.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/base/version.hpp"
#include "support/debian/deb822.hpp"
#include "support/python/pep508.hpp"
#include "support/python/wheel.hpp"
#include "support/store/blob_store.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <gnu/libc-version.h>
#include <set>
#include <tuple>
#include <utility>

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using Status = Check::Status;

constexpr std::chrono::milliseconds k_tool_timeout{2000};
/// nvidia-smi initialises NVML, which takes a second or more on a node without persistence mode.
constexpr std::chrono::milliseconds k_nvidia_smi_timeout{5000};
constexpr std::size_t k_tool_output_limit = 64ULL * 1024;

constexpr std::size_t k_small_file = 64ULL * 1024;       // /proc, os-release, pyvenv.cfg, INSTALLER
constexpr std::size_t k_metadata_prefix = 256ULL * 1024; // METADATA headers come first
constexpr std::size_t k_conda_meta_limit = 64ULL << 20;  // a conda-meta record lists every file
constexpr std::size_t k_dpkg_status_limit = 64ULL << 20; // /var/lib/dpkg/status
constexpr std::size_t k_libc_limit = 32ULL << 20;        // libc.so.6 is ~2 MiB
constexpr std::size_t k_max_dir_entries = 100000;        // per directory listed
constexpr std::size_t k_max_packages = 100000;           // per environment
constexpr std::size_t k_max_snapshot = 64ULL << 20;
constexpr int k_max_snapshot_depth = 16;

constexpr std::size_t k_max_name = 256;
constexpr std::size_t k_max_version = 128;
constexpr std::size_t k_max_path = 4096;
constexpr std::size_t k_max_text = 1024;
constexpr std::size_t k_max_gpus = 4096;
constexpr std::size_t k_max_checks = 32;

constexpr std::string_view k_proc_driver_version = "/proc/driver/nvidia/version";
constexpr std::string_view k_proc_gpus = "/proc/driver/nvidia/gpus";
constexpr std::string_view k_nvidia_smi_query =
    "--query-gpu=index,name,uuid,compute_cap,memory.total,driver_version";

// ---------------------------------------------------------------------------------------------
// Text

// The first line of `s`, without surrounding blanks.
std::string_view first_line(std::string_view s) {
  return trim_chars(s.substr(0, s.find('\n')), " \t\r");
}

// A version word: a digit first, then [0-9A-Za-z.+~_-], at most k_max_version bytes; "" otherwise.
std::string version_token(std::string_view word) {
  if (word.empty() || word.front() < '0' || word.front() > '9' || word.size() > k_max_version) {
    return {};
  }
  const bool valid = std::all_of(word.begin(), word.end(), [](char c) {
    return is_ascii_alnum(c) || c == '.' || c == '+' || c == '~' || c == '_' || c == '-';
  });
  return valid ? std::string(word) : std::string();
}

// The leading "X.Y.Z" of a version with more parts ("3.11.2.final.0" -> "3.11.2").
std::string three_numbers(std::string_view v) {
  std::string out;
  std::size_t pos = 0;
  for (int part = 0; part < 3 && pos < v.size(); ++part) {
    const std::size_t end = std::min(v.find('.', pos), v.size());
    const std::string_view n = v.substr(pos, end - pos);
    if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string_view::npos) {
      break;
    }
    out += (part == 0 ? "" : ".") + std::string(n);
    pos = end + 1;
  }
  return out;
}

std::string mpi_display(std::string_view impl, std::string_view version) {
  std::string name(impl);
  if (impl == "openmpi") {
    name = "Open MPI";
  } else if (impl == "mpich") {
    name = "MPICH";
  }
  return version.empty() ? name : name + " " + std::string(version);
}

std::string plural(std::size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// ---------------------------------------------------------------------------------------------
// Files inside the captured root

// Reads the captured system's files: absolute paths resolved with `root` as "/" by openat2
// (RESOLVE_IN_ROOT), so a symlink in a mounted image can't lead out of it. Without openat2 (Linux
// before 5.6) paths are joined to the root and symlinks are followed as the kernel finds them.
class RootFs {
public:
  static Result<RootFs> open(const fs::path& root) {
    LS_TRY_ASSIGN(UniqueFd fd, open_file(root, O_PATH | O_DIRECTORY));
    std::error_code ec;
    const bool live = fs::equivalent(root, "/", ec);
    return RootFs(std::move(fd), root, live);
  }

  // Whether the root is this machine's "/".
  [[nodiscard]] bool live() const { return m_live; }

  // `path` for messages: as on the captured system, prefixed with the root when there is one.
  [[nodiscard]] std::string shown(std::string_view path) const {
    if (m_live) {
      return std::string(path);
    }
    return (m_root / std::string(path).substr(path.starts_with('/') ? 1 : 0)).string();
  }

  // Opens `path` (absolute on the captured system) with `flags`; the error names it.
  [[nodiscard]] Result<UniqueFd> open_at(std::string_view path, int flags) const {
    std::string rel(path);
    rel.erase(0, rel.find_first_not_of('/'));
    if (rel.empty()) {
      rel = ".";
    }
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    long fd = -1;
    do {
      fd = ::syscall(SYS_openat2, m_fd.get(), rel.c_str(), &how, sizeof how);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0 && errno == ENOSYS) {
      fd = ::openat(m_fd.get(), rel.c_str(), flags | O_CLOEXEC);
    }
    if (fd < 0) {
      return errno_error("can't open " + shown(path), errno);
    }
    return UniqueFd(static_cast<int>(fd));
  }

  // The first `limit` bytes of the regular file `path`; with `whole`, a longer file is an error.
  [[nodiscard]] Result<std::string> read(std::string_view path, std::size_t limit, bool whole = true) const {
    LS_TRY_ASSIGN(UniqueFd fd, open_at(path, O_RDONLY | O_NOCTTY | O_NONBLOCK));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
      return errno_error("can't stat " + shown(path), errno);
    }
    if (!S_ISREG(st.st_mode)) {
      return invalid_input("{} is not a regular file", shown(path));
    }
    std::string out(std::min<std::size_t>(limit + 1, 1 << 16), '\0');
    std::size_t used = 0;
    while (true) {
      if (used == out.size()) {
        if (out.size() > limit) {
          break;
        }
        out.resize(std::min(out.size() * 2, limit + 1));
      }
      LS_TRY_ASSIGN(const std::size_t n,
                    read_some(fd.get(), out.data() + used, out.size() - used, shown(path)));
      if (n == 0) {
        break;
      }
      used += n;
    }
    if (used > limit) {
      if (whole) {
        return invalid_input("{} is larger than {} bytes", shown(path), limit);
      }
      used = limit;
    }
    out.resize(used);
    return out;
  }

  // A small file's first line, "" when it can't be read.
  [[nodiscard]] std::string first_line_of(std::string_view path) const {
    Result<std::string> text = read(path, 4096, false);
    return text ? printable_ascii(first_line(*text), k_max_text) : std::string();
  }

  // The names in directory `path`, sorted bytewise; nullopt when it isn't a readable directory.
  // More than `limit` entries: the first `limit` read, and `truncated` set.
  [[nodiscard]] std::optional<std::vector<std::string>> list(std::string_view path, bool& truncated) const {
    truncated = false;
    Result<UniqueFd> fd = open_at(path, O_RDONLY | O_DIRECTORY);
    if (!fd) {
      return std::nullopt;
    }
    DIR* dir = ::fdopendir(fd->get());
    if (dir == nullptr) {
      return std::nullopt;
    }
    fd->release();
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(dir)) {
      const std::string_view name = e->d_name;
      if (name == "." || name == "..") {
        continue;
      }
      if (names.size() == k_max_dir_entries) {
        truncated = true;
        break;
      }
      names.emplace_back(name);
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }

  [[nodiscard]] bool is_dir(std::string_view path) const {
    return open_at(path, O_RDONLY | O_DIRECTORY).ok();
  }

  [[nodiscard]] bool exists(std::string_view path) const { return open_at(path, O_PATH).ok(); }

  // The path gpu_inventory() reads under (it joins paths to its root itself).
  [[nodiscard]] const fs::path& root() const { return m_root; }

private:
  RootFs(UniqueFd fd, fs::path root, bool live)
      : m_fd(std::move(fd)), m_root(std::move(root)), m_live(live) {}
  UniqueFd m_fd;
  fs::path m_root;
  bool m_live = false;
};

// `a` + "/" + `b` for paths on the captured system.
std::string join(std::string_view a, std::string_view b) {
  std::string out(a);
  if (out.empty() || out.back() != '/') {
    out += '/';
  }
  out += b;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Tools

// Runs `argv` with a timeout and bounded output; the output, or why there is none, in `why`.
std::optional<std::string> run_tool(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                                    std::string& why) {
  CaptureOptions options;
  options.timeout = timeout;
  options.max_output = k_tool_output_limit;
  Result<CaptureResult> run = run_capture(argv, options);
  const std::string command = printable_ascii(shell_join(argv), k_max_text);
  if (!run) {
    why = run.error().message;
    return std::nullopt;
  }
  if (run->timed_out) {
    why = fmt::format("`{}` did not finish within {} s", command, timeout.count() / 1000);
    return std::nullopt;
  }
  if (run->status != 0) {
    const std::string_view said = first_line(run->err.empty() ? run->out : run->err);
    why = fmt::format("`{}` failed (exit status {}){}", command, run->status,
                      said.empty() ? "" : ": " + printable_ascii(said, 200));
    return std::nullopt;
  }
  return std::move(run->out);
}

// ---------------------------------------------------------------------------------------------
// Host probes, one function each

struct GpuFacts {
  std::optional<SnapshotDriver> driver;
  std::vector<SnapshotGpu> gpus;
  std::string gpus_from;
  std::string error; // for preflight's gpu_error: the driver is there but unreadable
};

GpuFacts probe_gpus(const RootFs& root, const DoctorOptions& options, std::vector<std::string>& warnings) {
  GpuFacts out;
  // The driver and the /proc list, as `--gpus` reads them.
  std::vector<SnapshotGpu> proc_gpus;
  Result<GpuInventory> inventory = gpu_inventory(GpuHost{root.root()});
  if (!inventory) {
    warnings.push_back(inventory.error().message);
    out.error = inventory.error().message;
  } else if (!inventory->driver_version.empty()) {
    out.driver = SnapshotDriver{inventory->driver_version, std::string(k_proc_driver_version)};
    int index = 0;
    for (const InventoryGpu& g : inventory->gpus) {
      proc_gpus.push_back(SnapshotGpu{index++,
                                      printable_ascii(g.model, k_max_name),
                                      printable_ascii(g.uuid, k_max_name),
                                      {},
                                      std::nullopt});
    }
  }
  // nvidia-smi knows compute capabilities and memory.
  const std::optional<fs::path> smi = find_in_path("nvidia-smi", options.path_list);
  if (smi) {
    std::string why;
    if (auto output =
            run_tool({smi->string(), std::string(k_nvidia_smi_query), "--format=csv,noheader,nounits"},
                     k_nvidia_smi_timeout, why)) {
      Result<NvidiaSmiReport> report = parse_nvidia_smi(*output);
      if (report) {
        out.gpus = std::move(report->gpus);
        out.gpus_from = "nvidia-smi";
        if (!out.driver && !report->driver_version.empty()) {
          out.driver = SnapshotDriver{report->driver_version, "nvidia-smi"};
          out.error.clear();
        }
        return out;
      }
      why = fmt::format("{}: {}", smi->string(), report.error().message);
    }
    // Without a driver an nvidia-smi that fails says nothing new.
    if (out.driver) {
      warnings.push_back(why + "; the GPU list comes from " + root.shown(k_proc_gpus));
    } else {
      log::debug("doctor: {}", why);
    }
  }
  if (out.driver) {
    out.gpus = std::move(proc_gpus);
    out.gpus_from = out.gpus.empty() ? "" : std::string(k_proc_gpus);
  }
  return out;
}

std::string probe_slurm(const DoctorOptions& options) {
  for (const char* tool : {"sinfo", "srun"}) {
    const std::optional<fs::path> found = find_in_path(tool, options.path_list);
    if (!found) {
      continue;
    }
    std::string why;
    if (auto output = run_tool({found->string(), "--version"}, k_tool_timeout, why)) {
      if (std::string v = slurm_version_from(*output); !v.empty()) {
        return v;
      }
      why = fmt::format("`{} --version` printed no Slurm version", found->string());
    }
    log::debug("doctor: {}", why);
  }
  return {};
}

// The libc.so.6 of a root's multiarch and lib64 directories.
std::string root_glibc(const RootFs& root) {
  constexpr std::array<std::string_view, 10> candidates = {"/lib/x86_64-linux-gnu/libc.so.6",
                                                           "/usr/lib/x86_64-linux-gnu/libc.so.6",
                                                           "/lib/aarch64-linux-gnu/libc.so.6",
                                                           "/usr/lib/aarch64-linux-gnu/libc.so.6",
                                                           "/lib/powerpc64le-linux-gnu/libc.so.6",
                                                           "/usr/lib/powerpc64le-linux-gnu/libc.so.6",
                                                           "/lib64/libc.so.6",
                                                           "/usr/lib64/libc.so.6",
                                                           "/lib/libc.so.6",
                                                           "/usr/lib/libc.so.6"};
  for (std::string_view path : candidates) {
    if (Result<std::string> bytes = root.read(path, k_libc_limit); bytes) {
      return glibc_version_in(*bytes);
    }
  }
  return {};
}

// Whether unprivileged user namespaces work, as preflight states it; files only under a host root.
HostUserns probe_userns(const RootFs& root) {
  if (root.live()) {
    return probe_user_namespaces();
  }
  if (root.first_line_of("/proc/sys/user/max_user_namespaces") == "0") {
    return {UsernsState::disabled,
            "user namespaces are disabled: /proc/sys/user/max_user_namespaces is 0 (an "
            "administrator can raise it with sysctl user.max_user_namespaces)"};
  }
  if (root.first_line_of("/proc/sys/kernel/unprivileged_userns_clone") == "0") {
    return {UsernsState::disabled, "unprivileged user namespaces are disabled: "
                                   "kernel.unprivileged_userns_clone is 0; an administrator can set it to 1"};
  }
  if (root.first_line_of("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1") {
    return {UsernsState::denied, "AppArmor restricts unprivileged user namespaces "
                                 "(kernel.apparmor_restrict_unprivileged_userns is 1)"};
  }
  return {UsernsState::allowed, {}};
}

// Whether unprivileged users get user namespaces, for the snapshot: as root the probe makes no
// test child, so the kernel settings decide.
bool userns_available(const RootFs& root, const HostUserns& userns) {
  if (userns.state == UsernsState::not_needed) {
    return root.first_line_of("/proc/sys/user/max_user_namespaces") != "0" &&
           root.first_line_of("/proc/sys/kernel/unprivileged_userns_clone") != "0" &&
           root.first_line_of("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") != "1";
  }
  return userns.state == UsernsState::allowed;
}

std::string probe_os(const RootFs& root) {
  for (std::string_view path : {"/etc/os-release", "/usr/lib/os-release"}) {
    if (Result<std::string> text = root.read(path, k_small_file); text) {
      return printable_ascii(os_pretty_name(*text), k_max_text);
    }
  }
  return {};
}

// PMIx, UCX and libfabric: see the comment at the top of this file.
void probe_libraries(const RootFs& root, SnapshotHost& host) {
  if (root.live()) {
    host.pmix = printable_ascii(probe_pmix(), k_max_version);
    host.ucx = printable_ascii(probe_ucx(), k_max_version);
  }
  Result<std::string> status = root.read("/var/lib/dpkg/status", k_dpkg_status_limit);
  if (!status) {
    log::debug("doctor: no dpkg database: {}", status.error().message);
    return;
  }
  const std::map<std::string, std::string> versions =
      dpkg_installed_versions(*status, {"libfabric1", "libpmix2", "libucx0"});
  auto get = [&](const char* name) {
    auto it = versions.find(name);
    return it == versions.end() ? std::string() : it->second;
  };
  host.libfabric = get("libfabric1");
  if (!root.live()) {
    host.pmix = get("libpmix2");
    host.ucx = get("libucx0");
  }
}

SnapshotHost probe_host_facts(const RootFs& root, const DoctorOptions& options, Capture& capture) {
  SnapshotHost host;
  struct utsname uts {};
  const bool have_uname = ::uname(&uts) == 0;
  host.arch = root.first_line_of("/proc/sys/kernel/arch");
  if (host.arch.empty() && have_uname) {
    host.arch = printable_ascii(uts.machine, k_max_name);
  }
  host.os = probe_os(root);
  host.kernel = root.first_line_of("/proc/sys/kernel/osrelease");
  if (host.kernel.empty() && root.live() && have_uname) {
    host.kernel = printable_ascii(uts.release, k_max_name);
  }
  host.glibc = root.live() ? printable_ascii(gnu_get_libc_version(), k_max_version) : root_glibc(root);

  HostProbe& probe = capture.probe;
  probe.userns = probe_userns(root);
  host.user_namespaces = userns_available(root, probe.userns);

  GpuFacts gpus = probe_gpus(root, options, capture.warnings);
  host.driver = gpus.driver;
  host.gpus = std::move(gpus.gpus);
  capture.gpus_from = gpus.gpus_from;
  probe.driver_version = host.driver ? host.driver->version : std::string();
  probe.gpu_count = host.gpus.size();
  probe.gpu_error = host.driver ? std::string() : gpus.error;

  probe.mpi = probe_mpirun(options.path_list);
  if (!probe.mpi.path.empty() && !probe.mpi.impl.empty()) {
    host.mpi = SnapshotMpi{probe.mpi.impl, probe.mpi.version, probe.mpi.path};
  } else if (!probe.mpi.error.empty()) {
    capture.warnings.push_back(probe.mpi.error);
  }
  probe_libraries(root, host);
  probe.pmix = host.pmix;
  probe.ucx = host.ucx;
  host.slurm = probe_slurm(options);
  probe.space = probe_space(BlobStore::default_root());
  return host;
}

// ---------------------------------------------------------------------------------------------
// Python environments

// The fields of one conda-meta record that a snapshot keeps, read without building the document:
// a record lists every file of its package and can be megabytes.
class CondaMetaFields final : public nlohmann::json_sax<json> {
public:
  std::map<std::string, std::string> values; // name, version, build, channel (strings at the top level)
  std::string error;

  bool null() override { return true; }
  bool boolean(bool /*val*/) override { return true; }
  bool number_integer(number_integer_t /*val*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*val*/) override { return true; }
  bool number_float(number_float_t /*val*/, const string_t& /*s*/) override { return true; }
  bool binary(binary_t& /*val*/) override { return true; }
  bool string(string_t& val) override {
    if (m_depth == 1 && (m_key == "name" || m_key == "version" || m_key == "build" || m_key == "channel")) {
      values[m_key] = val.substr(0, k_max_path + 1);
    }
    return true;
  }
  bool start_object(std::size_t /*elements*/) override { return enter(); }
  bool key(string_t& val) override {
    if (m_depth == 1) {
      m_key = val.substr(0, 16);
    }
    return true;
  }
  bool end_object() override { return leave(); }
  bool start_array(std::size_t /*elements*/) override { return enter(); }
  bool end_array() override { return leave(); }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) override {
    error = fmt::format("not valid JSON (at byte {})", position);
    return false;
  }

private:
  bool enter() {
    if (++m_depth > 64) {
      error = "nested more than 64 levels deep";
      return false;
    }
    return true;
  }
  bool leave() {
    --m_depth;
    return true;
  }
  int m_depth = 0;
  std::string m_key;
};

// A distribution name as records may spell it (PEP 508's rule, which conda names also follow).
bool valid_package_name(std::string_view name) {
  return name.size() <= k_max_name && valid_project_name(name);
}

// Reads the environment's records into `env`; problems become warnings naming the file.
class PythonReader {
public:
  PythonReader(const RootFs& root, Capture& capture) : m_root(root), m_capture(capture) {}

  // The dist-info and egg-info records in `dir`; with `skip` (conda's own), those it names.
  void read_site_dir(const std::string& dir, PythonEnv& env, const std::set<std::string>& conda_names) {
    bool truncated = false;
    const std::optional<std::vector<std::string>> names = m_root.list(dir, truncated);
    if (!names) {
      return;
    }
    if (truncated) {
      warn("{}: more than {} entries; the rest are not read", m_root.shown(dir), k_max_dir_entries);
    }
    for (const std::string& name : *names) {
      if (name.ends_with(".dist-info") && m_root.is_dir(join(dir, name))) {
        read_record(join(dir, name), join(join(dir, name), "METADATA"), "dist-info", env, conda_names);
      } else if (name.ends_with(".egg-info")) {
        const std::string path = join(dir, name);
        read_record(path, m_root.is_dir(path) ? join(path, "PKG-INFO") : path, "egg-info", env, conda_names);
      }
    }
  }

  // conda-meta/*.json; returns the normalised names, so the dist-info of the same packages is skipped.
  std::set<std::string> read_conda_meta(const std::string& prefix, PythonEnv& env) {
    std::set<std::string> names;
    const std::string dir = join(prefix, "conda-meta");
    bool truncated = false;
    const std::optional<std::vector<std::string>> files = m_root.list(dir, truncated);
    if (!files) {
      warn("{}: not a readable directory; no conda packages listed", m_root.shown(dir));
      return names;
    }
    if (truncated) {
      warn("{}: more than {} entries; the rest are not read", m_root.shown(dir), k_max_dir_entries);
    }
    for (const std::string& file : *files) {
      if (!file.ends_with(".json") || !room()) {
        continue;
      }
      const std::string path = join(dir, file);
      Result<std::string> text = m_root.read(path, k_conda_meta_limit);
      if (!text) {
        warn("{}; skipped", text.error().message);
        continue;
      }
      CondaMetaFields fields;
      json::sax_parse(*text, &fields, json::input_format_t::json, true);
      if (!fields.error.empty()) {
        warn("{}: {}; skipped", m_root.shown(path), fields.error);
        continue;
      }
      PythonPackage pkg;
      pkg.from = "conda";
      pkg.name = fields.values["name"];
      pkg.version = fields.values["version"];
      pkg.build = fields.values["build"];
      pkg.channel = fields.values["channel"];
      if (!valid_package_name(pkg.name) || version_token(pkg.version).empty()) {
        warn("{}: no valid \"name\" and \"version\"; skipped", m_root.shown(path));
        continue;
      }
      if (pkg.build.size() > k_max_name || has_controls(pkg.build) || pkg.channel.size() > k_max_path ||
          has_controls(pkg.channel)) {
        warn("{}: \"build\" or \"channel\" is not printable text of bounded length; skipped",
             m_root.shown(path));
        continue;
      }
      names.insert(normalize_project_name(pkg.name));
      env.packages.push_back(std::move(pkg));
    }
    return names;
  }

  // The site-packages (and, for a system prefix, dist-packages) directories of `prefix`.
  std::vector<std::string> site_dirs(const std::string& prefix, bool with_dist_packages) {
    std::vector<std::string> dirs;
    const std::string lib = join(prefix, "lib");
    bool truncated = false;
    const std::optional<std::vector<std::string>> names = m_root.list(lib, truncated);
    if (!names) {
      return dirs;
    }
    for (const std::string& name : *names) {
      if (!name.starts_with("python") && !name.starts_with("pypy")) {
        continue;
      }
      for (const char* leaf : {"site-packages", "dist-packages"}) {
        if (std::string_view(leaf) == "dist-packages" && !with_dist_packages) {
          continue;
        }
        if (const std::string dir = join(join(lib, name), leaf); m_root.is_dir(dir)) {
          dirs.push_back(dir);
        }
      }
    }
    return dirs;
  }

  // "3.11" when `prefix`/lib holds exactly one pythonX.Y directory.
  std::string version_from_lib(const std::string& prefix) {
    bool truncated = false;
    const std::optional<std::vector<std::string>> names = m_root.list(join(prefix, "lib"), truncated);
    std::string found;
    for (const std::string& name : names.value_or(std::vector<std::string>{})) {
      const std::string v = name.starts_with("python") ? three_numbers(name.substr(6)) : std::string();
      if (v.find('.') == std::string::npos) {
        continue;
      }
      if (!found.empty()) {
        return {};
      }
      found = v;
    }
    return found;
  }

private:
  template <typename... Args> void warn(fmt::format_string<Args...> f, Args&&... args) {
    m_capture.warnings.push_back(fmt::format(f, std::forward<Args>(args)...));
  }

  bool room() {
    if (m_count < k_max_packages) {
      return true;
    }
    if (!m_full_warned) {
      warn("more than {} packages; the rest are not listed", k_max_packages);
      m_full_warned = true;
    }
    return false;
  }

  void read_record(const std::string& record, const std::string& metadata, const char* from, PythonEnv& env,
                   const std::set<std::string>& conda_names) {
    if (!room()) {
      return;
    }
    Result<std::string> text = m_root.read(metadata, k_metadata_prefix, false);
    if (!text) {
      warn("{}; skipped", text.error().message);
      return;
    }
    const std::string shown = m_root.shown(metadata);
    Result<std::vector<std::pair<std::string, std::string>>> headers = parse_email_headers(*text, shown);
    if (!headers) {
      warn("{}; skipped", headers.error().message);
      return;
    }
    PythonPackage pkg;
    pkg.from = from;
    for (const auto& [key, value] : *headers) {
      const std::string k = ascii_lower(key);
      if (k == "name" && pkg.name.empty()) {
        pkg.name = value;
      } else if (k == "version" && pkg.version.empty()) {
        pkg.version = value;
      }
    }
    if (!valid_package_name(pkg.name)) {
      warn("{}: no valid Name header; skipped", shown);
      return;
    }
    if (version_token(pkg.version).empty()) {
      warn("{}: no valid Version header; skipped", shown);
      return;
    }
    if (pkg.from == "dist-info") {
      if (Result<std::string> installer = m_root.read(join(record, "INSTALLER"), 4096, false); installer) {
        const std::string_view line = first_line(*installer);
        if (valid_package_name(line)) {
          pkg.installer = std::string(line);
        } else if (!line.empty()) {
          warn("{}: not an installer name; ignored", m_root.shown(join(record, "INSTALLER")));
        }
      }
    }
    // In a conda environment conda's own packages have dist-info too; they are listed once, as conda's.
    if (!conda_names.empty() &&
        (pkg.installer == "conda" || conda_names.count(normalize_project_name(pkg.name)) != 0)) {
      return;
    }
    ++m_count;
    env.packages.push_back(std::move(pkg));
  }

  const RootFs& m_root;
  Capture& m_capture;
  std::size_t m_count = 0;
  bool m_full_warned = false;
};

// pyvenv.cfg's "key = value" lines, keys lowercased.
std::map<std::string, std::string> parse_pyvenv_cfg(std::string_view text) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      continue;
    }
    const std::string key = ascii_lower(trim_chars(line.substr(0, eq), " \t\r"));
    out.emplace(key, trim_chars(line.substr(eq + 1), " \t\r"));
  }
  return out;
}

// Sorts by PEP 503 name, then version, from, installer, build, channel and the name as spelt.
void sort_packages(std::vector<PythonPackage>& packages) {
  std::vector<std::pair<std::string, PythonPackage>> keyed;
  keyed.reserve(packages.size());
  for (PythonPackage& p : packages) {
    keyed.emplace_back(normalize_project_name(p.name), std::move(p));
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) {
    const PythonPackage& a = x.second;
    const PythonPackage& b = y.second;
    return std::tie(x.first, a.version, a.from, a.installer, a.build, a.channel, a.name) <
           std::tie(y.first, b.version, b.from, b.installer, b.build, b.channel, b.name);
  });
  packages.clear();
  for (auto& [key, p] : keyed) {
    packages.push_back(std::move(p));
  }
}

// `path` without trailing slashes ("/" stays).
std::string without_trailing_slash(std::string path) {
  while (path.size() > 1 && path.back() == '/') {
    path.pop_back();
  }
  return path;
}

// Which environment to read: --python, else $VIRTUAL_ENV, else $CONDA_PREFIX. Returns the kind
// ("" for none) and the prefix.
Result<std::pair<std::string, std::string>>
choose_environment(const RootFs& root, const DoctorOptions& options, std::vector<std::string>& warnings) {
  auto usable = [&](std::string_view var, const std::string& value) {
    if (!value.starts_with('/') || value.size() > k_max_path || has_controls(value)) {
      warnings.push_back(fmt::format("{}={} is not an absolute path; no Python environment read", var,
                                     printable_ascii(value, 200)));
      return false;
    }
    if (!root.is_dir(value)) {
      warnings.push_back(fmt::format("{}={}: {} is not a directory; no Python environment read", var, value,
                                     root.shown(value)));
      return false;
    }
    return true;
  };
  if (!options.python_prefix.empty()) {
    std::string prefix = options.python_prefix;
    if (!prefix.starts_with('/')) {
      if (!root.live()) {
        return invalid_input("--python {}: with --host-root the prefix must be an absolute path", prefix);
      }
      prefix = fs::absolute(prefix).lexically_normal().string();
    }
    if (prefix.size() > k_max_path || has_controls(prefix)) {
      return invalid_input("--python: not a usable path");
    }
    prefix = without_trailing_slash(prefix);
    if (!root.is_dir(prefix)) {
      return invalid_input("--python {}: {} is not a directory", prefix, root.shown(prefix));
    }
    if (root.is_dir(join(prefix, "conda-meta"))) {
      return std::pair{std::string("conda"), prefix};
    }
    if (root.exists(join(prefix, "pyvenv.cfg"))) {
      return std::pair{std::string("venv"), prefix};
    }
    return std::pair{std::string("prefix"), prefix};
  }
  if (!options.virtual_env.empty()) {
    return usable("VIRTUAL_ENV", options.virtual_env)
               ? std::pair{std::string("venv"), without_trailing_slash(options.virtual_env)}
               : std::pair{std::string(), std::string()};
  }
  if (!options.conda_prefix.empty()) {
    return usable("CONDA_PREFIX", options.conda_prefix)
               ? std::pair{std::string("conda"), without_trailing_slash(options.conda_prefix)}
               : std::pair{std::string(), std::string()};
  }
  return std::pair{std::string(), std::string()};
}

Result<std::optional<PythonEnv>> read_python(const RootFs& root, const DoctorOptions& options,
                                             Capture& capture) {
  LS_TRY_ASSIGN(const auto chosen, choose_environment(root, options, capture.warnings));
  const auto& [kind, prefix] = chosen;
  if (kind.empty()) {
    return std::optional<PythonEnv>();
  }
  PythonEnv env;
  env.kind = kind;
  env.prefix = prefix;
  PythonReader reader(root, capture);
  std::set<std::string> conda_names;
  if (kind == "venv") {
    const std::string cfg_path = join(prefix, "pyvenv.cfg");
    if (Result<std::string> cfg = root.read(cfg_path, k_small_file); cfg) {
      std::map<std::string, std::string> cfg_values = parse_pyvenv_cfg(*cfg);
      std::string version = cfg_values["version"];
      if (version.empty()) {
        version = cfg_values["version_info"];
      }
      env.version = three_numbers(version);
      capture.python_home = printable_ascii(cfg_values["home"], k_max_path);
      capture.system_site_packages = ascii_lower(cfg_values["include-system-site-packages"]) == "true";
    } else {
      capture.warnings.push_back(
          fmt::format("{}; the venv's Python version is unknown", cfg.error().message));
    }
  } else if (kind == "conda") {
    conda_names = reader.read_conda_meta(prefix, env);
    for (const PythonPackage& pkg : env.packages) {
      if (pkg.name == "python") {
        env.version = pkg.version;
      }
    }
  }
  if (env.version.empty()) {
    env.version = reader.version_from_lib(prefix);
  }
  for (const std::string& dir : reader.site_dirs(prefix, kind == "prefix")) {
    reader.read_site_dir(dir, env, conda_names);
  }
  sort_packages(env.packages);
  return std::optional<PythonEnv>(std::move(env));
}

// ---------------------------------------------------------------------------------------------
// JSON out

ojson nullable(const std::string& s) {
  return s.empty() ? ojson(nullptr) : ojson(s);
}

ojson facts_object(const envspec::ImageFacts& f) {
  ojson mpi =
      f.mpi_impl.empty() ? ojson(nullptr) : ojson{{"impl", f.mpi_impl}, {"version", nullable(f.mpi.version)}};
  return {{"mpi", std::move(mpi)},
          {"pmix", nullable(f.pmix.version)},
          {"ucx", nullable(f.ucx.version)},
          {"libfabric", nullable(f.libfabric.version)},
          {"cuda", nullable(f.cuda.version)},
          {"cuda_driver_floor", nullable(f.cuda_driver_floor)}};
}

// ---------------------------------------------------------------------------------------------
// JSON in (strict)

// Reads one snapshot document; the first problem is kept and reported with its key path.
class SnapshotReader {
public:
  explicit SnapshotReader(std::string_view what) : m_what(what) {}

  Error fail(const std::string& path, std::string_view message) const {
    return invalid_input("{}: {}: {}", m_what, path.empty() ? "(top level)" : path, message);
  }

  Result<void> keys(const json& j, const std::string& path, std::initializer_list<std::string_view> required,
                    std::initializer_list<std::string_view> optional = {}) const {
    if (!j.is_object()) {
      return fail(path, "expected an object");
    }
    for (const auto& [key, value] : j.items()) {
      if (std::find(required.begin(), required.end(), key) == required.end() &&
          std::find(optional.begin(), optional.end(), key) == optional.end()) {
        return fail(path, fmt::format("unknown key '{}'", printable_ascii(key, 64)));
      }
    }
    for (std::string_view key : required) {
      if (!j.contains(key)) {
        return fail(path, fmt::format("missing key '{}'", key));
      }
    }
    return {};
  }

  // A string member: printable, at most `max` bytes; null allowed (as "") with `nullable`.
  Result<std::string> str(const json& j, const std::string& path, std::string_view key, std::size_t max,
                          bool is_nullable) const {
    const json& v = j.at(key);
    const std::string where = sub(path, key);
    if (v.is_null() && is_nullable) {
      return std::string();
    }
    if (!v.is_string()) {
      return fail(where, is_nullable ? "expected a string or null" : "expected a string");
    }
    std::string s = v.get<std::string>();
    if (s.empty() && is_nullable) {
      return fail(where, "expected a non-empty string or null");
    }
    if (s.empty()) {
      return fail(where, "expected a non-empty string");
    }
    if (s.size() > max) {
      return fail(where, fmt::format("longer than {} bytes", max));
    }
    if (has_controls(s)) {
      return fail(where, "contains control characters");
    }
    return s;
  }

  // A version member (see version_token), or null with `nullable`.
  Result<std::string> version(const json& j, const std::string& path, std::string_view key,
                              bool is_nullable) const {
    LS_TRY_ASSIGN(std::string s, str(j, path, key, k_max_version, is_nullable));
    if (!s.empty() && version_token(s).empty()) {
      return fail(sub(path, key), fmt::format("'{}' is not a version", s));
    }
    return s;
  }

  Result<std::string> one_of(const json& j, const std::string& path, std::string_view key,
                             std::initializer_list<std::string_view> values) const {
    LS_TRY_ASSIGN(std::string s, str(j, path, key, 64, false));
    if (std::find(values.begin(), values.end(), s) == values.end()) {
      std::string list;
      for (std::string_view v : values) {
        list += (list.empty() ? "" : ", ") + std::string(v);
      }
      return fail(sub(path, key), fmt::format("'{}' is not one of {}", s, list));
    }
    return s;
  }

  static std::string sub(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  static std::string item(const std::string& path, std::size_t i) { return fmt::format("{}[{}]", path, i); }

private:
  std::string m_what;
};

Result<SnapshotHost> read_host(const SnapshotReader& r, const json& j) {
  const std::string p = "host";
  LS_TRY(r.keys(j, p,
                {"arch", "os", "kernel", "glibc", "user_namespaces", "driver", "gpus", "mpi", "pmix", "ucx",
                 "libfabric", "slurm"}));
  SnapshotHost h;
  LS_TRY_ASSIGN(h.arch, r.str(j, p, "arch", k_max_name, true));
  LS_TRY_ASSIGN(h.os, r.str(j, p, "os", k_max_text, true));
  LS_TRY_ASSIGN(h.kernel, r.str(j, p, "kernel", k_max_name, true));
  LS_TRY_ASSIGN(h.glibc, r.version(j, p, "glibc", true));
  if (!j["user_namespaces"].is_boolean()) {
    return r.fail("host.user_namespaces", "expected true or false");
  }
  h.user_namespaces = j["user_namespaces"].get<bool>();
  if (const json& d = j["driver"]; !d.is_null()) {
    LS_TRY(r.keys(d, "host.driver", {"version", "from"}));
    SnapshotDriver driver;
    LS_TRY_ASSIGN(driver.version, r.version(d, "host.driver", "version", false));
    LS_TRY_ASSIGN(driver.from, r.str(d, "host.driver", "from", k_max_path, false));
    h.driver = std::move(driver);
  }
  const json& gpus = j["gpus"];
  if (!gpus.is_array() || gpus.size() > k_max_gpus) {
    return r.fail("host.gpus", fmt::format("expected an array of at most {} GPUs", k_max_gpus));
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const std::string gp = SnapshotReader::item("host.gpus", i);
    const json& g = gpus[i];
    LS_TRY(r.keys(g, gp, {"index", "name", "uuid", "compute_capability", "memory_mib"}));
    SnapshotGpu gpu;
    if (!g["index"].is_number_unsigned() || g["index"].get<std::uint64_t>() >= k_max_gpus) {
      return r.fail(gp + ".index", fmt::format("expected an integer from 0 to {}", k_max_gpus - 1));
    }
    gpu.index = g["index"].get<int>();
    LS_TRY_ASSIGN(gpu.name, r.str(g, gp, "name", k_max_name, true));
    LS_TRY_ASSIGN(gpu.uuid, r.str(g, gp, "uuid", k_max_name, true));
    LS_TRY_ASSIGN(gpu.compute_capability, r.version(g, gp, "compute_capability", true));
    if (const json& m = g["memory_mib"]; !m.is_null()) {
      if (!m.is_number_unsigned()) {
        return r.fail(gp + ".memory_mib", "expected an integer or null");
      }
      gpu.memory_mib = m.get<std::uint64_t>();
    }
    h.gpus.push_back(std::move(gpu));
  }
  if (const json& m = j["mpi"]; !m.is_null()) {
    LS_TRY(r.keys(m, "host.mpi", {"impl", "version", "path"}));
    SnapshotMpi mpi;
    LS_TRY_ASSIGN(mpi.impl, r.one_of(m, "host.mpi", "impl", {"openmpi", "mpich", "unknown"}));
    LS_TRY_ASSIGN(mpi.version, r.version(m, "host.mpi", "version", true));
    LS_TRY_ASSIGN(mpi.path, r.str(m, "host.mpi", "path", k_max_path, false));
    h.mpi = std::move(mpi);
  }
  LS_TRY_ASSIGN(h.pmix, r.version(j, p, "pmix", true));
  LS_TRY_ASSIGN(h.ucx, r.version(j, p, "ucx", true));
  LS_TRY_ASSIGN(h.libfabric, r.version(j, p, "libfabric", true));
  LS_TRY_ASSIGN(h.slurm, r.version(j, p, "slurm", true));
  return h;
}

Result<std::optional<PythonEnv>> read_python_json(const SnapshotReader& r, const json& j) {
  if (j.is_null()) {
    return std::optional<PythonEnv>();
  }
  const std::string p = "python";
  LS_TRY(r.keys(j, p, {"kind", "prefix", "version", "packages"}));
  PythonEnv env;
  LS_TRY_ASSIGN(env.kind, r.one_of(j, p, "kind", {"venv", "conda", "prefix"}));
  LS_TRY_ASSIGN(env.prefix, r.str(j, p, "prefix", k_max_path, false));
  if (!env.prefix.starts_with('/')) {
    return r.fail("python.prefix", "expected an absolute path");
  }
  LS_TRY_ASSIGN(env.version, r.version(j, p, "version", true));
  const json& packages = j["packages"];
  if (!packages.is_array() || packages.size() > k_max_packages) {
    return r.fail("python.packages", fmt::format("expected an array of at most {} packages", k_max_packages));
  }
  for (std::size_t i = 0; i < packages.size(); ++i) {
    const std::string pp = SnapshotReader::item("python.packages", i);
    const json& pj = packages[i];
    LS_TRY(r.keys(pj, pp, {"name", "version", "from", "installer", "build", "channel"}));
    PythonPackage pkg;
    LS_TRY_ASSIGN(pkg.name, r.str(pj, pp, "name", k_max_name, false));
    if (!valid_package_name(pkg.name)) {
      return r.fail(pp + ".name", fmt::format("'{}' is not a package name", pkg.name));
    }
    LS_TRY_ASSIGN(pkg.version, r.version(pj, pp, "version", false));
    LS_TRY_ASSIGN(pkg.from, r.one_of(pj, pp, "from", {"dist-info", "egg-info", "conda"}));
    LS_TRY_ASSIGN(pkg.installer, r.str(pj, pp, "installer", k_max_name, true));
    LS_TRY_ASSIGN(pkg.build, r.str(pj, pp, "build", k_max_name, true));
    LS_TRY_ASSIGN(pkg.channel, r.str(pj, pp, "channel", k_max_path, true));
    env.packages.push_back(std::move(pkg));
  }
  return std::optional<PythonEnv>(std::move(env));
}

Result<TargetReport> read_target(const SnapshotReader& r, const json& j) {
  const std::string p = "target";
  LS_TRY(r.keys(j, p, {"kind", "ref", "facts", "can_run", "checks"}));
  TargetReport t;
  LS_TRY_ASSIGN(t.kind, r.one_of(j, p, "kind", {"image", "lock"}));
  LS_TRY_ASSIGN(t.ref, r.str(j, p, "ref", k_max_path, false));
  const json& f = j["facts"];
  const std::string fp = "target.facts";
  LS_TRY(r.keys(f, fp, {"mpi", "pmix", "ucx", "libfabric", "cuda", "cuda_driver_floor"}));
  envspec::ImageFacts& facts = t.facts;
  if (const json& m = f["mpi"]; !m.is_null()) {
    LS_TRY(r.keys(m, fp + ".mpi", {"impl", "version"}));
    LS_TRY_ASSIGN(facts.mpi_impl, r.one_of(m, fp + ".mpi", "impl", {"openmpi", "mpich"}));
    LS_TRY_ASSIGN(facts.mpi.version, r.version(m, fp + ".mpi", "version", true));
  }
  LS_TRY_ASSIGN(facts.pmix.version, r.version(f, fp, "pmix", true));
  LS_TRY_ASSIGN(facts.ucx.version, r.version(f, fp, "ucx", true));
  LS_TRY_ASSIGN(facts.libfabric.version, r.version(f, fp, "libfabric", true));
  LS_TRY_ASSIGN(facts.cuda.version, r.version(f, fp, "cuda", true));
  LS_TRY_ASSIGN(facts.cuda_driver_floor, r.version(f, fp, "cuda_driver_floor", true));
  const json& checks = j["checks"];
  if (!checks.is_array() || checks.size() > k_max_checks) {
    return r.fail("target.checks", fmt::format("expected an array of at most {} checks", k_max_checks));
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const std::string cp = SnapshotReader::item("target.checks", i);
    LS_TRY(r.keys(checks[i], cp, {"name", "status", "detail"}));
    Check c;
    LS_TRY_ASSIGN(c.name, r.one_of(checks[i], cp, "name",
                                   {"image", "driver", "gpus", "mpi", "pmix", "userns", "space"}));
    if (!names.insert(c.name).second) {
      return r.fail(cp + ".name", fmt::format("check '{}' appears twice", c.name));
    }
    LS_TRY_ASSIGN(const std::string status,
                  r.one_of(checks[i], cp, "status", {"ok", "warn", "fail", "skipped"}));
    for (Status s : {Status::ok, Status::warn, Status::fail, Status::skipped}) {
      if (status_name(s) == status) {
        c.status = s;
      }
    }
    LS_TRY_ASSIGN(c.detail, r.str(checks[i], cp, "detail", k_max_text, false));
    t.checks.push_back(std::move(c));
  }
  if (!j["can_run"].is_boolean()) {
    return r.fail("target.can_run", "expected true or false");
  }
  if (j["can_run"].get<bool>() != t.can_run()) {
    return r.fail("target.can_run", "does not agree with the checks (a failed check means false)");
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// The report

// Rows of two columns, the first padded to the widest; "" in the first column continues a row.
class Table {
public:
  void row(std::string label, std::string value) { m_rows.emplace_back(std::move(label), std::move(value)); }
  [[nodiscard]] std::string render() const {
    std::size_t width = 0;
    for (const auto& [label, value] : m_rows) {
      width = std::max(width, label.size());
    }
    std::string out;
    for (const auto& [label, value] : m_rows) {
      std::string line = fmt::format("{:<{}}  {}", label, width, value);
      line.erase(line.find_last_not_of(' ') + 1);
      out += line + '\n';
    }
    return out;
  }

private:
  std::vector<std::pair<std::string, std::string>> m_rows;
};

std::string or_none(const std::string& s, std::string_view none = "not found") {
  return s.empty() ? std::string(none) : s;
}

std::string describe_facts(const envspec::ImageFacts& f) {
  std::vector<std::string> parts;
  if (!f.cuda.version.empty()) {
    parts.push_back(f.cuda_driver_floor.empty()
                        ? "CUDA " + f.cuda.version
                        : fmt::format("CUDA {} (driver >= {})", f.cuda.version, f.cuda_driver_floor));
  }
  if (!f.mpi_impl.empty()) {
    parts.push_back(mpi_display(f.mpi_impl, f.mpi.version));
  }
  if (!f.pmix.version.empty()) {
    parts.push_back("PMIx " + f.pmix.version);
  }
  if (!f.ucx.version.empty()) {
    parts.push_back("UCX " + f.ucx.version);
  }
  if (!f.libfabric.version.empty()) {
    parts.push_back("libfabric " + f.libfabric.version);
  }
  std::string out;
  for (const std::string& p : parts) {
    out += (out.empty() ? "" : ", ") + p;
  }
  return out.empty() ? "records no CUDA or MPI" : out;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Parsers

Result<NvidiaSmiReport> parse_nvidia_smi(std::string_view output) {
  NvidiaSmiReport report;
  std::size_t pos = 0;
  int line_number = 0;
  auto unknown = [](std::string_view v) { return v.empty() || v.front() == '[' || v == "N/A"; };
  while (pos < output.size()) {
    const std::size_t nl = std::min(output.find('\n', pos), output.size());
    const std::string_view line = trim_chars(output.substr(pos, nl - pos), " \t\r");
    pos = nl + 1;
    ++line_number;
    if (line.empty()) {
      continue;
    }
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    while (fields.size() < 64) {
      const std::size_t comma = line.find(',', start);
      fields.push_back(trim_chars(line.substr(start, comma - start), " \t"));
      if (comma == std::string_view::npos) {
        break;
      }
      start = comma + 1;
    }
    if (fields.size() < 6) {
      return invalid_input("nvidia-smi output line {}: expected 6 comma-separated fields, got \"{}\"",
                           line_number, printable_ascii(line, 200));
    }
    // A name with commas in it: the fields after it are the last four.
    std::string name(fields[1]);
    for (std::size_t i = 2; i + 4 < fields.size(); ++i) {
      name += ", " + std::string(fields[i]);
    }
    const std::size_t n = fields.size();
    const std::string_view index = fields[0];
    const std::string_view uuid = fields[n - 4];
    const std::string_view cc = fields[n - 3];
    const std::string_view memory = fields[n - 2];
    const std::string_view driver = fields[n - 1];
    SnapshotGpu gpu;
    int value = 0;
    if (index.empty() || index.size() > 6 ||
        std::from_chars(index.data(), index.data() + index.size(), value).ptr !=
            index.data() + index.size()) {
      return invalid_input("nvidia-smi output line {}: the index \"{}\" is not a number", line_number,
                           printable_ascii(index, 32));
    }
    gpu.index = value;
    gpu.name = unknown(name) ? std::string() : printable_ascii(name, k_max_name);
    gpu.uuid = unknown(uuid) ? std::string() : printable_ascii(uuid, k_max_name);
    gpu.compute_capability = unknown(cc) ? std::string() : version_token(cc);
    std::uint64_t mib = 0;
    if (!unknown(memory) && memory.size() <= 12 &&
        std::from_chars(memory.data(), memory.data() + memory.size(), mib).ptr ==
            memory.data() + memory.size()) {
      gpu.memory_mib = mib;
    }
    if (report.driver_version.empty() && !unknown(driver)) {
      report.driver_version = version_token(driver);
    }
    if (report.gpus.size() < k_max_gpus) {
      report.gpus.push_back(std::move(gpu));
    }
  }
  std::sort(report.gpus.begin(), report.gpus.end(),
            [](const SnapshotGpu& a, const SnapshotGpu& b) { return a.index < b.index; });
  return report;
}

std::string os_pretty_name(std::string_view os_release) {
  std::map<std::string, std::string> values;
  std::size_t pos = 0;
  while (pos < os_release.size()) {
    const std::size_t nl = std::min(os_release.find('\n', pos), os_release.size());
    const std::string_view line = trim_chars(os_release.substr(pos, nl - pos), " \t\r");
    pos = nl + 1;
    const std::size_t eq = line.find('=');
    if (line.empty() || line.front() == '#' || eq == std::string_view::npos) {
      continue;
    }
    std::string_view raw = line.substr(eq + 1);
    std::string value;
    if (!raw.empty() && (raw.front() == '"' || raw.front() == '\'')) {
      const char quote = raw.front();
      for (std::size_t i = 1; i < raw.size() && raw[i] != quote; ++i) {
        if (raw[i] == '\\' && quote == '"' && i + 1 < raw.size()) {
          ++i;
        }
        value += raw[i];
      }
    } else {
      value = std::string(raw);
    }
    values.emplace(std::string(line.substr(0, eq)), std::move(value));
  }
  if (auto it = values.find("PRETTY_NAME"); it != values.end() && !it->second.empty()) {
    return it->second;
  }
  auto name = values.find("NAME");
  if (name == values.end()) {
    return {};
  }
  auto version = values.find("VERSION_ID");
  return version == values.end() ? name->second : name->second + " " + version->second;
}

std::string glibc_version_in(std::string_view libc_bytes) {
  constexpr std::string_view marker = "release version ";
  std::size_t at = libc_bytes.find("GNU C Library");
  while (at != std::string_view::npos) {
    const std::string_view banner = libc_bytes.substr(at, 256);
    const std::size_t v = banner.find(marker);
    if (v != std::string_view::npos) {
      std::string_view rest = banner.substr(v + marker.size());
      const std::size_t end = rest.find_first_not_of("0123456789.");
      rest = rest.substr(0, end);
      while (!rest.empty() && rest.back() == '.') {
        rest.remove_suffix(1);
      }
      if (std::string version = version_token(rest); !version.empty()) {
        return version;
      }
    }
    at = libc_bytes.find("GNU C Library", at + 1);
  }
  return {};
}

std::string slurm_version_from(std::string_view output) {
  const std::string_view line = first_line(output);
  const std::size_t space = line.find(' ');
  if (space == std::string_view::npos || !line.starts_with("slurm")) {
    return {};
  }
  const std::string_view rest = trim_chars(line.substr(space + 1), " \t");
  return version_token(rest.substr(0, rest.find_first_of(" \t")));
}

std::map<std::string, std::string> dpkg_installed_versions(std::string_view status_text,
                                                           const std::vector<std::string>& packages) {
  std::map<std::string, std::string> out;
  Result<std::vector<Deb822Paragraph>> paragraphs = parse_deb822(status_text, "the dpkg status file");
  if (!paragraphs) {
    log::debug("doctor: {}", paragraphs.error().message);
    return out;
  }
  for (const Deb822Paragraph& p : *paragraphs) {
    const std::string* name = p.find("Package");
    const std::string* status = p.find("Status");
    const std::string* version = p.find("Version");
    if (name == nullptr || status == nullptr || version == nullptr || !status->ends_with(" installed") ||
        std::find(packages.begin(), packages.end(), *name) == packages.end()) {
      continue;
    }
    if (std::string v = version_token(envspec::upstream_version(*version)); !v.empty()) {
      out[*name] = v;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Snapshots

bool TargetReport::can_run() const {
  return std::none_of(checks.begin(), checks.end(), [](const Check& c) { return c.status == Status::fail; });
}

ojson snapshot_json(const Snapshot& s) {
  const SnapshotHost& h = s.host;
  ojson gpus = ojson::array();
  for (const SnapshotGpu& g : h.gpus) {
    gpus.push_back({{"index", g.index},
                    {"name", nullable(g.name)},
                    {"uuid", nullable(g.uuid)},
                    {"compute_capability", nullable(g.compute_capability)},
                    {"memory_mib", g.memory_mib ? ojson(*g.memory_mib) : ojson(nullptr)}});
  }
  ojson host = {
      {"arch", nullable(h.arch)},
      {"os", nullable(h.os)},
      {"kernel", nullable(h.kernel)},
      {"glibc", nullable(h.glibc)},
      {"user_namespaces", h.user_namespaces},
      {"driver", h.driver ? ojson{{"version", h.driver->version}, {"from", h.driver->from}} : ojson(nullptr)},
      {"gpus", std::move(gpus)},
      {"mpi", h.mpi
                  ? ojson{{"impl", h.mpi->impl}, {"version", nullable(h.mpi->version)}, {"path", h.mpi->path}}
                  : ojson(nullptr)},
      {"pmix", nullable(h.pmix)},
      {"ucx", nullable(h.ucx)},
      {"libfabric", nullable(h.libfabric)},
      {"slurm", nullable(h.slurm)},
  };
  ojson python = nullptr;
  if (s.python) {
    ojson packages = ojson::array();
    for (const PythonPackage& p : s.python->packages) {
      packages.push_back({{"name", p.name},
                          {"version", p.version},
                          {"from", p.from},
                          {"installer", nullable(p.installer)},
                          {"build", nullable(p.build)},
                          {"channel", nullable(p.channel)}});
    }
    python = {{"kind", s.python->kind},
              {"prefix", s.python->prefix},
              {"version", nullable(s.python->version)},
              {"packages", std::move(packages)}};
  }
  ojson out = {{"lockstep-snapshot", k_snapshot_schema},
               {"tool", s.tool},
               {"host", std::move(host)},
               {"python", std::move(python)}};
  if (s.target) {
    ojson checks = ojson::array();
    for (const Check& c : s.target->checks) {
      checks.push_back({{"name", c.name}, {"status", status_name(c.status)}, {"detail", c.detail}});
    }
    out["target"] = {{"kind", s.target->kind},
                     {"ref", s.target->ref},
                     {"facts", facts_object(s.target->facts)},
                     {"can_run", s.target->can_run()},
                     {"checks", std::move(checks)}};
  }
  return out;
}

std::string render_snapshot(const Snapshot& snapshot) {
  return snapshot_json(snapshot).dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

Result<Snapshot> parse_snapshot(std::string_view text, std::string_view what) {
  const SnapshotReader r(what);
  if (text.size() > k_max_snapshot) {
    return r.fail("", fmt::format("larger than {} bytes", k_max_snapshot));
  }
  if (find_json_depth_excess(text, k_max_snapshot_depth)) {
    return r.fail("", fmt::format("nested more than {} levels deep", k_max_snapshot_depth));
  }
  Result<json> parsed = parse_json(text, std::string(what), k_max_snapshot_depth);
  if (!parsed) {
    return r.fail("", "not valid JSON");
  }
  const json j = std::move(*parsed);
  LS_TRY(r.keys(j, "", {"lockstep-snapshot", "tool", "host", "python"}, {"target"}));
  if (!j["lockstep-snapshot"].is_number_integer() ||
      j["lockstep-snapshot"].get<std::int64_t>() != k_snapshot_schema) {
    return r.fail("lockstep-snapshot",
                  fmt::format("expected {} (a snapshot from another lockstep version?)", k_snapshot_schema));
  }
  Snapshot s;
  LS_TRY_ASSIGN(s.tool, r.str(j, "", "tool", k_max_name, false));
  LS_TRY_ASSIGN(s.host, read_host(r, j["host"]));
  LS_TRY_ASSIGN(s.python, read_python_json(r, j["python"]));
  if (j.contains("target")) {
    LS_TRY_ASSIGN(s.target, read_target(r, j["target"]));
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Capturing

DoctorOptions doctor_options_from_env() {
  DoctorOptions options;
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  options.virtual_env = env("VIRTUAL_ENV");
  options.conda_prefix = env("CONDA_PREFIX");
  options.path_list = env("PATH");
  if (options.path_list.empty()) {
    options.path_list = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  }
  return options;
}

Result<Capture> capture(const DoctorOptions& options) {
  log::Timer timer("doctor: capture");
  std::error_code ec;
  if (!fs::is_directory(options.host_root, ec)) {
    return invalid_input("--host-root {}: not a directory", options.host_root.string());
  }
  LS_TRY_ASSIGN(const RootFs root, RootFs::open(fs::absolute(options.host_root, ec).lexically_normal()));
  Capture c;
  c.snapshot.tool = fmt::format("lockstep {}", k_version);
  c.snapshot.host = probe_host_facts(root, options, c);
  LS_TRY_ASSIGN(c.snapshot.python, read_python(root, options, c));
  for (std::string& w : c.warnings) {
    w = printable_ascii(w, 2 * k_max_text);
  }
  return c;
}

Result<std::optional<PythonEnv>> capture_python(const DoctorOptions& options,
                                                std::vector<std::string>& warnings) {
  std::error_code ec;
  if (!fs::is_directory(options.host_root, ec)) {
    return invalid_input("--host-root {}: not a directory", options.host_root.string());
  }
  LS_TRY_ASSIGN(const RootFs root, RootFs::open(fs::absolute(options.host_root, ec).lexically_normal()));
  Capture c;
  LS_TRY_ASSIGN(std::optional<PythonEnv> env, read_python(root, options, c));
  warnings = std::move(c.warnings);
  return env;
}

TargetReport evaluate_target(std::string kind, const std::string& ref, const envspec::ImageFacts& facts,
                             const Capture& host, const ImageProbe* image, std::uint64_t unpack_bytes,
                             std::string_view gpu_min_cc) {
  PreflightRequest request;
  request.image = ref;
  request.model = "hybrid";
  if (!host.probe.mpi.path.empty()) {
    request.launcher = "mpirun";
  } else if (!host.snapshot.host.slurm.empty()) {
    request.launcher = "slurm";
  } else {
    request.launcher = "local";
  }
  request.gpus_per_node = facts.cuda.version.empty() && facts.cuda_driver_floor.empty() ? 0 : 1;
  request.facts = facts;
  request.unpack_bytes = unpack_bytes;
  const ImageProbe no_image{ImageProbe::State::present, ref, ImageArg::Kind::directory, std::nullopt, {}};
  const NodeReport node = evaluate_preflight(request, host.probe, image != nullptr ? *image : no_image);
  TargetReport t;
  t.kind = std::move(kind);
  t.ref = printable_ascii(ref, k_max_path);
  t.facts = facts;
  for (envspec::FactSource* f :
       {&t.facts.mpi, &t.facts.pmix, &t.facts.ucx, &t.facts.libfabric, &t.facts.cuda}) {
    f->from.clear();
  }
  for (const Check& c : node.checks) {
    const bool not_for_lock = image == nullptr && (c.name == "image" || c.name == "space");
    const bool nothing_to_unpack = c.name == "space" && unpack_bytes == 0;
    if (c.status == Status::skipped || not_for_lock || nothing_to_unpack) {
      continue;
    }
    Check kept = c;
    kept.detail = printable_ascii(kept.detail, k_max_text);
    t.checks.push_back(std::move(kept));
  }
  // The GPUs' architecture against the oldest one the target's binaries support.
  if (!gpu_min_cc.empty() && !host.snapshot.host.gpus.empty()) {
    std::vector<std::string> old;
    std::size_t known = 0;
    for (const SnapshotGpu& g : host.snapshot.host.gpus) {
      if (g.compute_capability.empty()) {
        continue;
      }
      ++known;
      if (envspec::compare_dotted(g.compute_capability, gpu_min_cc) < 0) {
        old.push_back(fmt::format("GPU {} ({}, compute capability {})", g.index, or_none(g.name, "unnamed"),
                                  g.compute_capability));
      }
    }
    if (!old.empty()) {
      t.checks.push_back(
          Check{"gpu-arch", Status::fail,
                printable_ascii(fmt::format("{} {} older than {}, the lowest compute capability the "
                                            "target's CUDA stack supports (use newer GPUs, or a stack "
                                            "built for older ones)",
                                            fmt::join(old, ", "), old.size() == 1 ? "is" : "are", gpu_min_cc),
                                k_max_text)});
    } else if (known > 0) {
      t.checks.push_back(Check{"gpu-arch", Status::ok,
                               fmt::format("{} GPU{} at compute capability {} or newer", known,
                                           known == 1 ? "" : "s", gpu_min_cc)});
    }
  }
  return t;
}

std::string render_doctor_report(const Capture& c, const std::optional<TargetReport>& target) {
  const SnapshotHost& h = c.snapshot.host;
  Table table;
  table.row("arch", or_none(h.arch, "unknown"));
  table.row("os", or_none(h.os, "unknown"));
  table.row("kernel", or_none(h.kernel, "unknown"));
  table.row("glibc", or_none(h.glibc, "unknown"));
  table.row("user namespaces", h.user_namespaces ? "yes" : "no");
  table.row("NVIDIA driver",
            h.driver ? fmt::format("{} (from {})", h.driver->version, h.driver->from) : "none");
  if (!h.gpus.empty()) {
    table.row("GPUs", fmt::format("{} (from {})", h.gpus.size(), c.gpus_from));
    for (const SnapshotGpu& g : h.gpus) {
      std::string line = or_none(g.name, "(unnamed)");
      if (!g.compute_capability.empty()) {
        line += ", cc " + g.compute_capability;
      }
      if (g.memory_mib) {
        line += fmt::format(", {} MiB", *g.memory_mib);
      }
      if (!g.uuid.empty()) {
        line += ", " + g.uuid;
      }
      table.row(fmt::format("  {}", g.index), line);
    }
  } else {
    table.row("GPUs", "none");
  }
  table.row("mpirun", h.mpi ? fmt::format("{} ({})",
                                          h.mpi->impl == "unknown" ? "unknown MPI"
                                                                   : mpi_display(h.mpi->impl, h.mpi->version),
                                          h.mpi->path)
                            : "none on PATH");
  table.row("PMIx", or_none(h.pmix));
  table.row("UCX", or_none(h.ucx));
  table.row("libfabric", or_none(h.libfabric));
  table.row("Slurm", or_none(h.slurm));
  if (const auto& py = c.snapshot.python) {
    std::string line = fmt::format("{} {}", py->kind, py->prefix);
    if (!py->version.empty()) {
      line += ", Python " + py->version;
    }
    line += ", " + plural(py->packages.size(), "package");
    if (c.system_site_packages) {
      line += " (system site-packages visible, not listed)";
    }
    table.row("Python", line);
  } else {
    table.row("Python", "no active environment (set VIRTUAL_ENV or CONDA_PREFIX, or use --python PREFIX)");
  }
  std::string out = table.render();
  if (!target) {
    return out;
  }
  Table verdict;
  verdict.row("target", fmt::format("{} ({}): {}", target->ref, target->kind, describe_facts(target->facts)));
  verdict.row("can run here", target->can_run() ? "yes" : "no");
  for (const Check& check : target->checks) {
    std::string_view status = "ok";
    if (check.status == Status::fail) {
      status = "FAIL";
    } else if (check.status == Status::warn) {
      status = "WARN";
    }
    verdict.row("  " + check.name, fmt::format("{:<4}  {}", status, check.detail));
  }
  return out + '\n' + verdict.render();
}

} // namespace lockstep::runner
