// Referrers: artifacts attached to a manifest in a registry; see referrers.hpp.
#include "support/registry/referrers.hpp"

#include "support/base/log.hpp"
#include "support/registry/push.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace lockstep::registry {

namespace {

// Index documents of the tag schema and of the API are small; a larger one is refused.
constexpr std::uint64_t k_max_index = 4ULL << 20;
constexpr std::uint64_t k_max_manifest = 4ULL << 20;

oci::RegistryRef at(const oci::RegistryRef& repo, const std::string& reference) {
  oci::RegistryRef r = repo;
  r.digest.reset();
  r.tag = reference;
  return r;
}

ApiRequest get(const oci::RegistryRef& repo, const std::string& path, std::string accept, std::string what) {
  ApiRequest r;
  r.path_or_url = "/v2/" + repo.repository + path;
  r.headers = {"Accept: " + std::move(accept)};
  r.scopes = {{repo.repository, "pull"}};
  r.max_body = k_max_index;
  r.expected = {404};
  r.what = std::move(what);
  return r;
}

// The document at `path` (a manifest or the referrers API), parsed as T; nullopt when the registry
// answers 404.
template <typename T>
Result<std::optional<T>> optional_document(Client& client, const oci::RegistryRef& repo,
                                           const std::string& path, std::string_view accept,
                                           const std::string& what) {
  LS_TRY_ASSIGN(HttpResponse r, client.request(get(repo, path, std::string(accept), what)));
  if (r.status == 404) {
    return std::optional<T>();
  }
  LS_TRY_ASSIGN(T document, T::parse(r.body, what));
  return std::optional<T>(std::move(document));
}

// The bytes of blob `d` (at most `max_size`), checked against its size and digest.
Result<std::string> blob_bytes(Client& client, const oci::RegistryRef& repo, const oci::Descriptor& d,
                               std::uint64_t max_size, const std::string& what) {
  if (d.size < 0 || static_cast<std::uint64_t>(d.size) > max_size) {
    return invalid_input("{}: {} bytes, more than the {} accepted", what, d.size, max_size);
  }
  ApiRequest b = get(repo, "/blobs/" + d.digest.str(), "*/*", what);
  b.max_body = static_cast<std::uint64_t>(d.size);
  b.expected.clear();
  b.follow_redirects = true;
  LS_TRY_ASSIGN(HttpResponse blob, client.request(std::move(b)));
  if (blob.body.size() != static_cast<std::size_t>(d.size) || sha256_of(blob.body) != d.digest) {
    return invalid_input("{}: the registry sent other bytes than {} ({} bytes); nothing was read", what,
                         d.digest.str(), d.size);
  }
  return std::move(blob.body);
}

// The referrers the API lists for `subject`; nullopt when the registry has no such API (404).
Result<std::optional<oci::Index>> api_referrers(Client& client, const oci::RegistryRef& repo,
                                                const Digest& subject) {
  return optional_document<oci::Index>(client, repo, "/referrers/" + subject.str(), oci::k_media_index,
                                       fmt::format("referrers of {}@{}", repo.name(), subject.str()));
}

// The index under the referrers tag; nullopt when the tag does not exist.
Result<std::optional<oci::Index>> tag_referrers(Client& client, const oci::RegistryRef& repo,
                                                const Digest& subject) {
  const std::string tag = referrers_tag(subject);
  return optional_document<oci::Index>(client, repo, "/manifests/" + tag, oci::k_media_index,
                                       fmt::format("referrers index {}:{}", repo.name(), tag));
}

} // namespace

Result<oci::Descriptor> resolve_manifest(const oci::RegistryRef& ref, const ClientOptions& options) {
  LS_TRY_ASSIGN(std::shared_ptr<Client> client, Client::open(ref, options));
  const std::string what = "manifest of " + ref.str();
  ApiRequest r = get(ref, "/manifests/" + ref.api_reference(),
                     fmt::format("{}, {}, application/vnd.docker.distribution.manifest.v2+json, "
                                 "application/vnd.docker.distribution.manifest.list.v2+json",
                                 oci::k_media_manifest, oci::k_media_index),
                     what);
  r.max_body = k_max_manifest;
  LS_TRY_ASSIGN(HttpResponse resp, client->request(std::move(r)));
  if (resp.status == 404) {
    return invalid_input("{}: no such image in registry {} (manifest unknown); check the repository and tag",
                         ref.str(), ref.host);
  }
  oci::Descriptor d;
  d.digest = sha256_of(resp.body);
  d.size = static_cast<std::int64_t>(resp.body.size());
  if (ref.digest && *ref.digest != d.digest) {
    return invalid_input("{}: the registry sent a manifest with digest {}", what, d.digest.str());
  }
  d.media_type = resp.header("content-type").value_or(std::string(oci::k_media_manifest));
  d.media_type = d.media_type.substr(0, d.media_type.find(';'));
  return d;
}

std::string referrers_tag(const Digest& subject) {
  return subject.algorithm() + "-" + subject.hex();
}

