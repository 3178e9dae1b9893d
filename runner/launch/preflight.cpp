// Preflight checks: the image probe (digest, labels), the pure evaluation of one node's checks,
// the JSON line a node reports, and the table `lockstep run` and `lockstep preflight` print.
//
// Why the MPI rules: in the hybrid model the host's mpirun (or Slurm's PMIx plugin) talks to the
// MPI and PMIx libraries inside the image. ABI compatibility (an application built against Open
// MPI 4.x runs with 5.0's libmpi.so.40) is not the same as mixing versions in one job, which Open
// MPI does not support: keep launcher and libraries at the same version. Apptainer's hybrid model
// asks the same (the host's MPI framework and version built into the container, and the same PMIx
// version). Hence the same implementation and major.minor are required and a different patch
// release is only a warning. For PMIx a different major fails (Slurm builds one plugin per PMIx
// major, e.g. pmix_v4) and a different minor warns.
#include "runner/launch/preflight.hpp"

#include "envspec/settings/settings.hpp"
#include "envspec/stack/recipes.hpp"
#include "runner/runtime/sif_mount.hpp"
#include "support/base/json.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/oci/image_source.hpp"
#include "support/oci/sif.hpp"
#include "support/registry/pull.hpp"
#include "support/store/blob_store.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <utility>

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;
using Status = Check::Status;

/// The checks in report and table order.
constexpr std::array<std::string_view, 7> k_check_order = {"image", "driver", "gpus", "mpi",
                                                           "pmix",  "userns", "space"};
/// Free space needed beyond the unpacked size: 10% plus 64 MiB, for the unpack's temporary
/// directory and file system overhead.
constexpr std::uint64_t k_space_margin_fixed = 64ULL << 20;
constexpr std::uint64_t k_space_margin_divisor = 10;

constexpr std::size_t k_max_report_line = std::size_t{64} * 1024;
constexpr int k_max_report_depth = 4;
constexpr std::size_t k_max_checks = 32;
constexpr std::size_t k_max_detail = 1024;
constexpr std::size_t k_max_name = 255;
constexpr std::size_t k_max_fact = 64;
constexpr int k_max_gpus = 1 << 20;

// ---------------------------------------------------------------------------------------------
// Versions

// The numeric components of a dotted version: each component's leading digits ("2rc2" -> 2).
std::vector<std::uint64_t> version_numbers(std::string_view v) {
  std::vector<std::uint64_t> out;
  std::size_t pos = 0;
  while (pos <= v.size() && out.size() < 16) {
    const std::size_t dot = std::min(v.find('.', pos), v.size());
    const std::string_view part = v.substr(pos, dot - pos);
    std::uint64_t n = 0;
    const std::string_view digits =
        part.substr(0, std::min(part.find_first_not_of("0123456789"), part.size()));
    std::from_chars(digits.data(), digits.data() + std::min<std::size_t>(digits.size(), 18), n);
    out.push_back(n);
    pos = dot + 1;
  }
  return out;
}

// Whether `v` starts with a digit, as every version compared here must.
bool is_version(std::string_view v) {
  return !v.empty() && v.front() >= '0' && v.front() <= '9';
}

// The first `count` components of `v` ("4.1.4", 2 -> "4.1").
std::string version_prefix(std::string_view v, std::size_t count) {
  const std::vector<std::uint64_t> n = version_numbers(v);
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    out += (i == 0 ? "" : ".") + std::to_string(i < n.size() ? n[i] : 0);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Text

// `s` with control characters (C0, DEL, C1) replaced by '?': details end up in terminals and in
// the JSON lines other nodes parse strictly.
std::string clean_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += '?';
    } else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      out += '?';
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Whether clean_text(s) == s.
bool is_clean_text(std::string_view s) {
  return clean_text(s) == s;
}

std::string human_bytes(std::uint64_t n) {
  constexpr std::array<std::string_view, 4> units = {"TiB", "GiB", "MiB", "KiB"};
  for (std::size_t i = 0; i < units.size(); ++i) {
    const std::uint64_t unit = 1ULL << (10 * (units.size() - i));
    if (n >= unit) {
      return fmt::format("{:.1f} {}", static_cast<double>(n) / static_cast<double>(unit), units[i]);
    }
  }
  return fmt::format("{} bytes", n);
}

