// Fuzz target for conda package archives (support/conda/package, link): the first byte picks the
// format (.conda or .tar.bz2) and the prefix, the rest is the archive. Whatever the bytes,
// read_package returns a package or an invalid_input error; a package it returns holds only clean
// paths, symlinks that stay inside, and paths.json entries found in the payload; planning it into a
// prefix and merging the plan again give a value or invalid_input, binary files keep their length,
// every planned path is clean, and the conda-meta record is JSON. A violation aborts.
//
// Built twice (tests/CMakeLists.txt): as a libFuzzer binary (-DLOCKSTEP_FUZZ=ON) and with
// replay_main.cpp as a plain driver that ctest runs over tests/fuzz/corpus/conda_pkg/. The seeds
// are packages cph packed (a platform package with text and binary placeholders, a symlink and an
// empty directory; a noarch: python package with entry points; a legacy package without
// paths.json), each behind its selector byte.
#include "support/base/json.hpp"
#include "support/conda/link.hpp"
#include "support/conda/package.hpp"
#include "tests/fuzz/fuzz_checks.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace {

using namespace lockstep;
using namespace lockstep::conda;
constexpr const char* k_target = "fuzz_conda_pkg";

void check_package(const Package& pkg) {
  std::map<std::string, std::string, std::less<>> symlinks;
  for (const PayloadEntry& e : pkg.payload) {
    if (!is_clean_relative_path(e.path, 4095)) {
      fuzz::violation(k_target, "payload path is not clean: " + e.path);
    }
    if (e.kind == EntryKind::symlink) {
      symlinks.emplace(e.path, e.target);
    }
    if ((e.mode & ~0755U) != 0) {
      fuzz::violation(k_target, "payload mode beyond 0755: " + e.path);
    }
  }
  for (const auto& [path, target] : symlinks) {
    if (!symlink_stays_inside(path, target, symlinks)) {
      fuzz::violation(k_target, "a symlink out of the prefix was accepted: " + path);
    }
  }
  for (const PathsEntry& e : pkg.paths) {
    if (!is_clean_relative_path(e.path, 4095) ||
        (e.type != PathType::directory && pkg.find(e.path) == nullptr)) {
      fuzz::violation(k_target, "paths.json entry unchecked: " + e.path);
    }
  }
}

void check_plan(const Package& pkg, const PackagePlan& plan) {
  for (const PrefixPath& p : plan.paths) {
    if (!is_clean_relative_path(p.path, 8192)) {
      fuzz::violation(k_target, "planned path is not clean: " + p.path);
    }
  }
  for (const PathsEntry& e : pkg.paths) {
    if (e.file_mode != FileMode::binary || e.prefix_placeholder.empty() ||
        pkg.index.noarch == NoArch::python) {
      continue;
    }
    const PayloadEntry* source = pkg.find(e.path);
    for (const PrefixPath& p : plan.paths) {
      if (p.path == e.path && source != nullptr && p.data.size() != source->data.size()) {
        fuzz::violation(k_target, "binary replacement changed the length of " + e.path);
      }
    }
  }
  auto meta = parse_json(plan.conda_meta.data, "conda-meta");
  if (!meta) {
    fuzz::violation(k_target, "conda-meta record is not JSON: " + meta.error().message);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool bz2 = (data[0] & 1U) != 0;
  PackageLimits limits;
  limits.max_total_bytes = 64U << 20;
  limits.max_entries = 20'000;
  auto pkg = read_package(bytes, bz2 ? "fuzz-1.0-0.tar.bz2" : "fuzz-1.0-0.conda", limits);
  fuzz::expect_value_or_invalid(k_target, pkg, "read_package");
  if (!pkg) {
    return 0;
  }
  check_package(*pkg);
  const Package copy = *pkg;
  LinkOptions options;
  options.prefix = (data[0] & 2U) != 0 ? "/opt/conda" : "/opt/a much longer prefix with spaces/env";
  options.python_version = "3.11";
  auto plan = plan_package(std::move(*pkg), PackageOrigin{}, options);
  fuzz::expect_value_or_invalid(k_target, plan, "plan_package");
  if (!plan) {
    return 0;
  }
  check_plan(copy, *plan);
  auto merged = merge_plans({*plan}, PrefixOptions{});
  fuzz::expect_value_or_invalid(k_target, merged, "merge_plans");
  return 0;
}
