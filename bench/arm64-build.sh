#!/usr/bin/env bash
# Benchmark (issue 38): a cold build of examples/mpi-hello for linux/arm64 on this x86_64 machine, the
# arm64 maintainer scripts under qemu-user, in one run:
#   ours:  `lockstep lock` + `lockstep build --locked` of examples/mpi-hello with
#          `platform: linux/arm64` (the apt variant base, openmpi-bin, python3-mpi4py), an empty
#          cache: reads the arm64 indexes, fetches the .debs, writes their layers natively and runs
#          dpkg's configure step in the build sandbox under qemu-user (its own binfmt_misc).
#   peer:  `mmdebstrap --variant=apt --arch=arm64 --include=openmpi-bin,python3-mpi4py` of the same
#          suites to a tarball, no package cache; apt and dpkg inside the arm64 chroot run under
#          qemu-user. mmdebstrap needs a binfmt_misc handler: bench/binfmt-ns.py gives it a user
#          namespace (ids 0-65535 mapped to themselves) with a binfmt_misc of its own, as lockstep
#          does, so the host's stays untouched; --skip=check/qemu (arch-test is not installed).
# Both fetch from the same mirror.
#
# Usage: bench/arm64-build.sh [RUNS]          (default 1; the median of RUNS is reported)
# Needs: a built lockstep (build/bench or $LOCKSTEP), mmdebstrap, qemu-user-static, python3, Linux 6.7+
# (binfmt_misc per user namespace), root, network access to deb.debian.org. Target: ours / peer at
# most 0.7.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1}
BENCH_DIR=${BENCH_DIR:-/tmp/lockstep-bench}
source bench/lib.sh
bench_lockstep
bench_need mmdebstrap qemu-aarch64-static python3
[ "$(id -u)" = 0 ] || { echo "bench: run as root (mmdebstrap's root mode in a user namespace)" >&2; exit 3; }
load=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load" 'BEGIN { exit !(l >= 1) }' && echo "bench: warning: load average $load; figures will be noisy" >&2

work="$BENCH_DIR/arm64-build"
rm -rf "$work" && mkdir -p "$work/ex"
chmod 1777 "$work"
cp examples/mpi-hello/hello.py "$work/ex/"
sed -e 's|^platform: linux/amd64|platform: linux/arm64|' -e 's|oci: ../../build/examples/mpi-hello|oci: out|' \
  -e '/sif: /d' examples/mpi-hello/lockstep.yaml >"$work/ex/lockstep.yaml"


ours=() peer=()
for i in $(seq 1 "$runs"); do
  echo "bench: run $i/$runs" >&2
  export LOCKSTEP_CACHE="$work/cache"
  rm -rf "$LOCKSTEP_CACHE" "$work/ex/out" "$work/ex/lockstep.lock"
  t0=$(now)
  "$LOCKSTEP" lock -q --allow-outside "$work/ex/lockstep.yaml"
  "$LOCKSTEP" build -q --locked --allow-outside "$work/ex/lockstep.yaml" >/dev/null 2>"$work/ours.log" ||
    { tail -5 "$work/ours.log" >&2; exit 1; }
  t1=$(now)
  ours+=("$(secs "$t0" "$t1")")

  rm -f "$work/peer.tar"
  t0=$(now)
  python3 bench/binfmt-ns.py mmdebstrap --quiet --skip=check/qemu --variant=apt --arch=arm64 \
    --include=openmpi-bin,python3-mpi4py bookworm "$work/peer.tar" \
    "deb http://deb.debian.org/debian bookworm bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main" >"$work/peer.log" 2>&1 ||
    { tail -5 "$work/peer.log" >&2; exit 1; }
  t1=$(now)
  peer+=("$(secs "$t0" "$t1")")
done

ours_m=$(printf '%s\n' "${ours[@]}" | median)
peer_m=$(printf '%s\n' "${peer[@]}" | median)
printf '\n%-64s %8s %8s\n' "case (median of $runs)" "s" "ratio"
printf '%-64s %8s %8s\n' "mmdebstrap --variant=apt --arch=arm64 --include=... (peer)" "$peer_m" "1.000"
printf '%-64s %8s %8.3f\n' "lockstep lock + cold build, linux/arm64 (ours / peer)" "$ours_m" \
  "$(awk -v a="$ours_m" -v b="$peer_m" 'BEGIN{print a/b}')"
echo "runs: ours ${ours[*]} | peer ${peer[*]}" >&2
