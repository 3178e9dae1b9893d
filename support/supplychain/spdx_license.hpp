#pragma once
// SPDX license expressions (SPDX 2.3, annex D) as SBOMs carry them: identifiers from the SPDX
// license list in their canonical case, `LicenseRef-` for anything the list does not name, and
// AND / OR / WITH with parentheses. The readers of what packages declare (DEP-5 copyright files in
// support/debian/copyright.hpp, wheel METADATA in support/python/wheel.hpp) build on this.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

/// The SPDX license list identifier `name` names, matched without regard to case ("bsd-3-clause"
/// gives "BSD-3-Clause"); nullopt for others. The list is the one Debian packages as
/// node-spdx-license-ids (support/supplychain/spdx_license_ids.inc, scripts/gen-spdx-ids.py); deprecated
/// identifiers are not in it (license_of_name maps the common ones).
std::optional<std::string_view> spdx_license_id(std::string_view name);

/// The SPDX expression a license *name* stands for, as packages write names in free text: an
/// identifier (any case), a deprecated one ("GPL-2.0+" gives "GPL-2.0-or-later") or a common
/// spelling ("Apache License 2.0", "MIT License", "GPLv3+", "Python Software Foundation License");
/// nullopt for others.
std::optional<std::string> license_of_name(std::string_view name);

/// The SPDX license exception identifier `name` names ("classpath-exception-2.0"), case-insensitively.
std::optional<std::string_view> spdx_exception_id(std::string_view name);

/// "LicenseRef-" and `text` with every character but letters, digits, '.' and '-' turned into '-'
/// (runs of '-' collapsed, none at either end, at most 64 characters): a valid user-defined
/// reference for a license the SPDX list does not name.
std::string license_ref(std::string_view text);

/// `terms` joined with AND: sorted, each once, a term holding OR in parentheses. "" for none.
std::string spdx_and(const std::vector<std::string>& terms);

/// A license expression as a package declares it (a wheel's License-Expression), normalised:
/// identifiers in their canonical case, unknown ones as LicenseRef-, operators in upper case.
/// nullopt when it is not an expression (unbalanced parentheses, an operator without operands,
/// characters no expression has).
std::optional<std::string> normalize_license_expression(std::string_view text);

} // namespace lockstep
