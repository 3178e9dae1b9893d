#!/usr/bin/env bash
# Benchmark (issue 17): a cold `lockstep build --locked` of examples/mpi-hello as an unprivileged
# user (no subordinate ids: the build sandbox's supervisor records owners, docs/rootless.md) against
# the same build as root (the peer), alternating in one run; with newuidmap installed also the same
# user with a subordinate range (--userns subuid). Each build starts from a store holding only the
# lock's .debs (fetched once, before timing: the network is not what is measured), so layers, the
# unpacked root and the configure step are all built; the difference is the rootless unpack (image
# owners kept in xattrs) and the supervisor answering the configure step's chown and stat calls.
#
# Usage: bench/rootless.sh [RUNS]   (default 3; the median of RUNS is reported). Needs root (to
# create the user), useradd/runuser, network access to deb.debian.org. Target: at most 1.15.
# Measured on the 2-core dev machine (2026-12-05, 5 runs, medians): root 20.09 s; rootless single
# 21.03 s (1.047); rootless --userns subuid 21.67 s (1.079). Same digest in every run.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
BENCH_DIR=${BENCH_DIR:-/tmp/lockstep-bench}
source bench/lib.sh
bench_lockstep
bench_need useradd runuser userdel
[ "$(id -u)" = 0 ] || { echo "bench: run as root (it creates the unprivileged user)" >&2; exit 3; }

work="$BENCH_DIR/rootless"
user="lsbench$$"
rm -rf "$work" && mkdir -p "$work"
useradd -M -N -d /nonexistent -s /bin/sh "$user"
trap 'pkill -KILL -u "$user" 2>/dev/null || true; userdel "$user" 2>/dev/null || true' EXIT
for f in /etc/subuid /etc/subgid; do [ ! -f "$f" ] || sed -i "/^$user:/d" "$f"; done
install -m 0755 "$LOCKSTEP" "$work/lockstep"
for who in root user; do
  cp -r examples/mpi-hello "$work/$who"
  sed -i 's|oci: ../../build/examples/mpi-hello|oci: out|; s|sif: ../../build/examples/mpi-hello.sif|sif: out.sif|' \
    "$work/$who/lockstep.yaml"
done
chmod 0755 "$work" && chown -R "$user" "$work/user"

# The lock's .debs, fetched once into a seed store that every timed build starts from.
echo "bench: fetching the lock's .debs once" >&2
LOCKSTEP_CACHE="$work/fetch" "$work/lockstep" build -q --locked "$work/root/lockstep.yaml" >/dev/null 2>&1
mkdir -p "$work/seed/blobs/sha256"
for h in $(grep -o '[0-9a-f]\{64\}' "$work/root/lockstep.lock" | sort -u); do
  [ ! -f "$work/fetch/blobs/sha256/$h" ] || cp "$work/fetch/blobs/sha256/$h" "$work/seed/blobs/sha256/"
done
rm -rf "$work/fetch"
seed() { # DIR OWNER
  rm -rf "$1" && cp -r "$work/seed" "$1" && chown -R "$2" "$1"
}


ours=() peer=() sub=()
sub_range=""
if command -v newuidmap >/dev/null && command -v newgidmap >/dev/null; then
  sub_range=yes
fi
# timed_build root|single|subuid: a build from the seed store, as root or as the user with that
# --userns; prints its seconds, the digest goes to $work/MODE.digest.
timed_build() {
  local mode=$1 dir=$work/user owner=$user t0 t1
  local as=(runuser -u "$user" -- env) userns=(--userns "$mode")
  if [ "$mode" = root ]; then
    dir=$work/root owner=root as=(env) userns=()
  fi
  rm -rf "$dir/out" "$dir/out.sif" && seed "$dir/cache" "$owner"
  t0=$(now)
  "${as[@]}" LOCKSTEP_CACHE="$dir/cache" "$work/lockstep" build -q --locked "${userns[@]}" "$dir/lockstep.yaml" \
    >"$work/$mode.digest"
  t1=$(now)
  secs "$t0" "$t1"
  cmp -s "$work/root.digest" "$work/$mode.digest" || { echo "bench: the $mode digest differs" >&2; exit 1; }
}

for i in $(seq 1 "$runs"); do
  echo "bench: run $i/$runs" >&2
  peer+=("$(timed_build root)")
  ours+=("$(timed_build single)")
  if [ -n "$sub_range" ]; then # the same user with a subordinate range (--userns subuid)
    for f in /etc/subuid /etc/subgid; do printf '%s:%s:65536\n' "$user" 400000 >>"$f"; done
    sub+=("$(timed_build subuid)")
    for f in /etc/subuid /etc/subgid; do sed -i "/^$user:/d" "$f"; done
  fi
done

ours_m=$(printf '%s\n' "${ours[@]}" | median)
peer_m=$(printf '%s\n' "${peer[@]}" | median)
printf '\n%-64s %8s %8s\n' "case (median of $runs)" "s" "ratio"
printf '%-64s %8s %8s\n' "cold build --locked of examples/mpi-hello as root (peer)" "$peer_m" "1.000"
printf '%-64s %8s %8.3f\n' "the same build as an unprivileged user, no subids (ours / peer)" "$ours_m" \
  "$(awk -v a="$ours_m" -v b="$peer_m" 'BEGIN{print a/b}')"
if [ -n "$sub_range" ]; then
  sub_m=$(printf '%s\n' "${sub[@]}" | median)
  printf '%-64s %8s %8.3f\n' "the same build as that user with --userns subuid (ours / peer)" "$sub_m" \
    "$(awk -v a="$sub_m" -v b="$peer_m" 'BEGIN{print a/b}')"
fi
echo "runs: ours ${ours[*]} | subuid ${sub[*]} | peer ${peer[*]}; digest $(tail -1 "$work/single.digest")" >&2
