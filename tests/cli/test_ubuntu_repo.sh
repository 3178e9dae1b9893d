#!/usr/bin/env bash
# One apt repository entry with several suites (`suites: [jammy, jammy-updates]`), against the
# hermetic Ubuntu-like archive of tests/fixtures/apt/make-ubuntu-repo.sh served on 127.0.0.1, with
# apt itself as the judge (tests/cli/apt_oracle.sh):
#   - the archive is laid out like Ubuntu's (by-hash, unserved uncompressed Packages, Ubuntu's
#     fields) and built deterministically;
#   - `lockstep lock` reads both suites (each InRelease verified, indexes fetched by hash) and picks
#     what `apt-get -s install` picks: the jammy-updates version where there is one (a phased one
#     included), universe packages depending on main; an identical package in both suites is one;
#   - the lock records each suite's Release (date, digest of the verified text); one suite keeps
#     the lock line it always had;
#   - `build --locked` installs the packages into scratch, and apt, reading the image's dpkg
#     database, has nothing left to install;
#   - a newer package in jammy-updates leaves the lock valid (`lock --check` judges the spec, not
#     the archive) and builds the locked versions; `lock --update NAME` moves it, changing only
#     jammy-updates' Release record, in agreement with apt again; changing `suites` makes the lock
#     stale; a suite the archive lacks is named;
#   - each deb records its suite; `lockstep outdated` says nothing moved right after locking (exit 0)
#     and lists libssl3's newer build in jammy-updates after the archive moved (exit 1, --json).
source "$(dirname "$0")/lib.sh"
# shellcheck source=apt_oracle.sh
source "$LOCKSTEP_SOURCE_DIR/tests/cli/apt_oracle.sh"
need jq gpg gpgv dpkg-deb dpkg-query apt-get python3 sha256sum tar xz

MAKE="$LOCKSTEP_SOURCE_DIR/tests/fixtures/apt/make-ubuntu-repo.sh"
fixture_repo make-ubuntu-repo.sh ubuntu >"$WORK/make.log" 2>&1 || fail "make-ubuntu-repo.sh failed: $(cat "$WORK/make.log")"
U="$WORK/ubuntu"

# ---- the archive ------------------------------------------------------------------------------------
for suite in jammy jammy-updates; do
  gpgv --keyring "$U/keyring.gpg" "$U/dists/$suite/InRelease" 2>/dev/null || fail "gpgv refuses $suite's InRelease"
  grep -qx "Suite: $suite" "$U/dists/$suite/Release" || fail "$suite's Release names its suite"
  grep -qx 'Origin: Ubuntu' "$U/dists/$suite/Release" || fail "$suite's Release: Origin"
  grep -qx 'Acquire-By-Hash: yes' "$U/dists/$suite/Release" || fail "$suite's Release: Acquire-By-Hash"
  ! grep -q '^Valid-Until:' "$U/dists/$suite/Release" || fail "$suite's Release has no Valid-Until, as Ubuntu's"
  for component in main universe; do
    dir="$U/dists/$suite/$component/binary-amd64"
    [ ! -e "$dir/Packages" ] || fail "the uncompressed Packages is listed but not served, as on Ubuntu's archive"
    grep -q " $component/binary-amd64/Packages\$" "$U/dists/$suite/Release" || fail "the Release lists $dir/Packages"
    for f in Packages.gz Packages.xz; do
      [ -f "$dir/by-hash/SHA256/$(sha256sum "$dir/$f" | cut -d' ' -f1)" ] || fail "$dir/$f is under by-hash/"
    done
  done
done
updates_main=$(xz -dc "$U/dists/jammy-updates/main/binary-amd64/Packages.xz")
assert_contains "$updates_main" $'Version: 3.0.2-0ubuntu1.15\n' "jammy-updates has libssl3 1.15"
assert_contains "$updates_main" "Phased-Update-Percentage: 30" "a phased package"
assert_contains "$updates_main" "Original-Maintainer: " "Ubuntu's Original-Maintainer"
assert_contains "$updates_main" "Task: minimal" "the archive's Task"
assert_eq "libnccl2 (= 2.22.3-1+cuda12.4)" \
  "$(dpkg-deb -f "$U/pool/universe/n/nccl/libnccl-dev_2.22.3-1+cuda12.4_amd64.deb" Depends)" \
  "libnccl-dev depends on its own libnccl2 build"
