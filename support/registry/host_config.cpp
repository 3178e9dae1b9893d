// Per-host registry settings: `insecure` from registries.conf and TLS files from certs.d
// (docs/registry.md, "TLS and insecure registries").
//
// Where the files are (as containers/image looks for them):
//   registries.conf: $CONTAINERS_REGISTRIES_CONF alone when set; else ~/.config/containers/registries.conf
//     when it exists, then its registries.conf.d/*.conf; else /etc/containers/registries.conf,
//     /etc/containers/registries.conf.d/*.conf, then ~/.config/containers/registries.conf.d/*.conf.
//     Drop-ins in name order; a later file's [[registry]] with the same prefix replaces an earlier one.
//   certs.d: the caller's list when it sets one (lockstep: $LOCKSTEP_CERTS_D); else, for a non-root user,
//     ~/.config/containers/certs.d first, then /etc/containers/certs.d and /etc/docker/certs.d. The first
//     directory holding a HOST[:PORT] subdirectory is the one used (the others are not merged in).
//   LOCKSTEP_CERTS_D is lockstep's own (tests use it so they never read /etc).
//
// Which [[registry]] applies: its `prefix` (or `location` when no prefix is given) is the host exactly,
// or a `*.example.com` wildcard that the host's name ends with; an exact host beats a wildcard and a
// longer wildcard a shorter one. An entry whose prefix has a path (`example.com/team`) scopes
// repositories, not the host, and does not make the host insecure; neither does an entry whose
// `location` sends the prefix to another host (lockstep does not follow such rewrites).
#include "support/registry/host_config.hpp"

#include "support/base/log.hpp"
#include "support/base/text.hpp"
#include "support/base/toml.hpp"
#include "support/oci/oci.hpp"
#include "support/system/fs.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>

