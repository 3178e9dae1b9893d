// `lockstep sbom IMAGE|LOCK`: the software bill of materials of an image or a lock, as SPDX 2.3 or
// CycloneDX 1.6 JSON; for a registry image, the SBOM attached to it (docs/sbom.md).
#include "builder/image/attach.hpp"
#include "builder/image/sbom_output.hpp"
#include "builder/lock/epoch.hpp"
#include "cli/cli.hpp"
#include "envspec/documents/sbom.hpp"
#include "envspec/load/load.hpp"
#include "envspec/lock/lockfile.hpp"
#include "envspec/settings/settings.hpp"
#include "envspec/spec/host_paths.hpp"
#include "envspec/spec/spec.hpp"
#include "runner/audit/image_sbom.hpp"
#include "support/base/log.hpp"
#include "support/oci/image_arg.hpp"
#include "support/registry/pull.hpp"
#include "support/registry/referrers.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

namespace lockstep::cli {

namespace {

namespace fs = std::filesystem;

struct SbomArgs {
  std::string target = "lockstep.lock";
  std::string format;
  std::string output;
  std::string lock;
  std::string name;
  bool scan = false; ///< --scan: from the image's package databases, whatever lock or SBOM it has
};

constexpr const char* k_examples = R"(Examples:
  lockstep sbom                                     ./lockstep.lock as SPDX 2.3 JSON, on standard output
  lockstep sbom oci:build/hello --format cyclonedx-json -o hello.cdx.json
  lockstep sbom build/hello --lock examples/hello/lockstep.lock   the image, described by its digest
  lockstep sbom docker://registry.lab:5000/team/hello:v1         the SBOM attached to it on push
  lockstep sbom docker://debian:bookworm --format cyclonedx-json  any image, from its package databases
  lockstep sbom oci:build/hello --scan                           what the image itself records
  lockstep push oci:build/hello docker://registry.lab:5000/team/hello:v1 --sbom hello.spdx.json

A LOCK (a .lock file, or a spec whose lock is beside it) is described by the lock's digest; an IMAGE
lockstep built from a lock by its manifest digest, with the lock it records (--lock, default
./lockstep.lock; another lock is exit 1 naming both digests). Every deb, wheel and git source of the
lock and the base image appear once, with version, sha256, package URL and download URL, and the
license their copyright file (DEP-5) or METADATA declares; packages the store lacks are fetched to
read it. The output is deterministic: created is the lock's epoch; the SPDX namespace and the
CycloneDX serial number come from the digest described. `outputs.sbom` in the spec, or build --sbom,
writes the same file at build time. For docker://, the SBOM attached as an OCI referrer (or listed
under the sha256-<hex> tag where the registry has no referrers API) is fetched and checked to
describe that image.

An image without its lock (built elsewhere, or its lock is gone) or a registry image with no SBOM
attached is described from what it records itself, as syft does: dpkg's status (each installed
deb, its license from its DEP-5 copyright file), the Python *.dist-info directories no deb owns
(the license METADATA declares) and conda's conda-meta records (with their sha256), the distro
from os-release; --scan does so even where a lock or an attached SBOM is found. Such an SBOM
describes the image's manifest digest (a SIF: the file's sha256); created is SOURCE_DATE_EPOCH, or
1970-01-01, so it too is the same bytes every time.)";

bool is_lock_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return false;
  }
  if (path.extension() == ".lock" || is_spec_name(path)) {
    return true;
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return false;
  }
  int c = 0;
  while ((c = std::fgetc(f)) == ' ' || c == '\n' || c == '\t' || c == '\r') {
  }
  std::fclose(f);
  return c == '{';
}

Result<envspec::SbomFormat> chosen_format(const SbomArgs& args) {
  if (!args.format.empty()) {
    if (auto f = envspec::parse_sbom_format(args.format)) {
      return *f;
    }
    return invalid_input("--format {}: expected spdx-json or cyclonedx-json", args.format);
  }
  if (!args.output.empty() && args.output != "-") {
    if (auto f = builder::sbom_format_of_path(args.output)) {
      return *f;
    }
  }
  return envspec::SbomFormat::spdx_json;
}