"$MAKE" ubuntu2 >/dev/null 2>&1 || fail "make-ubuntu-repo.sh failed the second time"
listing() { (cd "$1" && find pool dists -type f ! -name InRelease ! -name Release.gpg | LC_ALL=C sort | xargs sha256sum); }
assert_eq "$(listing "$U")" "$(listing "$WORK/ubuntu2")" "two builds give the same .debs, indexes and Release files"
rm -rf "$WORK/ubuntu2"
pass "the archive is laid out like Ubuntu's (by-hash, Ubuntu's fields, signed) and built deterministically"

start_http_server "$U"
apt_oracle_setup "$WORK/apt" \
  "deb [signed-by=$U/keyring.gpg] $HTTP_URL jammy main universe" \
  "deb [signed-by=$U/keyring.gpg] $HTTP_URL jammy-updates main universe"
: >"$WORK/empty-status"
PKGS=(python3.10 nvtop libnccl-dev cuda-cudart-12-4)

write_spec() { # SUITES_KEY [PACKAGES]
  cat >lockstep.yaml <<YAML
lockstep: 1
name: ubuntu
repos:
  - {apt: $HTTP_URL, $1, components: [main, universe], keyring: ubuntu/keyring.gpg}
packages:
  apt: [${2:-python3.10, nvtop, libnccl-dev, cuda-cudart-12-4}]
outputs: {oci: out}
YAML
}
# "name version" of the lock's debs, sorted.
lock_debs() { jq -r '.artifacts[] | select(.kind == "deb") | "\(.name) \(.version)"' "${1:-lockstep.lock}" | LC_ALL=C sort; }
# sha256 and Date of a suite's Release, as the lock records them.
release_of() { # SUITE
  printf '%s %s' "$(sed -n 's/^Date: //p' "$U/dists/$1/Release")" "$(sha256sum <"$U/dists/$1/Release" | cut -d' ' -f1)"
}

# ---- lock ---------------------------------------------------------------------------------------------
write_spec "suites: [jammy, jammy-updates]"
: >"$HTTP_LOG"
ls_run lock
assert_eq 0 "$RC" "lock: $ERR"
expected=$(apt_oracle_install "$WORK/empty-status" "${PKGS[@]}") || fail "apt refuses ${PKGS[*]}"
assert_eq "cuda-cudart-12-4 12.4.127-1
libc6 2.35-0ubuntu3.8
libnccl-dev 2.22.3-1+cuda12.4
libnccl2 2.22.3-1+cuda12.4
libncursesw6 6.3-2
libssl3 3.0.2-0ubuntu1.15
media-types 7.0.0
nvtop 1.2.2-1
python3.10 3.10.12-1~22.04.3
python3.10-minimal 3.10.12-1~22.04.3" "$expected" "apt: jammy-updates wins, the phased libssl3 included"
assert_eq "$expected" "$(lock_debs)" "lockstep locks what apt installs"
assert_eq "0" "$(jq -r '[.artifacts[].repo] | unique | join(",")' lockstep.lock)" "both suites are repository 0"
assert_eq 1 "$(jq '[.artifacts[] | select(.name == "media-types")] | length' lockstep.lock)" \
  "the package both suites list is locked once"
assert_eq "$HTTP_URL/pool/universe/n/nvtop/nvtop_1.2.2-1_amd64.deb" \
  "$(jq -r '.artifacts[] | select(.name == "nvtop") | .url' lockstep.lock)" "the shared pool's URL"
assert_eq "$(sha256sum "$U/pool/main/o/openssl/libssl3_3.0.2-0ubuntu1.15_amd64.deb" | cut -d' ' -f1)" \
  "$(jq -r '.artifacts[] | select(.name == "libssl3") | .sha256' lockstep.lock)" "the phased .deb's sha256"
pass "lock reads both suites and both components and agrees with apt-get -s install"

repo_line=$(grep '"kind":"apt"' lockstep.lock)
assert_eq "{\"kind\":\"apt\",\"url\":\"$HTTP_URL\",\"suites\":[{\"suite\":\"jammy\",\"release-date\":\"Mon, 01 Jan 2024 00:00:00 UTC\",\"release-sha256\":\"$(sha256sum <"$U/dists/jammy/Release" | cut -d' ' -f1)\"},{\"suite\":\"jammy-updates\",\"release-date\":\"Mon, 01 Jan 2024 00:00:00 UTC\",\"release-sha256\":\"$(sha256sum <"$U/dists/jammy-updates/Release" | cut -d' ' -f1)\"}],\"components\":[\"main\",\"universe\"]}" \
  "${repo_line#    }" "the lock's repository line records each suite's Release"
assert_eq '[{"apt":"'"$HTTP_URL"'","components":["main","universe"],"suites":["jammy","jammy-updates"]}]' \
  "$(jq -c .inputs.repos lockstep.lock)" "the lock's inputs name both suites"
