#pragma once
// How to reach one registry host: TLS trust and client certificates from certs.d
// (containers-certs.d(5): /etc/containers/certs.d/HOST[:PORT]/, ~/.config/containers/certs.d/,
// /etc/docker/certs.d/; `*.crt` CAs, `*.cert` + `*.key` client pairs; the port must match exactly),
// and `insecure` from registries.conf (containers-registries.conf(5): /etc/containers/registries.conf,
// its registries.conf.d/ drop-ins, ~/.config/containers/registries.conf; `[[registry]]` tables with
// `location`/`prefix` and `insecure`, and the v1 `[registries.insecure] registries = [...]`).
#include "support/base/result.hpp"
#include "support/net/http_session.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::registry {

/// The configuration files and directories consulted.
struct HostConfigFiles {
  std::vector<std::filesystem::path> registries_conf; ///< in order; later files override earlier ones
  std::vector<std::filesystem::path> certs_dirs;      ///< each holds HOST[:PORT]/ subdirectories

  /// The standard locations (as root: /etc only for certs.d, as containers does);
  /// $CONTAINERS_REGISTRIES_CONF alone when set. A caller replaces certs_dirs to use its own
  /// (lockstep's settings::apply_to_support, from $LOCKSTEP_CERTS_D).
  static HostConfigFiles from_environment();
};

/// What applies to one host.
struct HostSettings {
  bool insecure = false; ///< plain HTTP and unverified TLS allowed (registries.conf or --tls-verify=false)
  TlsSettings tls;       ///< CAs and client certificate from certs.d
  std::string insecure_source; ///< why insecure: "--tls-verify=false" or "FILE: [[registry]] location=…"
};

/// The settings for `host` ("HOST[:PORT]"). `tls_verify` is the command line's --tls-verify when
/// given (it wins over registries.conf). A malformed registries.conf is invalid_input located at
/// its file and line; a client certificate without its key is invalid_input naming both.
Result<HostSettings> host_settings(const HostConfigFiles& files, std::string_view host,
                                   std::optional<bool> tls_verify);

} // namespace lockstep::registry
