#!/usr/bin/env bash
# `lockstep exec`: exit codes, signals, environment order, binds, the read-only root, /tmp,
# workdir and user, pid/uts/net namespaces, SIF images through each mount path (loop, fuse,
# extract), errors before the command starts, and nothing left behind. Each check runs as root
# and as an unprivileged user the suite creates (when run as root, as CI does).
source "$(dirname "$0")/lib.sh"
need busybox mksquashfs
[ -x /bin/busybox ] || fail "busybox-static (/bin/busybox) is needed"

# ---------------------------------------------------------------------------------------------
# The unprivileged user, its home and cache; /dev/fuse's mode is restored on exit.
chmod 0755 "$WORK"
USERS=(root)
TUSER=""
FUSE_MODE=$(stat -c %a /dev/fuse 2>/dev/null || true)
cleanup() {
  local rc=$?
  set +e
  cd /
  [ -n "$FUSE_MODE" ] && chmod "$FUSE_MODE" /dev/fuse 2>/dev/null
  if [ -n "$TUSER" ]; then
    pkill -KILL -u "$TUSER" 2>/dev/null
    userdel "$TUSER" 2>/dev/null
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
if [ "$(id -u)" = 0 ]; then
  TUSER="lsx$$"
  useradd -M -N -d "$WORK/home-user" -s /bin/sh "$TUSER"
  USERS+=("$TUSER")
  mkdir -p "$WORK/home-user" "$WORK/cache-user"
  chown "$TUSER" "$WORK/home-user" "$WORK/cache-user"
  # The binary must be reachable by the user: copy it when its directory is not.
  if ! runuser -u "$TUSER" -- test -x "$LOCKSTEP"; then
    install -m 0755 "$LOCKSTEP" "$WORK/lockstep"
    LOCKSTEP="$WORK/lockstep"
  fi
fi
mkdir -p "$WORK/home-root"
# A shared host directory both users may write to (for rw binds).
mkdir -p "$WORK/shared"
chmod 0777 "$WORK/shared"

# Runs `lockstep ARGS` as WHO with extra NAME=VALUE variables: lx WHO [NAME=VALUE...] -- ARGS...
# Sets OUT, ERR, RC.
lx() {
  local who=$1
  shift
  local vars=()
  while [ "$1" != "--" ]; do
    vars+=("$1")
    shift
  done
  shift
  set +e
  if [ "$who" = root ]; then
    OUT=$(env HOME="$WORK/home-root" LOCKSTEP_CACHE="$WORK/cache" "${vars[@]}" "$LOCKSTEP" "$@" 2>"$WORK/.stderr")
  else
    OUT=$(runuser -u "$who" -- env HOME="$WORK/home-user" LOCKSTEP_CACHE="$WORK/cache-user" "${vars[@]}" \
      "$LOCKSTEP" "$@" 2>"$WORK/.stderr")
  fi
  RC=$?
  set -e
  ERR=$(cat "$WORK/.stderr")
}

# ---------------------------------------------------------------------------------------------
# The images: a busybox tree with the mount points, built with lockstep; a second one without
# mount points, with a WorkingDir the image lacks and an entrypoint; and the first as a SIF.
mkdir -p img/rootfs/bin img/rootfs/etc img/bare/bin
cp /bin/busybox img/rootfs/bin/busybox
cp /bin/busybox img/bare/bin/busybox
for a in sh true false cat env id ls sleep kill pwd touch mkdir hostname mount grep echo test wc stat tr sort \
  readlink rm head cut; do
  ln -s busybox "img/rootfs/bin/$a"
  ln -s busybox "img/bare/bin/$a"
done
mkdir -p img/rootfs/proc img/rootfs/dev img/rootfs/sys img/rootfs/tmp img/rootfs/root img/rootfs/home
: >img/rootfs/etc/hosts
: >img/rootfs/etc/resolv.conf
printf 'not executable\n' >img/rootfs/bin/notexec
chmod 0644 img/rootfs/bin/notexec
ln -s /etc img/rootfs/mnt # a symlink out of nowhere: binds through it must stay inside
printf 'image marker\n' >img/rootfs/etc/marker
cat >img/lockstep.yaml <<'YAML'
lockstep: 1
name: bb
copy:
  - {from: ./rootfs, to: /}
env: {PATH: /bin, IMG_VAR: from-image, SHARED_VAR: from-image}
cmd: [/bin/sh, -c, "echo default-cmd"]
outputs:
  oci: out/layout
  sif: out/bb.sif
YAML
cat >img/bare.yaml <<'YAML'
lockstep: 1
name: bare
copy:
  - {from: ./bare, to: /}
env: {PATH: /bin}
entrypoint: [/bin/echo, entry]
cmd: [from-cmd]
workdir: /srv/app
outputs:
  oci: out/bare
YAML
"$LOCKSTEP" build -q img/lockstep.yaml >/dev/null
"$LOCKSTEP" build -q img/bare.yaml >/dev/null
IMG="oci:$WORK/img/out/layout"
BARE="oci:$WORK/img/out/bare"
SIF="$WORK/img/out/bb.sif"
chmod -R a+rX img/out
pass "built the test images (OCI layout and SIF) with lockstep"

for U in "${USERS[@]}"; do
  if [ "$U" = root ]; then
    MYUID=0
  else
    MYUID=$(id -u "$U")
  fi

  # --- exit codes --------------------------------------------------------------------------
  lx "$U" -- exec "$IMG" -- /bin/true
  assert_eq 0 "$RC" "[$U] true ($ERR)"
  lx "$U" -- exec "$IMG" -- /bin/false
  assert_eq 1 "$RC" "[$U] false"
  lx "$U" -- exec "$IMG" -- sh -c 'exit 42'
  assert_eq 42 "$RC" "[$U] exit 42"
  lx "$U" -- exec "$IMG" -- no-such-command
  assert_eq 127 "$RC" "[$U] missing command"
  assert_contains "$ERR" "can't run no-such-command in the container: not found in PATH (/bin)" "[$U] 127 message"
  lx "$U" -- exec "$IMG" -- /bin/notexec
  assert_eq 126 "$RC" "[$U] not executable"
  assert_contains "$ERR" "Permission denied" "[$U] 126 message"
  lx "$U" -- exec "$IMG"
  assert_eq "0 default-cmd" "$RC $OUT" "[$U] the image's CMD without a command"
  lx "$U" -- exec "$BARE"
  assert_eq "0 entry from-cmd" "$RC $OUT" "[$U] the image's ENTRYPOINT + CMD"
  pass "[$U] exit codes 0, 1, 42; 127 and 126 with a message; ENTRYPOINT/CMD when no command is given"

  # --- signals -----------------------------------------------------------------------------
  lx "$U" -- exec "$IMG" -- sh -c 'kill -TERM $$'
  assert_eq 143 "$RC" "[$U] killed by SIGTERM"
  lx "$U" -- exec --pid "$IMG" -- sh -c 'kill -KILL $$'
  assert_eq 137 "$RC" "[$U] killed by SIGKILL in a pid namespace"
  for pidns in "" --pid; do
    rm -f "$WORK/shared/sig.out"
    if [ "$U" = root ]; then
      env HOME="$WORK/home-root" LOCKSTEP_CACHE="$WORK/cache" "$LOCKSTEP" exec $pidns "$IMG" -- \
        sh -c 'sleep 20 & trap "kill \$!; exit 7" TERM; echo ready; wait' >"$WORK/shared/sig.out" &
      launcher=$!
      target=$launcher
    else
      runuser -u "$U" -- env HOME="$WORK/home-user" LOCKSTEP_CACHE="$WORK/cache-user" "$LOCKSTEP" exec $pidns "$IMG" -- \
        sh -c 'sleep 20 & trap "kill \$!; exit 7" TERM; echo ready; wait' >"$WORK/shared/sig.out" &
      launcher=$!
      for _ in $(seq 100); do
        target=$(pgrep -P "$launcher" -x lockstep || true)
        [ -n "$target" ] && break
        sleep 0.05
      done
    fi
    for _ in $(seq 200); do
      grep -q ready "$WORK/shared/sig.out" 2>/dev/null && break
      sleep 0.05
    done
    kill -TERM "$target"
    set +e
    wait "$launcher"
    rc=$?
    set -e
    assert_eq 7 "$rc" "[$U$pidns] SIGTERM sent to lockstep reaches the command, which exits 7"
  done
  pass "[$U] a signal's death is 128+N; SIGTERM sent to lockstep is forwarded (with and without --pid)"

  # --- environment -------------------------------------------------------------------------
  lx "$U" HOST_VAR=from-host SHARED_VAR=from-host -- exec "$IMG" -- sh -c 'echo "$HOST_VAR $SHARED_VAR $IMG_VAR $PATH"'
  assert_eq "from-host from-image from-image /bin" "$OUT" "[$U] host var passed, image wins over host"
  lx "$U" SHARED_VAR=from-host LOCKSTEP_ENV_IMG_VAR=from-prefix -- exec --env SHARED_VAR=from-flag "$IMG" -- \
    sh -c 'echo "$SHARED_VAR $IMG_VAR ${LOCKSTEP_ENV_IMG_VAR:-unset}"'
  assert_eq "from-flag from-prefix unset" "$OUT" "[$U] --env and LOCKSTEP_ENV_ win over the image"
  lx "$U" LOCKSTEP_ENV_A=prefix -- exec --env A=flag "$IMG" -- sh -c 'echo $A'
  assert_eq "flag" "$OUT" "[$U] --env wins over LOCKSTEP_ENV_"
  lx "$U" HOST_VAR=from-host TERM=dumb -- exec --cleanenv --env X=1 "$IMG" -- sh -c 'echo "${HOST_VAR:-unset} $TERM $X $IMG_VAR"'
  assert_eq "unset dumb 1 from-image" "$OUT" "[$U] --cleanenv"
  pass "[$U] environment: host < image < LOCKSTEP_ENV_ < --env; --cleanenv drops the host's"

  # --- binds -------------------------------------------------------------------------------
  mkdir -p "$WORK/shared/data"
  chmod 0777 "$WORK/shared/data"
  printf 'host data\n' >"$WORK/shared/data/in.txt"
  chmod 0666 "$WORK/shared/data/in.txt"
  lx "$U" -- exec --bind "$WORK/shared/data:/data:ro" "$IMG" -- sh -c 'cat /data/in.txt; touch /data/new'
  assert_eq 1 "$RC" "[$U] writing a read-only bind fails"
  assert_contains "$OUT" "host data" "[$U] a read-only bind is readable"
  assert_contains "$ERR" "Read-only file system" "[$U] read-only bind message"
  lx "$U" -- exec --bind "$WORK/shared/data:/data" "$IMG" -- sh -c 'echo written >/data/new-$$'
  assert_eq 0 "$RC" "[$U] writing a read-write bind ($ERR)"
  compgen -G "$WORK/shared/data/new-*" >/dev/null || fail "[$U] the file written through the bind is not on the host"
  rm -f "$WORK/shared/data"/new-*
  victim="/etc/lockstep-exec-test-$$"
  lx "$U" -- exec --bind "$WORK/shared/data:/mnt/lockstep-exec-test-$$:ro" "$IMG" -- \
    sh -c "cat /mnt/lockstep-exec-test-$$/in.txt && cat $victim/in.txt"
  assert_eq 0 "$RC" "[$U] bind through the image's /mnt -> /etc symlink ($ERR)"
  [ ! -e "$victim" ] || fail "[$U] the bind through an image symlink reached the host's $victim"
  lx "$U" -- exec --bind "$WORK/no-such-dir:/x" "$IMG" -- true
  assert_eq 2 "$RC" "[$U] a missing bind source"
  assert_contains "$ERR" "can't bind $WORK/no-such-dir to /x" "[$U] missing bind source message"
  lx "$U" -- exec --bind "/a:rel" "$IMG" -- true
  assert_eq 2 "$RC" "[$U] a relative bind destination"
  pass "[$U] binds: read-only, read-write, through an image symlink (stays inside), errors"

  # --- root, /tmp, home ------------------------------------------------------------------------
  lx "$U" -- exec "$IMG" -- touch /x
  assert_eq 1 "$RC" "[$U] the root is read-only"
  assert_contains "$ERR" "Read-only file system" "[$U] read-only root message"
  lx "$U" -- exec --writable-tmpfs "$IMG" -- sh -c 'touch /x && echo > /etc/marker && cat /etc/marker | wc -c'
  assert_eq "0 1" "$RC $OUT" "[$U] --writable-tmpfs makes the root writable"
  lx "$U" -- exec "$IMG" -- cat /etc/marker
  assert_eq "image marker" "$OUT" "[$U] --writable-tmpfs changes are gone afterwards"
  lx "$U" -- exec "$IMG" -- sh -c 'grep " /tmp " /proc/self/mountinfo | grep -c tmpfs; touch /tmp/in-tmpfs-$$'
  assert_eq "0 1" "$RC $OUT" "[$U] /tmp is a tmpfs"
  lx "$U" -- exec --tmp-host "$IMG" -- sh -c 'echo x > /tmp/lockstep-exec-tmp-host-$$ && ls /tmp/lockstep-exec-tmp-host-*'
  assert_eq 0 "$RC" "[$U] --tmp-host ($ERR)"
  ls /tmp/lockstep-exec-tmp-host-* >/dev/null 2>&1 || fail "[$U] --tmp-host: the file is not in the host's /tmp"
  rm -f /tmp/lockstep-exec-tmp-host-*
  if [ "$U" != root ]; then
    # A mount beneath /tmp (another job's, a FUSE mount) is locked in the user's namespace: the
    # kernel refuses a one-level bind of /tmp then, so it is bound with what lies beneath. The
    # extra mount lives in a private mount namespace; the host's /tmp is not touched.
    sub=$(mktemp -d /tmp/lockstep-exec-sub.XXXXXX)
    set +e
    OUT=$(unshare -m --propagation private sh -c "mount -t tmpfs none '$sub' && touch '$sub/beneath' &&
      runuser -u '$U' -- env HOME='$WORK/home-user' LOCKSTEP_CACHE='$WORK/cache-user' \
        '$LOCKSTEP' exec --tmp-host '$IMG' -- ls '$sub'" 2>"$WORK/.stderr")
    RC=$?
    set -e
    ERR=$(cat "$WORK/.stderr")
    rmdir "$sub"
    assert_eq "0 beneath" "$RC $OUT" "[$U] --tmp-host with a mount beneath /tmp ($ERR)"
  fi
  home=$([ "$U" = root ] && echo "$WORK/home-root" || echo "$WORK/home-user")
  lx "$U" -- exec "$IMG" -- sh -c 'echo "$HOME"; echo hi > "$HOME/from-container"'
  assert_eq "0 $home" "$RC $OUT" "[$U] HOME is bound read-write"
  [ -f "$home/from-container" ] || fail "[$U] the file written in the home is not on the host"
  lx "$U" -- exec --no-home "$IMG" -- sh -c 'test -e "$HOME/from-container" && echo visible || echo hidden'
  assert_eq "hidden" "$OUT" "[$U] --no-home"
  pass "[$U] read-only root, --writable-tmpfs, tmpfs /tmp, --tmp-host, home bound read-write, --no-home"

  # --- workdir and user ---------------------------------------------------------------------
  lx "$U" -- exec "$BARE" -- pwd
  assert_eq "0 /srv/app" "$RC $OUT" "[$U] the image's WorkingDir (missing in the image: created)"
  lx "$U" -- exec --workdir /bin "$BARE" -- pwd
  assert_eq "0 /bin" "$RC $OUT" "[$U] --workdir"
  lx "$U" -- exec --workdir /nope "$IMG" -- pwd
  assert_eq 2 "$RC" "[$U] a missing --workdir"
  assert_contains "$ERR" "the working directory /nope does not exist in the container" "[$U] --workdir message"
  lx "$U" -- exec --workdir /proc/self/fd/0 "$IMG" -- pwd
  assert_eq 2 "$RC" "[$U] a --workdir through a magic link (CVE-2024-21626)"
  assert_contains "$ERR" "magic link" "[$U] magic-link --workdir message"
  lx "$U" -- exec "$IMG" -- pwd
  assert_eq "0 /" "$RC $OUT" "[$U] no WorkingDir, host cwd not bound: /"
  mkdir -p "$home/sub/dir"
  [ "$U" = root ] || chown -R "$U" "$home/sub"
  (cd "$home/sub/dir" && lx "$U" -- exec "$IMG" -- pwd && assert_eq "0 $home/sub/dir" "$RC $OUT" "[$U] host cwd in home")
  lx "$U" -- exec "$IMG" -- id -u
  assert_eq "0 $MYUID" "$RC $OUT" "[$U] the caller's uid by default"
  lx "$U" -- exec --user 1234:4321 "$IMG" -- sh -c 'echo $(id -u) $(id -g)'
  assert_eq "0 1234 4321" "$RC $OUT" "[$U] --user"
  lx "$U" -- exec --user root "$IMG" -- true
  assert_eq 2 "$RC" "[$U] a non-numeric --user"
  pass "[$U] workdir (image, --workdir, magic links refused, host cwd in home, /) and user (default, --user)"

  # --- namespaces ------------------------------------------------------------------------------
  lx "$U" -- exec --pid "$IMG" -- sh -c 'echo $$ $(cat /proc/1/comm)'
  assert_eq "0 2 lockstep-init" "$RC $OUT" "[$U] --pid: an init is pid 1, the command pid 2"
  lx "$U" -- exec --pid "$IMG" -- sh -c '(sleep 0.2 &); sleep 1; grep -l "^State:.*Z" /proc/[0-9]*/status | wc -l'
  assert_eq "0 0" "$RC $OUT" "[$U] --pid: the orphan was reaped (no zombie)"
  lx "$U" -- exec --hostname node1 "$IMG" -- hostname
  assert_eq "0 node1" "$RC $OUT" "[$U] --hostname"
  lx "$U" -- exec --net none "$IMG" -- sh -c 'ls /sys/class/net; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
  assert_eq "0 lo
lo" "$RC $OUT" "[$U] --net none: only lo"
  lx "$U" -- exec "$IMG" -- sh -c 'tail -n +3 /proc/net/dev | wc -l'
  [ "$OUT" -ge 1 ] || fail "[$U] the host network is visible by default"
  pass "[$U] --pid (init reaps), --hostname, --net none"

  # --- SIF -------------------------------------------------------------------------------------
  modes=(extract)
  if [ "$U" = root ]; then
    modes=(loop fuse extract)
  else
    chmod 0666 /dev/fuse
    modes=(fuse extract)
  fi
  # auto before anything is extracted (the extract mode below leaves a root in the cache)
  lx "$U" -- exec --debug "$SIF" -- true
  if [ "$U" = root ]; then
    assert_contains "$ERR" "sif: mount path: loop" "[$U] auto picks loop as root"
  else
    assert_contains "$ERR" "sif: mount path: fuse" "[$U] auto picks fuse when /dev/fuse is usable"
    chmod 0600 /dev/fuse
    lx "$U" -- exec --debug "$SIF" -- cat /etc/marker
    assert_eq "0 image marker" "$RC $OUT" "[$U] SIF without FUSE"
    assert_contains "$ERR" "sif: mount path: extract" "[$U] auto falls back to extract without FUSE"
    lx "$U" -- exec --sif-mount fuse "$SIF" -- true
    assert_eq 3 "$RC" "[$U] forced fuse without /dev/fuse"
    assert_contains "$ERR" "/dev/fuse is not accessible" "[$U] forced fuse message"
    lx "$U" -- exec --sif-mount loop "$SIF" -- true
    assert_eq 3 "$RC" "[$U] forced loop as a user"
    chmod 0666 /dev/fuse
  fi
  for m in "${modes[@]}"; do
    lx "$U" -- exec --debug --sif-mount "$m" "$SIF" -- sh -c 'cat /etc/marker; echo $IMG_VAR'
    assert_eq "0 image marker
from-image" "$RC $OUT" "[$U] SIF via $m ($ERR)"
    assert_contains "$ERR" "sif: mount path: $m" "[$U] --debug names the SIF mount path"
  done
  # A SIF's digest is remembered once the file is 2 s old (it might still change before): then an
  # extract remembers it, and auto finds that root without hashing or mounting.
  age=$(($(date +%s) - $(stat -c %Z "$SIF")))
  [ "$age" -ge 3 ] || sleep $((3 - age))
  lx "$U" -- exec --sif-mount extract "$SIF" -- true
  lx "$U" -- exec --debug "$SIF" -- true
  assert_contains "$ERR" "sif: auto: extract (already extracted at" "[$U] auto uses a root already extracted"
  lx "$U" LOCKSTEP_SIF_MOUNT=extract -- exec --debug "$SIF" -- true
  assert_contains "$ERR" "sif: mount path: extract" "[$U] LOCKSTEP_SIF_MOUNT"
  if [ "$U" != root ] && [ -n "$FUSE_MODE" ]; then
    chmod "$FUSE_MODE" /dev/fuse
  fi
  pass "[$U] SIF through ${modes[*]} and auto; --debug names the path"

  # --- errors before the command ---------------------------------------------------------------
  lx "$U" -- exec "$WORK/no-such-image" -- true
  assert_eq 2 "$RC" "[$U] a missing image"
  assert_contains "$ERR" "no image at '$WORK/no-such-image'" "[$U] missing image message"
  lx "$U" -- exec "sif:$WORK/no-such.sif" -- true
  assert_eq 2 "$RC" "[$U] a missing SIF"
  assert_contains "$ERR" "no image at 'sif:$WORK/no-such.sif'" "[$U] missing SIF message"
  lx "$U" -- exec "oci:$WORK/no-such-layout" -- true
  [ "$RC" = 2 ] || [ "$RC" = 4 ] || fail "[$U] missing OCI layout: exit $RC"
  assert_contains "$ERR" "lockstep: error:" "[$U] missing OCI layout message"
  lx "$U" -- exec "$WORK/img/out/layout" -- true
  assert_eq 0 "$RC" "[$U] a bare OCI layout path runs as oci:PATH does ($ERR)"
  lx "$U" -- exec --net wifi "$IMG" -- true
  assert_eq 2 "$RC" "[$U] --net with an unknown value"
  pass "[$U] errors before the command: missing image (2), bad options (2); a bare OCI layout path runs"
done

# ---------------------------------------------------------------------------------------------
# Nothing left behind: mounts, processes, loop devices, FUSE daemons.
assert_eq "" "$(grep -F "$WORK" /proc/self/mountinfo || true)" "mounts left under the suite's directory"
if [ -n "$TUSER" ]; then
  # Zombies don't count: a command's child killed by its trap (the SIGTERM case) may still wait for
  # this machine's init to reap it, long after lockstep and its own children are gone.
  left=$(ps -u "$TUSER" -o pid=,stat=,args= | awk '$2 !~ /^Z/' || true)
  [ -z "$left" ] || fail "processes of $TUSER left: $left"
fi
[ -z "$(pgrep -f "squashfuse.*$WORK" || true)" ] || fail "squashfuse left running"
if command -v losetup >/dev/null; then
  assert_eq "" "$(losetup -j "$SIF" 2>/dev/null)" "loop devices still attached to the SIF"
fi
[ -z "$(find "$WORK/cache/tmp" "$WORK/cache-user/tmp" -name 'sif-mnt-*' 2>/dev/null)" ] || fail "FUSE mount points left"
pass "no mounts, processes, loop devices or FUSE mount points left behind"

lx root -- exec --help
assert_contains "$OUT" "127 the command was not found" "exit codes in --help"
assert_contains "$OUT" "Examples:" "examples in --help"
pass "--help documents the exit codes and gives examples"

done_testing