// A lock, and the roots its local files may be read from.
struct LockAndRoots {
  envspec::Lock lock;
  fs::path path;
  std::vector<fs::path> roots;
  std::string spec_name; ///< of the spec beside it, when there is one that loads
};

Result<LockAndRoots> read_lock_and_roots(const fs::path& given) {
  LockAndRoots out;
  fs::path lock_path = fs::absolute(given);
  fs::path spec_path = spec_beside(lock_path);
  if (is_spec_name(lock_path)) {
    spec_path = lock_path;
    lock_path = envspec::default_lock_path(spec_path);
  }
  LS_TRY_ASSIGN(out.lock, envspec::read_lock(lock_path));
  out.path = lock_path;
  out.roots = {lock_path.parent_path()};
  std::error_code ec;
  if (fs::is_regular_file(spec_path, ec)) {
    if (auto spec = envspec::load_spec(spec_path)) {
      out.roots = envspec::local_roots(*spec);
      out.spec_name = spec->name;
    } else {
      log::debug("sbom: the spec beside the lock does not load ({}); local files are read beside the lock",
                 spec.error().message);
    }
  }
  return out;
}

// The SBOM attached to a registry image; none when nothing of `format` is attached.
Result<std::optional<std::string>> attached_sbom(const oci::ImageRef& ref, envspec::SbomFormat format) {
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  const registry::ClientOptions& options = registry::default_client_options();
  LS_TRY_ASSIGN(std::unique_ptr<oci::ImageSource> source, registry::open_image(ref, store, options));
  LS_TRY_ASSIGN(oci::OpenedImage image, source->resolve({}));
  const std::string type(envspec::sbom_media_type(format));
  LS_TRY_ASSIGN(std::vector<oci::Descriptor> found,
                registry::list_referrers(ref.remote, image.manifest_digest, "", options));
  std::vector<oci::Descriptor> wanted;
  std::vector<std::string> others;
  for (const oci::Descriptor& d : found) {
    if (d.artifact_type == type) {
      wanted.push_back(d);
    } else {
      others.push_back(d.artifact_type.empty() ? std::string("an untyped artifact") : d.artifact_type);
    }
  }
  if (wanted.empty()) {
    if (!others.empty()) {
      std::sort(others.begin(), others.end());
      others.erase(std::unique(others.begin(), others.end()), others.end());
    }
    log::info("no {} SBOM is attached to {} ({}){}: describing what the image records itself",
              envspec::sbom_format_name(format), ref.str(), image.manifest_digest.str(),
              others.empty() ? std::string() : fmt::format(" (attached: {})", fmt::join(others, ", ")));
    return std::optional<std::string>();
  }
  // The newest (by its created annotation, then digest) when there are several.
  std::sort(wanted.begin(), wanted.end(), [](const oci::Descriptor& a, const oci::Descriptor& b) {
    const auto created = [](const oci::Descriptor& d) {
      auto it = d.annotations.find("org.opencontainers.image.created");
      return it == d.annotations.end() ? std::string() : it->second;
    };
    return std::pair(created(a), a.digest.str()) < std::pair(created(b), b.digest.str());
  });
  LS_TRY_ASSIGN(std::string text, registry::fetch_referrer(ref.remote, wanted.back(), image.manifest_digest,
                                                           builder::k_max_sbom, options));
  const std::string what = fmt::format("the SBOM {} attached to {}", wanted.back().digest.str(), ref.str());
  LS_TRY_ASSIGN(envspec::SbomSubject subject, envspec::read_sbom_subject(text, what));
  if (subject.subject != image.manifest_digest) {
    return Error{ExitCode::check_failed, fmt::format("{} describes {}, not the image's {}", what,
                                                     subject.subject.str(), image.manifest_digest.str())};
  }
  return std::optional<std::string>(std::move(text));
}

