#include "builder/image/sif_output.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/oci/oci.hpp"
#include "support/oci/sif.hpp"
#include "support/system/fs.hpp"
#include "support/system/process.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <ctime>

namespace lockstep::builder {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Bump when anything lockstep puts into a SIF changes, so cached SIFs are not reused.
constexpr int k_sif_format_version = 2; // 2: the scripts quote with shell_quote
constexpr const char* k_cache_ns = "sif";

// The action scripts: each sources the environment scripts in order, then does its job. They are
// what Apptainer's and SingularityCE's builds put in /.singularity.d/actions (older runtimes and
// `/.singularity.d/actions/exec` users call them; current Apptainer has the same logic built in).
constexpr const char* k_source_env = R"(for script in /.singularity.d/env/*.sh; do
    if [ -f "$script" ]; then
        . "$script"
    fi
done
)";

constexpr const char* k_action_exec = R"(
exec "$@"
)";

constexpr const char* k_action_run = R"(
if test -x /.singularity.d/runscript; then
    exec /.singularity.d/runscript "$@"
fi
echo "No runscript found, executing /bin/sh"
exec /bin/sh "$@"
)";

constexpr const char* k_action_shell = R"(
if test -n "${SINGULARITY_SHELL:-}" -a -x "${SINGULARITY_SHELL:-}"; then
    exec $SINGULARITY_SHELL "$@"
elif test -x /bin/bash; then
    SHELL=/bin/bash
    PS1="Apptainer> "
    export SHELL PS1
    exec /bin/bash --norc "$@"
elif test -x /bin/sh; then
    SHELL=/bin/sh
    export SHELL
    exec /bin/sh "$@"
fi
echo "ERROR: /bin/sh does not exist in container" 1>&2
exit 1
)";

constexpr const char* k_action_start = R"(
if test -x /.singularity.d/startscript; then
    exec /.singularity.d/startscript
fi
)";

constexpr const char* k_action_test = R"(
if test -x /.singularity.d/test; then
    exec /.singularity.d/test "$@"
fi
echo "No test found in container, executing /bin/sh -c true"
exec /bin/sh -c true
)";

constexpr const char* k_env_base = "#!/bin/sh\n";

constexpr const char* k_env_environment = "#!/bin/sh\n# Custom environment shell code should follow\n\n";

constexpr const char* k_env_99_base = R"(#!/bin/sh
if [ -z "${LD_LIBRARY_PATH:-}" ]; then
    LD_LIBRARY_PATH="/.singularity.d/libs"
else
    LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/.singularity.d/libs"
fi
if test -z "${PS1:-}"; then
    PS1="Apptainer> "
fi
export LD_LIBRARY_PATH PS1
)";

constexpr const char* k_env_runtimevars = R"(#!/bin/sh
if [ -n "${SING_USER_DEFINED_PREPEND_PATH:-}" ]; then
    PATH="${SING_USER_DEFINED_PREPEND_PATH}:${PATH}"
fi
if [ -n "${SING_USER_DEFINED_APPEND_PATH:-}" ]; then
    PATH="${PATH}:${SING_USER_DEFINED_APPEND_PATH}"
fi
if [ -n "${SING_USER_DEFINED_PATH:-}" ]; then
    PATH="${SING_USER_DEFINED_PATH}"
fi
unset SING_USER_DEFINED_PREPEND_PATH SING_USER_DEFINED_APPEND_PATH SING_USER_DEFINED_PATH
export PATH
)";

// Escapes for a shell double-quoted string (Apptainer's shell.Escape): the context of the
// environment script's "${NAME:-"VALUE"}" and of the words the runscript evals; everything else is
// single-quoted by shell_quote.
std::string escape_double(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"' || c == '`' || c == '$') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

// ["a", "b c"] -> "a" "b c" (Apptainer's shell.ArgsQuoted).
std::string args_quoted(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) {
    if (!out.empty()) {
      out += ' ';
    }
    out += '"' + escape_double(a) + '"';
  }
  return out;
}

