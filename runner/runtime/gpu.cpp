#include "runner/runtime/gpu.hpp"

#include "envspec/stack/recipes.hpp"
#include "envspec/yaml/node.hpp"
#include "envspec/yaml/recipe_reader.hpp"
#include "runner/runtime/ld_cache.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/system/fs.hpp"

#include <fmt/ranges.h>

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

namespace lockstep::runner {

namespace {

namespace fs = std::filesystem;
using envspec::Diagnostics;
using envspec::Node;

constexpr std::string_view k_libs_dir = "/.singularity.d/libs";
constexpr std::string_view k_version_file = "proc/driver/nvidia/version";
constexpr std::string_view k_gpus_dir = "proc/driver/nvidia/gpus";
constexpr std::string_view k_ld_cache = "etc/ld.so.cache";
constexpr std::string_view k_recipe_path = "gpu/nvidia.yaml";
/// The host directories binaries are looked up in: Debian's default PATH for root, in its order.
/// The caller's PATH is not used, so the result depends on the host only.
constexpr std::array<std::string_view, 6> k_binary_dirs = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                                           "/usr/bin",        "/sbin",          "/bin"};
constexpr int k_max_symlinks = 40; // as the kernel's path walk (MAXSYMLINKS)

// ---------------------------------------------------------------------------------------------
// Host files

/// `path` (absolute, as seen on the host) resolved inside `root` the way the kernel would after
/// chroot(root): symlinks are followed, absolute targets and ".." stay inside `root`. Returns the
/// resolved path under `root`, or nullopt when some component does not exist.
std::optional<fs::path> resolve_in_root(const fs::path& root, std::string_view path) {
  std::vector<std::string> todo; // components still to walk, last = next
  auto push_components = [&todo](std::string_view p) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (start <= p.size()) {
      const std::size_t slash = p.find('/', start);
      const std::size_t end = slash == std::string_view::npos ? p.size() : slash;
      if (end > start) {
        parts.emplace_back(p.substr(start, end - start));
      }
      start = end + 1;
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push_components(path);
  std::vector<std::string> done;
  auto current = [&root, &done]() {
    fs::path p = root;
    for (const std::string& c : done) {
      p /= c;
    }
    return p;
  };
  int links = 0;
  while (!todo.empty()) {
    std::string c = std::move(todo.back());
    todo.pop_back();
    if (c == ".") {
      continue;
    }
    if (c == "..") {
      if (!done.empty()) {
        done.pop_back();
      }
      continue;
    }
    const fs::path candidate = current() / c;
    struct stat st {};
    if (::lstat(candidate.c_str(), &st) != 0) {
      return std::nullopt;
    }
    if (!S_ISLNK(st.st_mode)) {
      done.push_back(std::move(c));
      continue;
    }
    if (++links > k_max_symlinks) {
      return std::nullopt;
    }
    std::array<char, 4096> buf{};
    const ssize_t n = ::readlink(candidate.c_str(), buf.data(), buf.size());
    if (n <= 0 || static_cast<std::size_t>(n) >= buf.size()) {
      return std::nullopt;
    }
    const std::string_view target(buf.data(), static_cast<std::size_t>(n));
    if (target.starts_with('/')) {
      done.clear();
    }
    push_components(target);
  }
  return current();
}

/// True for an existing entry that is not a directory (files, device nodes, sockets).
bool is_non_directory(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

/// Reads a small file that may report size 0 (procfs): up to `limit` bytes.
Result<std::string> read_small_file(const fs::path& path, std::size_t limit = std::size_t{64} * 1024) {
  LS_TRY_ASSIGN(UniqueFd fd, open_file(path, O_RDONLY));
  std::string out(limit, '\0');
  LS_TRY_ASSIGN(const std::size_t got, read_full(fd.get(), out.data(), out.size(), path.string()));
  out.resize(got);
  return out;
}

/// The host path of `relative` (no leading slash) under the host root.
fs::path under_root(const GpuHost& host, std::string_view relative) {
  return host.root / relative;
}

/// Whether the ELF file at `path` is for this build's class and machine (Apptainer's elfMachine
/// check): the ld.so cache can list stale or foreign files.
bool is_native_elf(const fs::path& path) {
  auto fd = open_file(path, O_RDONLY);
  if (!fd) {
    return false;
  }
  std::array<unsigned char, EI_NIDENT + 4> header{};
  auto got = read_full(fd->get(), header.data(), header.size(), path.string());
  if (!got || *got != header.size() || std::memcmp(header.data(), ELFMAG, SELFMAG) != 0) {
    return false;
  }
  const unsigned char native_class = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
  if (header[EI_CLASS] != native_class) {
    return false;
  }
#if defined(__x86_64__)
  constexpr unsigned native_machine = EM_X86_64;
#elif defined(__aarch64__)
  constexpr unsigned native_machine = EM_AARCH64;
#elif defined(__powerpc64__)
  constexpr unsigned native_machine = EM_PPC64;
#elif defined(__s390x__)
  constexpr unsigned native_machine = EM_S390;
#elif defined(__riscv)
  constexpr unsigned native_machine = EM_RISCV;
#else
  constexpr unsigned native_machine = EM_NONE; // unknown: accept any machine
#endif
  const unsigned lo = header[EI_NIDENT + 2];
  const unsigned hi = header[EI_NIDENT + 3];
  const unsigned machine = header[EI_DATA] == ELFDATA2MSB ? (lo << 8) | hi : (hi << 8) | lo;
  return native_machine == EM_NONE || machine == native_machine;
}

// ---------------------------------------------------------------------------------------------
// The driver and its GPUs

/// One GPU as the loaded driver reports it in /proc/driver/nvidia/gpus/<PCI address>/information.
struct HostGpu {
  std::string bus_id; ///< the directory name, e.g. "0000:3b:00.0"
  std::string uuid;   ///< "GPU-..." (empty when unknown)
  int minor = -1;     ///< N of /dev/nvidiaN
  std::string model;  ///< the "Model:" line (empty when unknown)
};

std::string no_driver_message(const GpuHost& host, std::string_view missing) {
  return fmt::format(
      "--gpus: no NVIDIA driver on this host: {} does not exist (lockstep looks for {} and {}); "
      "drop --gpus, or run on a node with the NVIDIA driver loaded",
      missing, under_root(host, k_version_file).string(), under_root(host, "dev/nvidiactl").string());
}

/// The driver version from the first line of /proc/driver/nvidia/version, e.g.
/// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023" or
/// "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build ...".
Result<std::string> read_driver_version(const GpuHost& host) {
  const fs::path file = under_root(host, k_version_file);
  auto text = read_small_file(file);
  if (!text) {
    return external_error("{}", no_driver_message(host, file.string()));
  }
  const std::string_view first_line = std::string_view(*text).substr(0, text->find('\n'));
  std::size_t pos = 0;
  while (pos < first_line.size()) {
    const std::size_t start = first_line.find_first_not_of(" \t", pos);
    if (start == std::string_view::npos) {
      break;
    }
    const std::size_t end = std::min(first_line.find_first_of(" \t", start), first_line.size());
    const std::string_view token = first_line.substr(start, end - start);
    const bool digits_and_dots = token.find_first_not_of("0123456789.") == std::string_view::npos;
    if (digits_and_dots && token.find('.') != std::string_view::npos && std::isdigit(token.front()) != 0 &&
        std::isdigit(token.back()) != 0) {
      return std::string(token);
    }
    pos = end;
  }
  return external_error("--gpus: can't find the driver version in {}: its first line is \"{}\"",
                        file.string(), first_line);
}

/// Parses "Key: value" lines of a GPU information file.
HostGpu parse_gpu_information(std::string bus_id, std::string_view text) {
  HostGpu gpu{std::move(bus_id), {}, -1, {}};
  for_each_line(text, [&](std::string_view line) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      return true;
    }
    const std::string_view key = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (key == "GPU UUID") {
      gpu.uuid = std::string(value);
    } else if (key == "Model") {
      gpu.model = std::string(value);
    } else if (key == "Device Minor" && !value.empty() &&
               value.find_first_not_of("0123456789") == std::string_view::npos && value.size() <= 6) {
      gpu.minor = std::stoi(std::string(value));
    }
    return true;
  });
  return gpu;
}

/// The host's GPUs in PCI bus order, which is the order NVML and nvidia-container-cli number
/// them in. Without /proc/driver/nvidia/gpus (a minimal tree), the /dev/nvidiaN nodes in minor
/// order stand in, without UUIDs.
Result<std::vector<HostGpu>> list_gpus(const GpuHost& host, const GpuRecipe& recipe) {
  std::vector<HostGpu> gpus;
  const fs::path gpus_dir = under_root(host, k_gpus_dir);
  std::error_code ec;
  if (fs::is_directory(gpus_dir, ec)) {
    std::vector<std::string> bus_ids;
    for (const auto& entry : fs::directory_iterator(gpus_dir, ec)) {
      bus_ids.push_back(entry.path().filename().string());
    }
    if (ec) {
      return external_error("--gpus: can't list the GPUs in {}: {}", gpus_dir.string(), ec.message());
    }
    std::sort(bus_ids.begin(), bus_ids.end());
    for (std::string& bus_id : bus_ids) {
      const fs::path info = gpus_dir / bus_id / "information";
      LS_TRY_ASSIGN(const std::string text, read_small_file(info));
      HostGpu gpu = parse_gpu_information(std::move(bus_id), text);
      if (gpu.minor < 0) {
        return external_error(
            "--gpus: can't read the GPU's device minor number from {}: no \"Device Minor:\" line",
            info.string());
      }
      gpus.push_back(std::move(gpu));
    }
    return gpus;
  }
  const fs::path dev = under_root(host, "dev");
  for (const auto& entry : fs::directory_iterator(dev, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string_view prefix = recipe.gpu_device_prefix;
    if (name.size() > prefix.size() && name.starts_with(prefix) && name.size() - prefix.size() <= 6 &&
        name.find_first_not_of("0123456789", prefix.size()) == std::string::npos) {
      gpus.push_back(HostGpu{{}, {}, std::stoi(name.substr(prefix.size())), {}});
    }
  }
  std::sort(gpus.begin(), gpus.end(), [](const HostGpu& a, const HostGpu& b) { return a.minor < b.minor; });
  return gpus;
}

/// "0000:3b:00.0" and "3b:00.0" name the same device; compare without the domain's leading zeros.
std::string normalized_bus_id(std::string_view bus_id) {
  std::string s = ascii_lower(bus_id);
  if (std::count(s.begin(), s.end(), ':') == 1) {
    s = "0000:" + s;
  }
  const std::size_t colon = s.find(':');
  const std::size_t first = s.find_first_not_of('0');
  if (first != std::string::npos && first < colon) {
    s.erase(0, first);
  } else if (colon != std::string::npos) {
    s.erase(0, colon); // all-zero domain
  }
  return s;
}

std::string describe_gpus(const std::vector<HostGpu>& gpus) {
  if (gpus.empty()) {
    return "this host has no GPU";
  }
  std::string out = fmt::format("this host has {} GPU{}:", gpus.size(), gpus.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const HostGpu& g = gpus[i];
    out += fmt::format(" {}", i);
    if (!g.uuid.empty() || !g.bus_id.empty()) {
      std::string detail = g.uuid;
      if (!g.bus_id.empty()) {
        detail += (detail.empty() ? "" : " at ") + g.bus_id;
      }
      out += " (" + detail + ")";
    }
    out += i + 1 < gpus.size() ? "," : "";
  }
  return out;
}

/// The GPUs a comma-separated list names, in the list's order without repeats.
Result<std::vector<std::size_t>> select_gpus(std::string_view list, const std::vector<HostGpu>& gpus) {
  std::vector<std::size_t> selected;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    std::string_view item = list.substr(pos, comma - pos);
    pos = comma + 1;
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) {
      item.remove_prefix(1);
    }
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) {
      item.remove_suffix(1);
    }
    const std::string lower = ascii_lower(item);
    if (item.empty()) {
      return invalid_input(
          "--gpus {}: empty entry in the list; name GPUs by index (0,1), UUID (GPU-...) or PCI "
          "address, or use all or none",
          list);
    }
    if (lower == "all" || lower == "none" || lower == "void") {
      return invalid_input("--gpus {}: '{}' can't be combined with other entries", list, item);
    }
    if (lower.starts_with("mig-") || (item.find(':') != std::string_view::npos &&
                                      item.find_first_not_of("0123456789:") == std::string_view::npos)) {
      return invalid_input("--gpus {}: MIG devices ('{}') are not supported; select the whole GPU", list,
                           item);
    }
    std::optional<std::size_t> found;
    if (item.find_first_not_of("0123456789") == std::string_view::npos) {
      const std::size_t index = item.size() <= 6 ? std::stoul(std::string(item)) : gpus.size();
      if (index >= gpus.size()) {
        return invalid_input("--gpus {}: there is no GPU with index {}; {}", list, item, describe_gpus(gpus));
      }
      found = index;
    } else if (lower.starts_with("gpu-")) {
      for (std::size_t i = 0; i < gpus.size() && !found; ++i) {
        if (ascii_lower(gpus[i].uuid) == lower) {
          found = i;
        }
      }
      if (!found) {
        return invalid_input("--gpus {}: there is no GPU with UUID {}; {}", list, item, describe_gpus(gpus));
      }
    } else if (item.find(':') != std::string_view::npos) {
      for (std::size_t i = 0; i < gpus.size() && !found; ++i) {
        if (!gpus[i].bus_id.empty() && normalized_bus_id(gpus[i].bus_id) == normalized_bus_id(item)) {
          found = i;
        }
      }
      if (!found) {
        return invalid_input("--gpus {}: there is no GPU at PCI address {}; {}", list, item,
                             describe_gpus(gpus));
      }
    } else {
      return invalid_input(
          "--gpus {}: can't read '{}': name GPUs by index (0,1), UUID (GPU-...) or PCI address "
          "(0000:3b:00.0), or use all or none",
          list, item);
    }
    if (std::find(selected.begin(), selected.end(), *found) == selected.end()) {
      selected.push_back(*found);
    }
  }
  return selected;
}