std::string mpi_name(std::string_view impl) {
  if (impl == "openmpi") {
    return "Open MPI";
  }
  if (impl == "mpich") {
    return "MPICH";
  }
  return std::string(impl);
}

std::string plural(std::size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// ---------------------------------------------------------------------------------------------
// The image

// The file or directory an IMAGE argument names ("" when the argument is malformed).
std::string image_path_of(std::string_view text) {
  if (text.starts_with("docker://") || text.starts_with("oras://")) {
    return std::string(); // a registry reference: no local path
  }
  for (std::string_view prefix : {"oci:", "oci-archive:", "docker-archive:"}) {
    if (text.starts_with(prefix)) {
      auto ref = oci::ImageRef::parse(text);
      return ref ? ref->path.string() : std::string();
    }
  }
  if (text.starts_with("sif:") || text.starts_with("dir:")) {
    return std::string(text.substr(4));
  }
  return std::string(text);
}

// ---------------------------------------------------------------------------------------------
// The checks, one function each, in report order.

Check check_image(const PreflightRequest& req, const ImageProbe& image, const HostProbe& host) {
  switch (image.state) {
  case ImageProbe::State::missing:
    return {"image", Status::fail, "missing: " + image.path};
  case ImageProbe::State::unreadable:
    return {"image", Status::fail, "can't read the image: " + image.error};
  case ImageProbe::State::present:
    break;
  }
  if (!image.digest) {
    if (!req.image_digest.empty()) {
      return {"image", Status::fail, fmt::format("a directory has no digest, {} expected", req.image_digest)};
    }
    return {"image", Status::ok, "a directory (no digest)"};
  }
  const std::string found = image.digest->str();
  if (!req.image_digest.empty() && found != req.image_digest) {
    return {
        "image", Status::fail,
        fmt::format("{} found, {} expected (copy the same image to every node)", found, req.image_digest)};
  }
  // An image of another platform would run under emulation, or not at all: not in a job.
  if (!image.platform.empty() && !host.platform.empty() && image.platform != host.platform) {
    return {"image", Status::fail,
            fmt::format("{} is a {} image and this node is {}: build the spec with `platforms: [{}, {}]` "
                        "and run the index, or run on {} nodes",
                        found, image.platform, host.platform, host.platform, image.platform, image.platform)};
  }
  return {"image", Status::ok, found};
}

Check check_driver(const PreflightRequest& req, const HostProbe& host) {
  const envspec::ImageFacts& facts = req.facts;
  if (req.gpus_per_node <= 0) {
    return {"driver", Status::skipped, "no GPUs requested"};
  }
  if (facts.cuda_driver_floor.empty()) {
    return {"driver", Status::skipped, "the image records no CUDA driver floor"};
  }
  const std::string cuda = facts.cuda.version.empty() ? "CUDA" : "CUDA " + facts.cuda.version;
  if (!host.gpu_error.empty()) {
    return {"driver", Status::fail, host.gpu_error};
  }
  if (host.driver_version.empty()) {
    return {
        "driver", Status::fail,
        fmt::format("no NVIDIA driver (the image's {} needs {} or newer)", cuda, facts.cuda_driver_floor)};
  }
  if (!is_version(host.driver_version)) {
    return {"driver", Status::fail,
            fmt::format("the driver version '{}' is not a version; the image's {} needs {} or newer",
                        printable_ascii(host.driver_version, 64), cuda, facts.cuda_driver_floor)};
  }
  if (envspec::compare_dotted(host.driver_version, facts.cuda_driver_floor) < 0) {
    return {"driver", Status::fail,
            fmt::format("driver {} is older than {}, the floor of the image's {} (update the driver or use "
                        "an image built for an older CUDA)",
                        host.driver_version, facts.cuda_driver_floor, cuda)};
  }
  return {
      "driver", Status::ok,
      fmt::format("driver {} (the image's {} needs {})", host.driver_version, cuda, facts.cuda_driver_floor)};
}

Check check_gpus(const PreflightRequest& req, const HostProbe& host) {
  if (req.gpus_per_node <= 0) {
    return {"gpus", Status::skipped, "no GPUs requested"};
  }
  const auto wanted = static_cast<std::size_t>(req.gpus_per_node);
  if (!host.gpu_error.empty()) {
    return {"gpus", Status::fail, host.gpu_error};
  }
  if (host.driver_version.empty()) {
    return {"gpus", Status::fail,
            fmt::format("no NVIDIA driver, {} requested per node", plural(wanted, "GPU"))};
  }
  if (host.gpu_count < wanted) {
    return {"gpus", Status::fail,
            fmt::format("{} on this node, {} requested per node", plural(host.gpu_count, "GPU"), wanted)};
  }
  return {"gpus", Status::ok,
          fmt::format("{}, {} requested per node", plural(host.gpu_count, "GPU"), wanted)};
}

Check check_mpi(const PreflightRequest& req, const HostProbe& host) {
  const envspec::ImageFacts& facts = req.facts;
  if (req.model == "container") {
    return {"mpi", Status::skipped, "the container model uses the image's own mpirun"};
  }
  if (facts.mpi_impl.empty()) {
    return {"mpi", Status::skipped, "the image records no MPI"};
  }
  if (req.launcher == "slurm") {
    return {"mpi", Status::skipped, "srun starts the ranks: the host's mpirun is not used"};
  }
  const std::string image_mpi = fmt::format("{} {}", mpi_name(facts.mpi_impl), facts.mpi.version);
  const bool needed = req.launcher == "mpirun";
  const HostMpi& mpi = host.mpi;
  if (mpi.path.empty()) {
    if (!needed) {
      return {"mpi", Status::skipped, "no mpirun on PATH (the local launcher doesn't need one)"};
    }
    return {
        "mpi", Status::fail,
        fmt::format("no mpirun on PATH: the hybrid model starts the ranks with the host's {} (install it, "
                    "or use --launcher slurm or --mpi-model container)",
                    image_mpi)};
  }
  if (!mpi.error.empty() || mpi.impl.empty()) {
    return {"mpi", needed ? Status::fail : Status::warn,
            fmt::format("can't tell which MPI {} is: {}", mpi.path, mpi.error)};
  }
  const std::string host_mpi = mpi.impl == "unknown" ? fmt::format("'{}'", mpi.banner)
                                                     : fmt::format("{} {}", mpi_name(mpi.impl), mpi.version);
  const std::string both = fmt::format("host {}, image {}", host_mpi, image_mpi);
  if (mpi.impl != facts.mpi_impl) {
    return {"mpi", Status::fail,
            both + ": the hybrid model needs the host's MPI in the image (rebuild the image with the host's "
                   "MPI or use --mpi-model container)"};
  }
  if (!is_version(mpi.version) || !is_version(facts.mpi.version)) {
    return {"mpi", Status::warn, both + ": can't compare these versions"};
  }
  if (version_prefix(mpi.version, 2) != version_prefix(facts.mpi.version, 2)) {
    return {"mpi", Status::fail,
            both + ": the hybrid model needs the same major.minor (rebuild the image with the host's MPI or "
                   "use --mpi-model container)"};
  }
  if (envspec::compare_dotted(mpi.version, facts.mpi.version) != 0) {
    return {"mpi", Status::warn,
            both + ": the patch releases differ (the same major.minor should work; the same version is "
                   "safest)"};
  }
  return {"mpi", Status::ok, fmt::format("{} on host and image", image_mpi)};
}

Check check_pmix(const PreflightRequest& req, const HostProbe& host) {
  const std::string& image_pmix = req.facts.pmix.version;
  if (req.model == "container") {
    return {"pmix", Status::skipped, "the container model uses the image's own PMIx"};
  }
  if (image_pmix.empty()) {
    return {"pmix", Status::skipped, "the image records no PMIx"};
  }
  if (host.pmix.empty()) {
    if (req.launcher == "slurm") {
      return {"pmix", Status::warn,
              fmt::format("no libpmix.so.2 on this host: srun --mpi=pmix needs Slurm's PMIx plugin, built "
                          "with PMIx {}.x like the image's {}",
                          version_prefix(image_pmix, 1), image_pmix)};
    }
    return {"pmix", Status::skipped,
            "no libpmix.so.2 on this host (a PMIx built into mpirun is not checked)"};
  }
  const std::string both = fmt::format("host PMIx {}, image PMIx {}", host.pmix, image_pmix);
  if (!is_version(host.pmix) || !is_version(image_pmix)) {
    return {"pmix", Status::warn, both + ": can't compare these versions"};
  }
  if (version_prefix(host.pmix, 1) != version_prefix(image_pmix, 1)) {
    return {"pmix", Status::fail,
            fmt::format("{}: the major versions differ (build the image with PMIx {}.x or use --mpi-model "
                        "container)",
                        both, version_prefix(host.pmix, 1))};
  }
  if (version_prefix(host.pmix, 2) != version_prefix(image_pmix, 2)) {
    return {"pmix", Status::warn,
            both + ": the minor versions differ (the same major should work; the same version is safest)"};
  }
  if (host.pmix == image_pmix) {
    return {"pmix", Status::ok, fmt::format("PMIx {} on host and image", image_pmix)};
  }
  return {"pmix", Status::ok, both};
}

Check check_userns(const HostProbe& host) {
  switch (host.userns.state) {
  case UsernsState::not_needed:
    return {"userns", Status::ok, "not needed (root)"};
  case UsernsState::allowed:
    return {"userns", Status::ok, "allowed"};
  case UsernsState::disabled:
  case UsernsState::denied:
    break;
  }
  return {"userns", Status::fail, host.userns.detail};
}

Check check_space(const PreflightRequest& req, const HostProbe& host) {
  if (req.unpack_bytes == 0) {
    return {"space", Status::ok, "nothing to unpack"};
  }
  if (!host.space.error.empty()) {
    return {"space", Status::fail, host.space.error};
  }
  const std::uint64_t margin = req.unpack_bytes / k_space_margin_divisor + k_space_margin_fixed;
  const std::uint64_t needed =
      req.unpack_bytes > UINT64_MAX - margin ? UINT64_MAX : req.unpack_bytes + margin;
  const std::string text = fmt::format("{} free in {}, {} needed", human_bytes(host.space.free_bytes),
                                       host.space.path.string(), human_bytes(needed));
  if (host.space.free_bytes < needed) {
    return {"space", Status::fail, text + " (free some space or point LOCKSTEP_CACHE at a larger disk)"};
  }
  return {"space", Status::ok, text};
}

// ---------------------------------------------------------------------------------------------
// JSON

Error bad_report(const std::string& why) {
  return invalid_input("malformed preflight report: {}", why);
}

// Fails unless `object` has exactly the keys in `keys`.
Result<void> exact_keys(const json& object, std::initializer_list<std::string_view> keys,
                        const std::string& where) {
  if (!object.is_object()) {
    return bad_report(where + " is not an object");
  }
  for (const auto& [key, value] : object.items()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return bad_report(fmt::format("unknown key '{}' in {}", clean_text(key.substr(0, 64)), where));
    }
  }
  for (std::string_view key : keys) {
    if (!object.contains(key)) {
      return bad_report(fmt::format("{} has no '{}'", where, key));
    }
  }
  return {};
}