namespace lockstep::registry {

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t k_max_conf_file = 4ULL << 20;

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    return std::nullopt;
  }
  return std::string(v);
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The *.conf files of `dir`, sorted by name; none when it does not exist.
std::vector<fs::path> drop_ins(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".conf" && is_file(it->path())) {
      out.push_back(it->path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One [[registry]] (or a v1 [registries.insecure] host) as it applies to hosts.
struct RegistryEntry {
  std::string prefix; ///< lower case: "example.com:5000", "*.example.com"
  bool insecure = false;
  bool applies = true; ///< false: a path prefix, or a location on another host
  std::string source;  ///< "FILE:LINE: [[registry]] prefix=..."
};

std::string where(const fs::path& file, const toml::source_region& at) {
  return fmt::format("{}:{}", file.string(), at.begin.line);
}

Error conf_error(const fs::path& file, const toml::node& node, std::string_view what) {
  return invalid_input("{}:{}:{}: {}", file.string(), node.source().begin.line, node.source().begin.column,
                       what);
}

Result<std::optional<std::string>> string_key(const fs::path& file, const toml::table& table,
                                              std::string_view key, std::string_view context) {
  const toml::node* node = table.get(key);
  if (node == nullptr) {
    return std::optional<std::string>();
  }
  if (!node->is_string()) {
    return conf_error(file, *node, fmt::format("{}: \"{}\" must be a string", context, key));
  }
  return std::optional<std::string>(**node->as_string());
}

// The host part of a prefix or location ("example.com:5000/ns" -> "example.com:5000").
std::string_view host_part(std::string_view s) {
  return s.substr(0, s.find('/'));
}

// The entries one registries.conf declares, in order.
Result<std::vector<RegistryEntry>> read_registries_conf(const fs::path& file) {
  LS_TRY_ASSIGN(std::string text, read_file(file, k_max_conf_file));
  toml::parse_result parsed = toml::parse(text, file.string());
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
    return invalid_input("{}:{}:{}: {}", file.string(), e.source().begin.line, e.source().begin.column,
                         e.description());
  }
  const toml::table& root = parsed.table();
  std::vector<RegistryEntry> out;

  const toml::node* v2 = root.get("registry");
  const toml::node* v1 = root.get("registries");
  if (v1 != nullptr && v2 != nullptr) {
    return conf_error(
        file, *v1,
        "mixes the v1 [registries.*] tables with v2 [[registry]] tables (containers-registries.conf(5) "
        "allows one format per file)");
  }
  if (v2 != nullptr) {
    const toml::array* list = v2->as_array();
    if (list == nullptr) {
      return conf_error(file, *v2, "\"registry\" must be an array of tables ([[registry]])");
    }
    for (const toml::node& item : *list) {
      const toml::table* t = item.as_table();
      if (t == nullptr) {
        return conf_error(file, item, "each [[registry]] must be a table");
      }
      LS_TRY_ASSIGN(std::optional<std::string> location, string_key(file, *t, "location", "[[registry]]"));
      LS_TRY_ASSIGN(std::optional<std::string> prefix, string_key(file, *t, "prefix", "[[registry]]"));
      if (!prefix && !location) {
        return conf_error(file, item, "[[registry]] needs a \"location\" or a \"prefix\"");
      }
      RegistryEntry e;
      e.prefix = ascii_lower(prefix ? *prefix : *location);
      if (const toml::node* insecure = t->get("insecure")) {
        if (!insecure->is_boolean()) {
          return conf_error(file, *insecure, "[[registry]]: \"insecure\" must be true or false");
        }
        e.insecure = **insecure->as_boolean();
      }
      std::string_view prefix_host = host_part(e.prefix);
      e.applies = prefix_host.size() == e.prefix.size() &&
                  (!location || location->empty() || iequals(host_part(*location), prefix_host));
      e.source = fmt::format("{}: [[registry]] {}=\"{}\"", where(file, item.source()),
                             prefix ? "prefix" : "location", prefix ? *prefix : *location);
      out.push_back(std::move(e));
    }
  }
  if (v1 != nullptr) {
    const toml::table* tables = v1->as_table();
    if (tables == nullptr) {
      return conf_error(file, *v1, "\"registries\" must be a table ([registries.insecure], ...)");
    }
    if (const toml::node* insecure = tables->get("insecure")) {
      const toml::table* t = insecure->as_table();
      if (t == nullptr) {
        return conf_error(file, *insecure, "[registries.insecure] must be a table");
      }
      const toml::node* list_node = t->get("registries");
      const toml::array* list = list_node != nullptr ? list_node->as_array() : nullptr;
      if (list_node != nullptr && list == nullptr) {
        return conf_error(file, *list_node,
                          "[registries.insecure]: \"registries\" must be an array of hosts");
      }
      for (std::size_t i = 0; list != nullptr && i < list->size(); ++i) {
        const toml::node& host = *list->get(i);
        if (!host.is_string()) {
          return conf_error(file, host, "[registries.insecure]: \"registries\" must be an array of hosts");
        }
        RegistryEntry e;
        e.prefix = ascii_lower(**host.as_string());
        e.insecure = true;
        e.applies = host_part(e.prefix).size() == e.prefix.size();
        e.source =
            fmt::format("{}: [registries.insecure] \"{}\"", where(file, host.source()), **host.as_string());
        out.push_back(std::move(e));
      }
    }
  }
  return out;
}

// How well `prefix` matches `host`: 0 not at all; an exact host ranks above every wildcard, a longer
// wildcard above a shorter one.
std::size_t match_rank(std::string_view prefix, std::string_view host) {
  if (prefix == host) {
    return std::string::npos;
  }
  if (!prefix.starts_with("*.")) {
    return 0;
  }
  std::string_view suffix = prefix.substr(1); // ".example.com"
  std::string_view name = host.substr(0, host.find(':'));
  return name.size() > suffix.size() && name.ends_with(suffix) ? prefix.size() : 0;
}

// The entry of the merged files that applies to `host`, if any.
Result<std::optional<RegistryEntry>> find_registry(const HostConfigFiles& files, std::string_view host) {
  std::map<std::string, RegistryEntry> merged; // by prefix: a later file's entry replaces an earlier one
  for (const fs::path& file : files.registries_conf) {
    if (!is_file(file)) {
      continue;
    }
    LS_TRY_ASSIGN(std::vector<RegistryEntry> entries, read_registries_conf(file));
    for (RegistryEntry& e : entries) {
      std::string prefix = e.prefix;
      merged.insert_or_assign(std::move(prefix), std::move(e));
    }
  }
  const RegistryEntry* best = nullptr;
  std::size_t best_rank = 0;
  for (const auto& [prefix, e] : merged) {
    std::size_t rank = e.applies ? match_rank(prefix, host) : 0;
    if (rank > best_rank) {
      best = &e;
      best_rank = rank;
    }
  }
  return best != nullptr ? std::optional<RegistryEntry>(*best) : std::nullopt;
}

// The CA files and client pair in `dir` (a certs.d/HOST[:PORT] directory).
Result<TlsSettings> read_certs_dir(const fs::path& dir) {
  std::vector<fs::path> entries;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    entries.push_back(it->path());
  }
  if (ec) {
    return errno_error("can't read " + dir.string(), ec.value());
  }
  std::sort(entries.begin(), entries.end());
  TlsSettings tls;
  for (const fs::path& p : entries) {
    const std::string ext = p.extension().string();
    if (ext == ".crt") {
      tls.ca_files.push_back(p);
    } else if (ext == ".cert") {
      fs::path key = fs::path(p).replace_extension(".key");
      if (!is_file(key)) {
        return invalid_input("{}: client certificate {} has no key {}", dir.string(), p.string(),
                             key.string());
      }
      if (tls.client_cert.empty()) {
        tls.client_cert = p;
        tls.client_key = key;
      } else {
        log::debug("{}: using the client certificate {}, not {}", dir.string(), tls.client_cert.string(),
                   p.string());
      }
    } else if (ext == ".key") {
      fs::path cert = fs::path(p).replace_extension(".cert");
      if (!is_file(cert)) {
        return invalid_input("{}: client key {} has no certificate {}", dir.string(), p.string(),
                             cert.string());
      }
    }
  }
  return tls;
}

} // namespace

