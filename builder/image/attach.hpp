#pragma once
// What a push attaches to an image in its registry, as OCI referrers (support/registry/referrers.hpp):
// the SBOMs of the image (`push --sbom`, a build's outputs.sbom) and the build's SLSA provenance,
// a DSSE envelope signed with the key that signs the image (docs/sbom.md, docs/signing.md).
#include "support/base/result.hpp"
#include "support/oci/oci.hpp"
#include "support/oci/registry_ref.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lockstep::builder {

/// SBOMs larger than this are not read or attached (mpi-hello's is about 150 KiB).
inline constexpr std::uint64_t k_max_sbom = 64ULL << 20;

/// Attaches each SBOM file (as `lockstep sbom` or a build writes them) to the image `subject` in
/// `target`'s repository as an OCI referrer. An SBOM of another image is check_failed naming both
/// digests, before anything is pushed.
Result<void> attach_sbom_files(const oci::RegistryRef& target, const oci::Descriptor& subject,
                               const std::vector<std::filesystem::path>& files);

/// With `key_path`: signs the pushed image `subject` in `target` (cosign's format, signing.hpp) and
/// attaches the build's provenance (kept in the store by `lockstep build`) as a DSSE envelope signed
/// by the key; without, attaches the provenance statement unsigned. No provenance in the store: none
/// attached.
Result<void> attach_provenance(const oci::RegistryRef& target, const oci::Descriptor& subject,
                               const std::string& key_path, const std::string& passphrase_file);

} // namespace lockstep::builder
