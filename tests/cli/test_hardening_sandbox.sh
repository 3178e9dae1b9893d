#!/usr/bin/env bash
# Hardening: build steps are confined, as root and as an unprivileged user (issue 13, finding 1).
# A `run:` step and a package's postinst run tests/fixtures/escape/escape_probe.c, which tries every
# way out the security review listed: every /proc/*/root and /proc/*/environ, the init's memory,
# mounts and new namespaces, ptrace, kernel modules/kexec/keyrings/bpf/perf, raw devices and device
# nodes, the host's /dev/shm and SysV shared memory, the host's loopback, abstract unix sockets and
# the internet, /proc/sys and /proc/sysrq-trigger. Every attempt must fail, the host's secret must
# appear nowhere, and the host must be unchanged. The review's own reproduction runs too.
source "$(dirname "$0")/lib.sh"
need gcc busybox python3 ipcmk ipcrm jq dpkg-deb

# ---- the host's side: a marker in /tmp and /dev/shm, a secret in lockstep's environment, a TCP
# server on 127.0.0.1, an abstract unix socket and a SysV shared memory segment ------------------
MARKER="lockstep-probe-marker-$$-$RANDOM"
SECRET_A="lockstep-host-"
SECRET_B="secret-$$-$RANDOM"
printf 'host marker\n' >"/tmp/$MARKER"
printf 'host marker\n' >"/dev/shm/$MARKER"
SHMID=$(ipcmk -M 4096 | awk '{print $NF}')
ABSTRACT="lockstep-probe-$$"
python3 -c '
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1]); s.listen(4)
parent = int(sys.argv[2])
s.settimeout(0.5)
while True:
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    try:
        c, _ = s.accept(); c.close()
    except socket.timeout:
        pass
' "$ABSTRACT" $$ &
ABSTRACT_PID=$!
cleanup() {
  kill "$ABSTRACT_PID" 2>/dev/null || true
  ipcrm -m "$SHMID" 2>/dev/null || true
  rm -rf "/tmp/$MARKER" "/tmp/$MARKER"-* "/dev/shm/$MARKER" "/tmp/ESCAPED-$$"
  remove_test_user
  cd /
  rm -rf "$WORK"
}
trap cleanup EXIT

gcc -static -O1 -o probe "$LOCKSTEP_SOURCE_DIR/tests/fixtures/escape/escape_probe.c" || fail "can't build the probe"

# The repository for the postinst: ls-dpkg (a shell and dpkg) and ls-escape, whose postinst runs the
# probe. A .deb put into the pool before make-repo.sh runs is indexed and signed with the rest.
mkdir -p pkg/DEBIAN pkg/usr/bin repo/pool/main/l/ls-escape
cp probe pkg/usr/bin/escape_probe
printf '#!/bin/sh\nif [ "$1" = configure ]; then\n  /usr/bin/escape_probe\nfi\n' >pkg/DEBIAN/postinst
chmod 0755 pkg/DEBIAN/postinst
printf 'Package: ls-escape\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: lockstep tests <tests@example.invalid>\nDepends: ls-dpkg\nDescription: tries to leave the build sandbox\n' \
  >pkg/DEBIAN/control