// The SBOM of an image from its own package databases (runner/audit/image_sbom.hpp).
Result<std::string> scanned_sbom(const ImageArg& image, const std::string& text, const SbomArgs& args,
                                 envspec::SbomFormat format) {
  LS_TRY_ASSIGN(const std::int64_t created, builder::image_epoch());
  LS_TRY_ASSIGN(runner::ScannedSbom scanned,
                runner::scan_image_sbom(image, text, format, args.name, created));
  log::info("{}: {} debs, {} Python packages and {} conda packages, from the image's own records", text,
            scanned.debs, scanned.wheels, scanned.condas);
  return std::move(scanned.text);
}

// The SBOM of a local image: from the lock it was built from, or (--scan, no lock given and none
// recorded or none beside it) from what it records itself.
Result<std::string> image_sbom(const std::string& text, const SbomArgs& args, envspec::SbomFormat format) {
  LS_TRY_ASSIGN(ImageArg image, parse_image_arg(text));
  std::error_code ec;
  const bool no_lock_given = args.lock.empty() && !fs::exists("lockstep.lock", ec);
  if (args.scan || (no_lock_given && image.kind == ImageArg::Kind::sif)) {
    return scanned_sbom(image, text, args, format);
  }
  if (image.kind != ImageArg::Kind::oci) {
    return invalid_input("{}: an SBOM describes an OCI image by its manifest digest; give the OCI image (or "
                         "the lock) this {} was built from",
                         text, image.kind == ImageArg::Kind::sif ? "SIF" : "root");
  }
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  LS_TRY_ASSIGN(std::unique_ptr<oci::ImageSource> source,
                registry::open_image(image.ref, store, registry::default_client_options()));
  LS_TRY_ASSIGN(oci::OpenedImage opened, source->resolve({}));
  if (opened.synthesized_manifest) {
    return invalid_input(
        "{} is a docker-archive without an OCI layout: it has no manifest digest to describe", text);
  }
  const auto& annotations = opened.manifest.annotations;
  auto recorded = annotations.find(std::string(oci::k_annotation_lock_digest));
  if (no_lock_given) {
    log::info("{}: {}; describing what the image records itself", text,
              recorded == annotations.end() ? "it records no lock"
                                            : "its lock is not here (--lock LOCK gives it)");
    return scanned_sbom(image, text, args, format);
  }
  if (recorded == annotations.end()) {
    return invalid_input(
        "{} records no lock ({}): it was not built by lockstep from a lock; describe the lock "
        "instead (`lockstep sbom LOCK`), or what the image records itself (`lockstep sbom {} --scan`)",
        text, oci::k_annotation_lock_digest, text);
  }
  LS_TRY_ASSIGN(LockAndRoots lock, read_lock_and_roots(args.lock.empty() ? "lockstep.lock" : args.lock));
  if (!lock.lock.platforms.empty()) { // a multi-platform lock: the share the image was built from
    if (const Result<Digest> want = Digest::parse(recorded->second)) {
      if (std::optional<envspec::Lock> share = envspec::lock_share_with_digest(lock.lock, *want)) {
        lock.lock = std::move(*share);
      }
    }
  }
  const Digest digest = envspec::lock_digest(lock.lock);
  if (digest.str() != recorded->second) {
    return Error{
        ExitCode::check_failed,
        fmt::format("{} was built from the lock {}, but {} is {}; give the image's lock with --lock, "
                    "or describe what the image records itself with --scan",
                    text, recorded->second, lock.path.string(), digest.str())};
  }
  std::string name = args.name;
  if (name.empty()) {
    auto title = annotations.find(std::string(oci::k_annotation_title));
    name = title != annotations.end() ? title->second : std::string("image");
  }
  return builder::make_sbom(lock.lock, format, name, opened.manifest_digest, store, lock.path.parent_path(),
                            lock.roots);
}

