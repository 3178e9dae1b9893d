// `lockstep diff A B`: where two environments differ, component by component. Each side is a spec,
// a lock, an image or a `lockstep doctor --json` snapshot, recognised by its content
// (docs/verify-diff.md).
#include "builder/image/image_facts.hpp"
#include "cli/cli.hpp"
#include "envspec/documents/components.hpp"
#include "envspec/load/load.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/spec/spec.hpp"
#include "runner/audit/doctor.hpp"
#include "runner/audit/image_contents.hpp"
#include "runner/audit/verify.hpp"
#include "support/oci/oci.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace lockstep::cli {

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t k_max_document = 64ULL << 20;

constexpr const char* k_accepted =
    "diff takes a spec (lockstep.yaml), a lock (lockstep.lock), an image (oci:DIR, an OCI layout "
    "directory, an OCI or docker archive, a SIF file, dir:ROOT) or a `lockstep doctor --json` snapshot";

constexpr const char* k_diff_footer = R"(Examples:
  lockstep diff old.lock lockstep.lock           what moved between two locks
  lockstep diff lockstep.lock oci:out            is the image what the lock says?
  lockstep diff oci:laptop cluster.sif           two images
  lockstep diff lockstep.yaml lockstep.lock      what the spec asks for against what was locked
  lockstep diff node1.json lockstep.lock         a doctor snapshot's Python packages against the lock's wheels

