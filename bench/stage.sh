#!/usr/bin/env bash
# Staging (docs/launch.md, "Staging") against sbcast alone, in one run, on 3 network-namespace nodes
# each with a store of its own (a node hook binds $WORK/store-nK over the store path and hides the
# image's directory), with examples/mpi-hello's SIF (about 100 MB):
#   1. `salloc -N 3 sbcast` of the SIF into each node's own directory (the peer);
#   2. `salloc -N 3 lockstep run SIF -- /bin/true`, the SIF on no node: staged with sbcast and one
#      srun step (the nodes' stores emptied before each run);
#   3. the same with the SIF already in the nodes' stores (the launch without the copy);
#   4. `lockstep run --hostfile ... SIF -- /bin/true` under mpirun, the SIF on no node: staged through
#      the rsh agent tree;
#   5. the same, already staged.
# Prints mean times, the ratios ours/sbcast and staging's own share ((2)-(3) and (4)-(5)) over
# sbcast, and the load averages. Needs root, deb.debian.org (the image's packages) and
# scripts/install-deps.sh bench (hyperfine, Open MPI, Slurm, munge).
# Usage: bench/stage.sh [RUNS]   (from the repository root; default 10 runs each)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
runs=${1:-10}
bench_need hyperfine mpirun salloc srun sbcast jq
bench_lockstep

WORK=$(mktemp -d /tmp/lockstep-bench-stage-XXXXXX)
export LOCKSTEP_CACHE="$WORK/cache"
fail() { echo "bench: $*" >&2; exit 1; }
need() { bench_need "$@"; }
trap 'rm -rf "$WORK"' EXIT
LOCKSTEP_SOURCE_DIR=$PWD
source tests/cli/cluster.sh

cp -r examples/mpi-hello "$WORK/ex"
sed -i 's|oci: ../../build/examples/mpi-hello|oci: out|; s|sif: ../../build/examples/mpi-hello.sif|sif: out.sif|' \
  "$WORK/ex/lockstep.yaml"
echo "bench: building examples/mpi-hello..." >&2
"$LOCKSTEP" build --quiet --locked "$WORK/ex/lockstep.yaml" >/dev/null
SIF=$WORK/ex/out.sif
echo "bench: the SIF has $(stat -c %s "$SIF") bytes" >&2

cluster_up 3
mkdir -p "$WORK/empty" "$WORK/dest"
for n in $CLUSTER_NODES; do
  mkdir -p "$WORK/store-$n" "$WORK/dest-$n"
  printf 'mount --bind %s %s\nmount --bind %s %s\nmount --bind %s %s\n' "$WORK/store-$n" "$LOCKSTEP_CACHE" \
    "$WORK/empty" "$WORK/ex" "$WORK/dest-$n" "$WORK/dest" >"$CLUSTER_DIR/node-$n.sh"
done
slurm_up # after the hooks: slurmd's mount namespace has them
mca="--mca plm_rsh_agent $CLUSTER_AGENT --mca btl_tcp_if_include $CLUSTER_SUBNET --mca oob_tcp_if_include $CLUSTER_SUBNET"
largs=""
for w in $mca; do largs+=" --launcher-arg=$w"; done
on_head_cmd() { printf '%s head %q' "$CLUSTER_AGENT" "$1"; }
empty_stores="rm -rf $WORK/store-n1/* $WORK/store-n2/* $WORK/store-n3/* $WORK/dest-n1/* $WORK/dest-n2/* $WORK/dest-n3/*"

peer="salloc -Q -N 3 sbcast --force $SIF $WORK/dest/out.sif"
slurm="salloc -Q -N 3 -n 3 $LOCKSTEP run --quiet --runs-dir $WORK/runs $SIF -- /bin/true"
mpi="$LOCKSTEP run --quiet --runs-dir $WORK/runs --hostfile $CLUSTER_DIR/hostfile -N 3 -n 3 $largs $SIF -- /bin/true"
for c in "$peer" "$slurm" "$mpi"; do
  eval "$empty_stores"
  out=$(eval "$(on_head_cmd "$c")" 2>&1) || fail "this failed: $c: $out"
done
for n in $CLUSTER_NODES; do
  cmp -s "$SIF" "$WORK/store-$n/blobs/sha256/$(sha256sum "$SIF" | cut -d' ' -f1)" || fail "$n has no staged copy"
done

echo "bench: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
hyperfine --shell=bash --style basic --warmup 1 --runs "$runs" --export-json "$WORK/h.json" \
  -n "salloc sbcast of the SIF (3 nodes)" --prepare "$empty_stores" "$(on_head_cmd "$peer") >/dev/null" \
  -n "salloc lockstep run, staged with sbcast" --prepare "$empty_stores" "$(on_head_cmd "$slurm") >/dev/null" \
  -n "salloc lockstep run, already staged" --prepare true "$(on_head_cmd "$slurm") >/dev/null" \
  -n "lockstep run (mpirun), staged through the agent tree" --prepare "$empty_stores" \
  "$(on_head_cmd "$mpi") >/dev/null" \
  -n "lockstep run (mpirun), already staged" --prepare true "$(on_head_cmd "$mpi") >/dev/null" >&2
echo "bench: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

jq -r '.results as $r | "| launch | mean s | ratio to sbcast |\n|---|---|---|",
  (range(0; $r|length) as $i | "| \($r[$i].command) | \($r[$i].mean*1000|round/1000) | \(($r[$i].mean/$r[0].mean)*1000|round/1000) |"),
  "| staging alone, sbcast ((2) - (3)) | \(($r[1].mean-$r[2].mean)*1000|round/1000) | \((($r[1].mean-$r[2].mean)/$r[0].mean)*1000|round/1000) |",
  "| staging alone, agent tree ((4) - (5)) | \(($r[3].mean-$r[4].mean)*1000|round/1000) | \((($r[3].mean-$r[4].mean)/$r[0].mean)*1000|round/1000) |"' \
  "$WORK/h.json"
