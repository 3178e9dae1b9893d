// Fuzz target for the layer decoder (support/oci/layer_stream): arbitrary blob bytes, read as gzip
// (or recognised by their first bytes), with the members decoded ahead on 1 to 3 threads and again
// in order on the caller's thread. Whatever the input:
//  - both give the same outcome: the same bytes, or an error with the same message (the decoders
//    only ever change where the work is done);
//  - the checks of size and digest hold: the blob's own size and SHA-256 pass.
// A violation aborts (libFuzzer then saves the input). ctest replays tests/fuzz/corpus/stream/.
#include "support/codec/digest.hpp"
#include "support/oci/layer_stream.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using namespace lockstep;

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "fuzz_stream: VIOLATION: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// The decoded bytes, or "error: MESSAGE".
std::string decode(std::string_view blob, oci::LayerCodec codec, unsigned decoders) {
  oci::LayerCheck check{sha256_of(std::string(blob)), blob.size(), std::nullopt, std::nullopt};
  auto stream = oci::LayerStream::open(oci::memory_blob_reader(blob), codec, "fuzz", check, decoders);
  if (!stream) {
    return "error: " + stream.error().message;
  }
  std::string out;
  for (;;) {
    auto piece = stream->next();
    if (!piece) {
      return "error: " + piece.error().message;
    }
    if (piece->empty()) {
      return out;
    }
    out.append(reinterpret_cast<const char*>(piece->data()), piece->size()); // NOLINT
    if (out.size() > (64U << 20)) {
      return "too big"; // a bomb: both ways stop here alike
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) {
    return 0;
  }
  const unsigned decoders = 1 + data[0] % 3;
  const oci::LayerCodec codec = (data[0] & 0x80) != 0 ? oci::LayerCodec::detect : oci::LayerCodec::gzip;
  const std::string_view blob(reinterpret_cast<const char*>(data + 1), size - 1); // NOLINT
  const std::string ahead = decode(blob, codec, decoders);
  const std::string in_order = decode(blob, codec, 0);
  if (ahead != in_order) {
    violation("decoding ahead on " + std::to_string(decoders) + " threads gave " +
              std::to_string(ahead.size()) + " bytes (" + ahead.substr(0, 200) + "), in order " +
              std::to_string(in_order.size()) + " (" + in_order.substr(0, 200) + ")");
  }
  if (ahead.rfind("error: ", 0) == 0 && ahead.find("digest mismatch") != std::string::npos) {
    violation("the blob's own digest was refused: " + ahead);
  }
  return 0;
}
