#include "runner/runtime/exec.hpp"

#include "envspec/settings/settings.hpp"
#include "runner/runtime/emulation.hpp"
#include "runner/runtime/gpu.hpp"
#include "runner/runtime/join.hpp"
#include "runner/runtime/root_cache.hpp"
#include "support/base/interrupt.hpp"
#include "support/base/json.hpp"
#include "support/base/log.hpp"
#include "support/oci/sif.hpp"
#include "support/registry/oras.hpp"
#include "support/registry/pull.hpp"
#include "support/store/blob_store.hpp"
#include "support/system/fs.hpp"

#include <climits>

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>

extern char** environ; // NOLINT(readability-redundant-declaration)

namespace lockstep::runner {

namespace fs = std::filesystem;

namespace {

constexpr const char* k_default_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr std::string_view k_env_prefix = "LOCKSTEP_ENV_";

bool valid_env_name(std::string_view name) {
  if (name.empty() || (std::isdigit(static_cast<unsigned char>(name[0])) != 0)) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; });
}

// An ordered NAME -> VALUE map: values replaced in place, new names appended.
class EnvMap {
public:
  void set(const std::string& name, std::string value) {
    auto it = m_index.find(name);
    if (it == m_index.end()) {
      m_index.emplace(name, m_entries.size());
      m_entries.emplace_back(name, std::move(value));
    } else {
      m_entries[it->second].second = std::move(value);
    }
  }
  [[nodiscard]] bool has(const std::string& name) const { return m_index.count(name) != 0; }
  [[nodiscard]] std::vector<std::string> list() const {
    std::vector<std::string> out;
    out.reserve(m_entries.size());
    for (const auto& [k, v] : m_entries) {
      out.push_back(k + "=" + v);
    }
    return out;
  }

private:
  std::map<std::string, std::size_t> m_index;
  std::vector<std::pair<std::string, std::string>> m_entries;
};

// Splits "K=V"; nullopt when there is no '=' or no name.
std::optional<std::pair<std::string, std::string>> split_assignment(std::string_view kv) {
  std::size_t eq = kv.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return std::nullopt;
  }
  return std::pair{std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1))};
}

std::vector<std::string> host_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    out.emplace_back(*e);
  }
  return out;
}

// The caller's home directory: $HOME, else the password database.
std::string caller_home() {
  if (const char* h = std::getenv("HOME"); h != nullptr && *h == '/') {
    return h;
  }
  if (const struct passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) {
    return pw->pw_dir;
  }
  return {};
}

