#!/usr/bin/env bash
# The whole test suite, the one CI runs (docs/testing.md): install what it needs, check the format,
# build with warnings as errors (g++), run clang-tidy on the changed files and run every test; build
# again with AddressSanitizer + UndefinedBehaviorSanitizer (clang) and run the tests that feed
# hostile input; fuzz each reader of hostile input. Prints each stage's time at the end, pass or fail.
#
#   scripts/test.sh            everything (what CI runs; 45 minutes at most on 2 cores)
#   scripts/test.sh --quick    the dev build and the unit tests only: the edit-compile loop
#
# Environment: LOCKSTEP_SKIP_SANITIZERS=1 skips the sanitizer build and tests, LOCKSTEP_SKIP_FUZZ=1
# the fuzz stage. Compiles go through ccache (CCACHE_DIR, default ~/.cache/ccache), outside the
# clone, so a fresh clone on a machine that built before compiles only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  -h | --help)
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "test.sh: unknown argument '$1' (try --quick or --help)" >&2
    exit 2
    ;;
esac

# ---- the stage table: each stage's name and seconds, printed on exit whatever happened -----------
stage_names=()
stage_secs=()
current_stage=""
current_start=0
begin_stage() { # NAME
  end_stage
  current_stage=$1
  current_start=$SECONDS
  echo "== $1"
}
end_stage() {
  if [ -n "$current_stage" ]; then
    stage_names+=("$current_stage")
    stage_secs+=($((SECONDS - current_start)))
    current_stage=""
  fi
}
print_stages() {
  local rc=$? i total=0
  local failed=$current_stage
  end_stage
  echo
  printf '%-24s %8s\n' "stage" "seconds"
  for i in "${!stage_names[@]}"; do
    printf '%-24s %8d%s\n' "${stage_names[$i]}" "${stage_secs[$i]}" \
      "$([ "${stage_names[$i]}" = "$failed" ] && [ "$rc" != 0 ] && echo "  (failed)")"
    total=$((total + stage_secs[i]))
  done
  printf '%-24s %8d  (%dm%02ds)\n' "total" "$total" $((total / 60)) $((total % 60))
  exit "$rc"
}
trap print_stages EXIT

begin_stage "install"
scripts/install-deps.sh test
jobs=$(nproc)

# A compiler cache outside the clone: paths under the clone are made relative (CCACHE_BASEDIR) and
# the working directory left out of the hash, so another clone of the same sources hits.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi

if [ "$quick" = 0 ]; then
  begin_stage "format"
  mapfile -t sources < <(find cli support envspec builder runner tests -name '*.cpp' -o -name '*.hpp' | LC_ALL=C sort)
  clang-format --dry-run --Werror "${sources[@]}"
fi

build_tree() { # DIR CMAKE_ARGS... [-- NINJA_TARGETS...]
  local dir=$1 cmake_args=() targets=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    cmake_args+=("$1")
    shift
  done
  [ $# -eq 0 ] || { shift; targets=("$@"); }
  cmake -S . -B "$dir" -G Ninja -DLOCKSTEP_WERROR=ON "${launcher[@]}" "${cmake_args[@]}" >/dev/null
  ninja -C "$dir" "${targets[@]}"
}

# The warnings-as-errors build (g++), without debug information: -g costs a third of the compile
# and nothing here reads it.
dev_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG")
# The sanitizer build with clang (it compiles this tree in half the time g++ takes at -O0), with
# warnings as errors too, and with the libFuzzer targets of the fuzz stage.
asan_args=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug
  -DLOCKSTEP_SANITIZE=ON -DLOCKSTEP_FUZZ=ON)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"

begin_stage "dev build"
if [ "$quick" = 1 ]; then
  build_tree build/dev "${dev_args[@]}" -- unit_support unit_envspec unit_builder unit_runner
else
  build_tree build/dev "${dev_args[@]}"
fi

if [ "$quick" = 0 ]; then
  # clang-tidy with .clang-tidy's checks, warnings as errors, over the .cpp files changed since the
  # base (scripts/tidy.py says which; docs/testing.md): it reads build/dev/compile_commands.json.
  begin_stage "tidy"
  scripts/tidy.py -j "$jobs"
fi

begin_stage "dev tests"
if [ "$quick" = 1 ]; then
  (cd build/dev && ctest --output-on-failure -j "$jobs" -L '^unit$')
  exit 0
fi
# Every test, the suites judged by outside tools included (docs/testing.md).
(cd build/dev && ctest --output-on-failure -j "$jobs" --timeout 900)

if [ "${LOCKSTEP_SKIP_SANITIZERS:-0}" != "1" ]; then
  begin_stage "sanitizer build"
  build_tree build/asan "${asan_args[@]}"
  begin_stage "sanitizer tests"
  # The unit tests, the corpus replays and every suite that feeds hostile input (label `hostile`;
  # docs/testing.md says which and why).
  (cd build/asan && ctest --output-on-failure -j "$jobs" --timeout 900 -L '^(unit|fuzz|arch|hostile)$')
