#pragma once
// SLSA v1 provenance of a build (docs/signing.md, "Provenance"): an in-toto Statement v1 whose
// subject is the image's manifest digest and whose predicate (https://slsa.dev/provenance/v1)
// records the spec's digest, the lock's digest, lockstep's version, the builder, and every input
// artifact with its sha256 (resolvedDependencies: each deb, wheel and git source of the lock, the
// base image, the stack recipes). Deterministic: no clock, no host name; the same lock and spec
// give the same statement on any machine.
#include "envspec/lock/lockfile.hpp"
#include "support/base/result.hpp"
#include "support/codec/digest.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::envspec {

inline constexpr std::string_view k_intoto_payload_type = "application/vnd.in-toto+json";
inline constexpr std::string_view k_slsa_build_type = "https://lockstep.dev/build/v1";

struct ProvenanceInputs {
  std::string name;           ///< the spec's name (the subject's name)
  Digest subject;             ///< the image's manifest digest
  Digest spec_digest;         ///< the spec's canonical digest
  std::optional<Digest> lock; ///< the lock's digest, when built from one
  std::string platform;       ///< "linux/amd64"
  std::string version;        ///< lockstep's version
  std::string builder_id;     ///< runDetails.builder.id; "" for "pkg:generic/lockstep@VERSION"
  std::string compression;    ///< "gzip" or "zstd"
  std::int64_t epoch = 0;     ///< the image's epoch
  /// A tool outside lockstep the build ran (the qemu-user interpreter of an emulated build):
  /// runDetails.builder.builderDependencies.
  struct Dependency {
    std::string name; ///< "qemu-aarch64"
    std::string uri;  ///< "file:///usr/bin/qemu-aarch64-static"
    Digest sha256;
  };
  std::vector<Dependency> builder_dependencies;
};

/// The in-toto statement (compact JSON with sorted keys, ending in a newline).
std::string render_provenance(const Lock* lock, const ProvenanceInputs& inputs);

/// What verification needs of a statement.
struct ProvenanceFacts {
  Digest subject;
  std::optional<Digest> lock;
  std::optional<Digest> spec;
  std::string builder_id;
  std::map<std::string, std::string> dependencies; ///< sha256 hex -> uri
};

/// Reads an in-toto statement with a SLSA v1 predicate. Anything else is invalid_input naming `what`.
Result<ProvenanceFacts> read_provenance(std::string_view statement, std::string_view what);

/// The lock's inputs as resolvedDependencies would list them: sha256 hex -> uri.
std::map<std::string, std::string> lock_dependencies(const Lock& lock);

} // namespace lockstep::envspec
