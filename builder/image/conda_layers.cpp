// The "conda environment" layer: a lock's conda packages linked into the prefix with
// support/conda/link. See conda_layers.hpp and docs/conda.md ("The image's environment").
#include "builder/image/conda_layers.hpp"

#include "builder/image/layer_plan.hpp"
#include "builder/lock/python_target.hpp"
#include "support/base/log.hpp"
#include "support/base/parallel.hpp"
#include "support/conda/activation.hpp"
#include "support/conda/link.hpp"
#include "support/conda/match_spec.hpp"
#include "support/conda/package.hpp"
#include "support/net/http.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>

namespace lockstep::builder {

namespace {

namespace fs = std::filesystem;

// Bump when what the layer holds for the same packages changes (support/conda/link's output included).
constexpr const char* k_conda_layer_version = "lockstep-conda-layer-2";
// The store's records of what a conda layer's packages ask of the image beyond its files (link
// scripts, activation variables), by the layer's fingerprint: a cached layer still says them.
constexpr std::string_view k_env_facts_ns = "conda-env";
constexpr std::uint64_t k_max_conda_package_size = 16ULL << 30;

// One locked conda package and the text its origin's record views.
struct CondaInput {
  const envspec::LockedArtifact* artifact = nullptr;
  std::string filename;
  std::string sha256;
  conda::PackageOrigin origin;
};

// Checks a lock's conda entry before anything is fetched for it; returns its archive's file name.
Result<std::string> check_locked_package(const envspec::LockedArtifact& a, std::size_t index) {
  const std::string where = fmt::format("the lock's artifacts[{}] ({} {})", index, a.name, a.version);
  if (!a.conda) {
    return invalid_input("{}: a conda package without its record; run `lockstep lock` to rewrite the lock",
                         where);
  }
  const std::string filename = url_filename(a.url);
  const auto format = conda::package_format_of(filename);
  const std::string stem = fmt::format("{}-{}-{}", a.name, a.version, a.conda->build);
  if (!format ||
      filename.substr(0, filename.size() - (*format == conda::PackageFormat::conda ? 6 : 8)) != stem) {
    return invalid_input("{}: its URL does not end with {}.conda or {}.tar.bz2; run `lockstep lock` to "
                         "rewrite the lock",
                         where, stem, stem);
  }
  if (a.size == 0) {
    return invalid_input("{}: size 0; run `lockstep lock` to rewrite the lock", where);
  }
  return filename;
}

// The record the lock keeps, as support/conda's Record (views into `in` and its artifact).
void fill_record(CondaInput& in) {
  const envspec::LockedArtifact& a = *in.artifact;
  const envspec::LockedCondaRecord& c = *a.conda;
  conda::Record& r = in.origin.record;
  r.filename = in.filename;
  r.name = a.name;
  r.version = a.version;
  r.build = c.build;
  r.build_number = c.build_number;
  r.depends.assign(c.depends.begin(), c.depends.end());
  r.constrains.assign(c.constrains.begin(), c.constrains.end());
  r.track_features.assign(c.track_features.begin(), c.track_features.end());
  r.noarch = conda::noarch_from_name(c.noarch).value_or(conda::NoArch::none); // lockfile.cpp checked it
  r.subdir = c.subdir;
  r.timestamp_ms = c.timestamp;
  r.md5 = c.md5;
  r.sha256 = in.sha256;
  r.size = a.size;
  r.license = c.license;
  r.python_site_packages_path = c.python_site_packages_path;
}

// Install order (support/conda/link's install_order) of `inputs`.
std::vector<std::size_t> install_order(const std::vector<CondaInput>& inputs) {
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> depends;
  for (const CondaInput& in : inputs) {
    names.push_back(in.artifact->name);
    depends.push_back(in.artifact->conda->depends);
  }
  return conda::install_order(names, depends);
}

// The spec's packages.conda entries that name `name`.
std::vector<std::string> requested_specs(const envspec::Spec& spec, const std::string& name) {
  std::vector<std::string> out;
  for (const envspec::PackageRequest& r : spec.packages.conda) {
    auto m = conda::MatchSpec::parse(r.text, conda::SpecMode::lenient);
    if (m && m->name().matches(name)) {
      out.push_back(r.text);
    }
  }
  return out;
}

// Moves every installed file's bytes of `plan` into the file `fd` (number `file`), leaving a
// StoredData in their place.
Result<void> spill(conda::PackagePlan& plan, int fd, std::uint32_t file, const std::string& what) {
  std::uint64_t offset = 0;
  for (conda::PrefixPath& p : plan.paths) {
    if (p.kind != conda::PrefixKind::file) {
      continue;
    }
    LS_TRY(write_all(fd, p.data.data(), p.data.size(), what));
    p.stored = conda::StoredData{file, offset, p.data.size()};
    offset += p.data.size();
    std::string().swap(p.data);
  }
  return {};
}

// Copies `size` bytes at `offset` of `fd` into the tar member being written.
Result<void> copy_stored(int fd, const conda::StoredData& d, TarWriter& tar, log::Progress& progress,
                         std::vector<char>& buf, const std::string& what) {
  std::uint64_t done = 0;
  while (done < d.size) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), d.size - done));
    const ssize_t n = ::pread(fd, buf.data(), want, static_cast<off_t>(d.offset + done));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return io_error("reading back {}: {}", what, n < 0 ? std::strerror(errno) : "unexpected end of file");
    }
    tar.write_data(buf.data(), static_cast<std::size_t>(n));
    progress.advance(static_cast<std::uint64_t>(n));
    done += static_cast<std::uint64_t>(n);
  }
  return {};
}

