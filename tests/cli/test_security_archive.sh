#!/usr/bin/env bash
# apt's index fetching, exactly (issue 37): the Ubuntu-like archive of
# tests/fixtures/apt/make-ubuntu-repo.sh, changed the way Debian's security archive differs from the
# main archive, served on 127.0.0.1 by a server whose 404s are HTML pages, with apt itself as the
# judge (tests/cli/apt_oracle.sh):
#   - jammy-updates' Release lists a binary-all index in its checksums that is not served at all,
#     while its Architectures has no `all` (as bookworm-security's): lockstep doesn't ask for it,
#     as apt doesn't;
#   - one by-hash copy is missing: the index is fetched by its name instead, as apt falls back;
#   - apt-get update and `apt-get -s install` accept the archive, and the lock agrees with apt;
#   - two entries (as the main and the security archive are) choose by version at apt's default
#     priority, and `priority: 1001` makes one win, each as apt with the same pins;
#   - a Release that lies about an index's hash is exit 2 and no lock is written; a platform the
#     Releases don't list is skipped with a warning naming it, as apt skips it.
source "$(dirname "$0")/lib.sh"
# shellcheck source=apt_oracle.sh
source "$LOCKSTEP_SOURCE_DIR/tests/cli/apt_oracle.sh"
need jq gpg gpgv apt-get python3 sha256sum xz

fixture_repo make-ubuntu-repo.sh ubuntu >"$WORK/make.log" 2>&1 || fail "make-ubuntu-repo.sh failed: $(cat "$WORK/make.log")"
S="$WORK/sec"
cp -a "$WORK/ubuntu" "$S"
export GNUPGHOME="$WORK/gnupg"
mkdir -m 0700 "$GNUPGHOME"
gpg_() { gpg --batch --quiet --yes --pinentry-mode loopback --passphrase '' "$@"; }
gpg_ --import "$S/.signing-key.asc" 2>/dev/null
resign() { # SUITE
  rm -f "$S/dists/$1/InRelease" "$S/dists/$1/Release.gpg"
  gpg_ --digest-algo SHA512 --clearsign --output "$S/dists/$1/InRelease" "$S/dists/$1/Release"
}
# A binary-all index in the checksums (never served) and Architectures without `all`.
grep -qx 'Architectures: amd64' "$S/dists/jammy-updates/Release" || fail "the fixture's Architectures"
printf 'Package: ghost\n' | xz -c >"$WORK/all.xz"
sed -i "/^Acquire-By-Hash: yes/i \\ $(sha256sum <"$WORK/all.xz" | cut -d' ' -f1) $(stat -c %s "$WORK/all.xz") main/binary-all/Packages.xz" \
  "$S/dists/jammy-updates/Release"
grep -q ' main/binary-all/Packages.xz$' "$S/dists/jammy-updates/Release" || fail "binary-all added to the checksums"
resign jammy-updates
# A by-hash copy the mirror lacks.
universe=$S/dists/jammy-updates/universe/binary-amd64
for f in Packages.xz Packages.gz; do
  rm "$universe/by-hash/SHA256/$(sha256sum "$universe/$f" | cut -d' ' -f1)"
done

start_http_server "$S"
apt_oracle_setup "$WORK/apt" \
  "deb [signed-by=$S/keyring.gpg] $HTTP_URL jammy main universe" \
  "deb [signed-by=$S/keyring.gpg] $HTTP_URL jammy-updates main universe"
pass "apt-get update accepts the archive: no binary-all asked for, the missing by-hash copy fetched by name"

cp "$S/keyring.gpg" keyring.gpg
cat >lockstep.yaml <<YAML
lockstep: 1
name: security
repos:
  - {apt: $HTTP_URL, suites: [jammy, jammy-updates], components: [main, universe], keyring: keyring.gpg}
packages:
  apt: [python3.10, nvtop, libnccl-dev]
YAML
: >"$WORK/empty-status"
: >"$HTTP_LOG"
ls_run lock
assert_eq 0 "$RC" "lock: $ERR"
expected=$(apt_oracle_install "$WORK/empty-status" python3.10 nvtop libnccl-dev) || fail "apt refuses the packages"
assert_eq "$expected" "$(jq -r '.artifacts[] | select(.kind == "deb") | "\(.name) \(.version)"' lockstep.lock | LC_ALL=C sort)" \
  "lockstep locks what apt installs"
