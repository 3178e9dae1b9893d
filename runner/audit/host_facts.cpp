// The host part of a doctor snapshot (host_facts.hpp): one probe function per fact, then
// probe_host_facts, which runs them in order.
//
// Why each source (docs/doctor.md has the table):
// - The driver comes from /proc/driver/nvidia/version like `--gpus` reads it (runner/runtime/gpu); GPUs from
//   nvidia-smi when it answers, since only NVML knows the compute capability and memory, else from
//   /proc/driver/nvidia/gpus/*/information.
// - PMIx and UCX come from the libraries the loader finds (runner/launch/host_probe), but libfabric from
//   the dpkg database: loading libfabric.so.1 initialises its providers (~200 ms), and fi_version()
//   only knows major.minor. Under a host root nothing is loaded (it would be this machine's
//   library), so all three come from the root's dpkg database.
#include "runner/audit/host_facts.hpp"

#include "envspec/settings/settings.hpp"
#include "runner/audit/doctor_text.hpp"
#include "runner/runtime/gpu.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/base/version.hpp"
#include "support/debian/deb822.hpp"
#include "support/store/blob_store.hpp"
#include "support/system/process.hpp"

#include <fmt/format.h>

#include <sys/utsname.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <gnu/libc-version.h>

namespace lockstep::runner {

namespace fs = std::filesystem;
using namespace doctor_detail; // doctor's shared bounds, text rules and root (doctor_text.hpp, root_fs.hpp)

namespace {

constexpr std::chrono::milliseconds k_tool_timeout{2000};
/// nvidia-smi initialises NVML, which takes a second or more on a node without persistence mode.
constexpr std::chrono::milliseconds k_nvidia_smi_timeout{5000};
constexpr std::size_t k_tool_output_limit = 64ULL * 1024;

constexpr std::size_t k_dpkg_status_limit = 64ULL << 20; // /var/lib/dpkg/status
constexpr std::size_t k_libc_limit = 32ULL << 20;        // libc.so.6 is ~2 MiB

constexpr std::string_view k_proc_driver_version = "/proc/driver/nvidia/version";
constexpr std::string_view k_proc_gpus = "/proc/driver/nvidia/gpus";
constexpr std::string_view k_nvidia_smi_query =
    "--query-gpu=index,name,uuid,compute_cap,memory.total,driver_version";

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

// The user namespace settings of the captured root's /proc/sys.
UsernsSettings root_userns_settings(const RootFs& root) {
  return {root.first_line_of("/proc/sys/user/max_user_namespaces"),
          root.first_line_of("/proc/sys/kernel/unprivileged_userns_clone"),
          root.first_line_of("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")};
}

// Whether unprivileged user namespaces work, as preflight states it; files only under a host root.
HostUserns probe_userns(const RootFs& root) {
  if (root.live()) {
    return probe_user_namespaces();
  }
  return userns_from_settings(root_userns_settings(root));
}

// Whether unprivileged users get user namespaces, for the snapshot: as root the probe makes no
// test child, so the kernel settings decide.
bool userns_available(const RootFs& root, const HostUserns& userns) {
  if (userns.state == UsernsState::not_needed) {
    return userns_from_settings(root_userns_settings(root)).state == UsernsState::allowed;
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

} // namespace

// ---------------------------------------------------------------------------------------------
// Parsers

Result<NvidiaSmiReport> parse_nvidia_smi(std::string_view output) {
  NvidiaSmiReport report;
  int line_number = 0;
  auto unknown = [](std::string_view v) { return v.empty() || v.front() == '[' || v == "N/A"; };
  for (const std::string_view raw : text_lines(output)) {
    const std::string_view line = trim_chars(raw, " \t\r");
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
  for (const std::string_view text : text_lines(os_release)) {
    const std::string_view line = trim_chars(text, " \t\r");
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

namespace doctor_detail {

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
  probe.space = probe_space(settings::store_root());
  return host;
}

} // namespace doctor_detail

} // namespace lockstep::runner