fi

# ---- fuzz stage (tests/fuzz/; docs/unpack.md): a short libFuzzer run of each reader of hostile input
# (layer unpacker, layer model, spec loader, lock parser, image metadata, layer decoder, registry
# challenges and references, staging bundle, rootless file records, Python project files and
# METADATA, supply-chain documents, conda versions and MatchSpecs, conda package archives) over a copy of its seed corpus (new inputs it finds stay in the
# copy), built by the sanitizer build above (or here, when it was skipped). One lane of targets a
# core; a target's whole output is printed when it failed.
if [ "${LOCKSTEP_SKIP_FUZZ:-0}" != "1" ]; then
  fuzz_targets=(fuzz_unpack fuzz_layer fuzz_spec fuzz_lock fuzz_image fuzz_stream fuzz_registry fuzz_stage
    fuzz_record fuzz_pyinputs fuzz_supply fuzz_conda fuzz_conda_pkg)
  if [ "${LOCKSTEP_SKIP_SANITIZERS:-0}" = "1" ]; then
    begin_stage "sanitizer build"
    build_tree build/asan "${asan_args[@]}" -- "${fuzz_targets[@]}"
  fi
  begin_stage "fuzz"
  rm -rf build/asan/fuzz-run
  # NAME SECONDS [libFuzzer flags]: the unpacker 60 s; the layer model, the spec, lock and image
  # readers, the layer decoder, the registry texts and the staging bundle 30 s each; the rootless
  # file records 15 s; the Python project files 20 s; the supply-chain documents (licenses, SBOMs,
  # signatures, provenance) 20 s; conda's versions, version specs and MatchSpecs 15 s; conda package
  # archives 15 s.
  fuzz_one() { # NAME SECONDS [FLAGS...]: its output in fuzz-run/NAME/log, its exit status in .../rc
    local name=$1 seconds=$2 run="build/asan/fuzz-run/$1" rc=0
    shift 2
    mkdir -p "$run/corpus" "$run/artifacts"
    cp "tests/fuzz/corpus/$name/"* "$run/corpus/"
    "build/asan/tests/fuzz_$name" -max_total_time="$seconds" -print_final_stats=1 "$@" \
      -dict="tests/fuzz/$name.dict" -artifact_prefix="$run/artifacts/" "$run/corpus" >"$run/log" 2>&1 || rc=$?
    echo "$rc" >"$run/rc"
  }
  # One lane a core; each target joins the lane with the least time so far (longest first).
  targets=("unpack 60" "layer 30 -timeout=10" "spec 30 -timeout=10" "lock 30 -timeout=10"
    "image 30 -timeout=10" "stream 30 -timeout=10" "registry 30 -timeout=10" "stage 30 -timeout=10"
    "pyinputs 20 -timeout=10" "supply 20 -timeout=10" "record 15 -timeout=10" "conda 15 -timeout=10"
    "conda_pkg 15 -timeout=10")
  lane_secs=()
  lane_work=()
  for ((i = 0; i < jobs; i++)); do
    lane_secs+=(0)
    lane_work+=("")
  done
  for target in "${targets[@]}"; do
    read -r name seconds _ <<<"$target"
    best=0
    for i in "${!lane_secs[@]}"; do
      [ "${lane_secs[$i]}" -lt "${lane_secs[$best]}" ] && best=$i
    done
    lane_secs[best]=$((lane_secs[best] + seconds))
    lane_work[best]+="$target;"
    echo "== fuzz: fuzz_$name for $seconds s (lane $((best + 1)))"
  done
  for work in "${lane_work[@]}"; do
    (
      IFS=';' read -ra mine <<<"$work"
      for target in "${mine[@]}"; do
        # shellcheck disable=SC2086 # the target's words
        fuzz_one $target
      done
    ) &
  done
  wait
  fuzz_failed=()
  for target in "${targets[@]}"; do
    read -r name _ <<<"$target"
    run="build/asan/fuzz-run/$name"
    if [ "$(cat "$run/rc" 2>/dev/null)" = 0 ]; then
      echo "fuzz_$name: $(grep -m1 '^Done' "$run/log" || echo done)"
    else
      cat "$run/log"
      fuzz_failed+=("$name")
    fi
  done
  if [ ${#fuzz_failed[@]} -gt 0 ]; then
    echo "fuzz: these targets failed (inputs under build/asan/fuzz-run/NAME/artifacts/): ${fuzz_failed[*]}" >&2
    exit 1
  fi
fi
# ---- end of fuzz stage
end_stage
echo "== all tests passed"