// The prefix's parent directories ("opt") and the directories the plan implies but doesn't list,
// each once, before the first path under it.
void add_parent_dirs(TarWriter& tar, const std::string& path, std::int64_t mtime,
                     std::set<std::string>& made) {
  for (std::size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    std::string dir = path.substr(0, slash);
    if (made.insert(dir).second) {
      TarEntry e;
      e.path = std::move(dir);
      e.type = TarEntry::Type::dir;
      e.mode = 0755;
      e.mtime = mtime;
      tar.add(e);
    }
  }
}

// Writes the merged prefix under `prefix` (absolute, no trailing '/') into `tar`.
Result<void> write_prefix(const conda::PrefixPlan& prefix_plan, const std::string& prefix,
                          const std::vector<UniqueFd>& spills, std::int64_t epoch, TarWriter& tar,
                          log::Progress& progress) {
  const std::string root = prefix.substr(1);
  std::set<std::string> made;
  add_parent_dirs(tar, root + "/", epoch, made);
  std::vector<char> buf(1U << 20);
  for (const conda::PrefixPath& p : prefix_plan.paths) {
    TarEntry e;
    e.path = root + "/" + p.path;
    add_parent_dirs(tar, e.path, epoch, made);
    e.mode = p.mode;
    e.mtime = p.mtime;
    switch (p.kind) {
    case conda::PrefixKind::directory:
      if (!made.insert(e.path).second) {
        continue;
      }
      e.type = TarEntry::Type::dir;
      tar.add(e);
      break;
    case conda::PrefixKind::symlink:
      e.type = TarEntry::Type::symlink;
      e.link_target = p.target;
      tar.add(e);
      break;
    case conda::PrefixKind::file:
      e.type = TarEntry::Type::file;
      e.size = static_cast<std::int64_t>(p.stored ? p.stored->size : p.data.size());
      tar.add(e);
      if (p.stored) {
        LS_TRY(copy_stored(spills.at(p.stored->file).get(), *p.stored, tar, progress, buf, "/" + e.path));
      } else {
        tar.write_data(p.data.data(), p.data.size());
        progress.advance(p.data.size());
      }
      break;
    }
  }
  return {};
}

// The lock's conda python into `link`: its X.Y and python_site_packages_path (none: left empty).
void set_python(const std::vector<CondaInput>& inputs, conda::LinkOptions& link) {
  for (const CondaInput& in : inputs) {
    if (in.artifact->name == "python") {
      const std::string& v = in.artifact->version;
      const std::size_t dot = v.find('.');
      link.python_version = v.substr(0, dot == std::string::npos ? dot : v.find('.', dot + 1));
      link.python_site_packages_path = in.artifact->conda->python_site_packages_path;
    }
  }
}

// The lock's conda packages, checked; their records are filled by the caller once the vector is
// final (the records view the inputs' own strings).
Result<std::vector<CondaInput>> collect_inputs(const envspec::Spec& spec, const envspec::Lock& lock) {
  std::vector<CondaInput> inputs;
  for (std::size_t i = 0; i < lock.artifacts.size(); ++i) {
    const envspec::LockedArtifact& a = lock.artifacts[i];
    if (a.kind != "conda") {
      continue;
    }
    LS_TRY_ASSIGN(std::string filename, check_locked_package(a, i));
    CondaInput in;
    in.artifact = &a;
    in.filename = std::move(filename);
    in.sha256 = a.sha256.hex();
    if (a.repo >= 0 && static_cast<std::size_t>(a.repo) < lock.repos.size()) {
      in.origin.channel = lock.repos[static_cast<std::size_t>(a.repo)].url;
    }
    in.origin.url = a.url;
    in.origin.requested_specs = requested_specs(spec, a.name);
    inputs.push_back(std::move(in));
  }
  return inputs;
}

