#!/usr/bin/env bash
# Benchmark (issue 16): examples/mpi-hello's packages (openmpi-bin, python3-mpi4py) installed over a
# Debian bookworm base image, in one run:
#   ours:  `lockstep lock` + cold `lockstep build --locked` of a spec whose base is that image
#          (`base: {oci: …}`): reads the base's dpkg database, resolves what is missing, fetches
#          the .debs, writes their layers, the merged dpkg database and the configure step's layer,
#          and the OCI layout; no package cache.
#   peer:  the same install by apt in a chroot of the unpacked base:
#          `mmdebstrap --variant=custom --setup-hook 'tar -C "$1" -xf BASE.tar' --include=…`
#          (extracts the base, then apt-get installs the packages and their dependencies, writes a
#          tarball); no package cache.
# The base is `mmdebstrap --variant=apt bookworm` (SOURCE_DATE_EPOCH fixed), made once and turned
# into a one-layer OCI image with skopeo's tarball transport. Both fetch from the same mirror.
#
# Usage: bench/base-image.sh [RUNS]          (default 3; the median of RUNS is reported)
#        BENCH_DIR=/mnt/tmpfs TMPDIR=/mnt/tmpfs bench/base-image.sh   (both tools on a tmpfs)
# Measured on the 2-core dev machine (2026-12-05): on its disk 0.54-0.59 (ours 7.5-8.9 s, peer
# 12.7-16.5 s; noisy: that ext4 has no journal, and its inode allocator slows down for minutes after
# many files are deleted, which each run does); on a tmpfs, where only the tools' own work counts,
# 0.72 (ours 5.75 s, peer 8.0 s). There ours is CPU-bound: xz-decoding the indexes and the .debs and
# gzipping the package layer take both cores while the base unpacks and the indexes load in parallel.
# Needs: a built lockstep (build/bench or $LOCKSTEP), mmdebstrap, skopeo, network access to
# deb.debian.org, root. Target: ours / peer at most 0.6.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
BENCH_DIR=${BENCH_DIR:-/tmp/lockstep-bench}
mirror=http://deb.debian.org/debian
source bench/lib.sh
bench_lockstep
bench_need mmdebstrap skopeo tar
load=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load" 'BEGIN { exit !(l >= 1) }' && echo "bench: warning: load average $load; figures will be noisy" >&2

work="$BENCH_DIR/base-image"
mkdir -p "$work"
if [ ! -f "$work/base.tar" ]; then
  echo "bench: making the bookworm base with mmdebstrap (about 30 s)..." >&2
  SOURCE_DATE_EPOCH=1700000000 mmdebstrap --quiet --variant=apt bookworm "$work/base.tmp.tar" "$mirror" >&2
  mv "$work/base.tmp.tar" "$work/base.tar"
fi
rm -rf "$work/base"
skopeo copy --quiet tarball:"$work/base.tar" oci:"$work/base:latest"

rm -rf "$work/ex" && mkdir -p "$work/ex"
cp examples/mpi-hello/hello.py "$work/ex/"
cat >"$work/ex/lockstep.yaml" <<YAML
lockstep: 1
name: bench/base-image
base: {oci: $work/base}
repos:
  - apt: $mirror
    suite: bookworm
    components: [main]
    keyring: /usr/share/keyrings/debian-archive-keyring.gpg
packages:
  apt: [openmpi-bin, python3-mpi4py]
copy:
  - {from: ./hello.py, to: /opt/hello/hello.py}
outputs: {oci: out}
YAML


ours=() peer=()
for i in $(seq 1 "$runs"); do
  echo "bench: run $i/$runs" >&2
  export LOCKSTEP_CACHE="$work/cache"
  rm -rf "$LOCKSTEP_CACHE" "$work/ex/out" "$work/ex/lockstep.lock"
  t0=$(now)
  "$LOCKSTEP" lock -q --allow-outside "$work/ex/lockstep.yaml"
  "$LOCKSTEP" build -q --locked --allow-outside "$work/ex/lockstep.yaml" >/dev/null 2>&1
  t1=$(now)
  ours+=("$(secs "$t0" "$t1")")

  rm -f "$work/peer.tar"
  t0=$(now)
  mmdebstrap --quiet --variant=custom --setup-hook "tar -C \"\$1\" -xf $work/base.tar" \
    --include=openmpi-bin,python3-mpi4py bookworm "$work/peer.tar" "$mirror" >/dev/null 2>&1
  t1=$(now)
  peer+=("$(secs "$t0" "$t1")")
done

ours_m=$(printf '%s\n' "${ours[@]}" | median)
peer_m=$(printf '%s\n' "${peer[@]}" | median)
printf '\n%-64s %8s %8s\n' "case (median of $runs)" "s" "ratio"
printf '%-64s %8s %8s\n' "mmdebstrap --variant=custom (extract base) --include=... (peer)" "$peer_m" "1.000"
printf '%-64s %8s %8.3f\n' "lockstep lock + cold build over the base image (ours / peer)" "$ours_m" \
  "$(awk -v a="$ours_m" -v b="$peer_m" 'BEGIN{print a/b}')"
echo "runs: ours ${ours[*]} | peer ${peer[*]}" >&2
