#include "builder/image/attach.hpp"

#include "builder/image/build.hpp"
#include "builder/image/signing.hpp"
#include "envspec/documents/provenance.hpp"
#include "envspec/documents/sbom.hpp"
#include "envspec/settings/settings.hpp"
#include "support/base/log.hpp"
#include "support/registry/client.hpp"
#include "support/registry/referrers.hpp"
#include "support/store/blob_store.hpp"
#include "support/supplychain/sigstore.hpp"
#include "support/system/fs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <optional>

namespace lockstep::builder {

namespace fs = std::filesystem;

Result<void> attach_sbom_files(const oci::RegistryRef& target, const oci::Descriptor& subject,
                               const std::vector<fs::path>& files) {
  if (files.empty()) {
    return {};
  }
  std::vector<registry::Attachment> attachments;
  for (const fs::path& f : files) {
    LS_TRY_ASSIGN(std::string text, read_file(f, k_max_sbom));
    LS_TRY_ASSIGN(envspec::SbomSubject s, envspec::read_sbom_subject(text, f.string()));
    if (s.subject != subject.digest) {
      return Error{ExitCode::check_failed,
                   fmt::format("{} describes {}, not the image pushed ({}); nothing was attached", f.string(),
                               s.subject.str(), subject.digest.str())};
    }
    registry::Attachment a;
    a.artifact_type = std::string(envspec::sbom_media_type(s.format));
    a.media_type = a.artifact_type;
    a.content = std::move(text);
    // The SBOM's own creation time (the image's epoch), so the attachment's digest is reproducible.
    const nlohmann::json doc = nlohmann::json::parse(a.content, nullptr, false);
    const nlohmann::json::json_pointer at(s.format == envspec::SbomFormat::spdx_json ? "/creationInfo/created"
                                                                                     : "/metadata/timestamp");
    std::string created;
    if (doc.is_object() && doc.contains(at) && doc.at(at).is_string()) {
      created = doc.at(at).get<std::string>();
    }
    if (!created.empty()) {
      a.annotations["org.opencontainers.image.created"] = created;
    }
    attachments.push_back(std::move(a));
  }
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  for (std::size_t i = 0; i < attachments.size(); ++i) {
    LS_TRY_ASSIGN(registry::Attached attached, registry::attach(target, subject, attachments[i], store,
                                                                registry::default_client_options()));
    log::info("attached {} to docker://{}@{} ({}{})", files[i].filename().string(), target.name(),
              subject.digest.str().substr(0, 19), attached.manifest.digest.str().substr(0, 19),
              attached.tag_schema ? ", listed under the tag " + registry::referrers_tag(subject.digest) : "");
  }
  return {};
}

Result<void> attach_provenance(const oci::RegistryRef& target, const oci::Descriptor& subject,
                               const std::string& key_path, const std::string& passphrase_file) {
  LS_TRY_ASSIGN(BlobStore store, BlobStore::open(settings::store_root()));
  std::optional<SigningKey> key;
  if (!key_path.empty()) {
    LS_TRY_ASSIGN(key,
                  SigningKey::load_private(key_path, [&] { return key_passphrase(passphrase_file, false); }));
    LS_TRY(sign_image(target, subject.digest, *key));
    log::info("signed docker://{}@{} with key {}", target.name(), subject.digest.str().substr(0, 19),
              key->key_id().str().substr(0, 19));
  }
  const std::optional<std::string> statement = provenance_record(store, subject.digest);
  if (!statement) {
    log::debug("no provenance of {} in the store (it was not built here): none attached",
               subject.digest.str());
    return {};
  }
  registry::Attachment a;
  if (key) {
    LS_TRY_ASSIGN(a.content, dsse_sign(*key, envspec::k_intoto_payload_type, *statement));
    a.artifact_type = std::string(k_media_dsse);
  } else {
    a.content = *statement;
    a.artifact_type = std::string(envspec::k_intoto_payload_type);
  }
  a.media_type = a.artifact_type;
  LS_TRY_ASSIGN(registry::Attached attached,
                registry::attach(target, subject, a, store, registry::default_client_options()));
  log::info("attached the build's provenance{} to docker://{}@{} ({})", key ? ", signed," : "", target.name(),
            subject.digest.str().substr(0, 19), attached.manifest.digest.str().substr(0, 19));
  return {};
}

} // namespace lockstep::builder
