#!/usr/bin/env bash
# Rootless builds equal root builds (issue 17, docs/rootless.md). An unprivileged user the suite
# creates (no /etc/subuid range) builds examples/mpi-hello --locked: the same manifest digest and
# the same SIF bytes as root's build. Peers judge the image: umoci unpacks it as root keeping the
# owners, dpkg --root --verify is clean, stat shows /etc/shadow root:shadow 0640, /var/mail
# root:mail 2775 and Debian's setgid binaries. A run: step adding a user and giving it a directory
# gives the same layer root and rootless, a device node the same entry; with a subordinate range
# (--userns subuid; the suite writes /etc/subuid) the same digests, and a step that switches to
# that user (setpriv) creates the user's files as under root; the supervisor refuses
# anything outside the image's root (the host's /dev/null keeps its owner and gets no xattr); a
# kernel without seccomp user notification is a clear exit 3.
source "$(dirname "$0")/lib.sh"
need jq umoci dpkg stat getfattr useradd runuser curl
add_test_user lsrl
[ -n "$TUSER" ] || { echo "SKIP: needs root to create an unprivileged user" >&2; exit 77; }
if ! curl -fsS --max-time 20 -o /dev/null http://deb.debian.org/debian/dists/bookworm/InRelease 2>/dev/null; then
  [ -n "${CI:-}" ] && fail "deb.debian.org is not reachable"
  echo "SKIP: deb.debian.org is not reachable" >&2
  exit 77
fi
# useradd may give new users subordinate ids (login.defs SUB_UID_COUNT): this user has none.
for f in /etc/subuid /etc/subgid; do
  [ ! -f "$f" ] || sed -i "/^$TUSER:/d" "$f"
done

mkdir -p ucache && chown "$TUSER" ucache
# as_user CMD...: runs lockstep as the unprivileged user with its own cache; OUT, ERR, RC.
as_user() {
  set +e
  OUT=$(runuser -u "$TUSER" -- env LOCKSTEP_CACHE="$WORK/ucache" "$@" 2>"$WORK/user.err")
  RC=$?
  ERR=$(cat "$WORK/user.err")
  set -e
}

# ---- examples/mpi-hello, root and rootless -------------------------------------------------------
# Root's build is the mpi_hello fixture's (built as root this run, from the same lock).
mpi_hello_fixture root/ex
root_digest=$MPI_HELLO_DIGEST
mkdir -p user && cp -r "$LOCKSTEP_SOURCE_DIR/examples/mpi-hello" user/ex
sed -i 's|oci: ../../build/examples/mpi-hello|oci: out|; s|sif: ../../build/examples/mpi-hello.sif|sif: out.sif|' \
  user/ex/lockstep.yaml
chown -R "$TUSER" user
as_user "$LOCKSTEP" build --locked user/ex/lockstep.yaml
assert_eq 0 "$RC" "rootless build of examples/mpi-hello: $ERR"
user_digest=$(last_line "$OUT")
assert_eq "$root_digest" "$user_digest" "manifest digest, root vs rootless"
assert_eq "$(sha256sum <root/ex/out.sif)" "$(sha256sum <user/ex/out.sif)" "SIF sha256, root vs rootless"
case "$ERR" in *"Use of uninitialized value"*) fail "the configure step printed Perl warnings: $ERR" ;; esac
pass "examples/mpi-hello: root and an unprivileged user without subordinate ids build the same image ($user_digest)"

umoci unpack --image user/ex/out:latest bundle >/dev/null 2>&1 || fail "umoci can't unpack the rootless image"
r=bundle/rootfs
verify=$(dpkg --root="$r" --verify 2>&1) || fail "dpkg --verify failed: $verify"
assert_eq "" "$verify" "dpkg --root --verify reports nothing"
shadow_gid=$(awk -F: '$1=="shadow"{print $3}' "$r/etc/group")
mail_gid=$(awk -F: '$1=="mail"{print $3}' "$r/etc/group")
assert_eq "0:$shadow_gid 640" "$(stat -c '%u:%g %a' "$r/etc/shadow")" "/etc/shadow root:shadow 0640"
assert_eq "0:$shadow_gid 640" "$(stat -c '%u:%g %a' "$r/etc/gshadow")" "/etc/gshadow root:shadow 0640"
assert_eq "0:$mail_gid 2775" "$(stat -c '%u:%g %a' "$r/var/mail")" "/var/mail root:mail 2775"
for f in usr/bin/chage usr/bin/expiry; do
  assert_eq "0:$shadow_gid 2755" "$(stat -c '%u:%g %a' "$r/$f")" "/$f setgid shadow"