std::string artifact_manifest(const oci::Descriptor& subject, const oci::Descriptor& content,
                              const Attachment& attachment) {
  oci::Manifest m;
  m.media_type = std::string(oci::k_media_manifest);
  m.artifact_type = attachment.artifact_type;
  m.config.media_type = std::string(k_media_empty);
  m.config.digest = sha256_of("{}");
  m.config.size = 2;
  m.layers = {content};
  oci::Descriptor s;
  s.media_type = subject.media_type.empty() ? std::string(oci::k_media_manifest) : subject.media_type;
  s.digest = subject.digest;
  s.size = subject.size;
  m.subject = s;
  m.annotations = attachment.annotations;
  return m.serialize();
}

Result<Attached> attach(const oci::RegistryRef& repo, const oci::Descriptor& subject,
                        const Attachment& attachment, const BlobStore& store, const ClientOptions& options) {
  LS_TRY_ASSIGN(BlobInfo empty, store.put("{}"));
  LS_TRY_ASSIGN(BlobInfo blob, store.put(attachment.content));
  oci::Descriptor content;
  content.media_type = attachment.media_type;
  content.digest = blob.digest;
  content.size = static_cast<std::int64_t>(blob.size);
  PushContent push_content;
  push_content.manifest_bytes = artifact_manifest(subject, content, attachment);
  push_content.media_type = std::string(oci::k_media_manifest);
  oci::Descriptor config;
  config.media_type = std::string(k_media_empty);
  config.digest = empty.digest;
  config.size = static_cast<std::int64_t>(empty.size);
  push_content.blobs = {config, content};
  Attached out;
  out.manifest.media_type = std::string(oci::k_media_manifest);
  out.manifest.digest = sha256_of(push_content.manifest_bytes);
  out.manifest.size = static_cast<std::int64_t>(push_content.manifest_bytes.size());
  out.manifest.artifact_type = attachment.artifact_type;
  out.manifest.annotations = attachment.annotations;

  // Already listed under the referrers tag (attaching the same artifact again): nothing to do.
  LS_TRY_ASSIGN(std::shared_ptr<Client> client, Client::open(repo, options));
  LS_TRY_ASSIGN(auto existing, tag_referrers(*client, repo, subject.digest));
  const auto listed = [&](const std::optional<oci::Index>& idx) {
    return idx && std::any_of(idx->manifests.begin(), idx->manifests.end(),
                              [&](const oci::Descriptor& d) { return d.digest == out.manifest.digest; });
  };
  if (listed(existing)) {
    out.tag_schema = true;
    return out;
  }
  auto source = local_blobs({}, store);
  const oci::RegistryRef by_digest = at(repo, out.manifest.digest.str());
  LS_TRY_ASSIGN(auto pushed,
                push(*source, push_content, by_digest, {out.manifest.digest.str()}, store, options));
  if (pushed.second.oci_subject == subject.digest.str()) {
    return out; // the registry indexed it
  }
  LS_TRY_ASSIGN(auto api, api_referrers(*client, repo, subject.digest));
  if (api) {
    return out; // it has the API (the manifest was there before, so no OCI-Subject came back)
  }
  // The tag schema: the index under sha256-<hex>, with this artifact listed once.
  oci::Index index;
  index.media_type = std::string(oci::k_media_index);
  if (existing) {
    index.manifests = std::move(existing->manifests);
    index.annotations = std::move(existing->annotations);
  }
  out.tag_schema = true;
  index.manifests.push_back(out.manifest);
  PushContent index_content;
  index_content.manifest_bytes = index.serialize();
  index_content.media_type = std::string(oci::k_media_index);
  const std::string tag = referrers_tag(subject.digest);
  LS_TRY(push(*source, index_content, at(repo, tag), {tag}, store, options));
  log::debug("{}: listed {} under the referrers tag {}", repo.name(), out.manifest.digest.str(), tag);
  return out;
}

Result<std::vector<oci::Descriptor>> list_referrers(const oci::RegistryRef& repo, const Digest& subject,
                                                    std::string_view artifact_type,
                                                    const ClientOptions& options) {
  LS_TRY_ASSIGN(std::shared_ptr<Client> client, Client::open(repo, options));
  LS_TRY_ASSIGN(auto index, api_referrers(*client, repo, subject));
  if (!index) {
    LS_TRY_ASSIGN(index, tag_referrers(*client, repo, subject));
  }
  std::vector<oci::Descriptor> out;
  if (index) {
    for (oci::Descriptor& d : index->manifests) {
      if (artifact_type.empty() || d.artifact_type == artifact_type) {
        out.push_back(std::move(d));
      }
    }
  }
  return out;
}

