#include "builder/image/run_step.hpp"

#include "builder/image/tree_scan.hpp"
#include "runner/runtime/recorded_stat.hpp"
#include "runner/runtime/root_cache.hpp"
#include "runner/runtime/sandbox.hpp"
#include "runner/runtime/seccomp.hpp"
#include "support/base/log.hpp"
#include "support/codec/compress.hpp"
#include "support/system/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

namespace lockstep::builder {

namespace fs = std::filesystem;

namespace {

// 2: steps run confined (their own user, pid and IPC namespaces, seccomp; docs/run-steps.md).
// 3: a supervisor answers ownership and device calls; rootless layers record the image's owners.
constexpr const char* k_run_step_version = "lockstep-run-step-3";
constexpr std::string_view k_whiteout_prefix = ".wh.";
constexpr const char* k_opaque_marker = ".wh..wh..opq";

// Files that record when or where a build ran rather than what it installed: package manager
// logs and binary caches, backups of the previous state, shell and tool histories. Paths are
// relative to the root; a trailing '/' drops the directory's contents.
constexpr const char* k_dropped[] = {
    "var/log/dpkg.log",
    "var/log/alternatives.log",
    "var/log/bootstrap.log",
    "var/log/fontconfig.log",
    "var/log/apt/",
    "var/cache/apt/pkgcache.bin",
    "var/cache/apt/srcpkgcache.bin",
    "var/cache/ldconfig/aux-cache",
    "var/lib/dpkg/status-old",
    "var/lib/dpkg/diversions-old",
    "var/lib/dpkg/statoverride-old",
    "var/cache/debconf/config.dat-old",
    "var/cache/debconf/templates.dat-old",
    "var/cache/debconf/passwords.dat-old",
    "root/.cache/",
    "root/.bash_history",
    "root/.python_history",
    "root/.wget-hsts",
    "root/.lesshst",
    "tmp/",
    "var/tmp/",
};

bool lexists(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

// Clamps the source mtime in a timestamp-based .pyc (PEP 552: magic, "\r\n", flags == 0, mtime,
// source size) to the epoch. The source file's mtime in the layer is clamped the same way, so the
// cache entry stays valid for Python.
Result<bool> fix_pyc(const fs::path& file, std::int64_t epoch) {
  int fd = ::open(file.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return errno_error("can't open " + file.string(), errno);
  }
  UniqueFd guard(fd);
  unsigned char header[16];
  ssize_t n = ::pread(fd, header, sizeof(header), 0);
  if (n != static_cast<ssize_t>(sizeof(header)) || header[2] != '\r' || header[3] != '\n') {
    return false;
  }
  std::uint32_t flags = 0;
  std::uint32_t mtime = 0;
  std::memcpy(&flags, header + 4, 4); // little-endian on every platform lockstep builds for
  std::memcpy(&mtime, header + 8, 4);
  if (flags != 0 || static_cast<std::int64_t>(mtime) <= epoch) {
    return false;
  }
  auto clamped = static_cast<std::uint32_t>(epoch);
  if (::pwrite(fd, &clamped, 4, 8) != 4) {
    return errno_error("can't rewrite " + file.string(), errno);
  }
  return true;
}

struct UpperPlanner {
  const fs::path& lower;
  const UpperLayout& layout;
  std::int64_t epoch;
  const TreeScan& scan;
  LayerPlan plan;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::string> links;

  static std::optional<std::uint32_t> map_id(const std::vector<UpperLayout::IdRange>& ranges,
                                             std::uint32_t id) {
    for (const UpperLayout::IdRange& range : ranges) {
      if (id >= range.first && id - range.first < range.count) {
        return id - range.first + range.inside;
      }
    }
    return std::nullopt;
  }

  // An empty directory or file the sandbox made as a mount point, absent from the lower root.
  bool is_mount_point_stub(const std::string& rel, const std::string& host, const struct stat& st) const {
    if (layout.mount_points.count(rel) == 0 || lexists(lower / rel)) {
      return false;
    }
    if (S_ISREG(st.st_mode)) {
      return st.st_size == 0;
    }
    if (S_ISDIR(st.st_mode)) {
      const auto* listing = scan.listing(host);
      return listing == nullptr || listing->empty();
    }
    return false;
  }

  Result<PlannedEntry> base_entry(const std::string& rel, const struct stat& st) const {
    std::optional<std::uint32_t> uid = map_id(layout.uids, st.st_uid);
    std::optional<std::uint32_t> gid = map_id(layout.gids, st.st_gid);
    if (!uid || !gid) {
      return Error{
          ExitCode::internal,
          fmt::format("the step's result /{} is owned by host ids {}:{}, outside the build sandbox's "
                      "id range",
                      rel, st.st_uid, st.st_gid)};
    }
    PlannedEntry e;
    e.tar.path = rel;
    e.tar.mode = st.st_mode & 07777;
    e.tar.uid = *uid;
    e.tar.gid = *gid;
    e.tar.mtime = std::clamp<std::int64_t>(st.st_mtim.tv_sec, 0, epoch);
    return e;
  }

  // What a rootless build recorded for the file (runner/runtime/recorded_stat.hpp): the image's
  // owner, its mode while the file's bits are still what the unpack made of it, or the device node
  // an empty file stands for. Returns whether `e` became that device node.
  static Result<bool> apply_record(PlannedEntry& e, const std::string& host, const std::string& rel,
                                   const struct stat& st) {
    auto record = runner::read_recorded_stat(host);
    if (!record) {
      return Error{record.error().code,
                   fmt::format("the step's result /{}: {}", rel, record.error().message)};
    }
    if (!*record) {
      return false;
    }
    const runner::RecordedStat& r = **record;
    if (r.owner) {
      e.tar.uid = r.owner->first;
      e.tar.gid = r.owner->second;
    }
    const bool is_dir = S_ISDIR(st.st_mode);
    if (r.mode && (st.st_mode & 07777) == runner::caller_mode(*r.mode, is_dir)) {
      e.tar.mode = *r.mode;
    }
    if (r.device && S_ISREG(st.st_mode) && st.st_size == 0) {
      e.tar.type = r.device->type == 'b' ? TarEntry::Type::block_device : TarEntry::Type::char_device;
      e.tar.dev_major = r.device->major;
      e.tar.dev_minor = r.device->minor;
      e.tar.size = 0;
      return true;
    }
    return false;
  }

  PlannedEntry marker(const std::string& rel) const {
    PlannedEntry e;
    e.tar.path = rel;
    e.tar.type = TarEntry::Type::file;
    e.tar.mode = 0644;
    e.tar.mtime = epoch;
    return e;
  }

  Result<void> walk(const std::string& host, const std::string& rel) {
    const std::vector<ScannedEntry>* entries = scan.listing(host);
    if (entries == nullptr) {
      return internal_error("directory {} was not scanned", host);
    }
    // Members sorted by their name in the tar (a whiteout is named ".wh.NAME").
    struct Member {
      std::string tar_name;
      const ScannedEntry* entry;
      bool whiteout;
    };
    std::vector<Member> members;
    for (const auto& e : *entries) {
      if (e.name.compare(0, k_whiteout_prefix.size(), k_whiteout_prefix) == 0) {
        return invalid_input("the step created {}{}, a name reserved for layer whiteouts",
                             rel.empty() ? "/" : "/" + rel + "/", e.name);
      }
      bool whiteout = S_ISCHR(e.st.st_mode) && e.st.st_rdev == makedev(0, 0);
      members.push_back(Member{whiteout ? std::string(k_whiteout_prefix) + e.name : e.name, &e, whiteout});
    }
    std::sort(members.begin(), members.end(),
              [](const Member& a, const Member& b) { return a.tar_name < b.tar_name; });
    for (const Member& m : members) {
      const struct stat& st = m.entry->st;
      const std::string child_host = host + "/" + m.entry->name;
      const std::string child_rel = rel.empty() ? m.tar_name : rel + "/" + m.tar_name;
      if (m.whiteout) {
        plan.entries.push_back(marker(child_rel));
        continue;
      }
      if (is_mount_point_stub(child_rel, child_host, st)) {
        continue;
      }
      LS_TRY_ASSIGN(PlannedEntry e, base_entry(child_rel, st));
      if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
        LS_TRY_ASSIGN(bool device, apply_record(e, child_host, child_rel, st));
        if (device) {
          plan.entries.push_back(std::move(e));
          continue;
        }
      }
      if (S_ISDIR(st.st_mode)) {
        e.tar.type = TarEntry::Type::dir;
        plan.entries.push_back(std::move(e));
        char value[8];
        ssize_t n = ::lgetxattr(child_host.c_str(), layout.opaque_xattr.c_str(), value, sizeof(value));
        if (n == 1 && value[0] == 'y') {
          plan.entries.push_back(marker(child_rel + "/" + k_opaque_marker));
        }
        LS_TRY(walk(child_host, child_rel));
        continue;
      }
      if (!describe_source(e, st, child_host)) {
        log::debug("run step: skipping socket /{}", child_rel);
        continue;
      }
      if (e.tar.type == TarEntry::Type::symlink) {
        e.tar.mode = 0777;
      } else if (e.tar.type == TarEntry::Type::file) {
        e.read_capability = true;
        if (st.st_nlink > 1) {
          auto [it, inserted] = links.emplace(std::make_pair(st.st_dev, st.st_ino), child_rel);
          if (!inserted) {
            e.make_hardlink(it->second);
          }
        }
        if (e.tar.type == TarEntry::Type::file) {
          plan.content_bytes += static_cast<std::uint64_t>(st.st_size);
        }
      }
      plan.entries.push_back(std::move(e));
    }
    return {};
  }
};

} // namespace

Digest run_step_fingerprint(const envspec::RunStep& step, const RunStepInputs& inputs) {
  FingerprintHasher h;
  h.add(k_run_step_version, k_layer_format_version, inputs.settings, inputs.epoch,
        inputs.parent_diff_ids.size());
  for (const auto& d : inputs.parent_diff_ids) {
    h.add(d.str());
  }
  h.add(step.sh, step.network, inputs.env.size());
  for (const auto& e : inputs.env) {
    h.add(e);
  }
  h.add(inputs.workdir);
  return h.finish();
}

Result<std::vector<std::string>> normalize_upper(const fs::path& upper, std::int64_t epoch) {
  std::vector<std::string> dropped;
  std::error_code ec;
  for (std::string_view item : k_dropped) {
    const bool contents = item.back() == '/';
    const fs::path p = upper / std::string(contents ? item.substr(0, item.size() - 1) : item);
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      continue;
    }
    if (contents && S_ISDIR(st.st_mode)) {
      std::vector<fs::path> children;
      for (const auto& child : fs::directory_iterator(p, ec)) {
        children.push_back(child.path());
      }
      std::sort(children.begin(), children.end());
      for (const auto& child : children) {
        if (fs::remove_all(child, ec) == static_cast<std::uintmax_t>(-1) || ec) {
          return io_error("can't drop {} from the step's layer: {}", child.string(), ec.message());
        }
        dropped.push_back(fs::relative(child, upper).string());
      }
    } else if (!contents) {
      if (!fs::remove(p, ec) || ec) {
        return io_error("can't drop {} from the step's layer: {}", p.string(), ec.message());
      }
      dropped.emplace_back(item);
    }
  }
  // Timestamp-based .pyc files in __pycache__ directories.
  for (auto it = fs::recursive_directory_iterator(upper, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() == ".pyc" && p.parent_path().filename() == "__pycache__" && it->is_regular_file(ec) &&
        !it->is_symlink(ec)) {
      LS_TRY(fix_pyc(p, epoch));
    }
  }
  if (ec) {
    return io_error("can't walk the step's changes in {}: {}", upper.string(), ec.message());
  }
  return dropped;
}

