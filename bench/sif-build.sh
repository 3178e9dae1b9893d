#!/usr/bin/env bash
# Benchmark: a SIF from the 250 MB root filesystem of bench/layer-build.sh (mmdebstrap bookworm +
# openmpi-bin, 8,500 files), against `mksquashfs DIR -comp gzip` (what Apptainer runs to build a
# SIF) and `tar2sqfs -c gzip` (squashfs-tools-ng, the library lockstep uses) on the same content.
#
# lockstep is measured cold for the SIF (its SIF cache emptied) with the layer cache warm: the time
# is the whole `lockstep build --sif` (spec, layer cache check, squashfs from the layer blob,
# Apptainer layout, SIF, hashing, fsync). The squashfs stage alone is in --timings ("sif build").
#
# Usage: bench/sif-build.sh [RUNS]          (default 3; the median of RUNS is reported)
# Needs: a built lockstep (build/release or $LOCKSTEP), mksquashfs, tar2sqfs, siftool, mmdebstrap;
# root for mmdebstrap. Run it on a quiet machine (load average below 1).
# Targets (issue 3): lockstep at least 5 x faster than mksquashfs, at most 1.05 x its size.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
BENCH_DIR=${BENCH_DIR:-/tmp/lockstep-bench}
source bench/lib.sh
bench_lockstep
bench_need mksquashfs tar2sqfs siftool mmdebstrap tar
load=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load" 'BEGIN { exit !(l >= 1) }' && echo "bench: warning: load average $load; figures will be noisy" >&2

bench_rootfs

work="$BENCH_DIR/sif-work"
rm -rf "$work" && mkdir -p "$work"
cat >"$work/lockstep.yaml" <<YAML
lockstep: 1
name: bench
copy: [{from: $rootfs, to: /, mode: preserve, owner: preserve}]
YAML
# The same content as one tar, for tar2sqfs (made once, outside the timings).
tar --sort=name --numeric-owner -C "$rootfs" -cf "$work/rootfs.tar" .

now() { echo "${EPOCHREALTIME/./}"; } # microseconds
# time_median PREP CMD: runs PREP (untimed) then CMD, RUNS times; prints the median seconds.
time_median() {
  local prep=$1 cmd=$2 samples=() i t0 t1
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

export LOCKSTEP_CACHE="$work/cache" GIT_CEILING_DIRECTORIES=/
ls_build() { echo "$LOCKSTEP build --allow-outside --no-vcs --sif $work/$1 $work/lockstep.yaml"; }
echo "bench: $runs runs each on $(nproc) cores; rootfs $files entries, $((bytes / 1000000)) MB" >&2
eval "$(ls_build warm.sif)" >/dev/null 2>&1 # the layer cache, warm from here on

t_ls=$(time_median "rm -rf $work/cache/records/sif $work/out.sif" "$(ls_build out.sif)")
t_hit=$(time_median ":" "$(ls_build out.sif)")
t_mksq=$(time_median "rm -f $work/mksq.sqfs" \
  "SOURCE_DATE_EPOCH=0 mksquashfs $rootfs $work/mksq.sqfs -comp gzip -noappend -quiet -no-progress")
t_t2s=$(time_median "rm -f $work/t2s.sqfs" "tar2sqfs -q -f -c gzip -j $(nproc) $work/t2s.sqfs <$work/rootfs.tar")
stage=$(rm -rf "$work/cache/records/sif" && $(ls_build stage.sif) --timings 2>&1 | awk '/timing: sif build/ { print $5 / 1000 }')

s_ls=$(siftool info 5 "$work/out.sif" | awk '/Size:/ { print $2 }')
s_mksq=$(stat -c %s "$work/mksq.sqfs")
s_t2s=$(stat -c %s "$work/t2s.sqfs")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
mb() { awk -v s="$1" 'BEGIN { printf "%.1f", s / 1e6 }'; }
printf '\n%-36s %10s %12s %16s\n' "case" "seconds" "squashfs MB" "time ratio"
printf '%-36s %10s %12s %16s\n' "mksquashfs -comp gzip (Apptainer)" "$t_mksq" "$(mb "$s_mksq")" "1.000 (peer)"
printf '%-36s %10s %12s %16s\n' "tar2sqfs -c gzip" "$t_t2s" "$(mb "$s_t2s")" "$(ratio "$t_t2s" "$t_mksq") x mksq"
printf '%-36s %10s %12s %16s\n' "lockstep build --sif, cold SIF" "$t_ls" "$(mb "$s_ls")" "$(ratio "$t_ls" "$t_mksq") x mksq"
printf '%-36s %10s %12s %16s\n' "  of which the squashfs (sif build)" "$stage" "-" "-"
printf '%-36s %10s %12s %16s\n' "lockstep build --sif, cached" "$t_hit" "-" "$(ratio "$t_hit" "$t_ls") x cold"
printf '\n%-36s %s (target >= 5)\n' "speed-up, mksquashfs / lockstep" "$(ratio "$t_mksq" "$t_ls")"
printf '%-36s %s (target <= 1.05)\n' "size, lockstep / mksquashfs" "$(ratio "$s_ls" "$s_mksq")"
printf '%-36s %s\n' "size, tar2sqfs / mksquashfs" "$(ratio "$s_t2s" "$s_mksq")"
