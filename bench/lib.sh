# Shared by the benchmarks (sourced from the repository root).

# Sets LOCKSTEP to $LOCKSTEP, else to the release binary as shipped (libraries linked statically,
# CMakeLists.txt LOCKSTEP_STATIC_DEPS) in build/bench, its rank link lockstep-rank beside it.
bench_lockstep() {
  if [ -z "${LOCKSTEP:-}" ]; then
    cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_TESTS=OFF \
      -DLOCKSTEP_STATIC_DEPS=ON >/dev/null
    ninja -C build/bench lockstep >/dev/null
    LOCKSTEP=build/bench/lockstep
    # Only the C library and libzstd (CMakeLists.txt says why) may be shared: anything else means
    # the static link silently fell back.
    local shared
    shared=$(ldd "$LOCKSTEP" | awk '$1 !~ /^(linux-vdso|libc|libm|libzstd|\/lib64\/ld-linux)/ {print $1}')
    [ -z "$shared" ] || { echo "bench: build/bench/lockstep links shared libraries: $shared" >&2; exit 1; }
  fi
  LOCKSTEP=$(realpath "$LOCKSTEP")
}

# Exits 3 naming the first of TOOLS that is missing.
bench_need() { # TOOLS...
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null || { echo "bench: '$t' is missing (scripts/install-deps.sh bench)" >&2; exit 3; }
  done
}

# Sets rootfs, files and bytes: `mmdebstrap --variant=apt --include=openmpi-bin bookworm` (about
# 250 MB, 8,500 files), built once (reproducibly) and cached in $BENCH_DIR.
bench_rootfs() {
  mkdir -p "$BENCH_DIR"
  rootfs="$BENCH_DIR/rootfs"
  if [ ! -f "$rootfs/.complete" ]; then
    echo "bench: creating the rootfs with mmdebstrap (about 20 s)..." >&2
    rm -rf "$rootfs"
    SOURCE_DATE_EPOCH=1700000000 mmdebstrap --quiet --variant=apt --include=openmpi-bin bookworm "$rootfs" >&2
    touch -d @1700000000 "$rootfs/.complete"
    sleep 2 # let the sources age past lockstep's 2 s "racy" window
  fi
  files=$(find "$rootfs" | wc -l)
  bytes=$(du -sb "$rootfs" | cut -f1)
}

# Timing helpers for the scripts that time whole commands: the median of the numbers on stdin, the
# clock in seconds, and the seconds from A to B (two decimals).
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