// A string member: at most `max` bytes of clean text, non-empty unless `may_be_empty`.
Result<std::string> text_member(const json& object, std::string_view key, std::size_t max, bool may_be_empty,
                                const std::string& where) {
  const json& v = object.at(key);
  if (!v.is_string()) {
    return bad_report(fmt::format("{}.{} is not a string", where, key));
  }
  std::string s = v.get<std::string>();
  if (s.size() > max) {
    return bad_report(fmt::format("{}.{} is longer than {} bytes", where, key, max));
  }
  if (s.empty() && !may_be_empty) {
    return bad_report(fmt::format("{}.{} is empty", where, key));
  }
  if (!is_clean_text(s)) {
    return bad_report(fmt::format("{}.{} contains control characters", where, key));
  }
  return s;
}

Result<Status> parse_status(std::string_view name) {
  for (Status s : {Status::ok, Status::warn, Status::fail, Status::skipped}) {
    if (status_name(s) == name) {
      return s;
    }
  }
  return bad_report(fmt::format("unknown check status '{}'", clean_text(name.substr(0, 32))));
}

bool valid_check_name(std::string_view name) {
  return !name.empty() && name.size() <= 32 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

bool valid_node_name(std::string_view name) {
  return !name.empty() && name.size() <= k_max_name &&
         std::all_of(name.begin(), name.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// ---------------------------------------------------------------------------------------------
// The table

// Natural order: digit runs compare as numbers ("n2" < "n10"); ties broken bytewise.
bool natural_less(std::string_view a, std::string_view b) {
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      std::size_t i_end = i;
      std::size_t j_end = j;
      while (i_end < a.size() && is_digit(a[i_end])) {
        ++i_end;
      }
      while (j_end < b.size() && is_digit(b[j_end])) {
        ++j_end;
      }
      std::string_view na = a.substr(i, i_end - i);
      std::string_view nb = b.substr(j, j_end - j);
      na.remove_prefix(std::min(na.find_first_not_of('0'), na.size()));
      nb.remove_prefix(std::min(nb.find_first_not_of('0'), nb.size()));
      if (na.size() != nb.size()) {
        return na.size() < nb.size();
      }
      if (na != nb) {
        return na < nb;
      }
      i = i_end;
      j = j_end;
    } else {
      if (a[i] != b[j]) {
        return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      }
      ++i;
      ++j;
    }
  }
  if (a.size() - i != b.size() - j) {
    return a.size() - i < b.size() - j;
  }
  return a < b;
}

std::string_view cell_of(const Check* check) {
  if (check == nullptr) {
    return "-";
  }
  switch (check->status) {
  case Status::ok:
    return "ok";
  case Status::warn:
    return "WARN";
  case Status::fail:
    return "FAIL";
  case Status::skipped:
    return "-";
  }
  return "-";
}

// Appends `cells` as one row: each padded to its column's width, two spaces apart, no trailing blanks.
void add_row(std::string& out, const std::vector<std::string>& cells,
             const std::vector<std::size_t>& widths) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    line += i + 1 < cells.size() ? fmt::format("{:<{}}  ", cells[i], widths[i]) : cells[i];
  }
  line.erase(line.find_last_not_of(' ') + 1);
  out += line + '\n';
}

} // namespace

