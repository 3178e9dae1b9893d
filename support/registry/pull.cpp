// Images read from a registry (see pull.hpp).
#include "support/registry/pull.hpp"

#include "support/base/interrupt.hpp"
#include "support/base/log.hpp"
#include "support/net/mirror.hpp"
#include "support/oci/image_internal.hpp"
#include "support/registry/transfer.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

namespace lockstep::registry {

using nlohmann::json;

namespace {

constexpr std::string_view k_schema1 = "application/vnd.docker.distribution.manifest.v1+json";
constexpr std::string_view k_schema1_signed = "application/vnd.docker.distribution.manifest.v1+prettyjws";

// The Accept header of manifest requests: the four media types lockstep reads, never schema 1.
std::string accept_manifests() {
  return fmt::format("Accept: {}, {}, {}, {}", oci::k_media_index, oci::k_media_manifest,
                     oci::k_docker_manifest_list, oci::k_docker_manifest);
}

Error schema1_refused(const std::string& what) {
  return invalid_input(
      "{} is a Docker schema 1 manifest, which lockstep does not read (it is deprecated and "
      "unsigned content can't be verified). Push the image again with a current docker, podman or "
      "skopeo (`skopeo copy docker://REF docker://REF` converts it to schema 2)",
      what);
}

// The media type a manifest body states (mediaType, or schemaVersion 1).
Result<std::string> body_media_type(const std::string& body, const std::string& what) {
  LS_TRY_ASSIGN(json j, parse_json(body, what));
  if (!j.is_object()) {
    return invalid_input("{}: not a JSON object", what);
  }
  if (auto sv = j.find("schemaVersion"); sv != j.end() && sv->is_number_integer() && sv->get<int>() == 1) {
    return std::string(k_schema1);
  }
  if (auto mt = j.find("mediaType"); mt != j.end() && mt->is_string()) {
    return mt->get<std::string>();
  }
  return std::string();
}

// The descriptor of a manifest or index body.
oci::Descriptor describe(const Digest& digest, const std::string& body, const std::string& type) {
  oci::Descriptor d;
  d.media_type = type;
  d.digest = digest;
  d.size = static_cast<std::int64_t>(body.size());
  return d;
}

// An image in a registry, its blobs read through the content store.
class RegistrySource final : public oci::ImageSource {
public:
  RegistrySource(oci::RegistryRef ref, std::shared_ptr<Client> client, const BlobStore& store)
      : m_ref(std::move(ref)), m_client(std::move(client)), m_store(store) {
    m_names.location = "docker://" + m_ref.name();
    m_names.ref = "docker://" + m_ref.str();
    m_names.tag_hint = "docker://" + m_ref.name() + ":TAG";
  }

  Result<oci::OpenedImage> resolve(const oci::SelectOptions& options) override {
    LS_TRY_ASSIGN(oci::Descriptor top, fetch_top_manifest());
    oci::Index index;
    index.manifests.push_back(top);
    oci::SelectOptions select = options;
    select.tag.clear();
    LS_TRY_ASSIGN(oci::OpenedImage image, oci::detail::resolve_in_layout(*this, index, select, m_names,
                                                                         oci::detail::TagMatch::ref_name));
    image.ref_name = m_ref.tag;
    m_layers = image.manifest.layers;
    return image;
  }

  Result<std::string> read_blob(const oci::Descriptor& desc, std::uint64_t max_size) override {
    LS_TRY(oci::detail::check_readable_blob(desc, max_size, m_names.location));
    if (!m_store.has(desc.digest, desc.size)) {
      if (oci::is_manifest_type(desc.media_type) || oci::is_index_type(desc.media_type)) {
        LS_TRY(fetch_manifest_by_digest(desc));
      } else {
        LS_TRY(fetch_all({desc}));
      }
    }
    return m_store.read(desc.digest, max_size);
  }

  Result<void> fetch_blob(const oci::Descriptor& desc, const BlobStore& store) override {
    LS_TRY(ensure_layers(desc));
    if (&store == &m_store || store.root() == m_store.root()) {
      return {};
    }
    if (store.has(desc.digest, desc.size)) {
      return {};
    }
    LS_TRY_ASSIGN(std::string bytes, m_store.read(desc.digest, UINT64_MAX));
    LS_TRY(store.put(bytes));
    return {};
  }