HostConfigFiles HostConfigFiles::from_environment() {
  HostConfigFiles out;
  const std::optional<std::string> home = env_value("HOME");
  const fs::path user_dir = home ? fs::path(*home) / ".config/containers" : fs::path();

  if (auto conf = env_value("CONTAINERS_REGISTRIES_CONF")) {
    out.registries_conf.emplace_back(*conf);
  } else if (home && is_file(user_dir / "registries.conf")) {
    out.registries_conf.push_back(user_dir / "registries.conf");
    for (fs::path& p : drop_ins(user_dir / "registries.conf.d")) {
      out.registries_conf.push_back(std::move(p));
    }
  } else {
    out.registries_conf.emplace_back("/etc/containers/registries.conf");
    for (fs::path& p : drop_ins("/etc/containers/registries.conf.d")) {
      out.registries_conf.push_back(std::move(p));
    }
    if (home) {
      for (fs::path& p : drop_ins(user_dir / "registries.conf.d")) {
        out.registries_conf.push_back(std::move(p));
      }
    }
  }

  {
    if (home && ::geteuid() != 0) {
      out.certs_dirs.push_back(user_dir / "certs.d");
    }
    out.certs_dirs.emplace_back("/etc/containers/certs.d");
    out.certs_dirs.emplace_back("/etc/docker/certs.d");
  }
  return out;
}

Result<HostSettings> host_settings(const HostConfigFiles& files, std::string_view host,
                                   std::optional<bool> tls_verify) {
  // The host names a directory under certs.d: "." and ".." (which valid_registry_host allows) never.
  const std::string_view host_name = host.substr(0, host.find(':'));
  if (!oci::valid_registry_host(host) || host_name.front() == '.' || host_name.back() == '.' ||
      host_name.find("..") != std::string_view::npos) {
    return invalid_input("'{}' is not a registry host (HOST[:PORT])", escape_controls(host));
  }
  const std::string name = ascii_lower(host);
  HostSettings out;
  if (tls_verify) {
    out.insecure = !*tls_verify;
    out.insecure_source = out.insecure ? "--tls-verify=false" : "";
  } else {
    LS_TRY_ASSIGN(std::optional<RegistryEntry> entry, find_registry(files, name));
    if (entry && entry->insecure) {
      out.insecure = true;
      out.insecure_source = entry->source;
    }
  }
  for (const fs::path& certs : files.certs_dirs) {
    fs::path dir = certs / name;
    std::error_code ec;
    if (fs::is_directory(dir, ec)) {
      LS_TRY_ASSIGN(out.tls, read_certs_dir(dir));
      break;
    }
  }
  out.tls.verify = !out.insecure;
  log::debug("registry {}: {}{} CA file(s){}", name,
             out.insecure ? "insecure (" + out.insecure_source + "), " : "", out.tls.ca_files.size(),
             out.tls.client_cert.empty() ? "" : ", client certificate " + out.tls.client_cert.string());
  return out;
}

} // namespace lockstep::registry