std::string_view status_name(Check::Status status) {
  switch (status) {
  case Status::ok:
    return "ok";
  case Status::warn:
    return "warn";
  case Status::fail:
    return "fail";
  case Status::skipped:
    return "skipped";
  }
  return "fail";
}

bool NodeReport::ok() const {
  return std::none_of(checks.begin(), checks.end(), [](const Check& c) { return c.status == Status::fail; });
}

const Check* NodeReport::find(std::string_view name) const {
  auto it = std::find_if(checks.begin(), checks.end(), [&](const Check& c) { return c.name == name; });
  return it == checks.end() ? nullptr : &*it;
}

namespace {

// An image's identity (image_digest) and the platform this node would run it as.
struct ImageIdentity {
  std::optional<Digest> digest;
  std::string platform;
};

Result<ImageIdentity> image_identity(const ImageArg& image) {
  if (image.kind == ImageArg::Kind::oci) {
    LS_TRY_ASSIGN(std::unique_ptr<oci::ImageSource> source,
                  registry::open_image(image.ref, settings::store_root()));
    LS_TRY_ASSIGN(oci::OpenedImage opened, source->resolve(oci::SelectOptions{}));
    return ImageIdentity{opened.index ? opened.index->digest : opened.manifest_digest, opened.platform.str()};
  }
  LS_TRY_ASSIGN(std::optional<Digest> digest, image_digest(image));
  ImageIdentity id{digest, ""};
  if (image.kind == ImageArg::Kind::sif && !image.ref.is_remote()) {
    if (Result<sif::Image> header = sif::read_image(image.path); header && !header->arch.empty()) {
      id.platform = "linux/" + header->arch;
    }
  }
  return id;
}

} // namespace

