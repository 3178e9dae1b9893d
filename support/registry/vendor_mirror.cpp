// A registry repository as a mirror: see vendor_mirror.hpp.
#include "support/registry/vendor_mirror.hpp"

#include "support/base/log.hpp"
#include "support/registry/transfer.hpp"

#include <fmt/format.h>

#include <charconv>

namespace lockstep::registry {

Result<std::shared_ptr<Client>> RegistryMirror::client() const {
  std::lock_guard lock(m_mutex);
  if (!m_client) {
    LS_TRY_ASSIGN(m_client, Client::open(m_repo, m_options));
  }
  return m_client;
}

Result<bool> RegistryMirror::fetch(const Digest& sha256, std::optional<std::uint64_t> size,
                                   const BlobStore& store) const {
  LS_TRY_ASSIGN(std::shared_ptr<Client> c, client());
  ApiRequest head;
  head.method = "HEAD";
  head.path_or_url = "/v2/" + m_repo.repository + "/blobs/" + sha256.str();
  head.scopes = {{m_repo.repository, "pull"}};
  head.expected = {404};
  head.follow_redirects = true;
  head.what = fmt::format("blob {} in mirror {}", sha256.str(), name());
  LS_TRY_ASSIGN(HttpResponse r, c->request(std::move(head)));
  if (r.status == 404) {
    return false;
  }
  std::int64_t length = -1;
  if (auto cl = r.header("content-length")) {
    std::int64_t v = 0;
    if (std::from_chars(cl->data(), cl->data() + cl->size(), v).ec == std::errc()) {
      length = v;
    }
  }
  if (size && length >= 0 && static_cast<std::uint64_t>(length) != *size) {
    return invalid_input(
        "mirror {}: blob {} has {} bytes, the lock says {}; refusing it (nothing was stored)", name(),
        sha256.str(), length, *size);
  }
  oci::Descriptor desc;
  desc.media_type = "application/octet-stream";
  desc.digest = sha256;
  desc.size = size ? static_cast<std::int64_t>(*size) : length;
  BlobFetch fetch{*c, m_repo.repository, store, name()};
  auto got = fetch.one(desc, nullptr);
  if (!got) {
    Error e = std::move(got).error();
    e.message = fmt::format("mirror {}: {}", name(), e.message);
    return e;
  }
  log::debug("{} from mirror {}", sha256.str(), name());
  return true;
}

} // namespace lockstep::registry