// ---------------------------------------------------------------------------------------------
// Files to bind

/// Driver libraries from the host's ld.so cache, bound at /.singularity.d/libs/<cache name>.
Result<std::vector<GpuBind>> plan_libraries(const GpuHost& host, const GpuRecipe& recipe,
                                            const std::string& driver_version) {
  const fs::path cache_path = under_root(host, k_ld_cache);
  auto cache = read_ld_cache(cache_path);
  if (!cache) {
    return Error{
        ExitCode::external,
        fmt::format("--gpus: can't find the NVIDIA driver libraries: {}; run ldconfig on the host to "
                    "rebuild the cache",
                    cache.error().message)};
  }
  const std::int32_t native = native_ld_cache_flags();
  std::map<std::string, GpuBind> by_target; // sorted by target; the first entry for a name wins
  for (const GpuRecipe::Library& lib : recipe.libraries) {
    bool found = false;
    for (const LdCacheEntry& e : cache->entries) {
      if (!e.name.starts_with(lib.name) ||
          (e.name.size() > lib.name.size() && e.name[lib.name.size()] != '.')) {
        continue;
      }
      if (e.flags != native) {
        log::debug("--gpus: skipping {} => {}: built for {}, not {}", e.name, e.path,
                   describe_ld_cache_flags(e.flags), describe_ld_cache_flags(native));
        continue;
      }
      const std::string target = fmt::format("{}/{}", k_libs_dir, e.name);
      if (by_target.contains(target) || e.name.find('/') != std::string::npos) {
        continue;
      }
      const std::optional<fs::path> source = resolve_in_root(host.root, e.path);
      if (!source || !is_native_elf(*source)) {
        log::debug("--gpus: skipping {} => {}: not a {} ELF file under {}", e.name, e.path,
                   describe_ld_cache_flags(native), host.root.string());
        continue;
      }
      if (lib.driver_versioned && !source->filename().string().ends_with("." + driver_version)) {
        log::debug("--gpus: skipping {} => {}: not from driver {}", e.name, source->string(), driver_version);
        continue;
      }
      by_target.emplace(target, GpuBind{*source, target, true});
      found = true;
    }
    if (!found) {
      log::debug("--gpus: no {} in {}", lib.name, cache_path.string());
    }
  }
  std::vector<GpuBind> binds;
  binds.reserve(by_target.size());
  for (auto& [target, bind] : by_target) {
    binds.push_back(std::move(bind));
  }
  if (binds.empty()) {
    log::warn(
        "--gpus: no NVIDIA driver library of version {} is listed in {}; programs in the container will "
        "not find libcuda or libnvidia-ml",
        driver_version, cache_path.string());
  }
  return binds;
}