  Result<std::unique_ptr<oci::BlobReader>> open_blob(const oci::Descriptor& desc) override {
    LS_TRY(oci::detail::check_readable_blob(desc, UINT64_MAX, m_names.location));
    LS_TRY(ensure_layers(desc));
    return oci::open_file_blob(m_store.blob_path(desc.digest),
                               m_names.location + ": blob " + desc.digest.str());
  }

  [[nodiscard]] const PullStats& stats() const { return m_stats; }

  // Fetches every layer of the resolved image (once), several at once.
  Result<void> fetch_layers() {
    if (m_layers_fetched) {
      return {};
    }
    LS_TRY(fetch_all(m_layers));
    m_layers_fetched = true;
    return {};
  }

private:
  // The first layer read fetches them all in parallel; a blob outside the image alone.
  Result<void> ensure_layers(const oci::Descriptor& desc) {
    if (m_store.has(desc.digest, desc.size)) {
      return {};
    }
    bool listed =
        std::any_of(m_layers.begin(), m_layers.end(), [&](const auto& l) { return l.digest == desc.digest; });
    if (listed && !m_layers_fetched) {
      return fetch_layers();
    }
    return fetch_all({desc});
  }

  Result<void> fetch_all(const std::vector<oci::Descriptor>& blobs) {
    BlobFetch fetch{*m_client, m_ref.repository, m_store, m_names.location};
    LS_TRY_ASSIGN(FetchTotals totals, fetch.run(blobs, "pulling " + m_ref.str()));
    m_stats.blobs += blobs.size();
    m_stats.downloaded += totals.downloaded;
    m_stats.bytes += totals.bytes;
    return {};
  }

  // GET manifests/<tag|digest>: checked against the digest asked for (or Docker-Content-Digest),
  // its Content-Type against its mediaType; stored, and described for resolve_in_layout.
  Result<oci::Descriptor> fetch_top_manifest() {
    const std::string what = "manifest of " + m_ref.str();
    const MirrorSet& mirrors = default_mirrors();
    if (m_ref.digest && !m_store.has(*m_ref.digest) && !mirrors.mirrors.empty()) {
      LS_TRY(mirrors.fetch(*m_ref.digest, std::nullopt, m_store)); // a vendored manifest, when there is one
    }
    if (mirrors.offline && !(m_ref.digest && m_store.has(*m_ref.digest))) {
      return Error{ExitCode::check_failed,
                   fmt::format("offline: {} is not in the store or a mirror ({}){}", what, mirrors.names(),
                               m_ref.digest ? "; vendor the lock into one (`lockstep vendor`)"
                                            : ": offline, only a pinned digest can be used")};
    }
    if (m_ref.digest && m_store.has(*m_ref.digest)) {
      // Pinned and already here: no need to ask the registry.
      LS_TRY_ASSIGN(std::string body, m_store.read(*m_ref.digest, k_max_manifest_size));
      LS_TRY_ASSIGN(std::string type, body_media_type(body, what));
      if (type.empty()) {
        // An OCI manifest or index may leave mediaType out (the registry's Content-Type said which
        // when it was stored): its shape tells.
        LS_TRY_ASSIGN(json j, parse_json(body, what));
        type = j.contains("manifests")                        ? std::string(oci::k_media_index)
               : j.contains("config") && j.contains("layers") ? std::string(oci::k_media_manifest)
                                                              : std::string();
      }
      return describe(*m_ref.digest, body, type);
    }
    ApiRequest r;
    r.path_or_url = "/v2/" + m_ref.repository + "/manifests/" + m_ref.api_reference();
    r.headers.push_back(accept_manifests());
    r.scopes = {{m_ref.repository, "pull"}};
    r.max_body = k_max_manifest_size;
    r.expected = {404};
    r.what = what;
    LS_TRY_ASSIGN(HttpResponse resp, m_client->request(std::move(r)));
    if (resp.status == 404) {
      return invalid_input(
          "{}: no such image in registry {} (manifest unknown); check the repository and tag", m_names.ref,
          m_ref.host);
    }
    return check_manifest(resp, m_ref.digest, what);
  }

