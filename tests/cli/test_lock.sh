#!/usr/bin/env bash
# `lockstep lock` and builds from the lock, against a local signed apt repository served on
# 127.0.0.1 (tests/fixtures/apt/make-repo.sh) and a local git repository:
#   - the lock pins every package with URL, size and sha256; it is deterministic;
#   - dependency closure: versions, alternatives, Provides, pins; impossible requests and conflicts
#     fail with the chain;
#   - `lock --check` names what changed; `lock --update NAME` moves only NAME;
#   - `build --locked` refuses a missing or stale lock, downloads only what the lock names, and
#     refuses a tampered .deb, index or signature without storing anything;
#   - packages without maintainer scripts install into scratch, and dpkg (the host's, reading the
#     image's database) agrees with what was installed; packages with scripts in an image without
#     a shell and dpkg fail naming the package.
source "$(dirname "$0")/lib.sh"
need jq tar gpg dpkg-deb python3 git xz skopeo

fixture_repo make-repo.sh repo --with-tools >/dev/null 2>&1 || fail "make-repo.sh failed"
start_http_server "$WORK/repo"

write_spec() { # PACKAGES [EXTRA]
  cat >lockstep.yaml <<YAML
lockstep: 1
name: locktest
repos:
  - {apt: $HTTP_URL, suite: lstest, components: [main], keyring: repo/keyring.gpg}
packages:
  apt: [$1]
${2:-}
outputs: {oci: out}
YAML
}

# ---- lock --------------------------------------------------------------------------------------
write_spec "ls-app, ls-app2, ls-user, ls-tools"
ls_run lock --check
assert_eq 1 "$RC" "lock --check without a lock"
assert_contains "$ERR" "no lock at $WORK/lockstep.lock; run \`lockstep lock\`" "lock --check says to lock"

ls_run lock
assert_eq 0 "$RC" "lock: $ERR"
[ -f lockstep.lock ] || fail "lock wrote no lockstep.lock"
jq -e . lockstep.lock >/dev/null || fail "the lock is not JSON"
names=$(jq -r '.artifacts[] | "\(.name) \(.version) \(.arch)"' lockstep.lock)
assert_eq "ls-alt 1.0-1 amd64
ls-app 1.0-1 amd64
ls-app2 1.0-1 amd64
ls-data 1.0-1 all
ls-lib 2.0-1 amd64
ls-prov 1.0-1 amd64
ls-tools 1.0-1 amd64
ls-user 1.0-1 amd64" "$names" "the closure: highest ls-lib, the alternative that exists, the provider of ls-virtual"
pass "lock resolves the closure (versions, alternatives, Provides, arch all)"

deb=$(jq -r '.artifacts[] | select(.name == "ls-lib")' lockstep.lock)
url=$(jq -r .url <<<"$deb")
assert_eq "$HTTP_URL/pool/main/l/ls-lib/ls-lib_2.0-1_amd64.deb" "$url" "the lock names the .deb's URL"
assert_eq "$(sha256sum repo/pool/main/l/ls-lib/ls-lib_2.0-1_amd64.deb | cut -d' ' -f1)" \
  "$(jq -r .sha256 <<<"$deb")" "the lock pins the .deb's sha256"
assert_eq "$(stat -c %s repo/pool/main/l/ls-lib/ls-lib_2.0-1_amd64.deb)" "$(jq -r .size <<<"$deb")" \
  "the lock pins the .deb's size"
assert_eq 8 "$(grep -c '"kind":"deb"' lockstep.lock)" "one line per artifact"
pass "every artifact has URL, size and sha256"

cp lockstep.lock lock.1
rm lockstep.lock
ls_run lock
cmp -s lock.1 lockstep.lock || fail "locking twice gives different locks: $(diff lock.1 lockstep.lock)"
ls_run lock --check
assert_eq 0 "$RC" "lock --check on a fresh lock: $ERR"
pass "the lock is deterministic and --check accepts it"

