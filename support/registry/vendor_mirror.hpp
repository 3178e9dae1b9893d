#pragma once
// A registry repository as a mirror of the files a lock names (support/net/mirror.hpp): `lockstep
// vendor --to docker://REG/REPO` pushes each file as a blob of that repository (under one artifact
// manifest, so the registry keeps them), and a build with `--mirror docker://REG/REPO` asks the
// repository for each blob by its sha256 (HEAD, then GET, checked) before upstream.
#include "support/net/mirror.hpp"
#include "support/oci/registry_ref.hpp"
#include "support/registry/client.hpp"

#include <memory>
#include <mutex>

namespace lockstep::registry {

class RegistryMirror final : public BlobMirror {
public:
  RegistryMirror(oci::RegistryRef repo, ClientOptions options)
      : m_repo(std::move(repo)), m_options(std::move(options)) {}
  [[nodiscard]] std::string name() const override { return "docker://" + m_repo.name(); }
  Result<bool> fetch(const Digest& sha256, std::optional<std::uint64_t> size,
                     const BlobStore& store) const override;

private:
  Result<std::shared_ptr<Client>> client() const;

  oci::RegistryRef m_repo;
  ClientOptions m_options;
  mutable std::mutex m_mutex;
  mutable std::shared_ptr<Client> m_client;
};

} // namespace lockstep::registry
