# shellcheck shell=bash
# A simulated cluster for the CLI suites (sourced after lib.sh): network namespaces for a switch, a
# head node and nodes n1..nN, an ssh stand-in to reach them, and optionally Slurm on top. Needs
# root, iproute2 and util-linux; Slurm also needs munge, slurmctld, slurmd and slurm-client
# (scripts/install-deps.sh installs all of them). Nothing outside the suite's $WORK is written: no
# /etc, no /run/munge; the root network namespace is not touched.
#
#   cluster_up N [SLOTS]   namespaces PREFIX-sw (bridge br0), PREFIX-head (10.78.0.10, "head") and
#                          PREFIX-nK (10.78.0.(10+K), "nK"), K = 1..N (N <= 64). Writes
#                          $CLUSTER_DIR/hosts-HOST (each node's /etc/hosts) and $CLUSTER_DIR/hostfile
#                          (Open MPI: "nK slots=SLOTS", SLOTS defaults to 2), and sets
#                            CLUSTER_DIR     $WORK/cluster
#                            CLUSTER_PREFIX  the namespace prefix (ls<pid>, unique on the machine)
#                            CLUSTER_NODES   "n1 n2 ... nN"
#                            CLUSTER_AGENT   $CLUSTER_DIR/node-rsh, the rsh agent (plm_rsh_agent)
#                            CLUSTER_SUBNET  10.78.0.0/24 (for btl/oob_tcp_if_include)
#                          and arranges for cluster_down to run when the suite exits, however it exits.
#   cluster_down           stops Slurm (slurm_down), kills what still runs in the cluster's
#                          namespaces and deletes them (with their veths and the bridge). Idempotent.
#   on_node HOST CMD...    runs CMD (argv, quoted for the remote shell) on HOST through the agent,
#                          like `ssh HOST CMD`; for a pipeline use `on_node n1 sh -c '...'`.
#   on_head CMD...         on_node head: where mpirun, srun, sbatch, salloc and sinfo must run.
#   slurm_up               after cluster_up: munged, slurmctld on head and `slurmd -N nK` on every
#                          node (started through the agent, so each has its node's hostname and
#                          network), CPUs=SLOTS per node, one partition "debug"; returns when sinfo
#                          shows every node idle. Exports SLURM_CONF ($CLUSTER_DIR/slurm/etc/slurm.conf)
#                          and PMIX_MCA_gds=hash (see slurm_up).
#   slurm_wait_job ID [S]  waits (S seconds, default 60) until job ID has ended; prints its final
#                          state and succeeds only for COMPLETED (faster than `sbatch --wait`).
#   slurm_down             stops slurmd, slurmctld and munged (by pid file), waits for them, and wipes
#                          Slurm's state. Idempotent; cluster_down calls it.
#   cluster_pid_running PID  whether PID runs (kill -0 is also true for a zombie, and this machine's
#                          PID 1 reaps the daemons' zombies slowly).
#
# Per-node hooks: $CLUSTER_DIR/node-HOST.sh, if present, is sourced (POSIX sh) by the agent on HOST,
# inside the command's own mount namespace, before the command: export a variable, put a fake
# directory first in PATH, or `mount --bind` an empty directory over a path, on that node only.
# Hooks act when the agent enters the node: for mpirun that is every orted launch; for Slurm it is
# slurmd's start, so write hooks before slurm_up. Slurm tasks get their environment from srun, not
# from slurmd, so under Slurm a hook's mounts reach the tasks but its variables do not.
#
# Every cluster has its own bridge inside its own namespaces, so they all use one subnet without
# meeting. Nodes share the host's file systems (/tmp, /dev/shm, $WORK) as on a cluster with a shared
# file system; their hostnames tell Open MPI and Slurm apart.
#
# Example:
#   source "$(dirname "$0")/lib.sh"; source "$LOCKSTEP_SOURCE_DIR/tests/cli/cluster.sh"
#   cluster_up 3
#   on_head mpirun --hostfile "$CLUSTER_DIR/hostfile" -np 4 --map-by node \
#     --mca plm_rsh_agent "$CLUSTER_AGENT" --mca btl_tcp_if_include "$CLUSTER_SUBNET" \
#     --mca oob_tcp_if_include "$CLUSTER_SUBNET" hostname
#   slurm_up
#   on_head srun --mpi=pmix -N3 -n3 hostname