Result<LayerPlan> plan_upper_layer(const fs::path& upper, const fs::path& lower, const UpperLayout& layout,
                                   std::int64_t epoch) {
  LS_TRY_ASSIGN(TreeScan scan, TreeScan::scan(upper.string(), default_thread_count()));
  UpperPlanner planner{lower, layout, epoch, scan, {}, {}};
  LS_TRY(planner.walk(upper.string(), ""));
  return std::move(planner.plan);
}

} // namespace lockstep::builder

namespace lockstep::builder {

namespace {

// Paths the sandbox may create in the overlay as mount points (runner/runtime/sandbox.cpp default table).
const std::set<std::string> k_sandbox_mount_points = {"dev",      "proc", "sys", "tmp", "etc/resolv.conf",
                                                      "etc/hosts"};

// Gives `to` the owner (when root) and permission bits of `from`.
Result<void> copy_owner_and_mode(const fs::path& from, const fs::path& to) {
  struct stat st {};
  if (::stat(from.c_str(), &st) != 0) {
    return errno_error("can't stat " + from.string(), errno);
  }
  if (::geteuid() == 0 && ::chown(to.c_str(), st.st_uid, st.st_gid) != 0) {
    return errno_error("can't chown " + to.string(), errno);
  }
  if (::chmod(to.c_str(), st.st_mode & 07777) != 0) {
    return errno_error("can't chmod " + to.string(), errno);
  }
  return {};
}

// --userns subuid, run in the subordinate id namespace (where the caller is 0, as in the step's):
// every file or directory of the step's upper directory that another id owns is given back to the
// caller, its owner (and a mode the caller's copy can't keep) recorded in user.lockstep.stat as the
// rootless unpack records them, so lockstep can read, capture and remove it. Symbolic links and
// other special files keep their owner (their directory is the caller's, so they can be removed),
// and the capture maps it through the subordinate range.
Result<void> record_subid_owners(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> children;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    children.push_back(entry.path());
  }
  if (ec) {
    return io_error("can't list {}: {}", dir.string(), ec.message());
  }
  for (const fs::path& p : children) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      return errno_error("can't stat " + p.string(), errno);
    }
    const bool is_dir = S_ISDIR(st.st_mode);
    if (is_dir) {
      LS_TRY(record_subid_owners(p));
    }
    if ((st.st_uid == 0 && st.st_gid == 0) || !(is_dir || S_ISREG(st.st_mode))) {
      continue;
    }
    UniqueFd fd(
        ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (is_dir ? O_DIRECTORY : 0)));
    if (!fd.valid()) {
      return errno_error("can't open " + p.string(), errno);
    }
    LS_TRY_ASSIGN(auto existing, runner::read_recorded_stat(fd.get()));
    runner::RecordedStat r = runner::image_record(st.st_uid, st.st_gid, st.st_mode, is_dir);
    if (existing) {
      r.device = existing->device; // a device node the supervisor made stays one
    }
    if (::fchown(fd.get(), 0, 0) != 0 || ::fchmod(fd.get(), runner::caller_mode(st.st_mode, is_dir)) != 0) {
      return errno_error("can't give " + p.string() + " back to the caller", errno);
    }
    LS_TRY(runner::write_recorded_stat(fd.get(), r));
  }
  return {};
}

