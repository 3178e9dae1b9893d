#pragma once
// apt's source lists, as an image carries them: the one-line format of /etc/apt/sources.list and
// sources.list.d/*.list ("deb [options] URI SUITE [COMPONENT...]") and the deb822 format of
// sources.list.d/*.sources (Types, URIs, Suites, Components, Signed-By). sources.list(5).
// lockstep reads them only to tell users what a base image's apt would use and the spec doesn't.
#include "support/base/result.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

/// One repository a source list names (a deb822 stanza with several URIs or suites gives one per
/// URI and suite).
struct AptSource {
  std::string type;                    ///< "deb" or "deb-src"
  std::string uri;                     ///< as written
  std::string suite;                   ///< "jammy", or a path ending in '/' for a flat repository
  std::vector<std::string> components; ///< empty for a flat repository
  std::string signed_by;               ///< the signed-by option or Signed-By field, if any
  std::string line;                    ///< "deb [signed-by=…] URI SUITE COMPONENTS", one-line form
  int at = 0;                          ///< 1-based line in its file
};

/// Parses a one-line-format list (`.list`). Comments and blank lines are skipped; a line that is
/// not "deb"/"deb-src" [options] URI SUITE [COMPONENT...] is invalid_input naming `what` and the line.
Result<std::vector<AptSource>> parse_sources_list(std::string_view text, std::string_view what);

/// Parses a deb822-format list (`.sources`); stanzas with `Enabled: no` are skipped. A stanza
/// without Types, URIs or Suites is invalid_input naming `what` and the line.
Result<std::vector<AptSource>> parse_sources_deb822(std::string_view text, std::string_view what);

} // namespace lockstep