/// Driver programs from the host's PATH directories, bound at /usr/bin/<name>.
std::vector<GpuBind> plan_binaries(const GpuHost& host, const GpuRecipe& recipe) {
  std::vector<GpuBind> binds;
  for (const GpuRecipe::Item& bin : recipe.binaries) {
    for (std::string_view dir : k_binary_dirs) {
      const std::optional<fs::path> source = resolve_in_root(host.root, fmt::format("{}/{}", dir, bin.name));
      struct stat st {};
      if (source && ::stat(source->c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0) {
        binds.push_back(GpuBind{*source, "/usr/bin/" + bin.name, true});
        break;
      }
    }
  }
  return binds;
}

/// Configuration files (first config dir holding each) and daemon sockets, at their own paths.
std::vector<GpuBind> plan_files(const GpuHost& host, const GpuRecipe& recipe) {
  std::vector<GpuBind> binds;
  for (const GpuRecipe::Item& file : recipe.files) {
    for (const std::string& dir : recipe.config_dirs) {
      const std::string target = fmt::format("{}/{}", dir, file.name);
      const std::optional<fs::path> source = resolve_in_root(host.root, target);
      if (source && is_non_directory(*source)) {
        binds.push_back(GpuBind{*source, target, true});
        break;
      }
    }
  }
  for (const GpuRecipe::Item& ipc : recipe.ipc) {
    const std::optional<fs::path> source = resolve_in_root(host.root, ipc.name);
    std::error_code ec;
    if (source && fs::exists(*source, ec)) {
      binds.push_back(GpuBind{*source, ipc.name, false});
    }
  }
  return binds;
}

// ---------------------------------------------------------------------------------------------
// The recipe

const std::set<std::string, std::less<>> k_capabilities = {"utility", "compute", "video", "graphics", "ngx"};

/// The GPU recipe's reader: the shared one, plus capabilities.
class GpuRecipeReader : public envspec::RecipeReader {
public:
  using envspec::RecipeReader::RecipeReader;

  std::string capability(const Node& item, const std::string& path) {
    std::optional<std::string> cap = scalar(item, path, "capability", true);
    if (cap && !k_capabilities.contains(*cap)) {
      m_diags.error(
          item.find("capability")->value.location, envspec::child_path(path, "capability"),
          fmt::format("unknown capability '{}'; expected utility, compute, video, graphics or ngx", *cap));
    }
    return cap.value_or("");
  }
};

} // namespace

