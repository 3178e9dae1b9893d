#!/usr/bin/env bash
# Benchmark (issue 36): install a 60-package conda environment from a warm package cache into an
# image layer, against extracting the same archives with conda-package-handling, in one hyperfine
# run. The packages are real files: the /usr tree of `mmdebstrap --variant=apt --include=openmpi-bin
# bookworm` (about 230 MB, bench_rootfs) cut into 60 .conda archives by `cph create`
# (bench/conda/gen-packages.py), each with one text file to relocate, served on 127.0.0.1.
#   peer: conda_package_handling.api.extract of each archive into its own directory, all 60 in one
#         Python process (cph extract without 60 interpreter start-ups);
#   ours: `lockstep build` of a spec asking for the chain's last package, every archive already in
#         the store and the layer cache emptied before each run: the archives read and checked, the
#         prefix planned with prefix replacement and conda-meta, the layer tarred, compressed
#         (gzip, the default, and zstd), hashed and written as an OCI layout.
# Prints mean ± sd and the ratio ours / peer. Target: at most 0.5.
#
# Usage: bench/conda-install.sh [RUNS]   (default 5, 1 warm-up)
# Needs: a built lockstep (build/bench or $LOCKSTEP), hyperfine, cph (conda-package-handling), jq,
# mmdebstrap (root) for the rootfs.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
BENCH_DIR=${BENCH_DIR:-/tmp/lockstep-bench}
source bench/lib.sh
bench_lockstep
bench_need hyperfine cph jq curl mmdebstrap
load=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load" 'BEGIN { exit !(l >= 1) }' && echo "bench: warning: load average $load; figures will be noisy" >&2

bench_rootfs
channel="$BENCH_DIR/conda-channel"
if [ ! -f "$channel/.complete" ]; then
  echo "bench: packing 60 conda packages with cph (about a minute)..." >&2
  rm -rf "$channel"
  /usr/bin/python3 bench/conda/gen-packages.py "$BENCH_DIR/rootfs" "$channel" 60
  touch "$channel/.complete"
fi

work=$(mktemp -d /tmp/lockstep-bench-conda-install-XXXXXX)
server_pid=
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
/usr/bin/python3 -m http.server --bind 127.0.0.1 --directory "$channel" "$port" >/dev/null 2>&1 &
server_pid=$!
until curl -fsS "http://127.0.0.1:$port/noarch/repodata.json" >/dev/null 2>&1; do
  kill -0 "$server_pid" || { echo "bench: the channel's HTTP server did not start" >&2; exit 1; }
  sleep 0.1
done

cat >"$work/lockstep.yaml" <<YAML
lockstep: 1
name: condabench
repos:
  - {conda: http://127.0.0.1:$port}
packages:
  conda: [p59]
conda: {virtual_packages: {glibc: "2.36"}}
YAML
export LOCKSTEP_CACHE="$work/store"
(cd "$work" && "$LOCKSTEP" lock -q && "$LOCKSTEP" build -q --oci "$work/out" >/dev/null)
archives=$(ls "$channel"/linux-64/*.conda | wc -l)
archive_bytes=$(cat "$channel"/linux-64/*.conda | wc -c)
/usr/bin/python3 -c 'import sys
from conda_package_handling import api
api.extract(sys.argv[1], dest_dir=sys.argv[2])' "$channel/linux-64/p00-1.0-h0_0.conda" "$work/probe"
echo "bench: $archives archives, $((archive_bytes / 1000000)) MB packed; $(du -sm "$work/out" | cut -f1) MB layout" >&2

peer="/usr/bin/python3 -c 'import glob, os, sys
from conda_package_handling import api
for f in sorted(glob.glob(sys.argv[1] + \"/*.conda\")):
    api.extract(f, dest_dir=os.path.join(sys.argv[2], os.path.basename(f)[:-6]))' $channel/linux-64 $work/extracted"
ours() { # CODEC
  echo "cd $work && $LOCKSTEP build -q --compression $1 --oci $work/out-$1"
}
hyperfine --style basic --warmup 1 --runs "$runs" --export-json "$work/h.json" \
  -n "cph extract, 60 archives (peer)" --prepare "rm -rf $work/extracted" "$peer" \
  -n "lockstep build, gzip layer" --prepare "rm -rf $work/store/records/layers $work/out-gzip" "$(ours gzip)" \
  -n "lockstep build, zstd layer" --prepare "rm -rf $work/store/records/layers $work/out-zstd" "$(ours zstd)" >&2

echo
jq -r '.results[] | [.command, .mean, .stddev, .median] | @tsv' "$work/h.json" |
  awk -F'\t' 'BEGIN { print "| case | mean ± sd (s) | median (s) | ratio (mean) |\n|---|---|---|---|" }
    { if (NR == 1) peer = $2
      printf "| %s | %.2f ± %.2f | %.2f | %.3f |\n", $1, $2, $3, $4, $2 / peer }'
echo "(load average at start: $load; $(nproc) cores)"