Result<std::string> fetch_referrer(const oci::RegistryRef& repo, const oci::Descriptor& referrer,
                                   const Digest& subject, std::uint64_t max_size,
                                   const ClientOptions& options) {
  LS_TRY_ASSIGN(std::shared_ptr<Client> client, Client::open(repo, options));
  const std::string what = fmt::format("referrer {}@{}", repo.name(), referrer.digest.str());
  ApiRequest r = get(repo, "/manifests/" + referrer.digest.str(), std::string(oci::k_media_manifest), what);
  r.max_body = k_max_manifest;
  r.expected.clear();
  LS_TRY_ASSIGN(HttpResponse resp, client->request(std::move(r)));
  if (sha256_of(resp.body) != referrer.digest) {
    return invalid_input("{}: the registry sent a manifest with digest {}; nothing was read", what,
                         sha256_of(resp.body).str());
  }
  LS_TRY_ASSIGN(oci::Manifest m, oci::Manifest::parse(resp.body, what));
  if (!m.subject) {
    return invalid_input("{}: the manifest has no subject; it is not attached to an image", what);
  }
  if (m.subject->digest != subject) {
    return Error{ExitCode::check_failed, fmt::format("{} is attached to {}, not to {}", what,
                                                     m.subject->digest.str(), subject.str())};
  }
  if (m.layers.size() != 1) {
    return invalid_input("{}: an artifact with {} layers; expected one", what, m.layers.size());
  }
  return blob_bytes(*client, repo, m.layers.front(), max_size, what + " content");
}

std::string signature_tag(const Digest& image) {
  return referrers_tag(image) + ".sig";
}

namespace {

constexpr std::uint64_t k_max_payload = 1ULL << 20;

// The signature manifest under the image's signature tag; nullopt when there is none.
Result<std::optional<oci::Manifest>> signature_manifest(Client& client, const oci::RegistryRef& repo,
                                                        const Digest& image) {
  const std::string tag = signature_tag(image);
  return optional_document<oci::Manifest>(client, repo, "/manifests/" + tag, oci::k_media_manifest,
                                          fmt::format("signatures {}:{}", repo.name(), tag));
}

} // namespace

Result<std::vector<AttachedSignature>> fetch_signatures(const oci::RegistryRef& repo, const Digest& image,
                                                        const ClientOptions& options) {
  LS_TRY_ASSIGN(std::shared_ptr<Client> client, Client::open(repo, options));
  LS_TRY_ASSIGN(auto manifest, signature_manifest(*client, repo, image));
  std::vector<AttachedSignature> out;
  if (!manifest) {
    return out;
  }
  for (const oci::Descriptor& layer : manifest->layers) {
    if (layer.media_type != k_media_simple_signing) {
      log::debug("{}: skipping a signature layer of type {}", repo.name(), layer.media_type);
      continue;
    }
    const std::string what = fmt::format("signature payload {} of {}", layer.digest.str(), repo.name());
    AttachedSignature s;
    s.layer = layer.digest;
    LS_TRY_ASSIGN(s.payload, blob_bytes(*client, repo, layer, k_max_payload, what));
    if (auto a = layer.annotations.find(std::string(k_annotation_cosign_signature));
        a != layer.annotations.end()) {
      s.signature = a->second;
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<Digest> add_signature(const oci::RegistryRef& repo, const Digest& image, std::string_view payload,
                             std::string_view signature, const BlobStore& store,
                             const ClientOptions& options) {
  LS_TRY_ASSIGN(std::shared_ptr<Client> client, Client::open(repo, options));
  LS_TRY_ASSIGN(auto existing, signature_manifest(*client, repo, image));
  std::vector<oci::Descriptor> layers = existing ? existing->layers : std::vector<oci::Descriptor>();
  LS_TRY_ASSIGN(BlobInfo blob, store.put(payload));
  const bool there = std::any_of(layers.begin(), layers.end(), [&](const oci::Descriptor& l) {
    auto a = l.annotations.find(std::string(k_annotation_cosign_signature));
    return l.digest == blob.digest && a != l.annotations.end() && a->second == signature;
  });
  if (!there) {
    oci::Descriptor layer;
    layer.media_type = std::string(k_media_simple_signing);
    layer.digest = blob.digest;
    layer.size = static_cast<std::int64_t>(blob.size);
    layer.annotations[std::string(k_annotation_cosign_signature)] = std::string(signature);
    layers.push_back(std::move(layer));
  }
  // The config containers/image writes for such a manifest: an image config listing the layers.
  nlohmann::json diff_ids = nlohmann::json::array();
  for (const oci::Descriptor& l : layers) {
    diff_ids.push_back(l.digest.str());
  }
  const nlohmann::json config_json = {{"architecture", ""},
                                      {"config", nlohmann::json::object()},
                                      {"os", ""},
                                      {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
  LS_TRY_ASSIGN(BlobInfo config_blob, store.put(config_json.dump()));
  oci::Manifest m;
  m.media_type = std::string(oci::k_media_manifest);
  m.config.media_type = std::string(oci::k_media_config);
  m.config.digest = config_blob.digest;
  m.config.size = static_cast<std::int64_t>(config_blob.size);
  m.layers = layers;
  PushContent content;
  content.manifest_bytes = m.serialize();
  content.media_type = std::string(oci::k_media_manifest);
  content.blobs.push_back(m.config);
  content.blobs.insert(content.blobs.end(), layers.begin(), layers.end());
  auto source = local_blobs({}, store);
  const std::string tag = signature_tag(image);
  LS_TRY_ASSIGN(auto pushed, push(*source, content, at(repo, tag), {tag}, store, options));
  return pushed.first;
}

} // namespace lockstep::registry
