#pragma once
// What every reader and writer of archives shares about member names: the one normalisation of tar
// member names, and the locale libarchive must run under so that name bytes pass through unchanged.
// Below support/oci and support/debian, which both read tars.
#include "support/base/result.hpp"

#include <clocale>
#include <cstddef>
#include <string>
#include <string_view>

namespace lockstep {

inline constexpr std::size_t k_max_name = 255;  ///< bytes in one name component (NAME_MAX)
inline constexpr std::size_t k_max_path = 4095; ///< bytes in a member name or link target

/// Switches this thread's LC_CTYPE to C.UTF-8 (where the system has it) for its lifetime, so that
/// libarchive's conversions between the locale's charset and UTF-8 pass name bytes through
/// unchanged whatever LANG/LC_ALL say. Hold one around every libarchive call that reads or writes
/// member names (the tar writer does, and so does the .deb reader).
class Utf8Locale {
public:
  Utf8Locale();
  ~Utf8Locale();
  Utf8Locale(const Utf8Locale&) = delete;
  Utf8Locale& operator=(const Utf8Locale&) = delete;

private:
  locale_t m_previous = static_cast<locale_t>(nullptr);
};

namespace layer {

/// Normalises a member name or a hard link target: "./a//b/" -> "a/b", "." and "/" -> "". False,
/// with the refusal in `why` ("has a '..' component", ...), for an empty or absolute name, a ".."
/// component, or a name or component too long. The one normalisation of tar member names.
bool normalise_name(std::string_view raw, std::string& out, std::string& why);

} // namespace layer

/// A member name as it is stored: "./usr//bin/" -> "usr/bin", "." -> "". An empty or absolute name,
/// a '..' component or a name too long is invalid_input.
Result<std::string> normalize_member_name(std::string_view name);

} // namespace lockstep
