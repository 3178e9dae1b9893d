#pragma once
// Reading conda channels at lock time (docs/conda.md, "Channels"): each channel's subdirs (the
// platform's and noarch, or those the spec lists, noarch always among them), each one's
// repodata.json fetched as repodata.json.zst where the channel serves it, else plain, kept in the
// store's HTTP cache and revalidated with its ETag, and read (support/conda/repodata.hpp), the
// subdirs of all channels at once.
#include "envspec/spec/spec.hpp"
#include "support/base/result.hpp"
#include "support/conda/repodata.hpp"
#include "support/oci/oci.hpp"
#include "support/store/blob_store.hpp"

#include <string>
#include <vector>

namespace lockstep::builder {

/// One subdir of one channel, read.
struct CondaSubdir {
  int repo = -1;       ///< the channel's index in the spec's repos (its priority among repos)
  int channel = -1;    ///< the channel's rank among the spec's conda channels (0 first)
  std::string url;     ///< the channel's URL, no trailing '/'
  std::string subdir;  ///< "linux-64", "noarch", ...
  std::string fetched; ///< the repodata URL read (.zst or plain)
  /// Where the packages are: the index's base_url (CEP 15, made absolute), else the subdir's URL;
  /// ends with '/'.
  std::string package_base;
  conda::RepoData data;
};

/// The subdirs read from `repo` (a conda channel of the spec) for `platform`: the spec's `subdirs`,
/// else the platform's; noarch always, last.
std::vector<std::string> conda_subdirs(const envspec::Repo& repo, const oci::Platform& platform);

/// Options of one read.
struct CondaChannelOptions {
  bool refresh = false;              ///< revalidate every cached index with the server
  conda::RepoDataLimits limits = {}; ///< per index
};

/// Reads every conda channel of `spec` (its repos of kind conda) for its platform, in the spec's
/// order, each channel's subdirs in conda_subdirs' order. A subdir without an index (404 for both
/// names) is an error naming the URLs: CEP 26 says a channel has noarch, and a platform subdir the
/// channel lacks means it has nothing for the platform.
Result<std::vector<CondaSubdir>> load_conda_channels(const envspec::Spec& spec, const BlobStore& store,
                                                     const CondaChannelOptions& options = {});

/// The download URL of `record` of `subdir`: its package base and filename.
std::string conda_package_url(const CondaSubdir& subdir, const conda::Record& record);

} // namespace lockstep::builder
