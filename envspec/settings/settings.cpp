#include "envspec/settings/settings.hpp"

#include "support/codec/compress.hpp"
#include "support/registry/client.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

namespace lockstep::settings {

namespace fs = std::filesystem;

namespace {

const char* nonempty_env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

} // namespace

std::optional<unsigned> threads() {
  if (const char* env = nonempty_env("LOCKSTEP_THREADS")) {
    long v = std::strtol(env, nullptr, 10);
    if (v >= 1 && v <= 1024) {
      return static_cast<unsigned>(v);
    }
  }
  return std::nullopt;
}

std::optional<std::vector<fs::path>> certs_dirs() {
  const char* env = std::getenv("LOCKSTEP_CERTS_D");
  if (env == nullptr) {
    return std::nullopt;
  }
  std::vector<fs::path> out;
  std::string_view rest = env;
  while (!rest.empty()) {
    std::size_t colon = rest.find(':');
    if (colon != 0) {
      out.emplace_back(std::string(rest.substr(0, colon)));
    }
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  }
  return out;
}

void apply_to_support() {
  set_default_thread_count(threads().value_or(0));
  if (std::optional<std::vector<fs::path>> dirs = certs_dirs()) {
    registry::default_client_options().config.certs_dirs = std::move(*dirs);
  }
}

} // namespace lockstep::settings