std::string step_name(const envspec::RunStep& step, std::size_t index) {
  return fmt::format("run[{}] ({}:{})", index, step.location.file.string(), step.location.line);
}

} // namespace

runner::UnpackOptions run_step_unpack_options() {
  runner::UnpackOptions unpack;
  if (::geteuid() == 0) {
    unpack.ownership = runner::UnpackOptions::Ownership::keep;
    unpack.id_offset = runner::k_confined_host_first;
    unpack.id_count = runner::k_confined_id_count;
  }
  return unpack;
}

namespace {

// The confined sandbox a step runs in: root inside a user namespace of its own, its own pids and
// /proc, no network unless asked, a minimal /dev, the seccomp filter; another architecture's
// programs under qemu-user.
runner::SandboxConfig step_sandbox_config(const envspec::RunStep& step, const ImageState& image,
                                          const StepOptions& options, const fs::path& rootfs,
                                          const fs::path& upper, const fs::path& work) {
  const bool as_root = ::geteuid() == 0;
  runner::SandboxConfig config;
  config.root = rootfs;
  config.overlay = runner::OverlayDirs{upper, work};
  config.read_only = false;
  config.confined = true;
  if (!as_root) {
    config.supervisor = image.subids ? runner::SupervisorMode::subuid : runner::SupervisorMode::single;
    config.subids = image.subids;
  } else if (runner::check_user_notification()) {
    config.supervisor = runner::SupervisorMode::root; // device nodes; without it, mknod is refused
  }
  config.emulation = image.emulation;
  config.pid_namespace = true;
  config.network = step.network ? runner::NetworkPolicy::host : runner::NetworkPolicy::none;
  config.dev.mode = runner::DevPolicy::Mode::minimal;
  config.uid = 0;
  config.gid = 0;
  config.env = image.env;
  config.env.push_back(fmt::format("SOURCE_DATE_EPOCH={}", image.epoch));
  if (std::none_of(config.env.begin(), config.env.end(),
                   [](const std::string& e) { return e.rfind("HOME=", 0) == 0; })) {
    config.env.emplace_back("HOME=/root");
  }
  config.cwd = options.workdir.empty() ? "/" : options.workdir;
  config.cwd_missing = runner::CwdMissing::create;
  config.argv = {"/bin/sh", "-c", step.sh};
  config.umask = 022; // the files a step creates don't depend on the caller's umask
  config.stdout_to = runner::SandboxConfig::Stdout::to_stderr; // lockstep's stdout ends with the digest
  return config;
}

} // namespace

