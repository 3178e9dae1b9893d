#!/usr/bin/env bash
# `lockstep run` on a simulated cluster (docs/launch.md): three network-namespace nodes reached
# through an rsh agent, and real Slurm (munged, slurmctld, slurmd per node) started by the suite.
#   - mpirun (hybrid): examples/mpi-hello's image, OCI and SIF, 4 ranks on n1..n3: the allreduce is
#     right, the ranks report three distinct hosts, and the run record names them all;
#   - the ranks of one node share one container (one mount namespace), under mpirun and srun, and
#     its holder leaves with the job;
#   - preflight: a node without the image, a node with an old (faked) NVIDIA driver and a node with
#     another host Open MPI each stop the launch with exit 1 and a table naming them, no rank started;
#   - teardown: a failing rank ends the job and names its rank and node; SIGINT stops every rank;
#     no process and no mount is left behind;
#   - Slurm: lockstep run inside salloc and inside an sbatch script (--emit sbatch) uses
#     srun --mpi=pmix and gets the right result.
# Needs deb.debian.org for the example's packages (exit 77 without it, except in CI).
source "$(dirname "$0")/lib.sh"
source "$LOCKSTEP_SOURCE_DIR/tests/cli/cluster.sh"
need jq mpirun srun salloc sbatch munged slurmctld slurmd nsenter unshare ip curl gpg dpkg-deb python3 xz

if ! curl -fsS --max-time 20 -o /dev/null http://deb.debian.org/debian/dists/bookworm/InRelease 2>/dev/null; then
  [ -z "${CI:-}" ] || fail "deb.debian.org is not reachable"
  echo "SKIP: deb.debian.org is not reachable" >&2
  exit 77
fi

# ---- the images ----------------------------------------------------------------------------------
# examples/mpi-hello as the mpi_hello fixture built it this run (OCI layout and SIF).
mpi_hello_fixture ex
digest=$MPI_HELLO_DIGEST
IMG="oci:$WORK/ex/out"
SIF="$WORK/ex/out.sif"

# Bad command lines: exit 2 and a message saying what to write.
bad_run() { # MESSAGE ARGS...
  local msg=$1
  shift
  ls_run run "$@"
  assert_eq 2 "$RC" "lockstep run $*: $ERR"
  assert_contains "$ERR" "$msg" "lockstep run $*"
}
bad_run "unknown --pmi 'pmi3': use pmix or pmi2" --pmi pmi3 "$IMG" -- true
bad_run "--env 'NOEQ': NOEQ is not set here; give --env NAME=VALUE, or export NOEQ first" --env NOEQ "$IMG" -- true
bad_run "unknown --emit 'slurm': use --emit sbatch FILE" --emit slurm job.sh "$IMG" -- true
bad_run "--job 'a/b' must be a plain directory name" --job a/b "$IMG" -- true
bad_run "unknown --launcher 'pbs': use local, mpirun or slurm" --launcher pbs "$IMG" -- true
printf 'n1 slots=2\nn2 cpus=2\n' >badhosts
bad_run "badhosts:2: unknown hostfile field 'cpus=2' (write HOST slots=N)" --hostfile badhosts "$IMG" -- true
bad_run "-N 2 needs more than this node: give --hostfile (mpirun) or run inside a Slurm allocation" \
  --launcher local -N 2 "$IMG" -- true
pass "bad lockstep run command lines exit 2 with what to write instead"

# One binary: lockstep copied alone still starts its ranks through itself (`lockstep _rank`), so
# the ranks of a node share its container; no slow path to fall into, nothing to warn about.
mkdir -p solo
cp "$LOCKSTEP" solo/lockstep
set +e
solo_out=$(solo/lockstep run --dry-run --launcher mpirun -n 2 "$IMG" -- true 2>solo.err)
set -e
assert_contains "$solo_out" "$WORK/solo/lockstep _rank --report" "the ranks run lockstep itself"
case "$(cat solo.err)" in *"container of its own"*) fail "warned of the slow path: $(cat solo.err)" ;; esac
pass "lockstep copied alone runs its ranks as lockstep _rank (one binary, the fast path kept)"