# Changing what the lock doesn't depend on keeps it fresh; adding a package makes it stale.
write_spec "ls-app, ls-app2, ls-user, ls-tools" "env: {A: b}"
ls_run lock --check
assert_eq 0 "$RC" "env changes don't make the lock stale: $ERR"
write_spec "ls-app, ls-app2, ls-user, ls-tools, ls-essential"
ls_run lock --check
assert_eq 1 "$RC" "lock --check with a new package"
assert_contains "$ERR" "packages.apt: added ls-essential" "lock --check names what changed"
ls_run build --locked
assert_eq 1 "$RC" "build --locked with a stale lock"
assert_contains "$ERR" "--locked: $WORK/lockstep.lock is stale" "build --locked says the lock is stale"
[ ! -e out ] || fail "build --locked wrote output from a stale lock"
pass "a stale lock is reported by lock --check and refused by build --locked"

# Re-locking after adding a package keeps the other versions.
ls_run lock
assert_eq 0 "$RC" "re-lock: $ERR"
assert_contains "$ERR" "+ ls-essential 1.0-1" "re-lock lists the added package"

# ---- impossible requests ------------------------------------------------------------------------
write_spec "ls-needs-new"
ls_run lock
assert_eq 2 "$RC" "unsatisfiable dependency"
assert_contains "$ERR" "ls-needs-new 1.0-1 depends on ls-lib (>= 3.0)" "the failing dependency is named"
assert_contains "$ERR" "packages.apt[0]" "the chain starts at the request"
write_spec "ls-app, ls-conflict"
ls_run lock
assert_eq 2 "$RC" "conflict"
assert_contains "$ERR" "ls-conflict" "the conflict names ls-conflict"
assert_contains "$ERR" "ls-lib" "the conflict names ls-lib"
write_spec "ls-nosuch"
ls_run lock
assert_eq 2 "$RC" "unknown package"
assert_contains "$ERR" "ls-nosuch" "the unknown package is named"
write_spec "ls-lib=9.9-9"
ls_run lock
assert_eq 2 "$RC" "a pin to a version that does not exist"
assert_contains "$ERR" "1.0-1" "the available versions are listed"
pass "unsatisfiable, conflicting, unknown and bad-pin requests fail with exit 2 and say why"

# ---- pins and --update ---------------------------------------------------------------------------
write_spec "ls-app, ls-lib=1.0-1"
ls_run lock
assert_eq 0 "$RC" "lock with a pin: $ERR"
assert_eq "1.0-1" "$(jq -r '.artifacts[] | select(.name == "ls-lib") | .version' lockstep.lock)" "the pin is honoured"
write_spec "ls-app, ls-tools"
rm -f lockstep.lock
ls_run lock
"$LOCKSTEP_SOURCE_DIR/tests/fixtures/apt/make-repo.sh" repo --with-update --with-tools >/dev/null 2>&1 ||
  fail "make-repo --with-update"
ls_run lock
assert_eq 0 "$RC" "lock after the repository changed: $ERR"
assert_eq "2.0-1" "$(jq -r '.artifacts[] | select(.name == "ls-lib") | .version' lockstep.lock)" \
  "an up-to-date lock is left alone"
ls_run lock --update ls-lib
assert_eq 0 "$RC" "lock --update ls-lib: $ERR"
assert_eq "2.1-1" "$(jq -r '.artifacts[] | select(.name == "ls-lib") | .version' lockstep.lock)" "--update moves ls-lib"
assert_contains "$ERR" "~ ls-lib 2.0-1 -> 2.1-1" "--update lists the change"
ls_run lock --update ls-nosuch
assert_eq 2 "$RC" "--update of a name that is not locked"
pass "name=version pins and lock --update NAME"

# ---- build from the lock --------------------------------------------------------------------------
ls_run build --locked
assert_eq 0 "$RC" "build --locked: $ERR"
digest=$(last_line "$OUT")
manifest=$(jq -r '.manifests[0].digest' out/index.json | cut -d: -f2)
assert_eq "$(sha256sum lockstep.lock | cut -d' ' -f1)" \
  "$(jq -r '.annotations["dev.lockstep.lock.digest"]' out/blobs/sha256/"$manifest" | cut -d: -f2)" \
  "the image records the lock's digest"
mkdir root
for layer in $(jq -r '.layers[].digest' out/blobs/sha256/"$manifest" | cut -d: -f2); do
  tar -xzf out/blobs/sha256/"$layer" -C root