std::vector<std::string> string_list(const json& config, const char* key) {
  std::vector<std::string> out;
  if (!config.contains("config") || !config["config"].is_object()) {
    return out;
  }
  const json& c = config["config"];
  if (c.contains(key) && c[key].is_array()) {
    for (const auto& v : c[key]) {
      if (v.is_string()) {
        out.push_back(v.get<std::string>());
      }
    }
  }
  return out;
}

bool shell_name(std::string_view name) {
  if (name.empty() || (std::isdigit(static_cast<unsigned char>(name.front())) != 0)) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)) != 0; });
}

// Go's "Monday_2_January_2006_15:4:5_MST" in UTC (Apptainer's org.label-schema.build-date).
std::string build_date(std::int64_t epoch) {
  static constexpr std::array<const char*, 7> k_days{"Sunday",   "Monday", "Tuesday", "Wednesday",
                                                     "Thursday", "Friday", "Saturday"};
  static constexpr std::array<const char*, 12> k_months{"January",   "February", "March",    "April",
                                                        "May",       "June",     "July",     "August",
                                                        "September", "October",  "November", "December"};
  auto t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  return fmt::format("{}_{}_{}_{}_{}:{}:{}_UTC", k_days.at(static_cast<std::size_t>(tm.tm_wday)), tm.tm_mday,
                     k_months.at(static_cast<std::size_t>(tm.tm_mon)), tm.tm_year + 1900, tm.tm_hour,
                     tm.tm_min, tm.tm_sec);
}

LayoutEntry file(std::string path, std::string data, std::uint32_t mode = 0755,
                 LayoutEntry::When when = LayoutEntry::When::always) {
  return LayoutEntry{SquashfsEntry{std::move(path), SquashfsEntry::Type::file, mode, 0, 0, std::move(data)},
                     when};
}
LayoutEntry dir(std::string path, LayoutEntry::When when = LayoutEntry::When::always) {
  return LayoutEntry{SquashfsEntry{std::move(path), SquashfsEntry::Type::directory, 0755, 0, 0, {}}, when};
}
LayoutEntry link(std::string path, std::string target) {
  return LayoutEntry{
      SquashfsEntry{std::move(path), SquashfsEntry::Type::symlink, 0777, 0, 0, std::move(target)},
      LayoutEntry::When::if_absent};
}

// Hashes `size` bytes of `from` at `offset`, copying them to `to` unless it is -1.
Result<Digest> copy_and_hash(int from, std::int64_t offset, std::int64_t size, int to,
                             const std::string& what) {
  Sha256 hash;
  std::vector<char> buf(1U << 20);
  std::int64_t done = 0;
  while (done < size) {
    LS_TRY(check_interrupted());
    auto want =
        static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(buf.size()), size - done));
    ssize_t n = ::pread(from, buf.data(), want, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return n < 0 ? errno_error("can't read " + what, errno) : io_error("{} is shorter than expected", what);
    }
    hash.update(buf.data(), static_cast<std::size_t>(n));
    if (to >= 0) {
      LS_TRY(write_all(to, buf.data(), static_cast<std::size_t>(n), what));
    }
    done += n;
  }
  return hash.finish();
}

struct Objects {
  std::string labels;
  std::string lockstep;
  std::string oci_config;
};

// Reads the manifest and config of `image` from the store.
Result<std::pair<oci::Manifest, json>> load_image(const BlobStore& store, const oci::StoredImage& image) {
  LS_TRY_ASSIGN(std::string manifest_bytes, store.read(image.manifest.digest));
  LS_TRY_ASSIGN(oci::Manifest manifest,
                oci::Manifest::parse(manifest_bytes, "manifest " + image.manifest.digest.str()));
  LS_TRY_ASSIGN(std::string config_bytes, store.read(manifest.config.digest));
  LS_TRY_ASSIGN(json config, oci::parse_json(config_bytes, "config " + manifest.config.digest.str()));
  return std::make_pair(std::move(manifest), std::move(config));
}