dpkg-deb --root-owner-group -Zxz --build pkg repo/pool/main/l/ls-escape/ls-escape_1.0-1_amd64.deb >/dev/null
"$LOCKSTEP_SOURCE_DIR/tests/fixtures/apt/make-repo.sh" repo --with-tools >/dev/null 2>&1 || fail "make-repo.sh failed"
start_http_server "$WORK/repo"
trap 'stop_http_server; cleanup' EXIT
PORT=${HTTP_URL##*:}

make_busybox_root rootfs
cp probe rootfs/bin/escape_probe
cp "$(command -v busybox)" busybox
probe_env="{PROBE_MARKER: $MARKER, PROBE_SECRET_A: $SECRET_A, PROBE_SECRET_B: $SECRET_B, PROBE_PORT: \"$PORT\", PROBE_ABSTRACT: $ABSTRACT, PROBE_SHMID: \"$SHMID\"}"
cat >step.yaml <<YAML
lockstep: 1
name: escape-step
copy: [{from: ./rootfs, to: /, mode: preserve}]
env: $probe_env
run:
  - /bin/escape_probe
outputs: {oci: step-out}
YAML
# The security review's reproduction, verbatim but for the marker's name.
cat >repro.yaml <<YAML
lockstep: 1
name: p
copy: [{from: ./busybox, to: /bin/busybox}, {from: ./busybox, to: /bin/sh}]
run:
  - /bin/busybox --install -s /bin
  - 'for p in \$(ls /proc|grep "^[0-9]*\$"); do [ -d /proc/\$p/root/tmp ] && echo x >/proc/\$p/root/tmp/ESCAPED-$$ && break; done; true'
outputs: {oci: repro-out}
YAML
cat >deb.yaml <<YAML
lockstep: 1
name: escape-postinst
repos:
  - {apt: $HTTP_URL, suite: lstest, components: [main], keyring: repo/keyring.gpg}
packages:
  apt: [ls-dpkg, ls-escape]
env: $probe_env
outputs: {oci: deb-out}
YAML

# What every probe run must show: each attempt blocked, nothing escaped, the secret nowhere.
expected_blocked=(proc-root proc-environ proc-pids proc-1-mem proc-1-environ inherited-fds
  "write-open /proc/sysrq-trigger" "write-open /proc/sys/kernel/core_pattern" mount-tmpfs mount-proc
  mount-bind umount-proc fsopen open_tree unshare-user unshare-mount setns chroot-climb ptrace-init
  process_vm_readv-init init_module finit_module delete_module kexec_load keyctl add_key bpf
  perf_event_open userfaultfd open_by_handle_at iopl swapoff reboot sethostname mknod-block mknod-char
  "open /dev/mem" "open /dev/kmsg" "open /dev/sda" host-dev-shm host-sysv-shm host-loopback-tcp
  internet-tcp host-abstract-unix)
check_probe() { # WHO OUTPUT
  local who=$1 output=$2 name
  case "$output" in *"probe done: every attempt failed"*) ;; *) fail "$who: the probe did not finish: $output" ;; esac
  if grep -q '^ESCAPED' <<<"$output"; then
    fail "$who: escapes: $(grep '^ESCAPED' <<<"$output")"
  fi
  for name in "${expected_blocked[@]}"; do
    grep -qF "blocked $name:" <<<"$output" || fail "$who: the probe did not try '$name': $output"
  done
  case "$output" in *"$SECRET_A$SECRET_B"*) fail "$who: the host's secret reached the output" ;; esac
}
check_host_unchanged() { # WHO
  [ ! -e "/tmp/$MARKER-written" ] || fail "$1: a step wrote the host's /tmp through /proc/*/root"
  [ ! -e "/tmp/ESCAPED-$$" ] || fail "$1: the review's reproduction wrote the host's /tmp/ESCAPED-$$"
  assert_eq "host marker" "$(cat "/tmp/$MARKER")" "$1: the host's /tmp marker"
  assert_eq "host marker" "$(cat "/dev/shm/$MARKER")" "$1: the host's /dev/shm marker"
  ipcs -m -i "$SHMID" >/dev/null 2>&1 || fail "$1: the host's SysV segment is gone"
  grep -q "$MARKER" /proc/self/mountinfo && fail "$1: a mount reached the host's mount table"
  [ -z "$(ls -d "/tmp/$MARKER"-* 2>/dev/null)" ] || fail "$1: the probe's files reached the host's /tmp"
  return 0
}

# Runs lockstep as WHO (root, or the unprivileged user) with the host's secret in its environment.
run_as() { # WHO ARGS...
  local who=$1
  shift
  if [ "$who" = root ]; then
    ls_run_env "$@"
  else
    set +e
    OUT=$(runuser -u "$TUSER" -- env LOCKSTEP_CACHE="$WORK/usercache" LS_TEST_HOST_TOKEN="$SECRET_A$SECRET_B" \
      "$LOCKSTEP" "$@" 2>"$WORK/.stderr")
    RC=$?
    set -e
    ERR=$(cat "$WORK/.stderr")
  fi
}
ls_run_env() {
  set +e
  OUT=$(env LS_TEST_HOST_TOKEN="$SECRET_A$SECRET_B" "$LOCKSTEP" "$@" 2>"$WORK/.stderr")
  RC=$?
  set -e
  ERR=$(cat "$WORK/.stderr")
}

ls_run lock deb.yaml
assert_eq 0 "$RC" "lock the postinst spec: $ERR"

suite_for() { # WHO
  local who=$1
  run_as "$who" build --oci "$WORK/step-out-$who" "$WORK/step.yaml"
  assert_eq 0 "$RC" "$who: build with the probe step: $ERR"
  check_probe "$who: run step" "$ERR"
  check_host_unchanged "$who: run step"
  pass "$who: a run: step that tries every escape is refused each one; the host is unchanged"

  run_as "$who" build --oci "$WORK/repro-out-$who" "$WORK/repro.yaml"
  assert_eq 0 "$RC" "$who: the review's reproduction builds: $ERR"
  check_host_unchanged "$who: reproduction"
  pass "$who: the review's /proc/<pid>/root reproduction writes nothing on the host"

  run_as "$who" build --locked --oci "$WORK/deb-out-$who" "$WORK/deb.yaml"
  assert_eq 0 "$RC" "$who: build with the probe postinst: $ERR"
  assert_contains "$ERR" "configure packages" "$who: the maintainer scripts ran"
  check_probe "$who: postinst" "$ERR"
  check_host_unchanged "$who: postinst"
  pass "$who: a postinst that tries every escape is refused each one; the host is unchanged"
}

# As root, then as an unprivileged user without subordinate ids: the same confinement.
add_test_user lsharden
[ -z "$TUSER" ] || chown -R "$TUSER" "$WORK"
for who in "${WHO[@]}"; do
  suite_for "$who"
done
if [ -n "$TUSER" ]; then
  assert_eq "$(jq -r '.manifests[0].digest' "step-out-root/index.json")" \
    "$(jq -r '.manifests[0].digest' "step-out-$TUSER/index.json")" "root and rootless probe images"
  pass "the confined step's image is the same bytes as root and as an unprivileged user"
fi

done_testing