done
[ -L root/bin ] && [ "$(readlink root/bin)" = usr/bin ] || fail "merged /usr: /bin is not a link to usr/bin"
[ -x root/usr/bin/ls-tool ] || fail "/bin/ls-tool was not installed under usr/bin"
[ "$(stat -c %a root/usr/bin/ls-suid)" = 4755 ] || fail "the setuid bit was lost"
[ "$(stat -c %i root/usr/share/ls-tools/a)" = "$(stat -c %i root/usr/share/ls-tools/b)" ] ||
  fail "the hard link was not kept"
status=$(dpkg-query --admindir=root/var/lib/dpkg -W -f='${Package} ${Version} ${Status}\n' | sort)
assert_eq "ls-app 1.0-1 install ok installed
ls-data 1.0-1 install ok installed
ls-lib 2.1-1 install ok installed
ls-tools 1.0-1 install ok installed" "$status" "dpkg sees every package installed"
dpkg --root=root --admindir="$WORK/root/var/lib/dpkg" --verify ls-app ls-lib ls-tools ls-data ||
  fail "dpkg --verify finds files that differ from the packages"
pass "packages without scripts install into scratch; dpkg agrees (status, --verify); merged /usr"

rm -rf out
ls_run build --locked
assert_eq "$digest" "$(last_line "$OUT")" "a rebuild from the lock gives the same digest"
LOCKSTEP_CACHE="$WORK/cache2" ls_run build --locked
assert_eq "$digest" "$(last_line "$OUT")" "a build in an empty store gives the same digest"
pass "builds from the lock are reproducible"

# ---- hostile input --------------------------------------------------------------------------------
export LOCKSTEP_CACHE="$WORK/cache3"
cp repo/pool/main/l/ls-lib/ls-lib_2.1-1_amd64.deb lib.orig
printf 'x' | dd of=repo/pool/main/l/ls-lib/ls-lib_2.1-1_amd64.deb bs=1 seek=200 conv=notrunc 2>/dev/null
ls_run build --locked
assert_eq 2 "$RC" "a tampered .deb"
assert_contains "$ERR" "the lock says sha256:" "the tampered .deb is named with both digests"
[ ! -e "$LOCKSTEP_CACHE/blobs/sha256/$(sha256sum repo/pool/main/l/ls-lib/ls-lib_2.1-1_amd64.deb | cut -d' ' -f1)" ] ||
  fail "the tampered .deb was stored"
cp lib.orig repo/pool/main/l/ls-lib/ls-lib_2.1-1_amd64.deb
pass "a tampered .deb is refused and not stored"

cp repo/dists/lstest/InRelease inrelease.orig
sed -i 's/^Suite: lstest/Suite: lstesT/' repo/dists/lstest/InRelease
ls_run lock --update
assert_eq 2 "$RC" "a tampered InRelease"
assert_contains "$ERR" "signature" "a bad signature is reported"
cp inrelease.orig repo/dists/lstest/InRelease
gpg --batch --quiet --homedir "$WORK/otherkey" --passphrase '' --quick-gen-key 'other <o@example.invalid>' \
  ed25519 sign never 2>/dev/null || { mkdir -p "$WORK/otherkey" && chmod 700 "$WORK/otherkey" &&
  gpg --batch --quiet --homedir "$WORK/otherkey" --passphrase '' --quick-gen-key 'other <o@example.invalid>' \
    ed25519 sign never; }
gpg --batch --homedir "$WORK/otherkey" --export >other.gpg
sed -i "s|keyring: repo/keyring.gpg|keyring: other.gpg|" lockstep.yaml
ls_run lock --update
assert_eq 2 "$RC" "a repository signed by a key not in the keyring"
assert_contains "$ERR" "NO_PUBKEY" "the missing key is named"
sed -i "s|keyring: other.gpg|keyring: repo/keyring.gpg|" lockstep.yaml
xz -dc repo/dists/lstest/main/binary-amd64/Packages.xz | sed 's/^Size: .*/Size: 1/' | xz >packages.tampered
cp repo/dists/lstest/main/binary-amd64/Packages.xz packages.orig
cp packages.tampered repo/dists/lstest/main/binary-amd64/Packages.xz
LOCKSTEP_CACHE="$WORK/cache4" ls_run lock --update
assert_eq 2 "$RC" "a tampered Packages index"
assert_contains "$ERR" "Packages.xz" "the tampered index is named"
cp packages.orig repo/dists/lstest/main/binary-amd64/Packages.xz
pass "a tampered InRelease, an unknown signing key and a tampered index are refused"

