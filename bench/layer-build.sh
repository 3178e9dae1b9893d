#!/usr/bin/env bash
# Benchmark: build one layer from a real root filesystem, against umoci and `tar | gzip -n | sha256sum`
# in the same run. The rootfs is `mmdebstrap --variant=apt --include=openmpi-bin bookworm` (about
# 250 MB, 8,500 files), built once and cached in $BENCH_DIR.
#
# Usage: bench/layer-build.sh [RUNS]         (default 3; the median of RUNS is reported)
# Needs: a built lockstep (build/bench or $LOCKSTEP), umoci, mmdebstrap, gzip; root for mmdebstrap.
# Targets (issue 2): gzip cold <= 0.6 x umoci at a size within 5 %; zstd cold <= 0.3 x umoci;
# no-change rebuild <= 2 % of the cold build.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
BENCH_DIR=${BENCH_DIR:-/tmp/lockstep-bench}
source bench/lib.sh
bench_lockstep
bench_need umoci mmdebstrap gzip sha256sum

bench_rootfs

work="$BENCH_DIR/work"
rm -rf "$work" && mkdir -p "$work"
cat >"$work/lockstep.yaml" <<YAML
lockstep: 1
name: bench
copy: [{from: $rootfs, to: /, mode: preserve, owner: preserve}]
YAML

now() { echo "${EPOCHREALTIME/./}"; } # microseconds
# time_median NAME PREP CMD: runs PREP (untimed) then CMD, RUNS times; prints the median seconds.
time_median() {
  local prep=$2 cmd=$3 samples=() i t0 t1
  for ((i = 0; i < runs; i++)); do
    eval "$prep"
    sync
    t0=$(now)
    eval "$cmd" >/dev/null 2>&1
    t1=$(now)
    samples+=($((t1 - t0)))
  done
  printf '%s\n' "${samples[@]}" | sort -n | awk -v n="$runs" '{ a[NR] = $1 } END { printf "%.3f", a[int((n + 1) / 2)] / 1e6 }'
}

ls_build() { # CODEC OUT
  echo "LOCKSTEP_CACHE=$work/cache-$1 GIT_CEILING_DIRECTORIES=/ $LOCKSTEP build --allow-outside --no-vcs --compression $1 --oci $work/$2 $work/lockstep.yaml"
}

echo "bench: $runs runs each on $(nproc) cores; rootfs $files entries, $((bytes / 1000000)) MB" >&2
t_gzip=$(time_median gzip "rm -rf $work/cache-gzip $work/out-gzip" "$(ls_build gzip out-gzip)")
t_nochange=$(time_median nochange ":" "$(ls_build gzip out-gzip)")
t_zstd=$(time_median zstd "rm -rf $work/cache-zstd $work/out-zstd" "$(ls_build zstd out-zstd)")
t_umoci=$(time_median umoci "rm -rf $work/umoci; umoci init --layout $work/umoci; umoci new --image $work/umoci:t" \
  "umoci insert --image $work/umoci:t $rootfs /")
t_tar=$(time_median tar ":" "tar --sort=name --numeric-owner -C $rootfs -cf - . | gzip -n | sha256sum")

size_of_layer() { # LAYOUT TAG
  local m
  m=$(jq -r --arg t "$2" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $t) | .digest' "$1/index.json")
  jq -r '.layers[-1].size' "$1/blobs/sha256/${m#sha256:}"
}
s_gzip=$(size_of_layer "$work/out-gzip" latest)
s_zstd=$(size_of_layer "$work/out-zstd" latest)
s_umoci=$(size_of_layer "$work/umoci" t)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
printf '\n%-34s %10s %12s %14s\n' "case" "seconds" "layer MB" "ratio"
printf '%-34s %10s %12s %14s\n' "umoci insert (gzip)" "$t_umoci" "$(awk -v s="$s_umoci" 'BEGIN{printf "%.1f", s/1e6}')" "1.000 (peer)"
printf '%-34s %10s %12s %14s\n' "tar | gzip -n | sha256sum" "$t_tar" "-" "$(ratio "$t_tar" "$t_umoci") x umoci"
printf '%-34s %10s %12s %14s\n' "lockstep gzip, cold" "$t_gzip" "$(awk -v s="$s_gzip" 'BEGIN{printf "%.1f", s/1e6}')" "$(ratio "$t_gzip" "$t_umoci") x umoci"
printf '%-34s %10s %12s %14s\n' "lockstep zstd, cold" "$t_zstd" "$(awk -v s="$s_zstd" 'BEGIN{printf "%.1f", s/1e6}')" "$(ratio "$t_zstd" "$t_umoci") x umoci"
printf '%-34s %10s %12s %14s\n' "lockstep gzip, no-change rebuild" "$t_nochange" "-" "$(ratio "$t_nochange" "$t_gzip") x cold"
printf '\n%-34s %s\n' "gzip size, lockstep / umoci" "$(ratio "$s_gzip" "$s_umoci")"
printf '%-34s %s (target <= 0.6)\n' "gzip time, lockstep / umoci" "$(ratio "$t_gzip" "$t_umoci")"
printf '%-34s %s (target <= 0.3)\n' "zstd time, lockstep / umoci" "$(ratio "$t_zstd" "$t_umoci")"
printf '%-34s %s (target <= 0.02)\n' "no-change rebuild / cold" "$(ratio "$t_nochange" "$t_gzip")"
