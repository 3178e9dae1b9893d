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

run_suite "dev build" build/dev -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ "${LOCKSTEP_SKIP_SANITIZERS:-0}" != "1" ]; then
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
  run_suite "asan+ubsan build" build/asan -DCMAKE_BUILD_TYPE=Debug -DLOCKSTEP_SANITIZE=ON
fi
echo "== all tests passed"