Result<GpuRecipe> parse_gpu_recipe(std::string_view text, const fs::path& origin) {
  Diagnostics diags;
  diags.set_source(origin, std::string(text));
  std::optional<Node> root = envspec::parse_yaml(text, origin, diags);
  if (!root || !diags.empty()) {
    return diags.to_error();
  }
  if (!root->is_map()) {
    diags.error(root->location, "", fmt::format("expected a map, found {}", envspec::describe(*root)));
    return diags.to_error();
  }
  GpuRecipeReader r(diags);
  r.check_keys(
      *root, "",
      {"recipe", "vendor", "sources", "config_dirs", "libraries", "binaries", "files", "ipc", "devices"});
  if (auto kind = r.scalar(*root, "", "recipe", true); kind && *kind != "gpu") {
    diags.error(root->find("recipe")->value.location, "recipe",
                fmt::format("expected 'gpu', found '{}'", *kind));
  }
  if (auto vendor = r.scalar(*root, "", "vendor", true); vendor && *vendor != "nvidia") {
    diags.error(root->find("vendor")->value.location, "vendor",
                fmt::format("only 'nvidia' is supported, found '{}'", *vendor));
  }
  const std::set<std::string, std::less<>> sources = r.source_names(*root, true);

  GpuRecipe recipe;
  if (const auto* dirs = r.list(*root, "", "config_dirs")) {
    for (std::size_t i = 0; i < dirs->size(); ++i) {
      const Node& d = (*dirs)[i];
      if (!d.is_scalar() || !d.scalar.starts_with('/')) {
        diags.error(d.location, envspec::item_path("config_dirs", i), "expected an absolute directory path");
        continue;
      }
      recipe.config_dirs.push_back(d.scalar);
    }
  }
  auto for_items = [&](std::string_view key, auto&& each) {
    const auto* items = r.list(*root, "", key);
    if (items == nullptr) {
      return;
    }
    for (std::size_t i = 0; i < items->size(); ++i) {
      const Node& item = (*items)[i];
      const std::string path = envspec::item_path(std::string(key), i);
      if (!item.is_map()) {
        diags.error(item.location, path, fmt::format("expected a map, found {}", envspec::describe(item)));
        continue;
      }
      r.check_source(item, path, sources);
      each(item, path);
    }
  };
  for_items("libraries", [&](const Node& item, const std::string& path) {
    r.check_keys(item, path, {"name", "capability", "driver_versioned", "source"});
    GpuRecipe::Library lib;
    lib.name = r.scalar(item, path, "name", true).value_or("");
    if (!lib.name.empty() && lib.name.find('/') != std::string::npos) {
      diags.error(item.find("name")->value.location, envspec::child_path(path, "name"),
                  "expected a library file name, not a path");
    }
    lib.capability = r.capability(item, path);
    lib.driver_versioned = r.boolean(item, path, "driver_versioned").value_or(true);
    recipe.libraries.push_back(std::move(lib));
  });
  for_items("binaries", [&](const Node& item, const std::string& path) {
    r.check_keys(item, path, {"name", "capability", "source"});
    GpuRecipe::Item bin{r.scalar(item, path, "name", true).value_or(""), r.capability(item, path)};
    if (bin.name.find('/') != std::string::npos) {
      diags.error(item.find("name")->value.location, envspec::child_path(path, "name"),
                  "expected a program name, not a path");
    }
    recipe.binaries.push_back(std::move(bin));
  });
  for_items("files", [&](const Node& item, const std::string& path) {
    r.check_keys(item, path, {"path", "capability", "source"});
    GpuRecipe::Item file{r.scalar(item, path, "path", true).value_or(""), r.capability(item, path)};
    if (file.name.starts_with('/') || file.name.find("..") != std::string::npos) {
      diags.error(item.find("path")->value.location, envspec::child_path(path, "path"),
                  "expected a path relative to config_dirs, without '..'");
    }
    recipe.files.push_back(std::move(file));
  });
  for_items("ipc", [&](const Node& item, const std::string& path) {
    r.check_keys(item, path, {"path", "capability", "source"});
    GpuRecipe::Item ipc{r.scalar(item, path, "path", true).value_or(""), r.capability(item, path)};
    if (!ipc.name.empty() && (!ipc.name.starts_with('/') || ipc.name.find("..") != std::string::npos)) {
      diags.error(item.find("path")->value.location, envspec::child_path(path, "path"),
                  "expected an absolute path without '..'");
    }
    recipe.ipc.push_back(std::move(ipc));
  });
  if (const envspec::MapEntry* dev = root->find("devices"); dev != nullptr && dev->value.is_map()) {
    const Node& devices = dev->value;
    r.check_keys(devices, "devices", {"control", "gpu"});
    if (const auto* control = r.list(devices, "devices", "control")) {
      for (std::size_t i = 0; i < control->size(); ++i) {
        const Node& item = (*control)[i];
        const std::string path = envspec::item_path("devices.control", i);
        if (!item.is_map()) {
          diags.error(item.location, path, fmt::format("expected a map, found {}", envspec::describe(item)));
          continue;
        }
        r.check_keys(item, path, {"name", "required", "source"});
        r.check_source(item, path, sources);
        GpuRecipe::ControlDevice d{r.scalar(item, path, "name", true).value_or(""),
                                   r.boolean(item, path, "required").value_or(false)};
        if (d.name.find('/') != std::string::npos) {
          diags.error(item.find("name")->value.location, envspec::child_path(path, "name"),
                      "expected a file name under /dev");
        }
        recipe.control_devices.push_back(std::move(d));
      }
    }
    if (const envspec::MapEntry* gpu = devices.find("gpu"); gpu != nullptr && gpu->value.is_map()) {
      r.check_keys(gpu->value, "devices.gpu", {"prefix", "source"});
      r.check_source(gpu->value, "devices.gpu", sources);
      recipe.gpu_device_prefix = r.scalar(gpu->value, "devices.gpu", "prefix", true).value_or("nvidia");
    } else {
      diags.error(gpu != nullptr ? gpu->value.location : devices.location, "devices.gpu",
                  "expected a map with the per-GPU device name 'prefix'");
    }
  } else {
    diags.error(dev != nullptr ? dev->value.location : root->location, "devices",
                "expected a map with 'control' and 'gpu'");
  }
  if (!diags.empty()) {
    return diags.to_error();
  }
  return recipe;
}