# mpirun's relay (docs/launch.md, "Preflight") fails as ssh does: 255, saying why.
set +e
ERR=$("$LOCKSTEP" rsh-relay 2>&1 >/dev/null)
RC=$?
set -e
assert_eq 255 "$RC" "rsh-relay without arguments"
assert_contains "$ERR" "usage: lockstep rsh-relay RUN_DIR K AGENT_1..AGENT_K HOST COMMAND..." "rsh-relay usage"
set +e
ERR=$("$LOCKSTEP" rsh-relay "$WORK/no-run" 1 "$WORK/no-such-agent" n1 true 2>&1 >/dev/null)
RC=$?
set -e
assert_eq 255 "$RC" "rsh-relay with an agent that does not exist"
assert_contains "$ERR" "lockstep rsh-relay: can't run the rsh agent $WORK/no-such-agent: No such file or directory" \
  "rsh-relay names the agent it can't run"
pass "lockstep rsh-relay fails as ssh does (exit 255), with its usage or the agent it can't run"

cluster_up 3
# mpirun's transport on the cluster: the agent, and TCP only on the cluster's subnet.
MPI_ARGS=(--launcher-arg=--mca --launcher-arg=plm_rsh_agent "--launcher-arg=$CLUSTER_AGENT"
  --launcher-arg=--mca --launcher-arg=btl_tcp_if_include "--launcher-arg=$CLUSTER_SUBNET"
  --launcher-arg=--mca --launcher-arg=oob_tcp_if_include "--launcher-arg=$CLUSTER_SUBNET")
RUNS="$WORK/runs"

# Runs lockstep on the head node (the login node), capturing OUT, ERR and RC.
head_run() {
  set +e
  OUT=$(on_head "$LOCKSTEP" "$@" 2>"$WORK/.stderr")
  RC=$?
  set -e
  ERR=$(cat "$WORK/.stderr")
}
record() { # JOB
  cat "$RUNS/$1/record.json"
}
# The host's mounts, without the per-suite noise, to compare before and after.
# The host's mount points, less those of other suites running beside this one (their own work dirs).
# (Other suites' temporary directories and network namespaces come and go while this one runs.)
mounts() {
  awk -v own="$WORK" -v ns="/run/netns/$CLUSTER_PREFIX-" '{ m = $5 }
    (index(m, "/tmp/lockstep-cli-") != 1 || index(m, own) == 1) &&
    (index(m, "/run/netns/") != 1 || index(m, ns) == 1) { print m }' /proc/self/mountinfo | sort
}
mounts_before=$(mounts)

# ---- mpirun across three nodes -------------------------------------------------------------------
# Every entry of the agent into a node is counted: the preflight rides on mpirun's call.
for n in n1 n2 n3; do
  printf 'echo entered >>%s\n' "$WORK/entered-$n" >"$CLUSTER_DIR/node-$n.sh"
done
head_run run --runs-dir "$RUNS" --job oci-4 --hostfile "$CLUSTER_DIR/hostfile" -N 3 -n 4 "${MPI_ARGS[@]}" \
  "$IMG" -- python3 /opt/hello/hello.py
rm -f "$CLUSTER_DIR"/node-n[123].sh
assert_eq 0 "$RC" "lockstep run --launcher mpirun: $OUT $ERR"
assert_eq 4 "$(grep -c '^hello from rank' <<<"$OUT")" "four ranks said hello"
assert_contains "$OUT" "allreduce ok: 4 ranks, sum 10" "allreduce over 4 ranks across 3 nodes"
hosts=$(grep -o 'on n[0-9]*:' <<<"$OUT" | sort -u | tr -d ':' | tr '\n' ' ')
assert_eq "on n1 on n2 on n3 " "$hosts" "the ranks ran on three distinct hosts"
pass "lockstep run -N 3 -n 4 (mpirun, hybrid) runs mpi-hello on n1, n2 and n3"