for suite in jammy jammy-updates; do
  for component in main universe; do
    grep -q "GET /dists/$suite/$component/binary-amd64/by-hash/SHA256/[0-9a-f]\{64\} HTTP/1.1\" 200" "$HTTP_LOG" ||
      fail "$suite/$component's index is fetched by hash: $(cat "$HTTP_LOG")"
  done
  grep -q "GET /dists/$suite/InRelease HTTP/1.1\" 200" "$HTTP_LOG" || fail "$suite's InRelease is read"
done
! grep -q "binary-amd64/Packages" "$HTTP_LOG" || fail "no index is fetched by name when by-hash is offered"
cp lockstep.lock lock.1
rm lockstep.lock
ls_run lock
assert_eq 0 "$RC" "lock again: $ERR"
cmp -s lock.1 lockstep.lock || fail "locking twice gives different locks: $(diff lock.1 lockstep.lock)"
ls_run lock --check
assert_eq 0 "$RC" "lock --check on a fresh lock: $ERR"
assert_eq "libssl3 jammy-updates|media-types jammy|nvtop jammy" \
  "$(jq -r '[.artifacts[] | select(.name == "libssl3" or .name == "nvtop" or .name == "media-types") | "\(.name) \(.suite)"] | join("|")' lockstep.lock)" \
  "each deb records the suite that listed it (the first of two that list the same one)"
ls_run outdated
assert_eq 0 "$RC" "outdated right after locking: $ERR"
assert_contains "$OUT" "is up to date with its repositories" "nothing is outdated"
cmp -s lock.1 lockstep.lock || fail "outdated writes nothing"
pass "the lock records both suites' Release files and each deb's suite, indexes come by hash, and locking is deterministic"

# One suite, written either way, keeps the lock line a single suite always had.
mkdir -p one/ubuntu
cp ubuntu/keyring.gpg one/ubuntu/
for key in "suite: jammy" "suites: [jammy]"; do
  (cd one && write_spec "$key" "python3.10")
  ls_run lock one/lockstep.yaml
  assert_eq 0 "$RC" "lock with $key: $ERR"
  assert_eq "    {\"kind\":\"apt\",\"url\":\"$HTTP_URL\",\"suite\":\"jammy\",\"components\":[\"main\",\"universe\"],\"release-date\":\"$(release_of jammy | cut -d' ' -f1-6)\",\"release-sha256\":\"$(release_of jammy | cut -d' ' -f7)\"}" \
    "$(grep '"kind":"apt"' one/lockstep.lock)" "$key: the single-suite lock line"
  assert_eq "libc6 2.35-0ubuntu3
libssl3 3.0.2-0ubuntu1
media-types 7.0.0
python3.10 3.10.4-3
python3.10-minimal 3.10.4-3" "$(lock_debs one/lockstep.lock)" "$key: jammy's versions only"
done
pass "one suite (suite: or suites: [one]) is locked as before"

# ---- build ----------------------------------------------------------------------------------------------
ls_run build --locked
assert_eq 0 "$RC" "build --locked: $ERR"
manifest=$(jq -r '.manifests[0].digest' out/index.json | cut -d: -f2)
rm -rf root && mkdir root
for layer in $(jq -r '.layers[].digest' out/blobs/sha256/"$manifest" | cut -d: -f2); do
  tar -xzf out/blobs/sha256/"$layer" -C root --exclude='*.wh.*' 2>/dev/null || fail "can't extract a layer"
done
assert_eq "python3.10-minimal 3.10.12-1~22.04.3 stand-in" "$(cat root/usr/bin/python3.10)" "jammy-updates' python3.10-minimal"
assert_eq "libnccl.so.2.22.3" "$(readlink root/usr/lib/x86_64-linux-gnu/libnccl.so.2)" "jammy-updates' libnccl2"
assert_eq "nvtop 1.2.2-1 stand-in" "$(cat root/usr/bin/nvtop)" "universe's nvtop"
assert_eq "$expected" "$(dpkg-query --admindir=root/var/lib/dpkg -W -f='${Package} ${Version}\n' | LC_ALL=C sort)" \
  "the image's dpkg database has the locked packages"
nothing=$(apt_oracle_install root/var/lib/dpkg/status "${PKGS[@]}") || fail "apt refuses over the image's database"
assert_eq "" "$nothing" "apt, reading the image's dpkg database, has nothing left to install"
pass "build --locked installs both suites' packages, and apt agrees with the image's database"