! grep -q "binary-all" "$HTTP_LOG" || fail "no binary-all index is asked for: $(grep binary-all "$HTTP_LOG")"
assert_contains "$(cat "$HTTP_LOG")" "GET /dists/jammy-updates/universe/binary-amd64/Packages.xz HTTP/1.1\" 200" \
  "the index whose by-hash copy is missing is fetched by name"
grep -q "GET /dists/jammy-updates/universe/binary-amd64/by-hash/SHA256/[0-9a-f]\{64\} HTTP/1.1\" 404" "$HTTP_LOG" ||
  fail "after the by-hash 404: $(cat "$HTTP_LOG")"
pass "lock reads the indexes apt reads, falls back from a by-hash miss, and agrees with apt"

# ---- priorities between entries, as apt's pins -------------------------------------------------------
# Two entries, as Debian's standard sources are two (the main archive, the security archive at its
# own URL, here the same archive served again under /debian-security): at apt's default priority
# the newer build wins wherever it is; `priority: 1001` makes an entry win.
ln -s . "$S/debian-security"
two_entries() { # PRIORITY-OF-JAMMY-YAML
  cat >lockstep.yaml <<YAML
lockstep: 1
name: security
repos:
  - {apt: $HTTP_URL, suite: jammy, components: [main, universe], keyring: keyring.gpg$1}
  - {apt: $HTTP_URL/debian-security, suite: jammy-updates, components: [main, universe], keyring: keyring.gpg}
packages:
  apt: [python3.10, nvtop, libnccl-dev]
YAML
}
two_entries ""
rm lockstep.lock
ls_run lock
assert_eq 0 "$RC" "lock two entries: $ERR"
assert_eq "$expected" "$(jq -r '.artifacts[] | select(.kind == "deb") | "\(.name) \(.version)"' lockstep.lock | LC_ALL=C sort)" \
  "two entries of equal priority lock what apt installs: the newer builds of the second"
assert_contains "$expected" "libssl3 3.0.2-0ubuntu1.15" "(jammy-updates' libssl3)"
assert_eq "$HTTP_URL/debian-security/pool/main/o/openssl/libssl3_3.0.2-0ubuntu1.15_amd64.deb" \
  "$(jq -r '.artifacts[] | select(.name == "libssl3") | .url' lockstep.lock)" "from the second entry's URL"
two_entries ", priority: 1001"
ls_run lock --update
assert_eq 0 "$RC" "lock with priority 1001: $ERR"
printf 'Package: *\nPin: release a=jammy\nPin-Priority: 1001\n' >"$WORK/apt/etc/preferences"
pinned=$(apt_oracle_install "$WORK/empty-status" python3.10 nvtop libnccl-dev) || fail "apt refuses the pinned install"
: >"$WORK/apt/etc/preferences"
assert_eq "$pinned" "$(jq -r '.artifacts[] | select(.kind == "deb") | "\(.name) \(.version)"' lockstep.lock | LC_ALL=C sort)" \
  "priority: 1001 locks what apt installs with that pin"
assert_not_contains "$pinned" "libssl3 3.0.2-0ubuntu1.15" "(jammy's older libssl3 wins)"
pass "entries choose among their versions as apt's pin priorities do: equal by version, 1001 wins"

# ---- bad input ------------------------------------------------------------------------------------
rm lockstep.lock
main=$S/dists/jammy/main/binary-amd64
real=$(sha256sum "$main/Packages.xz" | cut -d' ' -f1)
sed -i "s/^ $real / $(printf 'other' | sha256sum | cut -d' ' -f1) /" "$S/dists/jammy/Release"
resign jammy
export LOCKSTEP_STORE="$WORK/store-lie"
ls_run lock
assert_eq 2 "$RC" "a Release that lies about an index's hash: $ERR"
assert_contains "$ERR" "main/binary-amd64/Packages" "the index is named"
[ ! -e lockstep.lock ] || fail "no lock is written"
pass "a Release that lies about a hash is exit 2, and no lock is written"

sed -i "s/^ $(printf 'other' | sha256sum | cut -d' ' -f1) / $real /" "$S/dists/jammy/Release"
resign jammy
printf 'platform: linux/arm64\n' >>lockstep.yaml
ls_run lock
assert_contains "$ERR" "skipping the indexes of jammy: its Release lists architectures amd64, not arm64" \
  "a suite without the platform's architecture is skipped, saying so, as apt skips it"
assert_eq 2 "$RC" "and the packages are then not found: $ERR"
pass "a suite without the image's architecture is skipped as apt skips it"

done_testing