Each side is recognised by its content: a spec, a lock, an image or a doctor snapshot. Components are
debs, wheels (and a snapshot's Python packages, compared by name), git sources, the stack an image
records (dev.lockstep.* labels) and host facts. A spec names only what it asks for, so against it only
those names are compared. Output: one row per added, removed or changed component, sorted by kind and
name, then a summary line; --json gives the same as data (docs/verify-diff.md).

Exit codes: 0 no drift, 1 drift, 2 a side can't be read or is not one of the accepted kinds.)";

struct DiffArgs {
  std::string a;
  std::string b;
};

Result<envspec::ComponentSet> image_side(const std::string& arg) {
  LS_TRY_ASSIGN(const runner::ImageArg image, runner::parse_image_arg(arg));
  runner::ContentsOptions options;
  options.digests = false; // diff compares package records, not file digests
  LS_TRY_ASSIGN(const runner::ImageContents contents, runner::read_image_contents(image, options));
  LS_TRY_ASSIGN(const runner::ImagePackages packages, runner::image_packages(contents));
  return runner::image_components(contents, packages);
}

Result<envspec::ComponentSet> spec_side(const fs::path& path, const std::string& arg) {
  LS_TRY_ASSIGN(const envspec::Spec spec, envspec::load_spec(path));
  return envspec::spec_components(spec, arg);
}

// A lock's components; a multi-platform lock's merged over its platforms' shares.
Result<envspec::ComponentSet> lock_side(const envspec::Lock& lock, const std::string& arg) {
  if (lock.platforms.empty()) {
    LS_TRY_ASSIGN(const envspec::ImageFacts facts, builder::image_facts_for(lock));
    return envspec::lock_components(lock, facts, arg);
  }
  std::vector<std::pair<std::string, envspec::ComponentSet>> shares;
  for (const std::string& platform : lock.platforms) {
    const envspec::Lock share = envspec::lock_for_platform(lock, platform);
    LS_TRY_ASSIGN(const envspec::ImageFacts facts, builder::image_facts_for(share));
    shares.emplace_back(platform, envspec::lock_components(share, facts, arg));
  }
  return envspec::merge_platform_components(shares, arg);
}

// One side of the diff, recognised by its content. A multi-platform lock is also kept in
// `multi_lock` (when given), so run_diff can take the other side's platform's share.
Result<envspec::ComponentSet> load_side(const std::string& arg, envspec::Lock* multi_lock = nullptr) {
  for (std::string_view prefix : {"oci:", "oci-archive:", "docker-archive:", "sif:", "dir:"}) {
    if (arg.starts_with(prefix)) {
      return image_side(arg);
    }
  }
  const fs::path path = arg;
  struct stat st {};
  if (arg.empty() || ::stat(path.c_str(), &st) != 0) {
    return invalid_input("can't read '{}': {}; {}", arg, std::strerror(arg.empty() ? ENOENT : errno),
                         k_accepted);
  }
  if (S_ISDIR(st.st_mode)) {
    struct stat marker {};
    if (::stat((path / "oci-layout").c_str(), &marker) == 0) {
      return image_side(arg);
    }
    if (::stat((path / "lockstep.yaml").c_str(), &marker) == 0) {
      return spec_side(path / "lockstep.yaml", arg);
    }
    return invalid_input("'{}' is a directory without an OCI layout or a lockstep.yaml (write dir:{} for an "
                         "unpacked root); {}",
                         arg, arg, k_accepted);
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_input("'{}' is not a regular file or a directory; {}", arg, k_accepted);
  }
  // Binary formats by their magic: SIF ("SIF_MAGIC" at 32), tar ("ustar" at 257).
  std::array<char, 512> head{};
  {
    LS_TRY_ASSIGN(UniqueFd fd, open_file(path, O_RDONLY | O_NONBLOCK));
    const ssize_t n = ::pread(fd.get(), head.data(), head.size(), 0);
    if (n < 0) {
      return errno_error("can't read " + arg, errno);
    }
    const std::string_view h(head.data(), static_cast<std::size_t>(n));
    if (h.size() >= 41 && h.substr(32, 9) == "SIF_MAGIC") {
      return image_side(arg);
    }
    if (h.size() >= 262 && h.substr(257, 5) == "ustar") {
      LS_TRY_ASSIGN(const runner::ImageArg image, runner::parse_image_arg(arg));
      if (image.kind != runner::ImageArg::Kind::oci) {
        return invalid_input("'{}' is a tar archive but neither an OCI archive nor a docker-archive; {}", arg,
                             k_accepted);
      }
      return image_side(arg);
    }
  }
  if (static_cast<std::uint64_t>(st.st_size) > k_max_document) {
    return invalid_input("'{}' is not an image and is larger than {} bytes; {}", arg, k_max_document,
                         k_accepted);
  }
  LS_TRY_ASSIGN(const std::string text, read_file(path, k_max_document));
  switch (envspec::detect_document(text)) {
  case envspec::DocumentKind::lock: {
    LS_TRY_ASSIGN(envspec::Lock lock, envspec::parse_lock(text, arg));
    if (multi_lock != nullptr && !lock.platforms.empty()) {
      *multi_lock = lock;
    }
    return lock_side(lock, arg);
  }
  case envspec::DocumentKind::snapshot: {
    LS_TRY(runner::parse_snapshot(text, arg)); // strict: every key and type, with its path
    LS_TRY_ASSIGN(const nlohmann::json json, oci::parse_json(text, arg));
    return envspec::snapshot_components(json, arg);
  }
  case envspec::DocumentKind::spec:
    return spec_side(path, arg);
  case envspec::DocumentKind::unknown:
    break;
  }
  return invalid_input("'{}' is not a spec, a lock, an image or a doctor snapshot; {}", arg, k_accepted);
}

Result<ExitCode> run_diff(const DiffArgs& args, const Context& ctx) {
  envspec::Lock multi_a;
  envspec::Lock multi_b;
  LS_TRY_ASSIGN(envspec::ComponentSet a, load_side(args.a, &multi_a));
  LS_TRY_ASSIGN(envspec::ComponentSet b, load_side(args.b, &multi_b));
  // A multi-platform lock against an image or a lock of one platform: that platform's share.
  const auto project = [](envspec::ComponentSet& side, const envspec::Lock& lock, const std::string& arg,
                          const std::string& architecture) -> Result<void> {
    if (lock.platforms.empty() || architecture.empty()) {
      return {};
    }
    if (const std::optional<envspec::Lock> share = envspec::lock_share_for_arch(lock, architecture)) {
      LS_TRY_ASSIGN(side, lock_side(*share, arg));
      side.what = fmt::format("{} ({})", arg, share->platform);
    }
    return {};
  };
  LS_TRY(project(a, multi_a, args.a, b.architecture));
  LS_TRY(project(b, multi_b, args.b, a.architecture));
  const envspec::ComponentDiff diff = envspec::diff_components(a, b);
  if (ctx.json) {
    std::printf("%s\n", envspec::diff_json(a, b, diff)
                            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                            .c_str());
  } else {
    std::fputs(envspec::render_diff_text(a, b, diff).c_str(), stdout);
  }
  return diff.empty() ? ExitCode::ok : ExitCode::check_failed;
}

} // namespace

void register_diff(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<DiffArgs>();
  auto* cmd = app.add_subcommand("diff", "Show where two specs, locks, images or doctor snapshots differ");
  cmd->add_option("A", args->a, "A spec, lock, image or doctor snapshot")->required();
  cmd->add_option("B", args->b, "The other side, of the same kinds")->required();
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(k_diff_footer);
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_diff(*args, ctx); }; });
}

} // namespace lockstep::cli