// The mtime of a file in nanoseconds, or -1.
std::int64_t mtime_ns(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    return -1;
  }
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// Makes the store blob `blob` appear at `path`: a hard link put in place by rename (the output and
// the store share the file, as OCI layout outputs do), or, across file systems, a verified copy.
Result<void> export_blob(const fs::path& blob, const Digest& digest, std::int64_t size,
                         const fs::path& path) {
  LS_TRY(make_dirs(path.parent_path()));
  // A rebuild re-exports over its own earlier output, often the very same inode: the helper drops
  // the temporary name then too.
  LS_TRY_ASSIGN(bool linked, replace_with_link(blob, path));
  if (linked) {
    return {};
  }
  LS_TRY_ASSIGN(UniqueFd in, open_file(blob, O_RDONLY));
  LS_TRY_ASSIGN(AtomicFile out, AtomicFile::create(path, 0755));
  LS_TRY_ASSIGN(Digest got, copy_and_hash(in.get(), 0, size, out.fd(), blob.string()));
  if (got != digest) {
    return io_error("the cached SIF {} in the store is corrupt", digest.str());
  }
  return out.commit();
}

// Adds the finished SIF at `temp` (already fsynced or about to be) to the store as blob `digest`:
// a hard link where possible, else a copy.
Result<void> store_blob(const BlobStore& store, const fs::path& temp, const Digest& digest,
                        std::int64_t size) {
  if (store.has(digest, size)) {
    return {};
  }
  auto linked = replace_with_link(temp, store.blob_path(digest), store.root() / "tmp");
  if (!linked) {
    return std::move(linked).error().with_context("adding the SIF to the store");
  }
  if (*linked) {
    return {};
  }
  LS_TRY_ASSIGN(UniqueFd in, open_file(temp, O_RDONLY));
  LS_TRY_ASSIGN(BlobStore::Writer w, store.begin_write());
  std::vector<char> buf(1U << 20);
  for (;;) {
    LS_TRY_ASSIGN(std::size_t n, read_full(in.get(), buf.data(), buf.size(), temp.string()));
    if (n == 0) {
      break;
    }
    LS_TRY(w.write(buf.data(), n));
  }
  LS_TRY(w.commit(digest, size));
  return {};
}

} // namespace

std::string sif_labels(const json& config, const std::map<std::string, std::string>& annotations,
                       std::int64_t epoch, const std::string& arch) {
  json labels = json::object();
  labels["org.label-schema.schema-version"] = "1.0";
  labels["org.label-schema.build-arch"] = arch;
  labels["org.label-schema.build-date"] = build_date(epoch);
  labels["org.opencontainers.image.created"] = oci::rfc3339(epoch);
  for (const auto& [k, v] : annotations) {
    // The OCI annotations, and the digest of the lock the image was built from, so that `lockstep
    // verify --lock` and preflight can check a SIF's lock too.
    if (k.rfind("org.opencontainers.image.", 0) == 0 || k == "dev.lockstep.lock.digest") {
      labels[k] = v;
    }
  }
  if (config.contains("config") && config["config"].is_object() && config["config"].contains("Labels") &&
      config["config"]["Labels"].is_object()) {
    for (const auto& [k, v] : config["config"]["Labels"].items()) {
      if (v.is_string()) {
        labels[k] = v;
      }
    }
  }
  return labels.dump(1, '\t');
}