Result<ExitCode> run_sbom(const SbomArgs& args, const Context& ctx) {
  LS_TRY_ASSIGN(const envspec::SbomFormat format, chosen_format(args));
  std::string text;
  std::string subject_kind;
  if (args.target.starts_with("docker://")) {
    LS_TRY_ASSIGN(oci::ImageRef ref, oci::ImageRef::parse(args.target));
    std::optional<std::string> attached;
    if (!args.scan) {
      LS_TRY_ASSIGN(attached, attached_sbom(ref, format));
    }
    if (attached) {
      text = std::move(*attached);
      subject_kind = "registry";
    } else {
      LS_TRY_ASSIGN(ImageArg image, parse_image_arg(args.target));
      LS_TRY_ASSIGN(text, scanned_sbom(image, args.target, args, format));
      subject_kind = "image";
    }
  } else if (is_lock_file(args.target)) {
    if (!args.lock.empty()) {
      return invalid_input("--lock is for an IMAGE; {} is a lock itself", args.target);
    }
    LS_TRY_ASSIGN(LockAndRoots lock, read_lock_and_roots(args.target));
    LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
    std::string name = !args.name.empty() ? args.name : lock.spec_name;
    if (name.empty()) {
      name = lock.path.stem().string();
    }
    LS_TRY_ASSIGN(text, builder::make_sbom(lock.lock, format, name, envspec::lock_digest(lock.lock), store,
                                           lock.path.parent_path(), lock.roots));
    subject_kind = "lock";
  } else {
    std::error_code ec;
    if (args.target == "lockstep.lock" && !fs::exists(args.target, ec)) {
      return Error{ExitCode::check_failed,
                   "no lockstep.lock here: give the lock or image to describe (`lockstep sbom --help`)"};
    }
    LS_TRY_ASSIGN(text, image_sbom(args.target, args, format));
    subject_kind = "image";
  }
  LS_TRY(write_output(args.output, text, "sbom"));
  if (ctx.json && !args.output.empty() && args.output != "-") {
    LS_TRY_ASSIGN(envspec::SbomSubject s, envspec::read_sbom_subject(text, args.output));
    nlohmann::json j{{"path", args.output},
                     {"format", std::string(envspec::sbom_format_name(format))},
                     {"describes", subject_kind},
                     {"subject", s.subject.str()},
                     {"sha256", sha256_of(text).str()}};
    std::printf("%s\n", j.dump(2).c_str());
  }
  return ExitCode::ok;
}

} // namespace

void register_sbom(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<SbomArgs>();
  auto* cmd =
      app.add_subcommand("sbom", "Write the SBOM (SPDX 2.3 or CycloneDX 1.6 JSON) of an image or a lock");
  cmd->add_option(
         "IMAGE|LOCK", args->target,
         "A lock (or the spec beside it), an image lockstep built (oci:DIR, a layout, an archive), or "
         "docker://REF for the SBOM attached to it")
      ->capture_default_str();
  cmd->add_option("--format", args->format,
                  "spdx-json (default; or by -o's name: .spdx.json) or cyclonedx-json (.cdx.json)")
      ->type_name("F");
  cmd->add_option("-o,--output", args->output, "Write to FILE (atomically) instead of standard output")
      ->type_name("FILE");
  cmd->add_option("--lock", args->lock, "For an IMAGE: the lock it was built from (default ./lockstep.lock)")
      ->type_name("LOCK");
  cmd->add_flag("--scan", args->scan,
                "Describe what the image records itself (dpkg status, dist-info, conda-meta), even "
                "where a lock or an attached SBOM is found");
  cmd->add_option("--name", args->name,
                  "The name the SBOM gives what it describes (default: the spec's name, the image's title)")
      ->type_name("NAME");
  add_common_flags(*cmd, ctx);
  add_registry_flags(*cmd, ctx);
  cmd->footer(command_footer(
      k_examples, {ExitCode::ok, ExitCode::check_failed, ExitCode::invalid_input, ExitCode::external}));
  cmd->callback([args, &ctx] { ctx.action = [args, &ctx] { return run_sbom(*args, ctx); }; });
}

} // namespace lockstep::cli