done
pass "inside the rootless image: dpkg --verify clean, shadow, mail spool and setgid binaries owned as Debian sets them"

# ---- a run: step that adds a user and gives it a directory -----------------------------------------
base_dir=$WORK/user/ex/out
# steps_spec FILE NAME OUTPUT STEP...: a spec over the rootless mpi-hello image with these run: steps.
steps_spec() {
  local file=$1 name=$2 out=$3 step
  shift 3
  {
    printf 'lockstep: 1\nname: %s\nbase: {oci: %s}\nrun:\n' "$name" "$base_dir"
    for step in "$@"; do printf "  - '%s'\n" "$step"; done
    printf 'outputs: {oci: %s}\n' "$out"
  } >"$file"
}
steps_spec root/steps.yaml test/rootless-steps out-steps \
  'useradd -m app && install -d -o app -g app /srv/app && chown -R app: /srv/app && touch /srv/app/data && chown app:app /srv/app/data' \
  'mknod /opt/null c 1 3 && chmod 0666 /opt/null'
cp root/steps.yaml user/steps.yaml
chown "$TUSER" user/steps.yaml
ls_run lock root/steps.yaml
assert_eq 0 "$RC" "lock the steps spec: $ERR"
cp root/steps.lock user/steps.lock && chown "$TUSER" user/steps.lock
ls_run build --locked root/steps.yaml
assert_eq 0 "$RC" "root build of the steps: $ERR"
root_steps=$(last_line "$OUT")
as_user "$LOCKSTEP" build --locked user/steps.yaml
assert_eq 0 "$RC" "rootless build of the steps: $ERR"
assert_eq "$root_steps" "$(last_line "$OUT")" "the steps' image digest, root vs rootless"
umoci unpack --image user/out-steps:latest b2 >/dev/null 2>&1 || fail "umoci can't unpack the steps image"
app_ids=$(awk -F: '$1=="app"{print $3"/"$4}' b2/rootfs/etc/passwd)
[ -n "$app_ids" ] || fail "useradd made no app user"
manifest=$(jq -r '.manifests[0].digest' user/out-steps/index.json | cut -d: -f2)
listing=""
for i in $(seq 0 $(($(jq '.layers|length' "user/out-steps/blobs/sha256/$manifest") - 1))); do
  listing+=$(layer_listing user/out-steps "$i")$'\n'
done
assert_contains "$listing" "d $app_ids srv/app/" "the layer gives /srv/app to app"
assert_contains "$listing" "- $app_ids srv/app/data" "and /srv/app/data"
assert_contains "$listing" "d $app_ids home/app/" "useradd -m's home belongs to app"
assert_contains "$listing" "c 0/0 opt/null" "mknod's device node is a character device in the layer"
assert_eq "0:$shadow_gid 640" "$(stat -c '%u:%g %a' b2/rootfs/etc/shadow)" "/etc/shadow stays root:shadow 0640 after useradd"
pass "run: steps (useradd, install -o, chown -R, mknod) give the same layers root and rootless"

# ---- the supervisor never touches anything outside the image's root --------------------------------
before=$(stat -c '%u:%g %a' /dev/null)
cat >user/escape.yaml <<YAML
lockstep: 1
name: test/rootless-escape
base: {oci: $base_dir}
run:
  - |
    for t in /dev/null /proc/self/fd/0 /proc/1/root/etc/passwd /tmp; do
      if chown 1234:1234 "\$t" 2>/dev/null; then echo "chown \$t succeeded"; exit 1; fi
    done
    ln -s /proc/1/root/dev/null /hop && if chown 1234 /hop 2>/dev/null; then echo "chown via a magic link succeeded"; exit 1; fi
    if mknod /dev/evil c 1 3 2>/dev/null; then echo "mknod on /dev succeeded"; exit 1; fi
    chown 1234:1234 /../../../etc/hostname 2>/dev/null || true
    echo escape-probe-done
