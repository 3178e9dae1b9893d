#!/usr/bin/env bash
# Benchmark: a cold `build --locked` of examples/mpi-hello from a vendor directory (`lockstep vendor`,
# `--offline --mirror DIR`) versus from the HTTP mirror it was locked from, in one run. The HTTP
# mirror is local (127.0.0.1, python3's http.server) so that the network is not what is measured: it
# serves bookworm's real InRelease and Packages from deb.debian.org and the pool files of the
# packages the lock names. Both builds start from an empty store. Also: the time `lockstep sbom`
# takes for the image (licenses read from every .deb, nothing cached), next to the build's.
#
# Usage: bench/vendor.sh [RUNS]          (default 3; medians of RUNS are reported)
# Needs: a built lockstep (build/bench or $LOCKSTEP), python3, curl, network access to deb.debian.org
# (once, to set the local mirror up), root (the build's sandbox for maintainer scripts).
# Issue 19: report the ratio (vendor / HTTP mirror) and the SBOM time next to the build's.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
source bench/lib.sh
bench_lockstep
bench_need python3 curl jq
load=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load" 'BEGIN { exit !(l >= 1) }' && echo "bench: warning: load average $load; figures will be noisy" >&2

export LOCKSTEP LOCKSTEP_SOURCE_DIR=$PWD
source tests/cli/lib.sh # cds into $WORK (removed on exit), start_http_server

# 1. A fresh lock of the example against deb.debian.org, its packages vendored (downloaded once).
cp -r "$LOCKSTEP_SOURCE_DIR/examples/mpi-hello" upstream
sed -i '/^outputs:/,$d' upstream/lockstep.yaml
rm -f upstream/lockstep.lock
"$LOCKSTEP" lock -q upstream/lockstep.yaml >/dev/null
"$LOCKSTEP" vendor -q upstream/lockstep.lock --to "$WORK/fetched" >/dev/null

# 2. The local mirror: bookworm's InRelease and main/amd64 Packages, and those pool files.
dists=www/debian/dists/bookworm
mkdir -p "$dists"
curl -fsS -o "$dists/InRelease" http://deb.debian.org/debian/dists/bookworm/InRelease
for index in main/binary-amd64/Packages.xz main/binary-all/Packages.xz; do
  # the file as the Release names it, under its by-hash name too (as lockstep and apt ask for it)
  sha=$(awk -v f="$index" '/^SHA256:/ { s = 1; next } /^[A-Z]/ { s = 0 } s && $3 == f { print $1 }' "$dists/InRelease")
  mkdir -p "$dists/$(dirname "$index")/by-hash/SHA256"
  curl -fsS -o "$dists/$index" "http://deb.debian.org/debian/dists/bookworm/$(dirname "$index")/by-hash/SHA256/$sha"
  ln "$dists/$index" "$dists/$(dirname "$index")/by-hash/SHA256/$sha"
done
jq -r '.artifacts[] | select(.kind == "deb") | "\(.sha256) \(.url)"' upstream/lockstep.lock |
  while read -r sha url; do
    path="www/debian/${url#http://deb.debian.org/debian/}"
    mkdir -p "$(dirname "$path")"
    ln "$WORK/fetched/blobs/sha256/$sha" "$path" 2>/dev/null || cp "$WORK/fetched/blobs/sha256/$sha" "$path"
  done
start_http_server "$WORK/www"
cp -r upstream local
sed -i "s|http://deb.debian.org/debian|$HTTP_URL/debian|" local/lockstep.yaml
rm -f local/lockstep.lock
LOCKSTEP_CACHE="$WORK/lock-cache" "$LOCKSTEP" lock -q local/lockstep.yaml >/dev/null
"$LOCKSTEP" vendor -q local/lockstep.lock --to "$WORK/vend" >/dev/null
ndebs=$(jq '[.artifacts[] | select(.kind == "deb")] | length' local/lockstep.lock)

seconds() { # CMD...: wall seconds of CMD (its output discarded)
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || { echo "bench: failed: $*" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
median() { tr ' ' '\n' | sort -g | awk '{v[NR] = $1} END { print v[int((NR + 1) / 2)] }'; }

http=() vendor=() sbom=() digests=()
for i in $(seq "$runs"); do
  rm -rf "$WORK/c-http" "$WORK/c-vend" out-http out-vend
  http+=("$(LOCKSTEP_CACHE="$WORK/c-http" seconds "$LOCKSTEP" build --locked --oci out-http local/lockstep.yaml)")
  vendor+=("$(LOCKSTEP_CACHE="$WORK/c-vend" seconds "$LOCKSTEP" build --locked --offline --mirror "$WORK/vend" \
    --oci out-vend local/lockstep.yaml)")
  rm -rf "$WORK/c-vend/records/sbom-license"
  sbom+=("$(LOCKSTEP_CACHE="$WORK/c-vend" seconds "$LOCKSTEP" sbom oci:out-vend --lock local/lockstep.lock \
    -o out.spdx.json)")
  digests+=("$(jq -r '.manifests[0].digest' out-http/index.json) $(jq -r '.manifests[0].digest' out-vend/index.json)")
done
for d in "${digests[@]}"; do
  read -r a b <<<"$d"
  [ "$a" = "$b" ] || { echo "bench: the vendored build's digest $b differs from $a" >&2; exit 1; }
done
h=$(echo "${http[@]}" | median)
v=$(echo "${vendor[@]}" | median)
s=$(echo "${sbom[@]}" | median)
echo "examples/mpi-hello, $ndebs debs, cold build --locked (medians of $runs; same digest each way):"
printf '  %-52s %8s s\n' "from the HTTP mirror on 127.0.0.1" "$h"
printf '  %-52s %8s s   %sx of the HTTP mirror\n' "from the vendor directory (--offline --mirror)" "$v" \
  "$(awk -v a="$v" -v b="$h" 'BEGIN { printf "%.3f", a / b }')"
printf '  %-52s %8s s   %sx of the cold build\n' "lockstep sbom of the image (licenses read cold)" "$s" \
  "$(awk -v a="$s" -v b="$h" 'BEGIN { printf "%.3f", a / b }')"
