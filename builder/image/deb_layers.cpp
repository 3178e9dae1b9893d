#include "builder/image/deb_layers.hpp"

#include "builder/image/deb_package.hpp"
#include "builder/image/layer_plan.hpp"
#include "builder/image/run_step.hpp"
#include "builder/lock/lock.hpp"
#include "support/base/json.hpp"
#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/debian/apt_packages.hpp"
#include "support/debian/deb822.hpp"
#include "support/net/http.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace lockstep::builder {

namespace {

using json = nlohmann::json;

constexpr const char* k_info_ns = "deb-info";
// 2: members below symlinks resolved; 3: over a base, whiteouts compared where paths lie in the image
constexpr const char* k_deb_layer_version = "lockstep-deb-layer-3";
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
                              const BlobStore& store, DebLayerOptions options, DebLayerPaths& seen) {
  const std::filesystem::path path = store.blob_path(a.sha256);
  const std::string what = fmt::format("{} {} ({})", a.name, a.version, a.url);
  InstalledDeb deb;
  LS_TRY_ASSIGN(deb.control, read_deb_control(path, what));
  if (deb.control.package != a.name || deb.control.version != a.version) {
    return invalid_input("{}: the package inside is {} {}, not what the lock names", what,
                         deb.control.package, deb.control.version);
  }
  options.package = a.name;
  LS_TRY_ASSIGN(deb.contents, write_deb_data(tar, progress, path, options, seen, what));
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
                                    const DebLayerOptions& options, const BaseMetadata* base) {
  if (auto record = store.get_record(k_info_ns, info_key(a))) {
    if (auto deb = info_from_json(*record)) {
      return std::move(*deb);
    }
  }
  NullSink sink;
  TarWriter tar(sink);
  log::Progress progress("", 0);
  DebLayerPaths seen;
  if (base != nullptr) {
    seed_base_paths(seen, base->directories, base->symlinks);
  }
  try {
    LS_TRY_ASSIGN(InstalledDeb deb, read_deb(tar, progress, a, store, options, seen));
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

// ---- over a base image ----

// A package of the base that a locked deb replaces.
struct Replaced {
  const InstalledPackage* old = nullptr;
  std::string old_dpkg_name; ///< its info file name ("libfoo:amd64" for Multi-Arch: same, else "libfoo")
};

std::string dpkg_name_of(const AptPackage& p) {
  return p.multi_arch == "same" ? p.name + ":" + p.architecture : p.name;
}

// What the base has installed, and which of it each locked deb replaces (same name and architecture,
// an `all` package counting as any).
struct BaseState {
  std::vector<InstalledPackage> installed;
  std::map<std::string, Replaced> replaced; ///< by "name:arch" of the locked deb
  std::map<std::string, Diversion> diversions;
  std::map<std::string, StatOverride> statoverrides;
};

Result<BaseState> base_state(const BaseMetadata& base,
                             const std::vector<const envspec::LockedArtifact*>& debs) {
  BaseState b;
  LS_TRY_ASSIGN(b.installed, parse_dpkg_status(base.dpkg_status, "base image: /var/lib/dpkg/status"));
  for (const envspec::LockedArtifact* a : debs) {
    for (const InstalledPackage& i : b.installed) {
      const AptPackage& p = i.package;
      if (p.name == a->name && (p.architecture == a->arch || p.architecture == "all" || a->arch == "all" ||
                                p.architecture.empty())) {
        b.replaced[a->name + ":" + a->arch] = Replaced{&i, dpkg_name_of(p)};
      }
    }
  }
  LS_TRY_ASSIGN(b.diversions, parse_diversions(base.dpkg_diversions, "base image: /var/lib/dpkg/diversions"));
  LS_TRY_ASSIGN(b.statoverrides, parse_statoverride(base.dpkg_statoverride, base.passwd, base.group,
                                                    "base image: /var/lib/dpkg/statoverride"));
  return b;
}

bool is_replaced(const BaseState& b, const InstalledPackage& i) {
  return std::any_of(b.replaced.begin(), b.replaced.end(), [&](const auto& r) { return r.second.old == &i; });
}

// The lines of `text` whose package (the last word, without "/noawait") is not in `drop`.
std::string without_packages(const std::string& text, const std::set<std::string>& drop) {
  std::string out;
  for (const std::string_view line : text_lines(text)) {
    std::string who(line.substr(line.rfind(' ') == std::string_view::npos ? 0 : line.rfind(' ') + 1));
    if (who.ends_with("/noawait")) {
      who.resize(who.size() - 8);
    }
    if (!line.empty() && drop.count(who) == 0) {
      out += line;
      out += '\n';
    }
  }
  return out;
}

// The base's database as the new one keeps it: its paragraphs but the replaced ones, its
// architectures, its trigger interests but the replaced packages', and the replaced packages'
// configured versions.
BaseDatabase base_database(const BaseMetadata& base, const BaseState& b,
                           const std::vector<InstalledDeb>& installed) {
  BaseDatabase db;
  std::set<std::string> dropped;
  for (const auto& [key, r] : b.replaced) {
    dropped.insert(r.old_dpkg_name);
  }
  for (const InstalledDeb& d : installed) {
    // Keyed by the new package's dpkg name, which may differ from the old one's (Multi-Arch changed).
    auto r = b.replaced.find(d.control.package + ":" + d.control.architecture);
    if (r != b.replaced.end() && r->second.old->state == "installed") {
      db.config_versions[d.control.dpkg_name()] = r->second.old->package.version.str();
    }
  }
  for (const InstalledPackage& i : b.installed) {
    if (is_replaced(b, i)) {
      continue;
    }
    std::string text = i.package.control;
    while (text.ends_with("\n\n")) {
      text.pop_back();
    }
    db.status.push_back(BaseDatabase::Paragraph{i.package.name, i.package.architecture, std::move(text)});
  }
  for (const std::string_view line : text_lines(base.dpkg_arch)) {
    db.arches.emplace_back(deb822_trim(line));
  }
  for (const auto& [name, text] : base.dpkg_triggers) {
    if (name == "File") {
      db.file_triggers = without_packages(text, dropped);
    } else if (name != "Unincorp" && name != "Lock") {
      std::string kept = without_packages(text, dropped);
      if (!kept.empty()) {
        db.triggers[name] = std::move(kept);
      }
    }
  }
  return db;
}

// Where a package's `path` lies in the image: a path another package diverted goes to the diverted
// path, and parents are resolved through the base's links.
std::string location_in_base(const BaseMetadata& base, const BaseState& b, const std::string& path,
                             const std::string& package) {
  auto d = b.diversions.find(path);
  if (d != b.diversions.end() && d->second.by != package) {
    return resolve_in_base(base, d->second.to);
  }
  return resolve_in_base(base, path);
}

// The package name of a dpkg info name ("libc6:amd64" -> "libc6").
std::string package_of_info_name(const std::string& name) {
  return name.substr(0, name.find(':'));
}

// Whiteouts for what the replaced versions had and the new ones don't: their files no other
// package lists (never a directory), and their info files the new database doesn't write. Paths are
// compared where they lie in the image (diversions applied, parents resolved through the base's
// links), so a file that moved from /bin to /usr/bin in the new version is not whited out over a
// merged-/usr base.
std::set<std::string> obsolete_paths(const BaseMetadata& base, const BaseState& b,
                                     const std::vector<InstalledDeb>& installed) {
  std::set<std::string> out;
  if (b.replaced.empty()) {
    return out;
  }
  std::set<std::string> old_names;
  for (const auto& [key, r] : b.replaced) {
    old_names.insert(r.old_dpkg_name);
  }
  std::set<std::string> kept; // image paths of what a package that stays or comes lists
  for (const auto& [name, list] : base.dpkg_lists) {
    if (old_names.count(name) != 0) {
      continue;
    }
    const std::string package = package_of_info_name(name);
    for (std::string_view p : lines_of(list)) {
      if (p.size() >= 2 && p.starts_with("/")) {
        kept.insert(location_in_base(base, b, std::string(p), package));
      }
    }
  }
  std::set<std::string> new_info;
  for (const InstalledDeb& d : installed) {
    for (const std::string& p : d.contents.paths) {
      if (p.size() >= 2 && p.starts_with("/")) {
        kept.insert(location_in_base(base, b, p, d.control.package));
      }
    }
    const std::string n = d.control.dpkg_name();
    new_info.insert(n + ".list");
    if (d.control.files.count("md5sums") != 0 || !d.contents.md5s.empty()) {
      new_info.insert(n + ".md5sums");
    }
    for (const auto& [file, content] : d.control.files) {
      new_info.insert(n + "." + file);
    }
  }
  // A listed path that is the parent of another listed path is a directory (or the base's link to
  // one, like merged /usr's /bin): never whited out.
  std::set<std::string> parents;
  auto add_parents = [&](const std::string& p) {
    for (std::size_t slash = p.find('/', 1); slash != std::string::npos; slash = p.find('/', slash + 1)) {
      parents.insert(p.substr(0, slash));
    }
  };
  for (const auto& [name, list] : base.dpkg_lists) {
    for (std::string_view p : lines_of(list)) {
      add_parents(std::string(p));
    }
  }
  for (const InstalledDeb& d : installed) {
    std::for_each(d.contents.paths.begin(), d.contents.paths.end(), add_parents);
  }
  const std::set<std::string> dirs(base.directories.begin(), base.directories.end());
  for (const std::string& name : old_names) {
    if (auto list = base.dpkg_lists.find(name); list != base.dpkg_lists.end()) {
      const std::string package = package_of_info_name(name);
      for (std::string_view line : lines_of(list->second)) {
        const std::string p(line);
        if (p.size() < 2 || !p.starts_with("/") || parents.count(p) != 0) {
          continue;
        }
        const std::string at = location_in_base(base, b, p, package);
        if (kept.count(at) == 0 && dirs.count(at) == 0) {
          out.insert(at);
        }
      }
    }
    for (const std::string& info : base.dpkg_info_names) {
      if (info.starts_with(name + ".") && new_info.count(info) == 0) {
        out.insert("var/lib/dpkg/info/" + info);
      }
    }
  }
  return out;
}

// Writes an OCI whiteout for each path (`dir/.wh.name`).
void write_whiteouts(TarWriter& tar, const std::set<std::string>& paths, std::int64_t epoch) {
  for (const std::string& p : paths) {
    const std::size_t slash = p.rfind('/');
    TarEntry e;
    e.path = slash == std::string::npos ? ".wh." + p : p.substr(0, slash + 1) + ".wh." + p.substr(slash + 1);
    e.type = TarEntry::Type::file;
    e.mode = 0644;
    e.mtime = epoch;
    e.size = 0;
    tar.add(e);
  }
}

} // namespace

Result<void> build_deb_layers(const envspec::Lock& lock, const DebInputs& inputs, ImageState& image) {
  const BlobStore& store = *image.store;
  std::vector<const envspec::LockedArtifact*> debs;
  for (const envspec::LockedArtifact& a : lock.artifacts) {
    if (a.kind == "deb") {
      debs.push_back(&a);
    }
  }
  if (debs.empty()) {
    return {};
  }
  const BaseMetadata* base = image.base();
  const std::string settings = layer_settings(image.codec);
  // The layer of each group (in k_groups order, groups without packages left out), by what it is
  // made of.
  std::vector<std::pair<std::string, Digest>> group_layers;
  {
    bool first = true;
    for (const std::string& group : k_groups) {
      FingerprintHasher fp;
      fp.add(k_layer_format_version, k_deb_layer_version, settings, image.epoch, group, first ? 1 : 0);
      if (base != nullptr) {
        fp.add("over base", base->manifest.str());
      }
      bool any = false;
      for (const envspec::LockedArtifact* a : debs) {
        if (a->group == group) {
          fp.add(a->name, a->version, a->arch, a->sha256.hex());
          any = true;
        }
      }
      if (any) {
        group_layers.emplace_back(group, fp.finish());
        first = false;
      }
    }
  }
  // Over a base whose package layers are to be written, its root (which configuring them needs)
  // unpacks meanwhile.
  runner::RootHead head;
  const bool head_started =
      base != nullptr && std::any_of(group_layers.begin(), group_layers.end(), [&](const auto& g) {
        return !find_cached_layer(g.second, store, image.codec);
      });
  if (head_started) {
    LS_TRY_ASSIGN(head, runner::start_root(store, image.layers, image.diff_ids, run_step_unpack_options()));
  }
  // 1. Every .deb into the store, size and sha256 checked against the lock.
  std::vector<Download> downloads;
  for (const envspec::LockedArtifact* a : debs) {
    downloads.push_back(Download{a->url, a->sha256, a->size, a->name});
    if (std::string fallback = deb_snapshot_url(lock, *a, inputs.snapshot_bases); !fallback.empty()) {
      downloads.back().fallback_urls.push_back(std::move(fallback));
    }
  }
  {
    log::Timer t("fetch packages");
    FetchOptions fetch;
    fetch.max_size = k_max_deb_size;
    fetch.local_roots = image.local_roots;
    LS_TRY(fetch_all(store, downloads, fetch));
  }
  // Over a base: what it has, what the locked debs replace, its diversions and stat overrides.
  std::optional<BaseState> over;
  DebLayerOptions options{image.epoch, true, nullptr, nullptr, {}};
  if (base != nullptr) {
    LS_TRY_ASSIGN(over, base_state(*base, debs));
    options.merged_usr = base->merged_usr;
    options.diversions = &over->diversions;
    options.statoverrides = &over->statoverrides;
    for (const auto& [key, r] : over->replaced) {
      std::string version = "?";
      for (const envspec::LockedArtifact* a : debs) {
        if (a->name + ":" + a->arch == key) {
          version = a->version;
        }
      }
      log::info("{} {} replaces the base's {}", key.substr(0, key.rfind(':')), version,
                r.old->package.version.str());
    }
  }
  // 2. One layer per group, in a fixed order; the first also holds the merged-/usr symlinks.
  std::vector<InstalledDeb> installed;
  bool first = true;
  for (const auto& [group, fingerprint] : group_layers) {
    std::vector<const envspec::LockedArtifact*> members;
    for (const envspec::LockedArtifact* a : debs) {
      if (a->group == group) {
        members.push_back(a);
      }
    }
    std::map<std::string, InstalledDeb> fresh; // infos read while writing the layer
    const bool with_links = first && base == nullptr;
    auto layer = build_generated_layer(
        fingerprint, true, store, image.codec, "packages (" + group + ")", 0,
        [&](TarWriter& tar, log::Progress& progress) -> Result<void> {
          DebLayerPaths seen;
          if (base != nullptr) {
            seed_base_paths(seen, base->directories, base->symlinks);
          }
          if (with_links) {
            LS_TRY(emit_merged_usr_links(tar, seen, image.epoch, inputs.native_arch));
          }
          for (const envspec::LockedArtifact* a : members) {
            LS_TRY_ASSIGN(fresh[a->name + ":" + a->arch], read_deb(tar, progress, *a, store, options, seen));
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
        LS_TRY_ASSIGN(InstalledDeb deb, installed_info(*a, store, options, base));
        installed.push_back(std::move(deb));
      }
    }
    append_layer(image, *layer, fmt::format("packages ({}): {} debs", group, members.size()));
    first = false;
  }
  // 3. The dpkg database, so dpkg and apt in the image know what is installed.
  const bool configure = needs_configure(installed);
  {
    FingerprintHasher fp;
    fp.add(k_layer_format_version, k_deb_layer_version, settings, image.epoch, "dpkg-database",
           inputs.native_arch, configure ? 1 : 0);
    if (base != nullptr) {
      fp.add("over base", base->manifest.str());
    }
    for (const envspec::LockedArtifact* a : debs) {
      fp.add(a->name, a->arch, a->sha256.hex());
    }
    std::optional<BaseDatabase> base_db;
    std::set<std::string> whiteouts;
    if (base != nullptr) {
      base_db = base_database(*base, *over, installed);
      whiteouts = obsolete_paths(*base, *over, installed);
    }
    auto layer = build_generated_layer(
        fp.finish(), true, store, image.codec, "dpkg database", 0,
        [&](TarWriter& tar, log::Progress& /*progress*/) -> Result<void> {
          DebLayerPaths seen;
          if (base != nullptr) {
            seed_base_paths(seen, base->directories, base->symlinks);
          }
          LS_TRY(write_dpkg_database(tar, seen, installed,
                                     configure ? DebState::unpacked : DebState::installed, image.epoch,
                                     inputs.native_arch, base_db ? &*base_db : nullptr));
          write_whiteouts(tar, whiteouts, image.epoch);
          return {};
        });
    if (!layer) {
      return layer.error();
    }
    append_layer(image, *layer, fmt::format("dpkg database: {} packages", installed.size()));
  }
  if (!configure) {
    return {};
  }
  // 4. Maintainer scripts, in the build sandbox over the image so far (mmdebstrap's way).
  LS_TRY(check_configure_possible(
      installed,
      ImageTools{has_path(installed, {"/bin/sh", "/usr/bin/sh"}) || (base != nullptr && base->has_sh),
                 has_path(installed, {"/usr/bin/dpkg"}) || (base != nullptr && base->has_dpkg)}));
  std::vector<const InstalledDeb*> order = dependency_order(installed);
  std::vector<InstalledDeb> ordered;
  ordered.reserve(order.size());
  for (const InstalledDeb* d : order) {
    ordered.push_back(*d);
  }
  std::map<std::string, std::string> upgrades; // dpkg name -> the base's version it replaces
  if (over) {
    for (const InstalledDeb& d : ordered) {
      auto r = over->replaced.find(d.control.package + ":" + d.control.architecture);
      if (r != over->replaced.end()) {
        upgrades[d.control.dpkg_name()] = r->second.old->package.version.str();
      }
    }
  }
  envspec::RunStep step;
  step.sh = configure_script(ordered, upgrades);
  step.network = false;
  StepOptions run; // in /, whatever the image's WorkingDir
  run.label = "configure packages";
  run.root_head = head_started ? &head : nullptr;
  Result<BuiltLayer> built = build_run_step(step, 0, image, run);
  image.emulated = image.emulated || image.emulation.has_value();
  if (!built) {
    return built.error();
  }
  const BuiltLayer& layer = *built;
  append_layer(image, layer, "configure packages (maintainer scripts, dpkg --configure -a)");
  return {};
}

} // namespace lockstep::builder