Result<GpuRecipe> load_gpu_recipe() {
  fs::path origin;
  auto text = envspec::read_builtin_recipe(k_recipe_path, origin);
  if (!text) {
    // Only an unreadable LOCKSTEP_RECIPES_DIR/gpu/nvidia.yaml fails as io; a recipe missing from
    // the binary is a build bug (internal) that says so itself.
    const Error& e = text.error();
    return e.code == ExitCode::io ? e.with_context("reading the GPU recipe (LOCKSTEP_RECIPES_DIR)") : e;
  }
  return parse_gpu_recipe(*text, origin);
}

Result<GpuInventory> gpu_inventory(const GpuHost& host) {
  GpuInventory inventory;
  struct stat st {};
  if (::stat(under_root(host, k_version_file).c_str(), &st) != 0) {
    return inventory;
  }
  LS_TRY_ASSIGN(inventory.driver_version, read_driver_version(host));
  LS_TRY_ASSIGN(const GpuRecipe recipe, load_gpu_recipe());
  LS_TRY_ASSIGN(const std::vector<HostGpu> gpus, list_gpus(host, recipe));
  inventory.gpu_count = gpus.size();
  for (const HostGpu& gpu : gpus) {
    inventory.gpus.push_back(InventoryGpu{gpu.bus_id, gpu.model, gpu.uuid, gpu.minor});
  }
  return inventory;
}

