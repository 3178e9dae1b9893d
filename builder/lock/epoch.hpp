#pragma once
// The image epoch: every timestamp lockstep writes comes from here, never from the clock.
#include "support/base/result.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

namespace lockstep::builder {

/// The epoch used when SOURCE_DATE_EPOCH is not set: 1970-01-01T00:00:00Z.
inline constexpr std::int64_t k_default_epoch = 0;

/// Parses a SOURCE_DATE_EPOCH value: decimal seconds, 0 <= value <= 253402300799 (year 9999).
Result<std::int64_t> parse_epoch(std::string_view text);

/// SOURCE_DATE_EPOCH from the environment if set (a malformed value is an error), else the default.
Result<std::int64_t> image_epoch();

} // namespace lockstep::builder