for n in n1 n2 n3; do
  assert_eq 1 "$(wc -l <"$WORK/entered-$n")" "agent calls into $n (mpirun's daemon and the preflight in one)"
done
pass "one agent call per node: the preflight rides on the call that starts mpirun's daemon"

# The launching node in the hostfile: mpirun starts no daemon there, so its preflight comes directly.
printf 'head slots=2\nn1 slots=2\n' >"$WORK/with-head"
head_run run --runs-dir "$RUNS" --job with-head --hostfile "$WORK/with-head" -N 2 -n 4 "${MPI_ARGS[@]}" \
  "$IMG" -- /bin/hostname
assert_eq 0 "$RC" "lockstep run with the launching node in the hostfile: $ERR"
assert_eq "head head n1 n1 " "$(sort <<<"$OUT" | tr '\n' ' ')" "two ranks on head, two on n1"
assert_eq '["head","n1"]' "$(jq -c '[.preflight.nodes[].node]' <<<"$(record with-head)")" "both nodes checked"
pass "with the launching node in the hostfile, it is checked directly and the others through mpirun's calls"

rec=$(record oci-4)
assert_eq "$digest" "$(jq -r .image.digest <<<"$rec")" "the record's image digest"
assert_eq "mpirun hybrid 4" "$(jq -r '"\(.launcher) \(.model) \(.ranks)"' <<<"$rec")" "launcher, model, ranks"
assert_eq '["n1","n2","n3"]' "$(jq -c .nodes <<<"$rec")" "the record's nodes"
assert_eq "0 0 0 0" "$(jq -r '[.rank_exits[].exit_code] | map(tostring) | join(" ")' <<<"$rec")" "per-rank exits"
assert_eq 3 "$(jq '.preflight.nodes | length' <<<"$rec")" "preflight reports of 3 nodes"
assert_eq "openmpi 4.1.4" "$(jq -r '"\(.image.facts.mpi.impl) \(.image.facts.mpi.version)"' <<<"$rec")" \
  "the image's MPI facts"
jq -e '.image.lock_digest | startswith("sha256:")' <<<"$rec" >/dev/null || fail "no lock digest in the record"
jq -e '.launch[0] == "mpirun" and (.start < .end) and .exit_code == 0' <<<"$rec" >/dev/null ||
  fail "the record lacks the launch command or times: $rec"
pass "the run record has the image and lock digests, facts, nodes, commands and per-rank exits"

head_run run --runs-dir "$RUNS" --job sif-2 --hostfile "$CLUSTER_DIR/hostfile" -N 2 "${MPI_ARGS[@]}" \
  --ranks-per-node 1 "$SIF" -- python3 /opt/hello/hello.py
assert_eq 0 "$RC" "lockstep run of the SIF: $OUT $ERR"
assert_contains "$OUT" "allreduce ok: 2 ranks, sum 3" "allreduce over 2 ranks from the SIF"
assert_eq "n1 n2" "$(record sif-2 | jq -r '.nodes | join(" ")')" "the SIF job's nodes"
pass "the SIF runs the same way (--ranks-per-node 1 on 2 nodes)"

