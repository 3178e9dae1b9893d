#include "support/net/host_credentials.hpp"

#include "support/system/fs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

namespace lockstep {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::uint64_t k_max_file = 1 << 20;

// Where the file is: $RATTLER_AUTH_FILE, else ~/.rattler/credentials.json; "" for neither.
fs::path credentials_file() {
  if (const char* file = std::getenv("RATTLER_AUTH_FILE"); file != nullptr && *file != '\0') {
    return file;
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return fs::path(home) / ".rattler" / "credentials.json";
  }
  return {};
}

using Credentials = std::map<std::string, HostCredential, std::less<>>;

Result<HostCredential> entry_of(const fs::path& file, const std::string& host, const json& value) {
  const auto bad = [&] {
    return invalid_input(
        "{}: the entry for {} is not one of {{\"CondaToken\": \"TOKEN\"}}, {{\"BearerToken\": "
        "\"TOKEN\"}} or {{\"BasicHTTP\": {{\"username\": \"U\", \"password\": \"P\"}}}}",
        file.string(), host);
  };
  if (!value.is_object() || value.size() != 1) {
    return bad();
  }
  const auto& [kind, inner] = *value.items().begin();
  HostCredential c;
  if ((kind == "CondaToken" || kind == "BearerToken") && inner.is_string()) {
    c.kind = kind == "CondaToken" ? HostCredential::Kind::conda_token : HostCredential::Kind::bearer;
    c.token = inner.get<std::string>();
    // A token goes into a URL path or a header line: nothing that would change either.
    if (c.token.empty() || c.token.find_first_of("/?#@ \t\r\n") != std::string::npos) {
      return invalid_input("{}: the token for {} is empty or holds a character a token can't have",
                           file.string(), host);
    }
    return c;
  }
  if (kind == "BasicHTTP" && inner.is_object() && inner.contains("username") && inner.contains("password") &&
      inner["username"].is_string() && inner["password"].is_string()) {
    c.kind = HostCredential::Kind::basic;
    c.username = inner["username"].get<std::string>();
    c.password = inner["password"].get<std::string>();
    return c;
  }
  return bad();
}

Result<Credentials> read_credentials() {
  Credentials out;
  const fs::path file = credentials_file();
  std::error_code ec;
  if (file.empty() || !fs::exists(file, ec)) {
    return out;
  }
  LS_TRY_ASSIGN(const std::string text, read_file(file, k_max_file));
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return invalid_input("{}: not a JSON object of hosts and their credentials", file.string());
  }
  for (const auto& [host, value] : doc.items()) {
    LS_TRY_ASSIGN(HostCredential c, entry_of(file, host, value));
    out.emplace(host, std::move(c));
  }
  return out;
}

// "*.prefix.dev" matches "repo.prefix.dev" (not "prefix.dev").
bool wildcard_matches(std::string_view pattern, std::string_view host) {
  if (!pattern.starts_with("*.")) {
    return false;
  }
  const std::string_view suffix = pattern.substr(1);
  return host.size() > suffix.size() && host.ends_with(suffix);
}

} // namespace

Result<std::optional<HostCredential>> credential_for_host(std::string_view host) {
  static std::once_flag once;
  static std::optional<Result<Credentials>> loaded;
  std::call_once(once, [] { loaded.emplace(read_credentials()); });
  if (!*loaded) {
    return loaded->error();
  }
  const Credentials& all = **loaded;
  if (const auto it = all.find(host); it != all.end()) {
    return std::optional<HostCredential>(it->second);
  }
  const HostCredential* best = nullptr;
  std::size_t best_length = 0;
  for (const auto& [pattern, c] : all) {
    if (wildcard_matches(pattern, host) && pattern.size() > best_length) {
      best = &c;
      best_length = pattern.size();
    }
  }
  return best != nullptr ? std::optional<HostCredential>(*best) : std::nullopt;
}

std::string with_conda_token(const std::string& url, std::string_view token) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) {
    return url;
  }
  const std::size_t path = url.find('/', scheme + 3);
  if (path == std::string::npos) {
    return fmt::format("{}/t/{}", url, token);
  }
  if (url.compare(path, 3, "/t/") == 0) {
    return url;
  }
  return fmt::format("{}/t/{}{}", url.substr(0, path), token, url.substr(path));
}

} // namespace lockstep