Result<GpuPlan> plan_gpu_passthrough(std::string_view visible_devices, const GpuHost& host) {
  LS_TRY_ASSIGN(const GpuRecipe recipe, load_gpu_recipe());
  return plan_gpu_passthrough(visible_devices, host, recipe);
}

Result<GpuPlan> plan_gpu_passthrough(std::string_view visible_devices, const GpuHost& host,
                                     const GpuRecipe& recipe) {
  std::string selection = ascii_lower(visible_devices);
  selection.erase(0, selection.find_first_not_of(" \t"));
  selection.erase(selection.find_last_not_of(" \t") + 1);
  GpuPlan plan;
  if (selection == "void") {
    log::debug("--gpus void: GPU passthrough disabled");
    return plan;
  }
  // 1. The driver: its version file and control node say it is loaded.
  LS_TRY_ASSIGN(plan.driver_version, read_driver_version(host));
  for (const GpuRecipe::ControlDevice& d : recipe.control_devices) {
    const fs::path node = under_root(host, "dev/" + d.name);
    if (is_non_directory(node)) {
      plan.device_nodes.push_back(node.string());
    } else if (d.required) {
      return external_error("{}", no_driver_message(host, node.string()));
    } else if (d.name == "nvidia-uvm") {
      log::warn(
          "--gpus: {} is missing, so CUDA programs will fail; create it as root with `nvidia-modprobe -u "
          "-c=0` (or run any CUDA program once as root)",
          node.string());
    }
  }
  // 2. The GPUs and the selection.
  LS_TRY_ASSIGN(const std::vector<HostGpu> gpus, list_gpus(host, recipe));
  std::vector<std::size_t> selected;
  std::string visible;
  if (selection.empty() || selection == "all") {
    if (gpus.empty()) {
      return external_error("--gpus: the NVIDIA driver {} is loaded but reports no GPU (nothing in {}); drop "
                            "--gpus, or run on a node with a GPU",
                            plan.driver_version, under_root(host, k_gpus_dir).string());
    }
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      selected.push_back(i);
    }
    visible = "all";
  } else if (selection == "none") {
    visible = "none";
  } else {
    LS_TRY_ASSIGN(selected, select_gpus(visible_devices, gpus));
    std::vector<std::string> names;
    names.reserve(selected.size());
    for (std::size_t i : selected) {
      names.push_back(gpus[i].uuid.empty() ? std::to_string(i) : gpus[i].uuid);
    }
    visible = fmt::format("{}", fmt::join(names, ","));
  }
  plan.all_devices = selected.size() == gpus.size();
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const std::string name = fmt::format("{}{}", recipe.gpu_device_prefix, gpus[i].minor);
    const bool chosen = std::find(selected.begin(), selected.end(), i) != selected.end();
    if (!chosen) {
      plan.hidden_device_nodes.push_back("/dev/" + name);
    }
  }
  for (std::size_t i : selected) {
    const fs::path node = under_root(host, "dev/" + recipe.gpu_device_prefix + std::to_string(gpus[i].minor));
    if (!is_non_directory(node)) {
      return external_error(
          "--gpus: GPU {} ({}) has no device node {}; create it as root with `nvidia-modprobe "
          "-c={}` (or run nvidia-smi once as root)",
          i, gpus[i].uuid.empty() ? gpus[i].bus_id : gpus[i].uuid, node.string(), gpus[i].minor);
    }
    plan.device_nodes.push_back(node.string());
  }
  // 3. The files: libraries from the ld.so cache, programs, config files, sockets.
  LS_TRY_ASSIGN(plan.binds, plan_libraries(host, recipe, plan.driver_version));
  for (GpuBind& b : plan_binaries(host, recipe)) {
    plan.binds.push_back(std::move(b));
  }
  for (GpuBind& b : plan_files(host, recipe)) {
    plan.binds.push_back(std::move(b));
  }
  // 4. The environment.
  plan.env.emplace_back("NVIDIA_VISIBLE_DEVICES", visible);
  plan.env.emplace_back("LD_LIBRARY_PATH", std::string(k_libs_dir));
  log::debug("--gpus {}: driver {}, {} of {} GPUs, {} binds, {} device nodes", visible, plan.driver_version,
             selected.size(), gpus.size(), plan.binds.size(), plan.device_nodes.size());
  return plan;
}

std::string effective_gpu_selection(const std::optional<std::string>& flag_value, const char* host_env) {
  if (flag_value) {
    return *flag_value;
  }
  if (host_env != nullptr && *host_env != '\0') {
    return host_env;
  }
  return "all";
}

GpuHost gpu_host_from_env() {
  GpuHost host;
  if (const char* root = std::getenv("LOCKSTEP_GPU_HOST_ROOT"); root != nullptr && *root != '\0') {
    std::error_code ec;
    host.root = fs::absolute(root, ec);
    if (ec) {
      host.root = root;
    }
  }
  return host;
}

void merge_gpu_env(const GpuPlan& plan, std::vector<std::string>& environment) {
  for (const auto& [name, value] : plan.env) {
    const std::string prefix = name + "=";
    auto it = std::find_if(environment.begin(), environment.end(),
                           [&prefix](const std::string& kv) { return kv.starts_with(prefix); });
    if (name == "LD_LIBRARY_PATH" && it != environment.end() && it->size() > prefix.size()) {
      *it += ":" + value;
    } else if (it != environment.end()) {
      *it = prefix + value;
    } else {
      environment.push_back(prefix + value);
    }
  }
}

} // namespace lockstep::runner
