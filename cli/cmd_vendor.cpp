// `lockstep vendor [LOCK] --to DIR|docker://REG/REPO`: every file a lock names, saved where builds
// can fetch it without upstream (docs/vendor.md). The mirrors builds take are builder/lock/mirrors.cpp.
#include "builder/image/vendor.hpp"
#include "cli/cli.hpp"
#include "envspec/load/load.hpp"
#include "envspec/settings/settings.hpp"
#include "envspec/spec/host_paths.hpp"
#include "envspec/spec/spec.hpp"
#include "support/base/log.hpp"
#include "support/oci/image_source.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

namespace lockstep::cli {

namespace {

namespace fs = std::filesystem;

struct VendorArgs {
  std::string lock = "lockstep.lock";
  std::string to;
};

constexpr const char* k_examples = R"(Examples:
  lockstep vendor --to /srv/vendor                     ./lockstep.lock into a directory
  lockstep vendor examples/mpi-hello/lockstep.lock --to docker://registry.lab:5000/team/vendor
  lockstep build --locked --offline --mirror /srv/vendor     later, with no network at all
  LOCKSTEP_MIRRORS=/srv/vendor lockstep build --locked        mirrors from the environment

Saved: every deb and wheel of the lock, each git source's tree export (the tar its sha256 in the lock
pins; a build without the clone writes the layer from it), a team's stack recipes at the locked
commit, the base image's manifest, config and layers, and the lock itself, each under its sha256. A
directory gets DIR/blobs/sha256/<hex> (hard links to the store where it can) and
DIR/lockstep-vendor.json, an index of what is there (several locks may share one directory); a
registry repository gets each file as a blob, listed by one artifact manifest tagged lock-<digest>
(or the tag given).)";

Result<ExitCode> run_vendor(const VendorArgs& args, const Context& ctx) {
  if (args.to.empty()) {
    return invalid_input("vendor: say where with --to DIR or --to docker://REGISTRY/REPO");
  }
  fs::path lock_path = fs::absolute(args.lock);
  if (is_spec_name(lock_path)) {
    lock_path = envspec::default_lock_path(lock_path);
  }
  LS_TRY_ASSIGN(std::string lock_text, read_file(lock_path));
  LS_TRY_ASSIGN(envspec::Lock lock, envspec::parse_lock(lock_text, lock_path.string()));
  std::vector<fs::path> roots = {lock_path.parent_path()};
  const fs::path spec_path = spec_beside(lock_path);
  std::error_code ec;
  if (fs::is_regular_file(spec_path, ec)) {
    if (auto spec = envspec::load_spec(spec_path)) {
      roots = envspec::local_roots(*spec);
    }
  }
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  const registry::ClientOptions& options = registry::default_client_options();
  builder::VendorResult result;
  if (args.to.starts_with("docker://")) {
    LS_TRY_ASSIGN(oci::ImageRef ref, oci::ImageRef::parse(args.to));
    LS_TRY_ASSIGN(result, builder::vendor_to_registry(lock, lock_text, store, lock_path.parent_path(), roots,
                                                      ref.remote, options));
  } else {
    const std::string dir = args.to.starts_with("dir:") ? args.to.substr(4) : args.to;
    LS_TRY_ASSIGN(result, builder::vendor_to_dir(lock, lock_text, store, lock_path.parent_path(), roots,
                                                 fs::absolute(dir), options));
  }
  std::uint64_t total = 0;
  for (const auto& f : result.files) {
    total += f.size;
  }
  if (ctx.json) {
    nlohmann::json j{
        {"to", result.where}, {"files", result.files.size()}, {"bytes", total}, {"written", result.written}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    log::info("vendored {} files ({}) to {}; {} new", result.files.size(), log::human_size(total),
              result.where, result.written);
    std::printf("%s\n", result.where.c_str());
  }
  return ExitCode::ok;
}

} // namespace

void register_vendor(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<VendorArgs>();
  auto* cmd = app.add_subcommand("vendor", "Save every file a lock names to a directory or registry, for "
                                           "builds without upstream");
  cmd->add_option("LOCK", args->lock, "The lock (or the spec beside it)")->capture_default_str();
  cmd->add_option("--to", args->to, "DIR, or docker://REGISTRY/REPO[:TAG]")->required()->type_name("WHERE");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(command_footer(
      k_examples, {ExitCode::ok, ExitCode::check_failed, ExitCode::invalid_input, ExitCode::external}));
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_vendor(*args, ctx); }; });
}

} // namespace lockstep::cli
