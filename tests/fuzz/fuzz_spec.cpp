// Fuzz target for the spec loader: YAML parsing, `extends` merging, validation and the canonical
// form, through load_spec_from_string() on arbitrary bytes. The spec sits in a scratch directory that
// holds a small spec to extend ("base.yaml") and a file to copy ("app/run.sh"), so mutations reach
// those paths too. Whatever the input, the loader returns a spec or a rendered invalid-input error:
// an internal error (an exception the loader caught), a crash or a hang is a violation, and aborts.
//
// Built twice (tests/CMakeLists.txt): as a libFuzzer binary (-DLOCKSTEP_FUZZ=ON) and with
// replay_main.cpp as a plain driver that ctest runs over tests/fuzz/corpus/spec/.
#include "envspec/load/load.hpp"
#include "envspec/spec/spec.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "fuzz_spec: VIOLATION: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// The scratch directory, made once per process and removed at exit.
const fs::path& scratch() {
  static const fs::path dir = [] {
    std::string templ = (fs::temp_directory_path() / "lockstep-fuzz-spec-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) {
      violation("can't create a scratch directory");
    }
    const fs::path d = templ;
    fs::create_directories(d / "app");
    std::ofstream(d / "base.yaml") << "lockstep: 1\nname: base\nenv: {A: '1'}\nlabels: {team: hpc}\n";
    std::ofstream(d / "app" / "run.sh") << "#!/bin/sh\necho hello\n";
    return d;
  }();
  // Registered once `dir` exists, so it runs before `dir` is destroyed.
  [[maybe_unused]] static const int cleanup = std::atexit([] {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  });
  return dir;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lockstep;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<envspec::Spec> spec = envspec::load_spec_from_string(text, scratch() / "lockstep.yaml");
  if (!spec && spec.error().code != ExitCode::invalid_input) {
    violation("an error that is not invalid input: " + spec.error().message);
  }
  return 0;
}