# ---- the archive moves on ---------------------------------------------------------------------------------
"$MAKE" ubuntu --with-update >"$WORK/make.log" 2>&1 || fail "make-ubuntu-repo.sh --with-update: $(cat "$WORK/make.log")"
assert_eq "$(jq -r '.repos[0].suites[0]."release-sha256"' lock.1)" "$(sha256sum <"$U/dists/jammy/Release" | cut -d' ' -f1)" \
  "the update leaves jammy's Release as it was"
ls_run lock --check
assert_eq 0 "$RC" "lock --check after the archive moved (the lock judges the spec, not the archive): $ERR"
rm -rf out
ls_run build --locked
assert_eq 0 "$RC" "build --locked after the archive moved: $ERR"
pass "a newer package in jammy-updates leaves the lock valid and buildable (its .debs stay in the pool)"

ls_run outdated
assert_eq 1 "$RC" "outdated after the archive moved: $ERR"
assert_contains "$OUT" "libssl3" "outdated names libssl3"
assert_contains "$OUT" "3.0.2-0ubuntu1.15 -> 3.0.2-0ubuntu1.16  jammy-updates" "with both versions and the suite"
ls_run outdated --json
assert_eq 1 "$RC" "outdated --json: $ERR"
assert_eq "1 0 deb libssl3 3.0.2-0ubuntu1.15 3.0.2-0ubuntu1.16 jammy-updates false" \
  "$(jq -r '"\(.outdated) \(.security) " + (.packages[] | "\(.kind) \(.name) \(.locked) \(.available) \(.suite) \(.security)")' <<<"$OUT")" \
  "--json lists the package, not a security update (jammy-updates)"
cmp -s lock.1 lockstep.lock || fail "outdated writes nothing"
pass "outdated lists what the repositories offer over the lock, exit 1, and writes nothing"

apt_oracle_setup "$WORK/apt2" \
  "deb [signed-by=$U/keyring.gpg] $HTTP_URL jammy main universe" \
  "deb [signed-by=$U/keyring.gpg] $HTTP_URL jammy-updates main universe"
expected=$(apt_oracle_install "$WORK/empty-status" "${PKGS[@]}") || fail "apt refuses ${PKGS[*]} after the update"
assert_contains "$expected" "libssl3 3.0.2-0ubuntu1.16" "apt takes the new libssl3"
ls_run lock --update libssl3
assert_eq 0 "$RC" "lock --update libssl3: $ERR"
assert_contains "$ERR" "~ libssl3 3.0.2-0ubuntu1.15 -> 3.0.2-0ubuntu1.16" "--update lists the change"
assert_eq "$expected" "$(lock_debs)" "after --update, lockstep locks what apt installs again"
assert_eq "$(jq -c '.repos[0].suites[0]' lock.1)" "$(jq -c '.repos[0].suites[0]' lockstep.lock)" \
  "jammy's Release record is unchanged"
assert_eq "jammy-updates Tue, 02 Jan 2024 00:00:00 UTC $(sha256sum <"$U/dists/jammy-updates/Release" | cut -d' ' -f1)" \
  "$(jq -r '.repos[0].suites[1] | "\(.suite) \(."release-date") \(."release-sha256")"' lockstep.lock)" \
  "jammy-updates' Release record is the new one"
assert_eq 1 "$(diff <(grep -v '"kind":"apt"' lock.1) <(grep -v '"kind":"apt"' lockstep.lock) | grep -c '^>')" \
  "besides the repository line, only libssl3's line changed"
pass "lock --update moves to jammy-updates' new version and records its new Release"

# ---- the spec changes ----------------------------------------------------------------------------------------
write_spec "suites: [jammy]"
ls_run lock --check
assert_eq 1 "$RC" "lock --check after dropping a suite"
assert_contains "$ERR" "repos: removed {\"apt\":\"$HTTP_URL\",\"components\":[\"main\",\"universe\"],\"suites\":[\"jammy\",\"jammy-updates\"]}" \
  "lock --check names the old entry"
assert_contains "$ERR" "repos: added {\"apt\":\"$HTTP_URL\",\"components\":[\"main\",\"universe\"],\"suite\":\"jammy\"}" \
  "lock --check names the new entry"
write_spec "suites: [jammy, jammy-updates, jammy-backports]"
ls_run lock
assert_eq 3 "$RC" "a suite the archive lacks (not found: an external error)"
assert_contains "$ERR" "$HTTP_URL/dists/jammy-backports/InRelease" "the missing suite's Release is named"
write_spec "suites: [jammy, jammy-updates]"
ls_run lock --check
assert_eq 0 "$RC" "the lock is fresh again for the spec it was made from: $ERR"
pass "changing suites makes the lock stale; a suite the archive lacks is named"

done_testing
