// Fuzz target for conda package archives (support/conda/package, link): the first byte picks the
// format (.conda or .tar.bz2) and the prefix, the rest is the archive; or, with bit 2 of that byte,
// the rest is an uncompressed tar that the target compresses and wraps into a .conda itself, so that
// mutations reach the tar members and the info/ JSON behind the compression. Whatever the bytes,
// read_package returns a package or an invalid_input error; a package it returns holds only clean
// paths, symlinks that stay inside, and paths.json entries found in the payload; planning it into a
// prefix and merging the plan again give a value or invalid_input, binary files keep their length,
// every planned path is clean, and the conda-meta record is JSON. A violation aborts.
//
// Built twice (tests/CMakeLists.txt): as a libFuzzer binary (-DLOCKSTEP_FUZZ=ON) and with
// replay_main.cpp as a plain driver that ctest runs over tests/fuzz/corpus/conda_pkg/. The seeds
// are packages cph packed (a platform package with text and binary placeholders, a symlink and an
// empty directory; a noarch: python package with entry points; a legacy package without
// paths.json), each behind its selector byte, and the same packages as plain tars.
#include "support/base/json.hpp"
#include "support/conda/link.hpp"
#include "support/conda/package.hpp"
#include "tests/fuzz/fuzz_checks.hpp"

#include <zstd.h>

#include <zlib.h>

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

void put(std::string& s, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    s += static_cast<char>(i < 8 ? (v >> (8 * i)) & 0xFFU : 0);
  }
}

/// A .conda of stem fuzz-1.0-0 whose info tar is `tar` (compressed here) and whose pkg tar is empty.
std::string wrap_as_conda(std::string_view tar) {
  auto zstd = [](std::string_view in) {
    std::string out(ZSTD_compressBound(in.size()), '\0');
    const std::size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 1);
    out.resize(ZSTD_isError(n) != 0 ? 0 : n);
    return out;
  };
  const std::string members[3][2] = {{"metadata.json", R"({"conda_pkg_format_version": 2})"},
                                     {"pkg-fuzz-1.0-0.tar.zst", zstd(std::string(1024, '\0'))},
                                     {"info-fuzz-1.0-0.tar.zst", zstd(tar)}};
  std::string out;
  std::string central;
  for (const auto& [name, data] : members) {
    std::string common;
    put(common, 20, 2);
    put(common, 0, 8); // flags, method (stored), time, date
    put(common, crc32_z(0, reinterpret_cast<const Bytef*>(data.data()), data.size()), 4);
    put(common, data.size(), 4);
    put(common, data.size(), 4);
    put(common, name.size(), 2);
    put(common, 0, 2);
    const std::size_t offset = out.size();
    put(out, 0x04034b50, 4);
    out += common + name + data;
    put(central, 0x02014b50, 4);
    put(central, 20, 2);
    central += common;
    put(central, 0, 10); // comment length, disk, attributes
    put(central, offset, 4);
    central += name;
  }
  const std::size_t cd = out.size();
  out += central;
  put(out, 0x06054b50, 4);
  put(out, 0, 4);
  put(out, 3, 2);
  put(out, 3, 2);
  put(out, central.size(), 4);
  put(out, cd, 4);
  put(out, 0, 2);
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string wrapped;
  if ((data[0] & 4U) != 0) {
    wrapped = wrap_as_conda(bytes);
    bytes = wrapped;
  }
  const bool bz2 = (data[0] & 5U) == 1;
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