Result<std::vector<std::string>> string_array(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) {
    return std::vector<std::string>{};
  }
  if (!it->is_array()) {
    return invalid_input("the image config's {} is not an array of strings", key);
  }
  std::vector<std::string> out;
  for (const auto& v : *it) {
    if (!v.is_string()) {
      return invalid_input("the image config's {} is not an array of strings", key);
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

// The host's current directory as seen in the container, when it lies in a bound directory
// (home or a --bind source): Apptainer's default working directory.
std::optional<std::string> mapped_host_cwd(const SandboxConfig& config) {
  std::error_code ec;
  fs::path cwd = fs::current_path(ec);
  if (ec) {
    return std::nullopt;
  }
  std::optional<std::string> best;
  std::size_t best_len = 0;
  auto consider = [&](const fs::path& source, const std::string& target) {
    std::error_code ec2;
    fs::path src = fs::canonical(source, ec2);
    if (ec2) {
      return;
    }
    fs::path rel = cwd.lexically_relative(src);
    if (rel.empty() || *rel.begin() == "..") {
      return;
    }
    std::size_t len = src.string().size();
    if (!best || len > best_len) {
      best = rel == "." ? target : (fs::path(target) / rel).lexically_normal().string();
      best_len = len;
    }
  };
  if (config.home) {
    consider(*config.home, config.home->string());
  }
  if (config.tmp == TmpPolicy::host) {
    consider("/tmp", "/tmp");
  }
  for (const BindSpec& b : config.binds) {
    consider(b.source, b.target);
  }
  return best;
}

// Applies `--gpus` to the config and the environment; returns the plan (its variables are merged
// into every environment composed for this container).
Result<GpuPlan> apply_gpus(const std::string& flag, SandboxConfig& config, std::vector<std::string>& env) {
  std::optional<std::string> value;
  if (flag != "auto") {
    value = flag;
  }
  const std::string selection = effective_gpu_selection(value, std::getenv("NVIDIA_VISIBLE_DEVICES"));
  const GpuHost host = gpu_host_from_env();
  LS_TRY_ASSIGN(GpuPlan plan, plan_gpu_passthrough(selection, host));
  for (const GpuBind& b : plan.binds) {
    config.binds.push_back(BindSpec{b.source, b.target,
                                    b.read_only ? BindSpec::Access::read_only : BindSpec::Access::read_write,
                                    BindSpec::Need::required, BindSpec::Depth::single});
  }
  // The host's /dev already holds every GPU; a subset (or a fake host tree) gets a minimal /dev
  // with only the selected nodes, so the others are not there to be opened.
  if (!plan.all_devices || host.root != fs::path("/")) {
    config.dev.mode = DevPolicy::Mode::minimal;
    for (const std::string& node : plan.device_nodes) {
      std::string target = "/dev/" + fs::path(node).filename().string();
      config.dev.nodes.push_back(BindSpec{node, target, BindSpec::Access::read_write,
                                          BindSpec::Need::required, BindSpec::Depth::single});
    }
  }
  merge_gpu_env(plan, env);
  log::debug("exec: --gpus {}: driver {}, {} bind(s), {} device node(s), {} /dev", selection,
             plan.driver_version, plan.binds.size(), plan.device_nodes.size(),
             config.dev.mode == DevPolicy::Mode::host ? "host" : "minimal");
  return plan;
}

} // namespace

Result<BindSpec> parse_bind(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return invalid_input("invalid --bind '{}': {} (expected SRC[:DST][:ro|rw])", text, why);
  };
  std::vector<std::string> parts;
  std::size_t i = 0;
  for (;;) {
    std::size_t j = text.find(':', i);
    parts.emplace_back(text.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) {
      break;
    }
    i = j + 1;
  }
  if (parts.size() > 3) {
    return bad("too many ':'");
  }
  if (parts[0].empty()) {
    return bad("no source");
  }
  BindSpec b;
  std::error_code ec;
  b.source = fs::absolute(parts[0], ec).lexically_normal();
  if (ec) {
    return bad(ec.message());
  }
  std::string target = parts.size() >= 2 ? parts[1] : parts[0];
  if (parts.size() >= 2 && target.empty()) {
    return bad("empty destination");
  }
  if (target.empty() || target[0] != '/') {
    return bad("the destination must be an absolute path in the container");
  }
  Result<std::string> norm = normalize_image_path(target);
  if (!norm) {
    return bad("the destination contains '..'");
  }
  if (*norm == "/") {
    return bad("the destination can't be the container's root");
  }
  b.target = *norm;
  if (parts.size() == 3) {
    if (parts[2] == "ro") {
      b.access = BindSpec::Access::read_only;
    } else if (parts[2] != "rw") {
      return bad(fmt::format("unknown option '{}'", parts[2]));
    }
  }
  return b;
}

Result<UserSpec> parse_user(std::string_view text) {
  auto number = [&](std::string_view s) -> std::optional<std::uint32_t> {
    std::uint32_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v == UINT32_MAX) {
      return std::nullopt;
    }
    return v;
  };
  std::size_t colon = text.find(':');
  auto uid = number(text.substr(0, colon));
  auto gid = colon == std::string_view::npos ? uid : number(text.substr(colon + 1));
  if (!uid || !gid) {
    return invalid_input("invalid --user '{}': expected UID[:GID] as numbers", text);
  }
  return UserSpec{*uid, *gid};
}

Result<ImageRuntime> image_runtime(const nlohmann::json& config) {
  ImageRuntime rt;
  if (config.is_null()) {
    return rt;
  }
  if (!config.is_object()) {
    return invalid_input("the image config's `config` is not an object");
  }
  LS_TRY_ASSIGN(rt.env, string_array(config, "Env"));
  LS_TRY_ASSIGN(rt.entrypoint, string_array(config, "Entrypoint"));
  LS_TRY_ASSIGN(rt.cmd, string_array(config, "Cmd"));
  if (auto it = config.find("WorkingDir"); it != config.end() && !it->is_null()) {
    if (!it->is_string()) {
      return invalid_input("the image config's WorkingDir is not a string");
    }
    rt.workdir = it->get<std::string>();
  }
  return rt;
}