# ---- ranks on one node share one container -------------------------------------------------------
# Each rank prints its node and its container's mount namespace, and stays a moment, so the ranks of
# a node overlap: containers of their own would have distinct namespaces.
# shellcheck disable=SC2016 # expanded by the ranks' shell
ns_cmd='echo "ns $(hostname) $(readlink /proc/self/ns/mnt)"; sleep 0.5'
# "NODE NAMESPACES" per node: how many distinct containers the ranks of each node ran in.
containers_per_node() {
  grep '^ns ' | sort -u | awk '{ print $2 }' | uniq -c | awk '{ print $2, $1 }' | tr '\n' ' '
}
# A holder is `lockstep exec --hold-listen ...` (started by a rank) or a child of `lockstep preflight
# --hold-cwd ...` (started by preflight under mpirun).
holders_gone() {
  for _ in $(seq 50); do
    pgrep -f -- "--hold-(listen|cwd) .*$RUNS/" >/dev/null || return 0
    sleep 0.1
  done
  fail "a container holder outlived its job: $(pgrep -af -- "--hold-(listen|cwd) .*$RUNS/")"
}
for kind in oci sif; do
  image=$IMG
  [ "$kind" = oci ] || image=$SIF
  head_run run --runs-dir "$RUNS" --job "share-$kind" --hostfile "$CLUSTER_DIR/hostfile" -N 3 -n 6 \
    "${MPI_ARGS[@]}" "$image" -- sh -c "$ns_cmd"
  assert_eq 0 "$RC" "6 ranks of $image: $OUT $ERR"
  assert_eq 6 "$(grep -c '^ns n' <<<"$OUT")" "six ranks of $image reported"
  assert_eq "n1 1 n2 1 n3 1 " "$(containers_per_node <<<"$OUT")" "one container per node for $image: $OUT"
  assert_eq 6 "$(record "share-$kind" | jq '.rank_exits | length')" "six rank reports for $image"
  holders_gone
done
pass "two ranks per node share one container (OCI and SIF); the holders leave with the job"

# A node that can't be reached is a failed preflight, not a hang.
printf 'n1 slots=1\nn9 slots=1\n' >hosts-n9
head_run run --runs-dir "$RUNS" --job unreachable --hostfile "$WORK/hosts-n9" "${MPI_ARGS[@]}" "$IMG" -- true
assert_eq 1 "$RC" "an unreachable node: $ERR"
# mpirun gives up on the whole launch when n9 fails, which can cut n1's call before n1 reports:
# lockstep tells that tear-down from a failure (n1 is then "not checked", a warning), so n9 alone is
# named, whichever came first.
assert_contains "$ERR" "preflight failed on n9 (reach): no rank was started" "an unreachable node: the message"
assert_contains "$ERR" "n9  reach: \`lockstep preflight\` didn't report (exit 255)" "an unreachable node: the detail"
n1_reach=$(record unreachable | jq -r '.preflight.nodes[] | select(.node == "n1") | .checks[] | select(.name == "reach") | "\(.status) \(.detail)"')
case "$n1_reach" in
"" | "warn not checked: mpirun stopped its launch when n9 failed") ;;
*) fail "an unreachable node: n1's reach check is [$n1_reach]" ;;
esac
# mpirun started with the preflight and failed to reach n9 too; its complaint is not shown.
case "$ERR" in *ORTE*) fail "an unreachable node: mpirun's own complaint shows: $ERR" ;; esac
pass "a node the agent can't reach fails preflight (reach), naming it"

# A rank whose node's preflight never opens the gate runs nothing: it fails after its wait, saying why,
# and its rank report says so.
mkdir -p "$WORK/gate-ranks"
set +e
GATE_ERR=$("$(dirname "$LOCKSTEP")/lockstep-rank" --report "$WORK/gate-ranks" --gate 1 -- "$LOCKSTEP" exec \
  "$IMG" -- sh -c "touch $WORK/gate-ran" 2>&1 >/dev/null)
GATE_RC=$?
set -e
assert_eq 3 "$GATE_RC" "a rank at a gate nobody keeps: $GATE_ERR"
assert_contains "$GATE_ERR" "lockstep: error: not started: no preflight kept this node's gate within 1 s" \
  "a rank at a gate nobody keeps: the message"
[ ! -e "$WORK/gate-ran" ] || fail "a rank at a gate nobody keeps ran its command"
assert_contains "$(cat "$WORK"/gate-ranks/rank-*.json)" "not started: no preflight kept this node's gate" \
  "a rank at a gate nobody keeps: its report"
pass "a rank whose node's preflight never opens the gate runs nothing and says why (exit 3, rank report)"

