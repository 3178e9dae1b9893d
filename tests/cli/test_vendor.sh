#!/usr/bin/env bash
# Vendored locks (docs/vendor.md): a lock with debs (an apt repository and a flat one) and wheels
# (a wheelhouse) is vendored to a directory and to the real docker-registry; then, with every .deb and
# .whl gone from upstream, an empty store and --offline, the build from each mirror (--mirror, the
# spec's `mirrors:`, LOCKSTEP_MIRRORS) has the online build's digest. Offline without a mirror that
# has a file is exit 1 naming it; a mirror file that doesn't match its sha256 is refused (exit 2) and
# nothing is stored; a git source builds offline from its vendored tree export once its repository is
# gone; a second lock vendored into the same directory merges the index.
source "$(dirname "$0")/lib.sh"
source "$LOCKSTEP_SOURCE_DIR/tests/cli/registry.sh"
need jq python3 gpg gpgconf dpkg-deb dpkg skopeo docker-registry sha256sum git

fixture_repo make-repo.sh repo >/dev/null 2>&1 || fail "make-repo.sh failed"
make_python_apt_repo "$WORK/pyrepo"
mkdir -p wheelhouse
make_wheel wheelhouse demo 1.0 '' '' 'demo/__init__.py=def main():\n    print("demo")\n' >/dev/null
make_wheel wheelhouse dep 1.0 '' '' 'dep/__init__.py=VALUE = 42\n' >/dev/null
write_spec() { # FILE NAME APT...
  local file=$1 name=$2
  shift 2
  cat >"$file" <<YAML
lockstep: 1
name: $name
repos:
  - {apt: repo, suite: lstest, components: [main], keyring: repo/keyring.gpg}
  - {apt: pyrepo, flat: true, keyring: pyrepo/keyring.gpg}
  - {wheels: wheelhouse}
packages:
  apt: [$(IFS=,; echo "$*")]
  pip: ["demo==1.0", "dep==1.0"]
YAML
}
write_spec lockstep.yaml vendortest ls-app python3
ls_run lock
assert_eq 0 "$RC" "lock: $ERR"
ls_run build --locked --oci online
assert_eq 0 "$RC" "online build: $ERR"
online=$(last_line "$OUT")
nfiles=$(jq '[.artifacts[] | select(.kind == "deb" or .kind == "wheel")] | length' lockstep.lock)