Result<std::vector<std::string>> compose_environment(const EnvSources& s) {
  EnvMap env;
  std::vector<std::pair<std::string, std::string>> prefixed;
  // 1. The host's variables (only TERM with --cleanenv). PATH is the image's business, and
  //    LOCKSTEP_ENV_K are instructions, not variables.
  for (const std::string& kv : s.host) {
    auto a = split_assignment(kv);
    if (!a) {
      continue;
    }
    if (a->first.starts_with(k_env_prefix)) {
      if (a->first.size() > k_env_prefix.size()) {
        prefixed.emplace_back(a->first.substr(k_env_prefix.size()), a->second);
      }
      continue;
    }
    if (a->first == "PATH" || (s.clean && a->first != "TERM")) {
      continue;
    }
    env.set(a->first, a->second);
  }
  // 2. The image's Env overrides the host.
  for (const std::string& kv : s.image) {
    if (auto a = split_assignment(kv)) {
      env.set(a->first, a->second);
    }
  }
  // 3. LOCKSTEP_ENV_K=V from the host, then 4. --env K=V, override both.
  for (const auto& [k, v] : prefixed) {
    if (!valid_env_name(k)) {
      return invalid_input("invalid variable name '{}' in {}{}", k, k_env_prefix, k);
    }
    env.set(k, v);
  }
  for (const std::string& kv : s.overrides) {
    auto a = split_assignment(kv);
    if (!a || !valid_env_name(a->first)) {
      // The name only: the value may be a secret.
      const std::size_t eq = kv.find('=');
      return invalid_input("invalid --env '{}': expected NAME=VALUE with NAME made of letters, digits and _",
                           eq == std::string::npos ? kv : kv.substr(0, eq) + "=...");
    }
    env.set(a->first, a->second);
  }
  // 5. Defaults for what no layer set.
  if (!env.has("PATH")) {
    env.set("PATH", k_default_path);
  }
  if (!env.has("HOME") && !s.home.empty()) {
    env.set("HOME", s.home);
  }
  return env.list();
}

