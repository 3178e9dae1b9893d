// DEP-5 copyright files as SPDX expressions (support/debian/copyright.hpp).
#include "support/debian/copyright.hpp"

#include <catch2/catch.hpp>

using namespace lockstep;

TEST_CASE("DEP-5 short names map to SPDX identifiers", "[copyright]") {
  CHECK(dep5_license_name("GPL-2+") == "GPL-2.0-or-later");
  CHECK(dep5_license_name("GPL-2") == "GPL-2.0-only");
  CHECK(dep5_license_name("GPL-3.0+") == "GPL-3.0-or-later");
  CHECK(dep5_license_name("LGPL-2.1+") == "LGPL-2.1-or-later");
  CHECK(dep5_license_name("LGPL-2") == "LGPL-2.0-only");
  CHECK(dep5_license_name("GFDL-NIV-1.3+") == "GFDL-1.3-no-invariants-or-later");
  CHECK(dep5_license_name("Apache-2.0") == "Apache-2.0");
  CHECK(dep5_license_name("Apache-2") == "Apache-2.0");
  CHECK(dep5_license_name("Expat") == "MIT");
  CHECK(dep5_license_name("BSD-3-clause") == "BSD-3-Clause");
  CHECK(dep5_license_name("GPL") == "GPL-1.0-or-later");
  CHECK(dep5_license_name("Artistic") == "Artistic-1.0");
  CHECK(dep5_license_name("Perl") == "Artistic-1.0-Perl OR GPL-1.0-or-later");
  CHECK(dep5_license_name("public-domain") == "LicenseRef-public-domain");
  CHECK(dep5_license_name("BSD-3-clause-GENERIC") == "LicenseRef-BSD-3-clause-GENERIC");
  CHECK(dep5_license_name("GPL-3+ with Bison exception") == "LicenseRef-GPL-3-with-Bison-exception");
}

TEST_CASE("'or', 'and' and commas keep DEP-5's meaning", "[copyright]") {
  CHECK(dep5_license_name("GPL-2+ or Artistic") == "GPL-2.0-or-later OR Artistic-1.0");
  CHECK(dep5_license_name("GPL-2+ and BSD-3-clause") == "GPL-2.0-or-later AND BSD-3-Clause");
  CHECK(dep5_license_name("GPL-2+ or Artistic, and BSD-3-clause") ==
        "(GPL-2.0-or-later OR Artistic-1.0) AND BSD-3-Clause");
  CHECK(dep5_license_name("Perl and MIT") == "(Artistic-1.0-Perl OR GPL-1.0-or-later) AND MIT");
  CHECK(dep5_license_name("or MIT") == "LicenseRef-or-MIT");
}

TEST_CASE("a machine-readable copyright file gives the AND of its Files licenses", "[copyright]") {
  const char* text = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
                     "Upstream-Name: demo\n"
                     "\n"
                     "Files: *\n"
                     "Copyright: 2020 A\n"
                     "License: GPL-2+\n"
                     "\n"
                     "Files: lib/*\n"
                     "Copyright: 2020 B\n"
                     "License: Expat\n"
                     "\n"
                     "Files: debian/*\n"
                     "Copyright: 2021 C\n"
                     "License: GPL-2+\n"
                     "\n"
                     "License: GPL-2+\n"
                     " This program is free software; ...\n"
                     " .\n"
                     " On Debian systems, see /usr/share/common-licenses/GPL-2.\n"
                     "\n"
                     "License: Expat\n"
                     " Permission is hereby granted ...\n";
  CHECK(dep5_license(text) == "GPL-2.0-or-later AND MIT");
}

TEST_CASE("a header License is used without Files paragraphs; other files give nothing", "[copyright]") {
  CHECK(dep5_license("Format: http://www.debian.org/doc/packaging-manuals/copyright-format/1.0\n"
                     "License: ISC\n") == "ISC");
  CHECK(dep5_license("This is the Debian packaged version of foo.\nIt is GPL.\n").empty());
  CHECK(dep5_license("Format-Specification: http://svn.debian.org/wsvn/dep/web/deps/dep5.mdwn?rev=135\n"
                     "\nFiles: *\nLicense: MIT\n")
            .empty());
  CHECK(dep5_license("").empty());
}
