#pragma once
// SIF files in a registry, as the OCI artifact Apptainer's `oras://` pull and push use (Apptainer
// internal/pkg/client/oras): a manifest whose config has media type
// application/vnd.sylabs.sif.config.v1+json and whose one layer, media type
// application/vnd.sylabs.sif.layer.v1.sif, is the SIF file byte for byte (title annotation: the file
// name). docs/registry.md, "SIF in a registry".
#include "support/base/result.hpp"
#include "support/oci/registry_ref.hpp"
#include "support/registry/client.hpp"
#include "support/registry/push.hpp"
#include "support/store/blob_store.hpp"

#include <filesystem>
#include <string_view>

namespace lockstep::registry {

inline constexpr std::string_view k_sif_config_type = "application/vnd.sylabs.sif.config.v1+json";
inline constexpr std::string_view k_sif_layer_type = "application/vnd.sylabs.sif.layer.v1.sif";
/// The layer media type Singularity before 3.7 pushed (with its typo); accepted on pull.
inline constexpr std::string_view k_sif_layer_type_proto = "appliciation/vnd.sylabs.sif.layer.tar";

/// Pushes the SIF file at `sif` to `target` (and `tags`); returns the manifest digest.
Result<std::pair<Digest, PushStats>> push_sif(const std::filesystem::path& sif,
                                              const oci::RegistryRef& target,
                                              const std::vector<std::string>& tags, const BlobStore& store,
                                              const ClientOptions& options);

/// Fetches the SIF `ref` names into `store` (verified), and returns where it lies there.
Result<std::filesystem::path> pull_sif(const oci::RegistryRef& ref, const BlobStore& store,
                                       const ClientOptions& options);

/// pull_sif with the store at `store_root` and default_client_options().
Result<std::filesystem::path> pull_sif(const oci::RegistryRef& ref, const std::filesystem::path& store_root);

} // namespace lockstep::registry
