#pragma once
// The conda environments of an image, as their conda-meta/ records describe them (what conda writes
// and `lockstep build` writes, support/conda/link.hpp): one record per installed package,
// PREFIX/conda-meta/NAME-VERSION-BUILD.json, with the package's URL, sha256 and its files'
// paths_data (path, type, sha256 in the prefix, size). `lockstep verify` checks the files against
// them and the packages against a lock; `lockstep diff` compares the packages. Every record is
// hostile input: JSON bounded in depth, paths that must stay inside the prefix.
#include "runner/audit/image_contents.hpp"
#include "support/base/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::runner {

/// One paths_data entry of a conda-meta record.
struct CondaMetaPath {
  std::string path;   ///< image path (prefix joined, no leading '/')
  std::string type;   ///< "hardlink", "softlink", "directory", "unix_python_entry_point", ...
  std::string sha256; ///< of the file as installed: sha256_in_prefix, else sha256 ("" when none)
  std::optional<std::uint64_t> size; ///< size_in_bytes, when given
};

/// One installed conda package.
struct InstalledConda {
  std::string record; ///< image path of its conda-meta/*.json
  std::string prefix; ///< image path of the environment ("opt/conda")
  std::string name;
  std::string version;
  std::string build;
  std::string url;
  std::string sha256;               ///< of the package file, lowercase hex ("" when the record has none)
  std::string subdir;               ///< "linux-64", "noarch" ("" when the record has none)
  std::string channel;              ///< as recorded ("https://conda.anaconda.org/conda-forge", "conda-forge")
  std::string license;              ///< as the package's index.json declares it ("" when none)
  std::vector<CondaMetaPath> paths; ///< in record order
};

/// Whether `path` (image path, no leading '/') is a conda-meta record: PREFIX/conda-meta/NAME.json.
bool is_conda_meta_record(std::string_view path);

/// Every conda-meta record of the image, sorted by prefix then name. A record that is not JSON,
/// nests too deep, lacks name/version/build, or names a path outside its prefix is invalid_input
/// naming the image and the record.
Result<std::vector<InstalledConda>> image_conda_packages(const ImageContents& contents);

} // namespace lockstep::runner