Result<std::optional<Digest>> image_digest(const ImageArg& image) {
  switch (image.kind) {
  case ImageArg::Kind::oci: {
    LS_TRY_ASSIGN(ImageIdentity id, image_identity(image));
    return id.digest;
  }
  case ImageArg::Kind::sif: {
    // sif_content_key remembers the digest by the file's identity; a store that can't be opened
    // (a read-only home) or a record that is not a digest only costs hashing the file here.
    Result<std::string> key = sif_content_key(image.path, settings::store_root());
    if (key) {
      if (Result<Digest> d = Digest::parse("sha256:" + *key); d) {
        return std::optional<Digest>(*d);
      }
      log::debug("preflight: the remembered digest of {} is not a digest; hashing the file",
                 image.path.string());
    } else {
      log::debug("preflight: {}; hashing the file", key.error().message);
    }
    LS_TRY_ASSIGN(Digest digest, sha256_of_file(image.path));
    return std::optional<Digest>(digest);
  }
  case ImageArg::Kind::directory:
    return std::optional<Digest>();
  }
  return internal_error("unknown image kind");
}

ImageProbe probe_image(std::string_view text) {
  ImageProbe probe;
  const std::string path = image_path_of(text);
  probe.path = clean_text(path);
  if (!path.empty()) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
      probe.state = ImageProbe::State::missing;
      return probe;
    }
  }
  Result<ImageArg> arg = parse_image_arg(text);
  if (!arg) {
    probe.state = ImageProbe::State::unreadable;
    probe.error = arg.error().message;
    return probe;
  }
  probe.kind = arg->kind;
  Result<ImageIdentity> id = image_identity(*arg);
  if (!id) {
    probe.state = ImageProbe::State::unreadable;
    probe.error = id.error().message;
    return probe;
  }
  probe.state = ImageProbe::State::present;
  probe.digest = id->digest;
  probe.platform = id->platform;
  return probe;
}