  Result<void> fetch_manifest_by_digest(const oci::Descriptor& desc) {
    const std::string what = "manifest " + desc.digest.str() + " of " + m_ref.name();
    ApiRequest r;
    r.path_or_url = "/v2/" + m_ref.repository + "/manifests/" + desc.digest.str();
    r.headers.push_back(accept_manifests());
    r.scopes = {{m_ref.repository, "pull"}};
    r.max_body = k_max_manifest_size;
    r.what = what;
    LS_TRY_ASSIGN(HttpResponse resp, m_client->request(std::move(r)));
    LS_TRY_ASSIGN(oci::Descriptor got, check_manifest(resp, desc.digest, what));
    if (got.size != desc.size) {
      return invalid_input("{} has {} bytes, its descriptor says {}", what, got.size, desc.size);
    }
    return {};
  }

  Result<oci::Descriptor> check_manifest(const HttpResponse& resp, const std::optional<Digest>& expected,
                                         const std::string& what) {
    const std::string& body = resp.body;
    std::string content_type = resp.header("content-type").value_or("");
    content_type = content_type.substr(0, content_type.find(';'));
    if (content_type == k_schema1 || content_type == k_schema1_signed) {
      return schema1_refused(what);
    }
    LS_TRY_ASSIGN(std::string type, body_media_type(body, what));
    if (type == k_schema1) {
      return schema1_refused(what);
    }
    Digest got = sha256_of(body);
    if (expected && got != *expected) {
      return invalid_input(
          "{}: the registry sent a body with digest {}, not the {} asked for; nothing was stored", what,
          got.str(), expected->str());
    }
    if (auto header = resp.header("docker-content-digest"); header && !expected) {
      auto stated = Digest::parse(*header);
      if (!stated) {
        return invalid_input("{}: the registry's Docker-Content-Digest '{}' is not a digest", what,
                             header->substr(0, 80));
      }
      if (stated->algorithm() == "sha256" && *stated != got) {
        return invalid_input("{}: the body has digest {}, the registry says {}; nothing was stored", what,
                             got.str(), stated->str());
      }
    }
    if (type.empty()) {
      type = content_type; // OCI manifests may leave mediaType out
    } else if (!content_type.empty() && content_type != type && content_type != "application/json" &&
               content_type != "application/octet-stream") {
      return invalid_input("{}: served as '{}' but its mediaType is '{}'", what, content_type, type);
    }
    if (!oci::is_manifest_type(type) && !oci::is_index_type(type)) {
      return invalid_input("{}: media type '{}' is not an image manifest or index", what, type);
    }
    LS_TRY(m_store.put(body));
    return describe(got, body, type);
  }

  oci::RegistryRef m_ref;
  std::shared_ptr<Client> m_client;
  BlobStore m_store;
  oci::detail::SourceNames m_names;
  std::vector<oci::Descriptor> m_layers;
  bool m_layers_fetched = false;
  PullStats m_stats;
};

} // namespace

Result<std::unique_ptr<oci::ImageSource>> open_image(const oci::ImageRef& ref, const BlobStore& store,
                                                     const ClientOptions& options) {
  if (ref.transport == oci::ImageRef::Transport::docker) {
    LS_TRY_ASSIGN(std::shared_ptr<Client> client, Client::open(ref.remote, options));
    return std::unique_ptr<oci::ImageSource>(std::make_unique<RegistrySource>(ref.remote, client, store));
  }
  if (ref.transport == oci::ImageRef::Transport::oras) {
    return invalid_input("{} is a SIF stored in a registry (oras://); use it where a SIF is accepted",
                         ref.str());
  }
  return oci::ImageSource::open(ref);
}

Result<std::unique_ptr<oci::ImageSource>> open_image(const oci::ImageRef& ref,
                                                     const std::filesystem::path& store_root) {
  if (!ref.is_remote()) {
    return oci::ImageSource::open(ref);
  }
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(store_root));
  return open_image(ref, store, default_client_options());
}

Result<std::pair<oci::OpenedImage, PullStats>> pull(const oci::RegistryRef& ref, const BlobStore& store,
                                                    const oci::SelectOptions& select,
                                                    const ClientOptions& options) {
  LS_TRY_ASSIGN(std::shared_ptr<Client> client, Client::open(ref, options));
  RegistrySource source(ref, client, store);
  LS_TRY_ASSIGN(oci::OpenedImage image, source.resolve(select));
  LS_TRY(source.fetch_layers());
  PullStats stats = source.stats();
  stats.blobs = image.manifest.layers.size() + 1;
  return std::pair{std::move(image), stats};
}

} // namespace lockstep::registry
