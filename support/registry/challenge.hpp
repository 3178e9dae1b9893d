#pragma once
// The `WWW-Authenticate` challenges of a registry's 401 answers (RFC 7235 syntax): `Bearer
// realm="…",service="…",scope="…"` sends the client to a token endpoint, `Basic realm="…"` asks for
// the password itself. Values are quoted strings that may hold commas and backslash escapes.
#include "support/base/result.hpp"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::registry {

/// One challenge.
struct Challenge {
  std::string scheme;                        ///< lower case: "bearer", "basic"
  std::map<std::string, std::string> params; ///< names lower case, values unquoted

  /// The parameter `name`, or "" when absent.
  [[nodiscard]] std::string param(const std::string& name) const;
};

/// Every challenge in one header value, in order. A malformed value is invalid_input naming it.
Result<std::vector<Challenge>> parse_challenges(std::string_view header);

} // namespace lockstep::registry