# ---- preflight failures --------------------------------------------------------------------------
fixture_repo make-repo.sh repo --with-mpi-facts >/dev/null 2>&1 ||
  fail "make-repo.sh --with-mpi-facts failed"
start_http_server "$WORK/repo"
mkdir cu
cp repo/keyring.gpg cu/ # a keyring lies in the spec's directory (or the system's keyring directories)
cat >cu/lockstep.yaml <<YAML
lockstep: 1
name: cudafacts
repos:
  - {apt: $HTTP_URL, suite: lstest, components: [main], keyring: keyring.gpg}
packages:
  apt: [openmpi-bin, libopenmpi3=4.1.4-3+b1, cuda-cudart-12-1]
outputs: {oci: out}
YAML
ls_run build cu/lockstep.yaml
assert_eq 0 "$RC" "build of the CUDA-facts image: $ERR"
CU="oci:$WORK/cu/out"

# A fake NVIDIA driver tree: /proc/driver/nvidia/version and one GPU.
fake_gpu_root() { # DIR DRIVER
  mkdir -p "$1/proc/driver/nvidia/gpus/0000:3b:00.0" "$1/dev"
  printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Thu Jan 1 00:00:00 UTC 2026\nGCC version:  gcc 12\n' "$2" \
    >"$1/proc/driver/nvidia/version"
  printf 'Model: \t\t Fake GPU\nBus Location: \t 0000:3b:00.0\nDevice Minor: \t 0\n' \
    >"$1/proc/driver/nvidia/gpus/0000:3b:00.0/information"
  touch "$1/dev/nvidia0" "$1/dev/nvidiactl"
}
fake_gpu_root gpu-new 535.104.05
fake_gpu_root gpu-old 470.57.02
mkdir -p fakempi empty
printf '#!/bin/sh\necho "mpirun (Open MPI) 5.0.3"\n' >fakempi/mpirun
chmod +x fakempi/mpirun
hooks() { # N1 N2 N3 (hook bodies)
  printf '%s\n' "$1" >"$CLUSTER_DIR/node-n1.sh"
  printf '%s\n' "$2" >"$CLUSTER_DIR/node-n2.sh"
  printf '%s\n' "$3" >"$CLUSTER_DIR/node-n3.sh"
}
GOOD="export LOCKSTEP_GPU_HOST_ROOT=$WORK/gpu-new"
preflight_fails() { # JOB WHAT...
  local job=$1
  shift
  head_run run --runs-dir "$RUNS" --job "$job" --hostfile "$CLUSTER_DIR/hostfile" -N 3 -n 3 --gpus-per-node 1 \
    --no-stage "${MPI_ARGS[@]}" "$CU" -- sh -c "touch $WORK/ran-$job-\$OMPI_COMM_WORLD_RANK"
  assert_eq 1 "$RC" "$job: preflight must fail: $OUT $ERR"
  [ ! -e "$RUNS/$job/ranks" ] || [ -z "$(ls "$RUNS/$job/ranks")" ] || fail "$job: a rank started"
  ! ls "$WORK/ran-$job-"* >/dev/null 2>&1 || fail "$job: a rank ran the command: $(ls "$WORK/ran-$job-"*)"
  [ "$(record "$job" | jq -r .outcome)" = "preflight failed" ] || fail "$job: record outcome"
  # mpirun started with the preflight; every rank waited at its node's gate and was told to stop.
  [ "$(record "$job" | jq -r .preflight.gate)" = stop ] || fail "$job: the nodes were not told to stop"
  grep -Eq '^NODE +image +driver +gpus +mpi +pmix +userns +space$' <<<"$ERR" || fail "$job: no table header: $ERR"
}

hooks "mount --bind $WORK/empty $WORK/cu; $GOOD" "$GOOD" "$GOOD"
preflight_fails missing
assert_contains "$ERR" "preflight failed on n1 (image): no rank was started" "missing image: the message"
assert_contains "$ERR" "n1  image: missing" "missing image: the detail line"
pass "a node without the image stops the launch when staging is off (exit 1, table, no rank)"