namespace {

// The image's root (set in `config`) and runtime settings. A SIF mounted with FUSE stays mounted
// as long as `sif` lives.
Result<ImageRuntime> open_image(const ImageArg& arg, SifMountMode sif_mount, SandboxConfig& config,
                                std::optional<SifRoot>& sif, const std::optional<oci::Platform>& platform,
                                std::string& architecture) {
  const fs::path store_root = settings::store_root();
  ImageRuntime rt;
  switch (arg.kind) {
  case ImageArg::Kind::oci: {
    LS_TRY_ASSIGN(BlobStore store, BlobStore::open(store_root));
    LS_TRY_ASSIGN(std::unique_ptr<oci::ImageSource> source,
                  registry::open_image(arg.ref, settings::store_root()));
    oci::SelectOptions select;
    select.platform = platform;
    LS_TRY_ASSIGN(oci::OpenedImage image, source->resolve(select));
    if (image.config.is_object()) {
      architecture = json_string(image.config, "architecture");
    }
    LS_TRY_ASSIGN(rt, image_runtime(image.config.is_object() && image.config.contains("config")
                                        ? image.config["config"]
                                        : nlohmann::json()));
    UnpackOptions unpack;
    unpack.ownership = ::geteuid() == 0 ? UnpackOptions::Ownership::keep : UnpackOptions::Ownership::caller;
    LS_TRY_ASSIGN(UnpackedRoot root, unpack_image(store, *source, image, unpack));
    config.root = root.rootfs;
    log::debug("exec: image {} ({}), root {} ({})", arg.ref.str(), image.manifest_digest.str(),
               root.rootfs.string(), root.cached ? "cached" : "unpacked now");
    return rt;
  }
  case ImageArg::Kind::sif: {
    fs::path sif_path = arg.path;
    if (arg.ref.is_remote()) {
      LS_TRY_ASSIGN(sif_path, registry::pull_sif(arg.ref.remote, settings::store_root()));
    }
    LS_TRY_ASSIGN(const sif::Image header, sif::read_image(sif_path));
    if (architecture.empty()) {
      architecture = header.arch;
    }
    if (!architecture.empty() && architecture != host_architecture() &&
        sif_mount == SifMountMode::automatic && ::geteuid() == 0) {
      // Emulation puts root's container in a user namespace, where a loop mount can't be made.
      sif_mount = SifMountMode::extract;
      log::debug("exec: a linux/{} SIF under emulation as root: extracted, not loop-mounted", architecture);
    }
    LS_TRY_ASSIGN(SifRoot s, SifRoot::prepare(sif_path, sif_mount, store_root));
    s.apply_to(config);
    if (!s.oci_config().empty()) {
      LS_TRY_ASSIGN(const nlohmann::json j,
                    parse_json(s.oci_config(), sif_path.string() + ": the oci-config.json object"));
      LS_TRY(oci::config_labels(j, sif_path.string()));
      LS_TRY_ASSIGN(rt, image_runtime(j));
    }
    log::debug("exec: SIF {} via {}", sif_path.string(), s.kind_name());
    sif.emplace(std::move(s));
    return rt;
  }
  case ImageArg::Kind::directory: {
    std::error_code ec;
    config.root = fs::absolute(arg.path, ec);
    log::debug("exec: root directory {}", config.root.string());
    return rt;
  }
  }
  return internal_error("unknown image kind");
}

// The command: given after --, else the image's ENTRYPOINT + CMD, else a SIF's runscript.
Result<void> choose_command(const ExecOptions& o, const ImageArg& arg, const ImageRuntime& rt,
                            SandboxConfig& config) {
  if (!o.command.empty()) {
    config.argv = o.command;
    return {};
  }
  if (!rt.entrypoint.empty() || !rt.cmd.empty()) {
    config.argv = rt.entrypoint;
    config.argv.insert(config.argv.end(), rt.cmd.begin(), rt.cmd.end());
    return {};
  }
  if (arg.kind == ImageArg::Kind::oci) {
    return invalid_input("{} has no entrypoint or cmd; give the command to run: lockstep exec {} -- CMD...",
                         o.image, o.image);
  }
  config.argv = {"/.singularity.d/runscript"};
  if (!config.loop_root) {
    LS_TRY_ASSIGN(PathKind kind, probe_in_root(config.root, config.argv[0]));
    if (kind == PathKind::missing) {
      return invalid_input("{} has no runscript; give the command to run: lockstep exec {} -- CMD...",
                           o.image, o.image);
    }
  }
  return {};
}

// The working directory: --workdir (must exist), else the image's WorkingDir (created if the
// image lacks it, as Docker does), else the host's when it is in a bound directory, else /.
Result<void> choose_workdir(const ExecOptions& o, const ImageRuntime& rt, SandboxConfig& config) {
  if (o.workdir) {
    if (o.workdir->empty() || (*o.workdir)[0] != '/') {
      return invalid_input("--workdir must be an absolute path in the container: '{}'", *o.workdir);
    }
    LS_TRY_ASSIGN(config.cwd, normalize_image_path(*o.workdir));
    config.cwd_missing = CwdMissing::fail;
  } else if (!rt.workdir.empty()) {
    Result<std::string> wd = normalize_image_path(rt.workdir[0] == '/' ? rt.workdir : "/" + rt.workdir);
    if (!wd) {
      return wd.error().with_context("the image's WorkingDir");
    }
    config.cwd = *wd;
    config.cwd_missing = CwdMissing::create;
  } else {
    config.cwd = mapped_host_cwd(config).value_or("/");
    config.cwd_missing = CwdMissing::use_root;
  }
  return {};
}

} // namespace

