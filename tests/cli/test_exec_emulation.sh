#!/usr/bin/env bash
# Another architecture's image under qemu-user (issue 38; runner/runtime/emulation.hpp): an arm64
# image of Debian's busybox-static, locked from deb.debian.org's arm64 indexes and built by
# lockstep, runs on this x86_64 machine through a binfmt_misc of the container's own:
#   - `lockstep exec` takes the architecture from the image config (a SIF's from its header) and
#     says it emulates; the program and every program it starts run as aarch64 (`uname -m`);
#   - the host is untouched: no handler appears in the host's binfmt_misc, and the same aarch64
#     binary, unpacked by umoci, still fails on the host with "Exec format error" (126);
#   - as root (every id mapped to itself, --user honoured) and unprivileged (uid 65534, a nested
#     user namespace for the caller's ids), and for a root directory with --platform;
#   - a platform qemu-user doesn't emulate, and a malformed --platform, are exit 2.
# Needs Linux 6.7+ (a binfmt_misc per user namespace) or a host handler with F; skipped otherwise
# (never in CI, whose kernel has it).
source "$(dirname "$0")/lib.sh"
need jq umoci setpriv siftool
need_arm64_emulation
need_debian_mirror

cat >lockstep.yaml <<'YAML'
lockstep: 1
name: arm-busybox
platform: linux/arm64
repos:
  - {apt: http://deb.debian.org/debian, suite: bookworm, components: [main], keyring: /usr/share/keyrings/debian-archive-keyring.gpg}
packages:
  apt: [busybox-static]
outputs: {oci: out, sif: out.sif}
YAML
ls_run build
assert_eq 0 "$RC" "build of an arm64 image: $ERR"
assert_eq "arm64 arm64" "$(jq -r '"\(.artifacts[0].arch) " + .platform' lockstep.lock | sed 's|linux/||')" \
  "busybox-static locked from Debian's arm64 index"
config=$(jq -r '.manifests[0].digest' out/index.json | cut -d: -f2)
config=$(jq -r .config.digest "out/blobs/sha256/$config" | cut -d: -f2)
assert_eq "linux arm64" "$(jq -r '"\(.os) \(.architecture)"' "out/blobs/sha256/$config")" "the image config says linux/arm64"
pass "an arm64 image of busybox-static, locked from deb.debian.org's arm64 index"

host_handlers() { ls /proc/sys/fs/binfmt_misc 2>/dev/null | LC_ALL=C sort | tr '\n' ' '; }
before=$(host_handlers)
ls_run exec oci:out -- /bin/busybox uname -m
assert_eq 0 "$RC" "exec of the arm64 image: $ERR"
assert_eq aarch64 "$OUT" "the program runs as aarch64"
assert_contains "$ERR" "emulating linux/arm64 on this linux/amd64 machine with qemu-user (qemu-aarch64" "it says so"
ls_run exec oci:out -- /bin/busybox sh -c '/bin/busybox uname -m; /bin/busybox sh -c "/bin/busybox uname -m"'
assert_eq "aarch64
aarch64" "$OUT" "the programs it starts, and theirs, run as aarch64 too: $ERR"
pass "lockstep exec runs the arm64 image under qemu-user, children included"

assert_contains "$(siftool header out.sif)" "Primary Architecture: arm64" "siftool sees an arm64 SIF"
ls_run exec out.sif -- /bin/busybox uname -m
assert_eq 0 "$RC" "exec of the arm64 SIF: $ERR"
assert_eq aarch64 "$OUT" "the SIF's architecture is read from its header"
pass "an arm64 SIF runs the same way (as root: extracted, not loop-mounted)"

assert_eq "$before" "$(host_handlers)" "the host's binfmt_misc is unchanged"
umoci unpack --rootless --image out:latest bundle >/dev/null || fail "umoci can't unpack the arm64 image"
rc=0
bundle/rootfs/bin/busybox true 2>/dev/null || rc=$?
if grep -qs '^flags:.*F' /proc/sys/fs/binfmt_misc/qemu-aarch64; then
  echo "note: the host has its own qemu-aarch64 handler; the 126 check is skipped" >&2
else
  assert_eq 126 "$rc" "the same aarch64 binary still can't run on the host (Exec format error)"
fi
pass "the host is untouched: no handler registered there, aarch64 binaries still don't run on it"

if [ "$(id -u)" = 0 ]; then
  ls_run exec --user 1000:1000 oci:out -- /bin/busybox id
  assert_eq 0 "$RC" "exec --user 1000:1000 as root: $ERR"
  assert_contains "$OUT" "uid=1000 gid=1000" "root's container maps every id: --user switches for real"
  nobody_home="$WORK/nobody"
  mkdir -p "$nobody_home" && chown 65534:65534 "$nobody_home"
  chmod o+rx "$WORK" "$PWD" bundle
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$nobody_home" LOCKSTEP_CACHE="$nobody_home/cache" \
    "$LOCKSTEP" exec --platform linux/arm64 "dir:$PWD/bundle/rootfs" -- /bin/busybox sh -c '/bin/busybox uname -m; /bin/busybox id -u' 2>"$WORK/nobody.err") ||
    fail "exec as uid 65534: $(cat "$WORK/nobody.err")"
  assert_eq "aarch64
65534" "$out" "unprivileged: aarch64, as the caller's own uid"
  pass "as root (every id mapped, --user honoured) and unprivileged (the caller's uid), a root directory with --platform"
fi

ls_run exec --platform linux/mips64le "dir:$PWD/bundle/rootfs" -- /bin/busybox true
assert_eq 2 "$RC" "an architecture lockstep doesn't emulate: $ERR"
assert_contains "$ERR" "lockstep emulates amd64, arm64" "the ones it does are named"
ls_run exec --platform arm64 oci:out -- /bin/busybox true
assert_eq 2 "$RC" "a malformed --platform: $ERR"
pass "unknown and malformed platforms are refused"

done_testing