outputs: {oci: out-escape}
YAML
chown "$TUSER" user/escape.yaml
as_user "$LOCKSTEP" lock user/escape.yaml
assert_eq 0 "$RC" "lock the escape spec: $ERR"
as_user "$LOCKSTEP" build --locked user/escape.yaml
assert_eq 0 "$RC" "the probe step: $ERR"
assert_contains "$ERR" "escape-probe-done" "the probe ran to its end"
assert_eq "$before" "$(stat -c '%u:%g %a' /dev/null)" "the host's /dev/null keeps its owner and mode"
case "$(getfattr -d -m - /dev/null 2>/dev/null)" in *lockstep*) fail "the host's /dev/null got a lockstep xattr" ;; esac
[ ! -e /etc/hostname ] || case "$(getfattr -d -m - /etc/hostname 2>/dev/null)" in *lockstep*) fail "host /etc/hostname got an xattr" ;; esac
pass "the supervisor refuses chown and mknod outside the image's root; host files are unchanged"

# ---- --userns subuid: a subordinate range, mapped by newuidmap/newgidmap -----------------------------
need newuidmap newgidmap
as_user "$LOCKSTEP" build --userns subuid user/escape.yaml
assert_eq 3 "$RC" "--userns subuid without a range: exit 3 ($ERR)"
assert_contains "$ERR" "has no range in /etc/subuid" "the error names the missing range"
assert_contains "$ERR" "--userns single" "and the way out"
# The suite gives the user a range now (removed with the user on exit).
for f in /etc/subuid /etc/subgid; do
  printf '%s:%s:65536\n' "$TUSER" 300000 >>"$f"
done
mkdir -p sub && cp -r user/ex sub/ex && rm -rf sub/ex/out sub/ex/out.sif && chown -R "$TUSER" sub
mkdir -p ucache3 && chown "$TUSER" ucache3
as_user env LOCKSTEP_CACHE="$WORK/ucache3" "$LOCKSTEP" build --userns subuid --locked sub/ex/lockstep.yaml
assert_eq 0 "$RC" "a subuid build of examples/mpi-hello: $ERR"
assert_eq "$root_digest" "$(last_line "$OUT")" "manifest digest, root vs --userns subuid"
assert_eq "$(sha256sum <root/ex/out.sif)" "$(sha256sum <sub/ex/out.sif)" "SIF sha256, root vs --userns subuid"
# With real ids a process that switches to a user creates that user's files, as under root.
steps_spec root/setpriv.yaml test/rootless-setpriv out-setpriv \
  'useradd -m app && install -d -o app -g app -m 0700 /srv/app && setpriv --reuid=app --regid=app --clear-groups touch /srv/app/by-app'
cp root/setpriv.yaml sub/setpriv.yaml
ls_run lock root/setpriv.yaml
assert_eq 0 "$RC" "lock the setpriv spec: $ERR"
cp root/setpriv.lock sub/setpriv.lock && chown -R "$TUSER" sub
ls_run build --locked root/setpriv.yaml
assert_eq 0 "$RC" "root build of the setpriv step: $ERR"
root_setpriv=$(last_line "$OUT")
as_user env LOCKSTEP_CACHE="$WORK/ucache3" "$LOCKSTEP" build --userns subuid --locked sub/setpriv.yaml
assert_eq 0 "$RC" "subuid build of the setpriv step: $ERR"
assert_eq "$root_setpriv" "$(last_line "$OUT")" "the setpriv step's image, root vs --userns subuid"
cp root/steps.yaml root/steps.lock sub/ && chown -R "$TUSER" sub
as_user env LOCKSTEP_CACHE="$WORK/ucache3" "$LOCKSTEP" build --userns subuid --locked sub/steps.yaml
assert_eq 0 "$RC" "subuid build of the useradd steps: $ERR"
assert_eq "$root_steps" "$(last_line "$OUT")" "the useradd steps' image, root vs --userns subuid"
pass "--userns subuid (the test writes /etc/subuid): mpi-hello, the useradd steps and a setpriv step equal root's"

# ---- no seccomp user notification: a clear error ---------------------------------------------------
mkdir -p ucache2 && chown "$TUSER" ucache2
as_user env LOCKSTEP_CACHE="$WORK/ucache2" LOCKSTEP_TEST_SECCOMP_API=4 "$LOCKSTEP" build user/escape.yaml
assert_eq 3 "$RC" "a kernel without user notification: exit 3 ($ERR)"
assert_contains "$ERR" "seccomp user notification" "the error names what is missing"
assert_contains "$ERR" "build as root, or on a newer kernel" "and what to do"
pass "without seccomp user notification a rootless build stops with exit 3 and says what to do"

done_testing
