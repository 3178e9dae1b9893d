#pragma once
// `lockstep verify docker://REF --key PUB` (docs/signing.md): a registry image's cosign signature by
// a key, and the SLSA provenance attached to it and signed by that key, checked against the image's
// digest and, given one, the lock it was built from. Signing is builder/image/signing.hpp.
#include "envspec/lock/lockfile.hpp"
#include "support/base/result.hpp"
#include "support/oci/oci.hpp"
#include "support/oci/registry_ref.hpp"
#include "support/supplychain/sigstore.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace lockstep::runner {

/// A registry image whose signature by a key was found good (verify_signature).
struct SignedImage {
  oci::RegistryRef ref;
  SigningKey key;
  oci::Descriptor manifest; ///< the image's manifest, resolved once
  std::string signed_as;    ///< the reference the good signature names
};

/// A cosign signature by the public key at `public_key` must name the image's digest and repository:
/// none (or none by the key) is check_failed, one over another digest check_failed naming both, only
/// malformed ones invalid_input. `image` is the image as the command line gave it (for advice).
/// Fills `report` (`verify --json`): the image, the key, and the result of each signature.
Result<SignedImage> verify_signature(const oci::RegistryRef& ref, const std::string& image,
                                     const std::string& public_key, nlohmann::json& report);

/// Of a signed index (a multi-platform image), the image of `platform` (this host's by default) it
/// names: its provenance is that image's. The signed image itself when it is not an index; an
/// index without the platform is invalid_input naming the platforms it has.
Result<SignedImage> signed_platform_image(SignedImage image, const std::optional<oci::Platform>& platform,
                                          const std::filesystem::path& store_root);

/// A provenance attached to the image and signed by its key must be a statement about its digest
/// (else check_failed naming both); with `lock`, one must exist, name the lock's digest and list
/// exactly its inputs. Fills `report["provenance"]`: "none", or its builder, lock and the number of
/// its inputs.
Result<void> verify_provenance(const SignedImage& image, const envspec::Lock* lock, nlohmann::json& report);

} // namespace lockstep::runner
