#!/usr/bin/env bash
# `run:` steps: each runs in the build sandbox over the image so far and becomes a layer with the
# files it wrote and whiteouts for what it deleted; rebuilding gives the same digest, as root and
# as an unprivileged user; the network is off unless a step asks; a failing step fails the build.
source "$(dirname "$0")/lib.sh"
need jq zcat tar

make_busybox_root rootfs
echo "welcome" >rootfs/etc/motd
mkdir -p rootfs/opt/old && echo a >rootfs/opt/old/a
cat >lockstep.yaml <<'YAML'
lockstep: 1
name: steps
copy: [{from: ./rootfs, to: /, mode: preserve}]
env: {GREETING: hello}
run:
  - echo "$GREETING" > /etc/greeting && rm /etc/motd && echo step-output
  - mkdir -p /var/log /opt/x && echo log > /var/log/dpkg.log && touch /opt/x/y && rm -r /opt/old
  - test "$(grep -c ':' /proc/net/dev)" = 1   # only lo: no network
  - test "$SOURCE_DATE_EPOCH" = 0 && test "$(id -u)" = 0 && test "$(pwd)" = /
outputs: {oci: out}
YAML

ls_run build
assert_eq 0 "$RC" "build with run steps: $ERR"
digest=$(last_line "$OUT")
assert_eq 1 "$(printf '%s\n' "$OUT" | wc -l)" "a step's output stays off stdout (only the digest is printed)"
assert_contains "$ERR" "step-output" "the step's output is shown"
pass "a spec with four run steps builds"

manifest=$(jq -r '.manifests[0].digest' out/index.json | cut -d: -f2)
assert_eq 5 "$(jq '.layers | length' out/blobs/sha256/"$manifest")" "one layer for copy, one per step"
l1=$(layer_listing out 1)
assert_eq "d 0/0 etc/
- 0/0 etc/.wh.motd
- 0/0 etc/greeting" "$l1" "step 1's layer holds the new file and a whiteout for the deleted one"
pass "a step that adds a file and deletes another gives the file and a whiteout"
l2=$(layer_listing out 2)
assert_contains "$l2" "- 0/0 opt/x/y" "step 2 adds /opt/x/y"
assert_contains "$l2" "- 0/0 opt/.wh.old" "step 2 deletes /opt/old"
case "$l2" in *dpkg.log*) fail "the dpkg log must be dropped from the layer: $l2" ;; esac
pass "logs that record the build are dropped"
skopeo inspect --raw "oci:out" >/dev/null 2>&1 || need skopeo
umoci raw unpack --image out:latest unpacked >/dev/null 2>&1 || need umoci
assert_eq "hello" "$(cat unpacked/etc/greeting)" "umoci sees the step's file"
[ ! -e unpacked/etc/motd ] || fail "umoci still sees the deleted /etc/motd"
[ ! -e unpacked/opt/old ] || fail "umoci still sees the deleted /opt/old"
[ -e unpacked/opt/x/y ] || fail "umoci misses /opt/x/y"
[ ! -e unpacked/proc ] && [ ! -e unpacked/etc/resolv.conf ] || fail "sandbox mount points leaked into the image"
pass "umoci applies the layers: the step's files are there, the deleted ones gone"

# Rebuilding: from the cache (nothing runs), and from scratch (every step runs again).
ls_run build
assert_eq "$digest" "$(last_line "$OUT")" "cached rebuild digest"
assert_contains "$ERR" "(cached)" "steps come from the layer cache"
case "$ERR" in *step-output*) fail "a cached step ran again" ;; esac
rm -rf "$LOCKSTEP_CACHE" out
(umask 077 && export LC_ALL=C TZ=Asia/Tokyo && ls_run build && printf '%s\n' "$OUT" >rebuild.out)
assert_eq "$digest" "$(last_line "$(cat rebuild.out)")" "clean rebuild digest (umask 077, another TZ)"
pass "two builds of run steps give the same digest, whatever the umask and time zone ($digest)"

# As an unprivileged user: the same image, bit for bit.
if [ "$(id -u)" = 0 ] && command -v useradd >/dev/null; then
  user="lsrun$$"
  useradd -M -d /nonexistent -s /bin/sh "$user"
  trap 'userdel "$user" 2>/dev/null || true; cd /; rm -rf "$WORK"' EXIT
  chmod 755 "$WORK"
  chown -R "$user" "$WORK"
  set +e
  uout=$(runuser -u "$user" -- env LOCKSTEP_CACHE="$WORK/usercache" "$LOCKSTEP" build --oci "$WORK/userout" \
    "$WORK/lockstep.yaml" 2>"$WORK/user.err")
  urc=$?
  set -e
  assert_eq 0 "$urc" "rootless build: $(cat "$WORK/user.err")"
  assert_eq "$digest" "$(last_line "$uout")" "rootless build digest"
  pass "an unprivileged user's build gives the same digest as root's"
fi

# The network is off by default: a step that needs it fails; network: true marks the image impure.
cat >net.yaml <<'YAML'
lockstep: 1
name: net
copy: [{from: ./rootfs, to: /, mode: preserve}]
run:
  - {sh: "test $(grep -c ':' /proc/net/dev) -ge 1", network: true}
outputs: {oci: netout}
YAML
ls_run build net.yaml
assert_eq 0 "$RC" "network step: $ERR"
nm=$(jq -r '.manifests[0].digest' netout/index.json | cut -d: -f2)
assert_eq "true" "$(jq -r '.annotations["dev.lockstep.impure"]' netout/blobs/sha256/"$nm")" "impure annotation"
assert_eq "null" "$(jq -r '.annotations["dev.lockstep.impure"]' out/blobs/sha256/"$manifest")" "pure build"
pass "a step with network: true marks the image impure"

# A failing step fails the build with its status and location; nothing is written.
cat >fail.yaml <<'YAML'
lockstep: 1
name: fail
copy: [{from: ./rootfs, to: /, mode: preserve}]
run:
  - echo before
  - echo broken >&2; exit 3
outputs: {oci: failout}
YAML
ls_run build fail.yaml
assert_eq 1 "$RC" "failing step exit code"
assert_contains "$ERR" "lockstep: error: run[1] ($WORK/fail.yaml:6): \`echo broken >&2; exit 3\` exited with status 3" "message"
assert_contains "$ERR" "broken" "the step's stderr is shown"
[ ! -e failout ] || fail "a failed build wrote its output"
pass "a failing step fails the build (exit 1) naming the step; nothing is written"

# No shell in the image: say so.
mkdir -p empty && echo x >empty/file
cat >nosh.yaml <<'YAML'
lockstep: 1
name: nosh
copy: [{from: ./empty, to: /}]
run: [echo hi]
YAML
ls_run build nosh.yaml
assert_eq 1 "$RC" "no-shell exit code"
assert_contains "$ERR" "the image has no /bin/sh to run the step with" "no-shell message"
pass "a step over an image without /bin/sh says what is missing"

done_testing