CLUSTER_SUBNET=10.78.0.0/24
# The daemons, ip and mungekey live in sbin, which a plain PATH may lack.
case ":$PATH:" in
*:/usr/sbin:*) ;;
*) PATH=$PATH:/usr/sbin:/sbin ;;
esac

# Address of a host: head is .10, nK is .(10+K).
_cluster_addr() { # HOST
  if [ "$1" = head ]; then
    echo 10.78.0.10
  else
    echo "10.78.0.$((10 + ${1#n}))"
  fi
}

# Quotes each argument for a POSIX shell and joins them with spaces.
_cluster_quote() { # ARGS...
  local arg out=""
  for arg in "$@"; do
    out+="'${arg//\'/\'\\\'\'}' "
  done
  printf '%s' "${out% }"
}

# Skips the suite (exit 77) when not root, except in CI where it is a failure.
_cluster_need_root() {
  [ "$(id -u)" = 0 ] && return 0
  if [ -n "${CI:-}" ]; then
    fail "the simulated cluster needs root (network namespaces, mounts)"
  fi
  echo "SKIP: the simulated cluster needs root (network namespaces, mounts)" >&2
  exit 77
}

# Adds cluster_down to the EXIT trap in force now (once), keeping that trap and the exit status.
# shellcheck disable=SC2120 # "set --" below parses the trap, not arguments
_cluster_register_cleanup() {
  [ -z "${_CLUSTER_TRAP_SET:-}" ] || return 0
  _CLUSTER_TRAP_SET=1
  local previous=""
  eval "set -- $(trap -p EXIT)"
  previous=${3:-}
  # shellcheck disable=SC2064,SC2154 # expanded now on purpose: the trap in force at this moment
  trap "_ls_cluster_rc=\$?; cluster_down; (exit \$_ls_cluster_rc) && :; $previous" EXIT
}

# The pid in FILE if that process is alive and its command name is COMM (so a reused pid is left
# alone); nothing otherwise.
_cluster_pid_of() { # FILE COMM
  local pid comm
  [ -f "$1" ] || return 0
  read -r pid <"$1" 2>/dev/null || return 0
  [[ $pid =~ ^[1-9][0-9]*$ ]] || return 0
  { read -r comm <"/proc/$pid/comm"; } 2>/dev/null || return 0
  [ "$comm" = "$2" ] && cluster_pid_running "$pid" && echo "$pid"
  return 0
}