// Every archive into the store, size and sha256 checked against the lock.
Result<void> fetch_packages(const std::vector<CondaInput>& inputs, const ImageState& image) {
  std::vector<Download> downloads;
  downloads.reserve(inputs.size());
  for (const CondaInput& in : inputs) {
    downloads.push_back(Download{in.artifact->url, in.artifact->sha256, in.artifact->size, in.filename});
  }
  log::Timer t("fetch conda packages");
  FetchOptions fetch;
  fetch.max_size = k_max_conda_package_size;
  fetch.local_roots = image.local_roots;
  LS_TRY(fetch_all(*image.store, downloads, fetch));
  return {};
}

// What the layer is made of: every input of the plan, in install order.
Digest layer_fingerprint(const std::vector<CondaInput>& inputs, const std::vector<std::size_t>& order,
                         const conda::LinkOptions& link, const ImageState& image) {
  FingerprintHasher fp;
  fp.add(k_layer_format_version, k_conda_layer_version, layer_settings(image.codec), image.epoch, link.prefix,
         link.python_version, link.python_site_packages_path);
  for (std::size_t i : order) {
    const CondaInput& in = inputs[i];
    const envspec::LockedCondaRecord& c = *in.artifact->conda;
    fp.add(in.filename, in.sha256, in.origin.channel, in.origin.url, c.subdir, c.md5, c.license, c.timestamp,
           c.build_number, in.origin.requested_specs.size(), c.depends.size(), c.constrains.size());
    for (const auto* list : {&in.origin.requested_specs, &c.depends, &c.constrains}) {
      for (const std::string& text : *list) {
        fp.add(text);
      }
    }
  }
  return fp.finish();
}

// What the environment asks of the image beyond its files: the link scripts it has (not run) and
// the variables its activation sets.
struct EnvFacts {
  std::vector<std::pair<std::string, std::string>> link_scripts; ///< (dist, prefix path)
  conda::Activation activation;

  [[nodiscard]] std::string to_json() const {
    nlohmann::ordered_json j;
    j["link_scripts"] = link_scripts;
    j["env"] = activation.env;
    j["partly_evaluated"] = activation.partly_evaluated;
    return j.dump();
  }
  static std::optional<EnvFacts> from_json(const std::string& text) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    EnvFacts f;
    try {
      f.link_scripts = j.at("link_scripts").get<decltype(f.link_scripts)>();
      f.activation.env = j.at("env").get<decltype(f.activation.env)>();
      f.activation.partly_evaluated = j.at("partly_evaluated").get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception&) {
      return std::nullopt;
    }
    return f;
  }
};

// Reads and plans package `order[k]` and spills its files to `spill_dir`/k (opened into `fd`); its
// activation files (conda::is_activation_path) are copied to `activation` first.
Result<conda::PackagePlan> plan_one(const CondaInput& in, std::size_t k, const conda::LinkOptions& link,
                                    const BlobStore& store, const fs::path& spill_dir, UniqueFd& fd,
                                    std::map<std::string, std::string>& activation) {
  LS_TRY_ASSIGN(conda::Package pkg,
                conda::read_package_file(store.blob_path(in.artifact->sha256), in.filename));
  if (pkg.index.name != in.artifact->name || pkg.index.version != in.artifact->version ||
      pkg.index.build != in.artifact->conda->build) {
    return invalid_input("{}: the package inside is {}-{}-{}, not what the lock names", in.filename,
                         pkg.index.name, pkg.index.version, pkg.index.build);
  }
  LS_TRY_ASSIGN(conda::PackagePlan plan, conda::plan_package(std::move(pkg), in.origin, link));
  for (const conda::PrefixPath& p : plan.paths) {
    if (p.kind == conda::PrefixKind::file && conda::is_activation_path(p.path)) {
      activation[p.path] = p.data;
    }
  }
  const fs::path file = spill_dir / std::to_string(k);
  fd = UniqueFd(::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return io_error("creating {}: {}", file.string(), std::strerror(errno));
  }
  LS_TRY(spill(plan, fd.get(), static_cast<std::uint32_t>(k), file.string()));
  return plan;
}

