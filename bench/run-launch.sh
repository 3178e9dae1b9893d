#!/usr/bin/env bash
# Launch overhead of `lockstep run` (docs/launch.md) against the bare launchers, in one run:
#   1. a 4-rank MPI hello/allreduce (examples/mpi-hello's hello.py) across 3 network-namespace nodes:
#      `lockstep run` (preflight on every node + mpirun + one `lockstep exec` per rank, image from
#      examples/mpi-hello) against bare `mpirun` of the same program on the host (python3-mpi4py);
#   2. the same under Slurm: `salloc lockstep run` (srun preflight step + srun --mpi=pmix) against
#      `salloc srun --mpi=pmix` on the host;
#   3. a trivial command (/bin/hostname) at 24 and 48 ranks on the 3 nodes (8 and 16 per node):
#      `lockstep run` of the example's OCI image and of its SIF against bare `mpirun` of the host's
#      /bin/hostname, so launch cost per rank shows (the ranks of a node share one container).
# Prints mean times and ratios (ours / peer); target <= 1.3x for 1-2, <= 1.2x for 3. Case 3 is
# also run interleaved (one run of each command in turn), which a drifting load can't bias. Prints the load
# averages before and after (the ratios mean little on a loaded machine). Needs root, deb.debian.org
# (the image's packages) and scripts/install-deps.sh bench (hyperfine, Open MPI, Slurm, munge).
# Usage: bench/run-launch.sh [RUNS]   (from the repository root; default 10 runs each)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
runs=${1:-10}
bench_need hyperfine mpirun salloc srun jq python3
/usr/bin/python3 -c 'import mpi4py' 2>/dev/null || { echo "bench: python3-mpi4py is missing on the host" >&2; exit 3; }
bench_lockstep

WORK=$(mktemp -d /tmp/lockstep-bench-launch-XXXXXX)
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
cp examples/mpi-hello/hello.py "$WORK/hello.py"

cluster_up 3 16
slurm_up
mca="--mca plm_rsh_agent $CLUSTER_AGENT --mca btl_tcp_if_include $CLUSTER_SUBNET --mca oob_tcp_if_include $CLUSTER_SUBNET"
largs=""
for w in $mca; do largs+=" --launcher-arg=$w"; done
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
on_head_cmd() { printf '%s head %q' "$CLUSTER_AGENT" "$1"; }

bare_mpirun="mpirun --allow-run-as-root -n 4 --hostfile $CLUSTER_DIR/hostfile --map-by node $mca /usr/bin/python3 $WORK/hello.py"
ours_mpirun="$LOCKSTEP run --quiet --runs-dir $WORK/runs --hostfile $CLUSTER_DIR/hostfile -N 3 -n 4 $largs oci:$WORK/ex/out -- python3 /opt/hello/hello.py"
bare_srun="salloc -Q -N 3 -n 4 srun --mpi=pmix /usr/bin/python3 $WORK/hello.py"
ours_srun="salloc -Q -N 3 -n 4 $LOCKSTEP run --quiet --runs-dir $WORK/runs oci:$WORK/ex/out -- python3 /opt/hello/hello.py"

for c in "$bare_mpirun" "$ours_mpirun" "$bare_srun" "$ours_srun"; do
  out=$(eval "$(on_head_cmd "$c")" 2>&1) || fail "this failed: $c: $out"
  grep -q "allreduce ok: 4 ranks, sum 10" <<<"$out" || fail "wrong result from: $c: $out"