namespace {

// What the image's manifest and config say, read once for image_facts() and describe_image().
struct ConfigInfo {
  std::map<std::string, std::string> labels;
  std::string lock_digest;
  std::optional<Digest> manifest_digest; // OCI only
  std::uint64_t layer_bytes = 0;         // OCI only: the compressed layers
};

Result<ConfigInfo> read_config_info(const ImageArg& image) {
  ConfigInfo info;
  switch (image.kind) {
  case ImageArg::Kind::oci: {
    LS_TRY_ASSIGN(std::unique_ptr<oci::ImageSource> source,
                  registry::open_image(image.ref, settings::store_root()));
    LS_TRY_ASSIGN(oci::OpenedImage opened, source->resolve(oci::SelectOptions{}));
    const json& config = opened.config;
    LS_TRY_ASSIGN(
        info.labels,
        oci::config_labels(config.is_object() && config.contains("config") ? config["config"] : json(),
                           image.ref.str()));
    if (auto it = opened.manifest.annotations.find(std::string(k_lock_digest_key));
        it != opened.manifest.annotations.end()) {
      info.lock_digest = it->second;
    }
    info.manifest_digest = opened.manifest_digest;
    for (const auto& layer : opened.manifest.layers) {
      info.layer_bytes += static_cast<std::uint64_t>(std::max<std::int64_t>(0, layer.size));
    }
    break;
  }
  case ImageArg::Kind::sif: {
    LS_TRY_ASSIGN(const std::string bytes, read_sif_oci_config(image.path));
    if (!bytes.empty()) {
      LS_TRY_ASSIGN(const json config,
                    parse_json(bytes, image.path.string() + ": the oci-config.json object"));
      LS_TRY_ASSIGN(info.labels, oci::config_labels(config, image.path.string()));
    }
    if (auto it = info.labels.find(std::string(k_lock_digest_key)); it != info.labels.end()) {
      info.lock_digest = it->second;
    }
    break;
  }
  case ImageArg::Kind::directory:
    break;
  }
  return info;
}

} // namespace

Result<envspec::ImageFacts> image_facts(const ImageArg& image) {
  LS_TRY_ASSIGN(ConfigInfo info, read_config_info(image));
  return envspec::facts_from_labels(info.labels);
}

Result<ImageDescription> describe_image(const ImageArg& image) {
  LS_TRY_ASSIGN(ConfigInfo info, read_config_info(image));
  ImageDescription d;
  LS_TRY_ASSIGN(d.facts, envspec::facts_from_labels(info.labels));
  d.lock_digest = std::move(info.lock_digest);
  if (auto cc = info.labels.find("dev.lockstep.gpu.min-cc"); cc != info.labels.end()) {
    static const std::regex cc_re("[0-9]{1,3}\\.[0-9]{1,3}");
    if (!std::regex_match(cc->second, cc_re)) {
      return invalid_input("label dev.lockstep.gpu.min-cc: '{}' is not a compute capability (X.Y)",
                           clean_text(cc->second));
    }
    d.gpu_min_cc = cc->second;
  }
  if (image.kind == ImageArg::Kind::sif) {
    LS_TRY_ASSIGN(d.digest, image_digest(image));
  } else {
    d.digest = info.manifest_digest;
  }
  d.unpack_bytes = info.layer_bytes * 3;
  return d;
}

