// Fuzz target for the image metadata readers: an OCI layout's index.json, manifests and configs,
// through ImageSource::resolve() (index, nested indexes, platform selection, manifest, config,
// diff_ids, labels) and the parsers directly. The input is up to three documents separated by a line
// "#####": index.json, the manifest, the config. In the first two, the harness replaces
// "@MANIFEST_DIGEST@", "@MANIFEST_SIZE@", "@CONFIG_DIGEST@" and "@CONFIG_SIZE@" with the digest and
// size of the manifest and config blobs it writes, so mutations get past the digest checks to the
// parsers (as the unpack harness rewrites tar checksums). Whatever the input, the readers return an
// image or an invalid-input error; an internal error, a crash or a hang is a violation, and aborts.
//
// Built twice (tests/CMakeLists.txt): as a libFuzzer binary (-DLOCKSTEP_FUZZ=ON) and with
// replay_main.cpp as a plain driver that ctest runs over tests/fuzz/corpus/image/.
#include "support/codec/digest.hpp"
#include "support/oci/image_source.hpp"
#include "support/oci/oci.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace lockstep;

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "fuzz_image: VIOLATION: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Checks that `r` is a value or an invalid-input error.
template <typename T> void expect_no_internal(const Result<T>& r, const char* what) {
  if (!r && r.error().code != ExitCode::invalid_input) {
    violation(std::string(what) + ": an error that is not invalid input: " + r.error().message);
  }
}

void write(const fs::path& p, const std::string& bytes);

// The scratch layout (oci-layout and blobs/sha256/), made once per process (in /dev/shm when there
// is one: a layout is written for every input) and removed at exit.
const fs::path& layout_dir() {
  static const fs::path dir = [] {
    std::error_code ec;
    const fs::path parent =
        fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string templ = (parent / "lockstep-fuzz-image-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) {
      violation("can't create a scratch directory");
    }
    const fs::path d = templ;
    fs::create_directories(d / "blobs" / "sha256");
    write(d / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    return d;
  }();
  // Registered once `dir` exists, so it runs before `dir` is destroyed.
  [[maybe_unused]] static const int cleanup = std::atexit([] {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  });
  return dir;
}

std::vector<std::string> split_documents(std::string_view input) {
  static constexpr std::string_view k_separator = "\n#####\n";
  std::vector<std::string> parts;
  while (parts.size() < 2) {
    const std::size_t at = input.find(k_separator);
    if (at == std::string_view::npos) {
      break;
    }
    parts.emplace_back(input.substr(0, at));
    input.remove_prefix(at + k_separator.size());
  }
  parts.emplace_back(input);
  parts.resize(3);
  return parts;
}

void replace_all(std::string& s, std::string_view from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    violation("can't write " + p.string());
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> doc = split_documents(std::string_view(reinterpret_cast<const char*>(data), size));
  std::string& index = doc[0];
  std::string& manifest = doc[1];
  const std::string& config = doc[2];

  // The parsers on their own.
  expect_no_internal(oci::Index::parse(index, "index"), "Index::parse");
  expect_no_internal(oci::Manifest::parse(manifest, "manifest"), "Manifest::parse");
  if (Result<oci::json> j = oci::parse_json(config, "config"); j) {
    expect_no_internal(oci::config_diff_ids(*j, "config"), "config_diff_ids");
    if (j->is_object() && j->contains("config")) {
      expect_no_internal(oci::config_labels((*j)["config"], "config"), "config_labels");
    }
  } else {
    expect_no_internal(j, "parse_json");
  }

  // The same documents as a layout, read the way every command reads an image.
  const Digest config_digest = sha256_of(config);
  replace_all(manifest, "@CONFIG_DIGEST@", config_digest.str());
  replace_all(manifest, "@CONFIG_SIZE@", std::to_string(config.size()));
  const Digest manifest_digest = sha256_of(manifest);
  replace_all(index, "@MANIFEST_DIGEST@", manifest_digest.str());
  replace_all(index, "@MANIFEST_SIZE@", std::to_string(manifest.size()));
  const fs::path& layout = layout_dir();
  const fs::path manifest_blob = layout / "blobs" / "sha256" / manifest_digest.hex();
  const fs::path config_blob = layout / "blobs" / "sha256" / config_digest.hex();
  write(layout / "index.json", index);
  write(manifest_blob, manifest);
  write(config_blob, config);
  struct RemoveBlobs { // the next input starts from an empty blobs/sha256/
    const fs::path& a;
    const fs::path& b;
    ~RemoveBlobs() {
      ::unlink(a.c_str());
      ::unlink(b.c_str());
    }
  } remove_blobs{manifest_blob, config_blob};
  oci::ImageRef ref;
  ref.path = layout;
  Result<std::unique_ptr<oci::ImageSource>> source = oci::ImageSource::open(ref);
  expect_no_internal(source, "ImageSource::open");
  if (source) {
    Result<oci::OpenedImage> image = (*source)->resolve(oci::SelectOptions{});
    expect_no_internal(image, "resolve");
    if (image && image->config.contains("config")) {
      if (!oci::config_labels(image->config["config"], "config")) {
        violation("resolve() accepted a config whose labels config_labels() refuses");
      }
    }
  }
  return 0;
}
