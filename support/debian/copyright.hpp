#pragma once
// The license of a Debian package, read from its machine-readable copyright file
// (/usr/share/doc/PACKAGE/copyright in the format of DEP-5, "copyright-format/1.0"), as an SPDX
// license expression for SBOMs.
//
// Each `Files:` paragraph's `License:` (its first line: the short name) gives one term, the
// header's `License:` too when there are no `Files:` paragraphs; the package's license is their AND
// (sorted, each once). DEP-5's short names map to SPDX: `GPL-2+` is GPL-2.0-or-later, `GPL-2` is
// GPL-2.0-only, `LGPL-2.1+`, `Expat` is MIT, `BSD-3-clause` is BSD-3-Clause, `Perl` is
// "Artistic-1.0-Perl OR GPL-1.0-or-later", `public-domain` is LicenseRef-public-domain; `or` and
// `and` inside a name are OR and AND; a name SPDX's list does not hold becomes a LicenseRef-.
#include <string>
#include <string_view>

namespace lockstep {

/// The SPDX expression of a DEP-5 copyright file; "" when the text is not machine-readable
/// (no `Format:` naming copyright-format/1.0, or not deb822) or names no license.
std::string dep5_license(std::string_view copyright);

/// One DEP-5 license short name ("GPL-2+", "BSD-3-clause", "GPL-2+ or Artistic") as an SPDX
/// expression.
std::string dep5_license_name(std::string_view name);

} // namespace lockstep
