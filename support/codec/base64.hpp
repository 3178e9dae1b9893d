#pragma once
// Base64 (RFC 4648, standard alphabet, padded) for HTTP Basic credentials and registry auth files.
#include "support/base/result.hpp"

#include <string>
#include <string_view>

namespace lockstep {

/// The padded base64 encoding of `bytes`.
std::string base64_encode(std::string_view bytes);
/// Decodes padded (or unpadded) standard base64; whitespace is not allowed. A malformed input is
/// invalid_input naming `what` (never the input, which may be a secret).
Result<std::string> base64_decode(std::string_view text, std::string_view what);

} // namespace lockstep
