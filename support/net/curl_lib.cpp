#include "support/net/curl_lib.hpp"

#include "support/system/shared_library.hpp"

namespace lockstep::curl {

bool LibCurl::load() {
  void* handle = open_shared_library(LOCKSTEP_LIBCURL_SONAME, error);
  if (handle == nullptr) {
    return false;
  }
#define LS_CURL_LOAD(name)                                                                                   \
  if (!load_shared_function(handle, LOCKSTEP_LIBCURL_SONAME, #name, name, error)) {                          \
    return false;                                                                                            \
  }
  LS_CURL_FUNCTIONS(LS_CURL_LOAD)
#undef LS_CURL_LOAD
  if (CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK) {
    error = std::string("curl_global_init failed: ") + curl_easy_strerror(rc);
    return false;
  }
  return true;
}

Result<const LibCurl*> libcurl() {
  static LibCurl lib;
  static const bool ok = lib.load();
  if (!ok) {
    return external_error("can't load libcurl ({}), which lockstep needs to download over HTTP: install "
                          "libcurl4 (Debian, Ubuntu) or libcurl (Fedora)",
                          lib.error);
  }
  return &lib;
}

bool StallWatch::stalled(curl_off_t down, curl_off_t up) {
  const auto now = std::chrono::steady_clock::now();
  if (down + up != m_moved) {
    m_moved = down + up;
    m_since = now;
  } else if (now - m_since >= m_limit) {
    m_fired = true;
  }
  return m_fired;
}

std::string StallWatch::message() const {
  return "timed out: nothing moved for " +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(m_limit).count()) + " s";
}

} // namespace lockstep::curl
