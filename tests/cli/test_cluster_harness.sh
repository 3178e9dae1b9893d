#!/usr/bin/env bash
# The simulated cluster of tests/cli/cluster.sh, judged by the host's own Open MPI and Slurm (no
# lockstep involved): mpirun through the rsh agent spreads ranks over the nodes, which talk over the
# bridge; Slurm schedules srun and sbatch steps on every node; a per-node hook changes one node only;
# and cluster_down leaves no namespace or process behind.
source "$(dirname "$0")/lib.sh"
# shellcheck source=cluster.sh
source "$LOCKSTEP_SOURCE_DIR/tests/cli/cluster.sh"
need mpicc mpirun

cluster_up 3
assert_eq "n1 n2 n3" "$CLUSTER_NODES" "CLUSTER_NODES"
assert_eq "$(printf 'n1 slots=2\nn2 slots=2\nn3 slots=2')" "$(cat "$CLUSTER_DIR/hostfile")" "the hostfile"
prefix=$CLUSTER_PREFIX
namespaces=$(ip netns list | awk '{print $1}' | grep "^$prefix-" | sed "s/^$prefix-//" | sort | xargs)
assert_eq "head n1 n2 n3 sw" "$namespaces" "the cluster's network namespaces"
# shellcheck disable=SC2016 # expanded on n2
on_n2=$(on_node n2 sh -c 'echo "$(hostname) $(ip -4 -o addr show dev eth0)"' | awk '{print $1, $5}')
assert_eq "n2 10.78.0.12/24" "$on_n2" "hostname and address on n2"
assert_eq "10.78.0.13" "$(on_node n1 getent hosts n3 | awk '{print $1}')" "n1 resolves n3"
pass "cluster_up 3 makes head, n1..n3 with their own hostnames, addresses and hosts files"

# A per-node hook: a variable and a mount on n2 only, written before anything enters the nodes.
mkdir -p "$WORK/data" "$WORK/empty"
touch "$WORK/data/present"
cat >"$CLUSTER_DIR/node-n2.sh" <<EOF
export HOOK_MARK=set-on-n2
mount --bind "$WORK/empty" "$WORK/data"
EOF

cat >hello.c <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
  char host[256] = "";
  int rank = 0, size = 0, sum = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  gethostname(host, sizeof host - 1);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d/%d on %s sum %d\n", rank, size, host, sum);
  MPI_Finalize();
  return 0;
}
EOF
mpicc -o hello hello.c || fail "mpicc can't build hello.c"

# Runs CMD on head: its stdout in OUT, its stderr in $WORK/err (Open MPI prints harmless warnings
# there); fails with both, saying WHAT, if CMD fails.
head_ok() { # WHAT CMD...
  local what=$1
  shift
  OUT=$(on_head "$@" 2>"$WORK/err") || fail "$what: $OUT $(cat "$WORK/err")"
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --hostfile "$CLUSTER_DIR/hostfile" --map-by node --mca plm_rsh_agent "$CLUSTER_AGENT"
  --mca btl_tcp_if_include "$CLUSTER_SUBNET" --mca oob_tcp_if_include "$CLUSTER_SUBNET")
head_ok "mpirun -np 4 across the cluster" "${mpi[@]}" -np 4 "$WORK/hello"
assert_eq 4 "$(grep -c '^rank [0-3]/4 on n[1-3] sum 6$' <<<"$OUT")" "ranks reporting an allreduce of 6: $OUT"
assert_eq "n1 n2 n3" "$(awk '{print $4}' <<<"$OUT" | sort -u | xargs)" "the ranks' hostnames"
pass "mpirun on head starts 4 ranks on 3 nodes through the agent; their allreduce crosses the bridge"

# A routing tree of radix 1 makes each orted start the next one: the agent works inside nodes too.
head_ok "mpirun with tree spawn" "${mpi[@]}" --mca routed_radix 1 -np 3 "$WORK/hello"
assert_eq "n1 n2 n3" "$(awk '/ sum 3$/ {print $4}' <<<"$OUT" | sort | xargs)" "tree-spawned ranks: $OUT"
pass "orteds inside the nodes launch further orteds through the agent (tree spawn)"

