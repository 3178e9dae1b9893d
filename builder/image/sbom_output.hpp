#pragma once
// The SBOM of an image or a lock (envspec/documents/sbom.hpp renders it): the licenses its packages declare
// are read here, from the artifacts themselves — a deb's DEP-5 /usr/share/doc/NAME/copyright, a
// wheel's METADATA — so the same lock gives the same SBOM on any machine. Artifacts the store lacks
// are fetched first (size and sha256 checked, as a build fetches them); what was read is remembered
// per artifact (store records "sbom-license"), so a second SBOM reads no package again.
#include "envspec/documents/sbom.hpp"
#include "envspec/lock/lockfile.hpp"
#include "support/base/result.hpp"
#include "support/store/blob_store.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace lockstep::builder {

/// The license expression of each deb and wheel of `lock` that declares one, by sha256 (hex).
/// Local artifacts (file: URLs, paths) are read only inside `local_roots`.
Result<std::map<std::string, std::string>>
artifact_licenses(const envspec::Lock& lock, const BlobStore& store,
                  const std::vector<std::filesystem::path>& local_roots);

/// The SBOM of `lock` in `format` for the image (or lock) `name` whose digest is `subject`.
Result<std::string> make_sbom(const envspec::Lock& lock, envspec::SbomFormat format, const std::string& name,
                              const Digest& subject, const BlobStore& store,
                              const std::filesystem::path& spec_dir,
                              const std::vector<std::filesystem::path>& local_roots);

/// "spdx-json" for a path ending in .spdx.json, "cyclonedx-json" for .cdx.json (the names each
/// specification recommends); nullopt for others.
std::optional<envspec::SbomFormat> sbom_format_of_path(const std::filesystem::path& path);

} // namespace lockstep::builder
