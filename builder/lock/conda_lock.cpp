#include "builder/lock/conda_lock.hpp"

#include "builder/lock/conda_channel.hpp"
#include "support/base/log.hpp"
#include "support/conda/match_spec.hpp"
#include "support/conda/solve.hpp"
#include "support/debian/apt_packages.hpp"
#include "support/debian/debian_version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace lockstep::builder {

namespace {

// "2.36-9+deb12u10" -> "2.36": glibc's version as conda's __glibc has it (major.minor).
std::string glibc_of(std::string_view upstream) {
  const std::size_t first = upstream.find('.');
  if (first == std::string_view::npos) {
    return "";
  }
  const std::size_t end = upstream.find_first_not_of("0123456789", first + 1);
  return std::string(upstream.substr(0, end));
}

// The image's glibc: libc6 in the lock (a Debian base, or apt packages over an image base), else
// in the base image's dpkg status; "" when neither has one.
std::string image_glibc(const envspec::Lock& lock, const BaseMetadata* base) {
  for (const envspec::LockedArtifact& a : lock.artifacts) {
    if (a.kind == "deb" && a.name == "libc6") {
      if (auto v = DebianVersion::parse(a.version)) {
        return glibc_of(v->upstream);
      }
    }
  }
  if (base != nullptr && base->has_dpkg_status) {
    if (auto status = parse_dpkg_status(base->dpkg_status, "base image: /var/lib/dpkg/status")) {
      for (const InstalledPackage& p : *status) {
        if (p.package.name == "libc6" && p.installed()) {
          return glibc_of(p.package.version.upstream);
        }
      }
    }
  }
  return "";
}

// The generic microarchitecture archspec names for the platform's CPU family.
std::string archspec_of(const oci::Platform& platform) {
  if (platform.architecture == "amd64") {
    return "x86_64";
  }
  if (platform.architecture == "arm64") {
    return "aarch64";
  }
  return platform.architecture;
}

// Where a solved record's package lives: the subdir it was read from.
struct SubdirKey {
  std::string channel;
  std::string subdir;
  bool operator<(const SubdirKey& o) const {
    return std::tie(channel, subdir) < std::tie(o.channel, o.subdir);
  }
};

// `requested`: the spec's request that asked for it, nullptr for a dependency.
envspec::LockedArtifact artifact_of(const conda::SolvedRecord& solved, const CondaSubdir& from,
                                    const envspec::PackageRequest* requested) {
  const conda::Record& r = *solved.record->record;
  envspec::LockedArtifact a;
  a.kind = "conda";
  a.name = std::string(r.name);
  a.version = std::string(r.version);
  a.size = r.size;
  a.sha256 = *Digest::parse("sha256:" + std::string(r.sha256));
  a.url = conda_package_url(from, r);
  a.repo = from.repo;
  a.reason = solved.reason;
  if (requested != nullptr) {
    a.reason = requested->origin.empty()
                   ? fmt::format("requested by packages.conda[{}]", *solved.requested)
                   : fmt::format("requested by {} ({})", requested->origin, requested->text);
  }
  envspec::LockedCondaRecord c;
  c.build = std::string(r.build);
  c.build_number = r.build_number;
  c.subdir = std::string(r.subdir.empty() ? std::string_view(from.subdir) : r.subdir);
  c.md5 = std::string(r.md5);
  for (std::string_view d : r.depends) {
    c.depends.emplace_back(d);
  }
  for (std::string_view d : r.constrains) {
    c.constrains.emplace_back(d);
  }
  for (std::string_view f : r.track_features) {
    c.track_features.emplace_back(f);
  }
  c.noarch = std::string(conda::noarch_name(r.noarch));
  c.timestamp = r.timestamp_ms;
  c.license = std::string(r.license);
  c.python_site_packages_path = std::string(r.python_site_packages_path);
  a.conda = std::move(c);
  return a;
}

// The previous lock's conda records, preferred while they fit; none for names being updated.
std::vector<conda::LockedRecord> previously_locked(const LockOptions& options) {
  std::vector<conda::LockedRecord> out;
  if (!options.previous || options.update_all) {
    return out;
  }
  for (const envspec::LockedArtifact& a : options.previous->artifacts) {
    if (a.kind != "conda" || !a.conda || options.update.count(a.name) != 0 || a.repo < 0 ||
        static_cast<std::size_t>(a.repo) >= options.previous->repos.size()) {
      continue;
    }
    const std::size_t slash = a.url.rfind('/');
    out.push_back(conda::LockedRecord{
        conda::canonical_channel(options.previous->repos[static_cast<std::size_t>(a.repo)].url),
        a.conda->subdir, slash == std::string::npos ? a.url : a.url.substr(slash + 1)});
  }
  return out;
}

// The solver's explanation as an error, each request spec it rests on with its place in the spec.
// `asked` maps the solver's request indexes to the spec's (`packages.conda`, then the stack's).
Error unsatisfiable(const conda::Solution& solution, const envspec::Spec& spec,
                    const std::vector<std::size_t>& asked) {
  std::string message = "the conda packages can't be installed together:\n" + solution.explanation;
  if (!solution.root_causes.empty()) {
    message += "\nrequested by:";
    for (std::size_t i : solution.root_causes) {
      const envspec::PackageRequest& r = spec.packages.conda[asked[i]];
      message += fmt::format("\n  {} {} ({}:{})",
                             r.origin.empty() ? fmt::format("packages.conda[{}]", asked[i]) : r.origin,
                             r.text, r.location.file.filename().string(), r.location.line);
    }
  }
  return invalid_input("{}", message);
}

} // namespace

