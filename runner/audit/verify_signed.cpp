#include "runner/audit/verify_signed.hpp"

#include "envspec/documents/provenance.hpp"
#include "support/codec/base64.hpp"
#include "support/registry/client.hpp"
#include "support/registry/pull.hpp"
#include "support/registry/referrers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

namespace lockstep::runner {

namespace {

// HOST/REPO of a signed reference (HOST/REPO[:TAG][@DIGEST]).
std::string repository_of(std::string reference) {
  reference = reference.substr(0, reference.find('@'));
  const std::size_t colon = reference.rfind(':');
  const std::size_t slash = reference.rfind('/');
  return colon != std::string::npos && (slash == std::string::npos || colon > slash)
             ? reference.substr(0, colon)
             : reference;
}

} // namespace

Result<SignedImage> verify_signature(const oci::RegistryRef& ref, const std::string& image,
                                     const std::string& public_key, nlohmann::json& report) {
  LS_TRY_ASSIGN(SigningKey key, SigningKey::load_public(public_key));
  const registry::ClientOptions& options = registry::default_client_options();
  LS_TRY_ASSIGN(oci::Descriptor manifest, registry::resolve_manifest(ref, options));
  LS_TRY_ASSIGN(std::vector<registry::AttachedSignature> signatures,
                registry::fetch_signatures(ref, manifest.digest, options));
  report["image"] = "docker://" + ref.name() + "@" + manifest.digest.str();
  report["key"] = key.key_id().str();
  nlohmann::json found = nlohmann::json::array();
  std::optional<std::string> valid;
  std::vector<std::string> other_digests;
  std::vector<std::string> other_repositories;
  std::vector<std::string> malformed;
  for (const registry::AttachedSignature& s : signatures) {
    nlohmann::json one{{"payload", s.layer.str()}};
    const std::string what = fmt::format("signature {} of {}", s.layer.str().substr(0, 19), ref.name());
    Result<std::string> der = base64_decode(s.signature, what);
    if (s.signature.empty() || !der) {
      malformed.push_back(what + ": no base64 signature in its annotation");
      one["result"] = "malformed";
      found.push_back(one);
      continue;
    }
    if (!key.verify(s.payload, *der)) {
      one["result"] = "another key";
      found.push_back(one);
      continue;
    }
    Result<SimpleSigning> payload = parse_simple_signing(s.payload, what);
    if (!payload) {
      malformed.push_back(payload.error().message);
      one["result"] = "malformed";
    } else if (payload->digest != manifest.digest) {
      other_digests.push_back(payload->digest.str());
      one["result"] = "another digest";
      one["digest"] = payload->digest.str();
    } else {
      if (repository_of(payload->reference) != ref.name()) {
        other_repositories.push_back(payload->reference);
        one["result"] = "another repository";
        one["reference"] = payload->reference;
      } else {
        one["result"] = "ok";
        one["reference"] = payload->reference;
        valid = payload->reference;
      }
    }
    found.push_back(one);
  }
  report["signatures"] = found;
  if (valid) {
    return SignedImage{ref, std::move(key), std::move(manifest), std::move(*valid)};
  }
  if (!other_digests.empty()) {
    return Error{ExitCode::check_failed,
                 fmt::format("{}: the signature by key {} is over {}, not the image's {}", ref.str(),
                             key.key_id().str().substr(0, 19), other_digests.front(), manifest.digest.str())};
  }
  if (!other_repositories.empty()) {
    return Error{ExitCode::check_failed,
                 fmt::format("{}: the signature by key {} names {}, another repository", ref.str(),
                             key.key_id().str().substr(0, 19), other_repositories.front())};
  }
  if (!malformed.empty()) {
    return invalid_input("{}", malformed.front());
  }
  return Error{
      ExitCode::check_failed,
      fmt::format("{} ({}) has {} signature{}, none by key {} ({}); sign it with `lockstep sign {} --key "
                  "KEY`",
                  ref.str(), manifest.digest.str(), signatures.size(), signatures.size() == 1 ? "" : "s",
                  key.key_id().str().substr(0, 19), public_key, image)};
}

Result<SignedImage> signed_platform_image(SignedImage image, const std::optional<oci::Platform>& platform,
                                          const std::filesystem::path& store_root) {
  if (!oci::is_index_type(image.manifest.media_type)) {
    return image;
  }
  oci::ImageRef ref;
  ref.transport = oci::ImageRef::Transport::docker;
  ref.remote = image.ref;
  ref.remote.digest = image.manifest.digest; // the index whose signature was checked
  LS_TRY_ASSIGN(std::unique_ptr<oci::ImageSource> source, registry::open_image(ref, store_root));
  oci::SelectOptions select;
  select.platform = platform;
  LS_TRY_ASSIGN(const oci::OpenedImage opened, source->resolve(select));
  image.manifest.media_type = opened.manifest_media_type;
  image.manifest.digest = opened.manifest_digest;
  image.manifest.size = static_cast<std::int64_t>(opened.manifest_bytes.size());
  image.manifest.platform = opened.platform;
  return image;
}

Result<void> verify_provenance(const SignedImage& image, const envspec::Lock* lock, nlohmann::json& report) {
  const oci::RegistryRef& ref = image.ref;
  const SigningKey& key = image.key;
  const oci::Descriptor& manifest = image.manifest;
  const registry::ClientOptions& options = registry::default_client_options();
  LS_TRY_ASSIGN(std::vector<oci::Descriptor> found,
                registry::list_referrers(ref, manifest.digest, k_media_dsse, options));
  std::optional<envspec::ProvenanceFacts> facts;
  for (const oci::Descriptor& d : found) {
    LS_TRY_ASSIGN(std::string text, registry::fetch_referrer(ref, d, manifest.digest, 16ULL << 20, options));
    const std::string what = fmt::format("provenance {} of {}", d.digest.str().substr(0, 19), ref.name());
    LS_TRY_ASSIGN(DsseEnvelope env, parse_dsse(text, what));
    const bool by_key =
        std::any_of(env.signatures.begin(), env.signatures.end(), [&](const std::string& sig) {
          return key.verify(dsse_pae(env.payload_type, env.payload), sig);
        });
    if (!by_key) {
      continue;
    }
    if (env.payload_type != envspec::k_intoto_payload_type) {
      return invalid_input("{}: payloadType {}, not {}", what, env.payload_type,
                           envspec::k_intoto_payload_type);
    }
    LS_TRY_ASSIGN(envspec::ProvenanceFacts f, envspec::read_provenance(env.payload, what));
    if (f.subject != manifest.digest) {
      return Error{ExitCode::check_failed, fmt::format("{} is a statement about {}, not the image's {}", what,
                                                       f.subject.str(), manifest.digest.str())};
    }
    facts = std::move(f);
  }
  if (!facts) {
    report["provenance"] = "none";
    if (lock != nullptr) {
      return Error{
          ExitCode::check_failed,
          fmt::format("{} ({}) has no provenance signed by key {}: push it with `lockstep push ... --key "
                      "KEY` from the store that built it",
                      ref.str(), manifest.digest.str(), key.key_id().str().substr(0, 19))};
    }
    return {};
  }
  report["provenance"] = {{"builder", facts->builder_id},
                          {"lock", facts->lock ? facts->lock->str() : std::string()},
                          {"dependencies", facts->dependencies.size()}};
  std::optional<envspec::Lock> share; // a multi-platform lock: the share this image was built from
  if (lock != nullptr && !lock->platforms.empty() && facts->lock) {
    share = envspec::lock_share_with_digest(*lock, *facts->lock);
    if (!share) {
      return Error{
          ExitCode::check_failed,
          fmt::format("{}: its provenance says it was built from the lock {}, which is no platform's "
                      "share of this lock (of {})",
                      ref.str(), facts->lock->str(), fmt::join(lock->platforms, ", "))};
    }
    lock = &*share;
  }
  if (lock != nullptr) {
    const Digest want = envspec::lock_digest(*lock);
    if (!facts->lock || *facts->lock != want) {
      return Error{ExitCode::check_failed,
                   fmt::format("{}: its provenance says it was built from the lock {}, not {}", ref.str(),
                               facts->lock ? facts->lock->str() : std::string("(none)"), want.str())};
    }
    const std::map<std::string, std::string> deps = envspec::lock_dependencies(*lock);
    std::vector<std::string> differences;
    for (const auto& [sha, uri] : deps) {
      if (!facts->dependencies.contains(sha)) {
        differences.push_back("missing " + uri);
      }
    }
    for (const auto& [sha, uri] : facts->dependencies) {
      if (!deps.contains(sha)) {
        differences.push_back("not in the lock: " + uri);
      }
    }
    if (!differences.empty()) {
      return Error{
          ExitCode::check_failed,
          fmt::format("{}: its provenance's inputs differ from the lock's ({} differences), first: {}",
                      ref.str(), differences.size(), differences.front())};
    }
  }
  return {};
}

} // namespace lockstep::runner
