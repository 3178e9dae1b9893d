#!/usr/bin/env bash
# Registry transfers (docs/registry.md) against skopeo, in one run, on the real docker-registry
# (plain HTTP on 127.0.0.1, started here):
#   1. pull of examples/mpi-hello (6 gzip layers, ~100 MB) into an empty store:
#      `lockstep pull docker://...` vs `skopeo copy docker://... oci:DIR` (target <= 0.6x);
#   2. push into an empty repository: `lockstep push oci:... docker://...` vs `skopeo copy oci:...
#      docker://...` (each run a fresh repository of a fresh registry; target <= 0.6x);
#   3. re-push of the unchanged image (what the registry has is skipped), as a share of the cold push
#      (target <= 5%).
# Prints mean times and ratios (ours / peer). Needs the image: LOCKSTEP_BENCH_IMAGE=oci:DIR, else
# examples/mpi-hello is built (deb.debian.org). Usage: bench/registry.sh [RUNS]  (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
runs=${1:-10}
bench_need hyperfine skopeo docker-registry jq
bench_lockstep

WORK=$(mktemp -d /tmp/lockstep-bench-registry-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
export LOCKSTEP_CACHE="$WORK/cache"

image=${LOCKSTEP_BENCH_IMAGE:-}
if [ -z "$image" ]; then
  cp -r examples/mpi-hello "$WORK/ex"
  sed -i 's|oci: ../../build/examples/mpi-hello|oci: out|; /sif:/d' "$WORK/ex/lockstep.yaml"
  echo "bench: building examples/mpi-hello..." >&2
  "$LOCKSTEP" build --quiet --locked "$WORK/ex/lockstep.yaml" >/dev/null
  image="oci:$WORK/ex/out"
fi
layout=${image#oci:}
size=$(jq '[.layers[].size] | add' "$layout/blobs/sha256/$(jq -r '.manifests[0].digest' "$layout/index.json" | cut -d: -f2)")
echo "bench: image $image, $((size / 1000000)) MB of compressed layers" >&2

# A registry on 127.0.0.1 (plain HTTP), storage under $WORK.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$WORK/config.yml" <<EOF
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $WORK/registry}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$port, secret: bench}
EOF
docker-registry serve "$WORK/config.yml" >"$WORK/registry.log" 2>&1 &
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v2/" >/dev/null && break; sleep 0.05; done
R="127.0.0.1:$port"

# The image in the registry once, for the pulls.
"$LOCKSTEP" push -q --tls-verify=false "$image" "docker://$R/bench/pull:v1" >/dev/null

cd "$WORK"
echo "bench: pull into an empty store ($runs runs each)" >&2
hyperfine -N --runs "$runs" --export-json pull.json \
  --prepare "rm -rf $WORK/cache $WORK/skopeo-out" \
  "skopeo copy -q --src-tls-verify=false docker://$R/bench/pull:v1 oci:$WORK/skopeo-out:v1" \
  "$LOCKSTEP pull -q --tls-verify=false docker://$R/bench/pull:v1" >&2

echo "bench: push into an empty repository ($runs runs each)" >&2
# Each run pushes to a repository never used: the registry has no blob of it under that name, and
# lockstep's mount hints are cleared, so every blob is uploaded.
cat >push-ours.sh <<EOF
#!/bin/sh
rm -rf $WORK/cache/records/registry-blobs
exec $LOCKSTEP push -q --tls-verify=false $image docker://$R/bench/ours-\$(date +%s%N):v1 >/dev/null
EOF
cat >push-peer.sh <<EOF
#!/bin/sh
# skopeo's blob-info cache would let it mount blobs it saw in another repository (the pulls).
rm -f /var/lib/containers/cache/blob-info-cache-v1.boltdb \$HOME/.local/share/containers/cache/blob-info-cache-v1.boltdb
exec skopeo copy -q --dest-tls-verify=false $image docker://$R/bench/peer-\$(date +%s%N):v1
EOF
chmod +x push-ours.sh push-peer.sh
# (docker-registry answers HEAD for a blob of another repository with 404, so both tools upload
# every blob; it deduplicates the bytes on disk only.)
hyperfine -N --runs "$runs" --export-json push.json "./push-peer.sh" "./push-ours.sh" >&2

echo "bench: re-push of the unchanged image ($runs runs)" >&2
"$LOCKSTEP" push -q --tls-verify=false "$image" "docker://$R/bench/again:v1" >/dev/null
hyperfine -N --runs "$runs" --export-json repush.json \
  "$LOCKSTEP push -q --tls-verify=false $image docker://$R/bench/again:v1" >&2

mean() { jq ".results[$2].mean * 1000" "$1"; }
sp=$(mean pull.json 0) op=$(mean pull.json 1)
pp=$(mean push.json 0) opu=$(mean push.json 1)
rp=$(mean repush.json 0)
printf '\n%-58s %10s %8s\n' "case" "mean (ms)" "ratio"
printf '%-58s %10.1f %8s\n' "skopeo copy docker:// oci: (peer)" "$sp" "1.000"
printf '%-58s %10.1f %8.3f\n' "lockstep pull docker:// (empty store)" "$op" "$(echo "$op / $sp" | bc -l)"
printf '%-58s %10.1f %8s\n' "skopeo copy oci: docker:// (peer, empty repository)" "$pp" "1.000"
printf '%-58s %10.1f %8.3f\n' "lockstep push oci: docker:// (empty repository)" "$opu" "$(echo "$opu / $pp" | bc -l)"
printf '%-58s %10.1f %8.3f\n' "lockstep re-push, unchanged (share of its cold push)" "$rp" "$(echo "$rp / $opu" | bc -l)"
