// Fuzz target for the readers of supply-chain documents lockstep takes from packages and registries
// (issue 19): the first byte picks the reader, the rest is the document. DEP-5 copyright files and
// wheel METADATA as licenses (support/debian/copyright.hpp, support/python/wheel.hpp), declared
// license expressions (support/supplychain/spdx_license.hpp), SBOMs' subjects (envspec/documents/sbom.hpp),
// cosign simple-signing payloads and DSSE envelopes (support/supplychain/sigstore.hpp), SLSA provenance
// statements (envspec/documents/provenance.hpp). Whatever the input, each returns its value or an
// invalid-input error (never another error, a crash or a hang); a license expression lockstep gives
// normalises to itself; a payload read back names the same digest when written again. A violation aborts.
//
// Built twice (tests/CMakeLists.txt): as a libFuzzer binary (-DLOCKSTEP_FUZZ=ON) and with
// replay_main.cpp as a plain driver that ctest runs over tests/fuzz/corpus/supply/.
#include "envspec/documents/provenance.hpp"
#include "envspec/documents/sbom.hpp"
#include "support/debian/copyright.hpp"
#include "support/python/wheel.hpp"
#include "support/supplychain/sigstore.hpp"
#include "support/supplychain/spdx_license.hpp"
#include "tests/fuzz/fuzz_checks.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace {

constexpr const char* k_target = "fuzz_supply";

// An expression lockstep produced must be one it reads back unchanged.
void expect_stable_expression(const std::string& e, const char* reader) {
  if (e.empty()) {
    return;
  }
  auto again = lockstep::normalize_license_expression(e);
  if (!again || *again != e) {
    lockstep::fuzz::violation(k_target, std::string(reader) +
                                            " gave an expression that does not normalise to itself: " + e);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 7) {
  case 0:
    expect_stable_expression(lockstep::dep5_license(text), "dep5_license");
    break;
  case 1:
    expect_stable_expression(lockstep::metadata_license(text), "metadata_license");
    break;
  case 2:
    if (auto e = lockstep::normalize_license_expression(text)) {
      expect_stable_expression(*e, "normalize_license_expression");
    }
    break;
  case 3:
    lockstep::fuzz::expect_value_or_invalid(k_target, lockstep::envspec::read_sbom_subject(text, "sbom"),
                                            "read_sbom_subject");
    break;
  case 4: {
    auto p = lockstep::parse_simple_signing(text, "payload");
    lockstep::fuzz::expect_value_or_invalid(k_target, p, "parse_simple_signing");
    if (p) {
      auto again =
          lockstep::parse_simple_signing(lockstep::simple_signing_payload(p->reference, p->digest, "x"), "p");
      if (!again || again->digest != p->digest || again->reference != p->reference) {
        lockstep::fuzz::violation(k_target, "a simple-signing payload written again reads differently");
      }
    }
    break;
  }
  case 5:
    lockstep::fuzz::expect_value_or_invalid(k_target, lockstep::parse_dsse(text, "envelope"), "parse_dsse");
    break;
  default:
    lockstep::fuzz::expect_value_or_invalid(k_target, lockstep::envspec::read_provenance(text, "statement"),
                                            "read_provenance");
    break;
  }
  return 0;
}