# ---- vendor to a directory and a registry ------------------------------------------------------
ls_run vendor --to vend --json
assert_eq 0 "$RC" "vendor --to vend: $ERR"
assert_eq "$((nfiles + 1))" "$(jq .files <<<"$OUT")" "every deb and wheel, and the lock"
assert_eq "$((nfiles + 1))" "$(jq '.files | length' vend/lockstep-vendor.json)" "the index lists them"
for f in vend/blobs/sha256/*; do
  [ "$(sha256sum <"$f" | cut -d' ' -f1)" = "$(basename "$f")" ] || fail "$f is not named by its sha256"
done
cmp -s lockstep.lock "vend/blobs/sha256/$(sha256sum <lockstep.lock | cut -d' ' -f1)" || fail "the lock is not vendored"
registry_up hub plain
ls_run vendor --tls-verify=false --to "docker://$REG_HUB_HOST/team/vendor"
assert_eq 0 "$RC" "vendor --to docker://: $ERR"
vref=$(last_line "$OUT")
assert_eq "application/vnd.lockstep.vendor.v1+json $((nfiles + 2))" \
  "$(skopeo inspect --tls-verify=false --raw "$vref" | jq -r '"\(.artifactType) \(.layers | length)"')" \
  "skopeo reads the vendor manifest: the index and every file"
pass "vendor writes every file by sha256 with an index, to a directory and to a registry"

# ---- upstream gone: builds from the mirrors only -------------------------------------------------
find repo pyrepo wheelhouse \( -name '*.deb' -o -name '*.whl' \) -delete
LOCKSTEP_CACHE="$WORK/c1" ls_run build --locked --offline --mirror vend --oci out1
assert_eq 0 "$RC" "offline build from the directory: $ERR"
assert_eq "$online" "$(last_line "$OUT")" "the same digest as online, from the vendor directory"
LOCKSTEP_CACHE="$WORK/c2" ls_run build --locked --offline --tls-verify=false \
  --mirror "docker://$REG_HUB_HOST/team/vendor" --oci out2
assert_eq 0 "$RC" "offline build from the registry: $ERR"
assert_eq "$online" "$(last_line "$OUT")" "the same digest as online, from the registry"
LOCKSTEP_CACHE="$WORK/c3" LOCKSTEP_MIRRORS="$WORK/nothing-here $WORK/vend" ls_run build --locked --offline --oci out3
assert_eq 0 "$RC" "offline build with LOCKSTEP_MIRRORS: $ERR"
assert_eq "$online" "$(last_line "$OUT")" "the same digest, mirrors from the environment"
cp lockstep.yaml spec-mirrors.yaml
cp lockstep.lock spec-mirrors.lock
printf 'mirrors: [vend]\n' >>spec-mirrors.yaml
LOCKSTEP_CACHE="$WORK/c4" ls_run build --locked --offline spec-mirrors.yaml --oci out4
assert_eq 0 "$RC" "offline build with the spec's mirrors: $ERR"
assert_eq "$online" "$(last_line "$OUT")" "the same digest, mirrors from the spec"
pass "with upstream gone, --offline builds from a directory, a registry, LOCKSTEP_MIRRORS and the spec's mirrors give the online digest"

# ---- refusals ------------------------------------------------------------------------------------
LOCKSTEP_CACHE="$WORK/c5" ls_run build --locked --offline --oci out5
assert_eq 1 "$RC" "offline without a mirror"
assert_contains "$ERR" "is in no mirror" "says which file no mirror has"
ls_run build --offline --oci out6
assert_eq 2 "$RC" "--offline needs --locked"
cp -r vend vbad
victim=$(jq -r '[.files[] | select(.kind == "deb")][0].sha256' vbad/lockstep-vendor.json)
size=$(stat -c %s "vbad/blobs/sha256/$victim")
rm "vbad/blobs/sha256/$victim"
head -c "$size" /dev/zero >"vbad/blobs/sha256/$victim"
LOCKSTEP_CACHE="$WORK/c6" ls_run build --locked --offline --mirror vbad --oci out7
assert_eq 2 "$RC" "a corrupt mirror file"
assert_contains "$ERR" "does not match its sha256" "says the file does not match"
[ ! -e "$WORK/c6/blobs/sha256/$victim" ] || fail "the corrupt file was stored"
[ ! -e out7 ] || fail "an output was written"
pass "offline without the file (exit 1), --offline without --locked (exit 2), a corrupt mirror file (exit 2, nothing stored)"

# ---- git sources: the tree export the lock pins ---------------------------------------------------
# A repository with what a tree export must keep: an executable, a symlink, nested directories.
make_tagged_git_repo gp/repo v1
mkdir -p gp/repo/bin gp/repo/lib/deep
printf '#!/bin/sh\necho hi\n' >gp/repo/bin/run && chmod 755 gp/repo/bin/run
printf 'x\n' >gp/repo/lib/deep/data.txt
ln -s ../lib/deep/data.txt gp/repo/bin/data
git -C gp/repo add -A && git -C gp/repo -c user.name=t -c user.email=t@example.com commit -qm v2 &&
  git -C gp/repo tag -f v1 >/dev/null
printf 'lockstep: 1\nname: gitsrc\ncopy: [{git: ./repo, rev: v1, to: /src}]\n' >gp/lockstep.yaml
ls_run lock gp/lockstep.yaml
assert_eq 0 "$RC" "lock with a git source: $ERR"
ls_run build --locked gp/lockstep.yaml --oci gp/online
assert_eq 0 "$RC" "online build with a git source: $ERR"
gonline=$(last_line "$OUT")
mv gp/repo gp/repo.gone # the git host is gone: vendoring exports from the build's git cache
export_sha=$(jq -r '.artifacts[] | select(.kind == "git") | .sha256' gp/lockstep.lock)
ls_run vendor gp/lockstep.lock --to gvend --json
assert_eq 0 "$RC" "vendor a lock with a git source: $ERR"
assert_eq "git" "$(jq -r --arg s "$export_sha" '.files[] | select(.sha256 == $s) | .kind' gvend/lockstep-vendor.json)" \
  "the index lists the tree export by the lock's sha256"
assert_eq "app.txt bin/ bin/data bin/run lib/ lib/deep/ lib/deep/data.txt" \
  "$(tar -tf "gvend/blobs/sha256/$export_sha" | tr '\n' ' ' | sed 's/ $//')" "GNU tar reads the export: the whole tree"
ls_run vendor --tls-verify=false gp/lockstep.lock --to "docker://$REG_HUB_HOST/team/gvendor"
assert_eq 0 "$RC" "vendor a git source to the registry: $ERR"
LOCKSTEP_CACHE="$WORK/c7" ls_run build --locked --offline --mirror gvend gp/lockstep.yaml --oci gp/out7
assert_eq 0 "$RC" "offline build of a git source from the directory: $ERR"
assert_eq "$gonline" "$(last_line "$OUT")" "the online digest, from the vendored tree export"
LOCKSTEP_CACHE="$WORK/c8" ls_run build --locked --offline --tls-verify=false \
  --mirror "docker://$REG_HUB_HOST/team/gvendor" gp/lockstep.yaml --oci gp/out8
assert_eq 0 "$RC" "offline build of a git source from the registry: $ERR"
assert_eq "$gonline" "$(last_line "$OUT")" "the online digest, from the registry"
LOCKSTEP_CACHE="$WORK/c9" ls_run build --locked --offline gp/lockstep.yaml --oci gp/out9
assert_eq 1 "$RC" "offline, no mirror and no clone"
assert_contains "$ERR" "no mirror has its tree export" "says what is missing and how to vendor it"
cp -r gvend gbad
chmod u+w "gbad/blobs/sha256/$export_sha"
printf 'tampered' | dd of="gbad/blobs/sha256/$export_sha" bs=1 seek=600 conv=notrunc 2>/dev/null
LOCKSTEP_CACHE="$WORK/c10" ls_run build --locked --offline --mirror gbad gp/lockstep.yaml --oci gp/out10
assert_eq 2 "$RC" "a tampered tree export"
[ ! -e "$WORK/c10/blobs/sha256/$export_sha" ] || fail "the tampered export was stored"
[ ! -e gp/out10 ] || fail "an output was written from a tampered export"
pass "a git source is vendored as its tree export from the build's git cache (GNU tar reads it) and builds offline from a directory and a registry with the online digest; missing (exit 1) and tampered (exit 2) are refused"

# ---- several locks in one directory --------------------------------------------------------------
mkdir -p second
cp -r repo pyrepo wheelhouse second/ 2>/dev/null
"$LOCKSTEP_SOURCE_DIR/tests/fixtures/apt/make-repo.sh" second/repo >/dev/null 2>&1 || fail "make-repo.sh failed"
make_python_apt_repo "$WORK/second/pyrepo"
make_wheel second/wheelhouse demo 1.0 '' '' 'demo/__init__.py=def main():\n    print("demo")\n' >/dev/null
make_wheel second/wheelhouse dep 1.0 '' '' 'dep/__init__.py=VALUE = 42\n' >/dev/null
write_spec second/lockstep.yaml vendortwo ls-tools python3
ls_run lock second/lockstep.yaml
assert_eq 0 "$RC" "second lock: $ERR"
ls_run vendor second/lockstep.lock --to vend
assert_eq 0 "$RC" "vendor the second lock: $ERR"
assert_eq 2 "$(jq '.locks | length' vend/lockstep-vendor.json)" "the index names both locks"
assert_eq "$(ls vend/blobs/sha256 | wc -l)" "$(jq '.files | length' vend/lockstep-vendor.json)" \
  "each file once, in the index and on disk"
pass "a second lock vendored into the same directory merges the index"

done_testing