NodeReport evaluate_preflight(const PreflightRequest& request, const HostProbe& host,
                              const ImageProbe& image) {
  NodeReport report;
  report.node = host.hostname.empty() ? "(unknown)" : clean_text(host.hostname);
  report.checks = {
      check_image(request, image, host), check_driver(request, host), check_gpus(request, host),
      check_mpi(request, host),          check_pmix(request, host),   check_userns(host),
      check_space(request, host),
  };
  for (Check& c : report.checks) {
    c.detail = clean_text(c.detail);
  }
  report.host =
      HostFacts{host.mpi.impl,       host.mpi.version,
                host.pmix,           host.ucx,
                host.driver_version, static_cast<int>(std::min<std::size_t>(host.gpu_count, k_max_gpus))};
  return report;
}

Result<NodeReport> preflight_node(const PreflightRequest& request) {
  return preflight_node(request, probe_image(request.image));
}

Result<NodeReport> preflight_node(const PreflightRequest& request, const ImageProbe& image) {
  if (request.model != "hybrid" && request.model != "container") {
    return invalid_input("unknown MPI model '{}': use hybrid or container", request.model);
  }
  if (request.launcher != "local" && request.launcher != "mpirun" && request.launcher != "slurm") {
    return invalid_input("unknown launcher '{}': use local, mpirun or slurm", request.launcher);
  }
  if (!request.image_digest.empty()) {
    LS_TRY(Digest::parse(request.image_digest));
  }
  if (request.gpus_per_node < 0) {
    return invalid_input("the GPUs per node can't be negative ({})", request.gpus_per_node);
  }
  if (request.prepare_store) {
    if (Result<BlobStore> store = BlobStore::open(settings::store_root()); !store) {
      log::warn("{}", store.error().message); // staging into it fails later, saying why
    }
  }
  return evaluate_preflight(request, probe_host(), image);
}

nlohmann::ordered_json to_json(const NodeReport& report) {
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const Check& c : report.checks) {
    checks.push_back({{"name", c.name}, {"status", status_name(c.status)}, {"detail", c.detail}});
  }
  const HostFacts& h = report.host;
  return {
      {"preflight", 1},
      {"node", report.node},
      {"ok", report.ok()},
      {"checks", std::move(checks)},
      {"host",
       {{"mpi_impl", h.mpi_impl},
        {"mpi_version", h.mpi_version},
        {"pmix", h.pmix},
        {"ucx", h.ucx},
        {"driver", h.driver},
        {"gpus", h.gpus}}},
  };
}

