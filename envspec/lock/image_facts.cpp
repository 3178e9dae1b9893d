// The image facts: derived from a lock's packages, written as labels and as /.lockstep/facts.json,
// read back from labels; and the CUDA driver table they take the driver floor from.
#include "envspec/lock/image_facts.hpp"

#include "envspec/yaml/node.hpp"
#include "envspec/yaml/recipe_reader.hpp"
#include "support/base/text.hpp"
#include "support/debian/debian_version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>
#include <tuple>

namespace lockstep::envspec {

namespace {

constexpr std::string_view k_label_mpi_impl = "dev.lockstep.mpi.impl";
constexpr std::string_view k_label_mpi_version = "dev.lockstep.mpi.version";
constexpr std::string_view k_label_pmix_version = "dev.lockstep.pmix.version";
constexpr std::string_view k_label_ucx_version = "dev.lockstep.ucx.version";
constexpr std::string_view k_label_libfabric_version = "dev.lockstep.libfabric.version";
constexpr std::string_view k_label_cuda_version = "dev.lockstep.cuda.version";
constexpr std::string_view k_label_cuda_driver_floor = "dev.lockstep.cuda.driver-floor";
constexpr std::string_view k_recipe_kind = "cuda-drivers";
constexpr std::size_t k_max_version = 128; // longer than any upstream version in Debian

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// "1.2.3" with between `min_parts` and `max_parts` dot-separated runs of at most 6 digits.
bool dotted_number(std::string_view s, std::size_t min_parts, std::size_t max_parts) {
  std::size_t parts = 0;
  while (true) {
    const std::size_t dot = s.find('.');
    const std::string_view part = s.substr(0, dot);
    if (!all_digits(part) || part.size() > 6) {
      return false;
    }
    ++parts;
    if (dot == std::string_view::npos) {
      break;
    }
    s.remove_prefix(dot + 1);
  }
  return parts >= min_parts && parts <= max_parts;
}

// An upstream version as upstream_version() produces it: a digit first, then what Debian allows.
bool valid_upstream(std::string_view s) {
  if (s.empty() || s.size() > k_max_version || !is_digit(s.front())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           std::string_view(".+~:-").find(c) != std::string_view::npos;
  });
}

// `name` is `prefix` followed by a shared-library version ("libopenmpi3", "libopenmpi40").
bool is_runtime_library(std::string_view name, std::string_view prefix) {
  return name.starts_with(prefix) && all_digits(name.substr(prefix.size()));
}

// "cuda-cudart-12-1" -> {12, 1} for the given package stem ("cuda-cudart-").
std::optional<std::pair<int, int>> cuda_package_version(std::string_view name, std::string_view stem) {
  if (!name.starts_with(stem)) {
    return std::nullopt;
  }
  const std::string_view rest = name.substr(stem.size());
  const std::size_t dash = rest.find('-');
  if (dash == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view major = rest.substr(0, dash);
  const std::string_view minor = rest.substr(dash + 1);
  if (!all_digits(major) || !all_digits(minor) || major.size() > 4 || minor.size() > 4) {
    return std::nullopt;
  }
  std::pair<int, int> v;
  std::from_chars(major.data(), major.data() + major.size(), v.first);
  std::from_chars(minor.data(), minor.data() + minor.size(), v.second);
  return v;
}

// A conda CUDA package's X.Y: cuda-version "12.1", cudatoolkit "11.8.0", cuda-cudart "12.1.105".
std::optional<std::pair<int, int>> conda_cuda_version(const LockedArtifact& a) {
  if (a.name != "cuda-version" && a.name != "cudatoolkit" && a.name != "cuda-cudart") {
    return std::nullopt;
  }
  const std::string_view v = a.version;
  const std::size_t dot = v.find('.');
  if (dot == std::string_view::npos) {
    return std::nullopt;
  }
  const std::size_t end = v.find_first_not_of("0123456789", dot + 1);
  const std::string_view major = v.substr(0, dot);
  const std::string_view minor = v.substr(dot + 1, end == std::string_view::npos ? end : end - dot - 1);
  if (!all_digits(major) || !all_digits(minor) || major.size() > 4 || minor.size() > 4) {
    return std::nullopt;
  }
  std::pair<int, int> out;
  std::from_chars(major.data(), major.data() + major.size(), out.first);
  std::from_chars(minor.data(), minor.data() + minor.size(), out.second);
  return out;
}

// The best locked package for one component: the lowest rank wins, then the highest version, then
// the first in the lock's order (which is sorted), so the choice never depends on input order.
struct Pick {
  int rank = 0;
  DebianVersion version;
  const LockedArtifact* artifact = nullptr;
};

void consider(std::optional<Pick>& best, int rank, const LockedArtifact& a) {
  auto version = DebianVersion::parse(a.version);
  if (!version) {
    return; // not a Debian version: the build refuses the package when it reads it
  }
  if (!best || rank < best->rank || (rank == best->rank && *version > best->version)) {
    best = Pick{rank, std::move(*version), &a};
  }
}

FactSource source_of(const std::optional<Pick>& pick) {
  if (!pick) {
    return {};
  }
  return FactSource{upstream_version(pick->artifact->version),
                    fmt::format("{} {}", pick->artifact->name, pick->artifact->version)};
}

// ---------------------------------------------------------------------------------------------
// The driver table (recipes/cuda/drivers.yaml)

bool valid_release_name(std::string_view s) {
  return s == "GA" || s == "RC" || (s.starts_with("Update ") && all_digits(s.substr(7)) && s.size() <= 10);
}

} // namespace

std::string CudaDriverTable::floor_for(std::string_view major_minor) const {
  for (const CudaDriverRow& row : rows) {
    if (row.release == "GA" && row.cuda.size() > major_minor.size() && row.cuda.starts_with(major_minor) &&
        row.cuda[major_minor.size()] == '.') {
      return row.linux_driver;
    }
  }
  return {};
}

Result<CudaDriverTable> parse_cuda_driver_table(std::string_view text, const std::filesystem::path& origin) {
  Diagnostics diags;
  diags.set_source(origin, std::string(text));
  std::optional<Node> root = parse_yaml(text, origin, diags);
  if (!root || !diags.empty()) {
    return diags.to_error();
  }
  if (!root->is_map()) {
    diags.error(root->location, "", fmt::format("expected a map, found {}", describe(*root)));
    return diags.to_error();
  }
  RecipeReader r(diags);
  r.check_keys(*root, "", {"recipe", "sources", "toolkit_drivers"});
  if (auto kind = r.scalar(*root, "", "recipe")) {
    r.expect(*kind == k_recipe_kind, *root, "", "recipe",
             fmt::format("expected '{}', found '{}'", k_recipe_kind, *kind));
  }
  const std::set<std::string, std::less<>> sources = r.source_names(*root, false);
  CudaDriverTable table;
  const MapEntry* list = root->find("toolkit_drivers");
  if (list == nullptr || !list->value.is_sequence()) {
    diags.error(list != nullptr ? list->value.location : root->location, "toolkit_drivers",
                "expected a list of {cuda, release, linux, source} rows");
    return diags.to_error();
  }
  std::set<std::string> seen_cuda;
  std::set<std::string> seen_ga;
  for (std::size_t i = 0; i < list->value.items.size(); ++i) {
    const Node& item = list->value.items[i];
    const std::string path = item_path("toolkit_drivers", i);
    if (!r.expect_map(item, path)) {
      continue;
    }
    r.check_keys(item, path, {"cuda", "release", "linux", "source"});
    r.check_source(item, path, sources);
    CudaDriverRow row;
    if (auto cuda = r.scalar(item, path, "cuda")) {
      row.cuda = *cuda;
      r.expect(dotted_number(row.cuda, 3, 3), item, path, "cuda",
               fmt::format("expected a toolkit release X.Y.Z, found '{}'", row.cuda));
      r.expect(seen_cuda.insert(row.cuda).second, item, path, "cuda",
               fmt::format("CUDA {} has a row already", row.cuda));
    }
    if (auto release = r.scalar(item, path, "release")) {
      row.release = *release;
      r.expect(valid_release_name(row.release), item, path, "release",
               fmt::format("expected GA, RC or Update N, found '{}'", row.release));
    }
    if (auto driver = r.scalar(item, path, "linux")) {
      row.linux_driver = *driver;
      r.expect(dotted_number(row.linux_driver, 2, 4), item, path, "linux",
               fmt::format("expected a driver version such as 530.30.02, found '{}'", row.linux_driver));
    }
    if (row.release == "GA" && dotted_number(row.cuda, 3, 3)) {
      const std::string major_minor = row.cuda.substr(0, row.cuda.rfind('.'));
      r.expect(seen_ga.insert(major_minor).second, item, path, "release",
               fmt::format("CUDA {} has a GA row already", major_minor));
    }
    table.rows.push_back(std::move(row));
  }
  if (!diags.empty()) {
    return diags.to_error();
  }
  return table;
}

std::string upstream_version(std::string_view debian_version) {
  auto v = DebianVersion::parse(debian_version);
  if (!v || !valid_upstream(v->upstream)) {
    return {};
  }
  return v->upstream;
}

ImageFacts facts_from_lock(const Lock& lock, const CudaDriverTable& drivers) {
  std::optional<Pick> openmpi;
  std::optional<Pick> mpich;
  std::optional<Pick> pmix;
  std::optional<Pick> ucx;
  std::optional<Pick> libfabric;
  // CUDA: the highest X.Y of the best-ranked kind of package.
  const LockedArtifact* cuda = nullptr;
  std::tuple<int, int, int> cuda_key; // (-rank, major, minor)
  for (const LockedArtifact& a : lock.artifacts) {
    if (a.kind == "conda") {
      // A conda environment's MPI, UCX and CUDA are the image's as much as Debian's are; its CUDA
      // (cuda-version first) needs the same driver.
      if (a.name == "openmpi") {
        consider(openmpi, 0, a);
      } else if (a.name == "mpich") {
        consider(mpich, 0, a);
      } else if (a.name == "ucx") {
        consider(ucx, 0, a);
      } else if (a.name == "libfabric") {
        consider(libfabric, 0, a);
      } else if (auto v = conda_cuda_version(a)) {
        const std::tuple<int, int, int> key{a.name == "cuda-version" ? 0 : -1, v->first, v->second};
        if (cuda == nullptr || key > cuda_key) {
          cuda = &a;
          cuda_key = key;
        }
      }
      continue;
    }
    if (a.kind != "deb") {
      continue;
    }
    if (is_runtime_library(a.name, "libopenmpi")) {
      consider(openmpi, 0, a);
    } else if (a.name == "openmpi-bin") {
      consider(openmpi, 1, a);
    } else if (is_runtime_library(a.name, "libmpich")) {
      consider(mpich, 0, a);
    } else if (a.name == "mpich") {
      consider(mpich, 1, a);
    } else if (is_runtime_library(a.name, "libpmix")) {
      consider(pmix, 0, a);
    } else if (is_runtime_library(a.name, "libucx")) {
      consider(ucx, 0, a);
    } else if (is_runtime_library(a.name, "libfabric")) {
      consider(libfabric, 0, a);
    }
    constexpr std::string_view k_cuda_stems[] = {"cuda-cudart-", "cuda-toolkit-", "cuda-libraries-"};
    for (int rank = 0; rank < 3; ++rank) {
      if (auto v = cuda_package_version(a.name, k_cuda_stems[rank])) {
        const std::tuple<int, int, int> key{-rank, v->first, v->second};
        if (cuda == nullptr || key > cuda_key) {
          cuda = &a;
          cuda_key = key;
        }
      }
    }
  }
  ImageFacts facts;
  // Both MPIs can be installed side by side; Open MPI, Debian's default MPI on most architectures, wins.
  if (openmpi) {
    facts.mpi_impl = "openmpi";
    facts.mpi = source_of(openmpi);
  } else if (mpich) {
    facts.mpi_impl = "mpich";
    facts.mpi = source_of(mpich);
  }
  if (facts.mpi.version.empty()) {
    facts.mpi_impl.clear();
    facts.mpi = {};
  }
  facts.pmix = source_of(pmix);
  facts.ucx = source_of(ucx);
  facts.libfabric = source_of(libfabric);
  for (FactSource* f : {&facts.pmix, &facts.ucx, &facts.libfabric}) {
    if (f->version.empty()) {
      *f = {};
    }
  }
  if (cuda != nullptr) {
    facts.cuda.version = fmt::format("{}.{}", std::get<1>(cuda_key), std::get<2>(cuda_key));
    facts.cuda.from =
        fmt::format("{} {}{}", cuda->name, cuda->version, cuda->kind == "conda" ? " (conda)" : "");
    facts.cuda_driver_floor = drivers.floor_for(facts.cuda.version);
  }
  return facts;
}

std::map<std::string, std::string> facts_labels(const ImageFacts& facts) {
  std::map<std::string, std::string> labels;
  auto put = [&](std::string_view key, const std::string& value) {
    if (!value.empty()) {
      labels.emplace(key, value);
    }
  };
  put(k_label_mpi_impl, facts.mpi_impl);
  put(k_label_mpi_version, facts.mpi.version);
  put(k_label_pmix_version, facts.pmix.version);
  put(k_label_ucx_version, facts.ucx.version);
  put(k_label_libfabric_version, facts.libfabric.version);
  put(k_label_cuda_version, facts.cuda.version);
  put(k_label_cuda_driver_floor, facts.cuda_driver_floor);
  return labels;
}

Result<ImageFacts> facts_from_labels(const std::map<std::string, std::string>& labels) {
  ImageFacts facts;
  std::vector<std::string> problems;
  auto get = [&](std::string_view key, bool (*valid)(std::string_view), std::string_view expected,
                 std::string& out) {
    const auto it = labels.find(std::string(key));
    if (it == labels.end()) {
      return;
    }
    if (!valid(it->second)) {
      problems.push_back(fmt::format("label {}: '{}' is not {}", key, it->second, expected));
      return;
    }
    out = it->second;
  };
  get(
      k_label_mpi_impl, [](std::string_view v) { return v == "openmpi" || v == "mpich"; },
      "an MPI implementation lockstep knows (openmpi or mpich)", facts.mpi_impl);
  get(k_label_mpi_version, valid_upstream, "a version (such as 4.1.4)", facts.mpi.version);
  get(k_label_pmix_version, valid_upstream, "a version (such as 4.2.2)", facts.pmix.version);
  get(k_label_ucx_version, valid_upstream, "a version (such as 1.13.1)", facts.ucx.version);
  get(k_label_libfabric_version, valid_upstream, "a version (such as 1.17.0)", facts.libfabric.version);
  get(
      k_label_cuda_version, [](std::string_view v) { return dotted_number(v, 2, 2); },
      "a CUDA major.minor version (such as 12.1)", facts.cuda.version);
  get(
      k_label_cuda_driver_floor, [](std::string_view v) { return dotted_number(v, 2, 4); },
      "a driver version (such as 530.30.02)", facts.cuda_driver_floor);
  if (problems.empty()) {
    if (facts.mpi_impl.empty() != facts.mpi.version.empty()) {
      problems.push_back(fmt::format("label {} is set without {}",
                                     facts.mpi_impl.empty() ? k_label_mpi_version : k_label_mpi_impl,
                                     facts.mpi_impl.empty() ? k_label_mpi_impl : k_label_mpi_version));
    }
    if (!facts.cuda_driver_floor.empty() && facts.cuda.version.empty()) {
      problems.push_back(
          fmt::format("label {} is set without {}", k_label_cuda_driver_floor, k_label_cuda_version));
    }
  }
  if (!problems.empty()) {
    std::string message;
    for (const std::string& p : problems) {
      message += p + "; ";
    }
    return invalid_input("{}these labels are written by `lockstep build` from the lock: rebuild the image "
                         "with lockstep, or remove the dev.lockstep.* labels it was given by hand",
                         message);
  }
  return facts;
}

nlohmann::ordered_json facts_json(const ImageFacts& facts) {
  using ordered = nlohmann::ordered_json;
  ordered j;
  j["schema"] = 1;
  auto component = [](const FactSource& f) {
    ordered c;
    c["version"] = f.version;
    if (!f.from.empty()) {
      c["from"] = f.from;
    }
    return c;
  };
  if (!facts.mpi.version.empty()) {
    ordered c;
    c["impl"] = facts.mpi_impl;
    c["version"] = facts.mpi.version;
    if (!facts.mpi.from.empty()) {
      c["from"] = facts.mpi.from;
    }
    j["mpi"] = std::move(c);
  }
  if (!facts.pmix.version.empty()) {
    j["pmix"] = component(facts.pmix);
  }
  if (!facts.ucx.version.empty()) {
    j["ucx"] = component(facts.ucx);
  }
  if (!facts.libfabric.version.empty()) {
    j["libfabric"] = component(facts.libfabric);
  }
  if (!facts.cuda.version.empty()) {
    ordered c;
    c["version"] = facts.cuda.version;
    if (!facts.cuda_driver_floor.empty()) {
      c["driver_floor"] = facts.cuda_driver_floor;
    }
    if (!facts.cuda.from.empty()) {
      c["from"] = facts.cuda.from;
    }
    j["cuda"] = std::move(c);
  }
  return j;
}

std::string render_facts_file(const ImageFacts& facts) {
  return facts_json(facts).dump(2, ' ', false, nlohmann::json::error_handler_t::strict) + "\n";
}

} // namespace lockstep::envspec
