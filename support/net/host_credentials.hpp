#pragma once
// Per-host credentials for downloads, from the credentials file rattler and pixi keep
// ($RATTLER_AUTH_FILE, else ~/.rattler/credentials.json): a JSON object whose keys are hosts
// ("conda.anaconda.org", "127.0.0.1:8000") or wildcards ("*.prefix.dev"), each one of
//   {"CondaToken": "TOKEN"}                                  anaconda.org's path token, /t/TOKEN/
//   {"BearerToken": "TOKEN"}                                 an Authorization: Bearer header
//   {"BasicHTTP": {"username": "U", "password": "P"}}        HTTP basic authentication
// The secrets stay out of the spec, the lock and every message: support/net/http.cpp applies them
// to each request for the host, and shows the URL without them. docs/conda.md, "Channels".
#include "support/base/result.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace lockstep {

/// One host's credential.
struct HostCredential {
  enum class Kind { conda_token, bearer, basic };
  Kind kind = Kind::conda_token;
  std::string token;    ///< conda_token, bearer
  std::string username; ///< basic
  std::string password; ///< basic
};

/// The credential for `host` ("HOST[:PORT]" as in the URL): the file's entry for exactly that host,
/// else the longest wildcard that matches it; nullopt when the file has none or there is no file.
/// The file is read once per process. A file that isn't valid (not JSON, over 1 MiB, an entry of
/// another shape) is invalid_input naming it and the entry.
Result<std::optional<HostCredential>> credential_for_host(std::string_view host);

/// `url` with a conda token inserted after its host ("https://h/t/TOKEN/channel/..."), unless its
/// path already starts with /t/.
std::string with_conda_token(const std::string& url, std::string_view token);

} // namespace lockstep