Result<NodeReport> node_report_from_json(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
    line.remove_suffix(1);
  }
  if (line.size() > k_max_report_line) {
    return bad_report(fmt::format("longer than {} bytes", k_max_report_line));
  }
  if (find_json_depth_excess(line, k_max_report_depth)) {
    return bad_report("nested too deeply");
  }
  Result<json> parsed = parse_json(line, "report", k_max_report_depth);
  if (!parsed) {
    return bad_report("not valid JSON");
  }
  const json j = std::move(*parsed);
  LS_TRY(exact_keys(j, {"preflight", "node", "ok", "checks", "host"}, "report"));
  if (!j["preflight"].is_number_integer() || j["preflight"].get<std::int64_t>() != 1) {
    return bad_report("'preflight' is not 1 (a lockstep of another version on that node?)");
  }
  NodeReport report;
  LS_TRY_ASSIGN(report.node, text_member(j, "node", k_max_name, false, "report"));
  if (!valid_node_name(report.node)) {
    return bad_report(fmt::format("node name '{}' contains spaces", report.node));
  }
  const json& checks = j["checks"];
  if (!checks.is_array() || checks.size() > k_max_checks) {
    return bad_report(fmt::format("'checks' is not an array of at most {} checks", k_max_checks));
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const std::string where = fmt::format("checks[{}]", i);
    LS_TRY(exact_keys(checks[i], {"name", "status", "detail"}, where));
    Check c;
    LS_TRY_ASSIGN(c.name, text_member(checks[i], "name", 32, false, where));
    if (!valid_check_name(c.name)) {
      return bad_report(fmt::format("{}.name '{}' is not a check name", where, c.name));
    }
    if (!names.insert(c.name).second) {
      return bad_report(fmt::format("check '{}' appears twice", c.name));
    }
    LS_TRY_ASSIGN(const std::string status, text_member(checks[i], "status", 16, false, where));
    LS_TRY_ASSIGN(c.status, parse_status(status));
    LS_TRY_ASSIGN(c.detail, text_member(checks[i], "detail", k_max_detail, true, where));
    report.checks.push_back(std::move(c));
  }
  if (!j["ok"].is_boolean() || j["ok"].get<bool>() != report.ok()) {
    return bad_report("'ok' does not agree with the checks");
  }
  const json& host = j["host"];
  LS_TRY(exact_keys(host, {"mpi_impl", "mpi_version", "pmix", "ucx", "driver", "gpus"}, "host"));
  HostFacts& h = report.host;
  LS_TRY_ASSIGN(h.mpi_impl, text_member(host, "mpi_impl", k_max_fact, true, "host"));
  if (!h.mpi_impl.empty() && h.mpi_impl != "openmpi" && h.mpi_impl != "mpich" && h.mpi_impl != "unknown") {
    return bad_report(fmt::format("host.mpi_impl '{}' is not openmpi, mpich or unknown", h.mpi_impl));
  }
  LS_TRY_ASSIGN(h.mpi_version, text_member(host, "mpi_version", k_max_fact, true, "host"));
  LS_TRY_ASSIGN(h.pmix, text_member(host, "pmix", k_max_fact, true, "host"));
  LS_TRY_ASSIGN(h.ucx, text_member(host, "ucx", k_max_fact, true, "host"));
  LS_TRY_ASSIGN(h.driver, text_member(host, "driver", k_max_fact, true, "host"));
  if (!host["gpus"].is_number_integer() || host["gpus"].get<std::int64_t>() < 0 ||
      host["gpus"].get<std::int64_t>() > k_max_gpus) {
    return bad_report(fmt::format("host.gpus is not a count from 0 to {}", k_max_gpus));
  }
  h.gpus = host["gpus"].get<int>();
  return report;
}

std::string render_preflight_table(const std::vector<NodeReport>& reports) {
  std::vector<const NodeReport*> sorted;
  sorted.reserve(reports.size());
  for (const NodeReport& r : reports) {
    sorted.push_back(&r);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const NodeReport* a, const NodeReport* b) { return natural_less(a->node, b->node); });
  // Columns: the known checks in their order, then any others in order of first appearance.
  std::vector<std::string> columns;
  for (std::string_view name : k_check_order) {
    if (std::any_of(sorted.begin(), sorted.end(),
                    [&](const NodeReport* r) { return r->find(name) != nullptr; })) {
      columns.emplace_back(name);
    }
  }
  for (const NodeReport* r : sorted) {
    for (const Check& c : r->checks) {
      if (std::find(columns.begin(), columns.end(), c.name) == columns.end()) {
        columns.push_back(c.name);
      }
    }
  }
  std::vector<std::vector<std::string>> rows;
  rows.emplace_back(std::vector<std::string>{"NODE"});
  rows.back().insert(rows.back().end(), columns.begin(), columns.end());
  for (const NodeReport* r : sorted) {
    std::vector<std::string> row{r->node};
    for (const std::string& name : columns) {
      row.emplace_back(cell_of(r->find(name)));
    }
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> widths(columns.size() + 1, 0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    add_row(out, row, widths);
  }
  std::string notes;
  for (const NodeReport* r : sorted) {
    for (const std::string& name : columns) {
      const Check* c = r->find(name);
      if (c != nullptr && (c->status == Status::warn || c->status == Status::fail)) {
        notes += fmt::format("{}  {}: {}\n", r->node, c->name, c->detail);
      }
    }
  }
  if (!notes.empty()) {
    out += '\n' + notes;
  }
  return out;
}

} // namespace lockstep::runner
