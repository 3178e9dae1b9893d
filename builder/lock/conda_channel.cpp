#include "builder/lock/conda_channel.hpp"

#include "builder/lock/apt_repo.hpp"
#include "envspec/spec/host_paths.hpp"
#include "support/base/log.hpp"
#include "support/base/parallel.hpp"
#include "support/net/http_cache.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace lockstep::builder {

namespace {

// conda-forge's largest subdirs: ~30 MB as .zst, ~200 MB as JSON (2026).
constexpr std::uint64_t k_max_compressed = 256ULL << 20;
constexpr std::uint64_t k_max_index = 1ULL << 30;

// CEP 15: base_url may be absolute or relative to the index's URL; a '/' ends it.
std::string package_base(const std::string& subdir_url, const std::string& base_url) {
  std::string base;
  if (base_url.empty()) {
    base = subdir_url;
  } else if (base_url.find("://") != std::string::npos) {
    base = base_url;
  } else if (base_url.front() == '/') {
    const std::size_t scheme = subdir_url.find("://");
    const std::size_t path = scheme == std::string::npos ? 0 : subdir_url.find('/', scheme + 3);
    base = subdir_url.substr(0, path == std::string::npos ? subdir_url.size() : path) + base_url;
  } else {
    base = subdir_url + "/" + base_url;
  }
  if (base.empty() || base.back() != '/') {
    base += '/';
  }
  return base;
}

// Fetches one subdir's index: repodata.json.zst, else repodata.json. A file:// channel is read
// only inside `roots` (the spec's).
Result<void> fetch_subdir(CondaSubdir& sd, const BlobStore& store, const CondaChannelOptions& options,
                          const std::vector<std::filesystem::path>& roots) {
  const std::string dir = sd.url + "/" + sd.subdir;
  FetchOptions fo;
  fo.accept_not_found = true;
  fo.local_roots = roots;
  CacheUse use = CacheUse::fetched;
  std::string body;
  for (const char* name : {"repodata.json.zst", "repodata.json"}) {
    sd.fetched = dir + "/" + name;
    fo.max_size = std::string_view(name).ends_with(".zst") ? k_max_compressed : k_max_index;
    LS_TRY_ASSIGN(body, cached_get(store, sd.fetched, fo, options.refresh, &use));
    if (use != CacheUse::not_found) {
      break;
    }
  }
  if (use == CacheUse::not_found) {
    return external_error(
        "{}: the channel has no {} index (neither repodata.json.zst nor repodata.json); check the "
        "channel's URL and the spec's subdirs",
        dir, sd.subdir);
  }
  log::debug("{}: {} ({} bytes)", sd.fetched,
             use == CacheUse::reused        ? "fresh in the cache"
             : use == CacheUse::revalidated ? "not modified"
                                            : "downloaded",
             body.size());
  if (sd.fetched.ends_with(".zst")) {
    LS_TRY_ASSIGN(body, decompress_index(body, sd.fetched, k_max_index));
  }
  LS_TRY_ASSIGN(sd.data, conda::parse_repodata(std::move(body), sd.fetched, options.limits));
  if (!sd.data.subdir.empty() && sd.data.subdir != sd.subdir) {
    return invalid_input("{}: the index says it is subdir {}, not {}", sd.fetched, sd.data.subdir, sd.subdir);
  }
  if (sd.data.skipped > 0) {
    log::warn("{}: {} malformed package records left out (the first: {})", sd.fetched, sd.data.skipped,
              sd.data.first_skipped);
  }
  sd.package_base = package_base(dir, std::string(sd.data.base_url));
  return {};
}

} // namespace

std::vector<std::string> conda_subdirs(const envspec::Repo& repo, const oci::Platform& platform) {
  std::vector<std::string> out;
  for (const std::string& s : repo.subdirs) {
    if (s != "noarch") {
      out.push_back(s);
    }
  }
  if (repo.subdirs.empty()) {
    if (std::string own = envspec::conda_subdir(platform); !own.empty()) {
      out.push_back(std::move(own));
    }
  }
  out.emplace_back("noarch");
  return out;
}

Result<std::vector<CondaSubdir>> load_conda_channels(const envspec::Spec& spec, const BlobStore& store,
                                                     const CondaChannelOptions& options) {
  std::vector<CondaSubdir> subdirs;
  int channel = 0;
  for (std::size_t i = 0; i < spec.repos.size(); ++i) {
    const envspec::Repo& repo = spec.repos[i];
    if (repo.kind != envspec::Repo::Kind::conda) {
      continue;
    }
    for (const std::string& s : conda_subdirs(repo, spec.platform)) {
      CondaSubdir sd;
      sd.repo = static_cast<int>(i);
      sd.channel = channel;
      sd.url = repo.url;
      while (!sd.url.empty() && sd.url.back() == '/') {
        sd.url.pop_back();
      }
      sd.subdir = s;
      subdirs.push_back(std::move(sd));
    }
    ++channel;
  }
  // Downloads and parses at once: the subdirs are independent. Errors are reported in order.
  std::vector<std::optional<Error>> errors(subdirs.size());
  const std::vector<std::filesystem::path> roots = envspec::local_roots(spec);
  for_each_index(subdirs.size(), std::max(2U, std::thread::hardware_concurrency()), [&](std::size_t k) {
    if (auto r = fetch_subdir(subdirs[k], store, options, roots); !r) {
      errors[k] = std::move(r).error();
    }
  });
  for (std::optional<Error>& e : errors) {
    if (e) {
      return std::move(*e);
    }
  }
  return subdirs;
}

std::string conda_package_url(const CondaSubdir& subdir, const conda::Record& record) {
  return subdir.package_base + std::string(record.filename);
}

} // namespace lockstep::builder