# The state letter and parent pid of PID ("S 1"), from /proc/PID/stat; nothing if it is gone.
_cluster_stat() { # PID
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 0
  stat=${stat##*) } # the command name before it may contain anything
  echo "${stat%% *} $(cut -d' ' -f2 <<<"$stat")"
}

# Whether PID runs. A zombie does not: it has exited and waits for its parent to reap it, which
# takes a while when the parent is this machine's PID 1, or the suite's shell busy in its EXIT trap.
cluster_pid_running() { # PID
  local stat
  stat=$(_cluster_stat "$1")
  [ -n "$stat" ] && [ "${stat%% *}" != Z ]
}

# Sends SIGTERM to PIDS, waits up to S seconds for them to exit, then SIGKILLs what is left.
_cluster_stop_pids() { # S PIDS...
  local limit=$(($1 * 10)) i pid left
  shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  for ((i = 0; i < limit; i++)); do
    left=()
    for pid in "$@"; do
      cluster_pid_running "$pid" && left+=("$pid")
    done
    [ ${#left[@]} -gt 0 ] || return 0
    set -- "${left[@]}"
    sleep 0.1
  done
  echo "cluster: pids $* did not stop on SIGTERM within ${limit}00 ms; sending SIGKILL" >&2
  kill -KILL "$@" 2>/dev/null
  for ((i = 0; i < 50; i++)); do
    left=()
    for pid in "$@"; do
      cluster_pid_running "$pid" && left+=("$pid")
    done
    [ ${#left[@]} -gt 0 ] || return 0
    set -- "${left[@]}"
    sleep 0.1
  done
  echo "cluster: warning: pids $* survived SIGKILL" >&2
}

cluster_up() { # N [SLOTS]
  local n=${1:-} slots=${2:-2} i name ns prefix try hosts="" agent
  if ! [[ $n =~ ^[1-9][0-9]?$ ]] || [ "$n" -gt 64 ]; then
    fail "cluster_up: the node count must be 1..64, got '$n'"
  fi
  [[ $slots =~ ^[1-9][0-9]?$ ]] || fail "cluster_up: SLOTS must be 1..99, got '$slots'"
  [ -z "${CLUSTER_PREFIX:-}" ] || fail "cluster_up: cluster $CLUSTER_PREFIX is already up (one per suite)"
  _cluster_need_root
  need ip bridge nsenter unshare mount hostname
  agent=$LOCKSTEP_SOURCE_DIR/tests/fixtures/cluster/node-rsh
  [ -x "$agent" ] || fail "cluster_up: $agent is missing or not executable"
  CLUSTER_DIR=$WORK/cluster
  # Open MPI splits plm_rsh_agent at spaces, and the wrapper below embeds both paths unquoted.
  [[ $CLUSTER_DIR/$agent =~ ^[A-Za-z0-9._/+-]+$ ]] ||
    fail "cluster_up: $CLUSTER_DIR or $agent has characters the agent path can't carry"
  rm -rf "$CLUSTER_DIR"
  mkdir -p "$CLUSTER_DIR"
  # shellcheck disable=SC2119
  _cluster_register_cleanup

  # Claim a prefix: `ip netns add` fails if the name exists, so two suites never share one.
  prefix=ls$$
  for try in 1 2 3 4 5 6 7 8 9 10; do
    if ! compgen -G "/run/netns/$prefix-*" >/dev/null && ip netns add "$prefix-sw" 2>/dev/null; then
      break
    fi
    [ "$try" -lt 10 ] || fail "cluster_up: could not claim a namespace prefix (last tried $prefix)"
    prefix=ls$$x$RANDOM
  done
  CLUSTER_PREFIX=$prefix
  echo "$prefix" >"$CLUSTER_DIR/prefix"
  CLUSTER_NODES=""
  for ((i = 1; i <= n; i++)); do
    CLUSTER_NODES+="${CLUSTER_NODES:+ }n$i"
  done
  export CLUSTER_DIR CLUSTER_PREFIX CLUSTER_NODES CLUSTER_SUBNET

  ip -n "$prefix-sw" link set lo up || fail "cluster_up: can't bring up lo in $prefix-sw"
  ip -n "$prefix-sw" link add br0 type bridge || fail "cluster_up: can't create the bridge in $prefix-sw"
  ip -n "$prefix-sw" link set br0 up || fail "cluster_up: can't bring up the bridge"
  hosts=$(printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n')
  for name in head $CLUSTER_NODES; do
    hosts+=$'\n'"$(_cluster_addr "$name") $name"
  done
  for name in head $CLUSTER_NODES; do
    ns=$prefix-$name
    ip netns add "$ns" || fail "cluster_up: can't create network namespace $ns"
    # Both ends are created directly in their namespaces: no name ever appears in the root one.
    ip link add "v-$name" netns "$prefix-sw" type veth peer name eth0 netns "$ns" ||
      fail "cluster_up: can't create the veth pair for $name"
    ip -n "$prefix-sw" link set "v-$name" master br0 up || fail "cluster_up: can't attach $name to the bridge"
    ip -n "$ns" link set lo up || fail "cluster_up: can't bring up lo on $name"
    ip -n "$ns" addr add "$(_cluster_addr "$name")/24" dev eth0 || fail "cluster_up: can't address $name"
    ip -n "$ns" link set eth0 up || fail "cluster_up: can't bring up eth0 on $name"
    printf '%s\n' "$hosts" >"$CLUSTER_DIR/hosts-$name"
  done
  for name in $CLUSTER_NODES; do
    echo "$name slots=$slots"
  done >"$CLUSTER_DIR/hostfile"
  echo "$slots" >"$CLUSTER_DIR/slots"

  CLUSTER_AGENT=$CLUSTER_DIR/node-rsh
  {
    echo '#!/bin/sh'
    echo "# The rsh agent of cluster $prefix (written by tests/cli/cluster.sh)."
    echo "CLUSTER_DIR=$CLUSTER_DIR"
    echo 'export CLUSTER_DIR'
    echo "exec $agent \"\$@\""
  } >"$CLUSTER_AGENT"
  chmod 755 "$CLUSTER_AGENT"
  export CLUSTER_AGENT

  # Without STP a bridge port forwards as soon as it is up; wait for that, boundedly.
  local ports=""
  for ((i = 0; i < 50; i++)); do
    ports=$(bridge -n "$prefix-sw" link show 2>&1) || true
    [ "$(grep -c 'state forwarding' <<<"$ports")" -eq $((n + 1)) ] && return 0
    sleep 0.1
  done
  fail "cluster_up: the bridge ports did not all reach forwarding state within 5 s: $ports"
}

cluster_down() {
  local - pid ppid daemons others=() ns
  set +e
  [ -n "${CLUSTER_PREFIX:-}" ] || return 0
  # What a test left running (srun, mpirun, tasks) goes first, while slurmctld can still end its
  # steps: srun waits for a controller that is gone.
  # The daemons' own children (slurmctld's slurmscriptd) stay with them.
  daemons=" $(_slurm_daemon_pids | xargs) "
  for pid in $(_cluster_ns_pids); do
    ppid=$(_cluster_stat "$pid")
    ppid=${ppid#* }
    [[ $daemons == *" $pid "* || $daemons == *" $ppid "* ]] || others+=("$pid")
  done
  _cluster_stop_pids 2 "${others[@]}"
  slurm_down
  # shellcheck disable=SC2046 # a list of pids
  _cluster_stop_pids 2 $(_cluster_ns_pids)
  for ns in /run/netns/"$CLUSTER_PREFIX"-*; do
    [ -e "$ns" ] || continue
    ip netns del "${ns##*/}" || echo "cluster_down: warning: can't delete network namespace ${ns##*/}" >&2
  done
  CLUSTER_PREFIX=""
  CLUSTER_NODES=""
  CLUSTER_AGENT=""
}

# Every process in the cluster's network namespaces.
_cluster_ns_pids() {
  local ns
  for ns in /run/netns/"$CLUSTER_PREFIX"-*; do
    [ -e "$ns" ] && ip netns pids "${ns##*/}" 2>/dev/null
  done
  return 0
}

on_node() { # HOST CMD...
  [ -n "${CLUSTER_AGENT:-}" ] || fail "on_node: no cluster (cluster_up first)"
  local host=$1
  shift
  "$CLUSTER_AGENT" "$host" "$(_cluster_quote "$@")"
}

on_head() { # CMD...
  on_node head "$@"
}

# The tail of every Slurm and munge log, for failure messages.
_slurm_logs() {
  local f
  for f in "$CLUSTER_DIR"/slurm/log/*.log; do
    [ -f "$f" ] || continue
    echo "--- ${f##*/}:"
    tail -n 15 "$f"
  done
}

slurm_up() {
  [ -n "${CLUSTER_PREFIX:-}" ] || fail "slurm_up: no cluster (cluster_up first)"
  [ -z "${_CLUSTER_SLURM_UP:-}" ] || fail "slurm_up: Slurm is already up"
  need munged munge slurmctld slurmd sinfo srun sbatch scontrol
  local s=$CLUSTER_DIR/slurm slots name i idle="" status
  read -r slots <"$CLUSTER_DIR/slots"
  # Fresh state every time: a stale spool/nK/stepd.slurm.pmix.J.S socket from an earlier run would
  # make the pmix plugin fail to bind. Job ids start at a number of this suite's own (FirstJobId):
  # clusters running side by side share /tmp and /dev/shm and name their nodes alike, so equal job
  # ids would make Open MPI's session directories and shared-memory segments collide (a rank then
  # dies of SIGSEGV in one suite and the other ranks wait forever).
  rm -rf "$s"
  mkdir -p "$s/etc" "$s/state" "$s/log" "$s/run" "$s/munge"
  for name in $CLUSTER_NODES; do
    mkdir -p "$s/spool/$name" "$s/tmp/$name"
  done
  # munged wants a socket directory everybody can enter; $WORK above it is 0700, which --force
  # accepts (everything here runs as root).
  chmod 755 "$s/munge"
  head -c 1024 /dev/urandom >"$s/munge/munge.key"
  chmod 600 "$s/munge/munge.key"
  {
    cat <<EOF
# Written by tests/cli/cluster.sh for cluster $CLUSTER_PREFIX.
ClusterName=$CLUSTER_PREFIX
FirstJobId=$((($$ % 60000) * 1000 + 1))
SlurmctldHost=head($(_cluster_addr head))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
AuthInfo=socket=$s/munge/munge.socket
StateSaveLocation=$s/state
SlurmdSpoolDir=$s/spool/%n
TmpFS=$s/tmp/%n
SlurmctldPidFile=$s/run/slurmctld.pid
SlurmdPidFile=$s/run/slurmd-%n.pid
SlurmctldLogFile=$s/log/slurmctld.log
SlurmdLogFile=$s/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
SwitchType=switch/none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
CommunicationParameters=NoInAddrAny
SlurmdParameters=config_overrides
# Generous: under a loaded CI (the sanitizer pass runs every suite at once) a slow answer must not
# mark a node down and kill its steps (exit 137).
SlurmdTimeout=300
MessageTimeout=60
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
EOF
    for name in $CLUSTER_NODES; do
      echo "NodeName=$name NodeAddr=$(_cluster_addr "$name") CPUs=$slots RealMemory=1000 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$s/etc/slurm.conf"
  export SLURM_CONF=$s/etc/slurm.conf
  # Tasks read their PMIx job data from the server (gds/hash), not the shared-memory store: PMIx's
  # ds21 store now and then segfaults a task at start (openpmix/openpmix#1114; once here, in
  # test_cluster_harness's srun --mpi=pmix, under a loaded CI), the workaround sites use.
  export PMIX_MCA_gds=hash
  _CLUSTER_SLURM_UP=1

  on_head munged --force --socket="$s/munge/munge.socket" --key-file="$s/munge/munge.key" \
    --pid-file="$s/run/munged.pid" --log-file="$s/log/munged.log" --seed-file="$s/munge/munged.seed" ||
    fail "slurm_up: munged did not start: $(_slurm_logs)"
  munge -S "$s/munge/munge.socket" -n </dev/null | unmunge -S "$s/munge/munge.socket" >/dev/null ||
    fail "slurm_up: munge does not answer on $s/munge/munge.socket: $(_slurm_logs)"
  on_head slurmctld -i || fail "slurm_up: slurmctld did not start: $(_slurm_logs)"
  for name in $CLUSTER_NODES; do
    on_node "$name" slurmd -N "$name" || fail "slurm_up: slurmd did not start on $name: $(_slurm_logs)"
  done
  for ((i = 0; i < 300; i++)); do
    status=$(on_head sinfo -h -N -o '%N %T' 2>&1) || status=""
    idle=$(awk '$2 == "idle"' <<<"$status" | wc -l)
    [ "$idle" -eq "$(wc -w <<<"$CLUSTER_NODES")" ] && return 0
    sleep 0.1
  done
  fail "slurm_up: not every node is idle after 30 s; sinfo says:
$status
$(_slurm_logs)"
}

slurm_wait_job() { # JOBID [SECONDS]
  local id=$1 limit=$((${2:-60} * 10)) i state=""
  [[ $id =~ ^[0-9]+$ ]] || fail "slurm_wait_job: not a job id: '$id'"
  for ((i = 0; i < limit; i++)); do
    state=$(on_head scontrol -o show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case $state in
    PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | REQUEUED | RESIZING | "") sleep 0.1 ;;
    *)
      echo "$state"
      [ "$state" = COMPLETED ]
      return
      ;;
    esac
  done
  echo "TIMEOUT(${state:-unknown})"
  return 1
}

# The live daemons slurm_up started, from their pid files.
_slurm_daemon_pids() {
  local s=$CLUSTER_DIR/slurm name
  [ -n "${_CLUSTER_SLURM_UP:-}" ] || return 0
  for name in $CLUSTER_NODES; do
    _cluster_pid_of "$s/run/slurmd-$name.pid" slurmd
  done
  _cluster_pid_of "$s/run/slurmctld.pid" slurmctld
  _cluster_pid_of "$s/run/munged.pid" munged
}

slurm_down() {
  local -
  set +e
  [ -n "${_CLUSTER_SLURM_UP:-}" ] || return 0
  # All at once: each takes 1.5-2 s to exit after SIGTERM, and none needs another to exit.
  # shellcheck disable=SC2046 # a list of pids
  _cluster_stop_pids 15 $(_slurm_daemon_pids)
  rm -rf "$CLUSTER_DIR/slurm/state" "$CLUSTER_DIR/slurm/spool" "$CLUSTER_DIR/slurm/tmp" "$CLUSTER_DIR/slurm/run"
  _CLUSTER_SLURM_UP=""
  unset SLURM_CONF
}
