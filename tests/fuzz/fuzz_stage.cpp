// Fuzz target for the staging bundle reader (runner/launch/stage.hpp, BundleReader): what a node
// receives from the launching node or from sbcast, fed in pieces whose sizes the input's first byte
// picks. Whatever the bytes, the reader ends in an image or an invalid-input error (never another
// error, a crash or a hang), and every blob it published is in the store under its digest with
// its size. A violation aborts (libFuzzer then saves the input).
//
// Built twice (tests/CMakeLists.txt): as a libFuzzer binary (-DLOCKSTEP_FUZZ=ON) and with
// replay_main.cpp as a plain driver that ctest runs over tests/fuzz/corpus/stage/.
#include "runner/launch/stage.hpp"
#include "support/store/blob_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "fuzz_stage: VIOLATION: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

std::filesystem::path store_root() {
  return std::filesystem::temp_directory_path() / ("lockstep-fuzz-stage-" + std::to_string(::getpid()));
}

// One store for the whole run (blobs a valid input published stay: the reader must cope), removed
// when the run ends.
const lockstep::BlobStore& store() {
  static const lockstep::BlobStore s = [] {
    auto opened = lockstep::BlobStore::open(store_root());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(store_root(), ec);
    });
    if (!opened) {
      violation("can't open the store: " + opened.error().message);
    }
    return *opened;
  }();
  return s;
}

bool acceptable(const lockstep::Error& e) {
  return e.code == lockstep::ExitCode::invalid_input;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lockstep;
  if (size == 0) {
    return 0;
  }
  const std::size_t piece = 1 + (data[0] % 64) * 7;
  const char* bytes = reinterpret_cast<const char*>(data + 1); // NOLINT
  std::size_t left = size - 1;
  runner::BundleReader reader(store());
  while (left > 0) {
    const std::size_t n = std::min(piece, left);
    if (Result<void> r = reader.feed(bytes, n); !r) {
      if (!acceptable(r.error())) {
        violation("feed: an error that is not invalid input: " + r.error().message);
      }
      return 0;
    }
    bytes += n;
    left -= n;
  }
  Result<runner::StageImage> image = reader.finish();
  if (!image) {
    if (!acceptable(image.error())) {
      violation("finish: an error that is not invalid input: " + image.error().message);
    }
    return 0;
  }
  for (const oci::Descriptor& d : image->blobs()) {
    if (!store().has(d.digest, d.size)) {
      violation("a received blob is not in the store: " + d.digest.str());
    }
  }
  return 0;
}