std::vector<conda::VirtualPackage>
conda_virtual_packages(const envspec::Spec& spec, const envspec::Lock& lock, const BaseMetadata* base) {
  std::map<std::string, std::string> versions = {{"linux", "4.18"}, {"archspec", archspec_of(spec.platform)}};
  if (std::string glibc = image_glibc(lock, base); !glibc.empty()) {
    versions["glibc"] = glibc;
  }
  if (lock.stack && !lock.stack->cuda.empty()) {
    versions["cuda"] = lock.stack->cuda;
  }
  for (const auto& [name, value] : spec.conda.virtual_packages) {
    if (value.empty()) {
      versions.erase(name);
    } else {
      versions[name] = value;
    }
  }
  std::vector<conda::VirtualPackage> out = {{"__unix", "0", "0"}};
  for (const auto& [name, value] : versions) {
    // __archspec's microarchitecture is its build; its version is 1 (CEP 30).
    out.push_back(name == "archspec" ? conda::VirtualPackage{"__archspec", "1", value}
                                     : conda::VirtualPackage{"__" + name, value, "0"});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

Result<void> lock_conda(const envspec::Spec& spec, const BlobStore& store, const LockOptions& options,
                        const BaseMetadata* base, envspec::Lock& lock) {
  if (spec.packages.conda.empty()) {
    return {};
  }
  CondaChannelOptions read;
  read.refresh = options.refresh || options.update_all || !options.update.empty();
  LS_TRY_ASSIGN(std::vector<CondaSubdir> subdirs, load_conda_channels(spec, store, read));
  // The index: one entry per channel, its subdirs in order; where each subdir's packages are.
  std::vector<conda::ChannelRepoData> channels;
  std::map<SubdirKey, const CondaSubdir*> where;
  for (CondaSubdir& sd : subdirs) {
    const std::string name = conda::canonical_channel(sd.url);
    if (channels.empty() || channels.back().channel != name) {
      channels.push_back(conda::ChannelRepoData{name, {}});
    }
    where[SubdirKey{name, sd.subdir}] = &sd;
    lock.repos[static_cast<std::size_t>(sd.repo)].subdirs.push_back(sd.subdir);
    for (conda::Record& r : sd.data.records) {
      if (r.subdir.empty()) {
        r.subdir = sd.subdir; // `sd` outlives the solve
      }
    }
    channels.back().subdirs.push_back(std::move(sd.data));
  }
  const std::vector<conda::VirtualPackage> virtuals = conda_virtual_packages(spec, lock, base);
  log::info("conda: solving with {}", [&] {
    std::string s;
    for (const conda::VirtualPackage& v : virtuals) {
      s += (s.empty() ? "" : ", ") + v.str();
    }
    return s;
  }());
  LS_TRY_ASSIGN(conda::PackageIndex index, conda::PackageIndex::build(std::move(channels), virtuals));
  std::vector<conda::MatchSpec> request;
  std::vector<std::size_t> asked; // request index -> spec.packages.conda index
  for (std::size_t i = 0; i < spec.packages.conda.size(); ++i) {
    const envspec::PackageRequest& r = spec.packages.conda[i];
    conda::ParseResult<conda::MatchSpec> m = conda::MatchSpec::parse(r.text);
    if (!m) {
      return m.error().to_error(r.origin.empty() ? "packages.conda" : r.origin, r.text);
    }
    if (r.if_offered && index.find(m->name().str()) == nullptr) {
      log::info("conda: no channel has {} ({}): left out", m->name().str(), r.origin);
      continue;
    }
    request.push_back(std::move(*m));
    asked.push_back(i);
  }
  conda::SolveOptions solve_options;
  solve_options.channel_priority = spec.conda.channel_priority == "flexible"
                                       ? conda::ChannelPriority::flexible
                                       : conda::ChannelPriority::strict;
  solve_options.locked = previously_locked(options);
  solve_options.limits.how_to_raise = "raise it with lockstep lock --resolver-steps N";
  solve_options.limits.max_steps =
      std::max<std::size_t>(solve_options.limits.max_steps, options.resolver_steps / 5);
  LS_TRY_ASSIGN(conda::Solution solution, conda::solve(index, request, solve_options));
  if (!solution.solved) {
    return unsatisfiable(solution, spec, asked);
  }
  for (const conda::SolvedRecord& solved : solution.records) {
    const conda::Record& r = *solved.record->record;
    const auto from = where.find(SubdirKey{solved.channel, std::string(r.subdir)});
    if (from == where.end()) {
      return internal_error("conda: {} comes from {}/{}, which was not read", r.filename, solved.channel,
                            r.subdir);
    }
    if (r.sha256.size() != 64) {
      return external_error("conda: {} has no sha256 in {}: lockstep pins every package by sha256 (an index "
                            "with md5 only is not supported)",
                            r.filename, from->second->fetched);
    }
    lock.artifacts.push_back(artifact_of(
        solved, *from->second, solved.requested ? &spec.packages.conda[asked[*solved.requested]] : nullptr));
  }
  log::info("conda: {} packages", solution.records.size());
  return {};
}

} // namespace lockstep::builder