# A mirror serving another suite under the requested name, and a component the Release doesn't list.
cp -r repo/dists/lstest repo/dists/other
sed -i 's/suite: lstest/suite: other/' lockstep.yaml
ls_run lock --update
assert_eq 2 "$RC" "a Release for another suite"
assert_contains "$ERR" "the Release is for suite 'lstest' (codename 'lstest'), not 'other' as the spec asks" \
  "the suite mismatch is named"
sed -i 's/suite: other/suite: lstest/; s/components: \[main\]/components: [contrib]/' lockstep.yaml
ls_run lock --update
assert_eq 2 "$RC" "a component the repository doesn't have"
assert_contains "$ERR" "the Release lists no contrib/binary-amd64/Packages index: the repository has no packages for amd64 in component 'contrib'" \
  "the missing component is named"
sed -i 's/components: \[contrib\]/components: [main]/' lockstep.yaml
pass "a Release for another suite and a missing component are refused"

# A hand-edited lock: the build still checks what the lock claims against what it gets.
cp lockstep.lock lock.good
jq -c '(.artifacts[] | select(.name == "ls-tools") | .version) = "9.9-9"' lock.good >lockstep.lock
ls_run build --locked
assert_eq 2 "$RC" "a lock whose version doesn't match the package"
assert_contains "$ERR" "ls-tools 9.9-9 ($HTTP_URL/pool/main/l/ls-tools/ls-tools_1.0-1_amd64.deb): the package inside is ls-tools 1.0-1, not what the lock names" \
  "the mismatch between lock and package is named"
jq -c '.platform = "linux/arm64"' lock.good >lockstep.lock
ls_run build --locked
assert_eq 1 "$RC" "a lock for another platform"
assert_contains "$ERR" "the lock is for platform linux/arm64, the spec builds linux/amd64; run \`lockstep lock\`" \
  "the platform mismatch is named"
cp lock.good lockstep.lock
pass "a hand-edited lock is caught at build time (package identity, platform)"

# ---- maintainer scripts need a shell and dpkg -------------------------------------------------------
write_spec "ls-scripted"
rm -rf out
ls_run build
assert_eq 2 "$RC" "a package with maintainer scripts in scratch"
assert_contains "$ERR" "ls-scripted" "the package with scripts is named"
[ ! -e out ] || fail "a failed build wrote output"
pass "scripts in an image without /bin/sh and dpkg: a clear error naming the package"

# ls-dpkg brings a shell and dpkg (the host's, packaged by make-repo.sh --with-tools): the scripts
# run in the build sandbox, as `dpkg --configure` after lockstep unpacked the packages itself.
write_spec "ls-dpkg, ls-scripted"
ls_run build
assert_eq 0 "$RC" "build with maintainer scripts: $ERR"
assert_contains "$ERR" "configure packages" "the configure step runs"
digest=$(last_line "$OUT")
manifest=$(jq -r '.manifests[0].digest' out/index.json | cut -d: -f2)
rm -rf root && mkdir root
for layer in $(jq -r '.layers[].digest' out/blobs/sha256/"$manifest" | cut -d: -f2); do
  tar -xzf out/blobs/sha256/"$layer" -C root --exclude='*.wh.*' 2>/dev/null || fail "can't extract a layer"
done
assert_eq "preinst install" "$(cat root/var/lib/ls-scripted/preinst-ran)" "the preinst ran with 'install'"
assert_eq "generated by ls-scripted postinst" "$(cat root/etc/ls-scripted.conf-generated)" "the postinst ran"
status=$(dpkg-query --admindir=root/var/lib/dpkg -W -f='${Package} ${Status}\n' | sort)
assert_eq "ls-dpkg install ok installed
ls-scripted install ok installed" "$status" "dpkg --configure left both packages installed"
[ ! -e root/usr/sbin/policy-rc.d ] || fail "the configure step left policy-rc.d behind"
rm -rf out
LOCKSTEP_CACHE="$WORK/cache5" ls_run build
assert_eq "$digest" "$(last_line "$OUT")" "maintainer scripts give the same digest in a fresh store"
pass "maintainer scripts run in the build sandbox (preinst, dpkg --configure); the result is reproducible"