done
# The trivial command at R ranks: bare mpirun, lockstep run of the OCI image, of the SIF.
trivial=()
interleaved=() # NAME COMMAND pairs
for r in 24 48; do
  bare="mpirun --allow-run-as-root -n $r --hostfile $CLUSTER_DIR/hostfile --map-by node $mca /bin/hostname"
  oci="$LOCKSTEP run --quiet --runs-dir $WORK/runs --hostfile $CLUSTER_DIR/hostfile -N 3 -n $r $largs oci:$WORK/ex/out -- /bin/hostname"
  sif="$LOCKSTEP run --quiet --runs-dir $WORK/runs --hostfile $CLUSTER_DIR/hostfile -N 3 -n $r $largs $WORK/ex/out.sif -- /bin/hostname"
  for c in "$bare" "$oci" "$sif"; do
    out=$(eval "$(on_head_cmd "$c")" 2>&1) || fail "this failed: $c: $out"
    [ "$(grep -c '^n[123]$' <<<"$out")" = "$r" ] || fail "not $r host names from: $c: $out"
  done
  interleaved+=("bare mpirun -n $r /bin/hostname (host)" "$(on_head_cmd "$bare") >/dev/null"
    "lockstep run -n $r OCI -- /bin/hostname" "$(on_head_cmd "$oci") >/dev/null"
    "lockstep run -n $r SIF -- /bin/hostname" "$(on_head_cmd "$sif") >/dev/null")
  trivial+=(-n "bare mpirun -n $r /bin/hostname (host)" "$(on_head_cmd "$bare") >/dev/null"
    -n "lockstep run -n $r OCI -- /bin/hostname" "$(on_head_cmd "$oci") >/dev/null"
    -n "lockstep run -n $r SIF -- /bin/hostname" "$(on_head_cmd "$sif") >/dev/null")
done
echo "bench: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

hyperfine --shell=bash --style basic --warmup 1 --runs "$runs" --export-json "$WORK/h.json" \
  -n "bare mpirun (host)" "$(on_head_cmd "$bare_mpirun") >/dev/null" \
  -n "lockstep run --launcher mpirun" "$(on_head_cmd "$ours_mpirun") >/dev/null" \
  -n "bare salloc srun --mpi=pmix (host)" "$(on_head_cmd "$bare_srun") >/dev/null" \
  -n "salloc lockstep run (srun)" "$(on_head_cmd "$ours_srun") >/dev/null" "${trivial[@]}" >&2
echo "bench: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# Each group: the peer first, then ours; the ratio is ours / the group's peer.
jq -r '.results as $r | "| launch | mean s | ratio |\n|---|---|---|",
  (range(0; $r|length) as $i | "| \($r[$i].command) | \($r[$i].mean*1000|round/1000) | \(($r[$i].mean/$r[[0, 0, 2, 2, 4, 4, 4, 7, 7, 7][$i]].mean)*1000|round/1000) |")' "$WORK/h.json"

# The trivial command again, interleaved: one run of each command in turn, RUNS rounds. hyperfine
# runs a command's runs back to back, so a load that drifts over the minute the benchmark takes
# (it climbs as the benchmark runs) favours whichever command comes first; interleaving spreads
# it evenly. Mean and median per command; the ratios are ours / the bare mpirun of the same size.
echo "bench: the trivial command, interleaved ($runs rounds)..." >&2
times="$WORK/interleaved.tsv"
: >"$times"
for ((round = 0; round < runs; round++)); do
  for ((i = 0; i < ${#interleaved[@]}; i += 2)); do
    start=$(date +%s%N)
    eval "${interleaved[i + 1]}" || fail "this failed: ${interleaved[i]}"
    printf '%s\t%s\n' "${interleaved[i]}" "$(($(date +%s%N) - start))" >>"$times"
  done
done
echo "bench: load average after the interleaved runs: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
jq -Rrn --argjson per 3 '
  [inputs | split("\t") | {name: .[0], ns: (.[1] | tonumber)}]
  | reduce .[] as $x ({order: [], t: {}}; (if .t[$x.name] then . else .order += [$x.name] end) | .t[$x.name] += [$x.ns])
  | .order as $o | .t as $t
  | def mean: add / length; def median: sort | .[length / 2 | floor];
    "| interleaved | mean s | median s | ratio (mean) | ratio (median) |\n|---|---|---|---|---|",
    (range(0; $o | length) as $i | ($o[$i - ($i % $per)]) as $peer
     | "| \($o[$i]) | \($t[$o[$i]] | mean / 1e9 * 1000 | round / 1000) | \($t[$o[$i]] | median / 1e9 * 1000 | round / 1000) | \(($t[$o[$i]] | mean) / ($t[$peer] | mean) * 1000 | round / 1000) | \(($t[$o[$i]] | median) / ($t[$peer] | median) * 1000 | round / 1000) |")' <"$times"