namespace {

// The launcher's session directories a rank must see: PMIx's rendezvous files and Open MPI's
// session directory live there. /tmp itself comes with --tmp-host.
void bind_launcher_dirs(SandboxConfig& config) {
  std::vector<std::string> seen;
  for (const char* name : join::k_launcher_dir_variables) {
    const char* value = std::getenv(name);
    if (value == nullptr || value[0] != '/') {
      continue;
    }
    const std::optional<std::string> bound = join::launcher_dir_to_bind(value);
    if (!bound) {
      continue;
    }
    const fs::path dir = *bound;
    if (std::find(seen.begin(), seen.end(), dir.string()) != seen.end()) {
      continue;
    }
    seen.push_back(dir.string());
    BindSpec bind;
    bind.source = dir;
    bind.target = dir.string();
    config.binds.push_back(std::move(bind));
    log::debug("exec: rank binds the launcher's {} ({})", name, dir.string());
  }
}

// The inputs of the command's environment: `host`'s variables, the image's, --env.
EnvSources environment_sources(const ExecOptions& o, const PreparedExec& prepared,
                               std::vector<std::string> host) {
  EnvSources sources;
  sources.host = std::move(host);
  sources.image = prepared.image.env;
  sources.overrides = o.env;
  sources.clean = o.clean_env;
  sources.home = prepared.home;
  return sources;
}

} // namespace

Result<PreparedExec> prepare_exec(const ExecOptions& o) {
  LS_TRY(check_interrupted());
  log::Timer prepare("prepare the container");
  LS_TRY_ASSIGN(ImageArg arg, parse_image_arg(o.image));
  PreparedExec out;
  SandboxConfig& config = out.config;
  for (const std::string& b : o.binds) {
    LS_TRY_ASSIGN(BindSpec spec, parse_bind(b));
    config.binds.push_back(std::move(spec));
  }
  if (o.user) {
    LS_TRY_ASSIGN(UserSpec u, parse_user(*o.user));
    config.uid = u.uid;
    config.gid = u.gid;
  }
  config.tmp = o.mpi_rank ? TmpPolicy::host : o.tmp;
  if (o.mpi_rank) {
    bind_launcher_dirs(config);
  }
  config.writable_tmpfs = o.writable_tmpfs;
  config.pid_namespace = o.pid_namespace;
  config.hostname = o.hostname;
  config.network = o.network;
  out.home = caller_home();
  if (!o.no_home && !out.home.empty() && out.home != "/") {
    struct stat st {};
    if (::stat(out.home.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      config.home = out.home;
    }
  }

  std::optional<oci::Platform> platform;
  if (o.platform) {
    LS_TRY_ASSIGN(platform, oci::Platform::parse(*o.platform));
  }
  std::string architecture = platform ? platform->architecture : std::string();
  LS_TRY_ASSIGN(out.image, open_image(arg, o.sif_mount, config, out.sif, platform, architecture));
  LS_TRY_ASSIGN(config.emulation, plan_emulation(architecture));
  if (config.emulation) {
    if (config.loop_root) {
      return invalid_input("{} is a linux/{} SIF: under emulation it can't be loop-mounted; use --sif-mount "
                           "extract or fuse",
                           o.image, architecture);
    }
    log::info("{}", emulation_note(*config.emulation));
  }
  LS_TRY(choose_command(o, arg, out.image, config));
  LS_TRY(choose_workdir(o, out.image, config));

  // The environment, in Apptainer's order, then the GPU additions.
  LS_TRY_ASSIGN(config.env, compose_environment(environment_sources(o, out, host_environment())));
  if (o.gpus) {
    LS_TRY_ASSIGN(out.gpu, apply_gpus(*o.gpus, config, config.env));
  }
  return out;
}

Result<std::vector<std::string>> exec_environment(const ExecOptions& o, const PreparedExec& prepared,
                                                  const std::vector<std::string>& host) {
  LS_TRY_ASSIGN(std::vector<std::string> env, compose_environment(environment_sources(o, prepared, host)));
  if (prepared.gpu) {
    merge_gpu_env(*prepared.gpu, env);
  }
  return env;
}

Result<int> run_exec(const ExecOptions& o) {
  LS_TRY_ASSIGN(PreparedExec prepared, prepare_exec(o));
  LS_TRY(check_interrupted());
  return run_in_sandbox(prepared.config);
}

} // namespace lockstep::runner