std::string sif_runscript(const json& config) {
  auto entrypoint = string_list(config, "Entrypoint");
  auto cmd = string_list(config, "Cmd");
  auto set_args = [](const std::vector<std::string>& args, const char* rest) {
    std::string s = "set --";
    for (const auto& a : args) {
      s += " " + shell_quote(a);
    }
    return s + rest;
  };
  std::string s = "#!/bin/sh\n";
  s += "OCI_ENTRYPOINT=" + shell_quote(args_quoted(entrypoint)) + "\n";
  s += "OCI_CMD=" + shell_quote(args_quoted(cmd)) + "\n";
  s += R"(
# With SINGULARITY_NO_EVAL set, run as OCI runtimes do: ENTRYPOINT, then the arguments or else CMD,
# with no shell evaluation and quoting kept.
if [ -n "${SINGULARITY_NO_EVAL:-}" ]; then
)";
  if (!cmd.empty()) {
    s += "    if [ $# -eq 0 ]; then\n        " + set_args(cmd, "") + "\n    fi\n";
  }
  if (!entrypoint.empty()) {
    s += "    " + set_args(entrypoint, R"( "$@")") + "\n";
  }
  if (cmd.empty() && entrypoint.empty()) {
    s += R"(    if [ $# -eq 0 ]; then
        echo "This image has no ENTRYPOINT or CMD: give a command to run." >&2
        exit 1
    fi
)";
  }
  s += R"(    exec "$@"
fi

# Apptainer's default: the arguments join ENTRYPOINT (or replace CMD) and the whole command line is
# evaluated by the shell before it runs.
CMDLINE_ARGS=""
for arg in "$@"; do
    CMDLINE_ARGS="${CMDLINE_ARGS} \"$arg\""
done
if [ $# -gt 0 ]; then
    SINGULARITY_OCI_RUN="${OCI_ENTRYPOINT} ${CMDLINE_ARGS}"
else
    SINGULARITY_OCI_RUN="${OCI_ENTRYPOINT} ${OCI_CMD}"
fi
case "$SINGULARITY_OCI_RUN" in
*[![:space:]]*) ;;
*)
    echo "This image has no ENTRYPOINT or CMD: give a command to run." >&2
    exit 1
    ;;
esac
eval "set ${SINGULARITY_OCI_RUN}"
exec "$@"
)";
  return s;
}

std::string sif_env_script(const json& config) {
  std::string s = "#!/bin/sh\n";
  for (const auto& entry : string_list(config, "Env")) {
    auto eq = entry.find('=');
    std::string name = entry.substr(0, eq);
    if (!shell_name(name)) {
      continue;
    }
    if (eq == std::string::npos) {
      s += fmt::format("export {0}=\"${{{0}:-}}\"\n", name);
    } else if (name == "PATH") {
      s += fmt::format("export PATH=\"{}\"\n", escape_double(entry.substr(eq + 1)));
    } else {
      s += fmt::format("export {0}=\"${{{0}:-\"{1}\"}}\"\n", name, escape_double(entry.substr(eq + 1)));
    }
  }
  return s;
}

std::vector<LayoutEntry> singularity_layout(const json& config, const std::string& labels) {
  using When = LayoutEntry::When;
  auto action = [](const char* body) { return std::string("#!/bin/sh\n\n") + k_source_env + body; };
  std::vector<LayoutEntry> out;
  // Mount points the runtimes bind onto, and the files they bind over, where the image lacks them.
  for (const char* d : {"/dev", "/proc", "/sys", "/tmp", "/home", "/root", "/var/tmp", "/etc"}) {
    out.push_back(dir(d, When::if_absent));
  }
  out.push_back(file("/etc/hosts", "", 0644, When::if_absent));
  out.push_back(file("/etc/resolv.conf", "", 0644, When::if_absent));
  out.push_back(dir("/.singularity.d"));
  out.push_back(dir("/.singularity.d/actions"));
  out.push_back(dir("/.singularity.d/env"));
  out.push_back(dir("/.singularity.d/libs"));
  out.push_back(file("/.singularity.d/actions/exec", action(k_action_exec)));
  out.push_back(file("/.singularity.d/actions/run", action(k_action_run)));
  out.push_back(file("/.singularity.d/actions/shell", action(k_action_shell)));
  out.push_back(file("/.singularity.d/actions/start", action(k_action_start)));
  out.push_back(file("/.singularity.d/actions/test", action(k_action_test)));
  out.push_back(file("/.singularity.d/env/01-base.sh", k_env_base));
  out.push_back(file("/.singularity.d/env/10-docker2singularity.sh", sif_env_script(config)));
  out.push_back(file("/.singularity.d/env/90-environment.sh", k_env_environment));
  out.push_back(file("/.singularity.d/env/99-base.sh", k_env_99_base));
  out.push_back(file("/.singularity.d/env/99-runtimevars.sh", k_env_runtimevars));
  out.push_back(file("/.singularity.d/runscript", sif_runscript(config)));
  out.push_back(file("/.singularity.d/startscript", "#!/bin/sh\n"));
  out.push_back(file("/.singularity.d/labels.json", labels, 0644));
  out.push_back(link("/singularity", ".singularity.d/runscript"));
  out.push_back(link("/.run", ".singularity.d/actions/run"));
  out.push_back(link("/.exec", ".singularity.d/actions/exec"));
  out.push_back(link("/.test", ".singularity.d/actions/test"));
  out.push_back(link("/.shell", ".singularity.d/actions/shell"));
  out.push_back(link("/environment", ".singularity.d/env/90-environment.sh"));
  return out;
}