# shellcheck disable=SC2016 # expanded by the ranks
head_ok "mpirun of the hook probe" "${mpi[@]}" -np 3 \
  sh -c 'echo "$(hostname) ${HOOK_MARK:-unset} $(ls "$1")"' sh "$WORK/data"
seen=$(sort <<<"$OUT" | sed 's/ *$//' | paste -sd'|')
assert_eq "n1 unset present|n2 set-on-n2|n3 unset present" "$seen" "what each node sees"
# shellcheck disable=SC2016 # expanded on n2
assert_eq "set-on-n2" "$(on_node n2 sh -c 'echo $HOOK_MARK')" "the hook through on_node"
pass "node-n2.sh exports a variable and hides a directory on n2 only"

slurm_up
assert_eq "$CLUSTER_DIR/slurm/etc/slurm.conf" "$SLURM_CONF" "SLURM_CONF"
head_ok "srun -N3 -n3 hostname" srun --mpi=pmix -N3 -n3 hostname
assert_eq "n1 n2 n3" "$(sort <<<"$OUT" | xargs)" "srun -N3 -n3 hostname"
head_ok "srun --mpi=pmix -N3 -n4 hello" srun --mpi=pmix --kill-on-bad-exit=1 -N3 -n4 "$WORK/hello"
assert_eq 4 "$(grep -c '^rank [0-3]/4 on n[1-3] sum 6$' <<<"$OUT")" "PMIx-wired ranks under srun: $OUT"
pass "srun --mpi=pmix runs on every node, and MPI ranks wire up through PMIx"

cat >job.sh <<'EOF'
#!/bin/sh
echo "batch on $(hostname)"
srun hostname | sort
EOF
head_ok sbatch sbatch --parsable -N3 -n3 -o "$WORK/job-%j.out" -e "$WORK/job-%j.err" "$WORK/job.sh"
jobid=${OUT%%;*}
state=$(slurm_wait_job "$jobid" 60) || fail "job $jobid ended $state: $(cat "$WORK/job-$jobid".* 2>/dev/null)"
assert_eq "$(printf 'batch on n1\nn1\nn2\nn3')" "$(cat "$WORK/job-$jobid.out")" "the batch job's output"
pass "an sbatch job runs its steps on all three nodes and writes its output file"

head_ok "srun -w n2 ls" srun -w n2 ls "$WORK/data"
assert_eq "" "$OUT" "the hidden directory as a Slurm task on n2 sees it"
head_ok "srun -w n3 ls" srun -w n3 ls "$WORK/data"
assert_eq "present" "$OUT" "the directory as a Slurm task on n3 sees it"
pass "a hook's mount on n2 reaches Slurm tasks there (slurmd was started through the agent)"

# Everything that runs in the cluster's namespaces now, and the daemons' pid files.
running=$(for ns in head n1 n2 n3 sw; do ip netns pids "$prefix-$ns"; done | xargs)
daemons=$(cat "$CLUSTER_DIR"/slurm/run/*.pid | xargs)
assert_eq 5 "$(wc -w <<<"$daemons")" "pid files of munged, slurmctld and three slurmd"
for pid in $daemons; do
  assert_contains " $running " " $pid " "daemon $pid runs inside the cluster's namespaces"
done
cluster_down
cluster_down # idempotent
namespaces=$(ip netns list | awk '{print $1}' | grep "^$prefix-" || true)
assert_eq "" "$namespaces" "namespaces left after cluster_down"
for pid in $running; do
  if cluster_pid_running "$pid"; then
    fail "process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline")) outlived cluster_down"
  fi
done
assert_eq "" "$(pgrep -f -- "$CLUSTER_DIR" || true)" "processes mentioning $CLUSTER_DIR"
[ -z "${SLURM_CONF:-}" ] || fail "SLURM_CONF is still set after cluster_down"
pass "cluster_down stops Slurm and munge, and leaves no namespace and no process"

done_testing
