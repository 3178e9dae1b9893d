#!/usr/bin/env bash
# Benchmark: a SIF from the 250 MB root filesystem of bench/layer-build.sh (mmdebstrap bookworm +
# openmpi-bin, 8,500 files), against `mksquashfs DIR -comp gzip` (what Apptainer runs to build a
# SIF) and `tar2sqfs -c gzip` (squashfs-tools-ng, the library lockstep uses) on the same content.
#
# lockstep is measured cold for the SIF (its SIF cache emptied) with the layer cache warm: the time
# is the whole `lockstep build --sif` (spec, layer cache check, squashfs from the layer blob,
# Apptainer layout, SIF, hashing, fsync). The squashfs stage alone is in --timings ("sif build").
#
# With --memory (issue 14: memory that does not grow with the image), instead: an image of this
# machine's /usr/lib, /usr/share and /usr/include (at least 5 GB; the bench refuses less), built
# for every codec combination: the OCI layer (gzip, zstd) with the default SIF (gzip) in one build,
# then the SIF alone from that cached layer for each other SIF codec (zstd, lz4, xz). Each row
# gives the seconds, the peak resident memory (GNU time's maximum RSS) and the squashfs bytes;
# `mksquashfs -comp gzip` on the same directories is the peer.
#
# Usage: bench/sif-build.sh [RUNS]          (default 3; the median of RUNS is reported)
#        bench/sif-build.sh --memory [--no-peer]   (one run of each combination; about half an hour)
# Needs: a built lockstep (build/bench or $LOCKSTEP), mksquashfs, tar2sqfs, siftool, mmdebstrap;
# root for mmdebstrap. Run it on a quiet machine (load average below 1).
# Targets (issue 3): lockstep at least 5 x faster than mksquashfs, at most 1.05 x its size.
# Target (issue 14): peak memory at most 512 MB for every codec combination.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/lockstep-bench}
source bench/lib.sh
bench_lockstep
if [ "${1:-}" = "--memory" ]; then
  bench_need mksquashfs siftool /usr/bin/time
  work="$BENCH_DIR/sif-memory"
  rm -rf "$work" && mkdir -p "$work"
  dirs=(/usr/lib /usr/share /usr/include)
  bytes=$(du -scb "${dirs[@]}" | tail -n 1 | cut -f1)
  files=$(find "${dirs[@]}" | wc -l)
  [ "$bytes" -ge 5000000000 ] || { echo "bench: ${dirs[*]} hold $((bytes / 1000000)) MB; need 5 GB" >&2; exit 3; }
  export LOCKSTEP_CACHE="$work/cache" GIT_CEILING_DIRECTORIES=/
  # peak CMD...: runs CMD under GNU time; prints "SECONDS PEAK_MB".
  peak() {
    /usr/bin/time -f '%e %M' -o "$work/time" "$@" >"$work/out.log" 2>&1 ||
      { echo "bench: $* failed: $(tail -n 5 "$work/out.log")" >&2; exit 1; }
    awk '{ printf "%s %.0f\n", $1, $2 / 1024 }' "$work/time"
  }
  spec() { # LAYER_CODEC SIF_CODEC
    cat >"$work/lockstep.yaml" <<YAML
lockstep: 1
name: bench-memory
copy:
$(for d in "${dirs[@]}"; do echo "  - {from: $d, to: $d, mode: preserve, owner: preserve}"; done)
outputs: {compression: $1, sif_compression: $2}
YAML
  }
  echo "bench: $((bytes / 1000000)) MB in $files entries (${dirs[*]}); $(nproc) cores" >&2
  printf '\n%-44s %9s %9s %12s\n' "case" "seconds" "peak MB" "squashfs MB"
  row() { printf '%-44s %9s %9s %12.1f\n' "$1" "$2" "$3" "$(awk -v s="$4" 'BEGIN { print s / 1e6 }')"; }
  if [ "${2:-}" != "--no-peer" ]; then # the peer takes about 7 minutes on 2 cores
    read -r t m < <(peak env SOURCE_DATE_EPOCH=0 mksquashfs "${dirs[@]}" "$work/peer.sqfs" -comp gzip -noappend \
      -quiet -no-progress)
    row "mksquashfs -comp gzip (peer)" "$t" "$m" "$(stat -c %s "$work/peer.sqfs")"
    rm -f "$work/peer.sqfs"
  fi
  worst=0
  for layer in gzip zstd; do
    rm -rf "$work/cache"
    for sif in gzip zstd lz4 xz; do
      spec "$layer" "$sif"
      rm -f "$work/out.sif"
      if [ "$sif" = gzip ]; then
        what="OCI ($layer) + SIF ($sif), one build"
        read -r t m < <(peak "$LOCKSTEP" build --quiet --allow-outside --no-vcs --oci "$work/oci" \
          --sif "$work/out.sif" "$work/lockstep.yaml")
      else
        what="  SIF ($sif) from the cached $layer layer"
        read -r t m < <(peak "$LOCKSTEP" build --quiet --allow-outside --no-vcs --sif "$work/out.sif" \
          "$work/lockstep.yaml")
      fi
      row "$what" "$t" "$m" "$(siftool info 5 "$work/out.sif" | awk '/Size:/ { print $2 }')"
      [ "$m" -gt "$worst" ] && worst=$m
      rm -rf "$work/oci" "$work/out.sif"
    done
  done
  printf '\n%-44s %s MB (target <= 512)\n' "peak memory, worst combination" "$worst"
  rm -rf "$work"
  exit 0
fi
runs=${1:-3}
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