Result<SifResult> write_sif(const BlobStore& store, const oci::StoredImage& image,
                            const SifSettings& settings, const fs::path& path) {
  if (!sif::arch_code(settings.arch)) {
    return invalid_input("can't write SIF {}: SIF has no architecture code for '{}'", path.string(),
                         settings.arch);
  }
  LS_TRY_ASSIGN(auto loaded, load_image(store, image));
  const auto& [manifest, config] = loaded;

  // The small objects, and the fingerprint of everything that goes into the file.
  Objects obj;
  obj.labels = sif_labels(config, manifest.annotations, image.epoch, settings.arch);
  json link = {{"manifest_digest", image.manifest.digest.str()},
               {"config_digest", manifest.config.digest.str()},
               {"spec_digest", settings.spec_digest.str()},
               {"created", oci::rfc3339(image.epoch)},
               {"squashfs",
                {{"compression", squashfs_compressor_name(settings.compression)},
                 {"block_size", k_squashfs_block_size}}}};
  obj.lockstep = link.dump();
  obj.oci_config = config.contains("config") ? config["config"].dump() : json::object().dump();
  SquashfsOptions options;
  options.compressor = settings.compression;
  options.epoch = image.epoch;
  json fp = {{"format", k_sif_format_version},
             {"squashfs", squashfs_settings(options)},
             {"arch", settings.arch},
             {"deffile", sha256_of(settings.deffile).str()},
             {"labels", sha256_of(obj.labels).str()},
             {"lockstep", sha256_of(obj.lockstep).str()},
             {"oci_config", sha256_of(obj.oci_config).str()},
             {"config", manifest.config.digest.str()},
             {"layers", json::array()}};
  for (const auto& l : manifest.layers) {
    fp["layers"].push_back(l.digest.str());
  }
  std::string fingerprint = sha256_of(fp.dump()).hex();

  // A cached SIF: the record names its blob, with the blob's size and mtime when it was recorded.
  // A blob modified in place since (an output shares its inode; `apptainer sign` writes into the
  // file) has another mtime: it is rehashed, and rebuilt when its content changed.
  if (auto record = store.get_record(k_cache_ns, fingerprint)) {
    auto j = oci::parse_json(*record, "SIF cache record");
    auto digest = j && j->is_object() && (*j)["digest"].is_string()
                      ? Digest::parse((*j)["digest"].get<std::string>())
                      : Result<Digest>(invalid_input("no digest"));
    auto number = [&](const char* key) {
      return j && j->is_object() && (*j)[key].is_number_integer() ? (*j)[key].get<std::int64_t>() : -1;
    };
    std::int64_t size = number("size");
    if (digest && store.has(*digest, size)) {
      log::Timer t("sif export");
      fs::path blob = store.blob_path(*digest);
      bool intact = mtime_ns(blob) == number("mtime_ns");
      if (!intact) {
        auto got = sha256_of_file(blob);
        intact = got && *got == *digest;
        if (intact) {
          json updated = {{"digest", digest->str()}, {"size", size}, {"mtime_ns", mtime_ns(blob)}};
          (void)store.put_record(k_cache_ns, fingerprint, updated.dump());
        } else {
          std::error_code ec;
          fs::remove(blob, ec);
          log::warn("the cached SIF {} in the store was modified; it was removed and the SIF is rebuilt",
                    digest->str());
        }
      }
      if (intact) {
        LS_TRY(export_blob(blob, *digest, size, path));
        log::debug("SIF cache hit {} -> {}", fingerprint, digest->str());
        return SifResult{*digest, size, true};
      }
    }
  }

  // Build it beside `path`, publish it there, and add the same file to the store.
  log::Timer build_timer("sif build");
  LS_TRY(make_dirs(path.parent_path()));
  LS_TRY_ASSIGN(AtomicFile out, AtomicFile::create(path, 0755));
  LS_TRY_ASSIGN(UniqueFd rw, open_file(out.temp_path(), O_RDWR));
  sif::Writer sif(rw.get(), image.epoch, path.string());
  LS_TRY(sif.add_object(sif::DataType::deffile, "", settings.deffile));
  LS_TRY(sif.add_object(sif::DataType::labels, "labels.json", obj.labels));
  LS_TRY(sif.add_object(sif::DataType::generic_json, "lockstep.json", obj.lockstep));
  LS_TRY(sif.add_object(sif::DataType::generic_json, "oci-config.json", obj.oci_config));
  const std::int64_t offset = sif.next_partition_offset();

  std::uint64_t total = 0;
  for (const auto& l : manifest.layers) {
    total += static_cast<std::uint64_t>(l.size);
  }
  log::Progress progress("squashfs", total);
  options.progress = &progress;
  LS_TRY_ASSIGN(SquashfsWriter squashfs,
                SquashfsWriter::create(rw.get(), offset, options, "the squashfs of " + path.string()));
  for (std::size_t i = 0; i < manifest.layers.size(); ++i) {
    const auto& l = manifest.layers[i];
    LS_TRY(
        squashfs.add_layer(store.blob_path(l.digest),
                           fmt::format("layer {}/{} ({})", i + 1, manifest.layers.size(), l.digest.str())));
  }
  for (const auto& e : singularity_layout(config, obj.labels)) {
    if (e.when == LayoutEntry::When::always || !squashfs.exists(e.entry.path)) {
      LS_TRY(squashfs.add(e.entry));
    }
  }
  LS_TRY_ASSIGN(std::int64_t squashfs_size, squashfs.finish());
  progress.done();

  // The partition's digest feeds the SIF's UUID; the header and descriptors go in last.
  LS_TRY_ASSIGN(Digest partition,
                copy_and_hash(rw.get(), offset, squashfs_size, -1, out.temp_path().string()));
  LS_TRY(sif.add_partition(squashfs_size, partition, sif::FsType::squashfs, sif::PartType::prim_sys,
                           settings.arch));
  LS_TRY_ASSIGN(std::int64_t size, sif.finish());
  build_timer.stop();

  log::Timer export_timer("sif export");
  LS_TRY_ASSIGN(Digest digest, copy_and_hash(rw.get(), 0, size, -1, out.temp_path().string()));
  if (::fsync(rw.get()) != 0) {
    return errno_error("can't sync " + out.temp_path().string(), errno);
  }
  rw.reset();
  LS_TRY(store_blob(store, out.temp_path(), digest, size));
  LS_TRY(out.commit());
  json record = {{"digest", digest.str()}, {"size", size}, {"mtime_ns", mtime_ns(store.blob_path(digest))}};
  if (auto r = store.put_record(k_cache_ns, fingerprint, record.dump()); !r) {
    log::debug("can't record the SIF cache entry: {}", r.error().message);
  }
  return SifResult{digest, size, false};
}

} // namespace lockstep::builder
