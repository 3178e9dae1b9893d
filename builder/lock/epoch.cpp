#include "builder/lock/epoch.hpp"

#include <charconv>
#include <cstdlib>

namespace lockstep::builder {

Result<std::int64_t> parse_epoch(std::string_view text) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || text.front() == '+' || text.front() == '-' ||
      v < 0 || v > 253402300799) {
    return invalid_input("SOURCE_DATE_EPOCH='{}' is not a valid epoch: expected whole seconds since 1970 "
                         "(e.g. SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)), at most 253402300799",
                         text);
  }
  return v;
}

Result<std::int64_t> image_epoch() {
  const char* env = std::getenv("SOURCE_DATE_EPOCH");
  if (env == nullptr) {
    return k_default_epoch;
  }
  return parse_epoch(env);
}

} // namespace lockstep::builder
