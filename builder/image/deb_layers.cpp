#include "builder/image/deb_layers.hpp"

#include "builder/image/deb_package.hpp"
#include "builder/image/layer_plan.hpp"
#include "builder/image/run_step.hpp"
#include "support/debian/deb822.hpp"
#include "support/http.hpp"
#include "support/json.hpp"
#include "support/log.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace lockstep::builder {

namespace {

using json = nlohmann::json;

constexpr const char* k_info_ns = "deb-info";
constexpr const char* k_deb_layer_version = "lockstep-deb-layer-2"; // 2: members below symlinks resolved
constexpr std::uint64_t k_max_deb_size = 16ULL << 30;
const std::vector<std::string> k_groups = {"base", "mpi", "cuda", "python", "app"};

// A ByteSink that drops everything (listing a package's paths without building a layer).
class NullSink final : public ByteSink {
public:
  void write(const void* /*data*/, std::size_t /*size*/) override {}
};

std::string info_key(const envspec::LockedArtifact& a) {
  return a.sha256.hex() + "-v2";
}

json info_to_json(const InstalledDeb& deb) {
  json files = json::object();
  for (const auto& [k, v] : deb.control.files) {
    files[k] = v;
  }
  return json{{"control", deb.control.control},       {"package", deb.control.package},
              {"version", deb.control.version},       {"architecture", deb.control.architecture},
              {"multi_arch", deb.control.multi_arch}, {"files", files},
              {"paths", deb.contents.paths},          {"md5s", deb.contents.md5s}};
}

std::optional<InstalledDeb> info_from_json(const std::string& text) {
  Result<json> parsed = parse_json(text, "installed package record");
  if (!parsed) {
    return std::nullopt;
  }
  try {
    const json& j = *parsed;
    InstalledDeb deb;
    deb.control.control = j.at("control").get<std::string>();
    deb.control.package = j.at("package").get<std::string>();
    deb.control.version = j.at("version").get<std::string>();
    deb.control.architecture = j.at("architecture").get<std::string>();
    deb.control.multi_arch = j.at("multi_arch").get<std::string>();
    for (const auto& [k, v] : j.at("files").items()) {
      deb.control.files[k] = v.get<std::string>();
    }
    deb.contents.paths = j.at("paths").get<std::vector<std::string>>();
    deb.contents.md5s = j.at("md5s").get<std::vector<std::pair<std::string, std::string>>>();
    return deb;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// Reads a locked .deb (its control data must name the package and version the lock does) and
// streams its data into `tar`.
Result<InstalledDeb> read_deb(TarWriter& tar, log::Progress& progress, const envspec::LockedArtifact& a,
                              const BlobStore& store, std::int64_t epoch, DebLayerPaths& seen) {
  const std::filesystem::path path = store.blob_path(a.sha256);
  const std::string what = fmt::format("{} {} ({})", a.name, a.version, a.url);
  InstalledDeb deb;
  LS_TRY_ASSIGN(deb.control, read_deb_control(path, what));
  if (deb.control.package != a.name || deb.control.version != a.version) {
    return invalid_input("{}: the package inside is {} {}, not what the lock names", what,
                         deb.control.package, deb.control.version);
  }
  LS_TRY_ASSIGN(deb.contents, write_deb_data(tar, progress, path, DebLayerOptions{epoch, true}, seen, what));
  return deb;
}

// Records what the dpkg database needs of a package, so a build whose layer is cached need not
// read the .deb again. A failed write only costs a re-read next time.
void remember(const BlobStore& store, const envspec::LockedArtifact& a, const InstalledDeb& deb) {
  if (auto r = store.put_record(k_info_ns, info_key(a), info_to_json(deb).dump()); !r) {
    log::debug("can't record package info: {}", r.error().message);
  }
}

// A package's control data and path list: from the record cache, else by reading the .deb.
Result<InstalledDeb> installed_info(const envspec::LockedArtifact& a, const BlobStore& store,
                                    std::int64_t epoch) {
  if (auto record = store.get_record(k_info_ns, info_key(a))) {
    if (auto deb = info_from_json(*record)) {
      return std::move(*deb);
    }
  }
  NullSink sink;
  TarWriter tar(sink);
  log::Progress progress("", 0);
  DebLayerPaths seen;
  try {
    LS_TRY_ASSIGN(InstalledDeb deb, read_deb(tar, progress, a, store, epoch, seen));
    remember(store, a, deb);
    return deb;
  } catch (const Failure& f) {
    return f.error();
  }
}

bool has_path(const std::vector<InstalledDeb>& debs, std::initializer_list<std::string_view> paths) {
  for (const InstalledDeb& d : debs) {
    for (const std::string& p : d.contents.paths) {
      if (std::find(paths.begin(), paths.end(), p) != paths.end()) {
        return true;
      }
    }
  }
  return false;
}

// Orders packages so that each comes after what it depends on (Pre-Depends and Depends), for the
// preinst scripts; cycles are broken by name. Deterministic for the same set.
std::vector<const InstalledDeb*> dependency_order(const std::vector<InstalledDeb>& debs) {
  std::map<std::string, const InstalledDeb*> by_name;
  std::map<std::string, std::string> provider;
  for (const InstalledDeb& d : debs) {
    by_name[d.control.package] = &d;
    provider[d.control.package] = d.control.package;
  }
  std::map<std::string, std::set<std::string>> deps;
  for (const InstalledDeb& d : debs) {
    std::set<std::string>& out = deps[d.control.package];
    auto paragraphs = parse_deb822(d.control.control, d.control.package);
    if (!paragraphs || paragraphs->empty()) {
      continue;
    }
    for (const char* field : {"Pre-Depends", "Depends"}) {
      if (const std::string* v = paragraphs->front().find(field)) {
        if (auto rel = parse_relation_field(*v)) {
          for (const auto& group : *rel) {
            for (const DebRelation& alt : group) {
              if (by_name.count(alt.name) != 0 && alt.name != d.control.package) {
                out.insert(alt.name);
              }
            }
          }
        }
      }
    }
  }
  std::vector<const InstalledDeb*> order;
  std::set<std::string> done;
  std::set<std::string> visiting;
  std::function<void(const std::string&)> visit = [&](const std::string& name) {
    if (done.count(name) != 0 || visiting.count(name) != 0) {
      return;
    }
    visiting.insert(name);
    for (const std::string& dep : deps[name]) {
      visit(dep);
    }
    visiting.erase(name);
    done.insert(name);
    order.push_back(by_name[name]);
  };
  for (const auto& [name, deb] : by_name) {
    visit(name);
  }
  return order;
}

} // namespace

void append_layer(PackageBuildState& state, const BuiltLayer& layer, const std::string& created_by) {
  log::info("layer {} {} {}{}", layer.descriptor.digest.str().substr(0, 19),
            log::human_size(layer.descriptor.size), created_by, layer.cached ? " (cached)" : "");
  state.layers.push_back(layer.descriptor);
  state.diff_ids.push_back(layer.diff_id);
  state.cached.push_back(layer.cached);
  state.history.push_back(created_by);
}

Result<void> build_deb_layers(const envspec::Lock& lock, PackageBuildState& state) {
  const BlobStore& store = *state.store;
  std::vector<const envspec::LockedArtifact*> debs;
  for (const envspec::LockedArtifact& a : lock.artifacts) {
    if (a.kind == "deb") {
      debs.push_back(&a);
    }
  }
  if (debs.empty()) {
    return {};
  }
  // 1. Every .deb into the store, size and sha256 checked against the lock.
  std::vector<Download> downloads;
  for (const envspec::LockedArtifact* a : debs) {
    downloads.push_back(Download{a->url, a->sha256, a->size, a->name});
  }
  {
    log::Timer t("fetch packages");
    FetchOptions fetch;
    fetch.max_size = k_max_deb_size;
    fetch.local_roots = state.local_roots;
    LS_TRY(fetch_all(store, downloads, fetch));
  }
  // 2. One layer per group, in a fixed order; the first also holds the merged-/usr symlinks.
  const std::string settings = layer_settings(state.codec);
  std::vector<InstalledDeb> installed;
  bool first = true;
  for (const std::string& group : k_groups) {
    std::vector<const envspec::LockedArtifact*> members;
    for (const envspec::LockedArtifact* a : debs) {
      if (a->group == group) {
        members.push_back(a);
      }
    }
    if (members.empty()) {
      continue;
    }
    FingerprintHasher fp;
    fp.add(k_layer_format_version, k_deb_layer_version, settings, state.epoch, group, first ? 1 : 0);
    for (const envspec::LockedArtifact* a : members) {
      fp.add(a->name, a->version, a->arch, a->sha256.hex());
    }
    const Digest fingerprint = fp.finish();
    std::map<std::string, InstalledDeb> fresh; // infos read while writing the layer
    const bool with_links = first;
    auto layer =
        build_generated_layer(fingerprint, true, store, state.codec, "packages (" + group + ")", 0,
                              [&](TarWriter& tar, log::Progress& progress) -> Result<void> {
                                DebLayerPaths seen;
                                if (with_links) {
                                  LS_TRY(emit_merged_usr_links(tar, seen, state.epoch, state.native_arch));
                                }
                                for (const envspec::LockedArtifact* a : members) {
                                  LS_TRY_ASSIGN(fresh[a->name + ":" + a->arch],
                                                read_deb(tar, progress, *a, store, state.epoch, seen));
                                }
                                return {};
                              });
    if (!layer) {
      return layer.error();
    }
    for (const envspec::LockedArtifact* a : members) {
      auto it = fresh.find(a->name + ":" + a->arch);
      if (it != fresh.end()) {
        remember(store, *a, it->second);
        installed.push_back(std::move(it->second));
      } else {
        LS_TRY_ASSIGN(InstalledDeb deb, installed_info(*a, store, state.epoch));
        installed.push_back(std::move(deb));
      }
    }
    append_layer(state, *layer, fmt::format("packages ({}): {} debs", group, members.size()));
    first = false;
  }
  // 3. The dpkg database, so dpkg and apt in the image know what is installed.
  const bool configure = needs_configure(installed);
  {
    FingerprintHasher fp;
    fp.add(k_layer_format_version, k_deb_layer_version, settings, state.epoch, "dpkg-database",
           state.native_arch, configure ? 1 : 0);
    for (const envspec::LockedArtifact* a : debs) {
      fp.add(a->name, a->arch, a->sha256.hex());
    }
    auto layer = build_generated_layer(fp.finish(), true, store, state.codec, "dpkg database", 0,
                                       [&](TarWriter& tar, log::Progress& /*progress*/) -> Result<void> {
                                         DebLayerPaths seen;
                                         return write_dpkg_database(tar, seen, installed,
                                                                    configure ? DebState::unpacked
                                                                              : DebState::installed,
                                                                    state.epoch, state.native_arch);
                                       });
    if (!layer) {
      return layer.error();
    }
    append_layer(state, *layer, fmt::format("dpkg database: {} packages", installed.size()));
  }
  if (!configure) {
    return {};
  }
  // 4. Maintainer scripts, in the build sandbox over the image so far (mmdebstrap's way).
  LS_TRY(check_configure_possible(installed, ImageTools{has_path(installed, {"/bin/sh", "/usr/bin/sh"}),
                                                        has_path(installed, {"/usr/bin/dpkg"})}));
  std::vector<const InstalledDeb*> order = dependency_order(installed);
  std::vector<InstalledDeb> ordered;
  for (const InstalledDeb* d : order) {
    ordered.push_back(*d);
  }
  envspec::RunStep step;
  step.sh = configure_script(ordered);
  step.network = false;
  StepContext ctx;
  ctx.store = &store;
  ctx.codec = state.codec;
  ctx.epoch = state.epoch;
  ctx.layers = state.layers;
  ctx.diff_ids = state.diff_ids;
  ctx.env = state.env;
  ctx.label = "configure packages";
  Result<BuiltLayer> built = build_run_step(step, 0, ctx);
  if (!built && ::geteuid() != 0 && built.error().code == ExitCode::check_failed) {
    return Error{
        ExitCode::check_failed,
        built.error().message +
            "\nlockstep builds without root map only your own uid in the build sandbox, so maintainer "
            "scripts that change file ownership (adduser, base-files, passwd) fail; build this image "
            "as root (docs/debs.md, \"Rootless builds\")"};
  }
  if (!built) {
    return built.error();
  }
  const BuiltLayer& layer = *built;
  append_layer(state, layer, "configure packages (maintainer scripts, dpkg --configure -a)");
  return {};
}

} // namespace lockstep::builder