hooks "$GOOD" "$GOOD" "export LOCKSTEP_GPU_HOST_ROOT=$WORK/gpu-old"
preflight_fails old-driver
assert_contains "$ERR" "preflight failed on n3 (driver): no rank was started" "old driver: the message"
assert_contains "$ERR" "n3  driver: " "old driver: the detail line"
assert_contains "$ERR" "470.57.02" "old driver: the driver version is named"
pass "a node with an NVIDIA driver older than the image's CUDA floor stops the launch"

hooks "$GOOD" "$GOOD; export PATH=$WORK/fakempi:\$PATH" "$GOOD"
preflight_fails mpi-mismatch
assert_contains "$ERR" "preflight failed on n2 (mpi): no rank was started" "MPI mismatch: the message"
assert_contains "$ERR" "Open MPI 5.0.3" "MPI mismatch: the host's version is named"
pass "a node whose host Open MPI differs from the image's stops the launch"

hooks "mount --bind $WORK/empty $WORK/cu; $GOOD" "$GOOD; export PATH=$WORK/fakempi:\$PATH" \
  "export LOCKSTEP_GPU_HOST_ROOT=$WORK/gpu-old"
preflight_fails all-three
assert_contains "$ERR" "preflight failed on n1 (image), n2 (mpi), n3 (driver)" "all three nodes named"
pass "three failing nodes are named together in one table"
hooks "" "" ""

# ---- teardown --------------------------------------------------------------------------------------
marker="lsmark$$"
# Rank 2 fails at once; the others would sleep for a minute.
head_run run --runs-dir "$RUNS" --job fail --hostfile "$CLUSTER_DIR/hostfile" -N 3 -n 4 "${MPI_ARGS[@]}" "$IMG" -- \
  python3 -c "import os, sys, time; r = int(os.environ['OMPI_COMM_WORLD_RANK']); time.sleep(0.5 if r == 2 else 60); sys.exit(3 if r == 2 else 0)" "$marker"
assert_eq 3 "$RC" "a failing rank's status is the job's: $ERR"
assert_contains "$ERR" "rank 2 on n3 exited with status 3" "the failing rank and node are named"
assert_eq "2 n3 3" "$(record fail | jq -r '"\(.failure.rank) \(.failure.node) \(.failure.exit_code)"')" "record .failure"
# lockstep run returns once mpirun has; the ranks' processes may take a moment more to be reaped.
for _ in $(seq 100); do
  pgrep -f "$marker" >/dev/null || break
  sleep 0.1
done
! pgrep -f "$marker" >/dev/null || fail "ranks of the failed job are still running: $(pgrep -af "$marker")"
pass "a failing rank tears the job down; the status names rank 2 on n3; no rank is left"

# With a --env secret (--env TOKEN: the value from lockstep run's environment): every rank checks it
# has the value (its reverse is on its command line), and no process on any node shows the value on
# its command line (ps), only in its environment.
secret="tok-$RANDOM$RANDOM-s3cret"
export TOKEN=$secret
reversed=$(python3 -c 'import sys; print(sys.argv[1][::-1])' "$secret")
rank_py="import os, time; assert os.environ['TOKEN'][::-1] == '$reversed'; time.sleep(120)"
(on_head "$LOCKSTEP" run --runs-dir "$RUNS" --job intr --hostfile "$CLUSTER_DIR/hostfile" -N 3 -n 4 \
  --env TOKEN "${MPI_ARGS[@]}" "$IMG" -- python3 -c "$rank_py" "$marker" >/dev/null 2>&1) &
intr_pid=$!
unset TOKEN
for _ in $(seq 100); do
  [ "$(pgrep -fc "^python3 -c import os, time; .* $marker")" -ge 4 ] && break
  sleep 0.1