Result<BuiltLayer> build_run_step(const envspec::RunStep& step, std::size_t index, const ImageState& image,
                                  const StepOptions& options) {
  const BlobStore& store = *image.store;
  const std::string name = options.label.empty() ? step_name(step, index) : options.label;
  const std::string label = options.label.empty() ? fmt::format("run[{}]", index) : options.label;
  // 1. The layer cache: the same command over the same layers with the same environment.
  RunStepInputs inputs{image.diff_ids, image.env, options.workdir.empty() ? "/" : options.workdir,
                       image.epoch, layer_settings(image.codec)};
  const Digest fingerprint = run_step_fingerprint(step, inputs);
  if (auto hit = find_cached_layer(fingerprint, store, image.codec)) {
    log::debug("{}: layer cache hit {} -> {}", label, fingerprint.hex(), hit->descriptor.digest.str());
    return *hit;
  }
  if (image.emulation_error) {
    return image.emulation_error->with_context(name);
  }
  // 2. The root built so far, unpacked once and shared read-only. As root, owned by the ids the
  //    confined step's ids map to (never host root's).
  const bool as_root = ::geteuid() == 0;
  LS_TRY_ASSIGN(runner::UnpackedRoot root,
                runner::unpacked_root(store, image.layers, image.diff_ids, run_step_unpack_options(),
                                      options.root_head));
  // 3. A fresh overlay upper directory next to the store, on the same filesystem as its work dir.
  LS_TRY(make_dirs(store.root() / "tmp"));
  LS_TRY_ASSIGN(TempDir scratch, TempDir::create(store.root() / "tmp", "run-step-"));
  struct Cleanup {
    const fs::path& dir;
    ~Cleanup() {
      if (auto r = runner::remove_tree(dir); !r) {
        log::warn("can't remove {}: {}", dir.string(), r.error().message);
      }
    }
  } cleanup{scratch.path()};
  const fs::path upper = scratch.path() / "upper";
  const fs::path work = scratch.path() / "work";
  LS_TRY(make_dirs(upper));
  LS_TRY(make_dirs(work));
  // The upper directory stands for the image's root directory: its owner and mode.
  LS_TRY(copy_owner_and_mode(root.rootfs, upper));
  // 4. Run the step confined (docs/run-steps.md).
  const runner::SandboxConfig config = step_sandbox_config(step, image, options, root.rootfs, upper, work);
  log::info("{}: {}{}", label, options.label.empty() ? step.sh : "running",
            step.network ? " (network on)" : "");
  log::Timer timer(label);
  Result<int> status = runner::run_in_sandbox(config);
  timer.stop();
  if (!as_root && image.subids) {
    LS_TRY(runner::run_in_subid_namespace(*image.subids, [&] { return record_subid_owners(upper); }));
  }
  const bool not_found =
      status ? *status == runner::k_exit_not_found : status.error().exit_status == runner::k_exit_not_found;
  if (not_found) {
    auto shell = runner::probe_in_root(root.rootfs, "/bin/sh");
    if (!shell || *shell == runner::PathKind::missing) {
      return Error{ExitCode::check_failed,
                   fmt::format("{}: the image has no /bin/sh to run the step with; add a shell (e.g. a "
                               "busybox or dash layer) before the step",
                               name)};
    }
  }
  if (!status) {
    return status.error().with_context(name);
  }
  if (*status != 0) {
    return Error{ExitCode::check_failed,
                 options.label.empty() ? fmt::format("{}: `{}` exited with status {}", name, step.sh, *status)
                                       : fmt::format("{} exited with status {}", name, *status)};
  }
  // 5. Its changes, normalised, become the layer.
  LS_TRY_ASSIGN(auto dropped, normalize_upper(upper, image.epoch));
  for (const auto& d : dropped) {
    log::debug("{}: dropped /{} (records the build, not the image)", label, d);
  }
  UpperLayout layout;
  // Root under emulation runs in a user namespace (binfmt_misc instances belong to one), where
  // overlayfs keeps its marks in user.* xattrs, as it does unprivileged.
  layout.opaque_xattr = as_root && !image.emulation ? "trusted.overlay.opaque" : "user.overlay.opaque";
  if (as_root) {
    layout.uids = {{runner::k_confined_host_first, runner::k_confined_id_count, 0}};
    layout.gids = layout.uids;
  } else {
    layout.uids = {{static_cast<std::uint32_t>(::geteuid()), 1, 0}};
    layout.gids = {{static_cast<std::uint32_t>(::getegid()), 1, 0}};
    if (image.subids) {
      layout.uids.push_back({image.subids->uid_first, image.subids->uid_count, 1});
      layout.gids.push_back({image.subids->gid_first, image.subids->gid_count, 1});
    }
  }
  layout.mount_points = k_sandbox_mount_points;
  LS_TRY_ASSIGN(LayerPlan plan, plan_upper_layer(upper, root.rootfs, layout, image.epoch));
  plan.fingerprint = fingerprint;
  plan.cacheable = true;
  plan.created_by = options.label.empty() ? "run: " + step.sh : options.label;
  return build_layer(plan, store, image.codec, label);
}

} // namespace lockstep::builder
