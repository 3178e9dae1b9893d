#pragma once
// libcurl, loaded with dlopen on first use (support/net/http.cpp, support/net/http_session.cpp share it).
// Internal to support/: other rooms use http.hpp or http_session.hpp, which hide curl.
//
// The type-checking macros curl.h defines for curl_easy_setopt/getinfo would also rewrite the
// calls through LibCurl's function pointers; option types are checked by hand where they are set.
#define CURL_DISABLE_TYPECHECK
#include "support/base/result.hpp"

#include <chrono>
#include <curl/curl.h>
#include <string>

namespace lockstep::curl {

// Only the functions lockstep calls are looked up; the declarations in curl.h give their types.
struct LibCurl {
#define LS_CURL_FUNCTIONS(X)                                                                                 \
  X(curl_global_init)                                                                                        \
  X(curl_easy_init)                                                                                          \
  X(curl_easy_reset)                                                                                         \
  X(curl_easy_cleanup)                                                                                       \
  X(curl_easy_setopt)                                                                                        \
  X(curl_easy_getinfo)                                                                                       \
  X(curl_easy_perform)                                                                                       \
  X(curl_easy_strerror)                                                                                      \
  X(curl_slist_append)                                                                                       \
  X(curl_slist_free_all)
#define LS_CURL_MEMBER(name) decltype(&::name) name = nullptr; // NOLINT(bugprone-macro-parentheses)
  LS_CURL_FUNCTIONS(LS_CURL_MEMBER)
#undef LS_CURL_MEMBER
  std::string error;

  // Loads the library and every function, and initialises it; on failure `error` says why.
  bool load();
};

/// The loaded library; an ExitCode::external error says how to install it when it can't be loaded.
Result<const LibCurl*> libcurl();

// An easy handle, cleaned up on destruction, with the buffer libcurl writes its messages into.
struct EasyHandle {
  const LibCurl* curl = nullptr;
  CURL* handle = nullptr;
  char error[CURL_ERROR_SIZE] = {};
  curl_slist* headers = nullptr; // FetchOptions::headers of the current transfer
  EasyHandle() = default;
  EasyHandle(const EasyHandle&) = delete;
  EasyHandle& operator=(const EasyHandle&) = delete;
  ~EasyHandle() {
    if (handle != nullptr) {
      curl->curl_easy_cleanup(handle);
    }
    free_headers();
  }
  void free_headers() {
    if (headers != nullptr) {
      curl->curl_slist_free_all(headers);
      headers = nullptr;
    }
  }
};

// Ends a transfer that has moved no byte, either way, for `limit_s` seconds: libcurl's own low-speed
// check averages over a window of several seconds, so a body that sent a few bytes and then stopped
// took it up to six seconds more than asked to notice. The transfer's progress callback (libcurl
// calls it about once a second, also while nothing arrives) asks `stalled`.
class StallWatch {
public:
  explicit StallWatch(long limit_s) : m_limit(std::chrono::seconds(limit_s)) {}
  /// True, and from then on fired(), once the byte counts have not moved for the limit.
  bool stalled(curl_off_t down, curl_off_t up);
  [[nodiscard]] bool fired() const { return m_fired; }
  /// "timed out: nothing moved for N s", for the transfer's error.
  [[nodiscard]] std::string message() const;

private:
  std::chrono::steady_clock::duration m_limit;
  std::chrono::steady_clock::time_point m_since = std::chrono::steady_clock::now();
  curl_off_t m_moved = -1;
  bool m_fired = false;
};

} // namespace lockstep::curl