# ---- a flat repository (Packages and Release beside the .debs), armored keyring -------------------
cat >lockstep.yaml <<YAML
lockstep: 1
name: flat
repos:
  - {apt: $HTTP_URL/flat, flat: true, keyring: repo/keyring.asc}
packages: {apt: [ls-flat]}
outputs: {oci: out}
YAML
rm -f lockstep.lock
ls_run lock
assert_eq 0 "$RC" "lock from a flat repository: $ERR"
assert_eq "ls-flat ls-flat-lib" "$(jq -r '[.artifacts[].name] | join(" ")' lockstep.lock)" "flat: the closure"
assert_eq "$HTTP_URL/flat/$(cd repo/flat && ls ls-flat_*.deb)" \
  "$(jq -r '.artifacts[] | select(.name == "ls-flat") | .url' lockstep.lock)" "flat: URLs are relative to the repository"
rm -rf out
ls_run build --locked
assert_eq 0 "$RC" "build from a flat repository: $ERR"
pass "a flat repository with an armored keyring locks and builds"

# Over an OCI base image that has them installed already, the same packages are nothing to add:
# the lock pins the base's manifest and lists no debs (docs/apt-resolver.md, "Over a base image").
cp -r out base
sed -i 's|^name: flat$|name: flat\nbase: {oci: ./base}|; s|oci: out}|oci: out2}|' lockstep.yaml
rm -f lockstep.lock
ls_run lock
assert_eq 0 "$RC" "lock over a base that has the packages: $ERR"
assert_eq "0" "$(jq '.artifacts | length' lockstep.lock)" "packages the base has installed are not locked again"
assert_eq "$(skopeo inspect --raw oci:base | sha256sum | cut -d' ' -f1)" \
  "$(jq -r '.base.manifest' lockstep.lock | cut -d: -f2)" "the lock pins the base's manifest"
pass "over an OCI base image, what the base has installed counts as installed"

# ---- git sources -----------------------------------------------------------------------------------
git init -q src && git -C src config user.email t@e && git -C src config user.name t
echo one >src/file && git -C src add file && git -C src commit -qm one && git -C src tag v1
write_spec "ls-data" "copy: [{git: ./src, rev: v1, to: /opt/src}]"
ls_run lock
assert_eq 0 "$RC" "lock with a git source: $ERR"
commit=$(git -C src rev-parse v1)
assert_eq "$commit" "$(jq -r '.artifacts[] | select(.kind == "git") | .version' lockstep.lock)" "the lock pins the commit"
echo two >src/file && git -C src commit -qam two && git -C src tag -f v1 >/dev/null 2>&1
rm -rf out
ls_run build --locked
assert_eq 0 "$RC" "build with a git source: $ERR"
manifest=$(jq -r '.manifests[0].digest' out/index.json | cut -d: -f2)
last=$(jq -r '.layers[-1].digest' out/blobs/sha256/"$manifest" | cut -d: -f2)
assert_eq "one" "$(tar -xzOf out/blobs/sha256/"$last" opt/src/file)" "the locked commit is built, not the moved tag"
ls_run lock --update ./src
assert_eq 0 "$RC" "lock --update of the git source: $ERR"
assert_eq "$(git -C src rev-parse v1)" "$(jq -r '.artifacts[] | select(.kind == "git") | .version' lockstep.lock)" \
  "--update moves the git source to the tag's new commit"
pass "git sources are locked to a commit and built from it"
cp lockstep.lock lock.git
jq -c '(.artifacts[] | select(.kind == "git") | .sha256) = "'"$(printf '0%.0s' $(seq 64))"'"' lock.git >lockstep.lock
rm -rf out
LOCKSTEP_CACHE="$WORK/cache-git" ls_run build --locked
assert_eq 2 "$RC" "a git tree that doesn't match the lock's sha256"
assert_contains "$ERR" "the repository content changed under the same commit id; refusing it" "the git mismatch is named"
jq -c 'del(.artifacts[] | select(.kind == "git"))' lock.git >lockstep.lock
ls_run build --locked
assert_eq 1 "$RC" "a lock without the git source's commit"
assert_contains "$ERR" "copy[0]: the lock has no commit for ./src v1; run \`lockstep lock\`" "the missing git pin is named"
cp lock.git lockstep.lock
pass "a git source whose tree or pin doesn't match the lock is refused"

done_testing
