// SPDX license identifiers and expressions (support/supplychain/spdx_license.hpp).
#include "support/supplychain/spdx_license.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;

TEST_CASE("identifiers of the SPDX list are found in any case and given in theirs", "[spdx_license]") {
  CHECK(spdx_license_id("bsd-3-clause") == "BSD-3-Clause");
  CHECK(spdx_license_id("MIT") == "MIT");
  CHECK(spdx_license_id("latex2e") == "Latex2e");
  CHECK_FALSE(spdx_license_id("GPL-2.0")); // deprecated: not on the list
  CHECK_FALSE(spdx_license_id("Expat"));
  CHECK(spdx_exception_id("llvm-exception") == "LLVM-exception");
}

TEST_CASE("license names in free text", "[spdx_license]") {
  CHECK(license_of_name("GPL-2.0+") == "GPL-2.0-or-later");
  CHECK(license_of_name("Apache License 2.0") == "Apache-2.0");
  CHECK(license_of_name(" MIT License ") == "MIT");
  CHECK(license_of_name("GNU Lesser General Public License v3 or later (LGPLv3+)") == "LGPL-3.0-or-later");
  CHECK_FALSE(license_of_name("BSD"));
  CHECK_FALSE(license_of_name("Copyright (c) 2020 Someone. Permission is hereby granted"));
}

TEST_CASE("LicenseRef- references are valid idstrings", "[spdx_license]") {
  CHECK(license_ref("GPL-3 with Bison exception") == "LicenseRef-GPL-3-with-Bison-exception");
  CHECK(license_ref("public domain!") == "LicenseRef-public-domain");
  CHECK(license_ref("++") == "LicenseRef-unknown");
  CHECK(license_ref(std::string(100, 'a')).size() == 11 + 64);
}

TEST_CASE("AND of terms: sorted, each part once, OR terms in parentheses", "[spdx_license]") {
  CHECK(spdx_and({"MIT", "Zlib AND MIT", "GPL-2.0-only OR BSD-3-Clause", "MIT"}) ==
        "(GPL-2.0-only OR BSD-3-Clause) AND MIT AND Zlib");
  CHECK(spdx_and({}).empty());
  CHECK(spdx_and({"ISC"}) == "ISC");
  CHECK(spdx_and({"(GPL-2.0-or-later OR Artistic-1.0) AND Zlib", "MIT"}) ==
        "(GPL-2.0-or-later OR Artistic-1.0) AND MIT AND Zlib");
}

TEST_CASE("declared expressions are normalised or refused", "[spdx_license]") {
  CHECK(normalize_license_expression("mit or apache-2.0") == "MIT OR Apache-2.0");
  CHECK(normalize_license_expression("(MIT OR Apache-2.0) AND BSD-3-Clause") ==
        "(MIT OR Apache-2.0) AND BSD-3-Clause");
  CHECK(normalize_license_expression("Apache-2.0 WITH llvm-exception") == "Apache-2.0 WITH LLVM-exception");
  CHECK(normalize_license_expression("GPL-2.0+") == "GPL-2.0-or-later");
  CHECK(normalize_license_expression("LicenseRef-Proprietary") == "LicenseRef-Proprietary");
  CHECK(normalize_license_expression("Frobnicate-1.0 OR MIT") == "LicenseRef-Frobnicate-1.0 OR MIT");
  CHECK_FALSE(normalize_license_expression("MIT OR"));
  CHECK_FALSE(normalize_license_expression("(MIT"));
  CHECK_FALSE(normalize_license_expression("MIT)"));
  CHECK_FALSE(normalize_license_expression("MIT Apache-2.0"));
  CHECK_FALSE(normalize_license_expression("GPL-2.0-only WITH Made-Up-exception"));
  CHECK_FALSE(normalize_license_expression(""));
  CHECK_FALSE(normalize_license_expression("MIT; see LICENSE"));
}