done
[ "$(pgrep -fc "^python3 -c import os, time; .* $marker")" -ge 4 ] || fail "the 4 ranks didn't start (or lacked TOKEN)"
! pgrep -af -- "$secret" >/dev/null || fail "a --env value is on a command line: $(pgrep -af -- "$secret")"
runpid=$(pgrep -f "lockstep run --runs-dir $RUNS --job intr" | head -n 1)
kill -INT "$runpid"
for _ in $(seq 100); do
  pgrep -f "$marker" >/dev/null || break
  sleep 0.1
done
! pgrep -f "$marker" >/dev/null || fail "SIGINT left ranks running: $(pgrep -af "$marker")"
wait "$intr_pid" || true
[ "$(record intr | jq -r .exit_code)" != 0 ] || fail "an interrupted job recorded success"
pass "SIGINT to lockstep run stops all 4 ranks on 3 nodes; their --env value was on no command line"
assert_eq "$mounts_before" "$(mounts)" "the host's mount table after the jobs"
for n in $CLUSTER_NODES; do
  [ -z "$(ip netns pids "$CLUSTER_PREFIX-$n")" ] || fail "processes left on $n: $(ip netns pids "$CLUSTER_PREFIX-$n")"
done
pass "no process is left on any node and no mount on the host"

# ---- Slurm -------------------------------------------------------------------------------------------
slurm_up
head_run run --dry-run --launcher slurm "$IMG" -- true
assert_eq 2 "$RC" "--launcher slurm outside an allocation is a usage error"
on_head salloc -N 3 -n 4 "$LOCKSTEP" run --runs-dir "$RUNS" --job salloc "$IMG" -- python3 /opt/hello/hello.py \
  >salloc.out 2>salloc.err || fail "lockstep run inside salloc: $(cat salloc.out salloc.err)"
assert_contains "$(cat salloc.out)" "allreduce ok: 4 ranks, sum 10" "allreduce under srun"
assert_eq "on n1 on n2 on n3 " "$(grep -o 'on n[0-9]*:' salloc.out | sort -u | tr -d ':' | tr '\n' ' ')" \
  "srun placed the ranks on three hosts"
jq -e '.launcher == "slurm" and .pmi == "pmix" and (.launch | index("--mpi=pmix") != null)' \
  "$RUNS"/salloc/record.json >/dev/null || fail "the salloc record: $(cat "$RUNS"/salloc/record.json)"
pass "lockstep run inside salloc uses srun --mpi=pmix: 4 ranks, 3 nodes, right allreduce"

on_head salloc -N 3 -n 6 "$LOCKSTEP" run --runs-dir "$RUNS" --job salloc-share "$SIF" -- sh -c "$ns_cmd" \
  >share.out 2>share.err || fail "6 ranks inside salloc: $(cat share.out share.err)"
assert_eq "n1 1 n2 1 n3 1 " "$(containers_per_node <share.out)" "one container per node under srun: $(cat share.out)"
holders_gone
pass "under srun too, the ranks of a node share one container"

head_run run -N 3 -n 4 --runs-dir "$RUNS" --job sbatch --emit sbatch "$WORK/job.sh" "$IMG" -- python3 /opt/hello/hello.py
assert_eq 0 "$RC" "--emit sbatch: $ERR"
grep -q '^#SBATCH --nodes=3$' job.sh || fail "job.sh lacks #SBATCH --nodes=3: $(cat job.sh)"
jobid=$(on_head sbatch --parsable --output="$WORK/sbatch.out" "$WORK/job.sh") || fail "sbatch failed"
slurm_wait_job "$jobid" 90 >/dev/null || fail "the batch job failed: $(cat sbatch.out)"
assert_contains "$(cat sbatch.out)" "allreduce ok: 4 ranks, sum 10" "allreduce in the batch job"
jq -e '.launcher == "slurm" and .exit_code == 0 and (.rank_exits | length == 4)' "$RUNS"/sbatch/record.json \
  >/dev/null || fail "the sbatch record"
pass "the script from --emit sbatch runs the job through sbatch with srun --mpi=pmix"

done_testing
