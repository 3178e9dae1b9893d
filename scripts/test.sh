#!/usr/bin/env bash
# The whole test suite: install dependencies, build with warnings as errors and run every test;
# then build again with AddressSanitizer + UndefinedBehaviorSanitizer and run every test again.
# Set LOCKSTEP_SKIP_SANITIZERS=1 to run only the first pass.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh test
jobs=$(nproc)

echo "== clang-format check"
mapfile -t sources < <(find cli support envspec builder runner tests -name '*.cpp' -o -name '*.hpp' | LC_ALL=C sort)
clang-format --dry-run --Werror "${sources[@]}"

run_suite() { # NAME BUILD_DIR CMAKE_ARGS...
  local name=$1 dir=$2
  shift 2
  echo "== $name: configure and build ($dir)"
  cmake -S . -B "$dir" -G Ninja -DLOCKSTEP_WERROR=ON "$@" >/dev/null
  ninja -C "$dir"
  echo "== $name: ctest"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 900)
}

# The warnings-as-errors build (g++), without debug information: -g costs a third of the compile
# and nothing here reads it.
run_suite "dev build" build/dev -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG"
if [ "${LOCKSTEP_SKIP_SANITIZERS:-0}" != "1" ]; then
  # The sanitizer build with clang (it compiles this tree in half the time g++ takes at -O0), with
  # warnings as errors too, and with the libFuzzer targets of the fuzz stage below.
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
  run_suite "asan+ubsan build (clang)" build/asan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=Debug -DLOCKSTEP_SANITIZE=ON -DLOCKSTEP_FUZZ=ON
fi
# ---- fuzz stage (tests/fuzz/; docs/unpack.md): a short libFuzzer run of each reader of hostile input
# (layer unpacker, layer model, spec loader, lock parser, image metadata, layer decoder, registry
# challenges and references, staging bundle, rootless file records, Python project files and
# METADATA) over a copy of its seed corpus (new inputs it finds
# stay in the copy), built by the sanitizer build above (or here, when it was skipped). Set
# LOCKSTEP_SKIP_FUZZ=1 to skip it.
if [ "${LOCKSTEP_SKIP_FUZZ:-0}" != "1" ]; then
  fuzz_targets=(fuzz_unpack fuzz_layer fuzz_spec fuzz_lock fuzz_image fuzz_stream fuzz_registry fuzz_stage
    fuzz_record fuzz_pyinputs fuzz_supply)
  if [ "${LOCKSTEP_SKIP_SANITIZERS:-0}" = "1" ]; then
    echo "== fuzz: configure and build (build/asan, clang)"
    cmake -S . -B build/asan -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=Debug -DLOCKSTEP_SANITIZE=ON -DLOCKSTEP_FUZZ=ON >/dev/null
    ninja -C build/asan "${fuzz_targets[@]}"
  fi
  rm -rf build/asan/fuzz-run
  # NAME SECONDS [libFuzzer flags]: the unpacker 60 s; the layer model, the spec, lock and image
  # readers, the layer decoder, the registry texts and the staging bundle 30 s each; the rootless
  # file records 15 s; the Python project files 20 s; the supply-chain documents (licenses, SBOMs,
  # signatures, provenance) 20 s.
  for target in "unpack 60" "layer 30 -timeout=10" "spec 30 -timeout=10" "lock 30 -timeout=10" \
    "image 30 -timeout=10" "stream 30 -timeout=10" "registry 30 -timeout=10" \
    "stage 30 -timeout=10" "record 15 -timeout=10" "pyinputs 20 -timeout=10" "supply 20 -timeout=10"; do
    read -r name seconds flags <<<"$target"
    flags="$flags -dict=tests/fuzz/$name.dict"
    echo "== fuzz: fuzz_$name for $seconds s"
    run="build/asan/fuzz-run/$name"
    mkdir -p "$run/corpus" "$run/artifacts"
    cp "tests/fuzz/corpus/$name/"* "$run/corpus/"
    # shellcheck disable=SC2086 # the flags' words
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      "build/asan/tests/fuzz_$name" -max_total_time="$seconds" -print_final_stats=1 \
      $flags -artifact_prefix="$run/artifacts/" "$run/corpus"
  done
fi
# ---- end of fuzz stage
echo "== all tests passed"