// The layer's members: every package read and planned on every core, merged, then written.
Result<void> write_environment(const std::vector<CondaInput>& inputs, const std::vector<std::size_t>& order,
                               const conda::LinkOptions& link, const ImageState& image, TarWriter& tar,
                               log::Progress& progress, EnvFacts& facts) {
  const BlobStore& store = *image.store;
  LS_TRY_ASSIGN(TempDir spill_dir, TempDir::create(store.root() / "tmp", "conda-layer-"));
  std::vector<UniqueFd> spills(inputs.size());
  std::vector<std::optional<Result<conda::PackagePlan>>> plans(inputs.size());
  std::vector<std::map<std::string, std::string>> activation(inputs.size());
  for_each_index(inputs.size(), std::max(1U, std::thread::hardware_concurrency()), [&](std::size_t k) {
    plans[k] = plan_one(inputs[order[k]], k, link, store, spill_dir.path(), spills[k], activation[k]);
  });
  // A later package's file replaces an earlier one's, as in the prefix.
  std::map<std::string, std::string> activation_files;
  for (auto& files : activation) {
    for (auto& [path, data] : files) {
      activation_files[path] = std::move(data);
    }
  }
  facts.activation = conda::evaluate_activation(activation_files, link.prefix);
  std::vector<conda::PackagePlan> ordered;
  ordered.reserve(plans.size());
  for (auto& p : plans) {
    if (!*p) {
      return p->error();
    }
    ordered.push_back(std::move(**p));
  }
  conda::PrefixOptions options;
  options.time = image.epoch;
  options.frozen_message = "this environment is lockstep's image of a lock; change the spec and "
                           "run `lockstep lock` and `lockstep build`";
  LS_TRY_ASSIGN(conda::PrefixPlan prefix_plan, conda::merge_plans(std::move(ordered), options));
  facts.link_scripts = prefix_plan.link_scripts;
  return write_prefix(prefix_plan, link.prefix, spills, image.epoch, tar, progress);
}

} // namespace

bool has_conda_packages(const envspec::Lock& lock) {
  return std::any_of(lock.artifacts.begin(), lock.artifacts.end(),
                     [](const envspec::LockedArtifact& a) { return a.kind == "conda"; });
}

std::vector<std::pair<std::string, std::string>> conda_env_vars(const std::string& prefix,
                                                                const std::string& path) {
  return {{"PATH", path.empty() ? prefix + "/bin" : prefix + "/bin:" + path},
          {"CONDA_PREFIX", prefix},
          {"CONDA_DEFAULT_ENV", prefix},
          {"CONDA_SHLVL", "1"}};
}

Result<void> build_conda_layer(const envspec::Spec& spec, const envspec::Lock& lock, ImageState& image) {
  LS_TRY_ASSIGN(std::vector<CondaInput> inputs, collect_inputs(spec, lock));
  if (inputs.empty()) {
    return {};
  }
  for (CondaInput& in : inputs) { // views into `inputs`, which no longer moves
    fill_record(in);
  }
  conda::LinkOptions link;
  link.prefix = spec.conda.prefix;
  link.generated_mtime = image.epoch;
  set_python(inputs, link);
  LS_TRY(fetch_packages(inputs, image));
  const std::vector<std::size_t> order = install_order(inputs);
  const std::string created_by =
      fmt::format("conda environment: {} packages into {}", inputs.size(), link.prefix);
  const Digest fingerprint = layer_fingerprint(inputs, order, link, image);
  std::optional<EnvFacts> facts;
  auto layer = build_generated_layer(
      fingerprint, true, *image.store, image.codec, "conda environment", 0,
      [&](TarWriter& tar, log::Progress& progress) -> Result<void> {
        facts.emplace();
        LS_TRY(write_environment(inputs, order, link, image, tar, progress, *facts));
        // Before the layer's own record: a cached layer has its facts.
        return image.store->put_record(k_env_facts_ns, fingerprint.hex(), facts->to_json());
      });
  if (!layer) {
    return layer.error();
  }
  if (!facts) {
    const std::optional<std::string> record = image.store->get_record(k_env_facts_ns, fingerprint.hex());
    if (record) {
      facts = EnvFacts::from_json(*record);
    }
    if (!facts) {
      return io_error("the store {} has the conda environment's layer but not its record {}/{}: remove the "
                      "store's records/layer-cache (or the whole store) and build again",
                      image.store->root().string(), k_env_facts_ns, fingerprint.hex());
    }
  }
  if (!facts->link_scripts.empty()) {
    std::string list;
    for (const auto& [dist, path] : facts->link_scripts) {
      list += fmt::format("\n  {} ({})", dist, path);
    }
    log::warn("conda link scripts are installed but not run (as pixi; docs/conda.md):{}", list);
  }
  if (!facts->activation.partly_evaluated.empty()) {
    log::info("conda activation: the image's Env has what these set outside conditionals and commands; "
              "source them for the rest (docs/conda.md):\n  {}",
              fmt::join(facts->activation.partly_evaluated, "\n  "));
  }
  image.conda_activation = facts->activation.env;
  append_layer(image, *layer, created_by);
  return {};
}

} // namespace lockstep::builder
