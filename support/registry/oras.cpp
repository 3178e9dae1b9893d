// SIF files in a registry (see oras.hpp).
#include "support/registry/oras.hpp"

#include "support/base/json.hpp"
#include "support/oci/oci.hpp"
#include "support/registry/pull.hpp"
#include "support/registry/transfer.hpp"
#include "support/system/fs.hpp"

namespace lockstep::registry {

using nlohmann::json;

namespace {

constexpr std::string_view k_empty_config = "{}";
constexpr std::string_view k_title = "org.opencontainers.image.title";

} // namespace

Result<std::pair<Digest, PushStats>> push_sif(const std::filesystem::path& sif,
                                              const oci::RegistryRef& target,
                                              const std::vector<std::string>& tags, const BlobStore& store,
                                              const ClientOptions& options) {
  LS_TRY_ASSIGN(BlobInfo config, store.put(k_empty_config));
  LS_TRY_ASSIGN(UniqueFd fd, open_input_file(sif));
  Sha256 hash;
  std::vector<char> buf(1 << 20);
  std::uint64_t size = 0;
  while (true) {
    LS_TRY_ASSIGN(std::size_t n, read_some(fd.get(), buf.data(), buf.size(), sif.string()));
    if (n == 0) {
      break;
    }
    hash.update(buf.data(), n);
    size += n;
  }
  oci::Descriptor config_desc;
  config_desc.media_type = std::string(k_sif_config_type);
  config_desc.digest = config.digest;
  config_desc.size = config.size;
  oci::Descriptor layer;
  layer.media_type = std::string(k_sif_layer_type);
  layer.digest = hash.finish();
  layer.size = static_cast<std::int64_t>(size);
  layer.annotations[std::string(k_title)] = sif.filename().string();
  oci::Manifest manifest;
  manifest.media_type = std::string(oci::k_media_manifest);
  manifest.config = config_desc;
  manifest.layers = {layer};
  PushContent content;
  content.manifest_bytes = manifest.serialize();
  content.media_type = std::string(oci::k_media_manifest);
  content.blobs = {config_desc, layer};
  auto source = local_blobs({{layer.digest, sif}}, store);
  return push(*source, content, target, tags, store, options);
}

Result<std::filesystem::path> pull_sif(const oci::RegistryRef& ref, const BlobStore& store,
                                       const ClientOptions& options) {
  const std::string where = "oras://" + ref.str();
  LS_TRY_ASSIGN(std::shared_ptr<Client> client, Client::open(ref, options));
  ApiRequest r;
  r.path_or_url = "/v2/" + ref.repository + "/manifests/" + ref.api_reference();
  r.headers.push_back(fmt::format("Accept: {}", oci::k_media_manifest));
  r.scopes = {{ref.repository, "pull"}};
  r.max_body = k_max_manifest_size;
  r.expected = {404};
  r.what = "manifest of " + where;
  LS_TRY_ASSIGN(HttpResponse resp, client->request(std::move(r)));
  if (resp.status == 404) {
    return invalid_input("{}: no such artifact in registry {}", where, ref.host);
  }
  Digest got = sha256_of(resp.body);
  if (ref.digest && got != *ref.digest) {
    return invalid_input(
        "{}: the registry sent a manifest with digest {}, not the one asked for; nothing was "
        "stored",
        where, got.str());
  }
  LS_TRY_ASSIGN(oci::Manifest manifest, oci::Manifest::parse(resp.body, where));
  const oci::Descriptor* sif = nullptr;
  for (const auto& l : manifest.layers) {
    if (l.media_type == k_sif_layer_type || l.media_type == k_sif_layer_type_proto) {
      if (sif != nullptr) {
        return invalid_input("{}: the artifact holds more than one SIF layer", where);
      }
      sif = &l;
    }
  }
  if (sif == nullptr) {
    return invalid_input("{}: not a SIF artifact (no layer of media type {}); for a container image use "
                         "docker://{}",
                         where, k_sif_layer_type, ref.str());
  }
  BlobFetch fetch{*client, ref.repository, store, where};
  LS_TRY(fetch.run({*sif}, "pulling " + ref.str()));
  remember_blob(store, ref.host, ref.repository, sif->digest);
  return store.blob_path(sif->digest);
}

Result<std::filesystem::path> pull_sif(const oci::RegistryRef& ref, const std::filesystem::path& store_root) {
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(store_root));
  return pull_sif(ref, store, default_client_options());
}

} // namespace lockstep::registry
